//===- FuseAdamW.cpp - one gpt.adamw_multi for all parameter updates -----===//
//
/// Algorithm (see Passes.td):
///  1) Group the gpt.adamw ops of a function by their shared operands (lr,
///     step, grad_scale) and hyper-parameters (beta1, beta2, epsilon), in
///     program order.
///  2) Replace each group of two or more by one gpt.adamw_multi placed at
///     the group's last op, with the weight decays in operand order.
///  3) (narrow-grads) A gradient that is a widening gpt.cast read only by
///     its update and gpt.global_norm ops is replaced, in all of them, by
///     the cast's input, and the cast is erased.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/MapVector.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEADAMWPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// What the merged updates must share (attributes are uniqued: equal
/// values are equal attributes).
using GroupKey = std::tuple<Value, Value, Value, Attribute, Attribute, Attribute>;

GroupKey keyOf(AdamWOp op) {
  return {op.getLr(), op.getStep(), op.getGradScale(), op.getBeta1Attr(), op.getBeta2Attr(),
          op.getEpsilonAttr()};
}

/// The widening cast that `grad` is, when the update `adam` and
/// gpt.global_norm ops are its only readers: they can read its input.
CastOp narrowable(Value grad, AdamWOp adam) {
  auto cast = grad.getDefiningOp<CastOp>();
  if (!cast)
    return {};
  Type from = getElementTypeOrSelf(cast.getInput().getType());
  Type to = getElementTypeOrSelf(grad.getType());
  if (from.getIntOrFloatBitWidth() >= to.getIntOrFloatBitWidth())
    return {};
  for (OpOperand &use : grad.getUses())
    if (!llvm::isa<GlobalNormOp>(use.getOwner()) && &use != &adam.getGradMutable())
      return {};
  return cast;
}

/// Replaces `group` (program order, >= 2 ops) by one gpt.adamw_multi; with
/// `narrowGrads`, reads gradients before their widening casts. Returns the
/// number of gradients so narrowed.
unsigned merge(ArrayRef<AdamWOp> group, bool narrowGrads) {
  AdamWOp last = group.back();
  OpBuilder b(last);
  SmallVector<Value> params, grads, ms, vs;
  SmallVector<Type> types;
  SmallVector<double> decays;
  SmallVector<CastOp> casts;
  for (AdamWOp op : group) {
    params.push_back(op.getParam());
    CastOp cast = narrowGrads ? narrowable(op.getGrad(), op) : CastOp();
    grads.push_back(cast ? cast.getInput() : op.getGrad());
    if (cast)
      casts.push_back(cast);
    ms.push_back(op.getM());
    vs.push_back(op.getV());
    types.push_back(op.getParam().getType());
    decays.push_back(op.getWeightDecay().convertToDouble());
  }
  auto multi = AdamWMultiOp::create(b, last.getLoc(), types, types, types, params, grads, ms, vs,
                                    last.getLr(), last.getStep(), last.getGradScale(),
                                    last.getBeta1Attr(), last.getBeta2Attr(),
                                    last.getEpsilonAttr(), b.getDenseF64ArrayAttr(decays));
  for (auto [i, constOp] : llvm::enumerate(group)) {
    AdamWOp op = constOp;
    op.getNewParam().replaceAllUsesWith(multi.getNewParams()[i]);
    op.getNewM().replaceAllUsesWith(multi.getNewMs()[i]);
    op.getNewV().replaceAllUsesWith(multi.getNewVs()[i]);
  }
  for (AdamWOp op : group)
    op.erase();
  // Only gpt.global_norm ops read the casts now; the narrow input is
  // defined before each cast, so before them.
  for (CastOp cast : casts) {
    cast.getResult().replaceAllUsesWith(cast.getInput());
    cast.erase();
  }
  return casts.size();
}

struct FuseAdamWPass : public gptc::impl::FuseAdamWPassBase<FuseAdamWPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    llvm::MapVector<GroupKey, SmallVector<AdamWOp>> groups;
    fn.walk([&](AdamWOp op) { groups[keyOf(op)].push_back(op); });
    for (auto &[key, group] : groups) {
      // The walk visits one block in order; an op nested elsewhere could
      // not share one insertion point with the rest.
      Operation *last = group.back();
      bool oneBlock = llvm::all_of(group, [&](AdamWOp op) {
        return op->getBlock() == last->getBlock();
      });
      // Results are defined at the last op: no earlier op may read them.
      bool readLater = oneBlock && llvm::all_of(group, [&](AdamWOp op) {
        return llvm::all_of(op->getUsers(), [&](Operation *user) {
          Operation *at = last->getBlock()->findAncestorOpInBlock(*user);
          return at && last->isBeforeInBlock(at);
        });
      });
      if (group.size() < 2 || !readLater)
        continue;
      numNarrowed += merge(group, narrowGrads);
      numMerged += group.size();
    }
  }
};

} // namespace
