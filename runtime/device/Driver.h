//===- Driver.h - CUDA driver entry points without linking libcuda --------===//
//
// Loading cubins and launching their kernels needs the driver API
// (cuModuleLoadData, cuLaunchKernel). Linking libcuda would stop every
// runtime binary from even starting on a GPU-less machine, so the entry
// points are fetched at run time through cudart's
// cudaGetDriverEntryPointByVersion (the non-deprecated form of
// cudaGetDriverEntryPoint) and called through this table.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DEVICE_DRIVER_H
#define GPTC_RUNTIME_DEVICE_DRIVER_H

#include "runtime/support/Status.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace gptc::device {

/// The driver functions the runtime calls. Obtain it with Driver::get().
struct Driver {
  /// The process-wide table, loaded on first use; "no CUDA device: <reason>"
  /// when there is no usable GPU or driver.
  static StatusOr<const Driver *> get();

  PFN_cuModuleLoadData_v2000 moduleLoadData = nullptr; // cubin or PTX image
  PFN_cuModuleGetFunction_v2000 moduleGetFunction = nullptr;
  PFN_cuModuleUnload_v2000 moduleUnload = nullptr;
  PFN_cuLaunchKernel_v4000 launchKernel = nullptr;
  PFN_cuLaunchKernelEx_v11060 launchKernelEx = nullptr; // launch attributes (PDL)
  PFN_cuFuncSetAttribute_v9000 funcSetAttribute = nullptr; // dynamic shared memory limit
  PFN_cuGetErrorString_v6000 getErrorString = nullptr;
  PFN_cuGetErrorName_v6000 getErrorName = nullptr;
};

/// The Status of a driver call: ok, or "<file:line>: <call>: <message> (<name>)".
Status cuStatus(CUresult result, const char *call, const char *file, int line);

} // namespace gptc::device

#define GPT_CU_STATUS(call) ::gptc::device::cuStatus((call), #call, __FILE__, __LINE__)

/// Returns the Status of a failed driver call from the enclosing function.
#define GPT_CU_CHECK(call)                                                                         \
  do {                                                                                             \
    if (::gptc::Status gptStatus_ = GPT_CU_STATUS(call); !gptStatus_)                              \
      return gptStatus_;                                                                           \
  } while (0)

#endif // GPTC_RUNTIME_DEVICE_DRIVER_H
