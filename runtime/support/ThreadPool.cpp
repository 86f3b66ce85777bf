//===- ThreadPool.cpp - a small persistent pool for the Host target ------===//

#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace gptc {

namespace {
// Set on pool threads, and on a caller while its tasks run: a nested
// parallelFor runs serially instead of waiting for itself.
thread_local bool inPool = false;
} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::runTasks() {
  size_t finished = 0;
  for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count_; ++finished)
    (*fn_)(i);
  std::lock_guard<std::mutex> lock(mutex_);
  done_ += finished;
}

void ThreadPool::work() {
  inPool = true;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_)
      return;
    seen = generation_;
    if (!fn_) // that job finished before this thread woke
      continue;
    ++active_;
    lock.unlock();
    runTasks();
    lock.lock();
    if (--active_ == 0 && done_ == count_)
      finished_.notify_all();
  }
}

void ThreadPool::parallelFor(size_t count, const std::function<void(size_t)> &fn) {
  std::unique_lock<std::mutex> owner(busy_, std::defer_lock);
  if (count <= 1 || workers_.empty() || inPool || !owner.try_lock()) {
    for (size_t i = 0; i < count; ++i)
      fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    count_ = count;
    next_.store(0, std::memory_order_relaxed);
    done_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  inPool = true;
  runTasks();
  inPool = false;
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers still inside the job may yet read fn_: wait for them to leave.
  finished_.wait(lock, [&] { return done_ == count_ && active_ == 0; });
  fn_ = nullptr;
}

unsigned ThreadPool::hostThreads() {
  if (const char *env = std::getenv("GPTC_HOST_THREADS")) {
    char *end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 1024)
      return unsigned(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

namespace {
std::unique_ptr<ThreadPool> &hostPool() {
  static std::unique_ptr<ThreadPool> pool = std::make_unique<ThreadPool>(ThreadPool::hostThreads());
  return pool;
}
} // namespace

ThreadPool &ThreadPool::host() { return *hostPool(); }

void ThreadPool::setHostThreads(unsigned threads) {
  hostPool() = std::make_unique<ThreadPool>(std::max(threads, 1u));
}

} // namespace gptc
