//===- FuseFp8Cast.cpp - bias sums and GELU gradients into FP8 casts ------===//
//
/// In an FP8 backward every gradient a GEMM reads is cast into two e5m2
/// layouts by a kernel that reads it in 64 x 64 tiles. Two more kernels
/// read the same tensors: the bias gradient's column sum, and before the
/// MLP's GELU the GELU gradient, which is written in bf16 only for the
/// cast to read it back. Both move into the cast (gpt.fp8_cast_transpose_sum).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEFP8CASTPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// A column sum of `x` in x's element type, read only after `at`: one the
/// cast at `at` can produce instead.
ReduceOp columnSumOf(Value x, Operation *at) {
  for (Operation *user : x.getUsers()) {
    auto reduce = llvm::dyn_cast<ReduceOp>(user);
    if (!reduce || !gptc::sumsColumns(reduce) ||
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

struct FuseFp8CastPass : public gptc::impl::FuseFp8CastPassBase<FuseFp8CastPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        continue;
      for (auto cast : llvm::to_vector(fn.getBody().front().getOps<Fp8CastTransposeOp>()))
        fuse(cast);
    }
  }

  void fuse(Fp8CastTransposeOp cast) {
    if (cast.getGelu())
      return; // a forward GELU's input already
    Value x = cast.getInput();
    ReduceOp sum = columnSums ? columnSumOf(x, cast) : ReduceOp();
    // The GELU gradient folds in when only the cast, its scales and the
    // column sum read it: then it is never stored.
    auto grad = geluGrad ? x.getDefiningOp<GeluGradOp>() : GeluGradOp();
    SmallVector<Fp8ScaleOp> scales;
    if (grad)
      for (Operation *user : x.getUsers()) {
        auto scale = llvm::dyn_cast<Fp8ScaleOp>(user);
        if (scale && scale.getInput() == x && !scale.getGelu() && !scale.getPre())
          scales.push_back(scale);
        else if (user != cast && user != sum)
          grad = {};
      }
    if (!sum && !grad)
      return;

    OpBuilder b(cast);
    Value input = grad ? grad.getGrad() : x, pre = grad ? grad.getInput() : Value();
    auto fused = Fp8CastTransposeSumOp::create(b, cast.getLoc(), cast.getFormat(), input, pre,
                                               cast.getScale(), cast.getHistory());
    cast.getResult().replaceAllUsesWith(fused.getResult());
    cast.getTransposed().replaceAllUsesWith(fused.getTransposed());
    if (cast.getRecorded())
      cast.getRecorded().replaceAllUsesWith(fused.getRecorded());
    cast.erase();
    if (sum) {
      sum.getResult().replaceAllUsesWith(fused.getSum());
      sum.erase();
      ++numSums;
    }
    if (!grad)
      return;
    for (Fp8ScaleOp scale : scales) {
      b.setInsertionPoint(scale);
      auto of = Fp8ScaleOp::create(b, scale.getLoc(), scale.getFormat(), input, pre,
                                   scale.getHistory(), /*gelu=*/false);
      scale->replaceAllUsesWith(of);
      scale.erase();
    }
    grad.erase();
    ++numGeluGrads;
  }
};

} // namespace
