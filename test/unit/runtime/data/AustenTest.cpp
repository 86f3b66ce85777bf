//===- AustenTest.cpp - the janeaustenr reader and the Austen token files -===//
//
// Synthetic .rdb files, built here with zlib, cover the R serialization
// reader and its errors; the real token files from scripts/setup.sh must
// have the counts measured in shared/notes/data.md.
//
//===----------------------------------------------------------------------===//

#include "DataTestUtils.h"

#include "runtime/data/Austen.h"
#include "runtime/data/TokenFile.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

using namespace gptc;
using namespace gptc::data;

namespace {

void putInt(std::string &s, int32_t v) {
  for (int i = 3; i >= 0; --i)
    s += static_cast<char>((uint32_t(v) >> (8 * i)) & 0xFF);
}

/// An R (version 3, XDR) serialization of a character vector. A string of
/// `na` is written as NA; `latin1` marks every string Latin-1.
std::string serializeStrings(const std::vector<std::string> &strings, int type = 16,
                             bool latin1 = false, const std::string &na = "\x01NA") {
  std::string s = "X\n";
  putInt(s, 3);
  putInt(s, 0x040201);
  putInt(s, 0x030500);
  putInt(s, 5);
  s += "UTF-8";
  putInt(s, type);
  putInt(s, static_cast<int32_t>(strings.size()));
  for (const std::string &str : strings) {
    putInt(s, 9 | (latin1 ? (4 << 12) : (64 << 12)));
    if (str == na) {
      putInt(s, -1);
      continue;
    }
    putInt(s, static_cast<int32_t>(str.size()));
    s += str;
  }
  return s;
}

/// One .rdb record: [uint32 BE length][zlib stream].
std::string record(const std::string &payload) {
  uLongf size = compressBound(payload.size());
  std::string z(size, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef *>(z.data()), &size,
                     reinterpret_cast<const Bytef *>(payload.data()), payload.size()),
            Z_OK);
  z.resize(size);
  std::string out;
  putInt(out, static_cast<int32_t>(payload.size()));
  return out + z;
}

std::string sixNovels(const std::string &fourthTitle = "Persuasion") {
  std::string rdb;
  for (const char *title : {"EMMA", "MANSFIELD PARK", "NORTHANGER ABBEY", fourthTitle.c_str(),
                            "PRIDE AND PREJUDICE", "SENSE AND SENSIBILITY"})
    rdb += record(serializeStrings({title, "", "Chapter 1", "It was."}));
  return rdb;
}

std::string rdbError(const std::string &rdb) {
  StatusOr<std::vector<RStringVector>> r = parseRdbStringVectors(rdb);
  EXPECT_FALSE(r);
  return r ? "" : r.status().message();
}

TEST(AustenTest, ReadsStringVectors) {
  std::string rdb = record(serializeStrings({"a", "", "b c"})) +
                    record(serializeStrings({"caf\xE9"}, 16, /*latin1=*/true));
  StatusOr<std::vector<RStringVector>> r = parseRdbStringVectors(rdb);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], (RStringVector{"a", "", "b c"}));
  EXPECT_EQ((*r)[1], (RStringVector{"caf\xC3\xA9"})); // Latin-1 -> UTF-8
}

TEST(AustenTest, RdbErrors) {
  std::string good = record(serializeStrings({"a"}));
  EXPECT_EQ(rdbError(""), "no records");
  EXPECT_EQ(rdbError(good + "\x01"), "record 1 (offset " + std::to_string(good.size()) +
                                         "): truncated length prefix");
  EXPECT_EQ(rdbError(good.substr(0, good.size() - 3)),
            "record 0 (offset 0): truncated zlib stream (40 of 40 bytes)");
  std::string garbage = good.substr(0, 4) + std::string(20, 'x');
  EXPECT_EQ(rdbError(garbage),
            "record 0 (offset 0): bad zlib stream (incorrect header check)");
  std::string shortLength = good;
  shortLength[3] = static_cast<char>(shortLength[3] - 1);
  EXPECT_EQ(rdbError(shortLength),
            "record 0 (offset 0): the zlib stream is longer than its declared " +
                std::to_string(uint8_t(shortLength[3])) + " bytes");
  EXPECT_EQ(rdbError(record("A\n" + serializeStrings({"a"}).substr(2))),
            "record 0 (offset 0): not an XDR R serialization (expected \"X\\n\") at byte 2");
  EXPECT_EQ(rdbError(record(serializeStrings({"a"}, /*type=*/19))),
            "record 0 (offset 0): R object of type 19, not a character vector (16) at byte 27");
  EXPECT_EQ(rdbError(record(serializeStrings({"a", "\x01NA"}))),
            "record 0 (offset 0): element 1 is NA at byte 48");
  std::string truncated = serializeStrings({"abc"});
  EXPECT_EQ(rdbError(record(truncated.substr(0, truncated.size() - 1))),
            "record 0 (offset 0): truncated R serialization at byte 39");
}

TEST(AustenTest, RecognisesTheNovels) {
  StatusOr<std::vector<Novel>> novels = parseAustenNovels(sixNovels());
  ASSERT_TRUE(novels) << novels.status().message();
  ASSERT_EQ(novels->size(), 6u);
  EXPECT_EQ((*novels)[0].title, "Emma");
  EXPECT_EQ((*novels)[3].title, "Persuasion");
  EXPECT_EQ((*novels)[5].title, "Sense and Sensibility");
  EXPECT_EQ((*novels)[0].lines, 4u);
  EXPECT_EQ((*novels)[0].text, "EMMA\n\nChapter 1\nIt was.\n");

  novels = parseAustenNovels(sixNovels("The Watsons"));
  ASSERT_FALSE(novels);
  EXPECT_EQ(novels.status().message(), "record 3 starts with \"The Watsons\", not a known title");
  novels = parseAustenNovels(sixNovels("Emma"));
  ASSERT_FALSE(novels);
  EXPECT_EQ(novels.status().message(), "\"Emma\" appears twice");
  novels = parseAustenNovels(record(serializeStrings({"EMMA"})));
  ASSERT_FALSE(novels);
  EXPECT_EQ(novels.status().message(), "1 records, expected the 6 novels");
  novels = readAustenNovels("/nonexistent/Rdata.rdb");
  ASSERT_FALSE(novels);
  EXPECT_EQ(novels.status().message(), "/nonexistent/Rdata.rdb: No such file or directory");
}

// Verify the token files scripts/setup.sh builds against data.md's counts.
TEST(AustenTest, TokenFilesHaveTheMeasuredCounts) {
  const std::string train = GPTC_DATA_DIR "/austen_train.bin",
                    val = GPTC_DATA_DIR "/austen_val.bin";
  if (!std::filesystem::exists(train) || !std::filesystem::exists(val))
    GTEST_SKIP() << "no " << train << " / " << val
                 << "; scripts/setup.sh builds them with gpt-data austen";
  for (auto [path, count, documents] :
       {std::tuple{train, 878254u, 5u}, std::tuple{val, 115080u, 1u}}) {
    StatusOr<std::vector<uint16_t>> tokens = readTokenFile(path, 50257);
    ASSERT_TRUE(tokens) << tokens.status().message();
    EXPECT_EQ(tokens->size(), count) << path;
    EXPECT_EQ(tokens->front(), 50256) << path;
    EXPECT_EQ(size_t(std::count(tokens->begin(), tokens->end(), 50256)), documents) << path;
    EXPECT_EQ(std::filesystem::file_size(path), 1024 + 2 * count);
  }
}

} // namespace
