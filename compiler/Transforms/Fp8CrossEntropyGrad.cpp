//===- Fp8CrossEntropyGrad.cpp - the logits' gradient written as FP8 -----===//
//
/// With an FP8 LM head the logits' gradient is written in bf16, read again
/// for its scale and cast into two e5m2 layouts. Its magnitude is bounded
/// before it exists (|dloss| / P), so its scale is known up front: the
/// loss kernel can write the codes themselves (gpt.fp8_cross_entropy_grad)
/// and one byte transpose (gpt.fp8_transpose) gives the other layout.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace gptc {
#define GEN_PASS_DEF_FP8CROSSENTROPYGRADPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// gpt.fp8_cast_transpose e5m2 of a gpt.cross_entropy_grad, scaled by the
/// gradient's own gpt.fp8_scale, where nothing else reads the gradient or
/// the scale -> gpt.fp8_cross_entropy_grad at the gradient + gpt.fp8_transpose.
struct WriteCrossEntropyGradAsFp8 : OpRewritePattern<Fp8CastTransposeOp> {
  WriteCrossEntropyGradAsFp8(MLIRContext *ctx, llvm::Statistic &rewritten)
      : OpRewritePattern(ctx), rewritten(rewritten) {}

  LogicalResult matchAndRewrite(Fp8CastTransposeOp cast, PatternRewriter &rewriter) const override {
    if (cast.getFormat() != Fp8Format::E5M2 || cast.getHistory() || cast.getGelu())
      return rewriter.notifyMatchFailure(cast, "not a plain e5m2 cast");
    // Of the gradient as it is: FP8 codes have no gpt.reshape.
    auto grad = cast.getInput().getDefiningOp<CrossEntropyGradOp>();
    if (!grad)
      return rewriter.notifyMatchFailure(cast, "not the logits' gradient");
    auto scale = cast.getScale().getDefiningOp<Fp8ScaleOp>();
    if (!scale || scale.getFormat() != Fp8Format::E5M2 || scale.getHistory() ||
        scale.getGelu() || gptc::reshapeSource(scale.getInput()) != grad.getResult() ||
        !scale.getScale().hasOneUse())
      return rewriter.notifyMatchFailure(cast, "not scaled by the gradient's own amax");
    SmallVector<Operation *> views;
    for (OpOperand *use : gptc::usesThroughReshapes(grad.getResult(), views))
      if (use->getOwner() != cast && use->getOwner() != scale)
        return rewriter.notifyMatchFailure(cast, "the bf16 gradient has other readers");

    // At the gradient: the loss kernel that reads the logits writes it.
    rewriter.setInsertionPoint(grad);
    auto codes = Fp8CrossEntropyGradOp::create(rewriter, grad.getLoc(), grad.getGrad(),
                                               grad.getLogits(), grad.getTargets(),
                                               grad.getVocabSizeAttr());
    auto transposed = Fp8TransposeOp::create(rewriter, grad.getLoc(), codes.getResult());
    rewriter.replaceAllUsesWith(scale.getInverse(), codes.getInverse());
    rewriter.replaceOp(cast, ValueRange{codes.getResult(), transposed.getResult()});
    rewriter.eraseOp(scale);
    for (Operation *view : llvm::reverse(views))
      rewriter.eraseOp(view);
    rewriter.eraseOp(grad);
    ++rewritten;
    return success();
  }

  llvm::Statistic &rewritten;
};

struct Fp8CrossEntropyGradPass
    : public gptc::impl::Fp8CrossEntropyGradPassBase<Fp8CrossEntropyGradPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<WriteCrossEntropyGradAsFp8>(&getContext(), numRewritten);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
