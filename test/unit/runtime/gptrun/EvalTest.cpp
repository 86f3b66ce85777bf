//===- EvalTest.cpp - gptrun --eval's loader, packing and scorer ----------===//

#include "tools/gptrun/Eval.h"

#include "runtime/support/FileIO.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gptc;
using namespace gptc::gptrun;

namespace {

#define EXPECT_HAS(haystack, needle)                                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(EvalTest, PacksTheEndingWholeAndDropsContextFromTheLeft) {
  StatusOr<Row> r = packRow({1, 2, 3}, {7, 8}, 8);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 2, 3, 7, 8}));
  EXPECT_EQ(r->endingStart, 3u);
  EXPECT_FALSE(r->truncated);
  r = packRow({1, 2, 3, 4, 5}, {7, 8}, 4);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{4, 5, 7, 8}));
  EXPECT_EQ(r->endingStart, 2u);
  EXPECT_TRUE(r->truncated);
  StatusOr<Row> tooLong = packRow({1}, {7, 8, 9, 10}, 4);
  ASSERT_FALSE(tooLong);
  EXPECT_HAS(tooLong.status().message(), "an ending of 4 tokens does not fit T=4");
}

TEST(EvalTest, ScoresOnlyTheEndingsTokensFromThePositionsBefore) {
  // 3 positions, vocabulary 2 padded to 4; the padding columns must not count.
  Row row{{0, 1, 0}, 1, false};
  const float logits[] = {0.0f, std::log(3.0f), 99, 99,  // predicts token 1: p = 3/4
                          std::log(1.0f), 0.0f, 99, 99,  // predicts token 0: p = 1/2
                          5, 5, 5, 5};                    // the last position predicts nothing
  EndingLoss l = endingLoss(logits, 4, 2, row);
  EXPECT_EQ(l.tokens, 2);
  EXPECT_NEAR(l.sum, -std::log(0.75) - std::log(0.5), 1e-6);
  EXPECT_NEAR(l.mean(), l.sum / 2, 1e-12);
}

class EvalLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    StatusOr<data::Tokenizer> t = data::Tokenizer::load(GPTC_DATA_DIR "/gpt2");
    ASSERT_TRUE(t) << t.status().message();
    tokenizer.emplace(std::move(*t));
  }
  std::string write(const std::string &text) {
    std::string p = (dir.path() / "hs.jsonl").string();
    EXPECT_TRUE(writeFileAtomically(p, text));
    return p;
  }
  std::string error(const std::string &text) {
    auto r = loadMultipleChoice(write(text), *tokenizer);
    EXPECT_FALSE(r);
    return r ? "" : r.status().message();
  }
  std::optional<data::Tokenizer> tokenizer;
  gptc::testing::ScratchDir dir{"eval"};
};

TEST_F(EvalLoaderTest, ReadsHellaSwagLines) {
  auto r = loadMultipleChoice(
      write(R"({"ind": 4, "ctx": "The cat", "endings": ["sat.", "ran", "a", "b"], "label": 1, "split": "val"})"
            "\n\n"
            R"({"ctx": "Hi", "endings": ["x", "y"], "label": 0})"
            "\n"),
      *tokenizer);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].context, tokenizer->encode("The cat"));
  EXPECT_EQ((*r)[0].endings[0], tokenizer->encode(" sat.")); // after a space
  EXPECT_EQ((*r)[0].label, 1);
  EXPECT_EQ((*r)[1].endings.size(), 2u);
  auto first = loadMultipleChoice(dir.path().string() + "/hs.jsonl", *tokenizer, 1);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->size(), 1u);
}

TEST_F(EvalLoaderTest, ErrorsNameTheLine) {
  EXPECT_HAS(error("\n{\"ctx\": 1}"), "hs.jsonl:2: no \"ctx\" string");
  EXPECT_HAS(error(R"({"ctx": "a", "endings": ["x"], "label": 0})"), ":1: no \"endings\" list");
  EXPECT_HAS(error(R"({"ctx": "a", "endings": ["x", "y"], "label": 2})"), "\"label\" is not the index");
  EXPECT_HAS(error(R"({"ctx": "a", "endings": ["x", 3], "label": 0})"), "an ending is not a string");
  EXPECT_HAS(error("{\"ctx\": "), "hs.jsonl:1: line 1, column 9");
  EXPECT_HAS(error(""), "no examples");
}

} // namespace
