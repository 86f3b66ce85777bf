//===- DirLock.h - one run at a time in a directory -----------------------===//
//
// A run that owns a directory (gptrun's checkpoint and log directories)
// holds an flock(2) on a lock file in it for its lifetime, and writes its
// pid, host and start time into the file so that a second run can say who
// holds it. The kernel drops the lock when its process dies, however it
// dies, so the lock of a killed run is simply taken over: no stale lock
// ever needs removing by hand. A run that ends removes the file.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_DIRLOCK_H
#define GPTC_RUNTIME_SUPPORT_DIRLOCK_H

#include "runtime/support/Status.h"

#include <memory>
#include <string>

namespace gptc {

class DirLock {
public:
  /// Locks `dir`/`name` (created if needed). When another live process
  /// holds it: an error "`what` is in use by pid P on host H since T".
  /// On a file system without flock the run goes on unlocked.
  static StatusOr<std::unique_ptr<DirLock>> acquire(const std::string &dir,
                                                    const std::string &name,
                                                    const std::string &what);
  ~DirLock();
  DirLock(const DirLock &) = delete;
  DirLock &operator=(const DirLock &) = delete;

  const std::string &path() const { return path_; }

private:
  DirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_DIRLOCK_H
