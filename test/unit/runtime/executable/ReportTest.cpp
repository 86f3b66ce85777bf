//===- ReportTest.cpp - gptc explain's report and the memory check -------===//
//
// Builds a small executable (ExecutableBuilder.h), then checks that the
// report's numbers are the executable's own: pool sizes, role bytes and
// per-program command counts.
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/Report.h"

#include "test/unit/runtime/ExecutableBuilder.h"

#include <gtest/gtest.h>

using namespace gptc;
using namespace gptc::testing;

namespace {

/// Two programs over three pools; kernel families gelu_forward (two
/// instances) and adamw, one bf16 and one f32 GEMM, a collective and events.
ExecutableSpec smallSpec() {
  ExecutableSpec spec;
  spec.target = s::TargetKind::CUDA;
  spec.arch = "sm_90";
  spec.modelName = "tiny";
  spec.numParameters = 80;
  spec.config = {{"n_layer", 2}, {"n_embd", 16}, {"batch", 4}};
  uint32_t params = spec.addPool("params", 512);
  uint32_t state = spec.addPool("state", 1024, 512);
  uint32_t acts = spec.addPool("activations", 4096);
  uint32_t w = spec.addTensor("w", s::TensorRole::Parameter, s::DType::F32, {4, 16}, params, 0);
  uint32_t bias = spec.addTensor("b", s::TensorRole::Parameter, s::DType::F32, {16}, params, 256);
  uint32_t m = spec.addTensor("m", s::TensorRole::OptimizerState, s::DType::F32, {80}, state, 0);
  uint32_t x = spec.addTensor("x", s::TensorRole::Activation, s::DType::F32, {4, 4}, acts, 0);
  uint32_t y = spec.addTensor("y", s::TensorRole::Activation, s::DType::BF16, {4, 16}, acts, 256);
  uint32_t g1 = spec.addKernel("gelu_forward_1", 1);
  uint32_t g2 = spec.addKernel("gelu_forward_2", 1);
  uint32_t adam = spec.addKernel("adamw_7", 2);
  spec.addKernel("unused_3", 1);
  GemmSpec bf16;
  bf16.aType = bf16.bType = bf16.cType = s::DType::BF16;
  spec.addGemm(bf16);
  spec.addGemm(GemmSpec{});
  spec.numStreams = 2;
  spec.numEvents = 1;
  ProgramSpec &train = spec.addProgram("train_step", {x}, {y});
  train.launch(g1, {tensorArg(y)})
      .launch(g2, {tensorArg(y)})
      .launch(g1, {tensorArg(y)})
      .gemm(0, x, w, y)
      .gemm(1, x, w, y, bias)
      .record(0, 0)
      .wait(0, 1)
      .allReduce({w})
      .launch(adam, {tensorArg(w), tensorArg(m)})
      .memset(x, 0)
      .copy(x, x);
  spec.addProgram("init", {}, {w}).launch(adam, {tensorArg(w), tensorArg(m)});
  return spec;
}

Executable load(const ExecutableSpec &spec) {
  StatusOr<Executable> exe = Executable::loadBytes(spec.build(), "small.fb");
  EXPECT_TRUE(exe) << exe.status().message();
  return std::move(*exe);
}

// Verify that the summary's memory numbers are the executable's pools and
// tensors, read back from the FlatBuffer.
TEST(ReportTest, MemoryNumbersAreTheExecutables) {
  Executable exe = load(smallSpec());
  ExecutableSummary sum = summarize(exe.get());
  ASSERT_EQ(sum.pools.size(), exe->pools()->size());
  uint64_t total = 0;
  for (uint32_t i = 0; i < exe->pools()->size(); ++i) {
    EXPECT_EQ(sum.pools[i].first, exe->pools()->Get(i)->name()->str());
    EXPECT_EQ(sum.pools[i].second, exe->pools()->Get(i)->size_bytes());
    total += exe->pools()->Get(i)->size_bytes();
  }
  EXPECT_EQ(sum.totalPoolBytes, total);
  EXPECT_EQ(sum.totalPoolBytes, 512u + 1024u + 4096u);
  EXPECT_EQ(sum.parameterBytes, (64u + 16u) * 4u);
  EXPECT_EQ(sum.numParameters, 80);
  EXPECT_EQ(sum.roleBytes[int(s::TensorRole::OptimizerState)], 80u * 4u);
  EXPECT_EQ(sum.roleBytes[int(s::TensorRole::Activation)], 16u * 4u + 64u * 2u);
  EXPECT_EQ(sum.roleTensors[int(s::TensorRole::Activation)], 2u);
  EXPECT_EQ(sum.target, "cuda sm_90");
  EXPECT_EQ(sum.modelName, "tiny");
  ASSERT_EQ(sum.config.size(), 3u);
  EXPECT_EQ(sum.config[1], std::make_pair(std::string("n_embd"), int64_t(16)));
}

// Verify the per-program counts: launches, GEMMs, collectives, events and
// distinct kernels, and the launches grouped by kernel family.
TEST(ReportTest, ProgramCountsAreTheCommands) {
  Executable exe = load(smallSpec());
  ExecutableSummary sum = summarize(exe.get());
  ASSERT_EQ(sum.programs.size(), 2u);
  const ProgramSummary &train = sum.programs[0];
  EXPECT_EQ(train.name, "train_step");
  EXPECT_EQ(train.commands, exe.findProgram("train_step")->commands()->size());
  EXPECT_EQ(train.launches, 4u);
  EXPECT_EQ(train.gemms, 2u);
  EXPECT_EQ(train.collectives, 1u);
  EXPECT_EQ(train.events, 2u);
  EXPECT_EQ(train.memsets, 1u);
  EXPECT_EQ(train.copies, 1u);
  EXPECT_EQ(train.distinctKernels, 3u); // gelu_forward_1, gelu_forward_2, adamw_7
  using Count = std::pair<std::string, uint64_t>;
  EXPECT_EQ(train.launchesByKernel,
            (std::vector<Count>{{"gelu_forward", 3}, {"adamw", 1}}));
  const ProgramSummary &init = sum.programs[1];
  EXPECT_EQ(init.launches, 1u);
  EXPECT_EQ(init.gemms, 0u);
  EXPECT_EQ(init.distinctKernels, 1u);
  EXPECT_EQ(sum.numKernels, 4u);
  EXPECT_EQ(sum.gemmOperandTypes, (std::vector<Count>{{"BF16", 1}, {"F32", 1}}));
}

// Verify that the text carries the numbers, and says "none recorded" for
// what the schema does not hold.
TEST(ReportTest, TextShowsTheNumbersAndWhatIsNotRecorded) {
  Executable exe = load(smallSpec());
  std::string text = formatReport(summarize(exe.get()), "small.fb");
  for (const char *line :
       {"executable: small.fb\n", "  target: cuda sm_90\n", "model: tiny\n", "  n_embd = 16\n",
        "  parameters: 80 (320 B)\n", "  pool state: 1,024 B (1.0 KiB)\n",
        "  peak: 5,632 B (5.5 KiB)\n", "program train_step: 11 commands\n",
        "  kernel launches: 4 (3 distinct kernels)\n", "  collectives: 1\n",
        "    3  gelu_forward\n", "program init: 1 commands\n", "recompute: none (no --memory-budget)\n",
        "fusion: none recorded"})
    EXPECT_NE(text.find(line), std::string::npos) << "missing '" << line << "' in\n" << text;
}

// Verify that a program's activations at their peak (gpt-plan-memory's
// description) are printed under it, and nothing where a file has none.
TEST(ReportTest, TextShowsWhatTheActivationsHoldAtTheirPeak) {
  ExecutableSpec spec = smallSpec();
  spec.programs[0].liveAtPeak = "gelu f32 2.00 KiB x2, matmul f32 1.00 KiB x1";
  std::string text = formatReport(summarize(load(spec).get()), "small.fb");
  EXPECT_NE(text.find("program train_step: 11 commands\n  activations at their peak: gelu f32 "
                      "2.00 KiB x2, matmul f32 1.00 KiB x1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("program init: 1 commands\n  activations"), std::string::npos) << text;
}

// Verify that a train step's (micro-batches, rows, seq) tokens input is
// reported as its split of the batch, and nothing where there is none.
TEST(ReportTest, TextShowsTheMicroBatchesOfAStep) {
  ExecutableSpec spec = smallSpec();
  uint32_t inputs = spec.addPool("inputs", 512);
  uint32_t tokens =
      spec.addTensor("tokens", s::TensorRole::Input, s::DType::I32, {2, 4, 8}, inputs, 0);
  spec.programs[0].inputs.push_back(tokens);
  ExecutableSummary sum = summarize(load(spec).get());
  EXPECT_EQ(sum.programs[0].microBatches, 2);
  EXPECT_EQ(sum.programs[0].microRows, 4);
  EXPECT_EQ(sum.programs[1].microBatches, 0);
  std::string text = formatReport(sum, "small.fb");
  EXPECT_NE(text.find("program train_step: 11 commands\n  tokens: 2 micro-batches of 4 x 8 a step\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("program init: 1 commands\n  tokens"), std::string::npos) << text;
}

// Verify the optimizer section: a decaying schedule in words, the other
// settings one a line, an unknown schedule kind named as such, and "none
// recorded" for an executable without Model.optimizer.
TEST(ReportTest, TextShowsTheCompiledOptimizer) {
  ExecutableSpec spec = smallSpec();
  spec.optimizer = {{"beta2", 0.95}, {"lr", 6e-4},         {"min_lr", 6e-5},
                    {"schedule", 2}, {"total_steps", 100}, {"warmup_steps", 0}};
  ExecutableSummary sum = summarize(load(spec).get());
  ASSERT_EQ(sum.optimizer.size(), 6u);
  std::string text = formatReport(sum, "small.fb");
  EXPECT_NE(text.find("optimizer: AdamW in train_step (gptrun --lr X scales the schedule)\n"
                      "  schedule: linear, lr 0.0006, decaying to min_lr 6e-05 by step 100 (and "
                      "kept after it)\n  beta2 = 0.95\nmemory"),
            std::string::npos)
      << text;
  EXPECT_STREQ(scheduleKindName(7), "unknown");
  EXPECT_NE(formatReport(summarize(load(smallSpec()).get()), "small.fb")
                .find("optimizer: none recorded\n"),
            std::string::npos);
}

// Verify the bytes a CUDA run allocates: pool sizes plus the padding of
// alignments above cudaMalloc's 256.
TEST(ReportTest, RequiredPoolBytesCountsAlignmentPadding) {
  Executable exe = load(smallSpec());
  EXPECT_EQ(requiredPoolBytes(exe.get()), 512u + (1024u + 512u) + 4096u);
}

// Verify that the memory check passes when the pools fit, exactly or not.
TEST(MemoryCheckTest, FitsWhenFreeIsEnough) {
  EXPECT_TRUE(checkMemoryFits(0, 0));
  EXPECT_TRUE(checkMemoryFits(1000, 1000));
  EXPECT_TRUE(checkMemoryFits(1000, 1ull << 40));
}

// Verify that a shortfall names required and free bytes, the difference
// and the compile flag to change.
TEST(MemoryCheckTest, ShortfallSaysByHowMuchAndWhatToRecompile) {
  uint64_t gib = 1ull << 30;
  Status s = checkMemoryFits(150 * gib, 140 * gib);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("need 161,061,273,600 B (150.0 GiB)"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("150,323,855,360 B (140.0 GiB) free"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("10.0 GiB over"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--batch"), std::string::npos) << s.message();
  EXPECT_FALSE(checkMemoryFits(1001, 1000));
}

// Verify the byte formatting at the unit boundaries.
TEST(ReportTest, FormatBytes) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.0 KiB");
  EXPECT_EQ(formatBytes(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(formatBytes(500ull << 30), "500.0 GiB");
}

} // namespace
