//===- ResumeTest.cpp - checkpoint + resume is bit-exact on a real model --===//
//
// Compiles `mini` for the Host target, then drives gptrun's Trainer:
// N steps straight against k steps, a checkpoint, and a resumed run of the
// remaining N-k steps. Loss, gradient norm and lr must be the same bits.
//
//===----------------------------------------------------------------------===//

#include "ScratchDir.h"
#include "TestUtils.h"

#include "compiler/Codegen/EmitExecutable.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/TokenFile.h"
#include "tools/gptrun/Trainer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>

using namespace gptc;
using namespace gptc::testing;

namespace {

namespace fs = std::filesystem;
constexpr int64_t kSteps = 6;

class ResumeTest : public GPT2Test {
protected:

  /// Compiles `preset` (B=2, lr 1e-3) to a Host step.fb at `path`.
  void emit(const std::string &path, const std::string &preset = "mini", int64_t seq = 32,
            const std::string &precision = "fp32", bool fp8SteadyStep = true,
            bool fuseFp8GeluMatmul = true,
            const std::function<void(CompileOptions &)> &more = {}) {
    ASSERT_TRUE(compile(preset, Phase::MemoryPlan, [&](CompileOptions &o) {
      o.batch = 2;
      o.seq = seq;
      o.lr = 1e-3;
      o.precision = *parsePrecision(precision);
      o.fp8SteadyStep = fp8SteadyStep;
      if (fuseFp8GeluMatmul)
        o.enablePatterns = "fp8-gelu-matmul-codes";
      if (more)
        more(o);
    })) << diagnostics;
    codegen::EmitOptions options;
    options.target = codegen::EmitOptions::Target::Host;
    auto bytes = codegen::emitExecutable(*module, options);
    ASSERT_TRUE(mlir::succeeded(bytes)) << diagnostics;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes->data()), std::streamsize(bytes->size()));
  }

  gptrun::Options options(int64_t steps, const std::string &ckptDir = "",
                          const std::string &resume = "") {
    gptrun::Options o;
    o.executable = exe;
    o.data = GPTC_DATA_DIR "/austen_train.bin";
    o.steps = steps;
    o.checkpointDir = ckptDir;
    o.resume = resume;
    return o;
  }

  /// Runs to completion and returns the steps it ran.
  std::vector<gptrun::StepRecord> train(const gptrun::Options &o, bool stopAfterFirst = false) {
    gptrun::Trainer t(o);
    Status s = t.setUp();
    EXPECT_TRUE(s) << s.message();
    if (!s)
      return {};
    if (stopAfterFirst)
      t.requestStop();
    s = t.run();
    EXPECT_TRUE(s) << s.message();
    return t.history();
  }

  static void expectSameBits(const std::vector<gptrun::StepRecord> &straight,
                             const std::vector<gptrun::StepRecord> &resumed) {
    ASSERT_LE(resumed.size(), straight.size());
    size_t offset = straight.size() - resumed.size();
    for (size_t i = 0; i < resumed.size(); ++i) {
      const gptrun::StepRecord &a = straight[offset + i], &b = resumed[i];
      EXPECT_EQ(a.step, b.step);
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, 4), 0)
          << "step " << a.step << ": " << a.loss << " vs " << b.loss;
      EXPECT_EQ(std::memcmp(&a.gradNorm, &b.gradNorm, 4), 0) << "step " << a.step;
      EXPECT_EQ(std::memcmp(&a.lr, &b.lr, 4), 0) << "step " << a.step;
    }
  }

  ScratchDir scratch{"resume-test"};
  fs::path dir = scratch.path();
  std::string exe;
};

// Verify N straight == k + resume + (N - k), for k = 3 (a checkpoint after
// the last step of a shorter run) and k = 1 (a stop requested mid-run, as a
// signal handler does), and that the losses did change along the way.
TEST_F(ResumeTest, ResumeIsBitExact) {
  exe = (dir / "mini.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe));
  std::vector<gptrun::StepRecord> straight = train(options(kSteps));
  ASSERT_EQ(straight.size(), size_t(kSteps));
  EXPECT_NE(straight.front().loss, straight.back().loss);

  std::string a = (dir / "a").string();
  ASSERT_EQ(train(options(3, a)).size(), 3u);
  ASSERT_TRUE(fs::exists(dir / "a" / "step-00000003.ckpt"));
  std::vector<gptrun::StepRecord> resumed = train(options(kSteps, a, "latest"));
  ASSERT_EQ(resumed.size(), size_t(kSteps - 3));
  expectSameBits(straight, resumed);

  std::string b = (dir / "b").string();
  ASSERT_EQ(train(options(kSteps, b), /*stopAfterFirst=*/true).size(), 1u);
  std::string one = (dir / "b" / "step-00000001.ckpt").string();
  ASSERT_TRUE(fs::exists(one));
  resumed = train(options(kSteps, "", one));
  ASSERT_EQ(resumed.size(), size_t(kSteps - 1));
  expectSameBits(straight, resumed);
}

// Verify that a resumed fp8 run continues bit-exactly: the checkpoint holds
// the FP8 amax histories (gpt-fp8-delayed-scaling's state) with the
// parameters and moments. Without them step 4 would scale from the
// tensors' own amaxes, as step 1 does, and give other bits.
TEST_F(ResumeTest, Fp8ResumeKeepsTheAmaxHistories) {
  exe = (dir / "mini-fp8.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp8"));
  std::vector<gptrun::StepRecord> straight = train(options(kSteps));
  ASSERT_EQ(straight.size(), size_t(kSteps));
  std::string a = (dir / "a").string();
  ASSERT_EQ(train(options(3, a)).size(), 3u);
  std::vector<gptrun::StepRecord> resumed = train(options(kSteps, a, "latest"));
  ASSERT_EQ(resumed.size(), size_t(kSteps - 3));
  expectSameBits(straight, resumed);
}

// Verify that the Trainer runs an fp8 executable's @train_step_first for
// the first step from @init and @train_step after it: the same bits as the
// unsplit executable (--fp8-steady-step=false) at every step. Running
// @train_step first would scale every FP8 tensor by 1 (empty histories).
// The GELU's codes come from the casts in both (the GEMM's GELU reads the
// unrounded product: fp8-gelu-matmul-codes changes bits by design).
TEST_F(ResumeTest, Fp8FirstStepRunsItsOwnProgram) {
  exe = (dir / "mini-fp8-unsplit.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp8", /*fp8SteadyStep=*/false));
  std::vector<gptrun::StepRecord> unsplit = train(options(kSteps));
  exe = (dir / "mini-fp8.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp8", true, /*fuseFp8GeluMatmul=*/false));
  ASSERT_TRUE(module->lookupSymbol("train_step_first"));
  std::vector<gptrun::StepRecord> split = train(options(kSteps));
  ASSERT_EQ(unsplit.size(), size_t(kSteps));
  ASSERT_EQ(split.size(), size_t(kSteps));
  expectSameBits(unsplit, split);
}

// Verify that a resumed run whose FP8 histories are all zeros (a
// checkpoint written after --on-nan=skip undid the first step) runs
// @train_step_first, which measures the tensors: its steps are the bits of
// the unsplit executable (whose scales measure a tensor while its history
// is empty) resumed from the same checkpoint. @train_step would scale by 1.
// The GELU casts stay casts, as in the previous test.
TEST_F(ResumeTest, Fp8EmptyHistoriesResumeOnTheFirstStepProgram) {
  exe = (dir / "mini-fp8.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp8", true, /*fuseFp8GeluMatmul=*/false));
  std::string a = (dir / "a").string();
  ASSERT_EQ(train(options(2, a)).size(), 2u);
  StatusOr<checkpoint::Checkpoint> ckpt =
      checkpoint::readCheckpoint((dir / "a" / checkpoint::fileName(2)).string());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  int histories = 0;
  for (checkpoint::Tensor &t : ckpt->tensors)
    if (t.name.rfind("fp8.amax_history.", 0) == 0) {
      std::fill(t.bytes.begin(), t.bytes.end(), 0);
      ++histories;
    }
  EXPECT_EQ(histories, 24);
  std::string empty = (dir / "empty.ckpt").string();
  Status written = checkpoint::writeCheckpoint(empty, *ckpt);
  ASSERT_TRUE(written) << written.message();
  std::vector<gptrun::StepRecord> split = train(options(4, "", empty));
  exe = (dir / "mini-fp8-unsplit.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp8", /*fp8SteadyStep=*/false));
  std::vector<gptrun::StepRecord> unsplit = train(options(4, "", empty));
  ASSERT_EQ(split.size(), 2u);
  ASSERT_EQ(unsplit.size(), 2u);
  expectSameBits(unsplit, split);
}

// Verify the step loop without host syncs (step s+1 enqueued before step
// s is read back; the Host backend runs queued work only at the fence, so
// reading early would show) against the synchronous loop: the same bits
// per step, with validation and checkpoints every 2 steps in between, the
// same checkpoints, and a resume from one of them continues bit-exactly.
TEST_F(ResumeTest, OverlappedStepsMatchTheSynchronousLoop) {
  exe = (dir / "mini.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe));
  auto run = [&](bool overlap, const std::string &ckpt, const std::string &resume = "") {
    gptrun::Options o = options(kSteps, ckpt, resume);
    o.overlap = overlap;
    o.val = GPTC_DATA_DIR "/austen_val.bin";
    o.valEvery = 3;
    o.valBatches = 1;
    o.checkpointEvery = ckpt.empty() ? 0 : 2;
    return train(o);
  };
  std::string syncDir = (dir / "sync").string(), asyncDir = (dir / "async").string();
  std::vector<gptrun::StepRecord> sync = run(false, syncDir);
  std::vector<gptrun::StepRecord> async = run(true, asyncDir);
  ASSERT_EQ(sync.size(), size_t(kSteps));
  ASSERT_EQ(async.size(), size_t(kSteps));
  expectSameBits(sync, async);
  for (int step : {2, 4, 6}) {
    SCOPED_TRACE("checkpoint of step " + std::to_string(step));
    std::string name = checkpoint::fileName(step);
    auto a = checkpoint::readCheckpoint(syncDir + "/" + name);
    auto b = checkpoint::readCheckpoint(asyncDir + "/" + name);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->step, b->step);
    EXPECT_EQ(a->dataPosition, b->dataPosition);
    EXPECT_EQ(b->dataPosition, uint64_t(step)); // one micro-batch per step
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    for (size_t i = 0; i < a->tensors.size(); ++i)
      EXPECT_TRUE(a->tensors[i].bytes == b->tensors[i].bytes) << a->tensors[i].name;
  }
  std::vector<gptrun::StepRecord> resumed =
      run(true, "", asyncDir + "/" + checkpoint::fileName(2));
  ASSERT_EQ(resumed.size(), size_t(kSteps - 2));
  expectSameBits(sync, resumed);
}

// Verify that a checkpoint of mini is refused by tiny, naming both models
// (the data is Austen's tokens mod 60, valid for both vocabularies).
TEST_F(ResumeTest, RefusesAnotherModelsCheckpoint) {
  auto tokens = data::readTokenFile(GPTC_DATA_DIR "/austen_train.bin");
  ASSERT_TRUE(tokens) << tokens.status().message();
  std::vector<int32_t> small(tokens->begin(), tokens->begin() + 4096);
  for (int32_t &t : small)
    t %= 60;
  std::string data = (dir / "small.bin").string();
  ASSERT_TRUE(data::writeTokenFile(data, small));

  exe = (dir / "mini.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe));
  std::string a = (dir / "a").string();
  gptrun::Options o = options(1, a);
  o.data = data;
  ASSERT_EQ(train(o).size(), 1u);

  exe = (dir / "tiny.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "tiny", 8));
  o = options(2, a, "latest");
  o.data = data;
  gptrun::Trainer t(o);
  Status s = t.setUp();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(
                "step-00000001.ckpt is a checkpoint of model 'mini' (batch=2, block_size=128"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("but the executable is model 'tiny' (batch=2, block_size=16"),
            std::string::npos)
      << s.message();
}

// Verify that a checkpoint is the model's, not its batch's: mini at B=2,
// T=32 resumes at B=4, T=16 (the data position becomes the window of the
// next unread token) and trains on, and a B=1 executable restores it.
TEST_F(ResumeTest, ResumesWithAnotherBatchAndSequenceLength) {
  exe = (dir / "b2.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe));
  std::string ckpt = (dir / "ckpt").string();
  ASSERT_EQ(train(options(2, ckpt)).size(), 2u);

  exe = (dir / "b4.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 16, "fp32", true, true,
                               [](CompileOptions &o) { o.batch = 4; }));
  gptrun::Trainer t(options(4, ckpt, "latest"));
  Status s = t.setUp();
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(t.step(), 2);
  ASSERT_TRUE(t.run());
  ASSERT_EQ(t.history().size(), 2u);
  EXPECT_EQ(t.history()[0].step, 3);
  auto c = checkpoint::readCheckpoint(ckpt + "/step-00000004.ckpt");
  ASSERT_TRUE(c) << c.status().message();
  // 2 windows of 2x32 tokens read = 2 of 4x16, then 2 more.
  EXPECT_EQ(c->dataPosition, 4u);
  EXPECT_EQ(c->dataStepTokens, 64u);

  exe = (dir / "b1.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true,
                               [](CompileOptions &o) { o.batch = 1; }));
  auto loaded = Executable::loadFile(exe);
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(checkpoint::executableIdentity(loaded->get()), c->identity);
}

// Verify that a resume under another schedule is refused naming both
// settings, goes on with --new-schedule, and that --lr counts: the
// checkpoint records the schedule that ran.
TEST_F(ResumeTest, RefusesAnotherScheduleUnlessAsked) {
  exe = (dir / "cosine100.fb").string();
  auto cosine = [](int64_t total) {
    return [total](CompileOptions &o) {
      o.schedule = "cosine";
      o.warmupSteps = 1;
      o.totalSteps = total;
      o.minLr = 1e-4;
    };
  };
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true, cosine(100)));
  std::string ckpt = (dir / "ckpt").string();
  ASSERT_EQ(train(options(2, ckpt)).size(), 2u);
  auto c = checkpoint::readCheckpoint(ckpt + "/step-00000002.ckpt");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(checkpoint::describeSettings(c->optimizer),
            "schedule=cosine lr=0.001 min_lr=0.0001 warmup_steps=1 total_steps=100 beta1=0.9 "
            "beta2=0.95 epsilon=1e-08 weight_decay=0.1 grad_clip=1");

  // The same schedule again, recompiled: resumes.
  exe = (dir / "again.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true, cosine(100)));
  {
    gptrun::Trainer t(options(3, ckpt, "latest"));
    Status s = t.setUp();
    ASSERT_TRUE(s) << s.message();
  }

  exe = (dir / "cosine200.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true, cosine(200)));
  gptrun::Options o = options(3, ckpt, "latest");
  {
    gptrun::Trainer t(o);
    Status s = t.setUp();
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("step-00000002.ckpt was trained with schedule=cosine lr=0.001 "
                               "min_lr=0.0001 warmup_steps=1 total_steps=100"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("cosine200.fb has schedule=cosine lr=0.001 "
                               "min_lr=0.0001 warmup_steps=1 total_steps=200"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("(total_steps 100 -> 200): recompile with the checkpoint's "
                               "settings, or pass --new-schedule"),
              std::string::npos)
        << s.message();
  }
  // --lr changes the schedule that runs too.
  exe = (dir / "again.fb").string();
  o = options(3, ckpt, "latest");
  o.lr = 2e-3;
  {
    gptrun::Trainer t(o);
    Status s = t.setUp();
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("again.fb with --lr 0.002 has schedule=cosine lr=0.002 "
                               "min_lr=0.0002 warmup_steps=1 total_steps=100 beta1=0.9 beta2=0.95 "
                               "epsilon=1e-08 weight_decay=0.1 grad_clip=1 (lr 0.001 -> 0.002, "
                               "min_lr 0.0001 -> 0.0002)"),
              std::string::npos)
        << s.message();
  }
  exe = (dir / "cosine200.fb").string();
  o = options(3, ckpt, "latest");
  o.newSchedule = true;
  std::vector<gptrun::StepRecord> steps = train(o);
  ASSERT_EQ(steps.size(), 1u);
  c = checkpoint::readCheckpoint(ckpt + "/step-00000003.ckpt");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_NE(checkpoint::describeSettings(c->optimizer).find("total_steps=200"), std::string::npos)
      << "the checkpoint records the schedule it ran last";
}

// Verify the warning when --steps runs past a decaying schedule's
// --total-steps: once, at the start, naming both; not at the total itself.
// A fine-tune sets its schedule at run time (gptrun --schedule) on an
// executable compiled with the default constant one: each step's lr_scale
// follows gpt.lr_schedule's formula, so it trains as an executable compiled
// with that schedule does (the lr within float rounding: the compiled one
// computes it in f32 on the device, gptrun its ratio in double), and the
// checkpoint records the schedule that ran.
TEST_F(ResumeTest, ScheduleSetAtRunTimeTrainsAsTheCompiledOne) {
  static constexpr int64_t kRun = 6;
  exe = (dir / "cosine.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true, [](CompileOptions &o) {
    o.schedule = "cosine";
    o.warmupSteps = 2;
    o.totalSteps = kRun;
    o.minLr = 1e-4;
  }));
  std::vector<gptrun::StepRecord> compiled = train(options(kRun));
  std::string cosineExe = exe;

  exe = (dir / "constant.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe));
  std::string ckpt = (dir / "ckpt").string();
  gptrun::Options o = options(kRun, ckpt);
  o.schedule = "cosine";
  o.warmupSteps = 2;
  o.minLr = 1e-4; // --total-steps: --steps
  std::vector<gptrun::StepRecord> runTime = train(o);
  ASSERT_EQ(compiled.size(), size_t(kRun));
  ASSERT_EQ(runTime.size(), size_t(kRun));
  for (int64_t i = 0; i < kRun; ++i) {
    EXPECT_NEAR(runTime[i].lr, compiled[i].lr, 1e-6 * compiled[i].lr) << "step " << i + 1;
    EXPECT_NEAR(runTime[i].loss, compiled[i].loss, 1e-5 * compiled[i].loss) << "step " << i + 1;
  }
  EXPECT_LT(runTime[kRun - 1].lr, runTime[2].lr) << "decayed";
  auto c = checkpoint::readCheckpoint(ckpt + "/step-00000006.ckpt");
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(checkpoint::describeSettings(c->optimizer),
            "schedule=cosine lr=0.001 min_lr=0.0001 warmup_steps=2 total_steps=6 beta1=0.9 "
            "beta2=0.95 epsilon=1e-08 weight_decay=0.1 grad_clip=1");

  // Over a compiled decaying schedule it would multiply two: refused.
  exe = cosineExe;
  gptrun::Options twice = options(kRun);
  twice.schedule = "linear";
  gptrun::Trainer refused(twice);
  Status s = refused.setUp();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--schedule: " + cosineExe + " was compiled with a cosine schedule"),
            std::string::npos)
      << s.message();
}

TEST_F(ResumeTest, WarnsWhenStepsRunPastTheSchedule) {
  exe = (dir / "linear4.fb").string();
  ASSERT_NO_FATAL_FAILURE(emit(exe, "mini", 32, "fp32", true, true, [](CompileOptions &o) {
    o.schedule = "linear";
    o.totalSteps = 4;
    o.minLr = 1e-4;
  }));
  auto setUpOutput = [&](int64_t steps) {
    ::testing::internal::CaptureStdout();
    gptrun::Trainer t(options(steps));
    Status s = t.setUp();
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_TRUE(s) << s.message();
    return out;
  };
  std::string out = setUpOutput(6);
  EXPECT_NE(out.find("gptrun: warning: --steps 6 runs past the executable's --total-steps 4: its "
                     "linear schedule reaches min_lr 0.0001 there, and steps 5-6 train at it "
                     "(recompile with gptc --total-steps=6 to decay over the whole run)\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("warning"), out.rfind("warning")) << "once";
  EXPECT_EQ(setUpOutput(4).find("warning"), std::string::npos);
}

} // namespace
