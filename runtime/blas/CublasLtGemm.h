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
// With autotuning (opt-in: a choice made by timing can differ between
// runs, and with it the summation order and the bits), a plan built
// outside a graph capture for a GEMM with beta 0 times the heuristic's
// best kCandidates algorithms on its own operands, on its stream (so its
// inputs are the step's), and keeps the fastest; GEMMs with the same descriptor and alignment share
// the choice. Re-running such a GEMM rewrites the same D, aux and bias
// gradient, so the step's results do not change. With an algorithm file
// (gptrun --gemm-algos, GemmAlgoFile.h) the choices it holds are taken
// without timing, each checked by cublasLtMatmulAlgoCheck, and every new
// choice is added to it at once (written atomically), so later runs take
// the same algorithms.
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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace gptc::blas {

class CublasLtGemm {
public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

  /// A handle and a workspace of `workspaceBytes` for each of `numStreams`
  /// streams, for an executable with `numGemms` GEMMs. Needs the device
  /// made current.
  static constexpr int kCandidates = 8;

  /// `algosPath` (non-empty: autotuning with that file, see above) is read
  /// here if it exists; one made by another cuBLASLt or GPU is an error.
  static StatusOr<std::unique_ptr<CublasLtGemm>>
  create(uint32_t numGemms, uint32_t numStreams, size_t workspaceBytes = kDefaultWorkspaceBytes,
         bool autotune = false, const std::string &algosPath = "");
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
  StatusOr<Plan *> plan(uint32_t index, const schema::Gemm &gemm, const GemmOperands &ops,
                        cudaStream_t stream, uint32_t streamIndex);
  /// The fastest of `candidates` on `ops` (see the header comment).
  StatusOr<cublasLtMatmulAlgo_t> fastest(const Plan &p, const schema::Gemm &gemm,
                                         const GemmOperands &ops,
                                         const std::vector<cublasLtMatmulAlgo_t> &candidates,
                                         cudaStream_t stream, uint32_t streamIndex);
  Status launch(const Plan &p, const cublasLtMatmulAlgo_t &algo, const schema::Gemm &gemm,
                const GemmOperands &ops, cudaStream_t stream, uint32_t streamIndex);
  /// Writes every choice so far to the algorithm file.
  Status saveTuned();

  cublasLtHandle_t handle_ = nullptr;
  void *workspace_ = nullptr; // numStreams slices of workspaceBytes_
  size_t workspaceBytes_ = 0;
  uint32_t numStreams_ = 0;
  std::vector<std::unique_ptr<Plan>> plans_; // by GEMM index
  bool autotune_ = false;
  std::map<std::string, cublasLtMatmulAlgo_t> tuned_; // by descriptor and alignment
  std::string algosPath_;                             // the algorithm file, if any
  std::string cublasLtVersion_, deviceName_;          // what the file records
  std::set<std::string> fromFile_;                    // tuned_ keys read, not yet checked
};

} // namespace gptc::blas

#endif // GPTC_RUNTIME_BLAS_CUBLASLTGEMM_H
