//===- MixedPrecisionTest.cpp - gpt-mixed-precision on the interpreter ---===//
//
// The bf16 policy on `tiny`: which ops and values end up in which type
// through the whole train step, and how far its gradients and losses are
// from the fp32 model, both run by the fp64 reference interpreter (which
// rounds every bf16 value to bf16 after the op that makes it).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "compiler/Transforms/Passes.h"

#include <cmath>

using namespace gptc;
using namespace gptc::testing;
using reference::Precision;
using reference::Tensor;

namespace {

bool isF32(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return !t || !llvm::isa<mlir::FloatType>(t.getElementType()) || t.getElementType().isF32();
}

bool isBf16(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getElementType().isBF16();
}

class MixedPrecisionTest : public GPT2FixtureTest {
protected:
  bool compileTiny(const std::string &precision, Phase phase) {
    return compile("tiny", phase, [&](CompileOptions &o) {
      o.precision = *parsePrecision(precision);
      o.lr = 1e-2;
    });
  }
};

// Verify that under bf16 every GEMM of the forward and backward is bf16,
// while parameters, their gradients, the optimizer state and every
// statistics op (layernorm, norms, AdamW) stay fp32; the cross-entropy
// reads bf16 logits and gives an fp32 loss.
TEST_F(MixedPrecisionTest, MastersGradientsAndStatisticsStayFp32) {
  ASSERT_TRUE(compileTiny("bf16", Phase::TrainStep));
  mlir::func::FuncOp grad = function("forward_grad");
  for (auto [i, t] : llvm::enumerate(grad.getResultTypes()))
    EXPECT_TRUE(llvm::cast<mlir::ShapedType>(t).getElementType().isF32()) << "result " << i;
  int gemms = 0;
  grad.walk([&](mlir::Operation *op) {
    if (llvm::isa<mlir::gpt::LinearOp, mlir::gpt::MatmulOp>(op)) {
      ++gemms;
      EXPECT_TRUE(isBf16(op->getResult(0))) << "GEMM " << gemms << " is not bf16";
    }
    if (llvm::isa<mlir::gpt::LayerNormOp, mlir::gpt::LayerNormGradOp, mlir::gpt::SoftmaxOp>(op))
      for (mlir::Value v : op->getOperands())
        EXPECT_TRUE(isF32(v)) << op->getName().getStringRef().str() << " has a non-fp32 operand";
    // The loss reads the LM head's bf16 logits; the loss itself is fp32.
    if (auto ce = llvm::dyn_cast<mlir::gpt::CrossEntropyOp>(op)) {
      EXPECT_TRUE(isBf16(ce.getLogits()));
      EXPECT_TRUE(isF32(ce.getResult()));
    }
    if (auto ceg = llvm::dyn_cast<mlir::gpt::CrossEntropyGradOp>(op))
      EXPECT_TRUE(isBf16(ceg.getResult()));
  });
  // tiny: 2 layers x 4 linears x 3 GEMMs (forward, dX, dW) + the LM head's 3.
  EXPECT_EQ(gemms, 2 * 4 * 3 + 3);
  mlir::func::FuncOp step = function("train_step");
  for (mlir::BlockArgument arg : step.getArguments())
    EXPECT_TRUE(isF32(arg)) << "train_step argument " << arg.getArgNumber();
  for (mlir::Type t : step.getResultTypes())
    EXPECT_TRUE(llvm::cast<mlir::ShapedType>(t).getElementType().isF32());
  step.walk([&](mlir::Operation *op) {
    if (llvm::isa<mlir::gpt::AdamWOp, mlir::gpt::GlobalNormOp>(op))
      for (mlir::Value v : op->getOperands())
        EXPECT_TRUE(isF32(v)) << op->getName().getStringRef().str() << " has a non-fp32 operand";
  });
}

// Verify the bf16 gradients on the PyTorch fixture's parameters against the
// fp32 model's, both in fp64 arithmetic: each parameter's gradient within
// 3e-2 relative (L2), and the loss within 1e-3. Measured: gradients at
// most 1.2e-2 (h.1.ln_1.weight; bf16 keeps 8 mantissa bits, 2^-9 = 2e-3
// per rounding, a few roundings deep), the loss 2.6e-4. Each gradient also differs from the
// fp32 one, so the rounding is really there.
TEST_F(MixedPrecisionTest, Bf16GradientsMatchFp32WithinBf16Rounding) {
  ASSERT_TRUE(compileTiny("fp32", Phase::Autodiff));
  std::vector<Tensor> fp32 = evaluate("forward_grad", fixtureArgs(function("forward_grad"), fixture));
  ASSERT_FALSE(fp32.empty());
  ASSERT_TRUE(compileTiny("bf16", Phase::Autodiff));
  mlir::func::FuncOp grad = function("forward_grad");
  std::vector<Tensor> bf16 = evaluate("forward_grad", fixtureArgs(grad, fixture));
  ASSERT_EQ(bf16.size(), fp32.size());
  EXPECT_NEAR(bf16[0].data[0], fp32[0].data[0], 1e-3 * fp32[0].data[0]);
  for (size_t i = 1; i < fp32.size(); ++i) {
    auto name = grad.getResultAttrOfType<mlir::StringAttr>(i, kGradOfAttrName);
    double err = relativeError(bf16[i], fp32[i]);
    EXPECT_LT(err, 3e-2) << "gradient of " << name.str();
    EXPECT_GT(err, 0.0) << "gradient of " << name.str() << " is exactly the fp32 one";
  }
}

// Verify that ten AdamW steps (lr 1e-2) of the bf16 train step track the
// fp32 one, both in fp64 arithmetic: every loss within 5e-3 relative
// (measured: at most 1.4e-3, growing with the steps), and the loss goes down.
TEST_F(MixedPrecisionTest, Bf16TrainingTracksFp32) {
  auto train = [&](const std::string &precision, std::vector<double> &losses) {
    ASSERT_TRUE(compileTiny(precision, Phase::TrainStep));
    mlir::func::FuncOp step = function("train_step");
    std::vector<Tensor> state;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name = step.getArgAttrOfType<mlir::StringAttr>(i, mlir::gpt::kParamAttrName))
        state.push_back(fixture.params.at(name.str()));
    size_t n = state.size();
    for (int copy = 0; copy < 2; ++copy)
      for (size_t i = 0; i < n; ++i)
        state.emplace_back(state[i].shape, 0.0);
    for (int64_t s = 0; s < 10; ++s) {
      std::vector<Tensor> args = state;
      args.emplace_back(std::vector<int64_t>{1, 2, 8}, fixture.tokens);
      args.emplace_back(std::vector<int64_t>{1, 2, 8}, fixture.targets);
      args.emplace_back(std::vector<int64_t>{}, static_cast<double>(s));
      args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale
      std::vector<Tensor> out = evaluate("train_step", args, Precision::F64);
      ASSERT_FALSE(out.empty());
      losses.push_back(out[output("train_step", "loss")].data[0]);
      out.resize(3 * n);
      state = std::move(out);
    }
  };
  std::vector<double> fp32, bf16;
  ASSERT_NO_FATAL_FAILURE(train("fp32", fp32));
  ASSERT_NO_FATAL_FAILURE(train("bf16", bf16));
  for (size_t i = 0; i < fp32.size(); ++i)
    EXPECT_NEAR(bf16[i], fp32[i], 5e-3 * fp32[i]) << "step " << i;
  EXPECT_LT(bf16.back(), bf16.front() - 0.1);
}

} // namespace
