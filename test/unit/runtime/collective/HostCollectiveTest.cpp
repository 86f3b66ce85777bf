//===- HostCollectiveTest.cpp - simulated ranks reducing in threads -------===//

#include "runtime/collective/HostCollective.h"

#include "runtime/blas/CpuGemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

/// `count` elements of `dtype` as bytes: values of mixed sign and magnitude
/// (so that sums round), different for every `seed`.
std::vector<uint8_t> values(schema::DType dtype, size_t count, unsigned seed) {
  std::vector<uint8_t> out(count * elementSize(dtype));
  uint32_t state = 2654435761u * (seed + 1);
  for (size_t e = 0; e < count; ++e) {
    state = state * 1664525u + 1013904223u;
    float x = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) *
              static_cast<float>(1u << (state % 7)) * 3.3f;
    if (dtype == schema::DType::BF16) {
      uint16_t h = blas::floatToBf16(x);
      std::memcpy(&out[e * 2], &h, 2);
    } else if (dtype == schema::DType::F32) {
      std::memcpy(&out[e * 4], &x, 4);
    } else {
      for (size_t b = 0; b < elementSize(dtype); ++b)
        out[e * elementSize(dtype) + b] = static_cast<uint8_t>(state >> (8 * (b % 4)));
    }
  }
  return out;
}

Collective::Buffer bufferOf(std::vector<uint8_t> &bytes, schema::DType dtype, size_t offset = 0) {
  const size_t size = elementSize(dtype);
  return {bytes.data() + offset * size, bytes.size() / size - offset, dtype};
}

Collective::Buffer bufferOf(std::vector<uint8_t> &bytes, schema::DType dtype, size_t offset,
                            size_t count) {
  return {bytes.data() + offset * elementSize(dtype), count, dtype};
}

// Verify that reduce-scatter gives each rank its slice of the all-reduce's
// result bit for bit (sum, mean and max; f32 and bf16; 2 and 3 ranks), two
// buffers in one call, and that gathering the slices back in place (ZeRO-1's
// two steps) rebuilds the all-reduce's whole result.
TEST(HostCollectiveTest, ReduceScatterIsAllReduceSliceBitForBit) {
  for (int n : {2, 3})
    for (schema::DType dtype : {schema::DType::F32, schema::DType::BF16})
      for (schema::ReduceOp op :
           {schema::ReduceOp::Sum, schema::ReduceOp::Avg, schema::ReduceOp::Max}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + schema::EnumNameDType(dtype) + ", " +
                     schema::EnumNameReduceOp(op));
        const size_t counts[] = {7, 1}; // per rank: elements of each slice
        const size_t es = elementSize(dtype);
        // reduced[r][i]: allReduce's in-place result; src and dst: reduce-scatter's.
        std::vector<std::vector<std::vector<uint8_t>>> reduced(n), src(n), dst(n), whole(n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < 2; ++i) {
            reduced[r].push_back(values(dtype, counts[i] * n, 10 * r + i));
            src[r].push_back(reduced[r].back());
            dst[r].push_back(std::vector<uint8_t>(counts[i] * es, 0xee));
            whole[r].push_back(std::vector<uint8_t>(counts[i] * n * es, 0xdd));
          }
        HostGroup all(n), zero(n);
        auto errors = onRanks(all, [&](int r) {
          return all.member(r)->allReduce(
              {bufferOf(reduced[r][0], dtype), bufferOf(reduced[r][1], dtype)}, op, nullptr);
        });
        auto zeroErrors = onRanks(zero, [&](int r) {
          auto c = zero.member(r);
          Status s = c->reduceScatter({bufferOf(src[r][0], dtype), bufferOf(src[r][1], dtype)},
                                      {bufferOf(dst[r][0], dtype), bufferOf(dst[r][1], dtype)}, op,
                                      nullptr);
          if (!s)
            return s;
          // In place: each rank's slice of `whole` holds its reduced slice.
          for (size_t i = 0; i < 2; ++i)
            std::memcpy(whole[r][i].data() + r * counts[i] * es, dst[r][i].data(), counts[i] * es);
          return c->allGather({bufferOf(whole[r][0], dtype, r * counts[0], counts[0]),
                               bufferOf(whole[r][1], dtype, r * counts[1], counts[1])},
                              {bufferOf(whole[r][0], dtype), bufferOf(whole[r][1], dtype)},
                              nullptr);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(errors[r], "");
          ASSERT_EQ(zeroErrors[r], "");
          for (size_t i = 0; i < 2; ++i) {
            std::vector<uint8_t> slice(reduced[r][i].begin() + r * counts[i] * es,
                                       reduced[r][i].begin() + (r + 1) * counts[i] * es);
            EXPECT_EQ(dst[r][i], slice) << "rank " << r << " buffer " << i;
            EXPECT_EQ(whole[r][i], reduced[r][i]) << "rank " << r << " buffer " << i;
          }
        }
      }
}

// Verify the reduce-scatter's values themselves: sum, mean and max of
// small integers over 2 ranks.
TEST(HostCollectiveTest, ReduceScatterSumMeanAndMax) {
  HostGroup group(2);
  std::vector<std::vector<float>> x = {{1, 2, 3, -4}, {3, -2, 5, 8}};
  std::vector<std::vector<float>> sum(2, std::vector<float>(2)), mean = sum, max = sum;
  auto errors = onRanks(group, [&](int r) {
    auto c = group.member(r);
    Collective::Buffer in{x[r].data(), 4, schema::DType::F32};
    for (auto [op, out] : {std::pair{schema::ReduceOp::Sum, &sum[r]},
                           std::pair{schema::ReduceOp::Avg, &mean[r]},
                           std::pair{schema::ReduceOp::Max, &max[r]}})
      if (Status s = c->reduceScatter({in}, {{out->data(), 2, schema::DType::F32}}, op, nullptr);
          !s)
        return s;
    return Status::ok();
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(sum[0], (std::vector<float>{4, 0}));
  EXPECT_EQ(sum[1], (std::vector<float>{8, 4}));
  EXPECT_EQ(mean[0], (std::vector<float>{2, 0}));
  EXPECT_EQ(mean[1], (std::vector<float>{4, 2}));
  EXPECT_EQ(max[0], (std::vector<float>{3, 2}));
  EXPECT_EQ(max[1], (std::vector<float>{5, 8}));
  EXPECT_EQ(x[0], (std::vector<float>{1, 2, 3, -4})) << "the sources are left alone";
}

// Verify all-gather out of place and in place (each rank's source is its
// own slice of its destination) over 2 and 4 ranks, for f32 and bf16 and,
// as bytes, for f64, i32 and fp8.
TEST(HostCollectiveTest, AllGatherOutOfPlaceAndInPlace) {
  for (int n : {2, 4})
    for (schema::DType dtype : {schema::DType::F32, schema::DType::BF16, schema::DType::F64,
                                schema::DType::I32, schema::DType::F8E4M3})
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + schema::EnumNameDType(dtype) +
                     (inPlace ? ", in place" : ", out of place"));
        const size_t counts[] = {5, 2, 0}, es = elementSize(dtype);
        std::vector<std::vector<std::vector<uint8_t>>> src(n), dst(n);
        std::vector<std::vector<uint8_t>> expected(3);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < 3; ++i) {
            src[r].push_back(values(dtype, counts[i], 7 * r + i));
            expected[i].insert(expected[i].end(), src[r][i].begin(), src[r][i].end());
            dst[r].push_back(values(dtype, counts[i] * n, 1000 + r)); // garbage
            if (inPlace)
              std::memcpy(dst[r][i].data() + r * counts[i] * es, src[r][i].data(),
                          counts[i] * es);
          }
        HostGroup group(n);
        auto errors = onRanks(group, [&](int r) {
          std::vector<Collective::Buffer> from, to;
          for (size_t i = 0; i < 3; ++i) {
            to.push_back(bufferOf(dst[r][i], dtype));
            from.push_back(inPlace ? bufferOf(dst[r][i], dtype, r * counts[i], counts[i])
                                   : bufferOf(src[r][i], dtype));
          }
          return group.member(r)->allGather(from, to, nullptr);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(errors[r], "");
          for (size_t i = 0; i < 3; ++i)
            EXPECT_EQ(dst[r][i], expected[i]) << "rank " << r << " buffer " << i;
        }
      }
}

/// Runs `body` on the ranks of a fresh group of `n` and expects every rank
/// to fail with its own error (not another rank's abort) containing `what`.
template <typename Body>
void expectEveryRankFails(int n, const std::string &what, Body body) {
  HostGroup group(n);
  auto errors = onRanks(group, [&](int r) { return body(*group.member(r), r); });
  for (int r = 0; r < n; ++r)
    EXPECT_NE(errors[r].find(what), std::string::npos) << "rank " << r << ": " << errors[r];
}

// Verify that bad buffers on any rank fail every rank with an error that
// says what is wrong, instead of hanging or copying out of bounds.
TEST(HostCollectiveTest, MismatchedScatterGatherBuffersFailOnEveryRank) {
  using DT = schema::DType;
  std::vector<float> a(16), b(16);
  // One rank's destination is too short: every rank names it.
  expectEveryRankFails(2,
                       "reduce-scatter: buffer 0 of rank 1: the source has 8 elements, not 6 (the "
                       "destination's 3 times 2 ranks)",
                       [&](Collective &c, int r) {
                         return c.reduceScatter({{a.data(), 8, DT::F32}},
                                                {{b.data(), r == 1 ? 3u : 4u, DT::F32}},
                                                schema::ReduceOp::Sum, nullptr);
                       });
  expectEveryRankFails(3,
                       "all-gather: buffer 0 of rank 0: the destination has 7 elements, not 6 "
                       "(the source's 2 times 3 ranks)",
                       [&](Collective &c, int) {
                         return c.allGather({{a.data(), 2, DT::F32}}, {{b.data(), 7, DT::F32}},
                                            nullptr);
                       });
  expectEveryRankFails(2, "all-gather: rank 0 passes 1 source buffers but 2 destination buffers",
                       [&](Collective &c, int) {
                         return c.allGather({{a.data(), 2, DT::F32}},
                                            {{b.data(), 4, DT::F32}, {b.data() + 4, 4, DT::F32}},
                                            nullptr);
                       });
  expectEveryRankFails(2,
                       "all-gather: buffer 0 of rank 1: the source is BF16 but the destination F32",
                       [&](Collective &c, int r) {
                         return c.allGather({{a.data(), 2, r ? DT::BF16 : DT::F32}},
                                            {{b.data(), 4, DT::F32}}, nullptr);
                       });
  // Consistent on each rank, but not across them.
  expectEveryRankFails(2,
                       "all-gather: rank 1 passed other buffers than rank 0 (buffer 0: 3 F32 "
                       "source elements against 2 F32)",
                       [&](Collective &c, int r) {
                         size_t n = r ? 3 : 2;
                         return c.allGather({{a.data(), n, DT::F32}}, {{b.data(), 2 * n, DT::F32}},
                                            nullptr);
                       });
  // A source that overlaps its destination other than as the rank's slice.
  expectEveryRankFails(2,
                       "all-gather: buffer 0 of rank 1: the source and the destination overlap "
                       "other than as rank 1's slice (in place)",
                       [&](Collective &c, int) {
                         return c.allGather({{b.data(), 4, DT::F32}}, {{b.data(), 8, DT::F32}},
                                            nullptr);
                       });
  expectEveryRankFails(2, "reduce-scatter: the host collective reduces F32, BF16 and F16, got I32",
                       [&](Collective &c, int) {
                         return c.reduceScatter({{a.data(), 4, DT::I32}}, {{b.data(), 2, DT::I32}},
                                                schema::ReduceOp::Sum, nullptr);
                       });
  // Ranks in different collectives.
  expectEveryRankFails(2, "called", [&](Collective &c, int r) {
    return r ? c.allGather({{a.data(), 2, DT::F32}}, {{b.data(), 4, DT::F32}}, nullptr)
             : c.allReduce({{a.data(), 2, DT::F32}}, schema::ReduceOp::Sum, nullptr);
  });
}

// Verify that a group keeps working after a reduce-scatter or all-gather
// that every rank refused (no rank is left behind in a barrier).
TEST(HostCollectiveTest, RefusedCallsLeaveTheGroupUsable) {
  HostGroup group(2);
  std::vector<std::vector<float>> x = {{1, 2}, {3, 4}};
  std::vector<std::vector<float>> y(2, std::vector<float>(4, 0));
  std::vector<std::string> first(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto c = group.member(r);
      Status bad = c->allGather({{x[r].data(), 2, schema::DType::F32}},
                                {{y[r].data(), 3, schema::DType::F32}}, nullptr);
      first[r] = bad ? "" : bad.message();
      Status good = c->allGather({{x[r].data(), 2, schema::DType::F32}},
                                 {{y[r].data(), 4, schema::DType::F32}}, nullptr);
      EXPECT_TRUE(good) << good.message();
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r].rfind("all-gather: buffer 0 of rank 0: the destination has 3", 0), 0u)
        << first[r];
    EXPECT_EQ(y[r], (std::vector<float>{1, 2, 3, 4})) << "rank " << r;
  }
}

// Verify that abort() releases a rank waiting in reduce-scatter or
// all-gather, and that later calls fail at once.
TEST(HostCollectiveTest, AbortReleasesRanksWaitingToScatterOrGather) {
  HostGroup group(3);
  std::vector<float> x(6, 1.0f), y(6, 0.0f);
  std::string scatter, gather;
  std::thread a([&] {
    Status s = group.member(0)->reduceScatter({{x.data(), 6, schema::DType::F32}},
                                              {{y.data(), 2, schema::DType::F32}},
                                              schema::ReduceOp::Avg, nullptr);
    scatter = s ? "" : s.message();
  });
  std::thread b([&] {
    Status s = group.member(1)->allGather({{x.data(), 2, schema::DType::F32}},
                                          {{y.data(), 6, schema::DType::F32}}, nullptr);
    gather = s ? "" : s.message();
  });
  group.abort(); // rank 2 failed elsewhere
  a.join();
  b.join();
  EXPECT_EQ(scatter, "reduce-scatter: another rank failed (simulated ranks aborted)");
  EXPECT_EQ(gather, "all-gather: another rank failed (simulated ranks aborted)");
  Status later = group.member(2)->allGather({{x.data(), 2, schema::DType::F32}},
                                            {{y.data(), 6, schema::DType::F32}}, nullptr);
  ASSERT_FALSE(later);
  EXPECT_EQ(later.message(), "all-gather: another rank failed (simulated ranks aborted)");
  EXPECT_EQ(y, std::vector<float>(6, 0.0f)) << "nothing was written";
}

} // namespace
