//===- GptDataToolTest.cpp - the gpt-data command line --------------------===//

#include "DataTestUtils.h"

#include "runtime/data/FileIO.h"
#include "runtime/data/Json.h"
#include "runtime/data/TokenFile.h"

#include "test/unit/runtime/RunTool.h"

#include <algorithm>
#include <filesystem>
#include <map>

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

namespace {

namespace fs = std::filesystem;

std::string freshDir(const std::string &name) {
  std::string dir = tempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

size_t tokenizerIdsOf(const std::string &text) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  return tok ? tok->encode(text).size() : 0;
}

std::vector<uint16_t> tokensOf(const std::string &path) {
  StatusOr<std::vector<uint16_t>> t = readTokenFile(path);
  EXPECT_TRUE(t) << t.status().message();
  return t ? *t : std::vector<uint16_t>{};
}

std::string bytesOf(const std::string &path) {
  StatusOr<std::string> b = readFile(path);
  EXPECT_TRUE(b) << b.status().message();
  return b ? *b : std::string();
}

/// A corpus folder: text files and JSON lines, nested, with a hidden file
/// and a token file that are skipped. Returns the folder; `expected` gets
/// the ids of its documents in the order gpt-data reads them.
std::string writeCorpus(const std::string &name, std::vector<uint16_t> &expected) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  std::string dir = freshDir(name);
  fs::create_directories(dir + "/b/c");
  fs::create_directories(dir + "/.cache");
  EXPECT_TRUE(writeFile(dir + "/.cache/x.txt", "skipped"));
  EXPECT_TRUE(writeTokenFile(dir + "/old.bin", {1, 2, 3}));
  std::vector<std::string> docs; // in bytewise path order: a.txt, b/c/d.jsonl, b/e.txt
  EXPECT_TRUE(writeFile(dir + "/b/e.txt", "The last file.\n"));
  EXPECT_TRUE(writeFile(dir + "/a.txt", "It is a truth universally acknowledged.\n"));
  std::string jsonl;
  for (int i = 0; i < 3; ++i)
    jsonl += "{\"text\": \"Document " + std::to_string(i) + "\\nwith \\\"quotes\\\"\", \"n\": " +
             std::to_string(i) + "}\n";
  EXPECT_TRUE(writeFile(dir + "/b/c/d.jsonl", jsonl));
  for (const char *d : {"It is a truth universally acknowledged.\n", "Document 0\nwith \"quotes\"",
                        "Document 1\nwith \"quotes\"", "Document 2\nwith \"quotes\"",
                        "The last file.\n"}) {
    std::vector<int32_t> ids;
    if (tok)
      tok->encodeDocument(d, ids);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  return dir;
}

// Verify a folder input: its files recursively in bytewise path order, text
// and JSON lines by their names, hidden files and token files skipped.
TEST(GptDataToolTest, EncodeFolderOfTextAndJsonLines) {
  std::vector<uint16_t> expected;
  std::string dir = writeCorpus("tool-corpus", expected);
  std::string bin = tempPath("corpus.bin");
  gptc::testing::ToolResult r = run("encode " + kVocab + " --progress off " + dir + " -o " + bin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(tokensOf(bin), expected);
  EXPECT_NE(r.output.find("gpt-data: wrote " + bin + ": " + std::to_string(expected.size()) +
                          " tokens, 5 documents, "),
            std::string::npos)
      << r.output;

  // --jsonl reads any name as JSON lines; --text-field another member.
  std::string lines = tempPath("records.data");
  ASSERT_TRUE(writeFile(lines, "{\"body\": \"Hello world\", \"text\": 3}\n\n{\"body\": \" the\"}\n"));
  r = run("encode " + kVocab + " --jsonl --text-field body " + lines + " -o " + bin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(tokensOf(bin), (std::vector<uint16_t>{50256, 15496, 995, 50256, 262}));
  r = run("encode " + kVocab + " " + lines + " -o " + bin); // a text file by its name
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(tokensOf(bin).size(), 1 + tokenizerIdsOf("{\"body\": \"Hello world\", \"text\": 3}\n\n"
                                                     "{\"body\": \" the\"}\n"));
}

// Verify llm.c shards: names (val first, one running index), sizes (train
// shards of exactly --shard-tokens, val whole documents), the same bytes
// on 1 and 3 threads, and their concatenation is the single-file output.
TEST(GptDataToolTest, EncodeShardsWithValidationSplit) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  // 40 documents of JSON lines, ~2.3 MiB: several 1 MiB pieces.
  std::string in = freshDir("tool-shards-in"), jsonl;
  std::vector<uint16_t> expected;
  std::vector<size_t> docEnds;
  for (int i = 0; i < 40; ++i) {
    std::string text;
    for (int j = 0; text.size() < size_t(40000 + 1000 * i); ++j)
      text += "Line " + std::to_string(j) + " of document " + std::to_string(i) + ", caf\xc3\xa9.\n";
    jsonl += "{\"text\": " + quoteJson(text) + "}\n";
    std::vector<int32_t> ids;
    tok->encodeDocument(text, ids);
    expected.insert(expected.end(), ids.begin(), ids.end());
    docEnds.push_back(expected.size());
  }
  ASSERT_TRUE(writeFile(in + "/part-0.jsonl", jsonl));
  std::string single = tempPath("shards-single.bin");
  gptc::testing::ToolResult r = run("encode " + kVocab + " " + in + " -o " + single);
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(tokensOf(single), expected);

  // --val-tokens 25K: the split ends at the first document end at or past it.
  size_t valTokens = *std::lower_bound(docEnds.begin(), docEnds.end(), size_t(25000));
  std::map<std::string, std::string> first;
  for (const char *threads : {"1", "3"}) {
    std::string out = freshDir(std::string("tool-shards-") + threads) + "/web/";
    r = run("encode " + kVocab + " --threads " + threads + " --progress off --shard-tokens 100K " +
            "--val-tokens 25K " + in + " -o " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    std::vector<std::string> names = listDir(out);
    size_t trainTokens = expected.size() - valTokens;
    size_t trainShards = (trainTokens + 99999) / 100000;
    ASSERT_EQ(names.size(), 1 + trainShards) << r.output;
    EXPECT_EQ(names.back(), "web_val_000000.bin");
    EXPECT_EQ(tokensOf(out + names.back()).size(), valTokens);
    std::vector<uint16_t> all = tokensOf(out + names.back());
    for (size_t i = 0; i < trainShards; ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "web_train_%06zu.bin", i + 1);
      ASSERT_EQ(names[i], name);
      std::vector<uint16_t> t = tokensOf(out + name);
      EXPECT_EQ(t.size(), i + 1 < trainShards ? 100000u : trainTokens - 100000 * i) << name;
      all.insert(all.end(), t.begin(), t.end());
    }
    EXPECT_TRUE(all == expected) << "the shards concatenate to the single file";
    EXPECT_NE(r.output.find("gpt-data: wrote " + std::to_string(names.size()) + " shards " + out +
                            "web_{val,train}_*.bin (val "),
              std::string::npos)
        << r.output;
    for (const std::string &n : names) {
      if (first.count(n))
        EXPECT_TRUE(bytesOf(out + n) == first[n]) << n << ": 3 threads differ from 1";
      else
        first[n] = bytesOf(out + n);
    }
  }

  // --val-documents and a prefix; without a split the index starts at 0.
  std::string dir = freshDir("tool-shards-prefix");
  r = run("encode " + kVocab + " --val-documents 2 --shard-tokens 1G " + in + " -o " + dir +
          "/x/wiki");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(listDir(dir + "/x"), (std::vector<std::string>{"wiki_train_000001.bin",
                                                            "wiki_val_000000.bin"}));
  EXPECT_EQ(tokensOf(dir + "/x/wiki_val_000000.bin").size(), docEnds[1]);
  r = run("encode " + kVocab + " --shard-tokens 2M " + in + " -o " + dir + "/y");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"x", "y_train_000000.bin"}));
}

TEST(GptDataToolTest, EncodeShardErrors) {
  std::string dir = freshDir("tool-shard-errors");
  std::string txt = dir + "/in.txt";
  ASSERT_TRUE(writeFile(txt, "Hello world\n"));
  // Shard flags want a folder or a prefix, not a .bin file.
  gptc::testing::ToolResult r =
      run("encode " + kVocab + " --shard-tokens 10 " + txt + " -o " + dir + "/out.bin");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("go to -o DIR/ or -o PREFIX"), std::string::npos) << r.output;
  for (const char *bad : {"--shard-tokens 0", "--shard-tokens 3G", "--val-tokens 1T",
                          "--val-tokens x", "--val-documents -1",
                          "--val-tokens 5 --val-documents 5", "--progress sometimes"}) {
    r = run("encode " + kVocab + " " + bad + " " + txt + " -o " + dir + "/p");
    EXPECT_EQ(r.status, 2) << bad << ": " << r.output;
  }
  // All of it in the validation split: an error, and nothing left behind.
  r = run("encode " + kVocab + " --val-tokens 1M " + txt + " -o " + dir + "/p");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gpt-data: error: all 4 tokens (1 documents) went to the validation "
                          "split, none to training: ask for a smaller split (the shards this run "
                          "wrote are removed)\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"in.txt"}));
  // Shards of an earlier run under the prefix are refused (they would join
  // the dataset), and an input named like one is the input.
  r = run("encode " + kVocab + " --shard-tokens 1M " + txt + " -o " + dir + "/p");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("encode " + kVocab + " --shard-tokens 1M " + txt + " -o " + dir + "/p");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "gpt-data: error: -o " + dir + "/p: shards of an earlier run are there (" +
                          dir + "/p_train_000000.bin): remove them or choose another output, so "
                          "that no stale shard joins the dataset\n");
  std::string named = dir + "/q_train_000003.bin";
  ASSERT_TRUE(writeFile(named, "Not tokens but text.\n"));
  r = run("encode " + kVocab + " --shard-tokens 1M " + named + " -o " + dir + "/q");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gpt-data: error: -o " + named + ": is the input itself"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(bytesOf(named), "Not tokens but text.\n");
}

// Verify that a bad record stops the run with the file and line, exit 1,
// leaving no output: not the single file, not the shards already written.
TEST(GptDataToolTest, BadJsonLinesExitOneAndWriteNothing) {
  std::string dir = freshDir("tool-bad-json");
  std::string good;
  for (int i = 0; good.size() < (size_t(3) << 20); ++i)
    good += "{\"text\": \"Record " + std::to_string(i) + " is fine, and long enough.\"}\n";
  size_t lines = size_t(std::count(good.begin(), good.end(), '\n'));
  ASSERT_TRUE(writeFile(dir + "/a.jsonl", good + "{\"text\": \"broken}\n" + good));
  for (const char *threads : {"1", "2"}) {
    std::string out = dir + "/out" + threads;
    gptc::testing::ToolResult r = run("encode " + kVocab + " --threads " + threads +
                                      " --shard-tokens 100K " + dir + "/a.jsonl -o " + out + "/");
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("gpt-data: error: " + dir + "/a.jsonl:" + std::to_string(lines + 1) +
                            ": bad JSON: column 18: unterminated string (the shards this run "
                            "wrote are removed)\n"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(listDir(out).empty()) << threads << " threads";
  }
  gptc::testing::ToolResult r =
      run("encode " + kVocab + " " + dir + "/a.jsonl -o " + dir + "/one.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(fs::exists(dir + "/one.bin"));
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"a.jsonl", "out1", "out2"}));
}

// Verify the progress forms: off prints the summary alone; bar draws on
// stderr with a carriage return and clears itself; lines (the default off
// a terminal) prints nothing in a run shorter than 10 s.
TEST(GptDataToolTest, EncodeProgress) {
  std::string txt = tempPath("progress.txt"), bin = tempPath("progress.bin");
  ASSERT_TRUE(writeFile(txt, "Hello world\n"));
  gptc::testing::ToolResult r =
      run("encode " + kVocab + " --progress off " + txt + " -o " + bin);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.output.rfind("gpt-data: wrote " + bin + ": 4 tokens, 1 documents, 12 bytes of "
                           "text, ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run("encode " + kVocab + " " + txt + " -o " + bin);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run("encode " + kVocab + " --progress bar " + txt + " -o " + bin);
  EXPECT_NE(r.output.find("\r[########################] 100% | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" MB/s, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\r\033[Kgpt-data: wrote "), std::string::npos) << r.output;
}

} // namespace
