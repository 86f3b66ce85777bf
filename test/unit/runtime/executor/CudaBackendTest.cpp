//===- CudaBackendTest.cpp - CudaBackend, on both kinds of machine --------===//
//
// Without a GPU (CI) the backend must fail with "no CUDA device". With one
// (scripts/device-build.sh on the GPU machine) the hand-built programs of
// TestPrograms.h run from a cubin, from PTX, with two streams and as CUDA
// graphs, and every GEMM case of GemmCases.h is checked against the same
// exact reference the CPU GEMM passes. The kernels are DeviceKernels.cu,
// compiled by nvcc at build time (GPTC_TEST_CUBIN / GPTC_TEST_PTX).
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/CudaBackend.h"
#include "runtime/blas/CpuGemm.h"
#include "runtime/device/Device.h"
#include "runtime/executor/Session.h"
#include "runtime/blas/GemmAlgoFile.h"
#include "runtime/blas/GemmCheck.h"
#include "test/unit/runtime/blas/GemmCases.h"
#include "test/unit/runtime/executor/Fp8Gemm.h"
#include "test/unit/runtime/executor/AsyncSteps.h"
#include "test/unit/runtime/executor/TestPrograms.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace gptc;
using namespace gptc::testing;

namespace {

bool haveGpu() { return bool(device::deviceCount()); }

std::string errorOf(const Status &s) { return s ? "" : s.message(); }
template <typename T> std::string errorOf(const StatusOr<T> &s) {
  return s ? "" : s.status().message();
}

StatusOr<std::unique_ptr<Session>> cudaSession(const ExecutableSpec &spec,
                                               CudaBackendOptions options = {}) {
  StatusOr<Executable> exe = Executable::loadBytes(spec.build(), "test.fb");
  if (!exe)
    return exe.status();
  return Session::create(std::move(*exe),
                         [&](const Executable &e) { return createCudaBackend(e, options); });
}

/// Adds the images to the pipeline's two kernels.
void addImages(ExecutableSpec &spec, bool cubin, bool ptx) {
  std::vector<uint8_t> bin = readFileBytes(GPTC_TEST_CUBIN);
  std::vector<uint8_t> text = readFileBytes(GPTC_TEST_PTX);
  for (auto &k : spec.kernels) {
    if (cubin)
      k.cubin = bin;
    if (ptx)
      k.ptx.assign(text.begin(), text.end());
  }
}

#define REQUIRE_GPU_AND_KERNELS()                                                                  \
  do {                                                                                             \
    if (!haveGpu())                                                                                \
      GTEST_SKIP() << "no GPU on this machine";                                                    \
    if (readFileBytes(GPTC_TEST_CUBIN).empty())                                                    \
      GTEST_SKIP() << "no nvcc-built test kernels (" GPTC_TEST_CUBIN ")";                          \
  } while (0)

std::vector<float> output(Session &session, const std::string &name, size_t n) {
  std::vector<float> v(n);
  Status s = session.getOutput("main", name, v.data(), n * 4);
  EXPECT_TRUE(s) << s.message();
  return v;
}

void runPipeline(Session &session, int runs = 1) {
  PipelineValues v;
  for (auto [name, data] : {std::pair{"x", &v.x}, std::pair{"a", &v.a}, std::pair{"b", &v.b}})
    ASSERT_TRUE(session.setInput("main", name, *data));
  ASSERT_TRUE(session.writeTensor(*session.findTensor("bias"), v.bias.data(), 8));
  for (int r = 0; r < runs; ++r) {
    Status s = session.run("main");
    ASSERT_TRUE(s) << s.message();
  }
  EXPECT_EQ(output(session, "y", 4), v.y());
  std::vector<float> m = output(session, "m", 2);
  EXPECT_EQ(std::memcmp(m.data(), v.m().data(), 8), 0);
  std::vector<float> xs = v.xs();
  for (int r = 1; r < runs; ++r)
    for (float &f : xs)
      f *= 0.5f;
  EXPECT_EQ(output(session, "xs", 8), xs);
}

// Verify that without a GPU the backend fails cleanly and says why.
TEST(CudaBackendTest, NoDeviceFailsCleanly) {
  if (haveGpu())
    GTEST_SKIP() << "this machine has a GPU";
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  auto session = cudaSession(spec);
  ASSERT_FALSE(session);
  EXPECT_EQ(errorOf(session).rfind("no CUDA device: ", 0), 0u) << errorOf(session);
}

// Verify every command kind from cubins.
TEST(CudaBackendTest, RunsEveryCommandKindFromCubin) {
  REQUIRE_GPU_AND_KERNELS();
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  addImages(spec, /*cubin=*/true, /*ptx=*/false);
  auto session = cudaSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  runPipeline(**session);
}

// Verify the PTX path: PTX alone, and PTX behind a cubin that does not load.
TEST(CudaBackendTest, FallsBackToPtx) {
  REQUIRE_GPU_AND_KERNELS();
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  addImages(spec, false, true);
  auto session = cudaSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  runPipeline(**session);

  ExecutableSpec broken = pipelineExecutable(s::TargetKind::CUDA);
  addImages(broken, false, true);
  for (auto &k : broken.kernels)
    k.cubin = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};
  auto fallback = cudaSession(broken);
  ASSERT_TRUE(fallback) << errorOf(fallback);
  runPipeline(**fallback);

  ExecutableSpec none = pipelineExecutable(s::TargetKind::CUDA);
  for (auto &k : none.kernels)
    k.cubin = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};
  std::string error = errorOf(cudaSession(none));
  EXPECT_NE(error.find("kernel 'gptc_test_scale' (sm_90) does not load on"), std::string::npos)
      << error;
}

// Verify two streams ordered by events, with and without CUDA graphs, and
// that a replayed graph runs the program again (x halves once per run).
TEST(CudaBackendTest, TwoStreamsEventsAndGraphs) {
  REQUIRE_GPU_AND_KERNELS();
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "streams");
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA, /*twoStreams=*/true);
    addImages(spec, true, false);
    CudaBackendOptions options;
    options.graphs = graphs;
    auto session = cudaSession(spec, options);
    ASSERT_TRUE(session) << errorOf(session);
    runPipeline(**session, /*runs=*/3);
  }
}

// Verify the asynchronous queue (pinned copies, launches, read-backs,
// fences) with and without graphs: the first launch runs directly, the
// second captures, the rest replay, and every step reads its own result.
TEST(CudaBackendTest, AsyncStepsWithAndWithoutGraphs) {
  REQUIRE_GPU_AND_KERNELS();
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "streams");
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA, /*twoStreams=*/true);
    addImages(spec, true, false);
    CudaBackendOptions options;
    options.graphs = graphs;
    auto session = cudaSession(spec, options);
    ASSERT_TRUE(session) << errorOf(session);
    checkAsyncSteps(**session, 8);
  }
}

// Verify that pools larger than the GPU's free memory are refused before
// any allocation, with required and free bytes in the message.
TEST(CudaBackendTest, PoolsLargerThanFreeMemoryAreRefused) {
  REQUIRE_GPU_AND_KERNELS();
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  addImages(spec, true, false);
  spec.addPool("huge", uint64_t(1) << 50); // 1 PiB
  auto session = cudaSession(spec);
  ASSERT_FALSE(session);
  EXPECT_NE(errorOf(session).find("memory pools need"), std::string::npos) << errorOf(session);
  EXPECT_NE(errorOf(session).find("--batch"), std::string::npos) << errorOf(session);
}

// Verify that on one rank (no collective) an AllReduce command is skipped:
// the mean, sum or maximum of one rank's buffer is itself, so the step's
// all-reduces cost nothing on one GPU (the Memset before it still runs).
TEST(CudaBackendTest, AllReduceOnOneRankIsSkipped) {
  REQUIRE_GPU_AND_KERNELS();
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  addImages(spec, true, false);
  spec.addProgram("reduce").memset(6, 0x3f).allReduce({6});
  auto session = cudaSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  Status ran = (*session)->run("reduce");
  ASSERT_TRUE(ran) << ran.message();
  std::vector<uint8_t> y(16, 0);
  ASSERT_TRUE((*session)->readTensor(6, y.data(), 16));
  EXPECT_EQ(y, std::vector<uint8_t>(16, 0x3f)) << "the Memset ran and nothing changed it";
}

// Verify that an executable pinned to W ranks (--world-size=2) refuses one
// rank without a collective, before any GPU work (so this runs without a
// GPU too).
TEST(CudaBackendTest, WorldSizeMustMatchTheRanks) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  spec.config.push_back({"world_size", 2});
  spec.addProgram("reduce").allReduce({6});
  EXPECT_EQ(errorOf(cudaSession(spec)),
            "the executable was compiled with --world-size=2 but runs on 1 rank; compile it "
            "without --world-size to run it on any number");
}

/// A collective of one rank that records what the backend hands it and
/// doubles F32 buffers on the given stream (so that the test sees it ran,
/// and in stream order).
class RecordingCollective final : public Collective {
public:
  explicit RecordingCollective(int size = 1) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  Status allReduce(const std::vector<Buffer> &buffers, s::ReduceOp op, void *stream) override {
    calls.push_back(buffers);
    streams.push_back(stream);
    ops.push_back(op);
    for (const Buffer &b : buffers) {
      std::vector<float> host(b.count);
      auto st = static_cast<cudaStream_t>(stream);
      if (cudaMemcpyAsync(host.data(), b.data, b.count * 4, cudaMemcpyDeviceToHost, st) ||
          cudaStreamSynchronize(st))
        return Status::error("copy failed");
      for (float &f : host)
        f *= 2;
      if (cudaMemcpyAsync(b.data, host.data(), b.count * 4, cudaMemcpyHostToDevice, st) ||
          cudaStreamSynchronize(st))
        return Status::error("copy failed");
    }
    return Status::ok();
  }
  Status reduceScatter(const std::vector<Buffer> &, const std::vector<Buffer> &, s::ReduceOp,
                       void *) override {
    return Status::error("RecordingCollective records all-reduces only");
  }
  Status allGather(const std::vector<Buffer> &, const std::vector<Buffer> &, void *) override {
    return Status::error("RecordingCollective records all-reduces only");
  }
  std::vector<std::vector<Buffer>> calls;
  std::vector<void *> streams;
  std::vector<s::ReduceOp> ops;

private:
  int size_;
};

// Verify that an AllReduce command reaches the session's collective with
// the tensors' addresses, element counts and dtype, on its stream.
TEST(CudaBackendTest, AllReduceGoesThroughTheCollective) {
  REQUIRE_GPU_AND_KERNELS();
  PipelineTensors t;
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA, false, &t);
  addImages(spec, true, false);
  spec.config.push_back({"world_size", 1});
  spec.addProgram("reduce", {}, {t.xs}).allReduce({t.xs});
  RecordingCollective collective;
  CudaBackendOptions options;
  options.collective = &collective;
  auto session = cudaSession(spec, options);
  ASSERT_TRUE(session) << errorOf(session);
  std::vector<float> xs = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE((*session)->writeTensor(t.xs, xs.data(), 32));
  Status ran = (*session)->run("reduce");
  ASSERT_TRUE(ran) << ran.message();
  ASSERT_EQ(collective.calls.size(), 1u);
  ASSERT_EQ(collective.calls[0].size(), 1u);
  EXPECT_EQ(collective.calls[0][0].count, 8u);
  EXPECT_EQ(collective.calls[0][0].dtype, s::DType::F32);
  EXPECT_NE(collective.streams[0], nullptr);
  std::vector<float> back(8);
  ASSERT_TRUE((*session)->readTensor(t.xs, back.data(), 32));
  EXPECT_EQ(back, (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
}

// Verify that the executable's world size must match the collective's,
// before any GPU work (so this runs without a GPU too).
TEST(CudaBackendTest, WorldSizeMustMatchTheCollective) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::CUDA);
  spec.config.push_back({"world_size", 2});
  RecordingCollective one;
  CudaBackendOptions options;
  options.collective = &one;
  auto session = cudaSession(spec, options);
  ASSERT_FALSE(session);
  EXPECT_NE(errorOf(session).find("compiled with --world-size=2 but runs on 1 rank;"),
            std::string::npos)
      << errorOf(session);
}

/// One GEMM case on the GPU: operands uploaded with NaN gaps, D read back.
void checkGemmOnGpu(const GemmCase &tc, s::DType inType, s::ComputeType compute, bool graphs) {
  GemmData d = makeGemm(tc, 11);
  d.spec.aType = d.spec.bType = inType;
  d.spec.compute = compute;
  ExecutableSpec e;
  e.target = s::TargetKind::CUDA;
  uint32_t inBytes = elementSize(inType);
  auto round = [](uint64_t b) { return (b + 255) / 256 * 256; };
  uint64_t aBytes = round(d.a.size() * inBytes), bBytes = round(d.b.size() * inBytes);
  uint64_t cBytes = round(d.c.size() * 4),
           biasBytes = round(std::max<size_t>(d.bias.size(), 1) * 4);
  uint32_t pool = e.addPool("all", aBytes + bBytes + cBytes + biasBytes);
  uint32_t a = e.addTensor("a", s::TensorRole::Input, inType, {int64_t(d.a.size())}, pool, 0);
  uint32_t b = e.addTensor("b", s::TensorRole::Input, inType, {int64_t(d.b.size())}, pool, aBytes);
  uint32_t c = e.addTensor("c", s::TensorRole::Output, s::DType::F32, {int64_t(d.c.size())}, pool,
                           aBytes + bBytes);
  uint32_t bias =
      e.addTensor("bias", s::TensorRole::Input, s::DType::F32,
                  {int64_t(std::max<size_t>(d.bias.size(), 1))}, pool, aBytes + bBytes + cBytes);
  uint32_t g = e.addGemm(d.spec);
  e.addProgram("gemm", {a, b, bias}, {c}).gemm(g, a, b, c, tc.bias ? int64_t(bias) : -1);
  CudaBackendOptions options;
  options.graphs = graphs;
  auto session = cudaSession(e, options);
  ASSERT_TRUE(session) << errorOf(session);
  Session &ss = **session;
  auto upload = [&](uint32_t t, const std::vector<double> &v, s::DType type) {
    std::vector<uint8_t> bytes(ss.tensor(t).size_bytes());
    for (size_t i = 0; i < v.size(); ++i) {
      if (type == s::DType::F32) {
        float f = float(v[i]);
        std::memcpy(&bytes[i * 4], &f, 4);
      } else {
        uint16_t h =
            type == s::DType::BF16 ? blas::floatToBf16(float(v[i])) : blas::floatToF16(float(v[i]));
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    }
    ASSERT_TRUE(ss.writeTensor(t, bytes.data(), bytes.size()));
  };
  upload(a, d.a, inType);
  upload(b, d.b, inType);
  upload(c, d.c, s::DType::F32);
  upload(bias, d.bias, s::DType::F32);
  Status run = ss.run("gemm");
  ASSERT_TRUE(run) << run.message();
  std::vector<float> got(d.c.size());
  ASSERT_TRUE(ss.readTensor(c, got.data(), got.size() * 4));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE((std::isnan(got[i]) && std::isnan(d.expected[i])) || got[i] == d.expected[i])
        << "element " << i << ": " << got[i] << " vs " << d.expected[i];
}

// Verify cuBLASLt's FP8 GEMMs against the exact reference (the values, the
// power-of-two scales and the sums are exact): every FP8 pairing, into F32
// and BF16, with and without fast accumulation, bias and beta included.
TEST(CudaBackendTest, Fp8GemmMatchesReference) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  auto open = [](const ExecutableSpec &spec) { return cudaSession(spec); };
  for (auto [at, bt] : {std::pair{s::DType::F8E4M3, s::DType::F8E4M3},
                        std::pair{s::DType::F8E5M2, s::DType::F8E4M3},
                        std::pair{s::DType::F8E4M3, s::DType::F8E5M2}})
    for (s::DType ct : {s::DType::F32, s::DType::BF16})
      for (bool fast : {false, true})
        for (const GemmCase &tc : fp8GemmCases(ct))
          checkFp8Gemm(open, s::TargetKind::CUDA, tc, at, bt, ct, fast);
}

// Verify cuBLASLt's FP8 D (GELU_AUX_BIAS, e4m3 codes, D scale, amax_D)
// against the Host GEMM on the same operands: aux (bf16 acc + bias, the
// sums exact) bit for bit, amax_D within 1e-3, and each code within one
// step of the Host's (their GELUs' tanh may differ in the last bits of
// f32, which moves a code across a rounding boundary at most by one).
TEST(CudaBackendTest, Fp8DGeluMatchesTheHostGemm) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  const int64_t m = 64, n = 48, k = 32;
  GemmSpec g;
  g.m = m, g.n = n, g.k = k, g.transa = true, g.lda = k, g.ldb = k, g.ldc = m;
  g.aType = g.bType = s::DType::F8E4M3, g.cType = s::DType::BF16, g.fastAccum = true;
  g.dType = s::DType::F8E4M3, g.epilogue = s::Epilogue::BiasGeluAux;
  // Small multiples of 1/4 (exact in e4m3), so every sum is exact in f32.
  std::vector<uint8_t> a(k * m), b(k * n);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = blas::floatToF8e4m3(float(int(i * 7 % 9) - 4) / 4);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = blas::floatToF8e4m3(float(int(i * 5 % 7) - 3) / 4);
  std::vector<uint16_t> bias(m);
  for (int64_t i = 0; i < m; ++i)
    bias[i] = blas::floatToBf16(float(i % 5 - 2) / 8);
  const float aScale = 0.5f, bScale = 2.0f, dScale = 128.0f; // codes up to ~233 of 448

  ExecutableSpec e;
  e.target = s::TargetKind::CUDA;
  uint32_t pool = e.addPool("all", 1 << 16);
  uint64_t at = 0;
  auto tensor = [&](const char *name, s::DType t, int64_t count) {
    uint32_t i = e.addTensor(name, s::TensorRole::Activation, t, {count}, pool, at);
    at += (uint64_t(count) * elementSize(t) + 255) / 256 * 256;
    return i;
  };
  uint32_t ta = tensor("a", s::DType::F8E4M3, k * m), tb = tensor("b", s::DType::F8E4M3, k * n);
  uint32_t td = tensor("d", s::DType::F8E4M3, m * n), tbias = tensor("bias", s::DType::BF16, m);
  uint32_t taux = tensor("aux", s::DType::BF16, m * n), tas = tensor("as", s::DType::F32, 1);
  uint32_t tbs = tensor("bs", s::DType::F32, 1), tds = tensor("ds", s::DType::F32, 1);
  uint32_t tamax = tensor("amax", s::DType::F32, 4);
  ProgramSpec &p = e.addProgram("gemm", {}, {});
  p.gemm(e.addGemm(g), ta, tb, td, tbias).scales(tas, tbs);
  p.commands.back().aux = taux;
  p.commands.back().dScale = tds;
  p.commands.back().amaxD = tamax;
  auto session = cudaSession(e);
  ASSERT_TRUE(session) << errorOf(session);
  Session &ss = **session;
  ASSERT_TRUE(ss.writeTensor(ta, a.data(), a.size()));
  ASSERT_TRUE(ss.writeTensor(tb, b.data(), b.size()));
  ASSERT_TRUE(ss.writeTensor(tbias, bias.data(), bias.size() * 2));
  ASSERT_TRUE(ss.writeTensor(tas, &aScale, 4));
  ASSERT_TRUE(ss.writeTensor(tbs, &bScale, 4));
  ASSERT_TRUE(ss.writeTensor(tds, &dScale, 4));
  const float zeros[4] = {};
  ASSERT_TRUE(ss.writeTensor(tamax, zeros, sizeof(zeros)));
  Status ran = ss.run("gemm");
  ASSERT_TRUE(ran) << ran.message();
  std::vector<uint8_t> d(m * n);
  std::vector<uint16_t> aux(m * n);
  // amax_D is the first element of a history; the rest stays as it was.
  float history[4] = {};
  ASSERT_TRUE(ss.readTensor(td, d.data(), d.size()));
  ASSERT_TRUE(ss.readTensor(taux, aux.data(), aux.size() * 2));
  ASSERT_TRUE(ss.readTensor(tamax, history, sizeof(history)));
  const float amax = history[0];
  EXPECT_EQ(history[1], 0.0f);
  EXPECT_EQ(history[3], 0.0f);

  flatbuffers::FlatBufferBuilder fb;
  fb.Finish(s::CreateGemm(fb, g.m, g.n, g.k, g.batch, g.transa, g.transb, g.lda, g.ldb, g.ldc, 0,
                          0, 0, g.aType, g.bType, g.cType, g.compute, g.epilogue, 1.0, 0.0, true,
                          flatbuffers::Optional<s::DType>(s::DType::F8E4M3)));
  std::vector<uint8_t> hostD(m * n);
  std::vector<uint16_t> hostAux(m * n);
  float hostAmax = 0;
  blas::GemmOperands ops{a.data(), b.data(), hostD.data(), bias.data(), hostAux.data()};
  ops.aScale = &aScale, ops.bScale = &bScale, ops.dScale = &dScale, ops.amaxD = &hostAmax;
  Status host = blas::cpuGemm(*flatbuffers::GetRoot<s::Gemm>(fb.GetBufferPointer()), 0, ops);
  ASSERT_TRUE(host) << host.message();
  EXPECT_EQ(aux, hostAux);
  EXPECT_NEAR(amax, hostAmax, 1e-3 * hostAmax);
  EXPECT_GT(hostAmax * dScale, 100.0f) << "the codes use too little of e4m3's range";
  for (size_t i = 0; i < d.size(); ++i) {
    int gi = d[i] & 0x80 ? -(d[i] & 0x7f) : d[i], hi = hostD[i] & 0x80 ? -(hostD[i] & 0x7f) : hostD[i];
    ASSERT_LE(std::abs(gi - hi), 1) << "element " << i << ": " << blas::f8e4m3ToFloat(d[i])
                                    << " vs " << blas::f8e4m3ToFloat(hostD[i]);
  }
}

/// A BF16 GEMM of 256 x 256 x 256 (the heuristic offers several
/// algorithms), its operands all ones: D = 256 everywhere.
ExecutableSpec onesGemm(uint32_t *a, uint32_t *b, uint32_t *d) {
  const int64_t n = 256;
  GemmSpec g;
  g.m = g.n = g.k = n, g.lda = g.ldb = g.ldc = n;
  g.aType = g.bType = g.cType = s::DType::BF16;
  ExecutableSpec e;
  e.target = s::TargetKind::CUDA;
  uint32_t pool = e.addPool("all", 3 * n * n * 2);
  *a = e.addTensor("a", s::TensorRole::Input, s::DType::BF16, {n * n}, pool, 0);
  *b = e.addTensor("b", s::TensorRole::Input, s::DType::BF16, {n * n}, pool, n * n * 2);
  *d = e.addTensor("d", s::TensorRole::Output, s::DType::BF16, {n * n}, pool, 2 * n * n * 2);
  e.addProgram("gemm", {*a, *b}, {*d}).gemm(e.addGemm(g), *a, *b, *d, -1);
  return e;
}

// Verify gptrun --gemm-algos's file: the first session times the GEMM and
// writes its choice; a second session takes it from the file (and leaves
// the file as it was) with the same result; a file of another GPU is
// refused when the session opens, naming the file.
TEST(CudaBackendTest, GemmAlgoFileKeepsAutotuningsChoice) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gptc-gemm-algos-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "algos.txt").string();
  uint32_t a, b, d;
  ExecutableSpec e = onesGemm(&a, &b, &d);
  std::vector<uint16_t> ones(256 * 256, blas::floatToBf16(1.0f));
  auto runOnce = [&]() -> std::string {
    CudaBackendOptions options;
    options.gemmAlgos = path;
    auto session = cudaSession(e, options);
    if (!session)
      return errorOf(session);
    Session &ss = **session;
    if (!ss.writeTensor(a, ones.data(), ones.size() * 2) ||
        !ss.writeTensor(b, ones.data(), ones.size() * 2))
      return "upload failed";
    if (Status ran = ss.run("gemm"); !ran)
      return ran.message();
    std::vector<uint16_t> out(ones.size());
    if (!ss.readTensor(d, out.data(), out.size() * 2))
      return "download failed";
    for (uint16_t v : out)
      if (blas::bf16ToFloat(v) != 256.0f)
        return "D is not 256";
    return "";
  };
  auto text = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ASSERT_EQ(runOnce(), "");
  StatusOr<blas::GemmAlgoFile> written = blas::readGemmAlgos(path);
  ASSERT_TRUE(written) << written.status().message();
  EXPECT_EQ(written->algos.size(), 1u);
  std::string first = text();
  ASSERT_EQ(runOnce(), "");
  EXPECT_EQ(text(), first);
  written->device = "another GPU (sm_00)";
  ASSERT_TRUE(blas::writeGemmAlgos(path, *written));
  std::string refused = runOnce();
  EXPECT_NE(refused.find(path + ": its algorithms were chosen by cuBLASLt"), std::string::npos)
      << refused;
  fs::remove_all(dir);
}

// Verify cuBLASLt against the exact reference for every case: F32, TF32
// and BF16 inputs (small integers are exact in all), F16 under graphs.
TEST(CudaBackendTest, GemmMatchesReference) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  for (const GemmCase &tc : allGemmCases()) {
    SCOPED_TRACE(tc.name());
    checkGemmOnGpu(tc, s::DType::F32, s::ComputeType::F32, false);
    checkGemmOnGpu(tc, s::DType::F32, s::ComputeType::F32FastTF32, false);
    checkGemmOnGpu(tc, s::DType::BF16, s::ComputeType::F32, false);
    checkGemmOnGpu(tc, s::DType::F16, s::ComputeType::F32, true);
  }
}

/// One epilogue case on the GPU in `type` (A, B, C, bias and aux alike):
/// D, the aux matrix and the bias gradient read back and compared with the
/// double reference within `tolerance` (relative, plus as much absolute).
/// cuBLASLt implements some epilogues for some layouts only: a refusal
/// must be the runtime's clear error, and sets `*refused`.
void checkEpilogueOnGpu(s::Epilogue epilogue, bool ta, bool tb, s::DType type, double tolerance,
                        bool *refused) {
  *refused = false;
  EpilogueData d = makeEpilogueGemm(epilogue, ta, tb, 13);
  d.gemm.spec.aType = d.gemm.spec.bType = d.gemm.spec.cType = type;
  ExecutableSpec e;
  e.target = s::TargetKind::CUDA;
  uint32_t bytes = elementSize(type);
  auto round = [](uint64_t b) { return (b + 255) / 256 * 256; };
  std::vector<double> biasIn = d.gemm.bias;
  biasIn.resize(std::max({d.gemm.bias.size(), d.expectedBias.size(), size_t(1)}), 0.0);
  std::vector<double> auxIn = d.aux.empty() ? d.expectedAux : d.aux;
  if (auxIn.empty())
    auxIn.assign(1, 0.0);
  std::vector<std::pair<const std::vector<double> *, const char *>> parts = {
      {&d.gemm.a, "a"}, {&d.gemm.b, "b"}, {&d.gemm.c, "c"}, {&biasIn, "bias"}, {&auxIn, "aux"}};
  uint64_t total = 0;
  for (auto &part : parts)
    total += round(part.first->size() * bytes);
  uint32_t pool = e.addPool("all", total);
  std::vector<uint32_t> t;
  uint64_t offset = 0;
  for (auto &part : parts) {
    t.push_back(e.addTensor(part.second, s::TensorRole::Input, type,
                            {int64_t(part.first->size())}, pool, offset));
    offset += round(part.first->size() * bytes);
  }
  bool hasBias = !d.gemm.bias.empty() || !d.expectedBias.empty();
  bool hasAux = !d.aux.empty() || !d.expectedAux.empty();
  uint32_t g = e.addGemm(d.gemm.spec);
  ProgramSpec &prog = e.addProgram("gemm", {t[0], t[1], t[3], t[4]}, {t[2]});
  prog.gemm(g, t[0], t[1], t[2], hasBias ? int64_t(t[3]) : -1);
  prog.commands.back().aux = hasAux ? int64_t(t[4]) : -1;
  auto session = cudaSession(e, CudaBackendOptions());
  ASSERT_TRUE(session) << errorOf(session);
  Session &ss = **session;
  auto upload = [&](uint32_t tensor, const std::vector<double> &v) {
    std::vector<uint8_t> raw(ss.tensor(tensor).size_bytes());
    for (size_t i = 0; i < v.size(); ++i) {
      if (type == s::DType::F32) {
        float f = float(v[i]);
        std::memcpy(&raw[i * 4], &f, 4);
      } else {
        uint16_t h = blas::floatToBf16(float(v[i]));
        std::memcpy(&raw[i * 2], &h, 2);
      }
    }
    ASSERT_TRUE(ss.writeTensor(tensor, raw.data(), raw.size()));
  };
  auto download = [&](uint32_t tensor, size_t n) {
    std::vector<uint8_t> raw(ss.tensor(tensor).size_bytes());
    EXPECT_TRUE(ss.readTensor(tensor, raw.data(), raw.size()));
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) {
      if (type == s::DType::F32) {
        float f;
        std::memcpy(&f, &raw[i * 4], 4);
        v[i] = f;
      } else {
        uint16_t h;
        std::memcpy(&h, &raw[i * 2], 2);
        v[i] = blas::bf16ToFloat(h);
      }
    }
    return v;
  };
  for (size_t i = 0; i < parts.size(); ++i)
    upload(t[i], *parts[i].first);
  Status run = ss.run("gemm");
  if (!run && run.message().find("CUBLAS_STATUS_NOT_SUPPORTED") != std::string::npos) {
    *refused = true;
    return;
  }
  ASSERT_TRUE(run) << run.message();
  auto near = [&](double got, double want) {
    return (std::isnan(got) && std::isnan(want)) ||
           std::fabs(got - want) <= tolerance * (1 + std::fabs(want));
  };
  std::vector<double> out = download(t[2], d.gemm.expected.size());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(near(out[i], d.gemm.expected[i]))
        << "D element " << i << ": " << out[i] << " vs " << d.gemm.expected[i];
  std::vector<double> aux = download(t[4], d.expectedAux.size());
  for (size_t i = 0; i < d.expectedAux.size(); ++i)
    if (!std::isnan(d.expectedAux[i]))
      EXPECT_TRUE(near(aux[i], d.expectedAux[i]))
          << "aux element " << i << ": " << aux[i] << " vs " << d.expectedAux[i];
  std::vector<double> bias = download(t[3], d.expectedBias.size());
  for (size_t i = 0; i < d.expectedBias.size(); ++i)
    EXPECT_TRUE(near(bias[i], d.expectedBias[i]))
        << "bias gradient " << i << ": " << bias[i] << " vs " << d.expectedBias[i];
}

// Verify every epilogue beyond Bias on cuBLASLt, in F32 and in BF16, for
// all transposes: correct where cuBLASLt runs it, a clear error where it
// does not, and run in the layouts codegen emits (GELU forward: TN, DGELU
// and DGELU_BGRAD: NN, bias gradients: NT). Prints the refused combinations.
TEST(CudaBackendTest, EpiloguesMatchReference) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  for (s::Epilogue e : fusedEpilogues())
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        std::string layout = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
        SCOPED_TRACE(std::string(s::EnumNameEpilogue(e)) + " " + layout);
        bool emitted = (blas::epilogueAppliesGelu(e) && layout == "TN") ||
                       (blas::epilogueAppliesGeluGrad(e) && layout == "NN") ||
                       ((e == s::Epilogue::BGradA || e == s::Epilogue::BGradB) && layout == "NT");
        for (s::DType type : {s::DType::F32, s::DType::BF16}) {
          bool refused = false;
          checkEpilogueOnGpu(e, ta, tb, type, type == s::DType::F32 ? 1e-3 : 2e-2, &refused);
          if (refused)
            std::printf("cuBLASLt refuses epilogue %s %s %s\n", s::EnumNameEpilogue(e),
                        layout.c_str(), s::EnumNameDType(type));
          EXPECT_FALSE(refused && emitted) << "a layout codegen emits";
        }
      }
}

} // namespace
