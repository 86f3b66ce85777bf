//===- Fp8SteadyStep.cpp - the first train step apart, the others' scales in one op ---===//
//
/// The train step is copied as `<function>_first` for the run's first step;
/// in the train step itself every history scale becomes one entry of a
/// gpt.fp8_delayed_scales at the top of the function (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

namespace gptc {
#define GEN_PASS_DEF_FP8STEADYSTEPPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct Fp8SteadyStepPass : public gptc::impl::Fp8SteadyStepPassBase<Fp8SteadyStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto fn = symbols.lookup<func::FuncOp>(function);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("gpt-fp8-steady-step: no single-block function @") << function;
      return signalPassFailure();
    }
    std::string firstName = function + "_first";
    if (symbols.lookup(firstName)) {
      module.emitError("gpt-fp8-steady-step: @") << firstName << " exists already";
      return signalPassFailure();
    }
    Block &body = fn.getBody().front();
    // Histories that are arguments (the state gpt-fp8-delayed-scaling
    // adds) can be read at the top; their scales in program order.
    llvm::MapVector<Value, SmallVector<Fp8ScaleOp, 1>> byHistory;
    for (auto scale : body.getOps<Fp8ScaleOp>()) {
      Value h = scale.getHistory();
      if (!h || !llvm::isa<BlockArgument>(h))
        continue;
      auto &same = byHistory[h];
      // A clone of another format (none is made) would need its own entry.
      if (same.empty() || same.front().getFormat() == scale.getFormat())
        same.push_back(scale);
    }
    // Always made, so that the passes after it find the program (with no
    // history scale the two steps are the same).
    auto first = fn.clone();
    first.setName(firstName);
    symbols.insert(first, std::next(Block::iterator(fn)));
    if (byHistory.empty())
      return;

    SmallVector<Value> histories;
    SmallVector<int32_t> formats;
    for (auto &[h, scales] : byHistory) {
      histories.push_back(h);
      formats.push_back(static_cast<int32_t>(scales.front().getFormat()));
    }
    OpBuilder b(&body, body.begin());
    auto all = Fp8DelayedScalesOp::create(b, fn.getLoc(), histories, formats);
    for (auto [i, entry] : llvm::enumerate(byHistory)) {
      for (Fp8ScaleOp scale : entry.second) {
        scale.getScale().replaceAllUsesWith(all.getScale(i));
        scale.getInverse().replaceAllUsesWith(all.getInverse(i));
        scale.getShifted().replaceAllUsesWith(all.getShifted(i));
        scale.erase();
      }
    }
    numScales = all.getHistories().size();
  }
};

} // namespace
