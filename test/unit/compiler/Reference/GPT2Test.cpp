//===- GPT2Test.cpp - the GPT-2 forward graph on the reference interpreter ===//
//
// Instantiates models/gpt2.mlir for the `tiny` preset and checks its loss
// against a PyTorch fixture (test/fixtures/gpt2_tiny.txt, written by
// test/fixtures/make_gpt2_fixture.py with fixed weights and batch).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "dialects/GPT/Transforms/Passes.h"

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

// Verify the parameter count of every preset against llm.c's formula
// (124M with the vocabulary padded to 50304 has 124,475,904 parameters).
TEST_F(GPT2Test, ParameterCountsOfThePresets) {
  auto count = [&](const char *preset) -> int64_t {
    if (!compile(preset, Phase::Import))
      return -1;
    return function("forward")->getAttrOfType<mlir::IntegerAttr>("gpt.num_parameters").getInt();
  };
  auto formula = [](int64_t l, int64_t c, int64_t vp, int64_t maxT) {
    return vp * c + maxT * c + 2 * c + l * (12 * c * c + 13 * c);
  };
  EXPECT_EQ(count("124M"), 124475904);
  EXPECT_EQ(count("124M"), formula(12, 768, 50304, 1024));
  EXPECT_EQ(count("350M"), formula(24, 1024, 50304, 1024));
  EXPECT_EQ(count("774M"), formula(36, 1280, 50304, 1024));
  EXPECT_EQ(count("1558M"), formula(48, 1600, 50304, 1024));
  EXPECT_EQ(count("tiny"), formula(2, 16, 64, 16));
}

// Verify the fp64 forward loss against PyTorch float64 (same weights and
// batch): both are exact to rounding, so they agree to ~1e-12.
TEST_F(GPT2FixtureTest, Fp64LossMatchesPyTorch) {
  ASSERT_TRUE(compile("tiny", Phase::Import));
  auto out = evaluate("forward", fixtureArgs(function("forward"), fixture));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].data[0], fixture.lossFp64, 1e-10 * fixture.lossFp64);
}

// Verify the fp32 loss against PyTorch float32: different summation orders
// give differences of a few float ulps, so 1e-5 relative.
TEST_F(GPT2FixtureTest, Fp32LossMatchesPyTorch) {
  ASSERT_TRUE(compile("tiny", Phase::Import));
  auto out = evaluate("forward", fixtureArgs(function("forward"), fixture), Precision::F32);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].data[0], fixture.lossFp32, 1e-5 * fixture.lossFp32);
  EXPECT_NEAR(out[0].data[0], fixture.lossFp64, 1e-5 * fixture.lossFp64);
}

// Verify that the decomposed attention computes the same model loss.
TEST_F(GPT2FixtureTest, DecomposedAttentionMatchesPyTorch) {
  ASSERT_TRUE(compile("tiny", Phase::Import, {}, [](mlir::PassManager &pm) {
    pm.addNestedPass<mlir::func::FuncOp>(mlir::gpt::createDecomposeAttentionPass());
  }));
  bool fused = false;
  function("forward").walk([&](mlir::gpt::CausalAttentionOp) { fused = true; });
  ASSERT_FALSE(fused);
  auto out = evaluate("forward", fixtureArgs(function("forward"), fixture));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].data[0], fixture.lossFp64, 1e-10 * fixture.lossFp64);
}

} // namespace
