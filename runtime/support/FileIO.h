//===- FileIO.h - whole-file reads, and files replaced whole or not at all -===//
//
// readFile reads a file whole, with errors that name it. writeAtomically
// writes a temporary file in the destination's directory, fsyncs it,
// renames it over the destination and fsyncs the directory, so a crash
// leaves either the old file or the new one, never a partial one.
// Checkpoints and gptrun's GEMM algorithm file are written this way.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_FILEIO_H
#define GPTC_RUNTIME_SUPPORT_FILEIO_H

#include "runtime/support/Status.h"

#include <functional>
#include <string>
#include <string_view>

namespace gptc {

/// All of `path`; errors name the file and the reason.
StatusOr<std::string> readFile(const std::string &path);

/// Writes `path` atomically: `body` writes the contents to the open
/// temporary file's descriptor. Errors name `path` (or its directory).
Status writeAtomically(const std::string &path, const std::function<Status(int fd)> &body);

/// writeAtomically with `contents` as the body.
Status writeFileAtomically(const std::string &path, std::string_view contents);

/// Writes all of `size` bytes to `fd`, retrying short writes and EINTR.
Status writeAll(int fd, const void *data, size_t size);

/// The directory part of `path` ("." for a bare name).
std::string dirName(const std::string &path);

/// strerror(errno).
std::string errnoText();

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_FILEIO_H
