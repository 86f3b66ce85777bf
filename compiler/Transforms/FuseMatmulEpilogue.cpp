//===- FuseMatmulEpilogue.cpp - GELU and bias gradients into GEMMs --------===//
//
/// Five rewrite patterns (see Passes.td), applied greedily with folding
/// off so that nothing but the matched ops changes, in two rounds (the
/// GELU folds first, so that the bias-gradient folds see their results):
///  - FoldGelu:         gelu(linear)              -> gpt.linear_gelu
///  - FoldGeluGrad:     gelu_grad(matmul, pre)    -> gpt.matmul_gelu_grad
///  - FoldGeluBiasGrad: reduce(matmul_gelu_grad)  -> gpt.matmul_gelu_bias_grad
///  - FoldBiasGrad:     reduce(dY) + dW matmul    -> gpt.matmul_bias_grad
///  - FoldScaledBias:   bias_add(scaled_matmul)   -> gpt.scaled_matmul bias
/// Each fused op sits where its first replaced op was, or later only where
/// every replaced value's readers still follow it.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUEPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

RankedTensorType rtt(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// `v` reshaped to `type` at the rewriter's insertion point, or `v` itself.
Value reshapeTo(PatternRewriter &rewriter, Location loc, Value v, RankedTensorType type) {
  if (v.getType() == type)
    return v;
  return ReshapeOp::create(rewriter, loc, type, v);
}

/// cuBLASLt's aux matrix (the pre-activation) needs a leading dimension,
/// here the row length, divisible by 8.
bool auxRowsAligned(Value v) { return rtt(v).getShape().back() % 8 == 0; }

/// gelu(linear(x, w, b)) -> gpt.linear_gelu, at the linear, for the first
/// GELU of the linear in block order. A later GELU of the same
/// pre-activation is a rematerialized clone in the backward: it stays,
/// since reading the fused op's GELU result would keep that alive into the
/// backward, which is what gpt-rematerialize chose not to do.
struct FoldGelu : OpRewritePattern<GeluOp> {
  FoldGelu(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<GeluOp>(ctx), count(count) {}

  LogicalResult matchAndRewrite(GeluOp gelu, PatternRewriter &rewriter) const override {
    Value x = gelu.getInput();
    auto linear = x.getDefiningOp<LinearOp>();
    if (!linear)
      return rewriter.notifyMatchFailure(gelu, "input is not a gpt.linear");
    if (linear->getBlock() != gelu->getBlock())
      return rewriter.notifyMatchFailure(gelu, "gpt.linear in another block");
    if (!auxRowsAligned(x))
      return rewriter.notifyMatchFailure(gelu, "rows not a multiple of 8 elements");
    for (Operation *user : x.getUsers())
      if (user != gelu && llvm::isa<GeluOp>(user) && user->isBeforeInBlock(gelu))
        return rewriter.notifyMatchFailure(gelu, "a GELU of the linear comes earlier");
    rewriter.setInsertionPoint(linear);
    auto fused = LinearGeluOp::create(rewriter, linear.getLoc(), linear.getInput(),
                                      linear.getWeight(), linear.getBias());
    rewriter.replaceOp(gelu, fused.getResult());
    rewriter.replaceOp(linear, fused.getPreActivation());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// gelu_grad(reshape?(matmul(a, b)), pre) -> reshape?(matmul_gelu_grad(a, b,
/// reshape?(pre))), at the gelu_grad. The product must have no other
/// reader: the fused op never materialises it.
struct FoldGeluGrad : OpRewritePattern<GeluGradOp> {
  FoldGeluGrad(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<GeluGradOp>(ctx), count(count) {}

  LogicalResult matchAndRewrite(GeluGradOp grad, PatternRewriter &rewriter) const override {
    Value product = grad.getGrad();
    auto view = product.getDefiningOp<ReshapeOp>();
    if (view) {
      if (!view->hasOneUse())
        return rewriter.notifyMatchFailure(grad, "the reshaped product has other readers");
      product = view.getInput();
    }
    auto matmul = product.getDefiningOp<MatmulOp>();
    if (!matmul)
      return rewriter.notifyMatchFailure(grad, "gradient is not a gpt.matmul's product");
    if (!matmul->hasOneUse())
      return rewriter.notifyMatchFailure(grad, "the product has other readers");
    if (rtt(matmul.getLhs()).getRank() != 2 || rtt(matmul.getRhs()).getRank() != 2)
      return rewriter.notifyMatchFailure(grad, "batched matmul: the epilogue needs one GEMM");
    if (matmul->getBlock() != grad->getBlock())
      return rewriter.notifyMatchFailure(grad, "gpt.matmul in another block");
    if (!auxRowsAligned(product))
      return rewriter.notifyMatchFailure(grad, "rows not a multiple of 8 elements");
    RankedTensorType productType = rtt(matmul.getResult());
    rewriter.setInsertionPoint(grad);
    Value pre = reshapeTo(rewriter, grad.getLoc(), grad.getInput(), productType);
    auto fused = MatmulGeluGradOp::create(rewriter, grad.getLoc(), matmul.getLhs(),
                                          matmul.getRhs(), pre, matmul.getTransposeLhs(),
                                          matmul.getTransposeRhs());
    rewriter.replaceOp(grad, reshapeTo(rewriter, grad.getLoc(), fused, rtt(grad.getResult())));
    if (view)
      rewriter.eraseOp(view);
    rewriter.eraseOp(matmul);
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// reduce sum (reshape?(matmul_gelu_grad)) dims [all but last] ->
/// matmul_gelu_bias_grad, at the matmul_gelu_grad. A reshape keeping the
/// last dimension keeps the columns, so the sums are the same.
struct FoldGeluBiasGrad : OpRewritePattern<ReduceOp> {
  FoldGeluBiasGrad(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<ReduceOp>(ctx, /*benefit=*/2), count(count) {}

  LogicalResult matchAndRewrite(ReduceOp reduce, PatternRewriter &rewriter) const override {
    if (!gptc::sumsColumns(reduce))
      return rewriter.notifyMatchFailure(reduce, "not a sum over all but the last dimension");
    Value dy = reduce.getInput();
    if (auto view = dy.getDefiningOp<ReshapeOp>())
      dy = view.getInput();
    auto grad = dy.getDefiningOp<MatmulGeluGradOp>();
    if (!grad)
      return rewriter.notifyMatchFailure(reduce, "input is not a gpt.matmul_gelu_grad");
    if (grad->getBlock() != reduce->getBlock())
      return rewriter.notifyMatchFailure(reduce, "gpt.matmul_gelu_grad in another block");
    RankedTensorType product = rtt(grad.getResult());
    if (rtt(reduce.getInput()).getShape().back() != product.getDimSize(1) ||
        rtt(reduce.getResult()).getElementType() != product.getElementType())
      return rewriter.notifyMatchFailure(reduce, "not the product's columns in its type");
    rewriter.setInsertionPoint(grad);
    auto fused = MatmulGeluBiasGradOp::create(rewriter, grad.getLoc(), grad.getLhs(),
                                              grad.getRhs(), grad.getPre(),
                                              grad.getTransposeLhs(), grad.getTransposeRhs());
    rewriter.replaceOp(grad, fused.getResult());
    rewriter.replaceOp(reduce, fused.getBiasGrad());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// reduce sum dY dims [0 .. r-2] with a weight-gradient matmul of the same
/// dY, `matmul dY2d, X {transpose_lhs}` -> matmul_bias_grad(dY2d, X), at
/// whichever of the two comes first.
struct FoldBiasGrad : OpRewritePattern<ReduceOp> {
  FoldBiasGrad(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<ReduceOp>(ctx), count(count) {}

  /// The dW matmul reading `dy` flattened to rank 2 as its transposed lhs.
  static MatmulOp findWeightGrad(Value dy, Type eltType) {
    int64_t cols = rtt(dy).getShape().back();
    auto isWeightGrad = [&](Operation *user, Value lhs) -> MatmulOp {
      auto mm = llvm::dyn_cast<MatmulOp>(user);
      if (!mm || mm.getLhs() != lhs || !mm.getTransposeLhs() || mm.getTransposeRhs() ||
          rtt(lhs).getRank() != 2 || rtt(lhs).getDimSize(1) != cols ||
          rtt(mm.getRhs()).getRank() != 2 || rtt(mm.getResult()).getElementType() != eltType)
        return {};
      return mm;
    };
    for (Operation *user : dy.getUsers()) {
      if (MatmulOp mm = isWeightGrad(user, dy))
        return mm;
      if (auto view = llvm::dyn_cast<ReshapeOp>(user))
        for (Operation *viewUser : view.getResult().getUsers())
          if (MatmulOp mm = isWeightGrad(viewUser, view.getResult()))
            return mm;
    }
    return {};
  }

  LogicalResult matchAndRewrite(ReduceOp reduce, PatternRewriter &rewriter) const override {
    Value dy = reduce.getInput();
    if (!gptc::sumsColumns(reduce))
      return rewriter.notifyMatchFailure(reduce, "not a sum over all but the last dimension");
    Type eltType = rtt(reduce.getResult()).getElementType();
    MatmulOp matmul = findWeightGrad(dy, eltType);
    if (!matmul || matmul->getBlock() != reduce->getBlock())
      return rewriter.notifyMatchFailure(reduce, "no weight-gradient matmul of the same input");
    // The earlier op: the other's readers all follow it. Before the reduce,
    // the matmul's operands may still be undefined.
    bool atMatmul = matmul->isBeforeInBlock(reduce);
    Operation *at = atMatmul ? matmul.getOperation() : reduce.getOperation();
    if (!atMatmul && !gptc::availableBefore(matmul.getRhs(), reduce))
      return rewriter.notifyMatchFailure(reduce, "the matmul's rhs is defined after the reduce");
    rewriter.setInsertionPoint(at);
    Value lhs = reshapeTo(rewriter, at->getLoc(), dy, rtt(matmul.getLhs()));
    auto fused = MatmulBiasGradOp::create(rewriter, at->getLoc(), lhs, matmul.getRhs());
    rewriter.replaceOp(matmul, fused.getWeightGrad());
    rewriter.replaceOp(reduce, fused.getBiasGrad());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// bias_add(scaled_matmul(...), b) -> scaled_matmul(..., bias b), at the
/// bias_add (the product's only reader). The result must be bf16: codegen's
/// FP8 GEMMs give bf16 or f32, and cuBLASLt adds no bias into an f32 D.
struct FoldScaledBias : OpRewritePattern<BiasAddOp> {
  FoldScaledBias(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<BiasAddOp>(ctx), count(count) {}

  LogicalResult matchAndRewrite(BiasAddOp add, PatternRewriter &rewriter) const override {
    auto mm = add.getInput().getDefiningOp<ScaledMatmulOp>();
    if (!mm || mm.getBias() || mm.getAccumulate())
      return rewriter.notifyMatchFailure(
          add, "input is not a scaled_matmul without a bias or an accumulator");
    if (!mm->hasOneUse() || mm->getBlock() != add->getBlock())
      return rewriter.notifyMatchFailure(add, "the product has other readers");
    Type elt = rtt(add.getResult()).getElementType();
    if (!elt.isBF16())
      return rewriter.notifyMatchFailure(add, "not a bf16 product");
    rewriter.setInsertionPoint(add);
    auto fused = ScaledMatmulOp::create(
        rewriter, mm.getLoc(), add.getType(), mm.getLhs(), mm.getLhsScale(), mm.getRhs(),
        mm.getRhsScale(), add.getBias(), /*accumulate=*/Value(), mm.getTransposeLhs(),
        mm.getTransposeRhs(), mm.getFastAccum());
    rewriter.replaceOp(add, fused.getResult());
    rewriter.eraseOp(mm);
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

struct FuseMatmulEpiloguePass
    : gptc::impl::FuseMatmulEpiloguePassBase<FuseMatmulEpiloguePass> {
  using FuseMatmulEpiloguePassBase::FuseMatmulEpiloguePassBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet geluPatterns(ctx), biasPatterns(ctx);
    if (gelu)
      geluPatterns.add<FoldGelu>(ctx, numGelu);
    if (geluGrad)
      geluPatterns.add<FoldGeluGrad>(ctx, numGeluGrad);
    if (scaledBias)
      geluPatterns.add<FoldScaledBias>(ctx, numScaledBias);
    if (geluBiasGrad)
      biasPatterns.add<FoldGeluBiasGrad>(ctx, numGeluBiasGrad);
    if (biasGrad)
      biasPatterns.add<FoldBiasGrad>(ctx, numBiasGrad);
    // Only the patterns: no folding or constant CSE, which would move ops
    // that later passes (and the IR dumps) expect where they were.
    GreedyRewriteConfig config;
    config.enableFolding(false).enableConstantCSE(false).setRegionSimplificationLevel(
        GreedySimplifyRegionLevel::Disabled);
    for (RewritePatternSet *patterns : {&geluPatterns, &biasPatterns})
      if (failed(applyPatternsGreedily(getOperation(), std::move(*patterns), config)))
        return signalPassFailure();
  }
};

} // namespace
