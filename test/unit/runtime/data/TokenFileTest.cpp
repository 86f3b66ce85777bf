//===- TokenFileTest.cpp - llm.c token files: round trip and bad files ----===//

#include "DataTestUtils.h"

#include "runtime/data/FileIO.h"
#include "runtime/data/TokenFile.h"

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;

namespace {

/// A token file's bytes with an arbitrary header and payload.
std::string rawFile(int32_t magic, int32_t version, int32_t count,
                    const std::vector<uint16_t> &tokens) {
  std::string s(kTokenFileHeaderBytes, '\0');
  auto put = [&](size_t at, int32_t v) {
    for (int i = 0; i < 4; ++i)
      s[at + i] = static_cast<char>((uint32_t(v) >> (8 * i)) & 0xFF);
  };
  put(0, magic);
  put(4, version);
  put(8, count);
  for (uint16_t t : tokens) {
    s += static_cast<char>(t & 0xFF);
    s += static_cast<char>(t >> 8);
  }
  return s;
}

std::string parseError(const std::string &contents, int64_t vocabSize = 0) {
  StatusOr<std::vector<uint16_t>> r = parseTokenFile(contents, vocabSize);
  EXPECT_FALSE(r);
  return r ? "" : r.status().message();
}

TEST(TokenFileTest, RoundTrip) {
  std::vector<int32_t> ids = {50256, 0, 1, 65535, 15496, 995};
  std::string path = tempPath("roundtrip.bin");
  ASSERT_TRUE(writeTokenFile(path, ids));
  StatusOr<std::vector<uint16_t>> back = readTokenFile(path, 0);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(std::vector<int32_t>(back->begin(), back->end()), ids);
  // Byte for byte the llm.c layout.
  StatusOr<std::string> bytes = readFile(path);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, rawFile(20240520, 1, 6, {50256, 0, 1, 65535, 15496, 995}));
}

TEST(TokenFileTest, EmptyFileRoundTrips) {
  std::string path = tempPath("empty.bin");
  ASSERT_TRUE(writeTokenFile(path, {}));
  StatusOr<std::vector<uint16_t>> back = readTokenFile(path);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->empty());
}

TEST(TokenFileTest, BadFiles) {
  EXPECT_EQ(parseError(std::string(100, '\0')),
            "too short for the 1024-byte header (100 bytes)");
  EXPECT_EQ(parseError(rawFile(123, 1, 0, {})),
            "bad magic 123, expected 20240520 (llm.c GPT-2 token file)");
  EXPECT_EQ(parseError(rawFile(20240801, 7, 0, {})),
            "bad magic 20240801, expected 20240520 (llm.c GPT-2 token file); this is a "
            "llama-3 token file (uint32 tokens), not a GPT-2 one");
  EXPECT_EQ(parseError(rawFile(20240326, 3, 0, {})),
            "bad magic 20240326, expected 20240520 (llm.c GPT-2 token file); this is an "
            "llm.c model checkpoint");
  EXPECT_EQ(parseError(rawFile(20240520, 2, 0, {})), "unsupported version 2, expected 1");
  EXPECT_EQ(parseError(rawFile(20240520, 1, -1, {})), "negative token count -1 in the header");
  EXPECT_EQ(parseError(rawFile(20240520, 1, 3, {1, 2})),
            "the header says 3 tokens (1030 bytes) but the file has 1028 bytes");
  EXPECT_EQ(parseError(rawFile(20240520, 1, 1, {1, 2})),
            "the header says 1 tokens (1026 bytes) but the file has 1028 bytes");
  EXPECT_EQ(parseError(rawFile(20240520, 1, 2, {1, 2}) + "x"),
            "the header says 2 tokens (1028 bytes) but the file has 1029 bytes");
  EXPECT_EQ(parseError(rawFile(20240520, 1, 3, {1, 50257, 2}), 50257),
            "token 50257 at index 1 is outside the vocabulary (size 50257)");
  EXPECT_TRUE(parseTokenFile(rawFile(20240520, 1, 3, {1, 50256, 2}), 50257));
}

TEST(TokenFileTest, ErrorsNameTheFile) {
  std::string path = tempPath("bad-magic.bin");
  ASSERT_TRUE(writeFile(path, rawFile(7, 1, 0, {})));
  StatusOr<std::vector<uint16_t>> r = readTokenFile(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path + ": bad magic 7, expected 20240520 (llm.c GPT-2 token file)");
  r = readTokenFile(tempPath("missing.bin"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), tempPath("missing.bin") + ": No such file or directory");
  // Read whole, /dev/zero ended in std::bad_alloc.
  r = readTokenFile("/dev/zero");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "/dev/zero: is a device, not a file");
}

TEST(TokenFileTest, WriteRejectsIdsOutsideUint16) {
  StatusOr<std::string> r = serializeTokenFile({1, 65536});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "token 65536 at index 1 does not fit uint16");
  Status s = writeTokenFile(tempPath("neg.bin"), {-1});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), tempPath("neg.bin") + ": token -1 at index 0 does not fit uint16");
  s = writeTokenFile("/nonexistent/dir/x.bin", {1});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "/nonexistent/dir/x.bin: cannot create a temporary file in "
                         "/nonexistent/dir: No such file or directory");
}

} // namespace
