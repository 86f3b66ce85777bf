//===- GemmAlgoFile.cpp - cuBLASLt algorithm choices on disk --------------===//

#include "runtime/blas/GemmAlgoFile.h"

#include "runtime/support/FileIO.h"

#include <cstdio>
#include <sstream>

namespace gptc::blas {

namespace {

constexpr const char *kMagic = "gptc-gemm-algos 1";

bool parseWord(const std::string &hex, uint64_t &out) {
  if (hex.size() != 16)
    return false;
  out = 0;
  for (char c : hex) {
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (v < 0)
      return false;
    out = out << 4 | uint64_t(v);
  }
  return true;
}

} // namespace

std::string formatGemmAlgos(const GemmAlgoFile &file) {
  std::string text = std::string(kMagic) + "\ncublaslt " + file.cublasLt + "\ndevice " +
                     file.device + "\n";
  for (const auto &[key, words] : file.algos) {
    text += "algo " + key;
    for (uint64_t w : words) {
      char hex[17];
      std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(w));
      text += std::string(" ") + hex;
    }
    text += "\n";
  }
  return text;
}

StatusOr<GemmAlgoFile> parseGemmAlgos(const std::string &text, const std::string &path) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto bad = [&](const std::string &why) {
    return Status::error(path + ":" + std::to_string(number) + ": " + why);
  };
  GemmAlgoFile file;
  auto header = [&](const char *field, std::string &value) -> Status {
    ++number;
    std::string prefix = std::string(field) + " ";
    if (!std::getline(in, line) || line.compare(0, prefix.size(), prefix) != 0 ||
        line.size() == prefix.size())
      return bad(std::string("expected '") + field + " <value>'");
    value = line.substr(prefix.size());
    return Status::ok();
  };
  ++number;
  if (!std::getline(in, line) || line != kMagic)
    return bad(std::string("not a GEMM algorithm file (its first line is not '") + kMagic + "')");
  if (Status s = header("cublaslt", file.cublasLt); !s)
    return s;
  if (Status s = header("device", file.device); !s)
    return s;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty())
      continue;
    std::istringstream fields(line);
    std::string tag, key, word, extra;
    fields >> tag >> key;
    if (tag != "algo" || key.empty())
      return bad("expected 'algo <key> <8 words>'");
    std::array<uint64_t, 8> words{};
    for (uint64_t &w : words)
      if (!(fields >> word) || !parseWord(word, w))
        return bad("an algorithm is 8 words of 16 lowercase hex digits");
    if (fields >> extra)
      return bad("more than 8 words after '" + key + "'");
    if (!file.algos.emplace(key, words).second)
      return bad("a second algorithm for '" + key + "'");
  }
  return file;
}

StatusOr<GemmAlgoFile> readGemmAlgos(const std::string &path) {
  StatusOr<std::string> text = readFile(path);
  if (!text)
    return text.status();
  return parseGemmAlgos(*text, path);
}

Status writeGemmAlgos(const std::string &path, const GemmAlgoFile &file) {
  return writeFileAtomically(path, formatGemmAlgos(file));
}

Status checkGemmAlgosMatch(const GemmAlgoFile &file, const std::string &path,
                           const std::string &cublasLt, const std::string &device) {
  if (file.cublasLt != cublasLt || file.device != device)
    return Status::error(path + ": its algorithms were chosen by cuBLASLt " + file.cublasLt +
                         " on " + file.device + ", this run has cuBLASLt " + cublasLt + " on " +
                         device + "; remove the file to choose again");
  return Status::ok();
}

} // namespace gptc::blas
