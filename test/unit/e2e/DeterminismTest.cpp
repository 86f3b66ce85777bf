//===- DeterminismTest.cpp - same seed, same executable: same bits --------===//
//
// Compiles `mini` for the Host target and trains it twice with gptrun's
// Trainer (each run opens its own session and data): every step's loss,
// gradient norm and lr must be the same bits. The CUDA counterpart is
// bench/device/determinism_device.sh; byte-identical compilation is
// test/tools/gptc/deterministic-output.mlir.
//
//===----------------------------------------------------------------------===//

#include "ScratchDir.h"
#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/support/ThreadPool.h"
#include "tools/gptrun/Trainer.h"

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;

class DeterminismTest : public GPT2Test {
protected:

  ScratchDir scratch{"determinism-test"};
  fs::path dir = scratch.path();
};

std::vector<gptrun::StepRecord> trainRun(const gptrun::Options &o) {
  gptrun::Trainer t(o);
  Status s = t.setUp();
  EXPECT_TRUE(s) << s.message();
  if (!s)
    return {};
  s = t.run();
  EXPECT_TRUE(s) << s.message();
  return t.history();
}

// Verify that the Host target's thread count changes no bit: 1, 2 and 3
// threads (GEMM tiles and kernel launches split over the pool, the
// latter once a first run shows them long enough) give the same losses,
// gradient norms and lrs.
TEST_F(DeterminismTest, SameBitsForEveryHostThreadCount) {
  ASSERT_TRUE(compile("mini", Phase::MemoryPlan, [](CompileOptions &o) {
    o.batch = 2;
    o.seq = 32;
    o.lr = 1e-3;
  })) << diagnostics;
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  std::string exe = (dir / "mini-threads.fb").string();
  std::ofstream(exe, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));

  gptrun::Options o;
  o.executable = exe;
  o.data = GPTC_DATA_DIR "/austen_train.bin";
  o.steps = 4;
  std::vector<gptrun::StepRecord> runs[3];
  for (unsigned threads : {1u, 2u, 3u}) {
    ThreadPool::setHostThreads(threads);
    runs[threads - 1] = trainRun(o);
    ASSERT_EQ(runs[threads - 1].size(), 4u) << threads << " threads";
  }
  ThreadPool::setHostThreads(ThreadPool::hostThreads());
  for (unsigned t : {2u, 3u})
    for (size_t i = 0; i < 4; ++i) {
      const gptrun::StepRecord &a = runs[0][i], &b = runs[t - 1][i];
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, 4), 0)
          << t << " threads, step " << a.step << ": " << a.loss << " vs " << b.loss;
      EXPECT_EQ(std::memcmp(&a.gradNorm, &b.gradNorm, 4), 0) << t << " threads, step " << a.step;
    }
}

// Verify two runs with the same seed give bit-identical losses, gradient
// norms and lrs (with gradient accumulation, so the accumulation order is
// covered too), and that another seed does not (the check can fail).
TEST_F(DeterminismTest, SameSeedSameBits) {
  ASSERT_TRUE(compile("mini", Phase::MemoryPlan, [](CompileOptions &o) {
    o.batch = 2;
    o.seq = 32;
    o.accumSteps = 2;
    o.lr = 1e-3;
  })) << diagnostics;
  codegen::EmitOptions emit;
  emit.target = codegen::EmitOptions::Target::Host;
  auto bytes = codegen::emitExecutable(*module, emit);
  ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
  std::string exe = (dir / "mini.fb").string();
  std::ofstream(exe, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));

  gptrun::Options o;
  o.executable = exe;
  o.data = GPTC_DATA_DIR "/austen_train.bin";
  o.steps = 5;
  o.seed = 42;
  std::vector<gptrun::StepRecord> a = trainRun(o), b = trainRun(o);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_NE(a.front().loss, a.back().loss);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i].loss, &b[i].loss, 4), 0)
        << "step " << a[i].step << ": " << a[i].loss << " vs " << b[i].loss;
    EXPECT_EQ(std::memcmp(&a[i].gradNorm, &b[i].gradNorm, 4), 0) << "step " << a[i].step;
    EXPECT_EQ(std::memcmp(&a[i].lr, &b[i].lr, 4), 0) << "step " << a[i].step;
  }
  o.seed = 43;
  std::vector<gptrun::StepRecord> c = trainRun(o);
  ASSERT_EQ(c.size(), 5u);
  EXPECT_NE(std::memcmp(&a[0].loss, &c[0].loss, 4), 0);
}

} // namespace
