//===- FuseFp8.cpp - the FP8 store rewrites, one labelled pattern set -----===//
//
/// Each pattern moves an FP8 cast into a neighbour: the producer writes the
/// codes itself (the loss kernel, a residual layernorm, the MLP's GEMM), or
/// a neighbour's work moves into the cast's kernel (a bias sum, the GELU
/// gradient, a weight's bf16 rounding). Every pattern has a label that
/// `enable-patterns` / `disable-patterns` (gptc's --enable-patterns and
/// --disable-patterns) name; see Passes.td for where gptc runs which.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEFP8PASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace gptc {

llvm::ArrayRef<Fp8Pattern> getFp8Patterns() {
  static const Fp8Pattern patterns[] = {
      {"fp8-cross-entropy-grad", true,
       "the loss kernel writes an FP8 LM head's logit gradient as e5m2 codes"},
      {"fp8-cast-gelu-grad", true,
       "a backward FP8 cast computes the MLP's GELU gradient as it loads"},
      {"fp8-cast-column-sum", true, "a backward FP8 cast also sums its bias gradient's columns"},
      {"fp8-fold-input-cast", true,
       "an FP8 cast of a weight's bf16 copy reads the f32 weight and rounds as it loads"},
      {"fp8-layernorm-codes", true, "a residual layernorm writes both layouts of its FP8 codes"},
      {"fp8-gelu-matmul-codes", false, "the MLP's FP8 GEMM writes its GELU's FP8 codes"},
  };
  return patterns;
}

const Fp8Pattern *findFp8Pattern(llvm::StringRef label) {
  const Fp8Pattern *p = llvm::find_if(getFp8Patterns(),
                                      [&](const Fp8Pattern &p) { return p.label == label; });
  return p == getFp8Patterns().end() ? nullptr : p;
}

std::string getFp8PatternLabels() {
  return llvm::join(llvm::map_range(getFp8Patterns(), [](const Fp8Pattern &p) { return p.label; }),
                    ", ");
}

} // namespace gptc

namespace {

/// A pattern of the set: its label is its debug name (what the disabled
/// and enabled labels of FrozenRewritePatternSet match), and it counts its
/// rewrites in one of the pass's statistics.
template <typename OpT>
struct Fp8Rewrite : OpRewritePattern<OpT> {
  Fp8Rewrite(MLIRContext *ctx, llvm::StringRef label, llvm::Statistic &count,
             PatternBenefit benefit = 1)
      : OpRewritePattern<OpT>(ctx, benefit), count(count) {
    this->setDebugName(label);
  }

  llvm::Statistic &count;
};

//===----------------------------------------------------------------------===//
// fp8-cross-entropy-grad
//===----------------------------------------------------------------------===//

/// gpt.fp8_cast_transpose e5m2 of a gpt.cross_entropy_grad, scaled by the
/// gradient's own gpt.fp8_scale, where nothing else reads the gradient or
/// the scale -> gpt.fp8_cross_entropy_grad at the gradient + gpt.fp8_transpose.
struct WriteCrossEntropyGradAsFp8 : Fp8Rewrite<Fp8CastTransposeOp> {
  using Fp8Rewrite::Fp8Rewrite;

  LogicalResult matchAndRewrite(Fp8CastTransposeOp cast, PatternRewriter &rewriter) const override {
    // No history: the gradient's scale is its bound, so this runs before
    // gpt-fp8-delayed-scaling gives the cast one.
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
    ++count;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// fp8-cast-gelu-grad, fp8-cast-column-sum
//===----------------------------------------------------------------------===//

/// A column sum of `x` in x's element type, read only after `at`: one the
/// cast at `at` can produce instead.
ReduceOp columnSumOf(Value x, Operation *at) {
  for (Operation *user : x.getUsers()) {
    auto reduce = llvm::dyn_cast<ReduceOp>(user);
    if (!reduce || !sumsColumns(reduce) ||
        reduce.getType().getElementType() != getElementTypeOrSelf(x.getType()))
      continue;
    bool later = llvm::all_of(reduce->getUsers(), [&](Operation *reader) {
      return reader->getBlock() == at->getBlock() && at->isBeforeInBlock(reader);
    });
    if (later)
      return reduce;
  }
  return {};
}

/// A backward gpt.fp8_cast_transpose (not a forward GELU's) -> a
/// gpt.fp8_cast_transpose_sum that also sums the columns of what it casts
/// (`sum`, where one reads only later) and, with `grad`, computes that GELU
/// gradient from its operands as it loads (`scales`, its plain
/// gpt.fp8_scale readers, then read the same operands).
void castWithEpilogue(PatternRewriter &rewriter, Fp8CastTransposeOp cast, ReduceOp sum,
                      GeluGradOp grad, ArrayRef<Fp8ScaleOp> scales) {
  rewriter.setInsertionPoint(cast);
  Value input = grad ? grad.getGrad() : cast.getInput(), pre = grad ? grad.getInput() : Value();
  auto fused = Fp8CastTransposeSumOp::create(rewriter, cast.getLoc(), cast.getFormat(), input,
                                             pre, cast.getScale(), cast.getHistory());
  SmallVector<Value> replacements = {fused.getResult(), fused.getTransposed()};
  if (cast.getRecorded())
    replacements.push_back(fused.getRecorded());
  rewriter.replaceOp(cast, replacements);
  if (sum)
    rewriter.replaceOp(sum, fused.getSum());
  if (!grad)
    return;
  for (Fp8ScaleOp scale : scales) {
    rewriter.setInsertionPoint(scale);
    auto of = Fp8ScaleOp::create(rewriter, scale.getLoc(), scale.getFormat(), input, pre,
                                 scale.getHistory(), /*gelu=*/false);
    rewriter.replaceOp(scale, of);
  }
  rewriter.eraseOp(grad);
}

/// The GELU gradient that a backward cast reads folds into it when only the
/// cast, its scales and (with fp8-cast-column-sum on) its column sum read
/// it: then it is never stored. The column sum folds in with it.
struct CastGeluGrad : Fp8Rewrite<Fp8CastTransposeOp> {
  /// Tried before fp8-cast-column-sum (benefit 2), which would fold the
  /// sum alone.
  CastGeluGrad(MLIRContext *ctx, llvm::Statistic &geluGrads, bool columnSums,
               llvm::Statistic &sums)
      : Fp8Rewrite(ctx, "fp8-cast-gelu-grad", geluGrads, /*benefit=*/2), columnSums(columnSums),
        sums(sums) {}

  LogicalResult matchAndRewrite(Fp8CastTransposeOp cast, PatternRewriter &rewriter) const override {
    if (cast.getGelu())
      return rewriter.notifyMatchFailure(cast, "a forward GELU's cast");
    Value x = cast.getInput();
    auto grad = x.getDefiningOp<GeluGradOp>();
    if (!grad)
      return rewriter.notifyMatchFailure(cast, "not a cast of a GELU gradient");
    ReduceOp sum = columnSums ? columnSumOf(x, cast) : ReduceOp();
    SmallVector<Fp8ScaleOp> scales;
    for (Operation *user : x.getUsers()) {
      auto scale = llvm::dyn_cast<Fp8ScaleOp>(user);
      if (scale && scale.getInput() == x && !scale.getGelu() && !scale.getPre())
        scales.push_back(scale);
      else if (user != cast && user != sum)
        return rewriter.notifyMatchFailure(cast, "the GELU gradient has other readers");
    }
    castWithEpilogue(rewriter, cast, sum, grad, scales);
    ++count;
    if (sum)
      ++sums;
    return success();
  }

  bool columnSums;
  llvm::Statistic &sums;
};

/// A backward cast whose input's column sum is read only after it sums
/// the columns too (the bias gradient).
struct CastColumnSum : Fp8Rewrite<Fp8CastTransposeOp> {
  using Fp8Rewrite::Fp8Rewrite;

  LogicalResult matchAndRewrite(Fp8CastTransposeOp cast, PatternRewriter &rewriter) const override {
    if (cast.getGelu())
      return rewriter.notifyMatchFailure(cast, "a forward GELU's cast");
    ReduceOp sum = columnSumOf(cast.getInput(), cast);
    if (!sum)
      return rewriter.notifyMatchFailure(cast, "no column sum read after the cast");
    castWithEpilogue(rewriter, cast, sum, {}, {});
    ++count;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// fp8-fold-input-cast
//===----------------------------------------------------------------------===//

/// gpt.cast wide -> narrow of a block argument whose every reader is a
/// plain gpt.fp8_cast_transpose's input -> those casts read the wide tensor
/// with rounded_to = narrow.
struct FoldInputCast : Fp8Rewrite<CastOp> {
  using Fp8Rewrite::Fp8Rewrite;

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
      ++count;
    }
    rewriter.eraseOp(cast);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// fp8-layernorm-codes
//===----------------------------------------------------------------------===//

/// A residual add and layernorm row fusion (gpt-fuse-elementwise's) whose
/// normalised result only an FP8 cast reads, the cast's scale (and history)
/// existing before it -> a gpt.add_layernorm_fp8 that writes both layouts.
struct LayerNormCodes : Fp8Rewrite<FusionOp> {
  using Fp8Rewrite::Fp8Rewrite;

  LogicalResult matchAndRewrite(FusionOp fusion, PatternRewriter &rewriter) const override {
    std::optional<AddLayerNormFusion> ln = matchAddLayerNorm(fusion);
    if (!ln)
      return rewriter.notifyMatchFailure(fusion, "not a residual add and its layernorm");
    Value y = ln->result;
    if (!y.hasOneUse())
      return rewriter.notifyMatchFailure(fusion, "not read by one op");
    auto cast = llvm::dyn_cast<Fp8CastTransposeOp>(*y.getUsers().begin());
    // The scale (and the history it records in) must exist before the
    // layernorm runs: delayed scaling's steady step, not a scale of y.
    if (!cast || cast.getGelu() || !gptc::availableBefore(cast.getScale(), fusion) ||
        (cast.getHistory() && !gptc::availableBefore(cast.getHistory(), fusion)))
      return rewriter.notifyMatchFailure(fusion, "not read by a cast whose scale comes first");
    rewriter.setInsertionPoint(fusion);
    SmallVector<Type> types = {ln->sum.getType(), cast.getResult().getType(),
                               cast.getTransposed().getType()};
    if (cast.getRecorded())
      types.push_back(cast.getRecorded().getType());
    auto op = AddLayerNormFp8Op::create(
        rewriter, fusion.getLoc(), types, cast.getFormat(), ln->lhs, ln->rhs, ln->weight,
        ln->bias, cast.getScale(), cast.getHistory(), getElementTypeOrSelf(y.getType()),
        ln->rowOp.getEpsilon());
    SmallVector<Value> castResults = {op.getResult(), op.getTransposed()};
    if (cast.getRecorded())
      castResults.push_back(op.getRecorded());
    rewriter.replaceOp(cast, castResults);
    rewriter.replaceAllUsesWith(ln->sum, op.getSum());
    rewriter.eraseOp(fusion);
    ++count;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// fp8-gelu-matmul-codes
//===----------------------------------------------------------------------===//

/// True when `h` is a history moved on by one step, its first element 0:
/// a gpt.fp8_delayed_scales' or gpt.fp8_scale's `shifted`.
bool isShiftedHistory(Value h) {
  if (auto scales = h.getDefiningOp<Fp8DelayedScalesOp>())
    return llvm::any_of(llvm::seq<unsigned>(0, scales.getHistories().size()),
                        [&](unsigned i) { return scales.getShifted(i) == h; });
  if (auto scale = h.getDefiningOp<Fp8ScaleOp>())
    return h == scale.getShifted();
  return false;
}

/// A delayed-scaling gpt.fp8_cast_transpose {gelu} of a gpt.scaled_matmul
/// whose scale and history exist before the product -> a
/// gpt.scaled_matmul_gelu_fp8 (the GEMM writes the codes) and a byte
/// transpose of them.
struct GeluMatmulCodes : Fp8Rewrite<Fp8CastTransposeOp> {
  using Fp8Rewrite::Fp8Rewrite;

  LogicalResult matchAndRewrite(Fp8CastTransposeOp cast, PatternRewriter &rewriter) const override {
    if (!cast.getGelu() || !cast.getHistory())
      return rewriter.notifyMatchFailure(cast, "not a delayed-scaling GELU cast");
    auto mm = cast.getInput().getDefiningOp<ScaledMatmulOp>();
    // The GEMM computes the codes, so their scale (and the history its
    // amax goes into) must exist before it runs.
    if (!mm || mm.getAccumulate() || mm.getTransposeLhs() || !mm.getTransposeRhs() ||
        !gptc::availableBefore(cast.getScale(), mm) ||
        !gptc::availableBefore(cast.getHistory(), mm) || !isShiftedHistory(cast.getHistory()))
      return rewriter.notifyMatchFailure(cast, "not a product the GEMM's epilogue can cast");
    rewriter.setInsertionPoint(mm);
    auto op = ScaledMatmulGeluFp8Op::create(
        rewriter, mm.getLoc(),
        TypeRange{mm.getType(), cast.getResult().getType(), cast.getRecorded().getType()},
        cast.getFormat(), mm.getLhs(), mm.getLhsScale(), mm.getRhs(), mm.getRhsScale(),
        cast.getScale(), cast.getHistory(), mm.getBias(), mm.getFastAccum());
    if (!cast.getTransposed().use_empty()) {
      rewriter.setInsertionPoint(cast);
      auto transposed = Fp8TransposeOp::create(rewriter, cast.getLoc(), op.getResult());
      rewriter.replaceAllUsesWith(cast.getTransposed(), transposed.getResult());
    }
    rewriter.replaceAllUsesWith(cast.getResult(), op.getResult());
    rewriter.replaceAllUsesWith(cast.getRecorded(), op.getRecorded());
    rewriter.eraseOp(cast);
    rewriter.replaceOp(mm, op.getPre());
    ++count;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct FuseFp8Pass : public gptc::impl::FuseFp8PassBase<FuseFp8Pass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    // Every label named must be one of ours: a typo would change nothing.
    for (ArrayRef<std::string> list : {ArrayRef<std::string>(enablePatterns),
                                       ArrayRef<std::string>(disablePatterns)})
      for (const std::string &label : list)
        if (!gptc::findFp8Pattern(label))
          return emitError(UnknownLoc::get(ctx))
                 << "gpt-fuse-fp8: no pattern '" << label
                 << "' (the patterns: " << gptc::getFp8PatternLabels() << ")";
    auto on = [&](llvm::StringRef label) {
      if (llvm::is_contained(disablePatterns, label))
        return false;
      if (!enablePatterns.empty())
        return llvm::is_contained(enablePatterns, label);
      return gptc::findFp8Pattern(label)->byDefault;
    };
    RewritePatternSet set(ctx);
    set.add<WriteCrossEntropyGradAsFp8>(ctx, "fp8-cross-entropy-grad", numCrossEntropyGrads);
    set.add<CastGeluGrad>(ctx, numGeluGrads, on("fp8-cast-column-sum"), numColumnSums);
    set.add<CastColumnSum>(ctx, "fp8-cast-column-sum", numColumnSums);
    set.add<FoldInputCast>(ctx, "fp8-fold-input-cast", numFoldedCasts);
    set.add<LayerNormCodes>(ctx, "fp8-layernorm-codes", numLayerNorms);
    set.add<GeluMatmulCodes>(ctx, "fp8-gelu-matmul-codes", numGeluMatmuls);
    SmallVector<std::string> disabled;
    for (const gptc::Fp8Pattern &p : gptc::getFp8Patterns())
      if (!on(p.label))
        disabled.push_back(p.label.str());
    patterns = FrozenRewritePatternSet(std::move(set), disabled);
    return success();
  }

  void runOnOperation() override {
    // No folding, and constants stay where they are: the patterns' rewrites
    // and nothing else (the driver still erases ops left dead).
    GreedyRewriteConfig config;
    config.enableFolding(false).enableConstantCSE(false).setRegionSimplificationLevel(
        GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), patterns, config)))
      signalPassFailure();
  }

  FrozenRewritePatternSet patterns;
};

} // namespace
