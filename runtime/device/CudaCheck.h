//===- CudaCheck.h - CUDA runtime and cuBLASLt errors as Status ----------===//
//
// Every CUDA runtime and cuBLASLt call in the runtime goes through one of
// these macros, so an error always names the call, its source location and
// the library's own message:
//   runtime/executor/CudaBackend.cpp:120: cudaMalloc(&p, n): out of memory
//   (cudaErrorMemoryAllocation)
// GPT_CUDA_CHECK / GPT_CUBLAS_CHECK return the Status from the enclosing
// function (which returns Status or StatusOr<T>); the *_STATUS forms only
// evaluate to it, for teardown code that must go on after an error.
// Driver API results (CUresult) have GPT_CU_CHECK in Driver.h.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DEVICE_CUDACHECK_H
#define GPTC_RUNTIME_DEVICE_CUDACHECK_H

#include "runtime/support/Status.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

namespace gptc::device {

/// "runtime/x/File.cpp:12": `file` shortened to the part from "runtime/".
std::string sourceLocation(const char *file, int line);

inline Status cudaStatus(cudaError_t err, const char *call, const char *file, int line) {
  if (err == cudaSuccess)
    return Status::ok();
  return Status::error(sourceLocation(file, line) + ": " + call + ": " + cudaGetErrorString(err) +
                       " (" + cudaGetErrorName(err) + ")");
}

// Defined inline so that only code that calls cuBLASLt links it.
inline Status cublasStatus(cublasStatus_t err, const char *call, const char *file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(sourceLocation(file, line) + ": " + call + ": " +
                       cublasLtGetStatusString(err) + " (" + cublasLtGetStatusName(err) + ")");
}

} // namespace gptc::device

#define GPT_CUDA_STATUS(call) ::gptc::device::cudaStatus((call), #call, __FILE__, __LINE__)
#define GPT_CUBLAS_STATUS(call) ::gptc::device::cublasStatus((call), #call, __FILE__, __LINE__)

#define GPT_CUDA_CHECK(call)                                                                       \
  do {                                                                                             \
    if (::gptc::Status gptStatus_ = GPT_CUDA_STATUS(call); !gptStatus_)                            \
      return gptStatus_;                                                                           \
  } while (0)

#define GPT_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                             \
    if (::gptc::Status gptStatus_ = GPT_CUBLAS_STATUS(call); !gptStatus_)                          \
      return gptStatus_;                                                                           \
  } while (0)

#endif // GPTC_RUNTIME_DEVICE_CUDACHECK_H
