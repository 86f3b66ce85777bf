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

/// True for the epilogues this runtime implements (None, Bias).
bool isSupportedEpilogue(schema::Epilogue e);
/// True when the epilogue reads the bias vector.
bool epilogueHasBias(schema::Epilogue e);

/// Checks the GEMM alone: sizes, leading dimensions, strides, types and
/// epilogue. Errors start with "GEMM <index>: ".
Status checkGemm(const schema::Gemm &g, uint32_t index);

/// Checks one RunGemm of `exe`: its GEMM (checkGemm), the operand tensors'
/// dtypes and that each operand's span fits inside its tensor, and a bias
/// tensor exactly when the epilogue takes one (m entries of c_type).
Status checkRunGemm(const schema::Executable &exe, const schema::RunGemm &cmd);

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_GEMMCHECK_H
