//===- GPTFusion.cpp - gpt.fusion verifier and the fusible-op set ---------===//

#include "dialects/GPT/IR/GPTOps.h"

using namespace mlir;
using namespace mlir::gpt;

bool mlir::gpt::isFusibleElementwise(Operation *op) {
  // Exactly the ops whose codegen is one element per index (Lowering.cpp's
  // elementOf); transpose, causal_mask and softmax read other indices.
  return llvm::isa<AddOp, SubOp, MulOp, DivOp, MaxOp, NegOp, ExpOp, LogOp, TanhOp, SqrtOp,
                   RsqrtOp, GeluOp, GeluGradOp, ScaleOp, CastOp, BiasAddOp, ConstantOp>(op);
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments for "
                                    << getInputs().size() << " operands";
  for (auto [i, arg, in] : llvm::enumerate(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("body argument ") << i << " has type " << arg.getType()
                                           << ", its operand " << in.getType();
  // Codegen sizes every value statically.
  for (Operation &op : body) {
    for (Type t : op.getResultTypes())
      if (!llvm::cast<RankedTensorType>(t).hasStaticShape())
        return op.emitOpError("in gpt.fusion must have a static shape, got ") << t;
    if (llvm::isa<YieldOp>(op))
      continue;
    if (!isFusibleElementwise(&op))
      return op.emitOpError("cannot be fused: gpt.fusion holds only elementwise ops");
  }
  for (auto [i, t] : llvm::enumerate(getInputs().getTypes()))
    if (!llvm::cast<RankedTensorType>(t).hasStaticShape())
      return emitOpError("operand ") << i << " must have a static shape, got " << t;
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in gpt.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ") << yield.getValues().getTypes() << " for results "
                                  << getResultTypes();
  // A result is computed, not copied: each must come from a body op.
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (llvm::isa<BlockArgument>(v))
      return emitOpError("result ") << i << " yields a body argument; use the operand";
  return success();
}
