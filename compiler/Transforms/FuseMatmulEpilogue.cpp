//===- FuseMatmulEpilogue.cpp - GELU and bias gradients into GEMMs --------===//
//
/// Five rewrite patterns (see Passes.td), applied greedily with folding
/// off so that nothing but the matched ops changes, in two rounds (the
/// GELU folds first, so that the bias-gradient folds see their results).
/// The first four make GEMM fusions (gpt.fusion holding the GEMM, on its
/// operands widened to f32, and the epilogue on its f32 accumulator):
///  - FoldGelu:         gelu(linear)                   -> GELU
///  - FoldGeluGrad:     gelu_grad(matmul, pre)         -> GELU gradient
///  - FoldGeluBiasGrad: reduce(GELU gradient fusion)   -> and its column sum
///  - FoldBiasGrad:     reduce(dY) + dW matmul         -> lhs column sum
///  - FoldScaledBias:   bias_add(scaled_matmul)        -> gpt.scaled_matmul bias
/// Each fusion sits where its first replaced op was, or later only where
/// every replaced value's readers still follow it.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
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

/// A GEMM fusion at the rewriter's insertion point: `gemm` (a gpt.linear
/// or gpt.matmul, whose lhs, rhs and bias are the leading `inputs`) rebuilt
/// in the body on the inputs widened to f32, so that the values `epilogue`
/// computes from its result read the GEMM's accumulator; each is yielded
/// narrowed to its result's element type.
FusionOp buildGemmFusion(
    PatternRewriter &rewriter, Location loc, TypeRange results, ValueRange inputs,
    Operation *gemm,
    llvm::function_ref<SmallVector<Value>(OpBuilder &, Value acc, ValueRange wide)> epilogue) {
  OpBuilder::InsertionGuard guard(rewriter);
  FusionOp fusion = gptc::createFusion(rewriter, loc, results, inputs);
  SmallVector<Value> wide;
  for (Value arg : fusion.getBody().getArguments())
    wide.push_back(getElementTypeOrSelf(arg).getIntOrFloatBitWidth() < 32
                       ? gptc::castElements(rewriter, loc, arg, rewriter.getF32Type())
                       : arg);
  Value acc;
  if (auto linear = llvm::dyn_cast<LinearOp>(gemm)) {
    acc = LinearOp::create(rewriter, loc, wide[0], wide[1], linear.getBias() ? wide[2] : Value());
  } else {
    auto matmul = llvm::cast<MatmulOp>(gemm);
    acc = MatmulOp::create(rewriter, loc, wide[0], wide[1], matmul.getTransposeLhs(),
                           matmul.getTransposeRhs());
  }
  SmallVector<Value> values;
  for (auto [v, type] : llvm::zip_equal(epilogue(rewriter, acc, wide), results))
    values.push_back(gptc::castElements(rewriter, loc, v, getElementTypeOrSelf(type)));
  YieldOp::create(rewriter, loc, values);
  return fusion;
}

/// Whether `op` is in a gpt.fusion's body, which the patterns leave as it
/// is: a GEMM fusion's own GELU of its GEMM would match again.
bool inFusion(Operation *op) { return llvm::isa<FusionOp>(op->getParentOp()); }

/// The column sums of `v`, a reduce over all but its last dimension.
Value columnSums(OpBuilder &b, Location loc, Value v) {
  auto dims = llvm::to_vector(llvm::seq<int64_t>(0, rtt(v).getRank() - 1));
  return ReduceOp::create(b, loc, ReduceKind::Sum, v, dims);
}

/// gelu(linear(x, w, b)) -> a GEMM fusion yielding gelu(acc) and acc (the
/// pre-activation), at the linear, for the first GELU of the linear in
/// block order. A later GELU of the same pre-activation is a
/// rematerialized clone in the backward: it stays, since reading the
/// fusion's GELU result would keep that alive into the backward, which is
/// what gpt-rematerialize chose not to do.
struct FoldGelu : OpRewritePattern<GeluOp> {
  FoldGelu(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<GeluOp>(ctx), count(count) {}

  LogicalResult matchAndRewrite(GeluOp gelu, PatternRewriter &rewriter) const override {
    if (inFusion(gelu))
      return rewriter.notifyMatchFailure(gelu, "in a gpt.fusion");
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
    FusionOp fused = buildGemmFusion(
        rewriter, linear.getLoc(), TypeRange{gelu.getType(), linear.getType()},
        linear->getOperands(), linear,
        [&](OpBuilder &b, Value acc, ValueRange) -> SmallVector<Value> {
          return {GeluOp::create(b, gelu.getLoc(), acc), acc};
        });
    rewriter.replaceOp(gelu, fused.getResult(0));
    rewriter.replaceOp(linear, fused.getResult(1));
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// gelu_grad(reshape?(matmul(a, b)), pre) -> reshape?(a GEMM fusion of a, b
/// and reshape?(pre) yielding gelu_grad(acc, pre)), at the gelu_grad. The
/// product must have no other reader: the fusion never stores it.
struct FoldGeluGrad : OpRewritePattern<GeluGradOp> {
  FoldGeluGrad(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<GeluGradOp>(ctx), count(count) {}

  LogicalResult matchAndRewrite(GeluGradOp grad, PatternRewriter &rewriter) const override {
    if (inFusion(grad))
      return rewriter.notifyMatchFailure(grad, "in a gpt.fusion");
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
    FusionOp fused = buildGemmFusion(
        rewriter, grad.getLoc(), TypeRange{productType},
        ValueRange{matmul.getLhs(), matmul.getRhs(), pre}, matmul,
        [&](OpBuilder &b, Value acc, ValueRange wide) -> SmallVector<Value> {
          return {GeluGradOp::create(b, grad.getLoc(), acc, wide[2])};
        });
    rewriter.replaceOp(grad, reshapeTo(rewriter, grad.getLoc(), fused.getResult(0),
                                       rtt(grad.getResult())));
    if (view)
      rewriter.eraseOp(view);
    rewriter.eraseOp(matmul);
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// reduce sum (reshape?(GELU-gradient GEMM fusion)) dims [all but last] ->
/// that fusion with the column sums of the f32 gradient, at the fusion. A
/// reshape keeping the last dimension keeps the columns, so the sums are
/// the same.
struct FoldGeluBiasGrad : OpRewritePattern<ReduceOp> {
  FoldGeluBiasGrad(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern<ReduceOp>(ctx, /*benefit=*/2), count(count) {}

  LogicalResult matchAndRewrite(ReduceOp reduce, PatternRewriter &rewriter) const override {
    if (inFusion(reduce) || !sumsColumns(reduce))
      return rewriter.notifyMatchFailure(reduce, "not a column sum outside a gpt.fusion");
    Value dy = reduce.getInput();
    if (auto view = dy.getDefiningOp<ReshapeOp>())
      dy = view.getInput();
    auto fusion = dy.getDefiningOp<FusionOp>();
    std::optional<GemmFusion> gemm = fusion ? matchGemmFusion(fusion) : std::nullopt;
    if (!gemm || gemm->epilogue != GemmFusion::Epilogue::GeluGrad)
      return rewriter.notifyMatchFailure(reduce, "input is not a GELU gradient's GEMM fusion");
    if (fusion->getBlock() != reduce->getBlock())
      return rewriter.notifyMatchFailure(reduce, "the GEMM fusion is in another block");
    RankedTensorType product = rtt(gemm->result);
    if (rtt(reduce.getInput()).getShape().back() != product.getShape().back() ||
        rtt(reduce.getResult()).getElementType() != product.getElementType())
      return rewriter.notifyMatchFailure(reduce, "not the product's columns in its type");
    rewriter.setInsertionPoint(fusion);
    FusionOp fused = buildGemmFusion(
        rewriter, fusion.getLoc(), TypeRange{product, reduce.getType()},
        ValueRange{gemm->lhs, gemm->rhs, gemm->pre}, gemm->gemm,
        [&](OpBuilder &b, Value acc, ValueRange wide) -> SmallVector<Value> {
          Value grad = GeluGradOp::create(b, fusion.getLoc(), acc, wide[2]);
          return {grad, columnSums(b, reduce.getLoc(), grad)};
        });
    rewriter.replaceOp(fusion, fused.getResult(0));
    rewriter.replaceOp(reduce, fused.getResult(1));
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

/// reduce sum dY dims [0 .. r-2] with a weight-gradient matmul of the same
/// dY, `matmul dY2d, X {transpose_lhs}` -> a GEMM fusion of dY2d and X
/// yielding the product and dY2d's column sums, at whichever of the two
/// comes first.
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
    if (inFusion(reduce) || !sumsColumns(reduce))
      return rewriter.notifyMatchFailure(reduce, "not a column sum outside a gpt.fusion");
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
    FusionOp fused = buildGemmFusion(
        rewriter, at->getLoc(), TypeRange{matmul.getType(), reduce.getType()},
        ValueRange{lhs, matmul.getRhs()},
        matmul, [&](OpBuilder &b, Value acc, ValueRange wide) -> SmallVector<Value> {
          return {acc, columnSums(b, reduce.getLoc(), wide[0])};
        });
    rewriter.replaceOp(matmul, fused.getResult(0));
    rewriter.replaceOp(reduce, fused.getResult(1));
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
    if (inFusion(add))
      return rewriter.notifyMatchFailure(add, "in a gpt.fusion");
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
