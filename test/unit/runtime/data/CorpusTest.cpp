//===- CorpusTest.cpp - text and JSON-lines corpora encoded as a stream ---===//
//
// encodeCorpus with pieces and reads far smaller than gpt-data's (tens of
// bytes), so that every path of the reader (a cut, a document end, a
// refill, the end of a file) and of the pipeline (reader, workers and
// writer at once; an error while the reader runs ahead) is taken many times
// on small inputs; the ids
// must be those of encoding each document whole, whatever the threads.
//
//===----------------------------------------------------------------------===//

#include "DataTestUtils.h"

#include "runtime/data/Corpus.h"
#include "runtime/data/FileIO.h"
#include "runtime/data/Json.h"

#include <filesystem>

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;
namespace fs = std::filesystem;

namespace {

/// Keeps everything written, in order, with the document starts made
/// absolute.
struct MemorySink : TokenSink {
  std::vector<int32_t> ids;
  std::vector<size_t> starts;
  size_t writes = 0;
  Status write(const std::vector<int32_t> &piece, const std::vector<size_t> &s) override {
    for (size_t at : s)
      starts.push_back(ids.size() + at);
    ids.insert(ids.end(), piece.begin(), piece.end());
    ++writes;
    return Status::ok();
  }
  Status finish() override { return Status::ok(); }
  void discard() override {}
};

/// A fresh directory under the test's temporary folder.
std::string freshDir(const std::string &name) {
  std::string dir = tempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Text whose lines start and end in every kind of white space, with blank
/// lines, non-ASCII letters, contractions and digits.
std::string mixedText(size_t bytes, int seed) {
  const char *const lines[] = {"Hello world",     "  indented line", "\ttabbed",
                               "",                "trailing   ",     "caf\xc3\xa9 na\xc3\xafve",
                               "a\r",             "123 456",         "  \n",
                               "'s and 're",      "end.",            "\xe2\x80\xa8sep",
                               "<|endoftext|>x"};
  std::string text;
  for (int i = seed; text.size() < bytes; ++i)
    text += std::string(lines[i % 13]) + (i % 7 == 0 ? "\n\n" : "\n") + std::to_string(i);
  return text;
}

CorpusOptions smallPieces(unsigned threads) {
  CorpusOptions o;
  o.threads = threads;
  o.pieceBytes = 40;
  o.readBytes = 29;
  o.batchBytes = 100; // many batches: the reader, workers and writer overlap
  return o;
}

StatusOr<CorpusStats> encode(const std::vector<CorpusFile> &files, const CorpusOptions &o,
                             MemorySink &sink) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return Status::error("no tokenizer");
  return encodeCorpus(files, *tok, o, sink);
}

CorpusFile textFile(const std::string &path, bool jsonLines = false) {
  CorpusFile f;
  f.path = path;
  f.jsonLines = jsonLines;
  f.bytes = fs::file_size(path);
  return f;
}

TEST(CorpusTest, FindPieceEnd) {
  // Just after the first "\n" at or after from + target that has a
  // character that is not white space on either side.
  EXPECT_EQ(findPieceEnd("abc\ndef\nghi", 0, 2), 4u);
  EXPECT_EQ(findPieceEnd("abc\ndef\nghi", 0, 4), 8u);
  EXPECT_EQ(findPieceEnd("abc\n def\n\nx\ny", 0, 1), 12u);
  EXPECT_EQ(findPieceEnd("a \nb\tc\nd", 0, 1), 7u);   // not after a space: "  \n" ends
  EXPECT_EQ(findPieceEnd("a\r\nb", 0, 1), std::string_view::npos); // a text differently
  EXPECT_EQ(findPieceEnd("\xe2\x80\xa8\nx\n", 0, 1), std::string_view::npos); // U+2028
  EXPECT_EQ(findPieceEnd("a\n\xc2\xa0x", 0, 1), std::string_view::npos);        // U+00A0
  EXPECT_EQ(findPieceEnd("\xc3\xa9\n\xe4\xb8\xad", 0, 1), 3u); // é, "\n", 中: letters
  EXPECT_EQ(findPieceEnd("abc\n def\n", 0, 1), std::string_view::npos); // nothing follows
  EXPECT_EQ(findPieceEnd("a\nb", 0, 5), std::string_view::npos);        // too short
  EXPECT_EQ(findPieceEnd("a\nb\nc", 2, 1), 4u);
  // A code point cut short by the end of the text: not judged.
  EXPECT_EQ(findPieceEnd("a\n\xe4\xb8", 0, 1), std::string_view::npos);
  EXPECT_EQ(findPieceEnd("a\n\xe4\xb8\xad", 0, 1), 2u);
}

// Verify that text files cut into pieces of tens of bytes, read in blocks
// of 29, encode to the ids of each file encoded whole, on 1 and 3 threads,
// with <|endoftext|> before each file, and that the statistics add up.
TEST(CorpusTest, TextPiecesEncodeAsTheWhole) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  std::string dir = freshDir("corpus-text");
  std::vector<std::string> texts = {mixedText(3000, 0), "", mixedText(777, 5), "x"};
  std::vector<CorpusFile> files;
  std::vector<int32_t> expected;
  uint64_t bytes = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string path = dir + "/" + std::to_string(i) + ".txt";
    ASSERT_TRUE(writeFile(path, texts[i]));
    files.push_back(textFile(path));
    tok->encodeDocument(texts[i], expected);
    bytes += texts[i].size();
  }
  for (unsigned threads : {1u, 3u}) {
    MemorySink sink;
    StatusOr<CorpusStats> stats = encode(files, smallPieces(threads), sink);
    ASSERT_TRUE(stats) << stats.status().message();
    EXPECT_TRUE(sink.ids == expected) << threads << " threads: " << sink.ids.size() << " ids, "
                                      << expected.size() << " expected";
    EXPECT_EQ(stats->tokens, expected.size());
    EXPECT_EQ(stats->documents, 4u);
    EXPECT_EQ(stats->bytesDone, bytes);
    EXPECT_EQ(stats->bytesTotal, bytes);
    EXPECT_GT(sink.writes, 50u) << "the text was cut into many pieces";
    ASSERT_EQ(sink.starts.size(), 4u);
    for (size_t s : sink.starts)
      EXPECT_EQ(sink.ids[s], tok->endOfText());
  }
}

// Verify the cutting rule on random text made of the characters where
// GPT-2's pre-tokenizer is subtle (white space of every kind, contractions,
// digits, punctuation, letters of several scripts), cut as often as it
// allows (pieces of 1 to 8 bytes, reads of 1 to 16): every text must
// encode to the ids of the whole, with and without --allow-special.
TEST(CorpusTest, RandomTextPiecesEncodeAsTheWhole) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  const char *const atoms[] = {" ", "  ", "\n", "\n", "\n\n", "\r", "\t", "a", "Z", "'s", "'",
                               "s", "1", "23", ".", "!", "-", "\xc3\xa9", "\xe4\xb8\xad",
                               "\xe2\x80\xa8", "\xc2\xa0", "\xe3\x80\x80", "<|endoftext|>"};
  std::string dir = freshDir("corpus-random");
  uint64_t state = 42;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (uint64_t n = next(120); n-- > 0;)
      text += atoms[next(sizeof(atoms) / sizeof(atoms[0]))];
    std::string path = dir + "/" + std::to_string(i) + ".txt";
    ASSERT_TRUE(writeFile(path, text));
    CorpusOptions o;
    o.threads = 2;
    o.pieceBytes = 1 + next(8);
    o.readBytes = 1 + next(16);
    o.batchBytes = 1 + next(32);
    o.allowSpecial = i % 2;
    std::vector<int32_t> expected{tok->endOfText()};
    tok->encode(text, expected, o.allowSpecial);
    MemorySink sink;
    ASSERT_TRUE(encode({textFile(path)}, o, sink));
    ASSERT_TRUE(sink.ids == expected) << "text " << i << ": " << quoteJson(text) << " pieces of "
                                      << o.pieceBytes;
  }
}

// Verify that a sink that fails stops the encoding with its error, however
// far the reader has run ahead: nothing is written after it, nothing hangs.
TEST(CorpusTest, SinkErrorStopsThePipeline) {
  if (!gptc::data::testing::gpt2Tokenizer())
    return;
  struct FailingSink : MemorySink {
    size_t failAt;
    explicit FailingSink(size_t n) : failAt(n) {}
    Status write(const std::vector<int32_t> &piece, const std::vector<size_t> &s) override {
      if (writes == failAt)
        return Status::error("disk full");
      return MemorySink::write(piece, s);
    }
  };
  std::string dir = freshDir("corpus-sink-error");
  std::string path = dir + "/a.txt";
  ASSERT_TRUE(writeFile(path, mixedText(20000, 3)));
  for (size_t failAt : {size_t(0), size_t(1), size_t(7), size_t(200)}) {
    FailingSink sink(failAt);
    StatusOr<CorpusStats> stats = encode({textFile(path)}, smallPieces(4), sink);
    ASSERT_FALSE(stats) << failAt;
    EXPECT_EQ(stats.status().message(), "disk full");
    EXPECT_EQ(sink.writes, failAt);
  }
}

// Verify --split-on-blank-lines' documents: each runs through its "\n\n"
// (which may fall on a piece or block boundary), a file ending in "\n\n"
// ends with an empty document (llm.c's rule), and a "\n\n\n" leaves "\n"
// to start the next document.
TEST(CorpusTest, BlankLinesSplitDocuments) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  std::string dir = freshDir("corpus-blank");
  std::string text = mixedText(2000, 3) + "\n\n\nlast\n\n";
  std::string path = dir + "/t.txt";
  ASSERT_TRUE(writeFile(path, text));
  std::vector<int32_t> expected;
  size_t documents = 0;
  for (std::string_view rest = text;;) {
    size_t blank = rest.find("\n\n");
    std::string_view doc = rest.substr(0, blank == std::string_view::npos ? blank : blank + 2);
    tok->encodeDocument(doc, expected);
    ++documents;
    if (blank == std::string_view::npos)
      break;
    rest.remove_prefix(blank + 2);
  }
  for (unsigned threads : {1u, 4u}) {
    CorpusOptions o = smallPieces(threads);
    o.splitOnBlankLines = true;
    MemorySink sink;
    StatusOr<CorpusStats> stats = encode({textFile(path)}, o, sink);
    ASSERT_TRUE(stats) << stats.status().message();
    EXPECT_TRUE(sink.ids == expected) << threads << " threads";
    EXPECT_EQ(stats->documents, documents);
    EXPECT_EQ(sink.starts.size(), documents);
    EXPECT_EQ(sink.ids.back(), tok->endOfText()) << "the empty last document";
  }
}

// Verify JSON lines: a document per object from its "text" member (or
// --text-field's), escapes decoded, blank lines and a byte-order mark
// skipped, other members ignored.
TEST(CorpusTest, JsonLinesDocuments) {
  Tokenizer *tok = gptc::data::testing::gpt2Tokenizer();
  if (!tok)
    return;
  std::string dir = freshDir("corpus-jsonl");
  std::vector<std::string> docs;
  std::string jsonl = "\xEF\xBB\xBF";
  for (int i = 0; i < 120; ++i) {
    std::string text = mixedText(size_t(i % 9) * 11, i);
    docs.push_back(text);
    jsonl += "{\"id\": " + std::to_string(i) + ", \"text\": " + quoteJson(text) +
             ", \"meta\": {\"a\": [1, 2.5, null, true]}}\n";
    if (i % 17 == 0)
      jsonl += "\n  \r\n";
  }
  std::string path = dir + "/docs.jsonl";
  ASSERT_TRUE(writeFile(path, jsonl));
  std::vector<int32_t> expected;
  for (const std::string &d : docs)
    tok->encodeDocument(d, expected);
  for (unsigned threads : {1u, 3u}) {
    MemorySink sink;
    StatusOr<CorpusStats> stats = encode({textFile(path, true)}, smallPieces(threads), sink);
    ASSERT_TRUE(stats) << stats.status().message();
    EXPECT_TRUE(sink.ids == expected) << threads << " threads";
    EXPECT_EQ(stats->documents, docs.size());
    EXPECT_EQ(stats->bytesDone, jsonl.size());
  }
  // Another member holds the text.
  std::string other = dir + "/other.jsonl";
  ASSERT_TRUE(writeFile(other, "{\"content\": \"Hello world\", \"text\": 5}\n"));
  CorpusOptions o = smallPieces(2);
  o.textField = "content";
  MemorySink sink;
  ASSERT_TRUE(encode({textFile(other, true)}, o, sink));
  EXPECT_EQ(sink.ids, (std::vector<int32_t>{50256, 15496, 995}));
}

// Verify that bad records are reported with the file and line (and the
// column for bad JSON), and that with several bad lines the first in input
// order is reported whatever the threads.
TEST(CorpusTest, JsonLinesErrorsNameFileAndLine) {
  std::string dir = freshDir("corpus-jsonl-bad");
  auto errorOf = [&](const std::string &name, const std::string &contents,
                     const std::string &field = "text") {
    std::string path = dir + "/" + name;
    EXPECT_TRUE(writeFile(path, contents));
    CorpusOptions o = smallPieces(3);
    o.textField = field;
    MemorySink sink;
    StatusOr<CorpusStats> stats = encode({textFile(path, true)}, o, sink);
    return stats ? std::string("ok") : stats.status().message();
  };
  std::string good;
  for (int i = 0; i < 60; ++i)
    good += "{\"text\": \"line " + std::to_string(i) + " of a good file\"}\n";
  EXPECT_EQ(errorOf("a.jsonl", good + "{\"text\": \"x\",}\n" + good + "{oops\n"),
            dir + "/a.jsonl:61: bad JSON: column 14: expected '\"', got '}'");
  EXPECT_EQ(errorOf("b.jsonl", good + "{\"txt\": \"x\", \"id\": 3}\n"),
            dir + "/b.jsonl:61: no \"text\" member (it has \"txt\", \"id\"; --text-field NAME "
                  "reads another)");
  EXPECT_EQ(errorOf("c.jsonl", "{}\n"),
            dir + "/c.jsonl:1: no \"text\" member (an empty object; --text-field NAME reads "
                  "another)");
  EXPECT_EQ(errorOf("d.jsonl", good + "{\"text\": null}\n"),
            dir + "/d.jsonl:61: \"text\" is null, not a string");
  EXPECT_EQ(errorOf("e.jsonl", "[{\"text\": \"a\"}]\n"),
            dir + "/e.jsonl:1: an array, not an object (JSON lines hold one object per line)");
  EXPECT_EQ(errorOf("f.jsonl", "[{\"text\": \"a\"},\n{\"text\": \"b\"}]\n"),
            dir + "/f.jsonl:1: bad JSON: column 16: expected a JSON value (JSON lines hold "
                  "one object per line, not an array)");
  EXPECT_EQ(errorOf("g.jsonl", "{\"text\": \"ok\xFF\"}\n"),
            dir + "/g.jsonl:1: bad JSON: column 13: invalid UTF-8 in string");
  EXPECT_EQ(errorOf("h.jsonl", "{\"body\": \"fine\"}\n", "body"), "ok");
}

TEST(CorpusTest, InvalidUtf8NamesTheOffset) {
  std::string dir = freshDir("corpus-utf8");
  std::string text = mixedText(500, 1);
  text[333] = '\xFF';
  std::string path = dir + "/bad.txt";
  ASSERT_TRUE(writeFile(path, text));
  for (unsigned threads : {1u, 4u}) {
    MemorySink sink;
    StatusOr<CorpusStats> stats = encode({textFile(path)}, smallPieces(threads), sink);
    ASSERT_FALSE(stats);
    EXPECT_EQ(stats.status().message(), path + ": not UTF-8 text (invalid byte at offset 333)");
  }
}

// Verify that a directory is read recursively in bytewise path order, names
// starting with "." and token files skipped, each file's format from its
// name (or every file JSON lines with --jsonl), and that a missing input,
// an empty directory and a device are refused.
TEST(CorpusTest, ResolveDirectories) {
  std::string dir = freshDir("corpus-dir");
  for (const char *name : {"b/2.txt", "b/10.txt", "a.jsonl", "B.json", "c/x.bin", ".hidden.txt",
                           ".git/config", "c/d/e.text"}) {
    fs::create_directories(fs::path(dir + "/" + name).parent_path());
    ASSERT_TRUE(writeFile(dir + "/" + name, "x"));
  }
  StatusOr<std::vector<CorpusFile>> files = resolveCorpus({dir, dir + "/b/2.txt"},
                                                          CorpusFormat::Auto);
  ASSERT_TRUE(files) << files.status().message();
  std::vector<std::string> names;
  std::vector<bool> json;
  for (const CorpusFile &f : *files) {
    names.push_back(f.path.substr(dir.size() + 1));
    json.push_back(f.jsonLines);
    EXPECT_EQ(f.bytes, 1u);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"B.json", "a.jsonl", "b/10.txt", "b/2.txt",
                                             "c/d/e.text", "b/2.txt"}));
  EXPECT_EQ(json, (std::vector<bool>{true, true, false, false, false, false}));
  files = resolveCorpus({dir + "/b"}, CorpusFormat::JsonLines);
  ASSERT_TRUE(files);
  EXPECT_TRUE((*files)[0].jsonLines && (*files)[1].jsonLines);

  std::string empty = freshDir("corpus-empty");
  ASSERT_TRUE(writeFile(empty + "/.only-hidden", "x"));
  files = resolveCorpus({empty}, CorpusFormat::Auto);
  ASSERT_FALSE(files);
  EXPECT_EQ(files.status().message(), empty + ": a directory with no text files (names starting "
                                              "with '.' and token files *.bin are skipped)");
  files = resolveCorpus({dir + "/missing.txt"}, CorpusFormat::Auto);
  ASSERT_FALSE(files);
  EXPECT_EQ(files.status().message(), dir + "/missing.txt: No such file or directory");
  files = resolveCorpus({"/dev/zero"}, CorpusFormat::Auto);
  ASSERT_FALSE(files);
  EXPECT_EQ(files.status().message(), "/dev/zero: is a device, not a file");
}

} // namespace
