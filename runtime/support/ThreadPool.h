//===- ThreadPool.h - a small persistent pool for the Host target --------===//
//
// The Host target's GEMMs and kernel launches split their work into tasks
// that each own a disjoint part of the output, and run them here. Which
// thread runs a task never changes what it computes, so results are the
// same bits for any thread count.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_SUPPORT_THREADPOOL_H
#define GPTC_RUNTIME_SUPPORT_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gptc {

class ThreadPool {
public:
  /// `threads` counts the caller of parallelFor, which works too: a pool
  /// of 1 starts no thread.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return unsigned(workers_.size()) + 1; }

  /// Runs fn(i) for every i in [0, count) and returns when all are done.
  /// A call from inside a task, or while another thread's call holds the
  /// pool, runs its tasks on the calling thread.
  void parallelFor(size_t count, const std::function<void(size_t)> &fn);

  /// The Host target's pool: GPTC_HOST_THREADS threads if set (a whole
  /// number >= 1), else one per hardware thread.
  static ThreadPool &host();
  /// What host() uses: GPTC_HOST_THREADS, or hardware_concurrency.
  static unsigned hostThreads();
  /// Replaces host()'s pool with one of `threads` (tests that compare
  /// thread counts). Nothing may be using the old one.
  static void setHostThreads(unsigned threads);

private:
  void work();
  /// Runs tasks of the current job until none is left.
  void runTasks();

  std::vector<std::thread> workers_;
  std::mutex busy_; // held by the parallelFor that owns the workers
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  // The current job, published under mutex_ with a new generation.
  const std::function<void(size_t)> *fn_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  size_t done_ = 0;   // tasks finished, under mutex_
  unsigned active_ = 0; // workers inside the current job, under mutex_
  uint64_t generation_ = 0;
  bool stop_ = false;
};

} // namespace gptc

#endif // GPTC_RUNTIME_SUPPORT_THREADPOOL_H
