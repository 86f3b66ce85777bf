//===- FileIO.cpp - whole-file reads, and files replaced whole ------------===//

#include "runtime/support/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc {

std::string errnoText() { return std::strerror(errno); }

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

std::string dirName(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size) {
    ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t(1) << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::error("write failed: " + errnoText());
    p += n;
    size -= size_t(n);
  }
  return Status::ok();
}

Status writeAtomically(const std::string &path, const std::function<Status(int fd)> &body) {
  std::string dir = dirName(path);
  std::string tmpl = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    return Status::error(path + ": cannot create a temporary file in " + dir + ": " + errnoText());
  Status s = body(fd);
  if (s && ::fsync(fd) != 0)
    s = Status::error("fsync failed: " + errnoText());
  if (::close(fd) != 0 && s)
    s = Status::error("close failed: " + errnoText());
  if (s && ::rename(tmpl.c_str(), path.c_str()) != 0)
    s = Status::error("cannot rename " + tmpl + " into place: " + errnoText());
  if (!s) {
    ::unlink(tmpl.c_str());
    return Status::error(path + ": " + s.message());
  }
  // The rename is durable once the directory is.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0)
    return Status::error(dir + ": cannot open to fsync: " + errnoText());
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0)
    return Status::error(dir + ": fsync failed: " + errnoText());
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, std::string_view contents) {
  return writeAtomically(path,
                         [&](int fd) { return writeAll(fd, contents.data(), contents.size()); });
}

} // namespace gptc
