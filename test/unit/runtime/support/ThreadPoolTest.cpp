//===- ThreadPoolTest.cpp - the Host target's thread pool ----------------===//

#include "runtime/support/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace gptc;

namespace {

// Verify that every task runs exactly once, for pools of 1 to 4 threads and
// job sizes around the thread count, and that the pool is reusable.
TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  for (unsigned threads : {1u, 2u, 3u, 4u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t count : {0, 1, 2, 3, 7, 1000}) {
      std::vector<std::atomic<int>> runs(count);
      pool.parallelFor(count, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(runs[i].load(), 1) << threads << " threads, task " << i << " of " << count;
    }
  }
}

// Verify that a pool of 2 runs tasks on 2 threads when they wait for each
// other (a pool that ran them one by one would never finish this job).
TEST(ThreadPoolTest, UsesItsThreads) {
  ThreadPool pool(2);
  std::atomic<int> arrived{0};
  pool.parallelFor(2, [&](size_t) {
    arrived.fetch_add(1);
    while (arrived.load() < 2)
      std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 2);
}

// Verify that a task may call parallelFor (it runs serially there), and that
// two threads may share a pool: the one that finds it busy runs its own job.
TEST(ThreadPoolTest, NestedAndConcurrentCallsFinish) {
  ThreadPool pool(3);
  std::atomic<int> inner{0};
  pool.parallelFor(4, [&](size_t) { pool.parallelFor(5, [&](size_t) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 20);
  std::atomic<int> total{0};
  auto caller = [&] {
    for (int r = 0; r < 50; ++r)
      pool.parallelFor(16, [&](size_t) { total.fetch_add(1); });
  };
  std::thread other(caller);
  caller();
  other.join();
  EXPECT_EQ(total.load(), 2 * 50 * 16);
}

// Verify GPTC_HOST_THREADS: a whole number >= 1 sets the count, anything
// else falls back to the hardware's.
TEST(ThreadPoolTest, HostThreadsFromTheEnvironment) {
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  setenv("GPTC_HOST_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool::hostThreads(), 3u);
  for (const char *bad : {"0", "-2", "two", "3x", ""}) {
    setenv("GPTC_HOST_THREADS", bad, 1);
    EXPECT_EQ(ThreadPool::hostThreads(), hardware) << "'" << bad << "'";
  }
  unsetenv("GPTC_HOST_THREADS");
  EXPECT_EQ(ThreadPool::hostThreads(), hardware);
}

} // namespace
