//===- FileIO.h - whole-file reads, and files replaced whole or not at all -===//
//
// readFile reads a file whole, with errors that name it. writeAtomically
// writes a temporary file in the destination's directory, fsyncs it,
// renames it over the destination and fsyncs the directory, so a crash
// leaves either the old file or the new one, never a partial one.
// Checkpoints and gptrun's GEMM algorithm file are written this way.
// checkInputFile and checkOutputIsNotInput guard a tool's files before it
// reads or writes them: no device or endless input, no output that is one
// of its inputs (by inode, so a symlink or hard link does not hide it).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_FILEIO_H
#define GPTC_RUNTIME_SUPPORT_FILEIO_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gptc {

/// The most readFile reads unless told a bound: this machine's memory
/// (a file larger than that cannot be held whole anyway).
uint64_t defaultMaxReadBytes();

/// An error unless `path` is a file to read whole: a regular file of at
/// most `maxBytes` bytes, or a pipe (bounded while it is read). A device
/// (/dev/zero never ends), directory or socket is refused. `what` names
/// the file's role in the error ("executable", "--data").
Status checkInputFile(const std::string &path, uint64_t maxBytes, const std::string &what = "");

/// All of `path`, checked by checkInputFile first; errors name the file and
/// the reason.
StatusOr<std::string> readFile(const std::string &path);
StatusOr<std::string> readFile(const std::string &path, uint64_t maxBytes);

/// Whether `a` and `b` name one existing file: same st_dev and st_ino after
/// following symlinks, so "x", "./x", a symlink to x and a hard link all
/// match. False when either does not exist.
bool sameFile(const std::string &a, const std::string &b);

/// An error naming both when `output` is one of `inputs` (sameFile): writing
/// it would destroy the input. Call before reading anything.
Status checkOutputIsNotInput(const std::string &output, const std::vector<std::string> &inputs);

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
