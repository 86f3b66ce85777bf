//===- Json.h - a strict JSON reader --------------------------------------===//
//
// encoder.json (GPT-2's token -> id table) is one flat JSON object whose
// keys are strings, often with \uXXXX escapes, and whose values are
// integers: parseStringIntObject reads exactly that shape. parseJson reads
// any JSON document (a safetensors header, a Hugging Face config.json).
// Both are strict, with errors that give the line and column.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_JSON_H
#define GPTC_RUNTIME_DATA_JSON_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gptc::data {

using StringIntEntries = std::vector<std::pair<std::string, int64_t>>;

/// Parses `{"key": 123, ...}` into (UTF-8 key, value) pairs in file order.
/// Fails on syntax errors, non-integer values, lone surrogates in escapes,
/// duplicate keys and trailing content, saying at which line and column.
StatusOr<StringIntEntries> parseStringIntObject(std::string_view text);

/// One JSON value. A number keeps its exact int64 value in `integer` when
/// it is written as an integer that fits (data offsets exceed 2^53).
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object; // file order, unique keys

  /// The member `key` of an object, or null.
  const JsonValue *find(const std::string &key) const;
};

/// Parses one JSON document. Fails on syntax errors, duplicate keys, lone
/// surrogates, nesting deeper than 64 and trailing content.
StatusOr<JsonValue> parseJson(std::string_view text);

/// parseJson for one line of a JSON-lines file, whose reader knows the line:
/// errors say "column C: ..." only.
StatusOr<JsonValue> parseJsonLine(std::string_view line);

/// `s` as a JSON string literal, quotes included.
std::string quoteJson(std::string_view s);

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_JSON_H
