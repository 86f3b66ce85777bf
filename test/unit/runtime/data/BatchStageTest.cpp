//===- BatchStageTest.cpp - double-buffered batches equal the loader's ----===//

#include "runtime/data/BatchStage.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace gptc;
using namespace gptc::data;

namespace {

/// Token i is i % 50000: distinct windows have distinct contents.
DataLoader loader(const DataLoaderOptions &o, size_t n = 5000) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = uint16_t(i % 50000);
  StatusOr<DataLoader> l = DataLoader::create(std::move(t), o);
  EXPECT_TRUE(l) << l.status().message();
  return std::move(*l);
}

DataLoaderOptions shuffled() {
  DataLoaderOptions o;
  o.batchSize = 3;
  o.seqLen = 7;
  o.shuffle = true;
  o.seed = 1234;
  o.rank = 1;
  o.worldSize = 2;
  return o;
}

/// The reference: `steps` steps of `accum` micro-batches straight from a
/// loader, with the position after each.
struct Step {
  std::vector<int32_t> tokens, targets;
  uint64_t position;
};
std::vector<Step> reference(const DataLoaderOptions &o, int64_t accum, int steps,
                            uint64_t start = 0, size_t n = 5000) {
  DataLoader l = loader(o, n);
  l.seek(start);
  const int64_t micro = o.batchSize * o.seqLen;
  std::vector<Step> out;
  for (int s = 0; s < steps; ++s) {
    Step st{std::vector<int32_t>(accum * micro), std::vector<int32_t>(accum * micro), 0};
    for (int64_t a = 0; a < accum; ++a)
      l.next(st.tokens.data() + a * micro, st.targets.data() + a * micro);
    st.position = l.position();
    out.push_back(std::move(st));
  }
  return out;
}

void expectBatch(const BatchStage::Batch &b, const Step &want, int64_t n, int step) {
  EXPECT_EQ(std::vector<int32_t>(b.tokens, b.tokens + n), want.tokens) << "step " << step;
  EXPECT_EQ(std::vector<int32_t>(b.targets, b.targets + n), want.targets) << "step " << step;
  EXPECT_EQ(b.position, want.position) << "step " << step;
}

// The pipelined pattern (take step s+1 before giving back step s) yields
// the loader's batches and positions, across epochs and reshuffles.
TEST(BatchStageTest, PipelinedBatchesEqualTheLoaders) {
  const int64_t accum = 3;
  DataLoader l = loader(shuffled());
  ASSERT_LT(l.stepsPerEpoch(), 200); // several epochs below
  const int steps = int(3 * l.stepsPerEpoch() / accum) + 5;
  std::vector<Step> want = reference(shuffled(), accum, steps);
  StatusOr<std::unique_ptr<BatchStage>> stage = BatchStage::create(l, accum);
  ASSERT_TRUE(stage) << stage.status().message();
  const int64_t n = (*stage)->batchTokens();
  EXPECT_EQ(n, accum * 3 * 7);
  StatusOr<BatchStage::Batch> current = (*stage)->acquire();
  ASSERT_TRUE(current);
  for (int s = 0; s < steps; ++s) {
    expectBatch(*current, want[s], n, s);
    StatusOr<BatchStage::Batch> next = (*stage)->acquire();
    ASSERT_TRUE(next) << next.status().message();
    ASSERT_TRUE((*stage)->release(current->slot));
    current = next;
  }
}

// One batch at a time (the synchronous loop) gives the same sequence.
TEST(BatchStageTest, OneAtATimeEqualsTheLoader) {
  DataLoaderOptions o;
  o.batchSize = 2;
  o.seqLen = 5;
  std::vector<Step> want = reference(o, 1, 40, 0, 300);
  DataLoader l = loader(o, 300);
  auto stage = BatchStage::create(l, 1);
  ASSERT_TRUE(stage);
  for (int s = 0; s < 40; ++s) {
    StatusOr<BatchStage::Batch> b = (*stage)->acquire();
    ASSERT_TRUE(b);
    expectBatch(*b, want[s], 10, s);
    ASSERT_TRUE((*stage)->release(b->slot));
  }
}

// With both buffers out, a third batch is refused rather than handed out
// in a buffer still being read; the two out are distinct buffers.
TEST(BatchStageTest, NeverHandsOutABufferInUse) {
  DataLoader l = loader(shuffled());
  auto stage = BatchStage::create(l, 2);
  ASSERT_TRUE(stage);
  BatchStage &st = **stage;
  StatusOr<BatchStage::Batch> a = st.acquire(), b = st.acquire();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->slot, b->slot);
  EXPECT_NE(a->tokens, b->tokens);
  EXPECT_NE(a->targets, b->targets);
  StatusOr<BatchStage::Batch> c = st.acquire();
  ASSERT_FALSE(c);
  EXPECT_NE(c.status().message().find("still in use"), std::string::npos) << c.status().message();
  // Out of order and twice are refused too; the batch in b stays intact.
  std::vector<int32_t> bTokens(b->tokens, b->tokens + st.batchTokens());
  EXPECT_FALSE(st.release(b->slot));
  EXPECT_EQ(std::vector<int32_t>(b->tokens, b->tokens + st.batchTokens()), bTokens);
  ASSERT_TRUE(st.release(a->slot));
  EXPECT_FALSE(st.release(a->slot));
  EXPECT_FALSE(st.release(7));
  // The refilled slot comes after b's batch: the next acquire reuses a's
  // buffer only now that it is back.
  c = st.acquire();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->tokens, a->tokens);
  EXPECT_GT(c->position, b->position);
}

// seek drops the batches read ahead and continues where a checkpoint says,
// as the loader's seek does; never while a buffer is out.
TEST(BatchStageTest, SeekContinuesAtThePosition) {
  const int64_t accum = 2;
  std::vector<Step> want = reference(shuffled(), accum, 8, 6);
  DataLoader l = loader(shuffled());
  auto stage = BatchStage::create(l, accum);
  ASSERT_TRUE(stage);
  BatchStage &st = **stage;
  StatusOr<BatchStage::Batch> a = st.acquire();
  ASSERT_TRUE(a);
  EXPECT_FALSE(st.seek(6));
  ASSERT_TRUE(st.release(a->slot));
  ASSERT_TRUE(st.seek(6));
  for (int s = 0; s < 8; ++s) {
    StatusOr<BatchStage::Batch> b = st.acquire();
    ASSERT_TRUE(b);
    expectBatch(*b, want[s], st.batchTokens(), s);
    ASSERT_TRUE(st.release(b->slot));
  }
}

// The buffers come from the allocator given (pinned memory on a GPU) and
// go back to it.
TEST(BatchStageTest, UsesTheAllocator) {
  int allocated = 0, freed = 0;
  HostAllocator alloc;
  alloc.allocate = [&](size_t bytes) -> StatusOr<void *> {
    ++allocated;
    return std::malloc(bytes);
  };
  alloc.release = [&](void *p) {
    ++freed;
    std::free(p);
  };
  {
    DataLoader l = loader(shuffled());
    auto stage = BatchStage::create(l, 1, alloc);
    ASSERT_TRUE(stage);
    EXPECT_EQ(allocated, 4); // tokens and targets of two slots
  }
  EXPECT_EQ(freed, 4);
  alloc.allocate = [](size_t) -> StatusOr<void *> { return Status::error("no pinned memory"); };
  DataLoader l = loader(shuffled());
  auto stage = BatchStage::create(l, 1, alloc);
  ASSERT_FALSE(stage);
  EXPECT_EQ(stage.status().message(), "no pinned memory");
}

} // namespace
