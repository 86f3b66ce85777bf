//===- NcclCollectiveTest.cpp - NCCL all-reduce across this host's GPUs ---===//
//
// The version and id calls run anywhere; the all-reduces, reduce-scatters
// and all-gathers need GPUs and skip without them (with one GPU, only the
// one-rank cases run).
//
//===----------------------------------------------------------------------===//

#include "runtime/collective/NcclCollective.h"
#include "runtime/device/Device.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace gptc;

namespace {

int gpus() {
  StatusOr<int> n = device::deviceCount();
  return n ? *n : 0;
}

TEST(NcclCollectiveTest, VersionAndIds) {
  StatusOr<std::string> v = ncclVersion();
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v->rfind("NCCL 2.", 0), 0u) << *v;
  StatusOr<NcclId> a = newNcclId(), b = newNcclId();
  ASSERT_TRUE(a && b) << (a ? b.status().message() : a.status().message());
  EXPECT_EQ(a->size(), 128u);
  EXPECT_NE(*a, *b) << "every communicator gets its own id";
}

TEST(NcclCollectiveTest, BadArgumentsAreRefused) {
  auto shortId = NcclCollective::create(NcclId(5, 0), 0, 1, 0);
  ASSERT_FALSE(shortId);
  EXPECT_EQ(shortId.status().message(), "NCCL id has 5 bytes, not 128");
  auto badRank = NcclCollective::create(NcclId(128, 0), 2, 2, 0);
  ASSERT_FALSE(badRank);
  EXPECT_EQ(badRank.status().message(), "NCCL rank 2 of 2 is out of range");
}

TEST(NcclCollectiveTest, NvlsIsOffUnlessTheUserSetIt) {
  ::unsetenv("NCCL_NVLS_ENABLE");
  disableNvlsUnlessSet();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);
  disableNvlsUnlessSet();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "1");
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
}

/// Each of `n` ranks (one per GPU, in threads) all-reduces a buffer whose
/// element i is (rank + 1) * i; the sum is n(n+1)/2 * i, the mean
/// (n+1)/2 * i, the maximum n * i.
void reduceOnRanks(int n, schema::ReduceOp op) {
  NcclId id = *newNcclId();
  constexpr size_t kCount = 1000;
  std::vector<std::string> errors(n);
  std::vector<std::vector<float>> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string &m) { errors[r] = m; };
      auto comm = NcclCollective::create(id, r, n, r);
      if (!comm)
        return fail(comm.status().message());
      std::vector<float> host(kCount);
      for (size_t i = 0; i < kCount; ++i)
        host[i] = float((r + 1) * i);
      void *dev = nullptr;
      cudaStream_t stream = nullptr;
      if (cudaMalloc(&dev, kCount * 4) || cudaStreamCreate(&stream) ||
          cudaMemcpy(dev, host.data(), kCount * 4, cudaMemcpyHostToDevice))
        return fail("CUDA setup failed");
      Status s = (*comm)->allReduce({{dev, kCount, schema::DType::F32}}, op, stream);
      if (!s)
        return fail(s.message());
      if (cudaStreamSynchronize(stream) ||
          cudaMemcpy(host.data(), dev, kCount * 4, cudaMemcpyDeviceToHost))
        return fail("CUDA readback failed");
      results[r] = host;
      auto f8 = (*comm)->allReduce({{dev, kCount, schema::DType::F8E4M3}}, op, stream);
      if (f8 || f8.message().find("NCCL reduces F32, BF16 and F16 buffers here, got F8E4M3") ==
                    std::string::npos)
        return fail("F8E4M3 was not refused clearly: " + (f8 ? std::string("ok") : f8.message()));
      (void)cudaFree(dev);
      (void)cudaStreamDestroy(stream);
    });
  for (std::thread &t : threads)
    t.join();
  float scale = op == schema::ReduceOp::Sum   ? float(n * (n + 1) / 2)
                : op == schema::ReduceOp::Max ? float(n)
                                              : float(n + 1) / 2;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
    for (size_t i = 0; i < kCount; i += 97)
      EXPECT_FLOAT_EQ(results[r][i], scale * float(i)) << "rank " << r << " element " << i;
  }
}

TEST(NcclCollectiveTest, OneRank) {
  if (gpus() < 1)
    GTEST_SKIP() << "no GPU on this machine";
  reduceOnRanks(1, schema::ReduceOp::Sum);
  reduceOnRanks(1, schema::ReduceOp::Max);
}

TEST(NcclCollectiveTest, SumMeanAndMaxOverEveryGpu) {
  if (gpus() < 2)
    GTEST_SKIP() << "needs 2 GPUs, found " << gpus();
  reduceOnRanks(gpus(), schema::ReduceOp::Sum);
  reduceOnRanks(gpus(), schema::ReduceOp::Avg);
  reduceOnRanks(gpus(), schema::ReduceOp::Max);
}

/// Each of `n` ranks reduce-scatters a buffer of n * kCount elements whose
/// element g is (rank + 1) * g: rank r's slice holds elements [r kCount,
/// (r+1) kCount) of the sum n(n+1)/2 * g, the mean (n+1)/2 * g or the
/// maximum n * g. A destination of the wrong size is refused before NCCL.
void scatterOnRanks(int n, schema::ReduceOp op) {
  NcclId id = *newNcclId();
  constexpr size_t kCount = 1000;
  std::vector<std::string> errors(n);
  std::vector<std::vector<float>> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string &m) { errors[r] = m; };
      auto comm = NcclCollective::create(id, r, n, r);
      if (!comm)
        return fail(comm.status().message());
      const size_t total = kCount * n;
      std::vector<float> host(total);
      for (size_t g = 0; g < total; ++g)
        host[g] = float((r + 1) * g);
      void *src = nullptr, *dst = nullptr;
      cudaStream_t stream = nullptr;
      if (cudaMalloc(&src, total * 4) || cudaMalloc(&dst, kCount * 4) ||
          cudaStreamCreate(&stream) ||
          cudaMemcpy(src, host.data(), total * 4, cudaMemcpyHostToDevice))
        return fail("CUDA setup failed");
      auto bad = (*comm)->reduceScatter({{src, total, schema::DType::F32}},
                                        {{dst, kCount + 1, schema::DType::F32}}, op, stream);
      if (bad || bad.message().rfind("reduce-scatter: buffer 0 of rank " + std::to_string(r) +
                                         ": the source has",
                                     0) != 0)
        return fail("a short destination was not refused clearly: " +
                    (bad ? std::string("ok") : bad.message()));
      Status s = (*comm)->reduceScatter({{src, total, schema::DType::F32}},
                                        {{dst, kCount, schema::DType::F32}}, op, stream);
      if (!s)
        return fail(s.message());
      results[r].resize(kCount);
      if (cudaStreamSynchronize(stream) ||
          cudaMemcpy(results[r].data(), dst, kCount * 4, cudaMemcpyDeviceToHost))
        return fail("CUDA readback failed");
      (void)cudaFree(src);
      (void)cudaFree(dst);
      (void)cudaStreamDestroy(stream);
    });
  for (std::thread &t : threads)
    t.join();
  float scale = op == schema::ReduceOp::Sum   ? float(n * (n + 1) / 2)
                : op == schema::ReduceOp::Max ? float(n)
                                              : float(n + 1) / 2;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
    for (size_t e = 0; e < kCount; e += 97)
      EXPECT_FLOAT_EQ(results[r][e], scale * float(r * kCount + e))
          << "rank " << r << " element " << e;
  }
}

/// Each of `n` ranks all-gathers kCount elements of `dtype` (bytes that
/// name the rank) into a buffer of n * kCount, in place (the source is the
/// rank's own slice of the destination) or not; every rank ends with every
/// rank's bytes in rank order.
void gatherOnRanks(int n, schema::DType dtype, bool inPlace) {
  NcclId id = *newNcclId();
  constexpr size_t kCount = 1000;
  const size_t bytes = kCount * elementSize(dtype);
  auto byteOf = [](int r, size_t b) { return uint8_t(r * 131 + b * 7 + 1); };
  std::vector<std::string> errors(n);
  std::vector<std::vector<uint8_t>> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string &m) { errors[r] = m; };
      auto comm = NcclCollective::create(id, r, n, r);
      if (!comm)
        return fail(comm.status().message());
      std::vector<uint8_t> mine(bytes);
      for (size_t b = 0; b < bytes; ++b)
        mine[b] = byteOf(r, b);
      void *dst = nullptr, *own = nullptr;
      cudaStream_t stream = nullptr;
      if (cudaMalloc(&dst, bytes * n) || cudaMalloc(&own, bytes) || cudaStreamCreate(&stream) ||
          cudaMemset(dst, 0xee, bytes * n))
        return fail("CUDA setup failed");
      void *src = inPlace ? static_cast<uint8_t *>(dst) + r * bytes : own;
      if (cudaMemcpy(src, mine.data(), bytes, cudaMemcpyHostToDevice))
        return fail("CUDA setup failed");
      Status s = (*comm)->allGather({{src, kCount, dtype}}, {{dst, kCount * n, dtype}}, stream);
      if (!s)
        return fail(s.message());
      results[r].resize(bytes * n);
      if (cudaStreamSynchronize(stream) ||
          cudaMemcpy(results[r].data(), dst, bytes * n, cudaMemcpyDeviceToHost))
        return fail("CUDA readback failed");
      (void)cudaFree(dst);
      (void)cudaFree(own);
      (void)cudaStreamDestroy(stream);
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
    for (int q = 0; q < n; ++q)
      for (size_t b = 0; b < bytes; b += 89)
        ASSERT_EQ(results[r][q * bytes + b], byteOf(q, b))
            << "rank " << r << " slice " << q << " byte " << b;
  }
}

void scatterAndGatherOnRanks(int n) {
  for (schema::ReduceOp op : {schema::ReduceOp::Sum, schema::ReduceOp::Avg, schema::ReduceOp::Max})
    scatterOnRanks(n, op);
  for (schema::DType dtype : {schema::DType::F32, schema::DType::BF16, schema::DType::F8E4M3,
                              schema::DType::I32})
    for (bool inPlace : {false, true})
      gatherOnRanks(n, dtype, inPlace);
}

TEST(NcclCollectiveTest, ReduceScatterAndAllGatherOnOneRank) {
  if (gpus() < 1)
    GTEST_SKIP() << "no GPU on this machine";
  scatterAndGatherOnRanks(1);
}

TEST(NcclCollectiveTest, ReduceScatterAndAllGatherOverEveryGpu) {
  if (gpus() < 2)
    GTEST_SKIP() << "needs 2 GPUs, found " << gpus();
  scatterAndGatherOnRanks(gpus());
}

} // namespace
