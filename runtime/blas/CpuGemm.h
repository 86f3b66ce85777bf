//===- CpuGemm.h - the schema's GEMM with loops, for the Host target ------===//
//
// Computes exactly what executable.fbs defines for a Gemm, in cuBLASLt's
// column-major terms:
//   D[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] + bias (epilogue Bias)
// and the other epilogues as executable.fbs defines them (GELU, its
// derivative from aux, bias gradients), applied to the unrounded sum.
// with A[b] = a + b*stride_a (elements), op(A) = A or A^T per transa, A
// stored with leading dimension lda, likewise B and C/D (ldc, stride_c;
// D overwrites C). C is read only when beta != 0, so garbage there never
// propagates, as in cuBLASLt. bias has m entries of c_type, shared by all
// columns and batches.
//
// Accumulation is in the compute type, over k in ascending order, each step
// one fused multiply-add, whatever the tiling, vector width or thread
// count, none of which changes a bit of the result: float
// for F32 (and the fast F32 kinds: the CPU has no TF32/BF16 inputs to
// round to), double for F64. Element types F32, F64, BF16 and F16 are
// converted on load and rounded to nearest-even on store; FP8 operands
// (F8E4M3, F8E5M2) are decoded on load and scaled by their RunGemm scales.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_BLAS_CPUGEMM_H
#define GPTC_RUNTIME_BLAS_CPUGEMM_H

#include "runtime/blas/GemmCheck.h"
#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cstdint>

namespace gptc {
class ThreadPool;
} // namespace gptc

namespace gptc::blas {

/// The vector instruction sets cpuGemm has kernels for, in order.
enum class CpuIsa { Generic, Avx2, Avx512 };
/// The best one this CPU runs.
CpuIsa cpuIsa();

/// Runs `gemm` (checked with checkGemm first; `index` names it in errors)
/// on host memory. The operands must span what checkRunGemm requires.
/// Uses cpuIsa()'s kernels on ThreadPool::host().
Status cpuGemm(const schema::Gemm &gemm, uint32_t index, const GemmOperands &ops);
/// With `isa`'s kernels (at most cpuIsa()) on `pool`: for tests, which
/// check that neither changes a bit.
Status cpuGemm(const schema::Gemm &gemm, uint32_t index, const GemmOperands &ops, CpuIsa isa,
               ThreadPool &pool);

/// Element conversions used by cpuGemm, exposed for tests.
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float f16ToFloat(uint16_t h);
uint16_t floatToF16(float f);
/// FP8 (the schema's F8E4M3 and F8E5M2). Encoding rounds to nearest-even
/// and saturates: magnitudes past the largest finite value (448, 57344),
/// infinities included, become it, as CUDA's __NV_SATFINITE conversions
/// do; NaN stays NaN (0x7f / 0x7e with the sign).
float f8e4m3ToFloat(uint8_t v);
uint8_t floatToF8e4m3(float f);
float f8e5m2ToFloat(uint8_t v);
uint8_t floatToF8e5m2(float f);

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_CPUGEMM_H
