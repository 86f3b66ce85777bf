//===- BatchStage.cpp - double-buffered training batches in host memory ---===//

#include "runtime/data/BatchStage.h"

#include <cstdlib>

namespace gptc::data {

StatusOr<std::unique_ptr<BatchStage>> BatchStage::create(DataLoader &loader, int64_t accum,
                                                         HostAllocator allocator) {
  if (accum <= 0)
    return Status::error("accum_steps must be positive, got " + std::to_string(accum));
  if (!allocator.allocate || !allocator.release) {
    allocator.allocate = [](size_t bytes) -> StatusOr<void *> {
      if (void *p = std::malloc(bytes))
        return p;
      return Status::error("cannot allocate " + std::to_string(bytes) + " bytes for batches");
    };
    allocator.release = [](void *p) { std::free(p); };
  }
  std::unique_ptr<BatchStage> stage(new BatchStage(loader, accum, std::move(allocator)));
  const DataLoaderOptions &o = loader.options();
  stage->tokens_ = accum * o.batchSize * o.seqLen;
  size_t bytes = size_t(stage->tokens_) * sizeof(int32_t);
  for (Slot &slot : stage->slots_)
    for (int32_t **buffer : {&slot.tokens, &slot.targets}) {
      StatusOr<void *> p = stage->allocator_.allocate(bytes);
      if (!p)
        return p.status();
      *buffer = static_cast<int32_t *>(*p);
    }
  for (Slot &slot : stage->slots_)
    stage->fill(slot);
  return stage;
}

BatchStage::~BatchStage() {
  for (Slot &slot : slots_)
    for (int32_t *buffer : {slot.tokens, slot.targets})
      if (buffer)
        allocator_.release(buffer);
}

void BatchStage::fill(Slot &slot) {
  const int64_t micro = loader_.options().batchSize * loader_.options().seqLen;
  for (int64_t a = 0; a < accum_; ++a)
    loader_.next(slot.tokens + a * micro, slot.targets + a * micro);
  slot.position = loader_.position();
  slot.error = loader_.status();
  slot.state = State::Ready;
}

StatusOr<BatchStage::Batch> BatchStage::acquire() {
  int index = int(handedOut_ % kSlots);
  Slot &slot = slots_[index];
  if (slot.state == State::Out)
    return Status::error("batch slot " + std::to_string(index) +
                         " is still in use: release it before taking another batch");
  if (!slot.error)
    return slot.error; // an id outside the vocabulary: never hand it to a step
  slot.state = State::Out;
  ++handedOut_;
  return Batch{index, slot.tokens, slot.targets, slot.position};
}

Status BatchStage::release(int index) {
  if (index < 0 || index >= kSlots || slots_[index].state != State::Out)
    return Status::error("batch slot " + std::to_string(index) + " was not handed out");
  // In order, so that each refill (the batch after the newest one read)
  // lands in the slot acquire() reaches after the other one.
  if (index != int(released_ % kSlots))
    return Status::error("batch slot " + std::to_string(index) +
                         " released before slot " + std::to_string(released_ % kSlots) +
                         ", which was taken first");
  fill(slots_[index]);
  ++released_;
  return Status::ok();
}

Status BatchStage::seek(uint64_t position) {
  for (int i = 0; i < kSlots; ++i)
    if (slots_[i].state == State::Out)
      return Status::error("cannot seek the batches while slot " + std::to_string(i) +
                           " is in use");
  loader_.seek(position);
  // Fill in hand-out order, so the next acquire() gets the batch at
  // `position`.
  for (int i = 0; i < kSlots; ++i)
    fill(slots_[(handedOut_ + i) % kSlots]);
  return Status::ok();
}

} // namespace gptc::data
