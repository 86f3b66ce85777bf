//===- GPTInterfaces.td - gpt dialect op interfaces ----------------------===//

#ifndef GPT_INTERFACES_TD
#define GPT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def GPT_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::gpt";
  let description = [{
    An op with a reverse-mode gradient rule, used by `gpt-autodiff`. Given
    the gradients of the loss with respect to the op's results (null where a
    result does not reach the loss), the rule builds, at the builder's
    insertion point, the gradient of every operand (null where an operand is
    not differentiable, e.g. token ids). Rules read the forward values they
    need (inputs, outputs) directly: those are the saved activations that
    `gpt-remat` later keeps or recomputes.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the operand gradients from the result gradients.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // GPT_INTERFACES_TD
