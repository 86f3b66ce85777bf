//===- BatchStage.h - double-buffered training batches in host memory -----===//
//
// Two host buffers (page-locked when the allocator gives such memory), each
// holding one step's batch: accum_steps micro-batches of tokens and
// targets, as DataLoader::next fills them. While the device copies from
// one, the other already holds the next batch, read from the loader when
// its slot came back: the step loop never waits for the data.
//
// The batches are the loader's, in its order, bit for bit; the stage only
// reads ahead, so the loader's position() runs up to two steps early. Each
// batch carries the position after it, which is what a checkpoint of that
// step must store.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_BATCHSTAGE_H
#define GPTC_RUNTIME_DATA_BATCHSTAGE_H

#include "runtime/data/DataLoader.h"

#include <functional>
#include <memory>

namespace gptc::data {

/// Where the buffers come from; the default is plain malloc/free.
struct HostAllocator {
  std::function<StatusOr<void *>(size_t)> allocate;
  std::function<void(void *)> release;
};

class BatchStage {
public:
  static constexpr int kSlots = 2;

  struct Batch {
    int slot = -1;
    int32_t *tokens = nullptr;  // accum * B * T ids, row-major (accum, B, T)
    int32_t *targets = nullptr; // the same shape
    uint64_t position = 0;      // the loader's position() after this batch
  };

  /// Fills both slots from `loader`'s current position; `loader` must
  /// outlive the stage and is read only by it from now on.
  static StatusOr<std::unique_ptr<BatchStage>> create(DataLoader &loader, int64_t accum,
                                                      HostAllocator allocator = {});
  ~BatchStage();
  BatchStage(const BatchStage &) = delete;
  BatchStage &operator=(const BatchStage &) = delete;

  /// The next batch in order. Its slot stays the caller's until release();
  /// an error when that slot has not come back yet (two batches out), or
  /// when the loader found an id outside the vocabulary by that batch.
  StatusOr<Batch> acquire();
  /// Gives a slot back once nothing reads its buffers any more (the copy
  /// out of it has finished), in the order they were taken; the slot is
  /// refilled with the next batch not yet read.
  Status release(int slot);
  /// Drops the batches read ahead and continues at loader position
  /// `position`. No slot may be out.
  Status seek(uint64_t position);

  /// Tokens per buffer: accum * B * T.
  int64_t batchTokens() const { return tokens_; }

private:
  enum class State { Ready, Out };
  struct Slot {
    State state = State::Ready;
    int32_t *tokens = nullptr, *targets = nullptr;
    uint64_t position = 0;
    Status error = Status::ok(); // the loader's status() after this batch
  };
  BatchStage(DataLoader &loader, int64_t accum, HostAllocator allocator)
      : loader_(loader), accum_(accum), allocator_(std::move(allocator)) {}
  void fill(Slot &slot);

  DataLoader &loader_;
  int64_t accum_ = 1, tokens_ = 0;
  HostAllocator allocator_;
  Slot slots_[kSlots];
  uint64_t handedOut_ = 0; // batches acquired: the next comes from slot handedOut_ % 2
  uint64_t released_ = 0;  // slots given back
};

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_BATCHSTAGE_H
