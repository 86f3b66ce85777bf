//===- InsertLogits.cpp - the forward pass up to the logits, for sampling -===//
//
/// Builds @logits from the loss function (default @forward):
///   1) Check that the single result is a gpt.cross_entropy whose targets
///      are a gpt.input argument.
///   2) Clone the function as @logits and return the cross-entropy's logits
///      operand (cast to fp32 when the precision policy left it narrower).
///   3) Drop the cross-entropy, every op left without uses and the targets
///      argument.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace gptc {
#define GEN_PASS_DEF_INSERTLOGITSPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct InsertLogitsPass : public gptc::impl::InsertLogitsPassBase<InsertLogitsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp fn = gptc::programSource(module, "gpt-insert-logits", function, "logits");
    if (!fn)
      return signalPassFailure();
    if (fn.isExternal() || !fn.getBody().hasOneBlock()) {
      fn.emitError("gpt-insert-logits: @") << function << " must have a single-block body";
      return signalPassFailure();
    }
    auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    auto ce = ret.getNumOperands() == 1
                  ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                  : CrossEntropyOp();
    if (!ce) {
      fn.emitError("gpt-insert-logits: the loss of @")
          << function << " must be the only result and come from a single gpt.cross_entropy";
      return signalPassFailure();
    }
    auto targets = llvm::dyn_cast<BlockArgument>(ce.getTargets());
    if (!targets || !fn.getArgAttrOfType<StringAttr>(targets.getArgNumber(), kInputAttrName)) {
      ce.emitError("gpt-insert-logits: the targets of the loss must be a gpt.input argument of @")
          << function;
      return signalPassFailure();
    }
    unsigned targetsIndex = targets.getArgNumber();

    auto logitsFn = fn.clone();
    logitsFn.setName("logits");
    SymbolTable(module).insert(logitsFn, std::next(fn->getIterator()));
    Block &body = logitsFn.getBody().front();
    auto newRet = llvm::cast<func::ReturnOp>(body.getTerminator());
    auto newCe = newRet.getOperand(0).getDefiningOp<CrossEntropyOp>();

    Value logits = newCe.getLogits();
    auto type = llvm::cast<RankedTensorType>(logits.getType());
    OpBuilder b(newRet);
    if (!type.getElementType().isF32())
      logits = CastOp::create(b, newCe.getLoc(), type.clone(b.getF32Type()), logits);
    newRet->setOperands(logits);
    newCe->erase();

    // What only the loss needed (the targets, nothing else in GPT-2).
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body.without_terminator())))
      if (op.getNumResults() > 0 && op.use_empty())
        op.erase();
    BlockArgument newTargets = body.getArgument(targetsIndex);
    if (!newTargets.use_empty()) {
      newTargets.getUsers().begin()->emitError(
          "gpt-insert-logits: the targets are used by more than the loss of @")
          << function;
      logitsFn.erase();
      return signalPassFailure();
    }
    (void)logitsFn.eraseArgument(targetsIndex);
    logitsFn.setType(b.getFunctionType(logitsFn.getArgumentTypes(), {logits.getType()}));
    logitsFn.setResultAttrs(0, b.getDictionaryAttr(
                                   b.getNamedAttr(gptc::kOutputAttrName, b.getStringAttr("logits"))));
  }
};

} // namespace
