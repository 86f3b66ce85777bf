//===- FusionLoweringTest.cpp - launches of the fused optimizer and loss -===//
//
// Lowers the `tiny` train step (CUDA row lanes: a warp per row) with and
// without gpt-fuse-adamw and the fused cross-entropy, and counts the kernel
// launches of each op: one for all AdamW updates, and one row launch per
// direction of the cross-entropy (plus the forward's mean).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Codegen/Lowering.h"

using namespace gptc;
using namespace gptc::testing;

namespace {

class FusionLoweringTest : public GPT2Test {
protected:
  /// Launches of @train_step per gpt op, and the kernel names of each.
  std::map<std::string, int> launches;
  std::map<std::string, std::vector<std::string>> kernels;
  std::vector<codegen::Command> ceGrad;

  void lower(bool fuseAdamW, bool fuseCrossEntropy, const std::string &precision = "fp32") {
    ASSERT_TRUE(compile("tiny", Phase::MemoryPlan, [&](PipelineOptions &o) {
      o.fuseAdamW = fuseAdamW;
      o.precision = precision;
    }));
    codegen::LoweringOptions options;
    options.rowLanes = 32;
    options.fusedCrossEntropy = fuseCrossEntropy;
    auto lowered = codegen::lowerPrograms(*module, {"train_step"}, options);
    ASSERT_TRUE(mlir::succeeded(lowered)) << diagnostics;
    for (const codegen::Command &c : lowered->programs.front().commands) {
      if (c.kind != codegen::Command::Launch)
        continue;
      ++launches[c.op];
      kernels[c.op].push_back(lowered->kernels[c.kernel].name);
      if (c.op == "gpt.cross_entropy_grad")
        ceGrad.push_back(c);
    }
  }
};

// tiny: wte, wpe, 2 x 12 per block, ln_f weight and bias.
constexpr int kParams = 2 + 2 * 12 + 2;

TEST_F(FusionLoweringTest, FusedAdamWIsOneLaunch) {
  ASSERT_NO_FATAL_FAILURE(lower(true, true));
  EXPECT_EQ(launches["gpt.adamw_multi"], 1);
  EXPECT_EQ(launches.count("gpt.adamw"), 0u);
}

TEST_F(FusionLoweringTest, UnfusedAdamWIsOneLaunchPerParameter) {
  ASSERT_NO_FATAL_FAILURE(lower(false, true));
  EXPECT_EQ(launches["gpt.adamw"], kParams);
  EXPECT_EQ(launches.count("gpt.adamw_multi"), 0u);
}

TEST_F(FusionLoweringTest, FusedCrossEntropyIsOneRowLaunchPerDirection) {
  for (const char *precision : {"fp32", "bf16"}) {
    launches.clear();
    kernels.clear();
    ceGrad.clear();
    ASSERT_NO_FATAL_FAILURE(lower(true, true, precision));
    // Forward: the online row kernel and the mean; backward: one launch
    // that reads the saved log-sum-exp (its fifth argument).
    ASSERT_EQ(launches["gpt.cross_entropy"], 2) << precision;
    EXPECT_EQ(kernels["gpt.cross_entropy"][0].rfind("crossentropy_forward_online", 0), 0u);
    ASSERT_EQ(launches["gpt.cross_entropy_grad"], 1) << precision;
    EXPECT_EQ(kernels["gpt.cross_entropy_grad"][0].rfind("crossentropy_backward_fused", 0), 0u);
    ASSERT_EQ(ceGrad.size(), 1u);
    EXPECT_EQ(ceGrad[0].args.size(), 5u) << "no saved log-sum-exp operand";
  }
}

TEST_F(FusionLoweringTest, UnfusedCrossEntropyHasSeparateStatistics) {
  ASSERT_NO_FATAL_FAILURE(lower(true, false));
  EXPECT_EQ(launches["gpt.cross_entropy"], 2);
  EXPECT_EQ(launches["gpt.cross_entropy_grad"], 2);
}

} // namespace
