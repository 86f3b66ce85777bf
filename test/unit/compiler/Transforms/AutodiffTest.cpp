//===- AutodiffTest.cpp - gpt-autodiff gradients vs references ------------===//
//
// The gradients gpt-autodiff builds are checked against PyTorch's (fixture)
// and against central finite differences of the fp64 interpreter.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Transforms/Passes.h"

#include <random>

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

/// Checks d loss / d arg of @forward_grad against central differences of
/// @forward at `samples` elements of every parameter tensor (all elements
/// when samples < 0). Relative error < 1e-4 where the gradient is not tiny.
void checkFiniteDifferences(GPT2Test &t, const std::vector<Tensor> &args, int samples,
                            uint64_t seed) {
  mlir::func::FuncOp fn = t.function("forward");
  std::vector<std::string> names = reference::getArgumentNames(fn);
  auto grads = t.evaluate("forward_grad", args);
  ASSERT_FALSE(grads.empty());
  std::mt19937_64 rng(seed);
  size_t g = 1; // result 0 is the loss
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (!fn.getArgAttr(i, mlir::gpt::kParamAttrName))
      continue;
    const Tensor &ad = grads[g++];
    std::vector<size_t> indices;
    if (samples < 0) {
      for (size_t k = 0; k < ad.data.size(); ++k)
        indices.push_back(k);
    } else {
      // The largest-magnitude gradient plus random elements.
      size_t largest = 0;
      for (size_t k = 0; k < ad.data.size(); ++k)
        if (std::fabs(ad.data[k]) > std::fabs(ad.data[largest]))
          largest = k;
      indices.push_back(largest);
      for (int s = 1; s < samples; ++s)
        indices.push_back(rng() % ad.data.size());
    }
    for (size_t k : indices) {
      const double h = 1e-5;
      std::vector<Tensor> plus = args, minus = args;
      plus[i].data[k] += h;
      minus[i].data[k] -= h;
      double fd = (t.evaluate("forward", plus)[0].data[0] -
                   t.evaluate("forward", minus)[0].data[0]) /
                  (2 * h);
      double scale = std::max(std::fabs(fd), std::fabs(ad.data[k]));
      if (scale < 1e-7)
        EXPECT_NEAR(ad.data[k], fd, 1e-9) << names[i] << "[" << k << "]";
      else
        EXPECT_LT(std::fabs(ad.data[k] - fd) / scale, 1e-4)
            << names[i] << "[" << k << "]: autodiff " << ad.data[k] << ", fd " << fd;
    }
  }
  EXPECT_EQ(g, grads.size());
}

// Verify every parameter gradient of the tiny GPT-2 against PyTorch float64.
TEST_F(GPT2FixtureTest, GradientsMatchPyTorch) {
  ASSERT_TRUE(compile("tiny", Phase::Autodiff));
  mlir::func::FuncOp grad = function("forward_grad");
  auto out = evaluate("forward_grad", fixtureArgs(grad, fixture));
  ASSERT_EQ(out.size(), fixture.grads.size() + 1);
  EXPECT_NEAR(out[0].data[0], fixture.lossFp64, 1e-10 * fixture.lossFp64);
  for (unsigned r = 1; r < grad.getNumResults(); ++r) {
    auto name = grad.getResultAttrOfType<mlir::StringAttr>(r, kGradOfAttrName).str();
    ASSERT_TRUE(fixture.grads.count(name)) << name;
    EXPECT_LT(relativeError(out[r], fixture.grads.at(name)), 1e-9) << name;
  }
}

// Verify the fp32 gradients against PyTorch float64 within fp32 accuracy.
TEST_F(GPT2FixtureTest, Fp32GradientsMatchPyTorch) {
  ASSERT_TRUE(compile("tiny", Phase::Autodiff));
  mlir::func::FuncOp grad = function("forward_grad");
  auto out = evaluate("forward_grad", fixtureArgs(grad, fixture), Precision::F32);
  ASSERT_EQ(out.size(), fixture.grads.size() + 1);
  for (unsigned r = 1; r < grad.getNumResults(); ++r) {
    auto name = grad.getResultAttrOfType<mlir::StringAttr>(r, kGradOfAttrName).str();
    EXPECT_LT(relativeError(out[r], fixture.grads.at(name)), 1e-4) << name;
  }
}

// Verify the GPT-2 gradients by finite differences, every parameter tensor
// sampled (tied wte included: both of its uses contribute).
TEST_F(GPT2FixtureTest, GradientsMatchFiniteDifferences) {
  ASSERT_TRUE(compile("tiny", Phase::Autodiff));
  checkFiniteDifferences(*this, fixtureArgs(function("forward"), fixture), 4, 42);
}

// Verify the rules of the elementwise, layout, matmul (all transposes,
// shared rhs), linear, bias, gelu, softmax and cast ops by finite
// differences over every element.
TEST_F(GPT2Test, ElementwiseAndMatmulRulesMatchFiniteDifferences) {
  module = parse(R"mlir(
    func.func @forward(%x: tensor<2x3x4xf64> {gpt.param = "x"},
                       %w: tensor<5x4xf64> {gpt.param = "w"},
                       %w2: tensor<4x5xf64> {gpt.param = "w2"},
                       %u: tensor<2x4x3xf64> {gpt.param = "u"},
                       %b: tensor<5xf64> {gpt.param = "b"},
                       %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f64> {
      %e = gpt.exp %x : tensor<2x3x4xf64>
      %l = gpt.log %e : tensor<2x3x4xf64>
      %s = gpt.sqrt %e : tensor<2x3x4xf64>
      %r = gpt.rsqrt %e : tensor<2x3x4xf64>
      %d = gpt.div %s, %r : tensor<2x3x4xf64>
      %m = gpt.mul %d, %l : tensor<2x3x4xf64>
      %n = gpt.sub %m, %x : tensor<2x3x4xf64>
      %ng = gpt.neg %n : tensor<2x3x4xf64>
      %th = gpt.tanh %ng : tensor<2x3x4xf64>
      %sc = gpt.scale %th {factor = 0.7 : f64} : tensor<2x3x4xf64>
      %sm = gpt.softmax %sc : tensor<2x3x4xf64>
      %c1 = gpt.cast %sm : tensor<2x3x4xf64> to tensor<2x3x4xf32>
      %c2 = gpt.cast %c1 : tensor<2x3x4xf32> to tensor<2x3x4xf64>
      %tp = gpt.transpose %c2 [0, 2, 1] : (tensor<2x3x4xf64>) -> tensor<2x4x3xf64>
      %rs = gpt.reshape %tp : tensor<2x4x3xf64> to tensor<2x3x4xf64>
      %a1 = gpt.matmul %rs, %u : (tensor<2x3x4xf64>, tensor<2x4x3xf64>) -> tensor<2x3x3xf64>
      %a2 = gpt.matmul %a1, %u {transpose_rhs} : (tensor<2x3x3xf64>, tensor<2x4x3xf64>) -> tensor<2x3x4xf64>
      %a3 = gpt.matmul %u, %a2 {transpose_lhs, transpose_rhs} : (tensor<2x4x3xf64>, tensor<2x3x4xf64>) -> tensor<2x3x3xf64>
      %a4 = gpt.matmul %a3, %rs {transpose_lhs} : (tensor<2x3x3xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
      %a5 = gpt.add %a4, %x : tensor<2x3x4xf64>
      %lg = gpt.linear %a5, %w, %b : (tensor<2x3x4xf64>, tensor<5x4xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>
      %lg2 = gpt.matmul %a5, %w {transpose_rhs} : (tensor<2x3x4xf64>, tensor<5x4xf64>) -> tensor<2x3x5xf64>
      %lg3 = gpt.matmul %a5, %w2 : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>
      %s1 = gpt.add %lg, %lg2 : tensor<2x3x5xf64>
      %s2 = gpt.add %s1, %lg3 : tensor<2x3x5xf64>
      %ba = gpt.bias_add %s2, %b : (tensor<2x3x5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>
      %ge = gpt.gelu %ba : tensor<2x3x5xf64>
      %loss = gpt.cross_entropy %ge, %t {vocab_size = 4 : i64} : (tensor<2x3x5xf64>, tensor<2x3xi32>) -> tensor<f64>
      return %loss : tensor<f64>
    })mlir");
  ASSERT_TRUE(module);
  mlir::PassManager pm(&context);
  pm.addPass(createAutodiffPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics;

  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 0.5);
  std::vector<Tensor> args;
  for (auto arg : function("forward").getArguments()) {
    auto shape = llvm::cast<mlir::ShapedType>(arg.getType()).getShape();
    Tensor t(std::vector<int64_t>(shape.begin(), shape.end()));
    for (double &x : t.data)
      x = normal(rng);
    args.push_back(t);
  }
  args.back().data = {0, 3, 1, 2, 2, 0}; // targets
  checkFiniteDifferences(*this, args, /*samples=*/-1, 0);
}

} // namespace
