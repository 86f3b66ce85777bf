//===- InterpreterTest.cpp - reference interpreter ops vs hand values ----===//
//
// Expected values were computed by hand (or with Python's math module from
// the op's formula), never by the interpreter itself.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "dialects/GPT/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <limits>
#include <random>

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

using InterpreterTest = ReferenceTest;

// Verify layernorm against mean/variance computed by hand.
TEST_F(InterpreterTest, LayerNormMatchesHandComputed) {
  Tensor y = run(R"mlir(
    func.func @f(%x: tensor<1x4xf64>, %w: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<1x4xf64> {
      %y = gpt.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
          : (tensor<1x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<1x4xf64>
      return %y : tensor<1x4xf64>
    })mlir",
                 {Tensor({1, 4}, {1, 2, 3, 4}), Tensor({4}, {1, 1, 2, 2}),
                  Tensor({4}, {0, 0.5, 0, -1})});
  // mean 2.5, biased variance 1.25.
  double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
  expectNear(y, {-1.5 * rstd, -0.5 * rstd + 0.5, 0.5 * rstd * 2, 1.5 * rstd * 2 - 1},
             1e-14);
}

// Verify gpt.fp8_matmul's quantization by hand: lhs [1, 3] has amax 3, so
// e4m3 scales it by 448/3: 3 -> 448 exactly, 1 -> 149.33 rounds to 144 (16
// apart in [128, 256)), read back as 144 * 3/448. rhs [2, 0.1]^T: 448/2, and
// 0.1 -> 22.4 rounds to 22 (2 apart in [16, 32)). As e5m2 (57344/3), 1 ->
// 19114.7 rounds to 20480 (4096 apart in [16384, 32768)).
TEST_F(InterpreterTest, Fp8MatmulQuantizesEachOperandByItsAmax) {
  for (auto [format, lhsOne] : {std::pair{"e4m3", 144.0 * 3 / 448}, std::pair{"e5m2", 20480.0 * 3 / 57344}}) {
    SCOPED_TRACE(format);
    Tensor y = run(std::string(R"mlir(
      func.func @f(%a: tensor<1x2xf64>, %b: tensor<2x1xf64>) -> tensor<1x1xf64> {
        %y = gpt.fp8_matmul )mlir") + format + R"mlir( %a, e4m3 %b
            : (tensor<1x2xf64>, tensor<2x1xf64>) -> tensor<1x1xf64>
        return %y : tensor<1x1xf64>
      })mlir",
                   {Tensor({1, 2}, {1, 3}), Tensor({2, 1}, {2, 0.1})});
    expectNear(y, {lhsOne * 2 + 3 * (22.0 / 224)}, 1e-15);
  }
  // An all-zero operand has no amax: its scale is 1 and the product 0.
  Tensor zero = run(R"mlir(
    func.func @f(%a: tensor<1x2xf64>, %b: tensor<2x1xf64>) -> tensor<1x1xf64> {
      %y = gpt.fp8_matmul e4m3 %a, e4m3 %b : (tensor<1x2xf64>, tensor<2x1xf64>) -> tensor<1x1xf64>
      return %y : tensor<1x1xf64>
    })mlir",
                    {Tensor({1, 2}, {0, 0}), Tensor({2, 1}, {2, 0.1})});
  expectNear(zero, {0.0}, 0);
}

// Verify that a NaN makes gpt.fp8_scale's amax NaN, so the scale is 1 (as
// the kernels' maxima propagate it), not the amax of the other elements.
TEST_F(InterpreterTest, Fp8ScaleOfANanIsOne) {
  module = parse(R"mlir(
    func.func @f(%x: tensor<3xf32>) -> (tensor<f32>, tensor<f32>) {
      %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<3xf32>) -> (tensor<f32>, tensor<f32>)
      return %s, %inv : tensor<f32>, tensor<f32>
    })mlir");
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (auto [x, scale] : {std::pair{std::vector<double>{1, nan, 4}, 1.0},
                          std::pair{std::vector<double>{1, -2, 4}, 448.0 / 4}}) {
    auto out = reference::evaluate(fn, {Tensor({3}, x)}, Precision::F32);
    ASSERT_TRUE(mlir::succeeded(out)) << diagnostics;
    expectNear((*out)[0], {scale}, 0);
    expectNear((*out)[1], {1 / scale}, 1e-9); // 4/448 in f32
  }
}

// Verify that an op whose configuration is still a #gpt.cfg (a model not
// instantiated) is an error naming the attribute, not a crash.
TEST_F(InterpreterTest, UninstantiatedConfigIsAnError) {
  module = parse(R"mlir(
    func.func @f(%qkv: tensor<1x2x6xf64>) -> tensor<1x2x2xf64> {
      %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">}
          : (tensor<1x2x6xf64>) -> (tensor<1x2x2xf64>, tensor<1x?x2xf32>)
      return %y : tensor<1x2x2xf64>
    })mlir");
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto out = reference::evaluate(fn, {Tensor({1, 2, 6}, std::vector<double>(12, 0.5))},
                                 Precision::F64);
  EXPECT_TRUE(mlir::failed(out));
  EXPECT_NE(diagnostics.find("num_heads is #gpt.cfg<\"n_head\">, not a number: instantiate "
                             "the model first"),
            std::string::npos)
      << diagnostics;
}

// Verify gpt.fp8_cross_entropy_grad: the gradient's e5m2 codes at the
// scale of its bound |dloss| / P, the inverse of that scale, scale 1 for a
// zero dloss, zero codes in the padding; gpt.fp8_transpose moves them.
TEST_F(InterpreterTest, Fp8CrossEntropyGradScalesByItsBound) {
  module = parse(R"mlir(
    func.func @f(%d: tensor<f64>, %l: tensor<2x4xf64>, %t: tensor<2xi32>)
        -> (tensor<2x4xf8E5M2>, tensor<f32>, tensor<4x2xf8E5M2>, tensor<2x4xf64>) {
      %q, %inv = gpt.fp8_cross_entropy_grad %d, %l, %t {vocab_size = 3 : i64}
          : (tensor<f64>, tensor<2x4xf64>, tensor<2xi32>) -> (tensor<2x4xf8E5M2>, tensor<f32>)
      %qt = gpt.fp8_transpose %q : (tensor<2x4xf8E5M2>) -> tensor<4x2xf8E5M2>
      %g = gpt.cross_entropy_grad %d, %l, %t {vocab_size = 3 : i64}
          : (tensor<f64>, tensor<2x4xf64>, tensor<2xi32>) -> tensor<2x4xf64>
      return %q, %inv, %qt, %g : tensor<2x4xf8E5M2>, tensor<f32>, tensor<4x2xf8E5M2>, tensor<2x4xf64>
    })mlir");
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  // e5m2: 2 mantissa bits, normal from 2^-14, ties to even.
  auto e5m2 = [](double v) {
    if (v == 0)
      return 0.0;
    double quantum = std::ldexp(1.0, std::max(std::ilogb(v), -14) - 2);
    return std::nearbyint(v / quantum) * quantum;
  };
  Tensor logits({2, 4}, {4, -1, 0.5, 9, -2, 3, 1, -9});
  for (double dloss : {3.0, -0.5}) {
    auto out = reference::evaluate(fn, {Tensor({}, {dloss}), logits, Tensor({2}, {2, 1})},
                                   Precision::F64);
    ASSERT_TRUE(mlir::succeeded(out)) << diagnostics;
    double s = 57344 * 2 / std::fabs(dloss);
    const Tensor &q = (*out)[0], &qt = (*out)[2], &g = (*out)[3];
    double largest = 0;
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(q.data[i], e5m2(g.data[i] * s)) << "element " << i << ", dloss " << dloss;
      EXPECT_EQ(qt.data[(i % 4) * 2 + i / 4], q.data[i]) << "element " << i;
      largest = std::max(largest, std::fabs(q.data[i]));
    }
    EXPECT_EQ(q.data[3], 0); // padding
    EXPECT_LE(largest, 57344);
    EXPECT_GT(largest, 57344 / 2.0); // row 0's target has p near 0
    expectNear((*out)[1], {1 / s}, 1e-15);
  }
  // A zero dloss, and one whose scale would overflow f32: scale 1.
  for (double dloss : {0.0, 1e-40}) {
    auto out = reference::evaluate(fn, {Tensor({}, {dloss}), logits, Tensor({2}, {2, 1})},
                                   Precision::F64);
    ASSERT_TRUE(mlir::succeeded(out)) << diagnostics;
    expectNear((*out)[0], std::vector<double>(8, 0.0), 0);
    expectNear((*out)[1], {1.0}, 0);
  }
}

// Verify the tanh-approximate GELU at a few points.
TEST_F(InterpreterTest, GeluTanhApproximation) {
  Tensor y = run(R"mlir(
    func.func @f(%x: tensor<5xf64>) -> tensor<5xf64> {
      %y = gpt.gelu %x : tensor<5xf64>
      return %y : tensor<5xf64>
    })mlir",
                 {Tensor({5}, {0.0, 1.0, -1.0, 2.0, -3.0})});
  expectNear(y, {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                 -0.0036373920817729943},
             1e-15);
}

// Verify that cross-entropy averages over positions and ignores padded logits.
TEST_F(InterpreterTest, CrossEntropyIgnoresPaddedVocabulary) {
  Tensor loss = run(R"mlir(
    func.func @f(%l: tensor<1x2x4xf64>, %t: tensor<1x2xi32>) -> tensor<f64> {
      %loss = gpt.cross_entropy %l, %t {vocab_size = 3 : i64}
          : (tensor<1x2x4xf64>, tensor<1x2xi32>) -> tensor<f64>
      return %loss : tensor<f64>
    })mlir",
                    {Tensor({1, 2, 4}, {2, 1, 0, 9, 0.5, -1, 3, 7}), Tensor({1, 2}, {0, 2})});
  expectNear(loss, {0.2516401469293814}, 1e-15);
}

// Verify that a target outside the vocabulary is reported, not read.
TEST_F(InterpreterTest, CrossEntropyRejectsTargetOutsideVocabulary) {
  module = parse(R"mlir(
    func.func @f(%l: tensor<1x1x4xf64>, %t: tensor<1x1xi32>) -> tensor<f64> {
      %loss = gpt.cross_entropy %l, %t {vocab_size = 3 : i64}
          : (tensor<1x1x4xf64>, tensor<1x1xi32>) -> tensor<f64>
      return %loss : tensor<f64>
    })mlir");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  EXPECT_TRUE(mlir::failed(reference::evaluate(
      fn, {Tensor({1, 1, 4}, 0.0), Tensor({1, 1}, {3})}, Precision::F64)));
  EXPECT_NE(diagnostics.find("target 3 at position 0 is outside the vocabulary [0, 3)"),
            std::string::npos)
      << diagnostics;
}

// Verify token + position embedding and the out-of-range id error.
TEST_F(InterpreterTest, EmbedAddsTokenAndPositionRows) {
  const char *src = R"mlir(
    func.func @f(%wte: tensor<3x2xf64>, %wpe: tensor<4x2xf64>, %ids: tensor<1x2xi32>) -> tensor<1x2x2xf64> {
      %x = gpt.embed %wte, %wpe, %ids
          : (tensor<3x2xf64>, tensor<4x2xf64>, tensor<1x2xi32>) -> tensor<1x2x2xf64>
      return %x : tensor<1x2x2xf64>
    })mlir";
  Tensor wte({3, 2}, {1, 2, 10, 20, 100, 200}), wpe({4, 2}, {0.1, 0.2, 0.3, 0.4, 9, 9, 9, 9});
  Tensor y = run(src, {wte, wpe, Tensor({1, 2}, {2, 0})});
  expectNear(y, {100.1, 200.2, 1.3, 2.4}, 1e-12);

  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  EXPECT_TRUE(mlir::failed(
      reference::evaluate(fn, {wte, wpe, Tensor({1, 2}, {0, 3})}, Precision::F64)));
  EXPECT_NE(diagnostics.find("token id 3 at position 1"), std::string::npos) << diagnostics;
}

// Verify causal attention on a two-token, one-head example worked by hand.
TEST_F(InterpreterTest, CausalAttentionHandComputed) {
  // Rows are [q | k | v] per token.
  const char *source = R"mlir(
    func.func @f(%qkv: tensor<1x2x6xf64>) -> (tensor<1x2x2xf64>, tensor<1x1x2xf32>) {
      %y, %lse = gpt.causal_attention %qkv {num_heads = 1 : i64}
          : (tensor<1x2x6xf64>) -> (tensor<1x2x2xf64>, tensor<1x1x2xf32>)
      return %y, %lse : tensor<1x2x2xf64>, tensor<1x1x2xf32>
    })mlir";
  module = parse(source);
  ASSERT_TRUE(module);
  auto results =
      reference::evaluate(module->lookupSymbol<mlir::func::FuncOp>("f"),
                          {Tensor({1, 2, 6}, {1, 0, 1, 2, 3, 4, /**/ 0, 1, 2, -1, -1, 5})},
                          Precision::F64);
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  // Token 0 sees only itself; token 1 mixes v0 and v1 by softmax(q1.k / sqrt 2).
  expectNear((*results)[0], {3, 4, 2.5718327941393184, 4.10704180146517}, 1e-14);
  // lse: q0.k0 / sqrt 2, and log(exp(2 / sqrt 2) + exp(-1 / sqrt 2)).
  expectNear((*results)[1], {0.7071067811865475, 1.5274290717257288}, 1e-14);
}

// Verify that the fused attention op and its decomposition agree.
TEST_F(InterpreterTest, CausalAttentionMatchesDecomposition) {
  module = parse(R"mlir(
    func.func @f(%qkv: tensor<2x5x36xf64>) -> tensor<2x5x12xf64> {
      %y, %lse = gpt.causal_attention %qkv {num_heads = 3 : i64}
          : (tensor<2x5x36xf64>) -> (tensor<2x5x12xf64>, tensor<2x3x5xf32>)
      return %y : tensor<2x5x12xf64>
    })mlir");
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  Tensor qkv({2, 5, 36});
  for (double &x : qkv.data)
    x = normal(rng);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto fused = reference::evaluate(fn, {qkv}, Precision::F64);
  ASSERT_TRUE(mlir::succeeded(fused)) << diagnostics;

  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(mlir::gpt::createDecomposeAttentionPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  bool decomposed = false;
  fn.walk([&](mlir::gpt::SoftmaxOp) { decomposed = true; });
  ASSERT_TRUE(decomposed);
  auto unfused = reference::evaluate(fn, {qkv}, Precision::F64);
  ASSERT_TRUE(mlir::succeeded(unfused)) << diagnostics;
  expectNear((*unfused)[0], (*fused)[0].data, 1e-13);
}

// Verify matmul's transposes and a rank-2 rhs shared across the batch.
TEST_F(InterpreterTest, MatmulTransposesAndSharedRhs) {
  // lhs^T (2x3 stored as 3x2) times rhs^T (3x2 stored as 2x3), batch 2.
  Tensor y = run(R"mlir(
    func.func @f(%a: tensor<2x3x2xf64>, %b: tensor<2x3xf64>) -> tensor<2x2x2xf64> {
      %y = gpt.matmul %a, %b {transpose_lhs, transpose_rhs}
          : (tensor<2x3x2xf64>, tensor<2x3xf64>) -> tensor<2x2x2xf64>
      return %y : tensor<2x2x2xf64>
    })mlir",
                 {Tensor({2, 3, 2}, {1, 2, 3, 4, 5, 6, /**/ 1, 0, 0, 1, 1, 1}),
                  Tensor({2, 3}, {1, 0, 2, 0, 1, 1})});
  // Batch 0: A^T = [[1,3,5],[2,4,6]], B^T = [[1,0],[0,1],[2,1]].
  // Batch 1: A^T = [[1,0,1],[0,1,1]].
  expectNear(y, {11, 8, 14, 10, /**/ 3, 1, 2, 2}, 1e-15);
}

// Verify linear = x W^T + b with a PyTorch-layout weight.
TEST_F(InterpreterTest, LinearUsesOutInLayout) {
  Tensor y = run(R"mlir(
    func.func @f(%x: tensor<1x2xf64>, %w: tensor<3x2xf64>, %b: tensor<3xf64>) -> tensor<1x3xf64> {
      %y = gpt.linear %x, %w, %b
          : (tensor<1x2xf64>, tensor<3x2xf64>, tensor<3xf64>) -> tensor<1x3xf64>
      return %y : tensor<1x3xf64>
    })mlir",
                 {Tensor({1, 2}, {1, 2}), Tensor({3, 2}, {1, 0, 0, 1, 1, 1}),
                  Tensor({3}, {0.5, 0, -1})});
  expectNear(y, {1.5, 2, 2}, 1e-15);
}

// Verify sum/mean/max reductions with and without keep_dims.
TEST_F(InterpreterTest, ReduceKinds) {
  const char *src = R"mlir(
    func.func @f(%x: tensor<2x3xf64>) -> (tensor<3xf64>, tensor<2x1xf64>, tensor<3xf64>) {
      %s = gpt.reduce sum %x dims [0] : (tensor<2x3xf64>) -> tensor<3xf64>
      %m = gpt.reduce mean %x dims [1] keep_dims : (tensor<2x3xf64>) -> tensor<2x1xf64>
      %x2 = gpt.reduce max %x dims [0] : (tensor<2x3xf64>) -> tensor<3xf64>
      return %s, %m, %x2 : tensor<3xf64>, tensor<2x1xf64>, tensor<3xf64>
    })mlir";
  module = parse(src);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto r = reference::evaluate(fn, {Tensor({2, 3}, {1, -2, 3, 4, 5, -6})}, Precision::F64);
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostics;
  expectNear((*r)[0], {5, 3, -3}, 1e-15);
  expectNear((*r)[1], {2.0 / 3, 1}, 1e-15);
  EXPECT_EQ((*r)[1].shape, (std::vector<int64_t>{2, 1}));
  expectNear((*r)[2], {4, 5, 3}, 1e-15);
}

// Verify transpose, slice and reshape move the right elements.
TEST_F(InterpreterTest, LayoutOps) {
  Tensor y = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>) -> tensor<1x2xf64> {
      %t = gpt.transpose %x [1, 0] : (tensor<2x3xf64>) -> tensor<3x2xf64>
      %s = gpt.slice %t {dim = 0 : i64, start = 2 : i64, size = 1 : i64}
          : (tensor<3x2xf64>) -> tensor<1x2xf64>
      %r = gpt.reshape %s : tensor<1x2xf64> to tensor<1x2xf64>
      return %r : tensor<1x2xf64>
    })mlir",
                 {Tensor({2, 3}, {1, 2, 3, 4, 5, 6})});
  expectNear(y, {3, 6}, 0);
}

// Verify the causal mask and a softmax over masked rows.
TEST_F(InterpreterTest, CausalMaskThenSoftmax) {
  Tensor y = run(R"mlir(
    func.func @f(%s: tensor<2x2xf64>) -> tensor<2x2xf64> {
      %m = gpt.causal_mask %s : tensor<2x2xf64>
      %p = gpt.softmax %m : tensor<2x2xf64>
      return %p : tensor<2x2xf64>
    })mlir",
                 {Tensor({2, 2}, {5, 7, 0, std::log(3.0)})});
  expectNear(y, {1, 0, 0.25, 0.75}, 1e-15);
}

// Verify that fp32 mode computes in single precision: (1e8 + 1) - 1e8 is 0
// in float (the ulp of 1e8 is 8) and 1 in double.
TEST_F(InterpreterTest, Fp32ModeRoundsEveryOp) {
  const char *src = R"mlir(
    func.func @f(%a: tensor<1xf32>, %b: tensor<1xf32>) -> tensor<1xf32> {
      %s = gpt.add %a, %b : tensor<1xf32>
      %d = gpt.sub %s, %a : tensor<1xf32>
      return %d : tensor<1xf32>
    })mlir";
  std::vector<Tensor> args = {Tensor({1}, {1e8}), Tensor({1}, {1})};
  EXPECT_EQ(run(src, args, Precision::F32).data[0], 0.0);
  EXPECT_EQ(run(src, args, Precision::F64).data[0], 1.0);
}

// Verify bf16/f16 rounding: ties to even, subnormals, overflow to infinity.
TEST_F(InterpreterTest, CastRoundsToNarrowFormats) {
  Tensor y = run(R"mlir(
    func.func @f(%x: tensor<4xf32>) -> tensor<4xbf16> {
      %h = gpt.cast %x : tensor<4xf32> to tensor<4xbf16>
      return %h : tensor<4xbf16>
    })mlir",
                 {Tensor({4}, {1.00390625, 1.01171875, -3.0e38, 1.0e-40})});
  // 1 + 2^-8 ties to 1; 1 + 3 * 2^-8 ties to 1 + 2^-6; -3e38 keeps 8
  // significant bits; 1e-40 becomes the smallest bf16 subnormal, 2^-133.
  EXPECT_EQ(y.data[0], 1.0);
  EXPECT_EQ(y.data[1], 1.015625);
  EXPECT_EQ(y.data[2], -3.00405527047391e38);
  EXPECT_EQ(y.data[3], std::ldexp(1.0, -133));

  mlir::Builder b(&context);
  EXPECT_EQ(reference::roundTo(b.getF16Type(), 65520.0),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(reference::roundTo(b.getF16Type(), 65519.0), 65504.0);
  EXPECT_EQ(reference::roundTo(b.getF16Type(), std::ldexp(1.0, -25)), 0.0); // tie to 0
  EXPECT_EQ(reference::roundTo(b.getF16Type(), std::ldexp(3.0, -26)), std::ldexp(1.0, -24));
}

// Verify that a wrongly shaped argument is a diagnostic, not a crash.
TEST_F(InterpreterTest, RejectsWrongArgumentShape) {
  module = parse(R"mlir(
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %y = gpt.exp %x : tensor<2xf64>
      return %y : tensor<2xf64>
    })mlir");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  EXPECT_TRUE(mlir::failed(reference::evaluate(fn, {Tensor({3}, 1.0)}, Precision::F64)));
  EXPECT_NE(diagnostics.find("argument 0 has the wrong shape"), std::string::npos);
  EXPECT_TRUE(mlir::failed(reference::evaluate(fn, {}, Precision::F64)));
}

// Verify the warm-up and cosine/linear decay of gpt.lr_schedule.
TEST_F(InterpreterTest, LRScheduleWarmupAndDecay) {
  auto lrAt = [&](const char *kind, double step) {
    std::string src = std::string(R"mlir(
      func.func @f(%s: tensor<i32>) -> tensor<f64> {
        %lr = gpt.lr_schedule )mlir") + kind + R"mlir( %s {max_lr = 1.0 : f64, min_lr = 0.1 : f64,
            warmup_steps = 2 : i64, total_steps = 10 : i64} : (tensor<i32>) -> tensor<f64>
        return %lr : tensor<f64>
      })mlir";
    return run(src, {Tensor({}, step)}).data[0];
  };
  EXPECT_DOUBLE_EQ(lrAt("cosine", 0), 0.5); // (0 + 1) / 2 of the peak
  EXPECT_DOUBLE_EQ(lrAt("cosine", 1), 1.0);
  EXPECT_DOUBLE_EQ(lrAt("cosine", 2), 1.0);
  EXPECT_DOUBLE_EQ(lrAt("cosine", 4), 0.8681980515339464); // r = 1/4
  EXPECT_DOUBLE_EQ(lrAt("cosine", 6), 0.55);               // r = 1/2
  EXPECT_DOUBLE_EQ(lrAt("cosine", 12), 0.1);               // clamped
  EXPECT_DOUBLE_EQ(lrAt("linear", 4), 0.775);
  EXPECT_DOUBLE_EQ(lrAt("constant", 0), 1.0);
}

// Verify one AdamW update worked by hand: g' = 0.5 * 2 = 1, m' = 0.1,
// v' = 0.05, both bias-corrected to 1, p' = 1 - 0.1 (1 + 0.1 * 1) = 0.89.
TEST_F(InterpreterTest, AdamWUpdateHandComputed) {
  module = parse(R"mlir(
    func.func @f(%p: tensor<1xf64>, %g: tensor<1xf64>, %m: tensor<1xf64>, %v: tensor<1xf64>,
                 %lr: tensor<f64>, %step: tensor<i32>, %scale: tensor<f64>)
        -> (tensor<1xf64>, tensor<1xf64>, tensor<1xf64>) {
      %p1, %m1, %v1 = gpt.adamw %p, %g, %m, %v, %lr, %step, %scale
          {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 0.0 : f64, weight_decay = 0.1 : f64}
          : tensor<1xf64>, tensor<f64>, tensor<i32>, tensor<f64>
      return %p1, %m1, %v1 : tensor<1xf64>, tensor<1xf64>, tensor<1xf64>
    })mlir");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto r = reference::evaluate(fn,
                               {Tensor({1}, 1.0), Tensor({1}, 0.5), Tensor({1}, 0.0),
                                Tensor({1}, 0.0), Tensor({}, 0.1), Tensor({}, 0.0),
                                Tensor({}, 2.0)},
                               Precision::F64);
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostics;
  EXPECT_NEAR((*r)[0].data[0], 0.89, 1e-15);
  EXPECT_NEAR((*r)[1].data[0], 0.1, 1e-15);
  EXPECT_NEAR((*r)[2].data[0], 0.05, 1e-15);
}

// Verify the global norm over several tensors: ||(3, 4)|| = 5.
TEST_F(InterpreterTest, GlobalNormOfSeveralTensors) {
  Tensor n = run(R"mlir(
    func.func @f(%a: tensor<1xf64>, %b: tensor<1x1xf64>) -> tensor<f64> {
      %n = gpt.global_norm %a, %b : (tensor<1xf64>, tensor<1x1xf64>) -> tensor<f64>
      return %n : tensor<f64>
    })mlir",
                 {Tensor({1}, {3.0}), Tensor({1, 1}, {4.0})});
  EXPECT_EQ(n.data[0], 5.0);
}

// Verify that embed_grad scatter-adds repeated tokens and sums positions
// over the batch.
TEST_F(InterpreterTest, EmbedGradScatterAdds) {
  module = parse(R"mlir(
    func.func @f(%dy: tensor<2x2x1xf64>, %ids: tensor<2x2xi32>) -> (tensor<3x1xf64>, tensor<4x1xf64>) {
      %dwte, %dwpe = gpt.embed_grad %dy, %ids {vocab_rows = 3 : i64, position_rows = 4 : i64}
          : (tensor<2x2x1xf64>, tensor<2x2xi32>) -> (tensor<3x1xf64>, tensor<4x1xf64>)
      return %dwte, %dwpe : tensor<3x1xf64>, tensor<4x1xf64>
    })mlir");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto r = reference::evaluate(fn, {Tensor({2, 2, 1}, {1, 2, 3, 4}), Tensor({2, 2}, {2, 0, 2, 2})},
                               Precision::F64);
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostics;
  expectNear((*r)[0], {2, 0, 8}, 0);    // token 2 at three places: 1 + 3 + 4
  expectNear((*r)[1], {4, 6, 0, 0}, 0); // positions 0 and 1 over both rows
}

// Verify that gpt.random_normal is a pure function of (seed, stream, index)
// with unit variance.
TEST_F(InterpreterTest, RandomNormalIsCounterBased) {
  EXPECT_EQ(reference::counterNormal(1, 2, 3), reference::counterNormal(1, 2, 3));
  EXPECT_NE(reference::counterNormal(1, 2, 3), reference::counterNormal(1, 3, 3));
  EXPECT_NE(reference::counterNormal(1, 2, 3), reference::counterNormal(2, 2, 3));
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double z = reference::counterNormal(5, 0, i);
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.03);
  Tensor t = run(R"mlir(
    func.func @f(%seed: tensor<i32>) -> tensor<4xf64> {
      %r = gpt.random_normal %seed {stream = 9 : i64, std = 2.0 : f64} : (tensor<i32>) -> tensor<4xf64>
      return %r : tensor<4xf64>
    })mlir",
                 {Tensor({}, 5.0)});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(t.data[i], 2.0 * reference::counterNormal(5, 9, i));
}

} // namespace
