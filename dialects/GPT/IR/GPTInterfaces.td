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

def GPT_Fp8ScalingOpInterface : OpInterface<"Fp8ScalingOpInterface"> {
  let cppNamespace = "::mlir::gpt";
  let description = [{
    An op of FP8 scaling: one that writes a tensor's FP8 codes (a
    quantization, or a producer that stores its result as codes), or that
    takes a tensor's scale (`gpt.fp8_scale`). It says what a store of FP8
    codes needs: the format, the scale the values are multiplied by, the
    amax history it reads and the one it returns with this step's amax
    (delayed scaling), and the type each value is rounded to before it is
    scaled. Passes that follow histories (the all-reduce of the amaxes,
    rematerialization, the planner) and codegen ask this, not a list of ops.
  }];
  let methods = [
    InterfaceMethod<"The FP8 format of the codes (for gpt.fp8_scale, of the codes it scales for).",
      "::mlir::gpt::Fp8Format", "getFp8Format", (ins), [{}],
      [{ return $_op.getFormat(); }]>,
    InterfaceMethod<[{The scale the values are multiplied by: an operand of the ops that
      write codes, gpt.fp8_scale's result; null where the op derives it inside
      (gpt.fp8_cross_entropy_grad).}],
      "::mlir::Value", "getFp8Scale", (ins), [{}],
      [{ return $_op.getScale(); }]>,
    InterfaceMethod<"The amax history the op reads (null: none, current scaling).",
      "::mlir::Value", "getAmaxHistory", (ins), [{}],
      [{ return $_op.getHistory(); }]>,
    InterfaceMethod<"The history the op returns, this step's amax recorded (null: none).",
      "::mlir::Value", "getRecordedHistory", (ins), [{}],
      [{ return $_op.getRecorded(); }]>,
    InterfaceMethod<"The type each value is rounded to before it is scaled (null: none).",
      "::mlir::Type", "getRoundedType", (ins), [{}],
      [{ return {}; }]>,
  ];
  let verify = [{
    auto scaling = ::llvm::cast<ConcreteOp>($_op);
    ::mlir::Value history = scaling.getAmaxHistory(), recorded = scaling.getRecordedHistory();
    if (static_cast<bool>(history) != static_cast<bool>(recorded))
      return $_op->emitOpError("records a history exactly when it takes one");
    if (history && history.getType() != recorded.getType())
      return $_op->emitOpError("recorded must have the history's type ") << history.getType();
    return ::mlir::success();
  }];
}

#endif // GPT_INTERFACES_TD
