//===- Fp8Codes.h - FP8 codes and scales in kernel bodies ----------------===//
//
// Shared by the quantization kernels (Lowering.cpp) and the loss kernels
// that write the logits' gradient as FP8 (LossLowering.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_FP8CODES_H
#define GPTC_COMPILER_CODEGEN_FP8CODES_H

#include "compiler/Codegen/KernelBuilder.h"

#include "dialects/GPT/IR/GPTOps.h"

namespace gptc::codegen {

/// The FP8 code (an i8) of the f32 `y`, as cvt.rn.satfinite gives it, in
/// integer and f32 arithmetic that both targets run.
Value fp8Bits(KB &k, Value y, mlir::gpt::Fp8Format format);

/// The FP8 codes of xs; with `cvt` (CUDA, sm_89+) two per instruction.
SmallVector<Value> fp8Codes(KB &k, llvm::ArrayRef<Value> xs, mlir::gpt::Fp8Format format,
                            bool cvt);

/// amax > 0 and finite: an amax a scale can be taken from.
Value usableAmax(KB &k, Value amax);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_FP8CODES_H
