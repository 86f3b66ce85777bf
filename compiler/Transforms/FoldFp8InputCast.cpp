//===- FoldFp8InputCast.cpp - FP8 casts that read a cast's input ---------===//
//
/// A narrowing gpt.cast of a function argument (an f32 master weight) read
/// only by FP8 cast-transposes is folded into them: each reads the wide
/// tensor and rounds as the cast did (rounded_to), so the narrow copy is
/// never stored; see Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace gptc {
#define GEN_PASS_DEF_FOLDFP8INPUTCASTPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// gpt.cast wide -> narrow of a block argument whose every reader is a
/// plain gpt.fp8_cast_transpose's input -> those casts read the wide tensor
/// with rounded_to = narrow.
struct FoldCastIntoFp8CastTranspose : OpRewritePattern<CastOp> {
  FoldCastIntoFp8CastTranspose(MLIRContext *ctx, llvm::Statistic &folded)
      : OpRewritePattern(ctx), folded(folded) {}

  LogicalResult matchAndRewrite(CastOp cast, PatternRewriter &rewriter) const override {
    Type wide = getElementTypeOrSelf(cast.getInput().getType());
    Type narrow = getElementTypeOrSelf(cast.getResult().getType());
    if (!llvm::isa<FloatType>(narrow) ||
        narrow.getIntOrFloatBitWidth() >= wide.getIntOrFloatBitWidth())
      return rewriter.notifyMatchFailure(cast, "not a narrowing cast");
    // The wide tensor must exist anyway: reading it in place of an
    // activation's narrow copy would store the activation wide (and undo
    // the layernorms' and casts' fusions that come later).
    if (!llvm::isa<BlockArgument>(cast.getInput()))
      return rewriter.notifyMatchFailure(cast, "not a cast of a function argument");
    if (cast.getResult().use_empty())
      return rewriter.notifyMatchFailure(cast, "no readers");
    for (OpOperand &use : cast.getResult().getUses()) {
      auto fp8 = llvm::dyn_cast<Fp8CastTransposeOp>(use.getOwner());
      // A gelu cast rounds the GELU of the narrow value, not the value.
      if (!fp8 || use.get() != fp8.getInput() || fp8.getGelu() || fp8.getRoundedToAttr())
        return rewriter.notifyMatchFailure(cast, "read by something other than an FP8 cast");
    }
    for (Operation *user : llvm::to_vector(cast.getResult().getUsers())) {
      auto fp8 = llvm::cast<Fp8CastTransposeOp>(user);
      rewriter.modifyOpInPlace(fp8, [&] {
        fp8.getInputMutable().assign(cast.getInput());
        fp8.setRoundedToAttr(TypeAttr::get(narrow));
      });
      ++folded;
    }
    rewriter.eraseOp(cast);
    return success();
  }

  llvm::Statistic &folded;
};

struct FoldFp8InputCastPass
    : public gptc::impl::FoldFp8InputCastPassBase<FoldFp8InputCastPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldCastIntoFp8CastTranspose>(&getContext(), numFolded);
    // No folding, and constants stay where they are (the driver still
    // erases ops left dead).
    GreedyRewriteConfig config;
    config.enableFolding(false).enableConstantCSE(false).setRegionSimplificationLevel(
        GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
