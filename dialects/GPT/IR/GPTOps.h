//===- GPTOps.h - gpt dialect operations ---------------------------------===//

#ifndef GPTC_DIALECTS_GPT_IR_GPTOPS_H
#define GPTC_DIALECTS_GPT_IR_GPTOPS_H

#include "dialects/GPT/IR/GPTDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>
#include <string>

#include "dialects/GPT/IR/GPTInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/GPT/IR/GPTOps.h.inc"

namespace mlir::gpt {
/// An op that gpt.fusion may hold: elementwise over its result's indices
/// (bias_add's bias broadcast along the last dimension), pure, one result.
bool isFusibleElementwise(Operation *op);

/// `v` with the gpt.cast ops that compute it stripped: the value cast.
inline Value stripCasts(Value v) {
  while (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  return v;
}

/// What `op` computes, for kernel names and messages: its name without the
/// dialect, and for a row fusion its body's ops without the casts
/// ("add_layernorm").
std::string opKindName(Operation *op);

/// A row fusion that is a residual add and the layernorm of its sum
/// (gpt-fuse-elementwise's): sum = lhs + rhs, each operand maybe widened by
/// a cast in the body, and result = layernorm(sum, weight, bias). The
/// values are the fusion's operands and results.
struct AddLayerNormFusion {
  Value lhs, rhs, weight, bias;
  Value sum, result;
  LayerNormOp rowOp;
};
/// `fusion`'s parts when it is exactly that; nullopt otherwise.
std::optional<AddLayerNormFusion> matchAddLayerNorm(FusionOp fusion);

/// The largest finite value of an FP8 format: e4m3 448, e5m2 57344.
inline double fp8MaxFinite(Fp8Format format) {
  return format == Fp8Format::E4M3 ? 448.0 : 57344.0;
}

/// An FP8 op's amax history (delayed scaling) and the result it returns
/// it as (Fp8ScalingOpInterface): a gpt.fp8_scale's `shifted`, a
/// quantization's `recorded`. Nulls for other ops and for FP8 ops without
/// a history.
struct Fp8History {
  Value history;
  Value next;
};
Fp8History getFp8History(Operation *op);
} // namespace mlir::gpt

#endif // GPTC_DIALECTS_GPT_IR_GPTOPS_H
