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

uint64_t defaultMaxReadBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return uint64_t(1) << 40;
  return uint64_t(pages) * uint64_t(pageSize);
}

static std::string sizeText(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(text, sizeof(text), "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(text, sizeof(text), "%.1f MiB", double(bytes) / double(uint64_t(1) << 20));
  else
    std::snprintf(text, sizeof(text), "%llu bytes", (unsigned long long)bytes);
  return text;
}

Status checkInputFile(const std::string &path, uint64_t maxBytes, const std::string &what) {
  std::string name = what.empty() ? path : what + " " + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(name + ": " + errnoText());
  if (S_ISDIR(st.st_mode))
    return Status::error(name + ": is a directory");
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return Status::error(name + ": is a device, not a file");
  if (S_ISFIFO(st.st_mode))
    return Status::ok(); // a shell's <(...): bounded while read
  if (!S_ISREG(st.st_mode))
    return Status::error(name + ": is not a regular file");
  if (uint64_t(st.st_size) > maxBytes)
    return Status::error(name + ": is " + sizeText(uint64_t(st.st_size)) + ", over the " +
                         sizeText(maxBytes) + " this input may be");
  return Status::ok();
}

StatusOr<std::string> readFile(const std::string &path) {
  return readFile(path, defaultMaxReadBytes());
}

StatusOr<std::string> readFile(const std::string &path, uint64_t maxBytes) {
  if (Status s = checkInputFile(path, maxBytes); !s)
    return s;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error(path + ": " + std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  bool tooLong = false;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
    // A pipe, or a file that grows while read.
    if (contents.size() + n > maxBytes) {
      tooLong = true;
      break;
    }
    contents.append(buffer, n);
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (tooLong)
    return Status::error(path + ": longer than the " + sizeText(maxBytes) + " this input may be");
  if (failed)
    return Status::error(path + ": read error");
  return contents;
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Status checkOutputIsNotInput(const std::string &output, const std::vector<std::string> &inputs) {
  for (const std::string &input : inputs)
    if (sameFile(output, input))
      return Status::error(output + ": is the input " + (input == output ? "" : input + " ") +
                           "itself (same file); writing it would destroy the input: choose "
                           "another output");
  return Status::ok();
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
