//===- Json.cpp - a strict JSON reader ------------------------------------===//

#include "runtime/data/Json.h"

#include "runtime/data/Unicode.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

namespace gptc::data {
namespace {

class Parser {
public:
  Parser(std::string_view input, std::string &errorOut, bool columnOnly = false)
      : text(input), error(errorOut), columnOnly(columnOnly) {}

  bool parseObject(StringIntEntries &entries) {
    std::unordered_set<std::string> seen;
    skipSpace();
    if (!expect('{'))
      return false;
    skipSpace();
    if (peek() == '}') {
      ++pos;
    } else {
      while (true) {
        std::string key;
        int64_t value;
        skipSpace();
        if (!parseString(key))
          return false;
        skipSpace();
        if (!expect(':'))
          return false;
        skipSpace();
        if (!parseInteger(value))
          return false;
        if (!seen.insert(key).second)
          return fail("duplicate key \"" + key + "\"");
        entries.emplace_back(std::move(key), value);
        skipSpace();
        if (peek() == ',') {
          ++pos;
          continue;
        }
        if (!expect('}'))
          return false;
        break;
      }
    }
    skipSpace();
    if (pos != text.size())
      return fail("unexpected content after the object");
    return true;
  }

  bool parseDocument(JsonValue &value) {
    skipSpace();
    if (!parseValue(value, 0))
      return false;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected content after the value");
    return true;
  }

private:
  bool parseLiteral(const char *word) {
    std::string_view w(word);
    if (text.substr(pos, w.size()) != w)
      return fail("expected a JSON value");
    pos += w.size();
    return true;
  }

  bool parseValue(JsonValue &v, int depth) {
    if (depth > 64)
      return fail("nesting deeper than 64");
    switch (peek()) {
    case '{': {
      v.kind = JsonValue::Kind::Object;
      std::unordered_set<std::string> seen;
      ++pos;
      skipSpace();
      if (peek() == '}') {
        ++pos;
        return true;
      }
      while (true) {
        std::string key;
        skipSpace();
        size_t keyPos = pos;
        if (!parseString(key))
          return false;
        if (!seen.insert(key).second) {
          pos = keyPos;
          return fail("duplicate key \"" + key + "\"");
        }
        skipSpace();
        if (!expect(':'))
          return false;
        skipSpace();
        JsonValue member;
        if (!parseValue(member, depth + 1))
          return false;
        v.object.emplace_back(std::move(key), std::move(member));
        skipSpace();
        if (peek() == ',') {
          ++pos;
          continue;
        }
        return expect('}');
      }
    }
    case '[': {
      v.kind = JsonValue::Kind::Array;
      ++pos;
      skipSpace();
      if (peek() == ']') {
        ++pos;
        return true;
      }
      while (true) {
        skipSpace();
        JsonValue element;
        if (!parseValue(element, depth + 1))
          return false;
        v.array.push_back(std::move(element));
        skipSpace();
        if (peek() == ',') {
          ++pos;
          continue;
        }
        return expect(']');
      }
    }
    case '"':
      v.kind = JsonValue::Kind::String;
      return parseString(v.string);
    case 't':
    case 'f':
      v.kind = JsonValue::Kind::Bool;
      v.boolean = peek() == 't';
      return parseLiteral(v.boolean ? "true" : "false");
    case 'n':
      return parseLiteral("null");
    default:
      v.kind = JsonValue::Kind::Number;
      return parseNumber(v);
    }
  }

  /// RFC 8259's number grammar; the value through strtod, and exactly as
  /// an int64 when it is written as an integer that fits.
  bool parseNumber(JsonValue &v) {
    size_t start = pos;
    auto digits = [&] {
      size_t from = pos;
      while (peek() >= '0' && peek() <= '9')
        ++pos;
      return pos > from;
    };
    if (peek() == '-')
      ++pos;
    if (peek() == '0') {
      ++pos;
      if (peek() >= '0' && peek() <= '9')
        return fail("leading zero in number");
    } else if (!digits()) {
      pos = start;
      return fail("expected a JSON value");
    }
    bool integral = true;
    if (peek() == '.') {
      ++pos, integral = false;
      if (!digits())
        return fail("expected a digit after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos, integral = false;
      if (peek() == '+' || peek() == '-')
        ++pos;
      if (!digits())
        return fail("expected a digit in the exponent");
    }
    std::string literal(text.substr(start, pos - start));
    v.number = std::strtod(literal.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long i = std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0) {
        v.isInteger = true;
        v.integer = i;
      }
    }
    return true;
  }

  int peek() const { return pos < text.size() ? static_cast<uint8_t>(text[pos]) : -1; }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  /// Records "line L, column C: message" for the current position.
  bool fail(const std::string &message) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
      if (text[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    error = (columnOnly ? "" : "line " + std::to_string(line) + ", ") + "column " +
            std::to_string(column) + ": " + message;
    return false;
  }

  bool expect(char c) {
    if (peek() == static_cast<uint8_t>(c)) {
      ++pos;
      return true;
    }
    std::string got = peek() < 0 ? "end of input" : "'" + std::string(1, text[pos]) + "'";
    return fail(std::string("expected '") + c + "', got " + got);
  }

  bool parseHex4(uint32_t &value) {
    if (pos + 4 > text.size())
      return fail("truncated \\u escape");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos + i];
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0)
        return fail("bad hex digit in \\u escape");
      value = value * 16 + digit;
    }
    pos += 4;
    return true;
  }

  bool parseString(std::string &out) {
    if (!expect('"'))
      return false;
    while (true) {
      if (pos >= text.size())
        return fail("unterminated string");
      uint8_t c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("control character in string");
      if (c < 0x80 && c != '\\') {
        // A run of plain ASCII, copied at once.
        size_t start = pos;
        while (pos < text.size()) {
          uint8_t b = text[pos];
          if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\')
            break;
          ++pos;
        }
        out.append(text.substr(start, pos - start));
        continue;
      }
      if (c != '\\') {
        CodePoint cp = decodeUtf8(text, pos);
        if (!cp.valid)
          return fail("invalid UTF-8 in string");
        out.append(text.substr(pos, cp.length));
        pos += cp.length;
        continue;
      }
      ++pos;
      if (pos >= text.size())
        return fail("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!parseHex4(cp))
          return false;
        // Code points above U+FFFF arrive as a surrogate pair.
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          return fail("lone low surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low;
          if (text.substr(pos, 2) != "\\u")
            return fail("high surrogate not followed by a low one");
          pos += 2;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return fail("high surrogate not followed by a low one");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(cp, out);
        break;
      }
      default:
        pos -= 2; // point at the backslash
        return fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  bool parseInteger(int64_t &value) {
    size_t start = pos;
    bool negative = peek() == '-';
    if (negative)
      ++pos;
    if (peek() < '0' || peek() > '9')
      return fail("expected an integer value");
    if (peek() == '0' && pos + 1 < text.size() && text[pos + 1] >= '0' && text[pos + 1] <= '9')
      return fail("leading zero in integer");
    uint64_t magnitude = 0;
    const uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
    while (peek() >= '0' && peek() <= '9') {
      uint64_t digit = text[pos] - '0';
      if (magnitude > (limit - digit) / 10) {
        pos = start;
        return fail("integer out of range");
      }
      magnitude = magnitude * 10 + digit;
      ++pos;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E')
      return fail("expected an integer value, got a fraction or exponent");
    value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return true;
  }

  std::string_view text;
  std::string &error;
  bool columnOnly;
  size_t pos = 0;
};

} // namespace

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &[k, v] : object)
    if (k == key)
      return &v;
  return nullptr;
}

StatusOr<JsonValue> parseJson(std::string_view text) {
  JsonValue value;
  std::string error;
  if (!Parser(text, error).parseDocument(value))
    return Status::error(error);
  return value;
}

StatusOr<JsonValue> parseJsonLine(std::string_view line) {
  JsonValue value;
  std::string error;
  if (!Parser(line, error, true).parseDocument(value))
    return Status::error(error);
  return value;
}

std::string quoteJson(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    uint8_t u = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

StatusOr<StringIntEntries> parseStringIntObject(std::string_view text) {
  StringIntEntries entries;
  std::string error;
  if (!Parser(text, error).parseObject(entries))
    return Status::error(error);
  return entries;
}

} // namespace gptc::data
