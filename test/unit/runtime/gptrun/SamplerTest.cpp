//===- SamplerTest.cpp - top-k / temperature sampling and the window ------===//

#include "tools/gptrun/Sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace gptc;
using namespace gptc::gptrun;

namespace {

int32_t draw(const std::vector<float> &logits, int64_t vocab, double temperature, int64_t topK,
             double u) {
  StatusOr<int32_t> id = sampleToken(logits.data(), vocab, {temperature, topK}, u);
  EXPECT_TRUE(id) << id.status().message();
  return id ? *id : -1;
}

// Verify that temperature 0 and top-k 1 are greedy whatever the draw, and
// that a tie goes to the lower id.
TEST(SamplerTest, GreedyPicksTheLargestLogit) {
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  for (double u : {0.0, 0.5, 0.999}) {
    EXPECT_EQ(draw(logits, 5, 0.0, 40, u), 1);
    EXPECT_EQ(draw(logits, 5, 1.0, 1, u), 1);
  }
}

// Verify the inverse CDF over softmax(logits / T): with logits log(1),
// log(2), log(3), log(4) at T = 1 the probabilities are 0.1 .. 0.4, taken
// in descending order (ids 3, 2, 1, 0).
TEST(SamplerTest, InverseCdfFollowsTheSoftmax) {
  std::vector<float> logits = {std::log(1.f), std::log(2.f), std::log(3.f), std::log(4.f)};
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.00), 3);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.39), 3);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.41), 2);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.69), 2);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.71), 1);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.89), 1);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.91), 0);
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.9999), 0);
}

// Verify that the temperature divides the logits: at T = 0.5 the weights
// are squared (1, 4, 9, 16)/30, so u = 0.5 falls on id 3 (16/30 > 0.5),
// where at T = 1 it falls on id 2.
TEST(SamplerTest, TemperatureSharpens) {
  std::vector<float> logits = {std::log(1.f), std::log(2.f), std::log(3.f), std::log(4.f)};
  EXPECT_EQ(draw(logits, 4, 1.0, 0, 0.5), 2);
  EXPECT_EQ(draw(logits, 4, 0.5, 0, 0.5), 3);
  EXPECT_EQ(draw(logits, 4, 0.5, 0, 0.54), 2);
}

// Verify that top-k renormalises over the k largest only: with k = 2 the
// weights are 4/7 and 3/7, and nothing outside ids 3 and 2 is ever drawn.
TEST(SamplerTest, TopKKeepsTheLargest) {
  std::vector<float> logits = {std::log(1.f), std::log(2.f), std::log(3.f), std::log(4.f)};
  EXPECT_EQ(draw(logits, 4, 1.0, 2, 0.56), 3);
  EXPECT_EQ(draw(logits, 4, 1.0, 2, 0.58), 2);
  EXPECT_EQ(draw(logits, 4, 1.0, 2, 0.9999), 2);
  for (int i = 0; i < 100; ++i) {
    int32_t id = draw(logits, 4, 1.0, 2, i / 100.0);
    EXPECT_TRUE(id == 2 || id == 3) << id;
  }
  // k larger than the vocabulary: all of it.
  EXPECT_EQ(draw(logits, 4, 1.0, 100, 0.95), 0);
}

// Verify that the padded columns past `vocab` are never drawn, even when
// their logits are the largest (or not finite).
TEST(SamplerTest, NeverDrawsThePadding) {
  std::vector<float> logits = {0.f, 1.f, 2.f, 100.f, NAN};
  for (int i = 0; i < 50; ++i) {
    int32_t id = draw(logits, 3, 1.0, 0, i / 50.0);
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 3);
  }
  EXPECT_EQ(draw(logits, 3, 0.0, 0, 0.5), 2);
}

// Verify that a non-finite logit inside the vocabulary is an error naming it.
TEST(SamplerTest, RejectsNonFiniteLogits) {
  std::vector<float> logits = {0.f, INFINITY, 1.f};
  StatusOr<int32_t> id = sampleToken(logits.data(), 3, {}, 0.5);
  ASSERT_FALSE(id);
  EXPECT_NE(id.status().message().find("logit of token 1"), std::string::npos)
      << id.status().message();
}

// Verify that a seed fixes the uniform sequence, values lie in [0, 1), and
// other seeds give other sequences; the draws are roughly uniform.
TEST(SamplerTest, UniformSourceIsSeeded) {
  UniformSource a(7), b(7), c(8);
  bool differs = false;
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    double x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    sum += x;
  }
  EXPECT_TRUE(differs);
  EXPECT_NEAR(sum / 1000, 0.5, 0.05);
}

// Verify that sampled frequencies follow the distribution (top-k 3 of
// weights 1, 2, 3, 4 -> 2/9, 3/9, 4/9).
TEST(SamplerTest, FrequenciesMatchTheDistribution) {
  std::vector<float> logits = {std::log(1.f), std::log(2.f), std::log(3.f), std::log(4.f)};
  UniformSource u(1);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    ++counts[draw(logits, 4, 1.0, 3, u.next())];
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_NEAR(counts[1] / double(n), 2.0 / 9, 0.01);
  EXPECT_NEAR(counts[2] / double(n), 3.0 / 9, 0.01);
  EXPECT_NEAR(counts[3] / double(n), 4.0 / 9, 0.01);
}

// Verify the window: everything while it fits, then the last `seq` tokens.
TEST(SamplerTest, WindowSlidesOnceFull) {
  Window w = contextWindow(3, 8);
  EXPECT_EQ(w.begin, 0u);
  EXPECT_EQ(w.length, 3u);
  w = contextWindow(8, 8);
  EXPECT_EQ(w.begin, 0u);
  EXPECT_EQ(w.length, 8u);
  w = contextWindow(11, 8);
  EXPECT_EQ(w.begin, 3u);
  EXPECT_EQ(w.length, 8u);
}

// Verify the batch: the window in row 0 from position 0, padding elsewhere.
TEST(SamplerTest, WindowBatchPutsTheTextInRowZero) {
  std::vector<int32_t> tokens = {10, 11, 12, 13, 14};
  std::vector<int32_t> batch = windowBatch(tokens, contextWindow(tokens.size(), 3), 2, 3, -1);
  EXPECT_EQ(batch, (std::vector<int32_t>{12, 13, 14, -1, -1, -1}));
  batch = windowBatch(tokens, contextWindow(2, 4), 2, 4, 0);
  EXPECT_EQ(batch, (std::vector<int32_t>{10, 11, 0, 0, 0, 0, 0, 0}));
}

} // namespace
