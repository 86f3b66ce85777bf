//===- Autodiff.cpp - reverse-mode differentiation of a gpt function -----===//
//
/// Algorithm:
///  1) Clone @f as @f_grad.
///  2) Seed the loss gradient with 1 and visit the cloned forward ops in
///     reverse; each op's DifferentiableOpInterface rule emits its operand
///     gradients before the return, summed per value with gpt.add.
///  3) Return the loss and the gradient of every gpt.param argument (zeros
///     where a parameter does not reach the loss).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>
#include <limits>

namespace gptc {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

bool isFloatTensor(Type t) {
  auto shaped = llvm::dyn_cast<RankedTensorType>(t);
  return shaped && llvm::isa<FloatType>(shaped.getElementType());
}

/// The function returns exactly one rank-0 float tensor. isFloatTensor comes
/// first: the rank is only defined for a ranked tensor (an `f32` or unranked
/// result would otherwise crash the cast).
bool isScalarLoss(func::FuncOp fn) {
  FunctionType type = fn.getFunctionType();
  return type.getNumResults() == 1 && isFloatTensor(type.getResult(0)) &&
         llvm::cast<RankedTensorType>(type.getResult(0)).getRank() == 0;
}

/// Parameters are float tensors and every shape is static: the rules'
/// reshapes and the zero gradients of unused parameters need static types.
LogicalResult checkTypes(func::FuncOp fn) {
  for (auto [i, type] : llvm::enumerate(fn.getArgumentTypes())) {
    if (fn.getArgAttrOfType<StringAttr>(i, kParamAttrName) && !isFloatTensor(type))
      return fn.emitError("gpt-autodiff: parameter argument ")
             << i << " of @" << fn.getName() << " must be a float tensor, got " << type;
    if (auto shaped = llvm::dyn_cast<ShapedType>(type); shaped && !shaped.hasStaticShape())
      return fn.emitError("gpt-autodiff: argument ")
             << i << " of @" << fn.getName() << " has type " << type
             << "; gpt-autodiff needs static shapes (run gpt-instantiate-model first)";
  }
  WalkResult walk = fn.walk([](Operation *op) {
    for (Type type : op->getResultTypes())
      if (auto shaped = llvm::dyn_cast<ShapedType>(type); shaped && !shaped.hasStaticShape()) {
        op->emitOpError("has result type ")
            << type << "; gpt-autodiff needs static shapes (run gpt-instantiate-model first)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult differentiate(func::FuncOp grad, double lossScale) {
  Block &body = grad.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0); // One scalar float: see isScalarLoss.

  OpBuilder b(ret);
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, g.getLoc(), slot, g).getResult() : g;
  };
  grads[loss] = ConstantOp::create(b, loss.getLoc(), loss.getType(),
                                   b.getF64FloatAttr(lossScale));

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool reached = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads.lookup(r));
      reached |= static_cast<bool>(resultGrads.back());
    }
    if (!reached)
      continue;
    // Nothing flows through an op without a float-tensor operand (a
    // constant, a random draw): it needs no rule.
    if (llvm::none_of(op->getOperandTypes(), isFloatTensor))
      continue;
    auto rule = llvm::dyn_cast<DifferentiableOpInterface>(op);
    if (!rule)
      return op->emitOpError("has no gradient rule; gpt-autodiff cannot "
                             "differentiate through it");
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands()
             << " operands";
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!g || !isFloatTensor(operand.getType()))
        continue;
      if (g.getType() != operand.getType())
        return op->emitOpError("gradient rule gave ")
               << g.getType() << " for an operand of type " << operand.getType();
      accumulate(operand, g);
    }
  }

  SmallVector<Value> results = {loss};
  SmallVector<Attribute> resultAttrs = {
      b.getDictionaryAttr(b.getNamedAttr(gptc::kOutputAttrName, b.getStringAttr("loss")))};
  for (unsigned i = 0; i < grad.getNumArguments(); ++i) {
    auto name = grad.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    if (!name)
      continue;
    Value arg = grad.getArgument(i);
    Value g = grads.lookup(arg);
    if (!g)
      g = ConstantOp::create(b, arg.getLoc(), arg.getType(), b.getF64FloatAttr(0.0));
    results.push_back(g);
    resultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(gptc::kGradOfAttrName, name)));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  grad.setFunctionType(b.getFunctionType(grad.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  grad.setAllResultAttrs(resultAttrs);
  return success();
}

struct AutodiffPass : public gptc::impl::AutodiffPassBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The seed gradient is an fp32 constant: past 3.4e38 it is infinite.
    if (!(lossScale > 0) || !(lossScale <= double(std::numeric_limits<float>::max()))) {
      module.emitError("gpt-autodiff: loss-scale must be a number in (0, 3.4e38] (fp32's "
                       "range), got ")
          << lossScale;
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    auto fn = symbols.lookup<func::FuncOp>(function);
    if (!fn || fn.isExternal()) {
      module.emitError("gpt-autodiff: no function @") << function << " to differentiate";
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("gpt-autodiff: @") << function << " must have a single block";
      return signalPassFailure();
    }
    // Checked on @<function> itself, before cloning, so that the message
    // names the function the user wrote rather than the clone.
    if (!isScalarLoss(fn)) {
      fn.emitError("gpt-autodiff: @") << function << " must return one scalar float loss";
      return signalPassFailure();
    }
    if (failed(checkTypes(fn)))
      return signalPassFailure();
    auto grad = llvm::cast<func::FuncOp>(fn->clone());
    grad.setName(function + "_grad");
    if (symbols.lookup(grad.getName())) {
      grad->destroy();
      module.emitError("gpt-autodiff: @") << function << "_grad already exists";
      return signalPassFailure();
    }
    symbols.insert(grad, std::next(Block::iterator(fn)));
    if (failed(differentiate(grad, lossScale)))
      return signalPassFailure();
  }
};

} // namespace
