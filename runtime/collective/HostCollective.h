//===- HostCollective.h - simulated ranks in threads of one process -------===//
//
// A HostGroup of N ranks hands out one Collective per rank; each rank runs
// in its own thread (with its own Host-backend session) and the ranks
// reduce through shared memory. The result is deterministic: every element
// is summed in rank order 0..N-1 (then divided by N for a mean), whatever
// the thread timing.
//
// reduceScatter gives each rank the slice of allReduce's result that it
// owns, bit for bit; allGather has each rank copy every rank's source into
// its own destination (so in place, where a rank's source is its own slice
// of its destination, nothing another rank reads is overwritten).
//
// If a rank fails outside a collective, abort() releases the others: their
// pending and later collective calls return an error instead of waiting.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVE_HOSTCOLLECTIVE_H
#define GPTC_RUNTIME_COLLECTIVE_HOSTCOLLECTIVE_H

#include "runtime/collective/Collective.h"

#include <condition_variable>
#include <memory>
#include <mutex>

namespace gptc {

class HostGroup {
public:
  explicit HostGroup(int size);
  int size() const { return size_; }
  /// The collective of `rank` (0 <= rank < size); the group must outlive it.
  std::unique_ptr<Collective> member(int rank);
  /// Makes every waiting and later collective call fail.
  void abort();

private:
  friend class HostMember;
  /// Waits until every rank arrives; false once aborted.
  bool barrier();

  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  bool aborted_ = false;
  /// What each rank passed to its current call (by rank).
  enum class Call { AllReduce, ReduceScatter, AllGather };
  struct Posted {
    Call call = Call::AllReduce;
    const std::vector<Collective::Buffer> *src = nullptr; // allReduce's buffers
    const std::vector<Collective::Buffer> *dst = nullptr; // null for allReduce
  };
  std::vector<Posted> posted_;
};

} // namespace gptc

#endif // GPTC_RUNTIME_COLLECTIVE_HOSTCOLLECTIVE_H
