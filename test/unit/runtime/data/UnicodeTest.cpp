//===- UnicodeTest.cpp - UTF-8 decoding and code point classes ------------===//

#include "runtime/data/Unicode.h"

#include <gtest/gtest.h>

using namespace gptc::data;

namespace {

// Verify that the generated tables give the classes the GPT-2 regex uses.
TEST(UnicodeTest, Classes) {
  for (uint32_t cp : {uint32_t('a'), uint32_t('Z'), 0xE9u /* é */, 0x65E5u /* 日 */,
                      0x3DBu /* ϛ */, 0x1D400u /* 𝐀 */, 0x2B0u /* ʰ Lm */})
    EXPECT_EQ(classify(cp), CharClass::Letter) << std::hex << cp;
  for (uint32_t cp : {uint32_t('0'), uint32_t('9'), 0x663u /* Arabic-Indic 3 */,
                      0x216Bu /* Ⅻ Nl */, 0xBDu /* ½ No */, 0xB2u /* ² No */})
    EXPECT_EQ(classify(cp), CharClass::Number) << std::hex << cp;
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u,
                      0x2000u, 0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    EXPECT_EQ(classify(cp), CharClass::Space) << std::hex << cp;
  // U+001C..1F pass str.isspace() but are not White_Space; U+200B and
  // U+FEFF are not White_Space either. Marks, symbols and emoji are "other".
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0x200Bu, 0xFEFFu, uint32_t('!'), uint32_t('\''),
                      0x301u /* combining acute */, 0x2014u /* — */, 0x1F642u /* 🙂 */,
                      0x378u /* unassigned */, 0x10FFFFu})
    EXPECT_EQ(classify(cp), CharClass::Other) << std::hex << cp;
}

TEST(UnicodeTest, DecodesValidUtf8) {
  std::string s = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x99\x82";
  CodePoint c = decodeUtf8(s, 0);
  EXPECT_TRUE(c.valid);
  EXPECT_EQ(c.value, 'a');
  c = decodeUtf8(s, 1);
  EXPECT_EQ(c.value, 0xE9u);
  EXPECT_EQ(c.length, 2);
  c = decodeUtf8(s, 3);
  EXPECT_EQ(c.value, 0x65E5u);
  EXPECT_EQ(c.length, 3);
  c = decodeUtf8(s, 6);
  EXPECT_EQ(c.value, 0x1F642u);
  EXPECT_EQ(c.length, 4);
  EXPECT_EQ(findInvalidUtf8(s), s.size());
}

// Verify that each kind of malformed sequence decodes as one invalid byte.
TEST(UnicodeTest, RejectsInvalidUtf8) {
  for (std::string bad : {std::string("\x80"), std::string("\xC0\x80") /* overlong */,
                          std::string("\xE0\x80\xAF") /* overlong */,
                          std::string("\xED\xA0\x80") /* surrogate */,
                          std::string("\xF4\x90\x80\x80") /* > U+10FFFF */,
                          std::string("\xE6\x97") /* truncated */,
                          std::string("\xC3x") /* bad continuation */,
                          std::string("\xFF")}) {
    CodePoint c = decodeUtf8(bad, 0);
    EXPECT_FALSE(c.valid) << bad;
    EXPECT_EQ(c.length, 1);
    EXPECT_EQ(findInvalidUtf8("ok" + bad), 2u);
  }
}

TEST(UnicodeTest, AppendUtf8RoundTrips) {
  for (uint32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    appendUtf8(cp, s);
    CodePoint c = decodeUtf8(s, 0);
    EXPECT_TRUE(c.valid);
    EXPECT_EQ(c.value, cp);
    EXPECT_EQ(c.length, s.size());
  }
}

} // namespace
