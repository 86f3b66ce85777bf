//===- Unicode.cpp - UTF-8 decoding and GPT-2's code point classes --------===//

#include "runtime/data/Unicode.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace gptc::data {
namespace {

struct CodePointRange {
  uint32_t lo, hi;
};

#include "runtime/data/UnicodeTables.inc"

template <size_t N> bool contains(const CodePointRange (&table)[N], uint32_t cp) {
  auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                             [](uint32_t c, const CodePointRange &r) { return c < r.lo; });
  return it != std::begin(table) && cp <= std::prev(it)->hi;
}

// ASCII is most of any English corpus; answer it without a search.
struct AsciiClasses {
  CharClass table[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c)
      table[c] = contains(kLetterRanges, c)   ? CharClass::Letter
                 : contains(kNumberRanges, c) ? CharClass::Number
                 : contains(kSpaceRanges, c)  ? CharClass::Space
                                              : CharClass::Other;
  }
};

} // namespace

CharClass classify(uint32_t cp) {
  static const AsciiClasses ascii;
  if (cp < 128)
    return ascii.table[cp];
  if (contains(kLetterRanges, cp))
    return CharClass::Letter;
  if (contains(kNumberRanges, cp))
    return CharClass::Number;
  if (contains(kSpaceRanges, cp))
    return CharClass::Space;
  return CharClass::Other;
}

CodePoint decodeUtf8(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t b0 = byte(pos);
  if (b0 < 0x80)
    return {b0, 1, true};
  CodePoint invalid{b0, 1, false};
  int length;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid;
  }
  if (pos + length > text.size())
    return invalid;
  for (int i = 1; i < length; ++i) {
    uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80)
      return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return invalid;
  return {cp, static_cast<uint8_t>(length), true};
}

size_t findInvalidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    CodePoint c = decodeUtf8(text, pos);
    if (!c.valid)
      return pos;
    pos += c.length;
  }
  return text.size();
}

void appendUtf8(uint32_t cp, std::string &out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

} // namespace gptc::data
