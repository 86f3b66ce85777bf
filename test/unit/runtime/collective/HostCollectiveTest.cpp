//===- HostCollectiveTest.cpp - simulated ranks reducing in threads -------===//

#include "runtime/collective/HostCollective.h"

#include "runtime/blas/CpuGemm.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

using namespace gptc;

namespace {

/// Runs `body(rank)` in one thread per rank of `group`; returns each
/// rank's error message ("" when ok).
template <typename Body>
std::vector<std::string> onRanks(HostGroup &group, Body body) {
  std::vector<std::string> errors(group.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      Status s = body(r);
      if (!s) {
        errors[r] = s.message();
        group.abort();
      }
    });
  for (std::thread &t : threads)
    t.join();
  return errors;
}

// Verify sum and mean over 3 ranks, with a buffer shorter than the number
// of ranks (some ranks own no share of it).
TEST(HostCollectiveTest, SumAndMeanOverThreeRanks) {
  HostGroup group(3);
  std::vector<std::vector<float>> a(3), b(3);
  for (int r = 0; r < 3; ++r) {
    a[r] = {1.0f * r, 10.0f * r, 100.0f * r, 1.0f, -2.0f};
    b[r] = {static_cast<float>(r + 1)};
  }
  auto errors = onRanks(group, [&](int r) {
    auto c = group.member(r);
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->size(), 3);
    Status s = c->allReduce({{a[r].data(), a[r].size(), schema::DType::F32}}, schema::ReduceOp::Sum,
                            nullptr);
    if (!s)
      return s;
    return c->allReduce({{b[r].data(), 1, schema::DType::F32}}, schema::ReduceOp::Avg, nullptr);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(a[r], (std::vector<float>{3, 30, 300, 3, -6})) << "rank " << r;
    EXPECT_EQ(b[r], std::vector<float>{2}) << "rank " << r;
  }
}

// Verify the elementwise maximum over 3 ranks (the FP8 amax histories'),
// negative values and zeros included.
TEST(HostCollectiveTest, MaxOverThreeRanks) {
  HostGroup group(3);
  std::vector<std::vector<float>> h = {{0, 2, -1, 0}, {5, 1, -3, 0}, {1, 7, -2, 0}};
  auto errors = onRanks(group, [&](int r) {
    return group.member(r)->allReduce({{h[r].data(), h[r].size(), schema::DType::F32}},
                                      schema::ReduceOp::Max, nullptr);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(h[r], (std::vector<float>{5, 7, -1, 0})) << "rank " << r;
  }
}

// Verify that bf16 and f16 buffers (mixed precision's narrow gradients) are
// summed in f32 and rounded once: 1 + 2^-8 + 2^-8 is 1 + 2^-7 exactly, where
// rounding after each add would keep 1 (bf16 has 8 significand bits).
TEST(HostCollectiveTest, NarrowBuffersSumInF32AndRoundOnce) {
  HostGroup group(3);
  const uint16_t one = blas::floatToBf16(1.0f), tiny = blas::floatToBf16(0x1p-8f);
  std::vector<std::vector<uint16_t>> bf = {{one, one}, {tiny, one}, {tiny, one}};
  std::vector<std::vector<uint16_t>> hf(3, {blas::floatToF16(0.5f)});
  auto errors = onRanks(group, [&](int r) {
    auto c = group.member(r);
    Status s = c->allReduce({{bf[r].data(), 2, schema::DType::BF16}}, schema::ReduceOp::Sum, nullptr);
    if (!s)
      return s;
    return c->allReduce({{hf[r].data(), 1, schema::DType::F16}}, schema::ReduceOp::Avg, nullptr);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(blas::bf16ToFloat(bf[r][0]), 1.0f + 0x1p-7f) << "rank " << r;
    EXPECT_EQ(blas::bf16ToFloat(bf[r][1]), 3.0f) << "rank " << r;
    EXPECT_EQ(blas::f16ToFloat(hf[r][0]), 0.5f) << "rank " << r;
  }
}

// Verify that ranks passing different buffers all get an error, not a hang.
TEST(HostCollectiveTest, MismatchedBuffersFailOnEveryRank) {
  HostGroup group(2);
  std::vector<float> x(4, 1.0f);
  auto errors = onRanks(group, [&](int r) {
    return group.member(r)->allReduce({{x.data(), r == 0 ? 4u : 3u, schema::DType::F32}},
                                      schema::ReduceOp::Sum, nullptr);
  });
  EXPECT_NE(errors[0].find("passed other buffers"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("passed other buffers"), std::string::npos) << errors[1];
}

// Verify that abort() releases a rank waiting for one that never comes.
TEST(HostCollectiveTest, AbortReleasesWaitingRanks) {
  HostGroup group(2);
  std::vector<float> x(2, 1.0f);
  std::string error;
  std::thread waiter([&] {
    Status s = group.member(0)->allReduce({{x.data(), 2, schema::DType::F32}},
                                          schema::ReduceOp::Sum, nullptr);
    error = s.message();
  });
  group.abort(); // rank 1 failed elsewhere
  waiter.join();
  EXPECT_NE(error.find("another rank failed"), std::string::npos) << error;
}

} // namespace
