//===- GptDataToolTest.cpp - the gpt-data command line --------------------===//

#include "DataTestUtils.h"

#include "runtime/data/FileIO.h"
#include "runtime/data/TokenFile.h"

#include "test/unit/runtime/RunTool.h"

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;

namespace {

gptc::testing::ToolResult run(const std::string &args) {
  return gptc::testing::runTool(GPTC_GPT_DATA_TOOL, args);
}

const std::string kVocab = std::string("--vocab-dir ") + GPTC_VOCAB_DIR;

TEST(GptDataToolTest, Help) {
  for (const char *command : {"", "encode ", "decode ", "info ", "austen "}) {
    gptc::testing::ToolResult r = run(std::string(command) + "--help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.output.find("usage: gpt-data"), std::string::npos) << command;
  }
  EXPECT_NE(run("encode --help").output.find("examples:"), std::string::npos);
}

TEST(GptDataToolTest, UsageErrors) {
  gptc::testing::ToolResult r = run("");
  EXPECT_EQ(r.status, 2);
  r = run("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gpt-data: unknown command 'frobnicate' (encode, decode, info, austen)\n");
  r = run("encode --bogus x.txt -o y.bin");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gpt-data encode: unknown option --bogus (see gpt-data encode --help)\n");
  r = run("encode x.txt -o");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "gpt-data encode: --output needs a value\n");
  r = run("encode x.txt -o y.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--vocab-dir DIR is required"), std::string::npos);
  r = run("austen " + kVocab + " -o /tmp");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "gpt-data austen: give exactly one of --deb FILE.deb and --rdb Rdata.rdb\n");
  r = run("info -n x y.bin");
  EXPECT_EQ(r.status, 2);
}

TEST(GptDataToolTest, EncodeDecodeInfo) {
  std::string txt = tempPath("tool.txt"), bin = tempPath("tool.bin"), out = tempPath("out.txt");
  ASSERT_TRUE(writeFile(txt, "Hello world\n\n the"));
  gptc::testing::ToolResult r = run("encode " + kVocab + " " + txt + " -o " + bin);
  ASSERT_EQ(r.status, 0) << r.output;
  StatusOr<std::vector<uint16_t>> tokens = readTokenFile(bin);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(*tokens, (std::vector<uint16_t>{50256, 15496, 995, 628, 262}));

  r = run("decode " + kVocab + " " + bin);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "<|endoftext|>Hello world\n\n the");
  r = run("decode " + kVocab + " " + bin + " -o " + out);
  EXPECT_EQ(r.status, 0);
  StatusOr<std::string> text = readFile(out);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "<|endoftext|>Hello world\n\n the");

  r = run("info " + kVocab + " -n 3 " + bin);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("tokens:    5\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("documents: 1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("first 3: 50256 15496 995\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("as text:   \"<|endoftext|>Hello world\""), std::string::npos)
      << r.output;

  // Split at blank lines: the "\n\n" ends the first document.
  r = run("encode " + kVocab + " --split-on-blank-lines " + txt + " " + txt + " -o " + bin);
  ASSERT_EQ(r.status, 0) << r.output;
  tokens = readTokenFile(bin);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(*tokens, (std::vector<uint16_t>{50256, 15496, 995, 628, 50256, 262, 50256, 15496,
                                            995, 628, 50256, 262}));

  ASSERT_TRUE(writeFile(txt, "a<|endoftext|>b"));
  r = run("encode " + kVocab + " --allow-special " + txt + " -o " + bin);
  ASSERT_EQ(r.status, 0) << r.output;
  tokens = readTokenFile(bin);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(*tokens, (std::vector<uint16_t>{50256, 64, 50256, 65}));
}

// Verify that an output which is one of the inputs (the same name, a
// symlink or a hard link, or a tokenizer file) is refused before anything
// is written: encode/decode used to replace the text with tokens, exit 0.
TEST(GptDataToolTest, OutputThatIsAnInputIsRefused) {
  std::string txt = tempPath("alias.txt"), bin = tempPath("alias.bin");
  std::string link = tempPath("alias-link"), hard = tempPath("alias-hard");
  ASSERT_TRUE(writeFile(txt, "Hello world"));
  std::filesystem::remove(link);
  std::filesystem::remove(hard);
  std::filesystem::create_symlink(txt, link);
  std::filesystem::create_hard_link(txt, hard);
  for (const std::string &out : {txt, link, hard}) {
    gptc::testing::ToolResult r = run("encode " + kVocab + " " + txt + " -o " + out);
    EXPECT_EQ(r.status, 1) << out;
    EXPECT_NE(r.output.find("gpt-data: error: -o " + out + ": is the input "), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("writing it would destroy the input"), std::string::npos) << r.output;
  }
  StatusOr<std::string> text = readFile(txt);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "Hello world");

  ASSERT_TRUE(writeTokenFile(bin, {15496}));
  gptc::testing::ToolResult r = run("decode " + kVocab + " " + bin + " -o " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: -o " + bin + ": is the input itself (same file); writing "
                      "it would destroy the input: choose another output\n");
  EXPECT_TRUE(readTokenFile(bin));
  r = run("encode " + kVocab + " " + txt + " -o " + GPTC_VOCAB_DIR + "/vocab.bpe");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("vocab.bpe: is the input"), std::string::npos) << r.output;

  // austen writes OUTDIR/austen_train.bin: the --rdb given cannot be it.
  std::string dir = tempPath("austen-alias");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(writeFile(dir + "/austen_train.bin", "not an rdb"));
  r = run("austen " + kVocab + " --rdb " + dir + "/austen_train.bin -o " + dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("-o " + dir + "/austen_train.bin: is the input"), std::string::npos)
      << r.output;

  // An endless input is refused, not read until memory runs out.
  r = run("encode " + kVocab + " /dev/zero -o " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: /dev/zero: is a device, not a file\n");
}

TEST(GptDataToolTest, BadInputsExitOne) {
  std::string bad = tempPath("bad.txt"), bin = tempPath("bad.bin");
  ASSERT_TRUE(writeFile(bad, "ok\xFFno"));
  gptc::testing::ToolResult r = run("encode " + kVocab + " " + bad + " -o " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: " + bad + ": not UTF-8 text (invalid byte at offset 2)\n");
  r = run("encode " + kVocab + " " + tempPath("none.txt") + " -o " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: " + tempPath("none.txt") + ": No such file or directory\n");
  r = run("info " + bad);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: " + bad + ": too short for the 1024-byte header (5 bytes)\n");
  ASSERT_TRUE(writeTokenFile(bin, {1, 60000}));
  r = run("decode " + kVocab + " " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: " + bin + ": token 60000 at index 1 is outside the vocabulary (size 50257)\n");
  r = run("encode --vocab-dir /nonexistent " + bad + " -o " + bin);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: /nonexistent/encoder.json: No such file or directory\n");
  r = run("austen " + kVocab + " --rdb " + bad + " -o " + tempPath("austen"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: " + bad + ": record 0 (offset 0): truncated zlib stream (0 of 1869348718 "
                            "bytes)\n");
  r = run("austen " + kVocab + " --deb " + bad + " -o " + tempPath("austen"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find(bad + ": 'dpkg-deb -x' failed"), std::string::npos) << r.output;
}

// Verify that encoding on several threads (the text cut into ~1 MiB pieces
// at line starts) gives the ids of encoding the whole text at once, for
// text whose lines start and end in every kind of whitespace.
TEST(GptDataToolTest, ThreadsEncodeAsOne) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  const char *const lines[] = {"Hello world",  "  indented line", "\ttabbed", "",
                               "trailing   ", "caf\xc3\xa9 na\xc3\xafve", "a\r",
                               "123 456",      "  \n", "'s and 're", "<|endoftext|>x",
                               "\xe2\x80\xa8sep", "end."};
  std::string text;
  for (int i = 0; text.size() < (size_t(5) << 19); ++i) // 2.5 MiB: three pieces
    text += std::string(lines[i % 13]) + (i % 7 == 0 ? "\n\n" : "\n") + std::to_string(i);
  std::string txt = tempPath("threads.txt");
  ASSERT_TRUE(writeFile(txt, text));
  std::vector<uint16_t> expected{50256};
  for (int32_t id : tok->encode(text, /*allowSpecial=*/true))
    expected.push_back(uint16_t(id));
  for (const char *threads : {"1", "3"}) {
    std::string bin = tempPath(std::string("threads") + threads + ".bin");
    gptc::testing::ToolResult r = run("encode " + kVocab + " --allow-special --threads " +
                                      threads + " " + txt + " -o " + bin);
    ASSERT_EQ(r.status, 0) << r.output;
    StatusOr<std::vector<uint16_t>> tokens = readTokenFile(bin);
    ASSERT_TRUE(tokens);
    EXPECT_TRUE(*tokens == expected) << threads << " threads: " << tokens->size() << " ids, "
                                     << expected.size() << " expected";
  }
  EXPECT_EQ(run("encode " + kVocab + " --threads 0 " + txt + " -o x.bin").status, 2);
}

} // namespace
