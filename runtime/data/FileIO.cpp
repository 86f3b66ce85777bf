//===- FileIO.cpp - whole-file writes with readable errors ----------------===//

#include "runtime/data/FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gptc::data {

Status writeFile(const std::string &path, std::string_view contents) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::error(path + ": " + std::strerror(errno));
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::error(path + ": write failed: " + reason);
  }
  return Status::ok();
}

} // namespace gptc::data
