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

/// True for `gpt.reduce sum dims [0 .. r-2]` without kept dimensions: the
/// column sums of its input (a bias gradient's).
bool sumsColumns(ReduceOp sum);

/// What `op` computes, for kernel names and messages: its name without the
/// dialect; for a row, row-gradient or column-sum fusion its body's ops
/// without the casts ("add_layernorm"); for a GEMM fusion
/// GemmFusion::name().
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

/// A GEMM fusion (gpt-fuse-matmul-epilogue's): one gpt.linear or
/// gpt.matmul of the operands, widened in the body or not, so that its
/// result is the GEMM's accumulator (f32 for narrow operands), and an
/// epilogue that cuBLASLt runs on it; each result is that value narrowed by
/// at most one cast. The values are the fusion's operands and results.
struct GemmFusion {
  enum class Epilogue {
    Gelu,        // result = gelu(acc), aux = acc: GELU_AUX(_BIAS)
    GeluGrad,    // result = acc * gelu'(pre): DGELU
    GeluGradSum, // and sum = result's column sums, before rounding: DGELU_BGRAD
    LhsSum,      // result = acc, sum = op(lhs)'s column sums: BGRADB
  };
  Operation *gemm = nullptr; // the body's gpt.linear or gpt.matmul
  Epilogue epilogue = Epilogue::Gelu;
  Value lhs, rhs, bias;         // operands: the GEMM's (bias: a linear's, or null)
  bool transposeLhs = false, transposeRhs = false;
  Value pre;                    // operand: GELU's input, for its gradient
  Value result, aux, sum;       // results (aux, sum: null where there is none)

  /// What it computes, for kernel-kind names and messages: the GEMM's
  /// name and the epilogue's ("linear_gelu", "matmul_gelu_grad",
  /// "matmul_gelu_bias_grad", "matmul_bias_grad", ...).
  std::string name() const;
};
/// `fusion`'s parts when it holds a GEMM and one of those epilogues;
/// nullopt otherwise, with the reason in `whyNot` where given.
std::optional<GemmFusion> matchGemmFusion(FusionOp fusion, std::string *whyNot = nullptr);

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
