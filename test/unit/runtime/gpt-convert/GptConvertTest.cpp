//===- GptConvertTest.cpp - the gpt-convert binary ------------------------===//
//
// Runs the tool on a hand-built `tiny` executable and a Hugging Face
// directory: both exports, their round trip, the exit statuses, and that
// no output ever replaces an input.
//
//===----------------------------------------------------------------------===//

#include "test/unit/ScratchDir.h"
#include "test/unit/runtime/Gpt2Fixtures.h"
#include "test/unit/runtime/RunTool.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace gptc;
using namespace gptc::testing;

namespace {

#define EXPECT_HAS(haystack, needle)                                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

class GptConvertTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::vector<uint8_t> bytes = gpt2Spec(tiny()).build();
    std::ofstream(exe, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    std::filesystem::create_directories(hf);
    writeHf(hf, hfModel(tiny()), gpt2::huggingFaceConfig(tiny()));
  }
  ToolResult convert(const std::string &args) {
    return runTool(GPTC_GPT_CONVERT, exe + " " + args);
  }
  std::string slurp(const std::string &p) {
    StatusOr<std::string> s = readFile(p);
    return s ? *s : "<unreadable>";
  }
  ScratchDir scratch{"gpt-convert"};
  std::string exe = (scratch.path() / "tiny.fb").string();
  std::string hf = (scratch.path() / "hf").string();
  std::string dir(const std::string &name) { return (scratch.path() / name).string(); }
};

TEST_F(GptConvertTest, ExportsBothWaysAndRoundTrips) {
  ToolResult r = convert(hf + " --llmc " + dir("tiny.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_HAS(r.output, "-> " + dir("tiny.bin") + " (n_layer=2, n_head=2, n_embd=16");
  r = convert(dir("tiny.bin") + " --hf " + dir("back"));
  ASSERT_EQ(r.status, 0) << r.output;
  // Our writer made the input, so HF -> llm.c -> HF is the same bytes.
  EXPECT_EQ(slurp(dir("back") + "/model.safetensors"), slurp(hf + "/model.safetensors"));
  EXPECT_EQ(slurp(dir("back") + "/config.json"), slurp(hf + "/config.json"));
  r = convert(hf + " --llmc " + dir("tiny_bf16.bin") + " --bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp(dir("tiny_bf16.bin")).size(), 1024 + (slurp(dir("tiny.bin")).size() - 1024) / 2);
}

TEST_F(GptConvertTest, NeverWritesOverItsInput) {
  ASSERT_EQ(convert(hf + " --llmc " + dir("tiny.bin")).status, 0);
  std::string before = slurp(dir("tiny.bin"));
  ToolResult r = convert(dir("tiny.bin") + " --llmc " + dir("tiny.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "is the input");
  // Through another name of the same file, too.
  std::filesystem::create_hard_link(dir("tiny.bin"), dir("alias.bin"));
  r = convert(dir("alias.bin") + " --llmc " + dir("tiny.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "is the input");
  EXPECT_EQ(slurp(dir("tiny.bin")), before);
  std::string model = slurp(hf + "/model.safetensors");
  r = convert(hf + " --hf " + hf);
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "model.safetensors is the input");
  EXPECT_EQ(slurp(hf + "/model.safetensors"), model);
  // Nor over the executable.
  r = convert(hf + " --llmc " + exe);
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "tiny.fb is the input");
}

TEST_F(GptConvertTest, ErrorsAndUsage) {
  ToolResult r = convert(hf);
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.output, "give one of --hf DIR and --llmc FILE");
  r = convert(hf + " --hf a --llmc b");
  EXPECT_EQ(r.status, 2);
  r = convert(hf + " --hf a --bf16");
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.output, "--bf16 applies to --llmc only");
  r = convert(hf + " --hf a --bogus");
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.output, "unknown option '--bogus'");
  r = runTool(GPTC_GPT_CONVERT, "--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_HAS(r.output, "usage: gpt-convert STEP.fb INPUT");

  // Another model's weights: exit 1, both models named, nothing written.
  Config wide = tiny();
  wide.nEmbd = 32;
  std::string other = dir("wide");
  std::filesystem::create_directories(other);
  writeHf(other, hfModel(wide), "");
  r = convert(other + " --llmc " + dir("out.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "holds a GPT-2 with n_layer=2, n_embd=32");
  EXPECT_HAS(r.output, "but the executable's model is n_layer=2, n_head=2, n_embd=16");
  EXPECT_FALSE(std::filesystem::exists(dir("out.bin")));
  r = runTool(GPTC_GPT_CONVERT, dir("missing.fb") + " " + hf + " --llmc " + dir("out.bin"));
  EXPECT_EQ(r.status, 1);
  EXPECT_HAS(r.output, "missing.fb");
}

} // namespace
