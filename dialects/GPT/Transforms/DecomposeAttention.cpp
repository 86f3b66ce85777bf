//===- DecomposeAttention.cpp - unfused causal attention -----------------===//

#include "dialects/GPT/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::gpt {
#define GEN_PASS_DEF_DECOMPOSEATTENTIONPASS
#include "dialects/GPT/Transforms/Passes.h.inc"
} // namespace mlir::gpt

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct DecomposeCausalAttention : OpRewritePattern<CausalAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CausalAttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto qkvType = op.getQkv().getType();
    std::optional<int64_t> heads = getConfigInt(op.getNumHeads());
    if (!qkvType.hasStaticShape() || !heads)
      return rewriter.notifyMatchFailure(op, "needs static shapes and num_heads");
    // The decomposition has no log-sum-exp to offer a backward that reads it.
    if (!op.getLse().use_empty())
      return rewriter.notifyMatchFailure(op, "its lse is used");
    Location loc = op.getLoc();
    Type elt = qkvType.getElementType();
    int64_t b = qkvType.getDimSize(0), t = qkvType.getDimSize(1);
    int64_t c = qkvType.getDimSize(2) / 3, h = *heads, d = c / h;
    auto bthd = RankedTensorType::get({b, t, h, d}, elt);
    SmallVector<int64_t> swap12 = {0, 2, 1, 3};

    // (B, T, 3C) -> three (B, H, T, D) heads.
    auto head = [&](int64_t part) -> Value {
      Value x = SliceOp::create(rewriter, loc, op.getQkv(), /*dim=*/2,
                                /*start=*/part * c, /*size=*/c);
      x = ReshapeOp::create(rewriter, loc, bthd, x);
      return TransposeOp::create(rewriter, loc, x, swap12);
    };
    Value q = head(0), k = head(1), v = head(2);

    Value scores = MatmulOp::create(rewriter, loc, q, k, /*transpose_lhs=*/false,
                                    /*transpose_rhs=*/true); // (B, H, T, T)
    scores = ScaleOp::create(rewriter, loc, scores,
                             rewriter.getF64FloatAttr(1.0 / std::sqrt(double(d))));
    scores = CausalMaskOp::create(rewriter, loc, scores);
    Value probs = SoftmaxOp::create(rewriter, loc, scores);
    Value y = MatmulOp::create(rewriter, loc, probs, v, false, false); // (B, H, T, D)
    y = TransposeOp::create(rewriter, loc, y, swap12);                 // (B, T, H, D)
    y = ReshapeOp::create(rewriter, loc, op.getResult().getType(), y); // (B, T, C)
    rewriter.replaceAllUsesWith(op.getResult(), y);
    rewriter.eraseOp(op);
    return success();
  }
};

struct DecomposeAttentionPass
    : public gpt::impl::DecomposeAttentionPassBase<DecomposeAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void mlir::gpt::populateDecomposeAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeCausalAttention>(patterns.getContext());
}
