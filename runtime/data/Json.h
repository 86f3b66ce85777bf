//===- Json.h - a minimal JSON reader for {string: integer} objects -------===//
//
// encoder.json (GPT-2's token -> id table) is one flat JSON object whose
// keys are strings, often with \uXXXX escapes, and whose values are
// integers. This reads exactly that shape, strictly, with errors that give
// the line and column; anything else in the value position is an error.
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

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_JSON_H
