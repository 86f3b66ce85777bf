//===- GemmCheck.h - operand shapes and extents of a schema::Gemm ---------===//
//
// What the FlatBuffers schema cannot say about a GEMM: positive sizes,
// leading dimensions that hold a column, supported types and epilogues,
// and (per RunGemm) every operand element inside its tensor. Both backends
// run these checks once, before any program runs, so neither cuBLASLt nor
// the CPU loops can touch memory outside a tensor.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_BLAS_GEMMCHECK_H
#define GPTC_RUNTIME_BLAS_GEMMCHECK_H

#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cstdint>

namespace gptc::blas {

/// One operand as stored: `rows x cols` column-major with leading dimension
/// `ld`, `stride` elements between batches.
struct StoredMatrix {
  int64_t rows, cols, ld, stride;
};

/// A is stored (m x k), or (k x m) when transa; B (k x n), or (n x k) when
/// transb; C/D (m x n).
StoredMatrix storedA(const schema::Gemm &g);
StoredMatrix storedB(const schema::Gemm &g);
StoredMatrix storedC(const schema::Gemm &g);

/// Elements from the first to one past the last one the operand touches
/// over `batch` batches: (batch-1)*stride + (cols-1)*ld + rows.
uint64_t spanElements(const StoredMatrix &s, int64_t batch);

/// Pointers of one RunGemm (see RunGemm in executable.fbs): host memory
/// for cpuGemm, device memory for CublasLtGemm.
struct GemmOperands {
  const void *a = nullptr;
  const void *b = nullptr;
  void *c = nullptr;    // D, read as C when beta != 0
  void *bias = nullptr; // bias (read) or bias gradient (written), epilogueBiasLength entries
  void *aux = nullptr;  // GELU pre-activation, D's layout: written by *GeluAux, read by DGelu
  const void *aScale = nullptr; // FP8: one f32 each, else null
  const void *bScale = nullptr;
  const void *dScale = nullptr; // FP8 D: one f32 scaling D, else null
  void *amaxD = nullptr;        // FP8 D: one f32, set to max |D| before scaling
};

/// The pointers of `cmd`, `address(tensor index)` giving each tensor's.
template <typename AddressFn>
GemmOperands gemmOperands(const schema::RunGemm &cmd, AddressFn address) {
  GemmOperands ops;
  ops.a = address(cmd.a());
  ops.b = address(cmd.b());
  ops.c = address(cmd.c());
  ops.bias = cmd.bias() >= 0 ? address(uint32_t(cmd.bias())) : nullptr;
  ops.aux = cmd.aux() >= 0 ? address(uint32_t(cmd.aux())) : nullptr;
  ops.aScale = cmd.a_scale() >= 0 ? address(uint32_t(cmd.a_scale())) : nullptr;
  ops.bScale = cmd.b_scale() >= 0 ? address(uint32_t(cmd.b_scale())) : nullptr;
  ops.dScale = cmd.d_scale() >= 0 ? address(uint32_t(cmd.d_scale())) : nullptr;
  ops.amaxD = cmd.amax_d() >= 0 ? address(uint32_t(cmd.amax_d())) : nullptr;
  return ops;
}

/// True for the FP8 element types (F8E4M3, F8E5M2).
bool isFp8(schema::DType t);
/// True when A or B is FP8 (checkGemm then requires both, and the rest of
/// the FP8 rules in executable.fbs).
bool isFp8Gemm(const schema::Gemm &g);

/// True for the epilogues this runtime implements: all of the schema's.
bool isSupportedEpilogue(schema::Epilogue e);
/// True when the epilogue reads a bias vector (Bias, BiasGelu, BiasGeluAux).
bool epilogueReadsBias(schema::Epilogue e);
/// True when the epilogue writes a bias gradient (BGradA, BGradB, DGeluBGrad).
bool epilogueWritesBias(schema::Epilogue e);
/// Entries of the epilogue's bias vector: m (D's rows) for the bias,
/// BGradA and DGeluBGrad, n (D's columns) for BGradB, 0 when it has none.
int64_t epilogueBiasLength(const schema::Gemm &g);
/// True when the epilogue has an aux matrix (GeluAux, BiasGeluAux, DGelu,
/// DGeluBGrad).
bool epilogueHasAux(schema::Epilogue e);
/// True for the GELU gradient epilogues, which read aux (DGelu, DGeluBGrad).
bool epilogueAppliesGeluGrad(schema::Epilogue e);
/// True for the GELU forward epilogues (Gelu, GeluAux, BiasGelu, BiasGeluAux).
bool epilogueAppliesGelu(schema::Epilogue e);

/// Checks the GEMM alone: sizes, leading dimensions, strides, types and
/// epilogue (those beyond Bias need batch 1 and beta 0, and an aux matrix
/// needs ldc divisible by 8, as cuBLASLt does), and FP8's rules, an FP8 D's
/// among them (see executable.fbs). Errors start with "GEMM <index>: ".
Status checkGemm(const schema::Gemm &g, uint32_t index);

/// Checks one RunGemm of `exe`: its GEMM (checkGemm), the operand tensors'
/// dtypes and that each operand's span fits inside its tensor, a bias
/// tensor exactly when the epilogue takes one (epilogueBiasLength entries
/// of c_type) and an aux tensor exactly when it has one (D's span, c_type),
/// F32 scale tensors exactly when the operands are FP8, and an F32 D scale
/// and amax_d exactly when D is FP8 (D then spans its codes).
Status checkRunGemm(const schema::Executable &exe, const schema::RunGemm &cmd);

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_GEMMCHECK_H
