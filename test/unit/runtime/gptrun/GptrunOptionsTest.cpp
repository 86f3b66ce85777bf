//===- GptrunOptionsTest.cpp - gptrun's flags and throughput math ---------===//

#include "tools/gptrun/Options.h"
#include "tools/gptrun/RunLog.h"
#include "tools/gptrun/Throughput.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace gptc;
using namespace gptc::gptrun;

namespace {

std::string parseError(std::vector<std::string> args) {
  StatusOr<Options> o = parseOptions(args);
  return o ? "" : o.status().message();
}

// Verify both flag spellings and every value.
TEST(GptrunOptionsTest, ParsesEveryFlag) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin", "--val=v.bin", "--steps", "7",
                                      "--val-every=3", "--val-batches", "4", "--seed=9", "--target",
                                      "cuda", "--graph", "--device=1", "--peak-tflops", "100.5"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->executable, "step.fb");
  EXPECT_EQ(o->data, "t.bin");
  EXPECT_EQ(o->val, "v.bin");
  EXPECT_EQ(o->steps, 7);
  EXPECT_EQ(o->valEvery, 3);
  EXPECT_EQ(o->valBatches, 4);
  EXPECT_EQ(o->seed, 9u);
  EXPECT_EQ(o->target, std::optional<std::string>("cuda"));
  EXPECT_TRUE(o->graph);
  EXPECT_EQ(o->device, 1);
  EXPECT_DOUBLE_EQ(o->peakTflops, 100.5);
  EXPECT_TRUE(parseOptions({"--help"})->help);
  // --version needs no executable or --data, like --help.
  EXPECT_TRUE(parseOptions({"--version"})->version);
  EXPECT_FALSE(parseOptions({"step.fb", "--data", "t.bin"})->version);

  o = parseOptions({"step.fb", "--data", "t.bin", "--checkpoint-dir", "ck", "--checkpoint-every=5",
                    "--keep-checkpoints", "2", "--resume", "latest"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->checkpointDir, "ck");
  EXPECT_EQ(o->checkpointEvery, 5);
  EXPECT_EQ(o->keepCheckpoints, 2);
  EXPECT_EQ(o->resume, "latest");
}

// Verify the checkpoint flags' usage errors.
TEST(GptrunOptionsTest, CheckpointUsageErrors) {
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--checkpoint-every", "5"}),
            "--checkpoint-every needs --checkpoint-dir DIR (or --log-dir DIR)");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--keep-checkpoints", "2"}),
            "--keep-checkpoints needs --checkpoint-dir DIR (or --log-dir DIR)");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--checkpoint-dir", "c", "--keep-checkpoints", "0"}),
            "--keep-checkpoints must be at least 1, got 0");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--resume="}), "--resume needs a non-empty value");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--resume", "latest"}),
            "--resume latest needs --checkpoint-dir DIR (or --log-dir DIR)");
}

// Verify the run-time schedule's flags: parsed, and shaping only a
// --schedule of a training run.
TEST(GptrunOptionsTest, RunTimeSchedule) {
  StatusOr<Options> o = parseOptions({"s.fb", "--data", "t", "--schedule", "cosine",
                                      "--warmup-steps", "10", "--min-lr", "1e-5",
                                      "--total-steps", "300"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->schedule, "cosine");
  EXPECT_EQ(o->warmupSteps, 10);
  EXPECT_EQ(o->minLr, 1e-5);
  EXPECT_EQ(o->totalSteps, 300);
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--schedule", "step"}),
            "--schedule is cosine, linear or constant, got 'step'");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--warmup-steps", "10"}),
            "--warmup-steps, --min-lr and --total-steps shape a --schedule (cosine, linear or "
            "constant)");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--schedule", "linear", "--min-lr", "-1"}),
            "--min-lr wants a number >= 0, got '-1'");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--schedule", "cosine", "--warmup-steps", "5",
                        "--total-steps", "5"}),
            "--total-steps 5 must exceed --warmup-steps 5");
  EXPECT_EQ(parseError({"s.fb", "--schedule", "cosine", "--sample", "Hi"}),
            "--schedule applies to training only");
}

// Verify that --log-dir keeps a checkpoint by default (DIR/checkpoints) when
// training, not when sampling or evaluating, and not with --no-checkpoint
// (unless --resume latest looks there); --new-schedule is for --resume.
TEST(GptrunOptionsTest, LogDirKeepsCheckpointsUnlessTold) {
  StatusOr<Options> o = parseOptions({"s.fb", "--data", "t", "--log-dir", "run"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->checkpointDir, "run/checkpoints");
  o = parseOptions({"s.fb", "--data", "t", "--log-dir", "run", "--no-checkpoint"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->checkpointDir, "");
  EXPECT_TRUE(o->noCheckpoint);
  o = parseOptions({"s.fb", "--data", "t", "--log-dir", "run", "--no-checkpoint", "--resume",
                    "latest", "--new-schedule"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->checkpointDir, "run/checkpoints") << "where --resume latest looks";
  EXPECT_TRUE(o->newSchedule);
  o = parseOptions({"s.fb", "--log-dir", "run", "--sample", "x", "--resume", "c.ckpt"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->checkpointDir, "");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--no-checkpoint", "--checkpoint-dir", "c"}),
            "--no-checkpoint contradicts --checkpoint-dir");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--log-dir", "r", "--no-checkpoint",
                        "--checkpoint-every=2"}),
            "--no-checkpoint contradicts --checkpoint-every");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--no-checkpoint=1"}),
            "--no-checkpoint takes no value");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--new-schedule"}),
            "--new-schedule applies to --resume only");
}

// Verify the --sample flags: values, defaults, and that sampling needs no
// training data.
TEST(GptrunOptionsTest, ParsesSampleFlags) {
  StatusOr<Options> o = parseOptions({"step.fb", "--resume", "ck/step-1.ckpt", "--sample",
                                      "Once upon", "--sample-tokens=8", "--temperature", "0.7",
                                      "--top-k=5", "--vocab-dir", "v"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->sample);
  EXPECT_EQ(o->samplePrompt, "Once upon");
  EXPECT_EQ(o->sampleTokens, 8);
  EXPECT_DOUBLE_EQ(o->temperature, 0.7);
  EXPECT_EQ(o->topK, 5);
  EXPECT_EQ(o->vocabDir, "v");
  o = parseOptions({"step.fb", "--sample="});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->sample);
  EXPECT_EQ(o->samplePrompt, "");
  EXPECT_EQ(o->sampleTokens, 64);
  EXPECT_DOUBLE_EQ(o->temperature, 1.0);
  EXPECT_EQ(o->topK, 40);
  EXPECT_EQ(o->vocabDir, "data/gpt2");
  EXPECT_FALSE(parseOptions({"step.fb", "--data", "t"})->sample);
}

// Verify the --sample flags' usage errors.
TEST(GptrunOptionsTest, SampleUsageErrors) {
  EXPECT_EQ(parseError({"s.fb", "--sample"}), "--sample needs a value");
  EXPECT_EQ(parseError({"s.fb", "--sample", "x", "--sample-tokens", "0"}),
            "--sample-tokens must be at least 1, got 0");
  EXPECT_EQ(parseError({"s.fb", "--sample", "x", "--top-k", "-1"}),
            "--top-k must be at least 0, got -1");
  EXPECT_EQ(parseError({"s.fb", "--sample", "x", "--temperature", "-0.5"}),
            "--temperature wants a non-negative number, got '-0.5'");
  EXPECT_EQ(parseError({"s.fb", "--sample", "x", "--temperature", "hot"}),
            "--temperature wants a non-negative number, got 'hot'");
  EXPECT_EQ(parseError({"s.fb", "--sample", "x", "--vocab-dir="}),
            "--vocab-dir needs a non-empty value");
  // Training would ignore them without a word.
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--temperature", "0.5", "--top-k", "3"}),
            "--temperature applies to --sample only");
  EXPECT_EQ(parseError({"s.fb", "--data", "t", "--vocab-dir", "v"}),
            "--vocab-dir applies to --sample only");
}

// Verify that every usage error names the flag.
TEST(GptrunOptionsTest, UsageErrors) {
  EXPECT_EQ(parseError({"--data", "t.bin"}),
            "no executable given (gptrun STEP.fb --data TRAIN.bin)");
  EXPECT_EQ(parseError({"step.fb"}), "--data TRAIN.bin is required");
  EXPECT_EQ(parseError({"step.fb", "--data"}), "--data needs a value");
  EXPECT_EQ(parseError({"step.fb", "--data", "t", "--steps", "x"}),
            "--steps wants an integer, got 'x'");
  EXPECT_EQ(parseError({"step.fb", "--data", "t", "--steps", "0"}),
            "--steps must be at least 1, got 0");
  EXPECT_EQ(parseError({"step.fb", "--data", "t", "--frobnicate"}),
            "unknown option '--frobnicate'");
  EXPECT_EQ(parseError({"step.fb", "--data", "t", "--target", "tpu"}),
            "--target is cuda or host, got 'tpu'");
  EXPECT_EQ(parseError({"a.fb", "b.fb", "--data", "t"}),
            "one executable only, got 'a.fb' and 'b.fb'");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--graph", "--target", "host"}),
            "--graph applies to the CUDA target only");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gpus", "0"}), "--gpus must be at least 1, got 0");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gpus=two"}),
            "--gpus wants an integer, got 'two'");
  // Infinite rates trained until the first non-finite loss.
  for (const char *v : {"inf", "1e400"}) {
    EXPECT_EQ(parseError({"a.fb", "--data", "t", "--lr", v}),
              std::string("--lr wants a positive number, got '") + v + "'");
    EXPECT_EQ(parseError({"a.fb", "--data", "t", "--peak-tflops", v}),
              std::string("--peak-tflops wants a positive number, got '") + v + "'");
  }
}

// Verify the step-loop flags: CUDA graphs and overlap are on by default,
// --no-graph and --no-overlap turn them off, and contradictions and the
// host target are usage errors.
TEST(GptrunOptionsTest, GraphAndOverlapFlags) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->graph);
  EXPECT_FALSE(o->graphGiven);
  EXPECT_TRUE(o->overlap);
  o = parseOptions({"step.fb", "--data", "t.bin", "--no-graph", "--no-overlap"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_FALSE(o->graph);
  EXPECT_TRUE(o->graphGiven);
  EXPECT_FALSE(o->overlap);
  // The host target ignores the default, but not an explicit flag.
  o = parseOptions({"step.fb", "--data", "t.bin", "--target", "host"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--no-graph", "--target", "host"}),
            "--no-graph applies to the CUDA target only");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--device", "1", "--target", "host"}),
            "--device applies to the CUDA target only");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--graph", "--no-graph"}),
            "--graph and --no-graph contradict each other");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--no-graph=1"}), "--no-graph takes no value");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--no-overlap=0"}), "--no-overlap takes no value");
}

// Verify that GEMM autotuning is off by default (deterministic GEMM
// choices) and --gemm-autotune, which takes no value, turns it on.
TEST(GptrunOptionsTest, GemmAutotuneFlag) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_FALSE(o->gemmAutotune);
  o = parseOptions({"step.fb", "--data", "t.bin", "--gemm-autotune"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->gemmAutotune);
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gemm-autotune=1"}),
            "--gemm-autotune takes no value");
}

// Verify that --gemm-algos FILE keeps autotuning's choices in FILE (so it
// turns autotuning on), needs a value, and is refused for the Host target.
TEST(GptrunOptionsTest, GemmAlgosFlag) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin", "--gemm-algos", "a.txt"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->gemmAlgos, "a.txt");
  EXPECT_TRUE(o->gemmAutotune);
  o = parseOptions({"step.fb", "--data", "t.bin", "--gemm-algos=b.txt"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->gemmAlgos, "b.txt");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gemm-algos="}),
            "--gemm-algos needs a non-empty value");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gemm-algos"}), "--gemm-algos needs a value");
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--gemm-algos", "a.txt", "--target", "host"}),
            "--gemm-algos applies to the CUDA target only");
  o = parseOptions({"h.fb", "--data", "t.bin", "--gemm-algos", "a.txt"});
  ASSERT_TRUE(o) << o.status().message();
  Status host = checkDeviceFlag(*o, false);
  ASSERT_FALSE(host);
  EXPECT_EQ(host.message(), "--gemm-algos applies to the CUDA target only (h.fb is a host "
                            "executable)");
}

// Verify that programmatic dependent launch is on by default, --no-pdl
// turns it off and --pdl on again (the last one given wins), neither takes
// a value.
TEST(GptrunOptionsTest, PdlFlags) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->programmaticLaunch);
  o = parseOptions({"step.fb", "--data", "t.bin", "--no-pdl"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_FALSE(o->programmaticLaunch);
  o = parseOptions({"step.fb", "--data", "t.bin", "--no-pdl", "--pdl"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->programmaticLaunch);
  EXPECT_EQ(parseError({"a.fb", "--data", "t", "--no-pdl=1"}), "--no-pdl takes no value");
}

TEST(GptrunOptionsTest, Gpus) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->gpus, 0); // not given: one rank
  o = parseOptions({"step.fb", "--data", "t.bin", "--gpus", "4"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->gpus, 4);
}

// Verify the MFU arithmetic on GPT-2 124M's numbers (llm.c's formula).
TEST(GptrunOptionsTest, MfuAndPeakTable) {
  double f = flopsPerToken(124475904, 12, 1024, 768);
  EXPECT_DOUBLE_EQ(f, 6.0 * 124475904 + 12.0 * 12 * 1024 * 768);
  EXPECT_DOUBLE_EQ(peakTflops("NVIDIA H200"), 989.5);
  EXPECT_DOUBLE_EQ(peakTflops("NVIDIA H100 80GB HBM3"), 989.5);
  EXPECT_DOUBLE_EQ(peakTflops("NVIDIA H100 PCIe"), 756.0);
  EXPECT_DOUBLE_EQ(peakTflops("NVIDIA A100-SXM4-80GB"), 312.0);
  EXPECT_DOUBLE_EQ(peakTflops("NVIDIA GeForce RTX 4090"), 0.0);
  // 1M tok/s at ~0.86 GFLOP/token is ~86.5% of an H100.
  EXPECT_NEAR(mfuPercent(1e6, f, 989.5), 100.0 * 1e6 * f / 989.5e12, 1e-9);
  EXPECT_EQ(mfuPercent(1e6, f, 0), 0);
  EXPECT_EQ(withCommas(53120), "53,120");
  EXPECT_EQ(withCommas(999), "999");
  EXPECT_EQ(withCommas(1000000), "1,000,000");
  EXPECT_EQ(withCommas(-1234), "-1,234");
}

} // namespace

namespace {

// Verify the progress bar's fill, percentage and ETA (the mean time of this
// run's steps times the steps left), and durations.
TEST(GptrunOptionsTest, ProgressBar) {
  EXPECT_EQ(formatDuration(0), "0:00");
  EXPECT_EQ(formatDuration(75.4), "1:15");
  EXPECT_EQ(formatDuration(3723), "1:02:03");
  EXPECT_EQ(progressBar(0, 4, 0, 0, 8), "[>       ] 0/4   0% | 0:00 elapsed | ETA ?");
  EXPECT_EQ(progressBar(1, 4, 10, 0, 8), "[==>     ] 1/4  25% | 0:10 elapsed | ETA 0:30");
  // Resumed at step 2: 2 steps in 10 s, 4 to go.
  EXPECT_EQ(progressBar(4, 8, 10, 2, 8), "[====>   ] 4/8  50% | 0:10 elapsed | ETA 0:20");
  EXPECT_EQ(progressBar(4, 4, 10, 0, 8), "[========] 4/4 100% | 0:10 elapsed | ETA 0:00");
}

// Verify the log records: 9 significant digits (F32 round trips), empty
// CSV fields and no JSON keys for unknown values.
TEST(GptrunOptionsTest, LogRecords) {
  LogRecord r;
  r.step = 3;
  r.loss = 10.987654f;
  r.gradNorm = 1.5;
  r.lr = 3e-4;
  r.ms = 12.25;
  r.tokPerSec = 53120;
  EXPECT_EQ(RunLog::jsonLine(r), "{\"kind\":\"train\",\"step\":3,\"loss\":10.9876537,"
                                 "\"grad_norm\":1.5,\"lr\":0.0003,\"ms\":12.25,\"tok_per_s\":53120}");
  EXPECT_EQ(RunLog::csvLine(r), "train,3,10.9876537,1.5,0.0003,12.25,53120,,");
  r.mfu = 41.5;
  r.memoryBytes = 1 << 20;
  EXPECT_EQ(RunLog::csvLine(r), "train,3,10.9876537,1.5,0.0003,12.25,53120,41.5,1048576");
  LogRecord v;
  v.kind = LogRecord::Kind::Val;
  v.step = 4;
  v.loss = 7.5;
  v.ms = 2;
  EXPECT_EQ(RunLog::jsonLine(v), "{\"kind\":\"val\",\"step\":4,\"loss\":7.5,\"ms\":2}");
  EXPECT_EQ(RunLog::csvLine(v), "val,4,7.5,,,2,,,");
}

} // namespace

namespace {

TEST(GptrunOptionsInitFromTest, ParsesInitFromAndRefusesItWithResume) {
  StatusOr<Options> o = parseOptions({"step.fb", "--data", "t.bin", "--init-from", "gpt2-hf"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->initFrom, "gpt2-hf");
  EXPECT_TRUE(o->resume.empty());
  o = parseOptions({"step.fb", "--init-from=gpt2_124M.bin", "--sample", "Hi"});
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->initFrom, "gpt2_124M.bin");
  o = parseOptions({"step.fb", "--data", "t", "--init-from="});
  ASSERT_FALSE(o);
  EXPECT_EQ(o.status().message(), "--init-from needs a non-empty value");
  o = parseOptions({"step.fb", "--data", "t", "--init-from", "hf", "--resume", "c.ckpt"});
  ASSERT_FALSE(o);
  EXPECT_NE(o.status().message().find("--init-from and --resume both give the parameters"),
            std::string::npos);
}

} // namespace
