//===- DirLock.cpp - one run at a time in a directory ---------------------===//

#include "runtime/support/DirLock.h"

#include "runtime/support/FileIO.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gptc {

StatusOr<std::unique_ptr<DirLock>> DirLock::acquire(const std::string &dir,
                                                    const std::string &name,
                                                    const std::string &what) {
  std::string path = dir + "/" + name;
  int fd = -1;
  // The holder removes the file when it ends: a lock taken on a file that
  // was just removed (or replaced) locks nothing, so take the new one.
  for (int attempt = 0;; ++attempt) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return Status::error(what + ": cannot open the lock file " + path + ": " + errnoText());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      if (err == EWOULDBLOCK) {
        char holder[256] = {};
        ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
        ::close(fd);
        std::string who = n > 0 ? std::string(holder, size_t(n)) : std::string("another process");
        while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
          who.pop_back();
        return Status::error(what + " is in use by another run (" + who + ", lock " + path +
                             "): wait for it to end, or give another directory");
      }
      ::close(fd);
      // NFS without lockd and the like: no lock to take, nothing to refuse.
      if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS)
        return std::unique_ptr<DirLock>(new DirLock("", -1));
      return Status::error(what + ": cannot lock " + path + ": " + std::strerror(err));
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 &&
        held.st_dev == now.st_dev && held.st_ino == now.st_ino)
      break;
    ::close(fd);
    if (attempt == 100)
      return Status::error(what + ": cannot lock " + path + ": it keeps being replaced");
  }
  char host[256] = "unknown host";
  ::gethostname(host, sizeof(host) - 1);
  char since[32] = "";
  std::time_t now = std::time(nullptr);
  std::tm utc;
  if (::gmtime_r(&now, &utc))
    std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string holder = "pid " + std::to_string(::getpid()) + " on host " + host + " since " +
                       since + "\n";
  // Who holds it is for the message only: a failed write is no failure.
  if (::ftruncate(fd, 0) == 0)
    (void)!::pwrite(fd, holder.data(), holder.size(), 0);
  return std::unique_ptr<DirLock>(new DirLock(path, fd));
}

DirLock::~DirLock() {
  // Removed while still held, so a run that opens it now retries (above).
  if (fd_ >= 0) {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
}

} // namespace gptc
