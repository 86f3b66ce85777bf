//===- TokenFile.cpp - llm.c token files (.bin) ---------------------------===//

#include "runtime/data/TokenFile.h"

#include "runtime/data/FileIO.h"

namespace gptc::data {
namespace {

int32_t readLE32(std::string_view bytes, size_t offset) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return static_cast<int32_t>(v);
}

void appendLE32(std::string &out, int32_t value) {
  uint32_t v = static_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

/// Other llm.c files, so that passing one by mistake says what it is.
const char *describeMagic(int32_t magic) {
  switch (magic) {
  case 20240801: return "a llama-3 token file (uint32 tokens), not a GPT-2 one";
  case 20240522: return "an llm.c eval file (HellaSwag/MMLU)";
  case 20240326: return "an llm.c model checkpoint";
  case 20240327: return "an llm.c debug state";
  case 20240328: return "an llm.c tokenizer file";
  case 20240527: return "an llm.c training state";
  default: return nullptr;
  }
}

} // namespace

StatusOr<int64_t> parseTokenFileHeader(std::string_view header, uint64_t fileSize) {
  if (fileSize < kTokenFileHeaderBytes || header.size() < kTokenFileHeaderBytes)
    return Status::error("too short for the " + std::to_string(kTokenFileHeaderBytes) +
                         "-byte header (" + std::to_string(fileSize) + " bytes)");
  int32_t magic = readLE32(header, 0), version = readLE32(header, 4),
          count = readLE32(header, 8);
  if (magic != kTokenFileMagic) {
    std::string message = "bad magic " + std::to_string(magic) + ", expected " +
                          std::to_string(kTokenFileMagic) + " (llm.c GPT-2 token file)";
    if (const char *what = describeMagic(magic))
      message += std::string("; this is ") + what;
    return Status::error(message);
  }
  if (version != kTokenFileVersion)
    return Status::error("unsupported version " + std::to_string(version) + ", expected " +
                         std::to_string(kTokenFileVersion));
  if (count < 0)
    return Status::error("negative token count " + std::to_string(count) + " in the header");
  uint64_t expected = kTokenFileHeaderBytes + 2 * uint64_t(count);
  if (fileSize != expected)
    return Status::error("the header says " + std::to_string(count) + " tokens (" +
                         std::to_string(expected) + " bytes) but the file has " +
                         std::to_string(fileSize) + " bytes");
  return int64_t(count);
}

StatusOr<std::vector<uint16_t>> parseTokenFile(std::string_view contents, int64_t vocabSize) {
  StatusOr<int64_t> header = parseTokenFileHeader(contents, contents.size());
  if (!header)
    return header.status();
  const int64_t count = *header;
  std::vector<uint16_t> tokens(count);
  for (int64_t i = 0; i < count; ++i) {
    size_t at = kTokenFileHeaderBytes + 2 * size_t(i);
    uint16_t t = static_cast<uint16_t>(static_cast<uint8_t>(contents[at]) |
                                       (static_cast<uint8_t>(contents[at + 1]) << 8));
    if (vocabSize > 0 && t >= vocabSize)
      return Status::error("token " + std::to_string(t) + " at index " + std::to_string(i) +
                           " is outside the vocabulary (size " + std::to_string(vocabSize) +
                           ")");
    tokens[i] = t;
  }
  return tokens;
}

StatusOr<std::vector<uint16_t>> readTokenFile(const std::string &path, int64_t vocabSize) {
  StatusOr<std::string> contents = readFile(path);
  if (!contents)
    return contents.status();
  StatusOr<std::vector<uint16_t>> tokens = parseTokenFile(*contents, vocabSize);
  if (!tokens)
    return Status::error(path + ": " + tokens.status().message());
  return tokens;
}

StatusOr<std::string> serializeTokenFile(const std::vector<int32_t> &tokens) {
  if (tokens.size() >= (size_t(1) << 31))
    return Status::error(std::to_string(tokens.size()) +
                         " tokens do not fit one file (limit 2^31 - 1)");
  std::string contents;
  contents.reserve(kTokenFileHeaderBytes + 2 * tokens.size());
  appendLE32(contents, kTokenFileMagic);
  appendLE32(contents, kTokenFileVersion);
  appendLE32(contents, static_cast<int32_t>(tokens.size()));
  contents.resize(kTokenFileHeaderBytes, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 0xFFFF)
      return Status::error("token " + std::to_string(tokens[i]) + " at index " +
                           std::to_string(i) + " does not fit uint16");
    contents += static_cast<char>(tokens[i] & 0xFF);
    contents += static_cast<char>(tokens[i] >> 8);
  }
  return contents;
}

Status writeTokenFile(const std::string &path, const std::vector<int32_t> &tokens) {
  StatusOr<std::string> contents = serializeTokenFile(tokens);
  if (!contents)
    return Status::error(path + ": " + contents.status().message());
  return writeFile(path, *contents);
}

} // namespace gptc::data
