//===- TokenizerTest.cpp - GPT-2 BPE: golden vectors, regex, loading ------===//
//
// The golden vectors are those of shared/notes/data.md, where gpt-3-encoder,
// js-tiktoken, gpt-tokenizer and an independent encoder.py all agree.
//
//===----------------------------------------------------------------------===//

#include "DataTestUtils.h"

#include "runtime/data/Tokenizer.h"

#include <random>

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::gpt2Tokenizer;

namespace {

using Ids = std::vector<int32_t>;
using Pieces = std::vector<std::string_view>;

//===----------------------------------------------------------------------===//
// GPT-2's vocabulary
//===----------------------------------------------------------------------===//

struct Golden {
  const char *text;
  Ids ids;
};

const Golden kGolden[] = {
    {"Hello world", {15496, 995}},
    {" the", {262}},
    {"The quick brown fox jumps over the lazy dog.",
     {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}},
    {"It's 2024; we'll see 12345 things!\n\n  indented\ttab",
     {1026, 338, 48609, 26, 356, 1183, 766, 17031, 2231, 1243, 0, 628, 220, 773, 4714, 197,
      8658}},
    {"na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE2\x80\x9Cquotes\xE2\x80\x9D "
     "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
     {2616, 38776, 40304, 851, 564, 250, 421, 6421, 447, 251, 10545, 245, 98, 17312, 105,
      45739, 252, 32485}},
};

TEST(TokenizerTest, Sizes) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocabSize(), 50257);
  EXPECT_EQ(tok->endOfText(), 50256);
  EXPECT_EQ(tok->tokenBytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok->tokenBytes(262), " the");
  EXPECT_EQ(tok->tokenBytes(198), "\n");
}

TEST(TokenizerTest, GoldenVectors) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  for (const Golden &g : kGolden) {
    EXPECT_EQ(tok->encode(g.text), g.ids) << g.text;
    StatusOr<std::string> text = tok->decode(g.ids);
    ASSERT_TRUE(text) << text.status().message();
    EXPECT_EQ(*text, g.text);
  }
}

// Verify that the second encoding of a text (served from the piece cache)
// equals the first.
TEST(TokenizerTest, CacheGivesTheSameIds) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  for (const Golden &g : kGolden)
    EXPECT_EQ(tok->encode(g.text), tok->encode(g.text));
}

TEST(TokenizerTest, EndOfText) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  // Ordinary text unless specials are allowed.
  EXPECT_EQ(tok->encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok->encode("<|endoftext|>", /*allowSpecial=*/true), (Ids{50256}));
  EXPECT_EQ(tok->encode("Hello world<|endoftext|> the", true), (Ids{15496, 995, 50256, 262}));
  EXPECT_EQ(tok->encode("<|endoftext|><|endoftext|>", true), (Ids{50256, 50256}));
  EXPECT_EQ(tok->encode("", true), Ids{});
  Ids doc;
  tok->encodeDocument("Hello world", doc);
  tok->encodeDocument(" the", doc);
  EXPECT_EQ(doc, (Ids{50256, 15496, 995, 50256, 262}));
  StatusOr<std::string> text = tok->decode(doc);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "<|endoftext|>Hello world<|endoftext|> the");
}

TEST(TokenizerTest, DecodeRejectsUnknownIds) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  StatusOr<std::string> text = tok->decode({15496, 50257});
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            "token 50257 at index 1 is outside the vocabulary (size 50257)");
  EXPECT_FALSE(tok->decode({-1}));
}

// Verify that any bytes, valid UTF-8 or not, survive encode + decode.
TEST(TokenizerTest, RandomBytesRoundTrip) {
  Tokenizer *tok = gpt2Tokenizer();
  ASSERT_TRUE(tok);
  std::mt19937 gen(1234);
  const std::string alphabet = "ab 's\n\t1.\xC3\xA9\xE6\x97\xA5\xFF\x80";
  for (int round = 0; round < 200; ++round) {
    std::string s;
    int length = gen() % 40;
    for (int i = 0; i < length; ++i)
      s += round % 2 ? static_cast<char>(gen() & 0xFF) : alphabet[gen() % alphabet.size()];
    StatusOr<std::string> back = tok->decode(tok->encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
}

TEST(TokenizerTest, LoadNamesTheMissingFile) {
  StatusOr<Tokenizer> tok = Tokenizer::load("/nonexistent/vocab");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().message(), "/nonexistent/vocab/encoder.json: No such file or directory");
}

//===----------------------------------------------------------------------===//
// Pre-tokenisation
//===----------------------------------------------------------------------===//

TEST(SplitPiecesTest, Contractions) {
  EXPECT_EQ(splitPieces("don't I'm we're they've you'll he'd it's"),
            (Pieces{"don", "'t", " I", "'m", " we", "'re", " they", "'ve", " you", "'ll", " he",
                    "'d", " it", "'s"}));
  // Case-sensitive, and only at the apostrophe: "'S" is punctuation + letter.
  EXPECT_EQ(splitPieces("IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(splitPieces("'sa 'lla"), (Pieces{"'s", "a", " '", "lla"}));
  EXPECT_EQ(splitPieces("'re'"), (Pieces{"'re", "'"}));
  EXPECT_EQ(splitPieces("!'s"), (Pieces{"!'", "s"}));
}

TEST(SplitPiecesTest, Spaces) {
  // The last space of a run leads the next word.
  EXPECT_EQ(splitPieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(splitPieces("a b"), (Pieces{"a", " b"}));
  // Trailing white space stays one piece.
  EXPECT_EQ(splitPieces("a  "), (Pieces{"a", "  "}));
  EXPECT_EQ(splitPieces("a \n "), (Pieces{"a", " \n "}));
  // Only ' ' joins a word; a lone tab is its own piece.
  EXPECT_EQ(splitPieces("\t\tx"), (Pieces{"\t", "\t", "x"}));
  EXPECT_EQ(splitPieces("\n\n  indented"), (Pieces{"\n\n ", " indented"}));
  EXPECT_EQ(splitPieces(" "), (Pieces{" "}));
  EXPECT_EQ(splitPieces(""), Pieces{});
  // U+3000 and U+00A0 are white space; only U+0020 is the optional space.
  EXPECT_EQ(splitPieces("a\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(splitPieces("a \xC2\xA0" "b"), (Pieces{"a", " ", "\xC2\xA0", "b"}));
}

TEST(SplitPiecesTest, DigitsAndPunctuation) {
  EXPECT_EQ(splitPieces("12345"), (Pieces{"12345"}));
  EXPECT_EQ(splitPieces(" 123abc4"), (Pieces{" 123", "abc", "4"}));
  EXPECT_EQ(splitPieces("x=1.5e-3"), (Pieces{"x", "=", "1", ".", "5", "e", "-", "3"}));
  EXPECT_EQ(splitPieces("Wait!!! ...?"), (Pieces{"Wait", "!!!", " ...?"}));
  EXPECT_EQ(splitPieces("a--b ;; c"), (Pieces{"a", "--", "b", " ;;", " c"}));
  // Superscripts and fractions are \p{N}.
  EXPECT_EQ(splitPieces("x\xC2\xB2\xC2\xBD"), (Pieces{"x", "\xC2\xB2\xC2\xBD"}));
}

TEST(SplitPiecesTest, NonAsciiLetters) {
  EXPECT_EQ(splitPieces("na\xC3\xAFve caf\xC3\xA9"), (Pieces{"na\xC3\xAFve", " caf\xC3\xA9"}));
  EXPECT_EQ(splitPieces(" \xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0"),
            (Pieces{" \xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0"})); // " Москва"
  EXPECT_EQ(splitPieces("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E!"),
            (Pieces{"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "!"}));
  // A combining mark is not a letter, so it splits the word.
  EXPECT_EQ(splitPieces("e\xCC\x81t"), (Pieces{"e", "\xCC\x81", "t"}));
  // Emoji are "other"; with a leading space they form one piece.
  EXPECT_EQ(splitPieces("hi \xF0\x9F\x99\x82\xF0\x9F\x99\x82"),
            (Pieces{"hi", " \xF0\x9F\x99\x82\xF0\x9F\x99\x82"}));
}

TEST(SplitPiecesTest, InvalidUtf8IsOther) {
  EXPECT_EQ(splitPieces("a\xFF\xFE b"), (Pieces{"a", "\xFF\xFE", " b"}));
  EXPECT_EQ(splitPieces(" \x80x"), (Pieces{" \x80", "x"}));
}

TEST(SplitPiecesTest, ByteToUnicode) {
  EXPECT_EQ(byteToUnicode('!'), uint32_t('!'));
  EXPECT_EQ(byteToUnicode('~'), uint32_t('~'));
  EXPECT_EQ(byteToUnicode(0xE9), 0xE9u);
  EXPECT_EQ(byteToUnicode(0), 0x100u);
  EXPECT_EQ(byteToUnicode(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(byteToUnicode('\n'), 0x10Au); // 'Ċ'
  EXPECT_EQ(byteToUnicode(0x7F), 0x121u);
  EXPECT_EQ(byteToUnicode(0xAD), 0x143u);
}

//===----------------------------------------------------------------------===//
// A toy vocabulary: merge order and load errors
//===----------------------------------------------------------------------===//

/// encoder.json text for the 256 byte tokens, then `extra` tokens, then EOT.
std::string toyEncoder(const std::vector<std::string> &extra, bool withEot = true) {
  std::string json = "{";
  int id = 0;
  auto add = [&](const std::string &key) {
    json += id ? ", \"" : "\"";
    json += key + "\": " + std::to_string(id);
    ++id;
  };
  for (int b = 0; b < 256; ++b) {
    uint32_t cp = byteToUnicode(b);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    add(cp == '"' || cp == '\\' ? std::string("\\") + char(cp) : buf);
  }
  for (const std::string &e : extra)
    add(e);
  if (withEot)
    add("<|endoftext|>");
  return json + "}";
}

StatusOr<Tokenizer> toy(const std::vector<std::string> &extra, const std::string &merges,
                        bool withEot = true) {
  return Tokenizer::parse(toyEncoder(extra, withEot), "#version: 0.2\n" + merges);
}

// Verify encoder.py's rule: each round merges every occurrence, left to
// right, of the one pair of lowest rank.
TEST(ToyTokenizerTest, MergeOrder) {
  StatusOr<Tokenizer> tok = toy({"aa", "aaaa", "ab", "bc", "abc"}, "a a\naa aa\nb c\na bc\na b\n");
  ASSERT_TRUE(tok) << tok.status().message();
  const int32_t a = 'a', b = 'b'; // toyEncoder gives byte tokens their byte as id
  EXPECT_EQ(tok->encode("aaa"), (Ids{256, a}));
  EXPECT_EQ(tok->encode("aaaa"), (Ids{257}));
  EXPECT_EQ(tok->encode("aaaaa"), (Ids{257, a}));
  // "b c" (rank 2) beats "a b" (rank 4), then "a bc" (rank 3) applies.
  EXPECT_EQ(tok->encode("abc"), (Ids{260}));
  EXPECT_EQ(tok->encode("ab"), (Ids{258}));
  EXPECT_EQ(tok->encode("ba"), (Ids{b, a}));
  EXPECT_EQ(tok->endOfText(), 261);
}

std::string toyError(const std::vector<std::string> &extra, const std::string &merges,
                     bool withEot = true) {
  StatusOr<Tokenizer> tok = toy(extra, merges, withEot);
  EXPECT_FALSE(tok);
  return tok ? "" : tok.status().message();
}

TEST(ToyTokenizerTest, LoadErrors) {
  EXPECT_EQ(toyError({}, "", /*withEot=*/false), "encoder.json: no \"<|endoftext|>\" token");
  EXPECT_EQ(toyError({"a b"}, ""),
            "encoder.json: token \"a b\" (id 256) has a character outside GPT-2's byte "
            "alphabet");
  EXPECT_EQ(toyError({"aa"}, "a a\nab\n"),
            "vocab.bpe:3: expected two symbols separated by one space");
  EXPECT_EQ(toyError({"aa"}, "a a b\n"),
            "vocab.bpe:2: expected two symbols separated by one space");
  EXPECT_EQ(toyError({"aa"}, "a zz\n"), "vocab.bpe:2: symbol \"zz\" is not in encoder.json");
  EXPECT_EQ(toyError({"aa"}, "a b\n"),
            "vocab.bpe:2: merge result \"ab\" is not in encoder.json");
  EXPECT_EQ(toyError({"aa"}, "a a\na a\n"), "vocab.bpe:3: duplicate merge \"a a\"");
  StatusOr<Tokenizer> tok = Tokenizer::parse("{\"a\": 0, \"b\": 0}", "");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().message(),
            "encoder.json: token \"b\" has id 0, which another token already has");
  tok = Tokenizer::parse("{\"a\": 5}", "");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().message(), "encoder.json: token \"a\" has id 5, outside 0..0");
  tok = Tokenizer::parse("{\"a\": 0}", "");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().message(), "encoder.json: no token for byte 0");
  tok = Tokenizer::parse("{\"a\": 0,}", "", "x/encoder.json");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().message(), "x/encoder.json: line 1, column 9: expected '\"', got '}'");
}

} // namespace
