//===- LowerFp8.cpp - gpt.fp8_matmul -> quantizations + scaled GEMM -------===//
//
/// Each gpt.fp8_matmul becomes, per operand, a gpt.fp8_scale and a
/// gpt.fp8_quantize in the layout of the TN GEMM (lhs untransposed, rhs
/// transposed), and one gpt.scaled_matmul: a pattern per op; products it
/// cannot lower (batched ones) are reported after the rewrite. Then each
/// operand's two layouts become one gpt.fp8_cast_transpose, and a GELU
/// only FP8 ops read moves into them.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"

namespace gptc {
#define GEN_PASS_DEF_LOWERFP8PASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct LowerFp8Matmul : OpRewritePattern<Fp8MatmulOp> {
  LowerFp8Matmul(MLIRContext *ctx, llvm::Statistic &products, llvm::Statistic &transposed)
      : OpRewritePattern(ctx), products(products), transposed(transposed) {}

  LogicalResult matchAndRewrite(Fp8MatmulOp op, PatternRewriter &rewriter) const override {
    auto rank = [](Value v) { return llvm::cast<RankedTensorType>(v.getType()).getRank(); };
    // A transposed operand is copied as its rank-2 transpose.
    if (rank(op.getRhs()) != 2 || (op.getTransposeLhs() && rank(op.getLhs()) != 2))
      return rewriter.notifyMatchFailure(op, "batched product");
    // The scale reads values only: take it of a reshape's source, so that
    // CSE gives X and the flattened X of the weight gradient one scale.
    auto quantize = [&](Fp8Format format, Value x, bool transpose) {
      auto scale = Fp8ScaleOp::create(rewriter, op.getLoc(), format, gptc::reshapeSource(x),
                                      /*pre=*/Value(), /*history=*/Value());
      if (transpose)
        ++transposed;
      Value q = Fp8QuantizeOp::create(rewriter, op.getLoc(), format, x, scale.getScale(),
                                      /*history=*/Value(), transpose)
                    .getResult();
      return std::pair(q, scale.getInverse());
    };
    // TN: the lhs as (M, K), the rhs as (N, K).
    auto [lhs, lhsScale] = quantize(op.getLhsFormat(), op.getLhs(), op.getTransposeLhs());
    auto [rhs, rhsScale] = quantize(op.getRhsFormat(), op.getRhs(), !op.getTransposeRhs());
    bool forward = op.getLhsFormat() == Fp8Format::E4M3 && op.getRhsFormat() == Fp8Format::E4M3;
    rewriter.replaceOpWithNewOp<ScaledMatmulOp>(
        op, op.getType(), lhs, lhsScale, rhs, rhsScale, /*bias=*/Value(), /*accumulate=*/Value(),
        /*transpose_lhs=*/false, /*transpose_rhs=*/true, /*fast_accum=*/forward);
    ++products;
    return success();
  }

  llvm::Statistic &products, &transposed;
};

/// Replaces an operand's untransposed and transposed quantizations by one
/// gpt.fp8_cast_transpose at the earlier of the two, so that the tensor is
/// read once for both. The scale of the earlier one serves both: both are
/// the scale of the same values. Later quantizations of the operand in
/// either layout (a weight's, in each further micro-batch) read the pair's
/// codes too: the weight's bf16 copy is then read once a step, and what
/// stays live across micro-batches is its FP8 codes, half the bytes.
void pairLayouts(Block &block, llvm::Statistic &paired, llvm::Statistic &reused) {
  llvm::MapVector<std::pair<Value, unsigned>, SmallVector<Fp8QuantizeOp, 2>> groups;
  for (auto q : block.getOps<Fp8QuantizeOp>())
    groups[{gptc::reshapeSource(q.getInput()), static_cast<unsigned>(q.getFormat())}].push_back(q);
  for (auto &[key, ops] : groups) {
    Fp8QuantizeOp rows, cols;
    for (Fp8QuantizeOp q : ops) {
      if (!q.getTranspose() && !rows)
        rows = q;
      else if (q.getTranspose() && !cols)
        cols = q;
    }
    if (!rows || !cols)
      continue;
    // The transposed copy must be of the matrix the pair's rows flatten to.
    auto x = llvm::cast<RankedTensorType>(rows.getInput().getType());
    auto x2 = llvm::cast<RankedTensorType>(cols.getInput().getType());
    if (x.getRank() < 2 || x2.getShape().back() != x.getShape().back() ||
        x2.getNumElements() != x.getNumElements())
      continue;
    Fp8QuantizeOp first = rows->isBeforeInBlock(cols) ? rows : cols;
    OpBuilder b(first);
    auto pair = Fp8CastTransposeOp::create(b, first.getLoc(), rows.getFormat(), rows.getInput(),
                                           first.getScale(), /*history=*/Value(),
                                           /*gelu=*/false, /*rounded_to=*/TypeAttr());
    rows.getResult().replaceAllUsesWith(pair.getResult());
    cols.getResult().replaceAllUsesWith(pair.getTransposed());
    for (Fp8QuantizeOp q : ops) {
      if (q == rows || q == cols || !pair->isBeforeInBlock(q))
        continue;
      Value same = q.getTranspose() ? pair.getTransposed() : pair.getResult();
      // Its readers dequantize with q's scale: the same computation as the
      // pair's (before CSE each product has its own gpt.fp8_scale).
      auto mine = q.getScale().getDefiningOp<Fp8ScaleOp>(),
           theirs = pair.getScale().getDefiningOp<Fp8ScaleOp>();
      if (same.getType() != q.getResult().getType() || !mine || !theirs ||
          llvm::cast<OpResult>(q.getScale()).getResultNumber() !=
              llvm::cast<OpResult>(pair.getScale()).getResultNumber() ||
          !OperationEquivalence::isEquivalentTo(mine, theirs,
                                                OperationEquivalence::IgnoreLocations))
        continue;
      q.getResult().replaceAllUsesWith(same);
      q.erase();
      ++reused;
    }
    rows.erase();
    cols.erase();
    ++paired;
  }
}

/// A gpt.gelu read only by FP8 scales and quantizations (through
/// reshapes): they read its input with {gelu} instead, each through a
/// reshape of its own where the shapes differ; the GELU and the reshapes
/// are erased.
void foldGelus(Block &block, llvm::Statistic &folded) {
  for (GeluOp gelu : llvm::make_early_inc_range(block.getOps<GeluOp>())) {
    SmallVector<Operation *> views;
    SmallVector<OpOperand *> reads = gptc::usesThroughReshapes(gelu.getResult(), views);
    bool onlyFp8 = llvm::all_of(reads, [](OpOperand *use) {
      Operation *user = use->getOwner();
      return llvm::isa<Fp8ScaleOp, Fp8QuantizeOp, Fp8CastTransposeOp>(user) &&
             use->getOperandNumber() == 0 && !user->hasAttr("gelu");
    });
    if (!onlyFp8 || reads.empty())
      continue;
    Value pre = gelu.getInput();
    for (OpOperand *use : reads) {
      Operation *user = use->getOwner();
      Value input = pre;
      if (input.getType() != use->get().getType()) {
        OpBuilder b(user);
        input = ReshapeOp::create(b, user->getLoc(), use->get().getType(), pre);
      }
      use->set(input);
      user->setAttr("gelu", UnitAttr::get(user->getContext()));
    }
    for (Operation *view : llvm::reverse(views))
      view->erase();
    gelu.erase();
    ++folded;
  }
}

struct LowerFp8Pass : public gptc::impl::LowerFp8PassBase<LowerFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerFp8Matmul>(&getContext(), numProducts, numTransposed);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (pairLayoutsOption)
      getOperation().walk([&](func::FuncOp fn) {
        for (Block &block : fn.getBody())
          pairLayouts(block, numPaired, numReused);
      });
    if (foldGeluOption)
      getOperation().walk([&](func::FuncOp fn) {
        for (Block &block : fn.getBody())
          foldGelus(block, numGelus);
      });
    WalkResult left = getOperation().walk([](Fp8MatmulOp op) {
      op.emitError("gpt-lower-fp8: batched FP8 products have no GEMM: the rhs must have rank 2, "
                   "and a transposed lhs rank 2");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
