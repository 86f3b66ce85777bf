//===- SafetensorsTest.cpp - the safetensors reader and writer ------------===//

#include "runtime/checkpoint/Safetensors.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

using namespace gptc;
using namespace gptc::safetensors;

namespace {

std::vector<uint8_t> header(const std::string &json) {
  std::string s(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    s[size_t(i)] = char(uint8_t(n >> (8 * i)));
  s += json;
  return std::vector<uint8_t>(s.begin(), s.end());
}

/// A header and `dataBytes` bytes of data (0, 1, 2, ...).
std::vector<uint8_t> file(const std::string &json, size_t dataBytes) {
  std::vector<uint8_t> out = header(json);
  for (size_t i = 0; i < dataBytes; ++i)
    out.push_back(uint8_t(i));
  return out;
}

std::string errorOf(std::vector<uint8_t> bytes) {
  StatusOr<File> f = File::parse(std::move(bytes), "m.safetensors");
  EXPECT_FALSE(f) << "accepted";
  return f ? "" : f.status().message();
}

#define EXPECT_HAS(haystack, needle)                                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const std::vector<float> kA = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
const std::vector<uint16_t> kB = {0x3F80, 0xC000, 0x7F80};

std::vector<TensorRef> refs() {
  // Unsorted on purpose: the writer sorts by name.
  return {{"z.bias", DType::BF16, {3}, kB.data(), kB.size() * 2},
          {"a.weight", DType::F32, {2, 3}, kA.data(), kA.size() * 4},
          {"empty", DType::F16, {0, 4}, nullptr, 0}};
}

TEST(SafetensorsTest, RoundTripsByteExactly) {
  StatusOr<std::vector<uint8_t>> bytes = serialize(refs(), {{"format", "pt"}});
  ASSERT_TRUE(bytes) << bytes.status().message();
  // The header is padded with spaces to a multiple of 8.
  uint64_t n;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string json(bytes->begin() + 8, bytes->begin() + 8 + long(n));
  EXPECT_EQ(json.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"a.weight\":{\"dtype\":\"F32\","
                       "\"shape\":[2,3],\"data_offsets\":[0,24]},\"empty\":",
                       0),
            0u)
      << json;

  StatusOr<File> f = File::parse(*bytes, "m.safetensors");
  ASSERT_TRUE(f) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const TensorView *a = f->find("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(a->data, kA.data(), 24), 0);
  const TensorView *b = f->find("z.bias");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dtype, DType::BF16);
  EXPECT_EQ(std::memcmp(b->data, kB.data(), 6), 0);
  EXPECT_EQ(f->find("empty")->size, 0u);

  // Read back and written again: the same bytes.
  std::vector<TensorRef> again;
  for (const TensorView &t : f->tensors())
    again.push_back({t.name, t.dtype, t.shape, t.data, t.size});
  StatusOr<std::vector<uint8_t>> second = serialize(again, f->metadata());
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, *bytes);
}

TEST(SafetensorsTest, WritesAtomicallyAndReadsTheFile) {
  gptc::testing::ScratchDir dir("safetensors");
  std::string path = (dir.path() / "m.safetensors").string();
  ASSERT_TRUE(write(path, refs(), {}));
  StatusOr<File> f = File::read(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->tensors().front().name, "a.weight"); // data order = name order
  EXPECT_TRUE(f->metadata().empty());
  // Nothing else is left in the directory (no temporary).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(SafetensorsTest, WriterRefusesASizeThatIsNotTheShapes) {
  std::vector<TensorRef> bad = {{"w", DType::F32, {2, 3}, kA.data(), 20}};
  StatusOr<std::vector<uint8_t>> r = serialize(bad, {});
  ASSERT_FALSE(r);
  EXPECT_HAS(r.status().message(), "tensor 'w' has 20 bytes, its shape [2, 3] needs 24");
  std::vector<TensorRef> dup = {{"w", DType::F32, {1}, kA.data(), 4},
                                {"w", DType::F32, {1}, kA.data(), 4}};
  EXPECT_FALSE(serialize(dup, {}));
}

TEST(SafetensorsTest, RefusesFilesThatAreNotRegular) {
  gptc::testing::ScratchDir dir("safetensors");
  StatusOr<File> d = File::read(dir.path().string());
  ASSERT_FALSE(d);
  EXPECT_HAS(d.status().message(), "is a directory");
  // Never read whole: it has no end.
  StatusOr<File> z = File::read("/dev/zero");
  ASSERT_FALSE(z);
  EXPECT_HAS(z.status().message(), "/dev/zero: not a regular file");
  StatusOr<File> missing = File::read((dir.path() / "none").string());
  ASSERT_FALSE(missing);
  EXPECT_HAS(missing.status().message(), "none: cannot open");
}

TEST(SafetensorsTest, RejectsTruncatedFiles) {
  EXPECT_HAS(errorOf({1, 2, 3}), "m.safetensors: truncated safetensors file (3 bytes");
  std::vector<uint8_t> whole = *serialize(refs(), {});
  // Cut inside the header, then inside the data.
  std::vector<uint8_t> inHeader(whole.begin(), whole.begin() + 20);
  EXPECT_HAS(errorOf(inHeader), "header length");
  std::vector<uint8_t> inData(whole.begin(), whole.end() - 2);
  EXPECT_HAS(errorOf(inData), "tensor 'z.bias': data_offsets [24, 30] run past the 28 data bytes");
}

TEST(SafetensorsTest, RejectsAHeaderLongerThanTheFile) {
  std::vector<uint8_t> bytes = header("{}");
  bytes[7] = 0x7f; // ~9e18 bytes
  EXPECT_HAS(errorOf(bytes), "exceeds the 2 bytes after it: truncated, or not a safetensors file");
}

TEST(SafetensorsTest, RejectsBadJson) {
  EXPECT_HAS(errorOf(file("{\"a\": ", 0)), "header is not valid JSON: line 1, column 7");
  EXPECT_HAS(errorOf(file("[]", 0)), "header is not a JSON object");
  EXPECT_HAS(errorOf(file(R"({"a": 1})", 0)), "tensor 'a': entry is not an object");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1]}})", 4)),
             "tensor 'a': needs dtype, shape and data_offsets");
  EXPECT_HAS(
      errorOf(file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4)),
      "tensor 'a': unknown key 'x'");
  EXPECT_HAS(errorOf(file(R"({"__metadata__": {"k": 1}})", 0)),
             "__metadata__ value 'k' is not a string");
}

TEST(SafetensorsTest, RejectsOffsetsOutOfRangeOverlappingOrWithGaps) {
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4)),
             "tensor 'a': data_offsets [0, 8] run past the 4 data bytes");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4)),
             "0 <= begin <= end");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4)),
             "0 <= begin <= end");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                          8)),
             "tensor 'b' overlaps the tensor before it");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8)),
             "a gap of 4 bytes before tensor 'a'");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 6)),
             "2 bytes after the last tensor's data");
}

TEST(SafetensorsTest, RejectsDTypeShapeMismatchAndUnknownDTypes) {
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8)),
             "tensor 'a': BF16 [3] needs 6 bytes, data_offsets give 8");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8)),
             "tensor 'a': dtype F64 is not one gptc reads (F32, BF16, F16, I32)");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
             "shape has a dimension that is not a small non-negative integer");
  EXPECT_HAS(errorOf(file(R"({"a": {"dtype": "F32", "shape": [1099511627776, 1099511627776],
                              "data_offsets": [0, 4]}})",
                          4)),
             "is too large");
}

} // namespace
