//===- CublasLtGemm.h - schema::Gemm on cuBLASLt --------------------------===//
//
// Runs the executable's GEMMs with cublasLtMatmul. Per GEMM index a plan
// (matmul descriptor, the four matrix layouts, the heuristic's algorithm)
// is built on first use and cached; it is rebuilt only if a later call's
// pointers are less aligned than the ones it was chosen for (the
// heuristic's algorithm may assume that alignment). One workspace
// allocation, cut into a slice per stream so that GEMMs on concurrent
// streams never share scratch memory.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_BLAS_CUBLASLTGEMM_H
#define GPTC_RUNTIME_BLAS_CUBLASLTGEMM_H

#include "runtime/blas/GemmCheck.h"
#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace gptc::blas {

class CublasLtGemm {
public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

  /// A handle and a workspace of `workspaceBytes` for each of `numStreams`
  /// streams, for an executable with `numGemms` GEMMs. Needs the device
  /// made current.
  static StatusOr<std::unique_ptr<CublasLtGemm>>
  create(uint32_t numGemms, uint32_t numStreams, size_t workspaceBytes = kDefaultWorkspaceBytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm &) = delete;
  CublasLtGemm &operator=(const CublasLtGemm &) = delete;

  /// Enqueues GEMM `index` (`gemm`, already checked by checkRunGemm) on
  /// `stream`, the executable's stream number `streamIndex`.
  Status run(uint32_t index, const schema::Gemm &gemm, const GemmOperands &ops, cudaStream_t stream,
             uint32_t streamIndex);

  /// Frees everything; the first error, if any. The destructor calls it.
  Status release();

private:
  struct Plan;
  CublasLtGemm() = default;
  StatusOr<Plan *> plan(uint32_t index, const schema::Gemm &gemm, const GemmOperands &ops);

  cublasLtHandle_t handle_ = nullptr;
  void *workspace_ = nullptr; // numStreams slices of workspaceBytes_
  size_t workspaceBytes_ = 0;
  uint32_t numStreams_ = 0;
  std::vector<std::unique_ptr<Plan>> plans_; // by GEMM index
};

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_CUBLASLTGEMM_H
