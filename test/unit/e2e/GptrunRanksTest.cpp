//===- GptrunRanksTest.cpp - gptrun --gpus N on the Host target ----------===//
//
// The whole multi-rank path of the gptrun binary, in CI: `tiny` compiled
// for the Host target for 2 data-parallel ranks of B=2, and for one device
// with B=4. `gptrun --target host --gpus 2` (two simulated ranks in threads)
// must log the same losses and gradient norms as `gptrun` on the
// single-device executable, step for step: rank r reads window 2*step + r,
// which is rows [2r, 2r+2) of the B=4 batch. Then the flag and launcher
// errors, which need no GPU either.
//
//===----------------------------------------------------------------------===//

#include "ScratchDir.h"
#include "TestUtils.h"

#include "RunTool.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/data/TokenFile.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;
constexpr int64_t kBatch = 2, kSeq = 8, kVocab = 60;
constexpr int kSteps = 5;

struct Row {
  double loss = 0, norm = 0;
};

class GptrunRanksTest : public GPT2Test {
protected:
  void SetUp() override {
    std::mt19937 rng(5);
    std::vector<int32_t> tokens(4000);
    for (int32_t &t : tokens)
      t = int32_t(rng() % kVocab);
    ASSERT_TRUE(data::writeTokenFile(data(), tokens));
  }

  std::string data() const { return (dir / "tokens.bin").string(); }

  /// Compiles `tiny` for the Host target to `name` in the test directory.
  std::string emit(const std::string &name, int64_t batch, int64_t worldSize,
                   const std::string &precision = "fp32", int64_t zero = 0) {
    std::string path = (dir / name).string();
    EXPECT_TRUE(compile("tiny", Phase::MemoryPlan, [&](CompileOptions &o) {
      o.zero = zero;
      o.precision = *parsePrecision(precision);
      o.batch = batch;
      o.seq = kSeq;
      o.lr = 1e-2;
      o.worldSize = worldSize;
      o.bucketMb = 0.004; // several buckets
    })) << diagnostics;
    codegen::EmitOptions options;
    options.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, options);
    EXPECT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    if (mlir::succeeded(bytes))
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));
    return path;
  }

  ToolResult gptrun(const std::string &args, const std::string &env = "") {
    return runTool(env + " " GPTC_GPTRUN, args + " --data " + data() + " --no-progress");
  }

  /// The training rows of DIR/log.csv: kind,step,loss,grad_norm,...
  static std::vector<Row> steps(const fs::path &logDir) {
    std::ifstream in(logDir / "log.csv");
    std::vector<Row> rows;
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
      std::stringstream fields(line);
      std::string kind, step, loss, norm;
      std::getline(fields, kind, ',');
      std::getline(fields, step, ',');
      std::getline(fields, loss, ',');
      std::getline(fields, norm, ',');
      if (kind == "train")
        rows.push_back({std::stod(loss), std::stod(norm)});
    }
    return rows;
  }

  static size_t count(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  }

  /// Trains 4 steps straight, then 2 + a resumed 2, on 2 host ranks:
  /// the resumed steps must log the straight run's numbers exactly.
  void expectResumeContinuesExactly(const std::string &ranked) {
    std::string ckpt = (dir / "ckpt").string();
    ToolResult straight =
        gptrun(ranked + " --target host --gpus 2 --steps 4 --log-dir " + (dir / "straight").string());
    ASSERT_EQ(straight.status, 0) << straight.output;
    ToolResult first = gptrun(ranked + " --target host --gpus 2 --steps 2 --checkpoint-dir " + ckpt);
    ASSERT_EQ(first.status, 0) << first.output;
    ToolResult rest = gptrun(ranked +
                             " --target host --gpus 2 --steps 4 --resume latest "
                             "--checkpoint-dir " +
                             ckpt + " --log-dir " + (dir / "rest").string());
    ASSERT_EQ(rest.status, 0) << rest.output;
    std::vector<Row> a = steps(dir / "straight"), b = steps(dir / "rest");
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(b[i].loss, a[i + 2].loss) << "step " << i + 3;
      EXPECT_EQ(b[i].norm, a[i + 2].norm) << "step " << i + 3;
    }
  }

  ScratchDir scratch{"gptrun-ranks-test"};
  fs::path dir = scratch.path();
};

TEST_F(GptrunRanksTest, TwoHostRanksLogWhatOneBigBatchLogs) {
  std::string ranked = emit("ws2.fb", kBatch, 2);
  std::string single = emit("ws0.fb", 2 * kBatch, 0);
  std::string steps_ = " --steps " + std::to_string(kSteps);
  ToolResult big = gptrun(single + steps_ + " --log-dir " + (dir / "big").string());
  ASSERT_EQ(big.status, 0) << big.output;
  ToolResult two =
      gptrun(ranked + " --target host --gpus 2" + steps_ + " --log-dir " + (dir / "two").string());
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("2 data-parallel ranks, each with accum_steps=1 B=2 T=8"),
            std::string::npos)
      << two.output;
  // Rank 0 alone prints: one line per step, and the global token count.
  EXPECT_EQ(count(two.output, "step 1/5 |"), 1u) << two.output;
  EXPECT_EQ(count(two.output, "gptrun: init in"), 1u) << two.output;
  EXPECT_NE(two.output.find("(32 tokens/step)"), std::string::npos) << two.output;

  std::vector<Row> a = steps(dir / "big"), b = steps(dir / "two");
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps)) << "only rank 0 logs";
  // fp32: a mean of the ranks' means against one mean: rounding only.
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(b[i].loss, a[i].loss, 1e-5 * a[i].loss) << "step " << i + 1;
    EXPECT_NEAR(b[i].norm, a[i].norm, 1e-5 * a[i].norm) << "step " << i + 1;
  }
  // Different batches each step: the comparison is not of one number.
  EXPECT_NE(a[0].loss, a[1].loss);
}

// The headline command's executable: compiled without a world size, it
// runs on any number of ranks (gptrun --gpus N), and on one it skips the
// all-reduces: then it logs what the one-device executable logs, bit for
// bit; on two, what two ranks of a --world-size=2 executable log.
TEST_F(GptrunRanksTest, AnyWorldSizeRunsOnAnyNumberOfRanks) {
  std::string any = emit("any.fb", kBatch, -1);
  std::string single = emit("ws0.fb", kBatch, 0);
  std::string pinned = emit("ws2.fb", kBatch, 2);
  std::string steps_ = " --steps " + std::to_string(kSteps);
  ToolResult oneRank = gptrun(any + " --target host" + steps_ + " --log-dir " + (dir / "a1").string());
  ASSERT_EQ(oneRank.status, 0) << oneRank.output;
  ToolResult oneDevice = gptrun(single + steps_ + " --log-dir " + (dir / "s1").string());
  ASSERT_EQ(oneDevice.status, 0) << oneDevice.output;
  ToolResult twoRanks =
      gptrun(any + " --target host --gpus 2" + steps_ + " --log-dir " + (dir / "a2").string());
  ASSERT_EQ(twoRanks.status, 0) << twoRanks.output;
  ToolResult twoPinned =
      gptrun(pinned + " --target host --gpus 2" + steps_ + " --log-dir " + (dir / "p2").string());
  ASSERT_EQ(twoPinned.status, 0) << twoPinned.output;
  ToolResult threeRanks = gptrun(any + " --target host --gpus 3 --steps 2");
  ASSERT_EQ(threeRanks.status, 0) << threeRanks.output;
  EXPECT_NE(threeRanks.output.find("3 data-parallel ranks"), std::string::npos)
      << threeRanks.output;

  std::vector<Row> a1 = steps(dir / "a1"), s1 = steps(dir / "s1");
  std::vector<Row> a2 = steps(dir / "a2"), p2 = steps(dir / "p2");
  ASSERT_EQ(a1.size(), size_t(kSteps));
  ASSERT_EQ(s1.size(), size_t(kSteps));
  ASSERT_EQ(a2.size(), size_t(kSteps));
  ASSERT_EQ(p2.size(), size_t(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(a1[i].loss, s1[i].loss) << "step " << i + 1;
    EXPECT_EQ(a1[i].norm, s1[i].norm) << "step " << i + 1;
    EXPECT_EQ(a2[i].loss, p2[i].loss) << "step " << i + 1;
    EXPECT_EQ(a2[i].norm, p2[i].norm) << "step " << i + 1;
  }
  // Two ranks see twice the data: not the one-rank run's numbers.
  EXPECT_NE(a2[1].loss, a1[1].loss);
}

TEST_F(GptrunRanksTest, ResumedRanksContinueExactly) {
  expectResumeContinuesExactly(emit("ws2.fb", kBatch, 2));
}

// FP8 with delayed scaling: the amax histories are state, saved by rank 0;
// the ranks' histories must agree (gpt-insert-all-reduce takes their
// maximum) for a resumed run to continue the straight one.
TEST_F(GptrunRanksTest, ResumedFp8RanksContinueExactly) {
  expectResumeContinuesExactly(emit("ws2-fp8.fb", kBatch, 2, "fp8"));
}

// ZeRO-1: the moments are sharded, so every rank takes part in writing a
// checkpoint (rank 0 writes the gathered whole) and slices its part back
// on resume.
TEST_F(GptrunRanksTest, ResumedZeroOneRanksContinueExactly) {
  expectResumeContinuesExactly(emit("ws2-zero.fb", kBatch, 2, "bf16", 1));
}

// A ZeRO-1 checkpoint holds whole tensors, as a plain one does: each
// resumes the other's run. Measured: the resumed steps log the
// uninterrupted run's losses exactly and its norms within 1.2e-7
// (the clipping norm is summed in another order); stated: loss exact,
// norm 4e-7 relative.
TEST_F(GptrunRanksTest, ZeroOneAndPlainCheckpointsResumeEachOther) {
  std::string plain = emit("ws2-bf16.fb", kBatch, 2, "bf16");
  std::string zero = emit("ws2-zero.fb", kBatch, 2, "bf16", 1);
  ToolResult straight = gptrun(plain + " --target host --gpus 2 --steps 4 --log-dir " +
                               (dir / "straight").string());
  ASSERT_EQ(straight.status, 0) << straight.output;
  std::vector<Row> a = steps(dir / "straight");
  ASSERT_EQ(a.size(), 4u);
  for (auto [from, to] : {std::pair{plain, zero}, std::pair{zero, plain}}) {
    std::string ckpt = (dir / ("ckpt-" + fs::path(from).stem().string())).string();
    ToolResult first = gptrun(from + " --target host --gpus 2 --steps 2 --checkpoint-dir " + ckpt);
    ASSERT_EQ(first.status, 0) << first.output;
    fs::path log = dir / ("rest-" + fs::path(to).stem().string());
    ToolResult rest = gptrun(to + " --target host --gpus 2 --steps 4 --resume latest "
                                  "--checkpoint-dir " + ckpt + " --log-dir " + log.string());
    ASSERT_EQ(rest.status, 0) << rest.output;
    std::vector<Row> b = steps(log);
    ASSERT_EQ(b.size(), 2u) << rest.output;
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(b[i].loss, a[i + 2].loss) << from << " -> " << to << " step " << i + 3;
      EXPECT_NEAR(b[i].norm, a[i + 2].norm, 4e-7 * a[i + 2].norm)
          << from << " -> " << to << " step " << i + 3;
    }
  }
}

// A signal reaches the ranks at different moments; they must still agree
// on the step to stop after (else one waits forever in an all-reduce).
TEST_F(GptrunRanksTest, SignalStopsEveryRankAfterTheSameStep) {
  std::string ranked = emit("ws2.fb", kBatch, 2);
  std::string ckpt = (dir / "ckpt").string();
  // timeout(1) passes the TERM on (only to gptrun: --foreground), and
  // kills a run that hangs.
  ToolResult r = runTool("sh", "-c 'timeout --foreground -s KILL 60 " GPTC_GPTRUN " " + ranked +
                                   " --target host --gpus 2 --data " + data() +
                                   " --no-progress --steps 1000000 --checkpoint-dir " + ckpt +
                                   " & pid=$!; sleep 2; kill -TERM $pid; wait $pid'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gptrun: SIGTERM: stopped after step"), std::string::npos) << r.output;
  EXPECT_EQ(count(r.output, "stopped after step"), 1u) << r.output;
  EXPECT_NE(r.output.find("gptrun: checkpoint " + ckpt), std::string::npos) << r.output;
}

// Only rank 0 opens --val: when it fails, rank 1 (already waiting in its
// first all-reduce) must be released, and rank 0's error reported.
TEST_F(GptrunRanksTest, OneRankFailingReleasesTheOthers) {
  std::string ranked = emit("ws2.fb", kBatch, 2);
  ToolResult r = runTool("timeout", "-s KILL 60 " GPTC_GPTRUN " " + ranked +
                                        " --target host --gpus 2 --steps 3 --data " + data() +
                                        " --val " + (dir / "missing.bin").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("gptrun: error: rank 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing.bin"), std::string::npos) << r.output;
}

TEST_F(GptrunRanksTest, WorldSizeAndGpusMustAgree) {
  std::string ranked = emit("ws2.fb", kBatch, 2);
  std::string single = emit("ws0.fb", kBatch, 0);
  ToolResult r = gptrun(ranked + " --target host --gpus 3");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("ws2.fb was compiled with gptc --world-size=2 but runs with --gpus 3; "
                          "run it on 2 or compile it without --world-size (any number of ranks)"),
            std::string::npos)
      << r.output;
  r = gptrun(ranked + " --target host");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--world-size=2 but runs with --gpus 1"), std::string::npos) << r.output;
  r = gptrun(single + " --target host --gpus 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--gpus 2: " + single +
                          " was compiled for one device (gptc --world-size=1, no gradient "
                          "collectives); compile it without --world-size to run on any number"),
            std::string::npos)
      << r.output;
  // More GPUs than there are: here none at all, on a GPU machine too few.
  r = gptrun(ranked + " --target cuda --gpus 2 --device 64");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gptrun: error: --gpus 2"), std::string::npos) << r.output;
}

TEST_F(GptrunRanksTest, LauncherEnvironmentErrors) {
  // A launcher world of one with a single-device executable: a plain run.
  std::string single = emit("ws0.fb", kBatch, 0);
  ToolResult one = gptrun(single + " --steps 2",
                          "env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=h MASTER_PORT=1");
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(count(one.output, "step 2/2 |"), 1u) << one.output;
  std::string ranked = emit("ws2.fb", kBatch, 2);
  ToolResult r = gptrun(ranked, "env RANK=0 WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=29500");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("LOCAL_RANK is not set, but RANK is"), std::string::npos) << r.output;
  r = gptrun(ranked + " --target host",
             "env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=localhost MASTER_PORT=29500");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("torchrun rank 1 of 2: --target host runs ranks as threads"),
            std::string::npos)
      << r.output;
  r = gptrun(ranked + " --gpus 2",
             "env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 MASTER_ADDR=h MASTER_PORT=1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--gpus 2 runs ranks as threads, but Slurm started this process as "
                          "Slurm rank 0 of 2"),
            std::string::npos)
      << r.output;
  r = gptrun(ranked, "env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 "
                     "OMPI_COMM_WORLD_LOCAL_RANK=0 MASTER_ADDR=h MASTER_PORT=1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("ws2.fb was compiled with gptc --world-size=2 but runs with Open MPI's "
                          "4 ranks; run it on 2 or compile it"),
            std::string::npos)
      << r.output;
}

} // namespace
