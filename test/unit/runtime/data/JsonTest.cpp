//===- JsonTest.cpp - the {string: integer} JSON reader -------------------===//

#include "runtime/data/Json.h"

#include <gtest/gtest.h>

using namespace gptc;
using namespace gptc::data;

namespace {

std::string errorOf(std::string_view text) {
  StatusOr<StringIntEntries> r = parseStringIntObject(text);
  EXPECT_FALSE(r) << "accepted: " << text;
  return r ? "" : r.status().message();
}

TEST(JsonTest, ParsesKeysValuesAndEscapes) {
  StatusOr<StringIntEntries> r = parseStringIntObject(
      " {\"!\": 0, \"\\u0120the\": 262,\n \"\\\"q\\\\\": -7, \"\\n\\t\\/\\b\\f\\r\": 3,"
      " \"\\ud83d\\ude42\": 9223372036854775807, \"\xC3\xA9\": -9223372036854775808} ");
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ((*r)[0], (std::pair<std::string, int64_t>("!", 0)));
  EXPECT_EQ((*r)[1].first, "\xC4\xA0the"); // U+0120 in UTF-8
  EXPECT_EQ((*r)[1].second, 262);
  EXPECT_EQ((*r)[2], (std::pair<std::string, int64_t>("\"q\\", -7)));
  EXPECT_EQ((*r)[3].first, "\n\t/\b\f\r");
  EXPECT_EQ((*r)[4].first, "\xF0\x9F\x99\x82"); // U+1F642 from a surrogate pair
  EXPECT_EQ((*r)[4].second, INT64_MAX);
  EXPECT_EQ((*r)[5].first, "\xC3\xA9");
  EXPECT_EQ((*r)[5].second, INT64_MIN);
}

TEST(JsonTest, EmptyObject) {
  StatusOr<StringIntEntries> r = parseStringIntObject("{}");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
}

// Verify that each malformed input is rejected with a message saying what
// is wrong and where.
TEST(JsonTest, Errors) {
  EXPECT_EQ(errorOf("{\"a\" 1}"), "line 1, column 6: expected ':', got '1'");
  EXPECT_EQ(errorOf("{\"a\": 1,\n \"b\": 2,}"), "line 2, column 9: expected '\"', got '}'");
  EXPECT_EQ(errorOf("{\"a\": 1.5}"),
            "line 1, column 8: expected an integer value, got a fraction or exponent");
  EXPECT_EQ(errorOf("{\"a\": 1e3}"),
            "line 1, column 8: expected an integer value, got a fraction or exponent");
  EXPECT_EQ(errorOf("{\"a\": \"x\"}"), "line 1, column 7: expected an integer value");
  EXPECT_EQ(errorOf("{\"a\": true}"), "line 1, column 7: expected an integer value");
  EXPECT_EQ(errorOf("{\"a\": 01}"), "line 1, column 7: leading zero in integer");
  EXPECT_EQ(errorOf("{\"a\": 9223372036854775808}"), "line 1, column 7: integer out of range");
  EXPECT_EQ(errorOf("{\"a\": 1, \"a\": 2}"), "line 1, column 16: duplicate key \"a\"");
  EXPECT_EQ(errorOf("{\"a\": 1} x"), "line 1, column 10: unexpected content after the object");
  EXPECT_EQ(errorOf("{\"a"), "line 1, column 4: unterminated string");
  EXPECT_EQ(errorOf("{\"\\x\": 1}"), "line 1, column 3: bad escape '\\x'");
  EXPECT_EQ(errorOf("{\"\\u12g4\": 1}"), "line 1, column 5: bad hex digit in \\u escape");
  EXPECT_EQ(errorOf("{\"\\ud83d\": 1}"),
            "line 1, column 9: high surrogate not followed by a low one");
  EXPECT_EQ(errorOf("{\"\\ude42\": 1}"), "line 1, column 9: lone low surrogate in \\u escape");
  EXPECT_EQ(errorOf("{\"a\tb\": 1}"), "line 1, column 4: control character in string");
  EXPECT_EQ(errorOf("{\"\xFF\": 1}"), "line 1, column 3: invalid UTF-8 in string");
  EXPECT_EQ(errorOf("[1]"), "line 1, column 1: expected '{', got '['");
  EXPECT_EQ(errorOf(""), "line 1, column 1: expected '{', got end of input");
  EXPECT_EQ(errorOf("{\"a\": 1"), "line 1, column 8: expected '}', got end of input");
}

} // namespace

namespace {

std::string valueErrorOf(std::string_view text) {
  StatusOr<JsonValue> r = parseJson(text);
  EXPECT_FALSE(r) << "accepted: " << text;
  return r ? "" : r.status().message();
}

TEST(JsonValueTest, ParsesEveryKindOfValue) {
  StatusOr<JsonValue> r = parseJson(
      R"({"a": [1, -2.5, 1e-05, 9007199254740993], "b": {"c": "x\u00e9"}, "t": true,
          "f": false, "n": null, "e": [], "o": {}}   )");
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->kind, JsonValue::Kind::Object);
  const JsonValue *a = r->find("a");
  ASSERT_TRUE(a && a->array.size() == 4);
  EXPECT_TRUE(a->array[0].isInteger);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_FALSE(a->array[1].isInteger);
  EXPECT_EQ(a->array[1].number, -2.5);
  EXPECT_EQ(a->array[2].number, 1e-5);
  // Beyond 2^53 a double would round; the integer is exact.
  EXPECT_EQ(a->array[3].integer, 9007199254740993);
  EXPECT_EQ(r->find("b")->find("c")->string, "x\xC3\xA9");
  EXPECT_TRUE(r->find("t")->boolean);
  EXPECT_EQ(r->find("f")->kind, JsonValue::Kind::Bool);
  EXPECT_FALSE(r->find("f")->boolean);
  EXPECT_EQ(r->find("n")->kind, JsonValue::Kind::Null);
  EXPECT_EQ(r->find("missing"), nullptr);
  EXPECT_EQ(r->object.front().first, "a"); // file order
}

TEST(JsonValueTest, RejectsWhatJsonForbids) {
  EXPECT_NE(valueErrorOf(R"({"a": 1, "a": 2})").find("duplicate key \"a\""), std::string::npos);
  EXPECT_NE(valueErrorOf("[1, 2").find("expected ']'"), std::string::npos);
  EXPECT_NE(valueErrorOf("{} x").find("unexpected content"), std::string::npos);
  EXPECT_NE(valueErrorOf("01").find("leading zero"), std::string::npos);
  EXPECT_NE(valueErrorOf("1.").find("digit after '.'"), std::string::npos);
  EXPECT_NE(valueErrorOf("tru").find("expected a JSON value"), std::string::npos);
  EXPECT_NE(valueErrorOf("").find("expected a JSON value"), std::string::npos);
  EXPECT_NE(valueErrorOf(std::string(100, '[')).find("nesting deeper than 64"),
            std::string::npos);
  EXPECT_EQ(valueErrorOf("{\n  \"a\": x}").rfind("line 2, column 8", 0), 0u);
}

TEST(JsonValueTest, QuotesForItsOwnReader) {
  std::string s = std::string("a\"b\\c\n\x01") + "\xC3\xA9";
  StatusOr<JsonValue> r = parseJson(quoteJson(s));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->string, s);
}

} // namespace
