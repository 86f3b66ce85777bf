//===- Fp8DelayedScaling.cpp - FP8 scales from the amaxes of past steps ---===//
//
/// Each gpt.fp8_scale of the train step gets an amax history (a state
/// argument and result): the scale reads it, the first quantization with
/// that scale records the tensor's amax in it, and the recorded history is
/// returned for the next step.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace gptc {
#define GEN_PASS_DEF_FP8DELAYEDSCALINGPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The first quantization (in block order) with `scale`'s scale of the
/// values `scale` measures, or null: the op that records their amax.
Operation *recorderOf(Fp8ScaleOp scale) {
  Operation *first = nullptr;
  for (Operation *user : scale.getScale().getUsers()) {
    Value input;
    bool gelu = false;
    if (auto q = llvm::dyn_cast<Fp8QuantizeOp>(user);
        q && !q.getHistory() && q.getScale() == scale.getScale())
      input = q.getInput(), gelu = q.getGelu();
    else if (auto ct = llvm::dyn_cast<Fp8CastTransposeOp>(user);
             ct && !ct.getHistory() && ct.getScale() == scale.getScale())
      input = ct.getInput(), gelu = ct.getGelu();
    if (!input || gptc::reshapeSource(input) != gptc::reshapeSource(scale.getInput()) ||
        gelu != scale.getGelu() || user->getBlock() != scale->getBlock())
      continue;
    if (!first || user->isBeforeInBlock(first))
      first = user;
  }
  return first;
}

struct Fp8DelayedScalingPass
    : public gptc::impl::Fp8DelayedScalingPassBase<Fp8DelayedScalingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = SymbolTable(module).lookup<func::FuncOp>(function);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("gpt-fp8-delayed-scaling: no single-block function @") << function;
      return signalPassFailure();
    }
    if (history < 1) {
      module.emitError("gpt-fp8-delayed-scaling: history must be at least 1 step, got ")
          << static_cast<int64_t>(history);
      return signalPassFailure();
    }
    Block &body = fn.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    Builder b(&getContext());
    auto type = RankedTensorType::get({history}, b.getF32Type());
    // Histories go after the parameters and state (AdamW's moments),
    // before the inputs and outputs: the state stays one run of values.
    auto isState = [](DictionaryAttr attrs) {
      return attrs && (attrs.get(kParamAttrName) || attrs.get(gptc::kStateAttrName));
    };
    unsigned argAt = 0, resultAt = 0;
    while (argAt < fn.getNumArguments() && isState(fn.getArgAttrDict(argAt)))
      ++argAt;
    while (resultAt < fn.getNumResults() && isState(fn.getResultAttrDict(resultAt)))
      ++resultAt;
    SmallVector<Value> recorded;
    for (auto scale : llvm::make_early_inc_range(body.getOps<Fp8ScaleOp>())) {
      if (scale.getHistory())
        continue;
      Operation *recorder = recorderOf(scale);
      if (!recorder)
        continue; // no quantization of these values: nothing records an amax
      std::string name = "fp8.amax_history." + std::to_string(recorded.size());
      unsigned index = argAt + recorded.size();
      if (failed(fn.insertArgument(
              index, type, b.getDictionaryAttr(b.getNamedAttr(gptc::kStateAttrName,
                                                              b.getStringAttr(name))),
              scale.getLoc())))
        return signalPassFailure();
      if (failed(fn.insertResult(resultAt + recorded.size(), type,
                                 b.getDictionaryAttr(b.getNamedAttr(gptc::kStateAttrName,
                                                                    b.getStringAttr(name))))))
        return signalPassFailure();

      OpBuilder ob(scale);
      auto delayed = Fp8ScaleOp::create(ob, scale.getLoc(), scale.getFormat(), scale.getInput(),
                                        scale.getPre(), fn.getArgument(index), scale.getGelu());
      scale.getScale().replaceAllUsesWith(delayed.getScale());
      scale.getInverse().replaceAllUsesWith(delayed.getInverse());
      scale.erase();

      ob.setInsertionPoint(recorder);
      Operation *withHistory =
          gptc::cloneFp8Quantization(ob, recorder, delayed.getShifted(), IRMapping());
      for (unsigned i = 0; i < recorder->getNumResults(); ++i)
        recorder->getResult(i).replaceAllUsesWith(withHistory->getResult(i));
      recorder->erase();
      recorded.push_back(withHistory->getResults().back());
      ++numScales;
    }
    ret->insertOperands(resultAt, recorded);
  }
};

} // namespace
