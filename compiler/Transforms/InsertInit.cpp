//===- InsertInit.cpp - GPT-2 parameter initialisation program -----------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace gptc {
#define GEN_PASS_DEF_INSERTINITPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct InsertInitPass : public gptc::impl::InsertInitPassBase<InsertInitPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp fn = gptc::programSource(module, "gpt-insert-init", function, "init");
    if (!fn)
      return signalPassFailure();
    auto config = module->getAttrOfType<DictionaryAttr>("gpt.config");
    auto nLayerAttr = config ? config.getAs<IntegerAttr>("n_layer") : IntegerAttr();
    if (!nLayerAttr || nLayerAttr.getInt() < 1) {
      module.emitError("gpt-insert-init: needs gpt.config with n_layer (run "
                       "gpt-instantiate-model first)");
      return signalPassFailure();
    }
    double residualStd = 0.02 / std::sqrt(2.0 * static_cast<double>(nLayerAttr.getInt()));

    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = fn.getLoc();
    auto seedType = RankedTensorType::get({}, b.getI32Type());
    SmallVector<Type> types;
    SmallVector<Attribute> attrs;
    SmallVector<unsigned> indices;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttrName)) {
        // gpt.constant and gpt.random_normal produce static float tensors.
        auto t = llvm::dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
        if (!t || !t.hasStaticShape() || !llvm::isa<FloatType>(t.getElementType())) {
          fn.emitError("gpt-insert-init: parameter argument ")
              << i << " of @" << function << " must be a static float tensor, got "
              << fn.getArgumentTypes()[i];
          return signalPassFailure();
        }
        indices.push_back(i);
        types.push_back(fn.getArgumentTypes()[i]);
        attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kParamAttrName, name)));
      }
    auto init = func::FuncOp::create(b, loc, "init", b.getFunctionType({seedType}, types));
    init.setArgAttrs(0, b.getDictionaryAttr(
                            b.getNamedAttr(kInputAttrName, b.getStringAttr("seed"))));
    init.setAllResultAttrs(attrs);
    Block *entry = init.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<Value> values;
    for (unsigned i : indices) {
      StringRef name = fn.getArgAttrOfType<StringAttr>(i, kParamAttrName).getValue();
      auto type = llvm::cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      // At the parameter's declaration, so diagnostics name it.
      Location at = fn.getArgument(i).getLoc();
      if (name.ends_with(".bias") || (name.contains("ln_") && name.ends_with(".weight")))
        values.push_back(ConstantOp::create(b, at, type,
                                            b.getF64FloatAttr(name.ends_with(".bias") ? 0.0 : 1.0)));
      else
        values.push_back(RandomNormalOp::create(
            b, at, type, entry->getArgument(0), b.getI64IntegerAttr(i),
            b.getF64FloatAttr(name.ends_with("c_proj.weight") ? residualStd : 0.02)));
    }
    func::ReturnOp::create(b, loc, values);
  }
};

} // namespace
