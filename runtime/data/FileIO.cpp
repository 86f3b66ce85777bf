//===- FileIO.cpp - whole-file reads and writes with readable errors ------===//

#include "runtime/data/FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace gptc::data {

StatusOr<std::string> readFile(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory");
  // A device never ends (/dev/zero, /dev/urandom): read until memory runs
  // out. Regular files and pipes (a shell's <(...)) are read whole.
  if (stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
    return Status::error(path + ": is a device, not a file");
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error(path + ": " + std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0)
    contents.append(buffer, n);
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed)
    return Status::error(path + ": read error");
  return contents;
}

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
