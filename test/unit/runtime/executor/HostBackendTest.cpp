//===- HostBackendTest.cpp - Session + HostBackend end to end -------------===//
//
// Runs hand-built executables whose host_object is TestKernels.c, built
// by CMake as a shared library (GPTC_TEST_KERNELS_SO), and checks every
// output exactly, then the Session's checks one by one.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/HostBackend.h"
#include "runtime/executor/Session.h"
#include "test/unit/runtime/executor/AsyncSteps.h"
#include "test/unit/runtime/executor/Fp8Gemm.h"
#include "test/unit/runtime/executor/TestPrograms.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace gptc;
using namespace gptc::testing;

namespace {

std::vector<uint8_t> kernelObject() {
  std::vector<uint8_t> bytes = readFileBytes(GPTC_TEST_KERNELS_SO);
  EXPECT_FALSE(bytes.empty()) << "cannot read " << GPTC_TEST_KERNELS_SO;
  return bytes;
}

StatusOr<std::unique_ptr<Session>> hostSession(const ExecutableSpec &spec) {
  StatusOr<Executable> exe = Executable::loadBytes(spec.build(), "test.fb");
  if (!exe)
    return exe.status();
  return Session::create(std::move(*exe), createHostBackend);
}

std::string errorOf(const Status &s) { return s ? "" : s.message(); }

template <typename T> std::string errorOf(const StatusOr<T> &s) {
  return s ? "" : s.status().message();
}

std::vector<float> output(Session &session, const std::string &name, size_t n) {
  std::vector<float> v(n);
  Status s = session.getOutput("main", name, v.data(), n * 4);
  EXPECT_TRUE(s) << s.message();
  return v;
}

void setPipelineInputs(Session &session, const PipelineValues &v) {
  for (auto [name, data] : {std::pair{"x", &v.x}, std::pair{"a", &v.a}, std::pair{"b", &v.b}}) {
    Status s = session.setInput("main", name, *data);
    ASSERT_TRUE(s) << s.message();
  }
  StatusOr<uint32_t> bias = session.findTensor("bias");
  ASSERT_TRUE(bias);
  ASSERT_TRUE(session.writeTensor(*bias, v.bias.data(), 8));
}

// Verify a program with two kernels, a RunGemm with bias, a Memset and two
// Copies: every output exactly.
TEST(HostBackendTest, RunsEveryCommandKind) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
  spec.hostObject = kernelObject();
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  PipelineValues v;
  setPipelineInputs(**session, v);
  Status run = (*session)->run("main");
  ASSERT_TRUE(run) << run.message();
  EXPECT_EQ(output(**session, "y", 4), v.y());
  EXPECT_EQ(output(**session, "xs", 8), v.xs());
  std::vector<float> m = output(**session, "m", 2);
  EXPECT_EQ(std::memcmp(m.data(), v.m().data(), 8), 0);
  EXPECT_EQ((*session)->backend().deviceName(), "host");
}

// Verify the asynchronous queue: copies, launches and read-backs run in
// order, and nothing runs before its fence is waited for (the host defers
// the work, so a read-back taken too early shows up as stale bytes).
TEST(HostBackendTest, AsyncQueueRunsInOrderAtTheFence) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host, /*twoStreams=*/true);
  spec.hostObject = kernelObject();
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  checkAsyncSteps(**session);

  Backend &backend = (*session)->backend();
  uint32_t xs = *(*session)->findTensor("xs", "main");
  float before[8], *out = static_cast<float *>(*backend.allocateHost(32));
  ASSERT_TRUE((*session)->getOutput("main", "xs", before, 32));
  std::fill(out, out + 8, -1.f);
  ASSERT_TRUE(backend.launch(**(*session)->program("main")));
  ASSERT_TRUE(backend.readAsync(xs, out));
  StatusOr<Backend::Fence> fence = backend.recordFence();
  ASSERT_TRUE(fence);
  EXPECT_EQ(out[0], -1.f); // not yet
  ASSERT_TRUE(backend.waitFence(*fence));
  EXPECT_EQ(out[0], before[0] * 0.5f);
  backend.freeHost(out);
}

// Verify that the two-stream variant (events are no-ops on the host) gives
// the same results, and that state persists between runs: x is scaled in
// place, so a second run halves it again.
TEST(HostBackendTest, TwoStreamsAndRepeatedRuns) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host, /*twoStreams=*/true);
  spec.hostObject = kernelObject();
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  PipelineValues v;
  setPipelineInputs(**session, v);
  ASSERT_TRUE((*session)->run("main"));
  EXPECT_EQ(output(**session, "y", 4), v.y());
  ASSERT_TRUE((*session)->run("main"));
  std::vector<float> quarter = {0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2};
  EXPECT_EQ(output(**session, "xs", 8), quarter);
}

// Verify pools are zeroed at creation and zeroTensors clears one role only.
TEST(HostBackendTest, PoolsStartZeroedAndZeroTensorsByRole) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
  spec.hostObject = kernelObject();
  uint32_t state =
      spec.addTensor("w.adam_m", s::TensorRole::OptimizerState, s::DType::F32, {2}, 0, 64);
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  Session &ss = **session;
  std::vector<float> got(2, -1);
  ASSERT_TRUE(ss.readTensor(state, got.data(), 8));
  EXPECT_EQ(got, std::vector<float>({0, 0}));
  std::vector<float> ones = {1, 1};
  ASSERT_TRUE(ss.writeTensor(state, ones.data(), 8));
  ASSERT_TRUE(ss.writeTensor(*ss.findTensor("bias"), ones.data(), 8));
  ASSERT_TRUE(ss.zeroTensors(s::TensorRole::OptimizerState));
  ASSERT_TRUE(ss.readTensor(state, got.data(), 8));
  EXPECT_EQ(got, std::vector<float>({0, 0}));
  ASSERT_TRUE(ss.readTensor(*ss.findTensor("bias"), got.data(), 8));
  EXPECT_EQ(got, ones);
  EXPECT_EQ(ss.poolReport(), "params 256 B, inputs 512 B, activations 1.0 KiB; total 1.8 KiB");
  ASSERT_EQ(ss.pools().size(), 3u);
  EXPECT_EQ(ss.pools()[0].tensors, 2u);
}

// Verify the Session's checks, each naming the fault.
TEST(HostBackendTest, SessionChecksNamesRolesAndSizes) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
  spec.hostObject = kernelObject();
  // A second program with its own tensor named "x" makes the name ambiguous.
  uint32_t x2 = spec.addTensor("x", s::TensorRole::Input, s::DType::F32, {2}, 1, 128);
  spec.addProgram("other", {x2}, {});
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  Session &ss = **session;
  std::vector<float> eight(8), two(2);
  EXPECT_EQ(errorOf(ss.findTensor("x")),
            "tensor name 'x' is used by 2 tensors; name the program that reads or writes it");
  EXPECT_EQ(*ss.findTensor("x", "other"), x2);
  EXPECT_EQ(*ss.findTensor("x", "main"), 0u);
  EXPECT_EQ(errorOf(ss.findTensor("nope")), "the executable has no tensor 'nope'");
  // With a program, only its own tensors count, even where the name is unique.
  EXPECT_EQ(errorOf(ss.findTensor("y", "other")),
            "program 'other' has no input or output 'y' (its inputs: x; outputs: none, "
            "besides parameters and state)");
  EXPECT_EQ(errorOf(ss.getScalarF32("other", "m")),
            "program 'other' has no input or output 'm' (its inputs: x; outputs: none, "
            "besides parameters and state)");
  EXPECT_EQ(errorOf(ss.setInput("main", "x", two)),
            "tensor 'x' (Input, F32 (8), 32 bytes) got 8 bytes");
  EXPECT_EQ(errorOf(ss.setInput("main", "bias", two)),
            "tensor 'bias' (Parameter, F32 (2), 8 bytes) is not an input");
  EXPECT_EQ(errorOf(ss.getOutput("main", "x", eight.data(), 32)),
            "tensor 'x' (Input, F32 (8), 32 bytes) is not an output");
  EXPECT_EQ(errorOf(ss.run("forward")),
            "the executable has no program 'forward' (it has: main, other)");
  EXPECT_EQ(errorOf(ss.run("main")),
            "program 'main': input 'x' (Input, F32 (8), 32 bytes) was never set");
  EXPECT_EQ(errorOf(ss.getScalarF32("main", "y")),
            "tensor 'y' (Output, F32 (2, 2), 16 bytes) is not an F32 scalar");
  EXPECT_TRUE(ss.setInput("other", "x", two));
  EXPECT_TRUE(ss.run("other"));
}

// Verify that on one rank (no collective) an AllReduce is skipped: the mean,
// sum or maximum of one rank's tensors is themselves.
TEST(HostBackendTest, AllReduceOnOneRankIsSkipped) {
  ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
  spec.hostObject = kernelObject();
  spec.addProgram("reduce").memset(6, 0x3f).allReduce({6});
  auto session = hostSession(spec);
  ASSERT_TRUE(session) << errorOf(session);
  Status ran = (*session)->run("reduce");
  ASSERT_TRUE(ran) << ran.message();
  std::vector<uint8_t> y(16, 0);
  ASSERT_TRUE((*session)->readTensor(6, y.data(), 16));
  EXPECT_EQ(y, std::vector<uint8_t>(16, 0x3f)) << "the Memset ran and nothing changed it";
}

// Verify that an executable compiled for W ranks refuses one rank, and that
// one without collectives refuses several (both before any command runs).
TEST(HostBackendTest, WorldSizeMustMatchTheRanks) {
  ExecutableSpec pinned = pipelineExecutable(s::TargetKind::Host);
  pinned.hostObject = kernelObject();
  pinned.config.push_back({"world_size", 2});
  pinned.addProgram("reduce").allReduce({6});
  EXPECT_EQ(errorOf(hostSession(pinned)),
            "the executable was compiled with --world-size=2 but runs on 1 rank; compile it "
            "without --world-size to run it on any number");
}

// Verify the backend's load-time errors: no host_object, a missing symbol,
// an unsupported epilogue, and a GEMM operand outside its tensor.
TEST(HostBackendTest, CreationErrors) {
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    EXPECT_EQ(errorOf(hostSession(spec)),
              "kernel 'gptc_test_scale' needs host_object, which the executable lacks "
              "(compiled for the CUDA target? use --target cuda)");
  }
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    spec.hostObject = kernelObject();
    spec.kernels[1].hostSymbol = "gptc_test_missing";
    EXPECT_EQ(errorOf(hostSession(spec)),
              "kernel 'gptc_test_add': host_object has no symbol 'gptc_test_missing'");
  }
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    spec.hostObject = {'n', 'o', 't', ' ', 'E', 'L', 'F'};
    EXPECT_NE(errorOf(hostSession(spec)).find("cannot load host_object: "), std::string::npos);
  }
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    spec.hostObject = kernelObject();
    spec.gemms[0].epilogue = static_cast<s::Epilogue>(42);
    EXPECT_EQ(errorOf(hostSession(spec)),
              "program 'main' command 1: GEMM 0 (m=2 n=2 k=3 batch=1): epilogue 42 is not one "
              "this runtime knows");
  }
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    spec.hostObject = kernelObject();
    spec.gemms[0].k = 4, spec.gemms[0].ldb = 4; // A would be (2 x 4): 8 floats, a has 6
    EXPECT_EQ(errorOf(hostSession(spec)),
              "program 'main' command 1: GEMM 0: A spans 32 bytes but tensor 'a' has 24");
  }
  {
    ExecutableSpec spec = pipelineExecutable(s::TargetKind::Host);
    spec.hostObject = kernelObject();
    spec.programs[0].commands[1].bias = -1;
    EXPECT_EQ(errorOf(hostSession(spec)),
              "program 'main' command 1: GEMM 0: epilogue Bias needs a bias tensor");
  }
}

// Verify FP8 GEMMs through the Host backend against the exact reference:
// every FP8 pairing into F32 and BF16, with fast_accum set (the Host
// target accumulates in f32 either way).
TEST(HostBackendTest, Fp8GemmMatchesReference) {
  for (auto [at, bt] : {std::pair{s::DType::F8E4M3, s::DType::F8E4M3},
                        std::pair{s::DType::F8E5M2, s::DType::F8E4M3},
                        std::pair{s::DType::F8E4M3, s::DType::F8E5M2}})
    for (s::DType ct : {s::DType::F32, s::DType::BF16})
      for (const GemmCase &tc : fp8GemmCases(ct))
        checkFp8Gemm(hostSession, s::TargetKind::Host, tc, at, bt, ct, ct == s::DType::BF16);
}

// Verify that the loader names a missing, mistyped, unexpected or
// out-of-range scale tensor.
TEST(HostBackendTest, Fp8ScalesAreChecked) {
  GemmCase tc = fp8GemmCases(s::DType::F32)[0];
  auto program = [&] {
    return fp8GemmProgram(tc, s::TargetKind::Host, s::DType::F8E4M3, s::DType::F8E4M3,
                          s::DType::F32, false);
  };
  Fp8GemmProgram p = program();
  p.spec.programs[0].commands[0].bScale = -1;
  EXPECT_EQ(errorOf(hostSession(p.spec)),
            "program 'gemm' command 0: GEMM 0: FP8 operands need b_scale, a scale tensor");
  p = program();
  p.spec.tensors[p.aScale].dtype = s::DType::BF16;
  EXPECT_EQ(errorOf(hostSession(p.spec)),
            "program 'gemm' command 0: GEMM 0: a_scale is tensor 'a_scale' of type BF16, the GEMM "
            "reads F32");
  p = program();
  p.spec.programs[0].commands[0].aScale = 99;
  EXPECT_EQ(errorOf(hostSession(p.spec)),
            "test.fb: program 'gemm' command 0 refers to tensor 99 but the executable has 6");
  p = program();
  p.spec.gemms[0].aType = p.spec.gemms[0].bType = s::DType::BF16;
  p.spec.tensors[p.a].dtype = p.spec.tensors[p.b].dtype = s::DType::BF16;
  EXPECT_EQ(errorOf(hostSession(p.spec)),
            "program 'gemm' command 0: GEMM 0: a_scale is for FP8 operands only");
}

} // namespace
