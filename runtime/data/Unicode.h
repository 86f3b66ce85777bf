//===- Unicode.h - UTF-8 decoding and GPT-2's code point classes ----------===//
//
// Just enough Unicode for GPT-2's pre-tokenisation regex: decode one code
// point of UTF-8 and say whether it is a letter (\p{L}), a number (\p{N}),
// white space (\s) or anything else. The tables come from
// gen_unicode_tables.py; no ICU, no std::regex.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_UNICODE_H
#define GPTC_RUNTIME_DATA_UNICODE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gptc::data {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

/// The class of a code point (Other for unassigned and invalid ones).
CharClass classify(uint32_t cp);

/// One decoded code point: `length` bytes of the input, 1..4. An invalid or
/// truncated sequence decodes as one byte with `valid` false, so every byte
/// string splits into code points.
struct CodePoint {
  uint32_t value;
  uint8_t length;
  bool valid;
};

/// Decodes the code point at text[pos]; pos < text.size(). Rejects
/// overlong forms, surrogates and values above U+10FFFF, as UTF-8 requires.
CodePoint decodeUtf8(std::string_view text, size_t pos);

/// The offset of the first invalid byte, or text.size() if all is UTF-8.
size_t findInvalidUtf8(std::string_view text);

/// Appends the UTF-8 encoding of cp (<= U+10FFFF, not a surrogate).
void appendUtf8(uint32_t cp, std::string &out);

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_UNICODE_H
