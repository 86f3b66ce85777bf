//===- Austen.cpp - Jane Austen's novels from r-cran-janeaustenr ----------===//

#include "runtime/data/Austen.h"

#include "runtime/data/FileIO.h"
#include "runtime/data/Unicode.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

namespace gptc::data {
namespace {

// R's SEXP types and the CHARSXP encoding bit (serialize.c, Rinternals.h).
constexpr int kCharSxp = 9;
constexpr int kStrSxp = 16;
constexpr uint32_t kLatin1Flag = (1u << 2) << 12;

/// Inflates the zlib stream at the start of `in`, which must hold exactly
/// `expected` bytes; output grows in chunks, so a corrupt length cannot
/// make it allocate more than the stream really holds.
bool inflateRecord(std::string_view in, size_t expected, std::string &out, size_t &consumed,
                   std::string &error) {
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) {
    error = "zlib inflateInit failed";
    return false;
  }
  zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), std::numeric_limits<uInt>::max()));
  out.clear();
  char chunk[1 << 16];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef *>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    size_t got = sizeof(chunk) - zs.avail_out;
    if (out.size() + got > expected) {
      rc = Z_MEM_ERROR; // reported below as "longer than declared"
      break;
    }
    out.append(chunk, got);
  } while (rc == Z_OK);
  consumed = zs.total_in;
  std::string reason = zs.msg ? zs.msg : "zlib status " + std::to_string(rc);
  inflateEnd(&zs);
  if (rc == Z_STREAM_END && out.size() == expected)
    return true;
  if (rc == Z_STREAM_END)
    error = "the zlib stream holds " + std::to_string(out.size()) +
            " bytes, not the declared " + std::to_string(expected);
  else if (rc == Z_MEM_ERROR)
    error = "the zlib stream is longer than its declared " + std::to_string(expected) +
            " bytes";
  else if (rc == Z_BUF_ERROR)
    error = "truncated zlib stream (" + std::to_string(out.size()) + " of " +
            std::to_string(expected) + " bytes)";
  else
    error = "bad zlib stream (" + reason + ")";
  return false;
}

/// A big-endian reader over one decompressed serialization.
class XdrReader {
public:
  XdrReader(std::string_view input, std::string &errorOut) : data(input), error(errorOut) {}

  bool readInt(int32_t &v) {
    if (!need(4))
      return false;
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i)
      u = (u << 8) | static_cast<uint8_t>(data[pos + i]);
    v = static_cast<int32_t>(u);
    pos += 4;
    return true;
  }
  bool readBytes(size_t n, std::string_view &out) {
    if (!need(n))
      return false;
    out = data.substr(pos, n);
    pos += n;
    return true;
  }
  bool fail(const std::string &message) {
    error = message + " at byte " + std::to_string(pos);
    return false;
  }

private:
  bool need(size_t n) {
    if (data.size() - pos >= n)
      return true;
    return fail("truncated R serialization");
  }
  std::string_view data;
  std::string &error;
  size_t pos = 0;
};

bool parseStringVector(std::string_view payload, RStringVector &strings,
                       std::string &error) {
  XdrReader r(payload, error);
  std::string_view magic;
  if (!r.readBytes(2, magic))
    return false;
  if (magic != "X\n")
    return r.fail("not an XDR R serialization (expected \"X\\n\")");
  int32_t version, writer, minReader;
  if (!r.readInt(version) || !r.readInt(writer) || !r.readInt(minReader))
    return false;
  if (version != 2 && version != 3)
    return r.fail("unsupported R serialization version " + std::to_string(version));
  if (version == 3) {
    int32_t encodingLength;
    std::string_view encoding;
    if (!r.readInt(encodingLength))
      return false;
    if (encodingLength < 0 || !r.readBytes(encodingLength, encoding))
      return encodingLength < 0 ? r.fail("bad native encoding length") : false;
  }
  int32_t flags, length;
  if (!r.readInt(flags))
    return false;
  if ((flags & 0xFF) != kStrSxp)
    return r.fail("R object of type " + std::to_string(flags & 0xFF) +
                  ", not a character vector (16)");
  if (!r.readInt(length))
    return false;
  int64_t count = length;
  if (length == -1) { // a long vector: two more ints
    int32_t hi, lo;
    if (!r.readInt(hi) || !r.readInt(lo))
      return false;
    count = (int64_t(uint32_t(hi)) << 32) | uint32_t(lo);
  }
  if (count < 0 || uint64_t(count) > payload.size() / 8)
    return r.fail("implausible vector length " + std::to_string(count));
  strings.clear();
  strings.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    int32_t charFlags, charLength;
    if (!r.readInt(charFlags) || !r.readInt(charLength))
      return false;
    if ((charFlags & 0xFF) != kCharSxp)
      return r.fail("element " + std::to_string(i) + " is not a CHARSXP");
    if (charLength == -1)
      return r.fail("element " + std::to_string(i) + " is NA");
    std::string_view bytes;
    if (charLength < 0 || !r.readBytes(charLength, bytes))
      return charLength < 0 ? r.fail("bad string length") : false;
    std::string s;
    if (uint32_t(charFlags) & kLatin1Flag) {
      for (unsigned char c : bytes)
        appendUtf8(c, s);
    } else {
      s.assign(bytes);
    }
    strings.push_back(std::move(s));
  }
  return true;
}

std::string upper(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

} // namespace

StatusOr<std::vector<RStringVector>> parseRdbStringVectors(std::string_view contents) {
  std::vector<RStringVector> records;
  for (size_t pos = 0; pos < contents.size();) {
    std::string where = "record " + std::to_string(records.size()) + " (offset " +
                        std::to_string(pos) + "): ";
    if (contents.size() - pos < 4)
      return Status::error(where + "truncated length prefix");
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i)
      length = (length << 8) | static_cast<uint8_t>(contents[pos + i]);
    pos += 4;
    std::string payload, error;
    size_t consumed;
    RStringVector strings;
    if (!inflateRecord(contents.substr(pos), length, payload, consumed, error) ||
        !parseStringVector(payload, strings, error))
      return Status::error(where + error);
    pos += consumed;
    records.push_back(std::move(strings));
  }
  if (records.empty())
    return Status::error("no records");
  return records;
}

StatusOr<std::vector<Novel>> parseAustenNovels(std::string_view rdbContents) {
  static const char *const kTitles[] = {"Emma", "Mansfield Park", "Northanger Abbey",
                                        "Persuasion", "Pride and Prejudice",
                                        "Sense and Sensibility"};
  StatusOr<std::vector<RStringVector>> records = parseRdbStringVectors(rdbContents);
  if (!records)
    return records.status();
  if (records->size() != 6)
    return Status::error(std::to_string(records->size()) + " records, expected the 6 novels");
  std::vector<Novel> novels;
  for (size_t i = 0; i < records->size(); ++i) {
    const RStringVector &lines = (*records)[i];
    std::string first = lines.empty() ? "" : upper(lines[0]);
    const char *const *title = std::find_if(
        std::begin(kTitles), std::end(kTitles), [&](const char *t) { return upper(t) == first; });
    if (title == std::end(kTitles))
      return Status::error("record " + std::to_string(i) + " starts with \"" +
                           (lines.empty() ? "" : lines[0].substr(0, 60)) +
                           "\", not a known title");
    for (const Novel &other : novels)
      if (other.title == *title)
        return Status::error("\"" + other.title + "\" appears twice");
    Novel novel;
    novel.title = *title;
    novel.lines = lines.size();
    for (const std::string &line : lines) {
      novel.text += line;
      novel.text += '\n';
    }
    size_t bad = findInvalidUtf8(novel.text);
    if (bad != novel.text.size())
      return Status::error(novel.title + ": invalid UTF-8 at byte " + std::to_string(bad));
    novels.push_back(std::move(novel));
  }
  return novels;
}

StatusOr<std::vector<Novel>> readAustenNovels(const std::string &rdbPath) {
  StatusOr<std::string> contents = readFile(rdbPath);
  if (!contents)
    return contents.status();
  StatusOr<std::vector<Novel>> novels = parseAustenNovels(*contents);
  if (!novels)
    return Status::error(rdbPath + ": " + novels.status().message());
  return novels;
}

} // namespace gptc::data
