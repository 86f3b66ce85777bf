//===- TokenFile.h - llm.c token files (.bin) -----------------------------===//
//
// The format of llm.c's dev/data scripts, little-endian:
//   int32 header[256]: [0] = 20240520 (magic), [1] = 1 (version),
//                      [2] = token count N, the rest 0
//   uint16 tokens[N]
// Readers are strict: a file that is not exactly this is rejected with an
// error naming the file and what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_TOKENFILE_H
#define GPTC_RUNTIME_DATA_TOKENFILE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gptc::data {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;
constexpr size_t kTokenFileHeaderInts = 256;
constexpr size_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

/// Checks a token file's header (its first kTokenFileHeaderBytes bytes, or
/// fewer when the file is shorter) against the file's size in bytes and
/// returns the token count. Errors say what is wrong, without a file name.
StatusOr<int64_t> parseTokenFileHeader(std::string_view header, uint64_t fileSize);

/// Parses a token file's bytes. With vocabSize > 0, ids >= vocabSize are
/// errors as well. Errors say what is wrong, without a file name.
StatusOr<std::vector<uint16_t>> parseTokenFile(std::string_view contents,
                                               int64_t vocabSize = 0);

/// Reads `path`; errors start with the path.
StatusOr<std::vector<uint16_t>> readTokenFile(const std::string &path, int64_t vocabSize = 0);

/// The bytes of a token file; every id must be in 0..65535 and there must
/// be fewer than 2^31 of them.
StatusOr<std::string> serializeTokenFile(const std::vector<int32_t> &tokens);

/// Writes `path` (atomically, through a renamed temporary).
Status writeTokenFile(const std::string &path, const std::vector<int32_t> &tokens);

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_TOKENFILE_H
