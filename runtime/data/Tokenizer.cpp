//===- Tokenizer.cpp - GPT-2's byte-level BPE tokenizer -------------------===//

#include "runtime/data/Tokenizer.h"

#include "runtime/data/FileIO.h"
#include "runtime/data/Json.h"
#include "runtime/data/Unicode.h"

#include <algorithm>
#include <limits>

namespace gptc::data {

//===----------------------------------------------------------------------===//
// Pre-tokenisation
//===----------------------------------------------------------------------===//

namespace {

CharClass classAt(std::string_view text, size_t pos, uint8_t &length) {
  CodePoint c = decodeUtf8(text, pos);
  length = c.length;
  return c.valid ? classify(c.value) : CharClass::Other;
}

/// The end of the run of `cls` code points that starts at pos.
size_t runEnd(std::string_view text, size_t pos, CharClass cls) {
  uint8_t length;
  while (pos < text.size() && classAt(text, pos, length) == cls)
    pos += length;
  return pos;
}

} // namespace

size_t matchPiece(std::string_view text, size_t pos) {
  const size_t n = text.size();
  // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as in GPT-2).
  if (text[pos] == '\'' && pos + 1 < n) {
    char c = text[pos + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
      return pos + 2;
    if (pos + 2 < n) {
      std::string_view two = text.substr(pos + 1, 2);
      if (two == "re" || two == "ve" || two == "ll")
        return pos + 3;
    }
  }
  // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': the three classes partition the
  // non-space code points, so the class after an optional ' ' picks the
  // alternative. A ' ' before a space falls through to the \s rules.
  uint8_t length;
  if (text[pos] == ' ' && pos + 1 < n) {
    CharClass next = classAt(text, pos + 1, length);
    if (next != CharClass::Space)
      return runEnd(text, pos + 1, next);
  }
  CharClass first = classAt(text, pos, length);
  if (first != CharClass::Space)
    return runEnd(text, pos, first);
  // '\s+(?!\S)|\s+': a space run that is followed by a non-space gives up
  // its last code point (which then leads the next piece), unless that
  // would leave it empty.
  size_t last = pos, end = pos;
  while (end < n && classAt(text, end, length) == CharClass::Space) {
    last = end;
    end += length;
  }
  if (end == n || last == pos)
    return end;
  return last;
}

std::vector<std::string_view> splitPieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = matchPiece(text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

uint32_t byteToUnicode(uint8_t byte) {
  auto printable = [](unsigned b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  if (printable(byte))
    return byte;
  // The others take U+0100, U+0101, ... in byte order.
  uint32_t index = 0;
  for (unsigned b = 0; b < byte; ++b)
    index += !printable(b);
  return 0x100 + index;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

StatusOr<Tokenizer> Tokenizer::load(const std::string &vocabDir) {
  std::string encoderPath = vocabDir + "/encoder.json", vocabPath = vocabDir + "/vocab.bpe";
  // GPT-2's files are 1 MB and 0.5 MB: a bound far above, not memory.
  const uint64_t maxBytes = uint64_t(256) << 20;
  StatusOr<std::string> encoderJson = readFile(encoderPath, maxBytes);
  if (!encoderJson)
    return encoderJson.status();
  StatusOr<std::string> vocabBpe = readFile(vocabPath, maxBytes);
  if (!vocabBpe)
    return vocabBpe.status();
  return parse(*encoderJson, *vocabBpe, encoderPath, vocabPath);
}

StatusOr<Tokenizer> Tokenizer::parse(std::string_view encoderJson, std::string_view vocabBpe,
                                     const std::string &encoderName,
                                     const std::string &vocabName) {
  Tokenizer tok;

  // Stand-in code point -> byte; the stand-ins are all below U+0144.
  std::vector<int> unicodeToByte(0x144, -1);
  for (int b = 0; b < 256; ++b)
    unicodeToByte[byteToUnicode(static_cast<uint8_t>(b))] = b;

  // encoder.json: a stand-in string per token, ids 0..n-1 each once.
  StatusOr<StringIntEntries> entries = parseStringIntObject(encoderJson);
  if (!entries)
    return Status::error(encoderName + ": " + entries.status().message());
  if (entries->empty() || entries->size() > size_t(std::numeric_limits<int32_t>::max()))
    return Status::error(encoderName + ": expected a non-empty object of tokens");
  const int64_t n = static_cast<int64_t>(entries->size());
  tok.tokens.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(n);
  for (const auto &[key, id] : *entries) {
    if (id < 0 || id >= n || seen[id])
      return Status::error(encoderName + ": token \"" + key + "\" has id " +
                           std::to_string(id) +
                           (id >= 0 && id < n ? ", which another token already has"
                                              : ", outside 0.." + std::to_string(n - 1)));
    seen[id] = true;
    std::string bytes;
    for (size_t pos = 0; pos < key.size();) {
      CodePoint c = decodeUtf8(key, pos);
      if (c.value >= unicodeToByte.size() || unicodeToByte[c.value] < 0)
        return Status::error(encoderName + ": token \"" + key + "\" (id " +
                             std::to_string(id) +
                             ") has a character outside GPT-2's byte alphabet");
      bytes += static_cast<char>(unicodeToByte[c.value]);
      pos += c.length;
    }
    tok.tokens[id] = std::move(bytes);
    ids.emplace(key, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    std::string key;
    appendUtf8(byteToUnicode(static_cast<uint8_t>(b)), key);
    auto it = ids.find(key);
    if (it == ids.end())
      return Status::error(encoderName + ": no token for byte " + std::to_string(b));
    tok.byteTokens[b] = it->second;
  }
  auto eot = ids.find(std::string(kEndOfTextString));
  if (eot == ids.end())
    return Status::error(encoderName + ": no \"<|endoftext|>\" token");
  tok.eot = eot->second;

  // vocab.bpe: "#version: ..." then one "left right" merge a line, by rank.
  uint32_t rank = 0;
  size_t lineNo = 0;
  for (size_t pos = 0; pos < vocabBpe.size();) {
    size_t eol = vocabBpe.find('\n', pos);
    if (eol == std::string_view::npos)
      eol = vocabBpe.size();
    std::string_view line = vocabBpe.substr(pos, eol - pos);
    pos = eol + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty() || (lineNo == 1 && line.substr(0, 9) == "#version:"))
      continue;
    auto fail = [&](const std::string &message) {
      return Status::error(vocabName + ":" + std::to_string(lineNo) + ": " + message);
    };
    size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      return fail("expected two symbols separated by one space");
    std::string left(line.substr(0, space)), right(line.substr(space + 1));
    auto l = ids.find(left), r = ids.find(right), m = ids.find(left + right);
    if (l == ids.end() || r == ids.end())
      return fail("symbol \"" + (l == ids.end() ? left : right) + "\" is not in " +
                  encoderName);
    if (m == ids.end())
      return fail("merge result \"" + left + right + "\" is not in " + encoderName);
    if (!tok.merges.emplace(pairKey(l->second, r->second), Merge{rank, m->second}).second)
      return fail("duplicate merge \"" + left + " " + right + "\"");
    ++rank;
  }
  return tok;
}

//===----------------------------------------------------------------------===//
// Encoding and decoding
//===----------------------------------------------------------------------===//

void Tokenizer::encodePiece(std::string_view piece, std::vector<int32_t> &ids) {
  if (piece.size() == 1) {
    ids.push_back(byteTokens[static_cast<uint8_t>(piece[0])]);
    return;
  }
  std::string key(piece);
  auto cached = cache.find(key);
  if (cached != cache.end()) {
    ids.insert(ids.end(), cached->second.begin(), cached->second.end());
    return;
  }
  std::vector<int32_t> &word = scratch;
  word.clear();
  for (char c : piece)
    word.push_back(byteTokens[static_cast<uint8_t>(c)]);
  // encoder.py's loop: merge every occurrence, left to right, of the pair of
  // lowest rank until no adjacent pair has a rank.
  while (word.size() > 1) {
    const Merge *best = nullptr;
    int32_t bestLeft = 0, bestRight = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges.find(pairKey(word[i], word[i + 1]));
      if (it != merges.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        bestLeft = word[i];
        bestRight = word[i + 1];
      }
    }
    if (!best)
      break;
    size_t out = 0;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == bestLeft && word[i + 1] == bestRight) {
        word[out++] = best->result;
        i += 2;
      } else {
        word[out++] = word[i++];
      }
    }
    word.resize(out);
  }
  ids.insert(ids.end(), word.begin(), word.end());
  // A bound on memory for huge corpora; real text repeats few pieces.
  if (cache.size() >= (1u << 20))
    cache.clear();
  cache.emplace(std::move(key), word);
}

void Tokenizer::encodeOrdinary(std::string_view text, std::vector<int32_t> &ids) {
  for (size_t pos = 0; pos < text.size();) {
    size_t end = matchPiece(text, pos);
    encodePiece(text.substr(pos, end - pos), ids);
    pos = end;
  }
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t> &ids, bool allowSpecial) {
  if (!allowSpecial) {
    encodeOrdinary(text, ids);
    return;
  }
  size_t pos = 0;
  for (size_t hit; (hit = text.find(kEndOfTextString, pos)) != std::string_view::npos;) {
    encodeOrdinary(text.substr(pos, hit - pos), ids);
    ids.push_back(eot);
    pos = hit + kEndOfTextString.size();
  }
  encodeOrdinary(text.substr(pos), ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allowSpecial) {
  std::vector<int32_t> ids;
  encode(text, ids, allowSpecial);
  return ids;
}

void Tokenizer::encodeDocument(std::string_view text, std::vector<int32_t> &ids) {
  ids.push_back(eot);
  encodeOrdinary(text, ids);
}

StatusOr<std::string> Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocabSize())
      return Status::error("token " + std::to_string(ids[i]) + " at index " +
                           std::to_string(i) + " is outside the vocabulary (size " +
                           std::to_string(vocabSize()) + ")");
    text += tokens[ids[i]];
  }
  return text;
}

} // namespace gptc::data
