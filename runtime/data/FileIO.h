//===- FileIO.h - whole-file reads and writes with readable errors --------===//

#ifndef GPTC_RUNTIME_DATA_FILEIO_H
#define GPTC_RUNTIME_DATA_FILEIO_H

#include "runtime/support/FileIO.h"

#include <string>
#include <string_view>

namespace gptc::data {

/// All of `path` (runtime/support/FileIO.h).
using gptc::readFile;

/// Writes `path` through a temporary file of a unique name renamed into
/// place (writeFileAtomically), so a failed or interrupted write never
/// leaves a truncated file behind, and two writers never share one.
Status writeFile(const std::string &path, std::string_view contents);

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_FILEIO_H
