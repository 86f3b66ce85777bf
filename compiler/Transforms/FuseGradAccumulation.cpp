//===- FuseGradAccumulation.cpp - micro-batch sums inside FP8 GEMMs -------===//
//
/// With gradient accumulation each FP8 weight gradient is a bf16 GEMM
/// result, widened by a cast and added to the other micro-batches' after
/// the last one. The first micro-batch's GEMM writes f32 instead, and each
/// later one adds its product to the running sum (cuBLASLt's beta = 1).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEGRADACCUMULATIONPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The GEMM behind a micro-batch's gradient `v` (`v` itself, or the one
/// cast that widens it) when nothing else reads either: one that may take
/// another type or an accumulator.
ScaledMatmulOp soleProduct(Value v) {
  Value product = v;
  if (auto cast = v.getDefiningOp<CastOp>()) {
    if (!v.hasOneUse())
      return {};
    product = cast.getInput();
  }
  auto mm = product.getDefiningOp<ScaledMatmulOp>();
  if (!mm || !product.hasOneUse() || mm.getBias() || mm.getAccumulate())
    return {};
  return mm;
}

/// `mm` again at its place, with `type` and `acc`, standing in for `v`.
Value rebuild(OpBuilder &b, ScaledMatmulOp mm, Type type, Value acc, Value v) {
  b.setInsertionPoint(mm);
  auto fused = ScaledMatmulOp::create(b, mm.getLoc(), type, mm.getLhs(), mm.getLhsScale(),
                                      mm.getRhs(), mm.getRhsScale(), /*bias=*/Value(), acc,
                                      mm.getTransposeLhs(), mm.getTransposeRhs(),
                                      mm.getFastAccum());
  Operation *cast = v.getDefiningOp() != mm ? v.getDefiningOp() : nullptr;
  v.replaceAllUsesWith(fused.getResult());
  if (cast)
    cast->erase();
  mm->erase();
  return fused.getResult();
}

struct FuseGradAccumulationPass
    : public gptc::impl::FuseGradAccumulationPassBase<FuseGradAccumulationPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        continue;
      // In order: a sum's running operand is the previous sum, fused first.
      for (auto add : llvm::to_vector(fn.getBody().front().getOps<AddOp>()))
        if (add->hasAttr(kMicroBatchAttrName))
          fuse(add);
    }
  }

  void fuse(AddOp add) {
    auto type = llvm::dyn_cast<RankedTensorType>(add.getType());
    if (!type || !type.getElementType().isF32())
      return;
    // Either operand may be the new micro-batch's; gpt-insert-optimizer
    // puts the running sum first. Nothing changes until a side qualifies.
    for (int side = 0; side < 2; ++side) {
      Value acc = side ? add.getRhs() : add.getLhs();
      Value v = side ? add.getLhs() : add.getRhs();
      ScaledMatmulOp mm = soleProduct(v);
      if (!mm || mm->getBlock() != add->getBlock())
        continue;
      // The running sum: the first micro-batch's product, widened by its
      // GEMM where only this sum reads it.
      ScaledMatmulOp first = soleProduct(acc);
      bool widen = first && acc.hasOneUse() && first->getBlock() == add->getBlock();
      Operation *def = widen ? first.getOperation() : acc.getDefiningOp();
      if (!def || def->getBlock() != mm->getBlock() || !def->isBeforeInBlock(mm))
        continue; // the sum would start before its running operand exists
      OpBuilder b(add);
      if (widen)
        acc = rebuild(b, first, type, Value(), acc);
      Value sum = rebuild(b, mm, type, acc, v);
      add.getResult().replaceAllUsesWith(sum);
      add->erase();
      return;
    }
  }
};

} // namespace
