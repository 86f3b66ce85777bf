//===- FileIO.cpp - whole-file writes with readable errors ----------------===//

#include "runtime/data/FileIO.h"

namespace gptc::data {

Status writeFile(const std::string &path, std::string_view contents) {
  return writeFileAtomically(path, contents);
}

} // namespace gptc::data
