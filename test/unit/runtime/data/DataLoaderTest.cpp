//===- DataLoaderTest.cpp - batches, shuffling, sharding, resume ----------===//

#include "DataTestUtils.h"

#include "runtime/data/DataLoader.h"
#include "runtime/data/TokenFile.h"

#include <algorithm>
#include <numeric>
#include <set>

using namespace gptc;
using namespace gptc::data;
using gptc::data::testing::tempPath;

namespace {

/// Tokens 0, 1, 2, ... so that a token's value is its position.
std::vector<uint16_t> iota(size_t n) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), uint16_t(0));
  return t;
}

DataLoader make(size_t n, DataLoaderOptions o) {
  StatusOr<DataLoader> loader = DataLoader::create(iota(n), o);
  EXPECT_TRUE(loader) << loader.status().message();
  return std::move(*loader);
}

DataLoaderOptions opts(int64_t b, int64_t t, bool shuffle = false, uint64_t seed = 0,
                       int64_t rank = 0, int64_t world = 1) {
  DataLoaderOptions o;
  o.batchSize = b, o.seqLen = t, o.shuffle = shuffle, o.seed = seed;
  o.rank = rank, o.worldSize = world;
  return o;
}

/// The windows of the next `n` batches (read back from the inputs).
std::vector<int64_t> windows(DataLoader &loader, int n) {
  std::vector<int64_t> out;
  std::vector<int32_t> x, y;
  const int64_t bt = loader.options().batchSize * loader.options().seqLen;
  for (int i = 0; i < n; ++i) {
    int64_t w = loader.currentWindow();
    loader.next(x, y);
    EXPECT_EQ(x[0], w * bt);
    out.push_back(w);
  }
  return out;
}

TEST(SplitMix64Test, ReferenceValues) {
  // The first outputs of Vigna's splitmix64.c for seed 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  SplitMix64 bounded(42);
  for (int i = 0; i < 1000; ++i)
    EXPECT_LT(bounded.below(7), 7u);
}

// Verify that the targets are the inputs shifted by one token, row by row.
TEST(DataLoaderTest, TargetsAreNextTokens) {
  DataLoader loader = make(100, opts(2, 4));
  std::vector<int32_t> x, y;
  loader.next(x, y);
  EXPECT_EQ(x, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(y, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  loader.next(x, y);
  EXPECT_EQ(x, (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(y, (std::vector<int32_t>{9, 10, 11, 12, 13, 14, 15, 16}));
}

TEST(DataLoaderTest, SequentialOrderAndEpochs) {
  // 33 tokens, B*T = 8: windows 0..3 (the last needs token 32).
  DataLoader loader = make(33, opts(2, 4));
  EXPECT_EQ(loader.stepsPerEpoch(), 4);
  EXPECT_EQ(windows(loader, 6), (std::vector<int64_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(loader.position(), 6u);
  EXPECT_EQ(loader.epoch(), 1);
  // One token fewer and the last window no longer fits.
  EXPECT_EQ(make(32, opts(2, 4)).stepsPerEpoch(), 3);
}

TEST(DataLoaderTest, ShuffleIsADeterministicPermutation) {
  DataLoader a = make(8001, opts(2, 4, true, 1234));
  DataLoader b = make(8001, opts(2, 4, true, 1234));
  ASSERT_EQ(a.stepsPerEpoch(), 1000);
  std::vector<int64_t> epoch0 = windows(a, 1000), epoch1 = windows(a, 1000);
  EXPECT_EQ(windows(b, 2000), [&] {
    std::vector<int64_t> both = epoch0;
    both.insert(both.end(), epoch1.begin(), epoch1.end());
    return both;
  }());
  for (const std::vector<int64_t> *e : {&epoch0, &epoch1}) {
    std::vector<int64_t> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(1000);
    std::iota(all.begin(), all.end(), int64_t(0));
    EXPECT_EQ(sorted, all); // each window exactly once per epoch
  }
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t(0));
  EXPECT_NE(epoch0, identity);
  EXPECT_NE(epoch0, epoch1); // reshuffled every epoch
  DataLoader c = make(8001, opts(2, 4, true, 1235));
  EXPECT_NE(windows(c, 1000), epoch0); // the seed matters
}

// Verify that seek() reproduces the stream from any position, in and across
// epochs, as a resumed checkpoint needs.
TEST(DataLoaderTest, SeekResumes) {
  for (bool shuffle : {false, true}) {
    DataLoader a = make(801, opts(2, 4, shuffle, 7));
    std::vector<int64_t> stream = windows(a, 250);
    DataLoader b = make(801, opts(2, 4, shuffle, 7));
    for (uint64_t at : {0u, 1u, 99u, 100u, 137u, 200u}) {
      b.seek(at);
      EXPECT_EQ(b.position(), at);
      std::vector<int64_t> rest = windows(b, 50);
      EXPECT_EQ(rest, std::vector<int64_t>(stream.begin() + at, stream.begin() + at + 50))
          << "shuffle " << shuffle << " at " << at;
    }
    b.reset();
    EXPECT_EQ(b.position(), 0u);
    EXPECT_EQ(b.currentWindow(), stream[0]);
  }
}

TEST(DataLoaderTest, ShardsAreDisjointAndCoverTheEpoch) {
  // 3 ranks, B*T = 8, 100 tokens: 12 windows fit, 4 steps of 3 windows.
  for (bool shuffle : {false, true}) {
    std::set<int64_t> seen;
    for (int64_t rank = 0; rank < 3; ++rank) {
      DataLoader loader = make(100, opts(2, 4, shuffle, 99, rank, 3));
      ASSERT_EQ(loader.stepsPerEpoch(), 4);
      for (int64_t w : windows(loader, 4)) {
        EXPECT_EQ(w % 3, rank);
        EXPECT_TRUE(seen.insert(w).second) << "window " << w << " read twice";
      }
    }
    EXPECT_EQ(seen.size(), 12u);
    EXPECT_EQ(*seen.rbegin(), 11);
  }
  // All ranks step through the same shuffled order.
  DataLoader r0 = make(100, opts(2, 4, true, 5, 0, 3)), r2 = make(100, opts(2, 4, true, 5, 2, 3));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r0.currentWindow() + 2, r2.currentWindow());
    std::vector<int32_t> x, y;
    r0.next(x, y);
    r2.next(x, y);
  }
}

TEST(DataLoaderTest, Errors) {
  auto error = [](size_t n, DataLoaderOptions o) {
    StatusOr<DataLoader> r = DataLoader::create(iota(n), o);
    EXPECT_FALSE(r);
    return r ? "" : r.status().message();
  };
  EXPECT_EQ(error(8, opts(2, 4)),
            "8 tokens are too few for one batch: B=2 T=4 world_size=1 needs at least 9");
  EXPECT_EQ(error(20, opts(2, 4, false, 0, 1, 3)),
            "20 tokens are too few for one batch: B=2 T=4 world_size=3 needs at least 25");
  EXPECT_EQ(error(100, opts(0, 4)),
            "batch size and sequence length must be positive (B=0, T=4)");
  EXPECT_EQ(error(100, opts(2, 4, false, 0, 3, 3)),
            "rank 3 is not in 0..world_size-1 (world_size 3)");
  EXPECT_TRUE(DataLoader::create(iota(9), opts(2, 4)));
}

TEST(DataLoaderTest, OpenChecksTheFileAndVocabulary) {
  std::string path = tempPath("loader.bin");
  ASSERT_TRUE(writeTokenFile(path, {1, 2, 3, 4, 5}));
  StatusOr<DataLoader> r = DataLoader::open(path, opts(2, 3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path + ": 5 tokens are too few for one batch: B=2 T=3 world_size=1 needs at least 7");
  r = DataLoader::open(path, opts(1, 2), /*vocabSize=*/5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path + ": token 5 at index 4 is outside the vocabulary (size 5)");
  r = DataLoader::open(path, opts(2, 1));
  ASSERT_TRUE(r) << r.status().message();
  std::vector<int32_t> x, y;
  r->next(x, y);
  EXPECT_EQ(x, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(y, (std::vector<int32_t>{2, 3}));
}

} // namespace
