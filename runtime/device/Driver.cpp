//===- Driver.cpp - CUDA driver entry points without linking libcuda ------===//

#include "runtime/device/Driver.h"

#include "runtime/device/CudaCheck.h"
#include "runtime/device/Device.h"

#include <mutex>

namespace gptc::device {

namespace {

// The ABI version the typedefs above belong to: every entry point we use
// has kept its signature since CUDA 12.0, and a 12.x or 13.x driver
// serves it.
constexpr unsigned kDriverAbiVersion = 12000;

template <typename Fn> Status fetch(const char *symbol, Fn &fn) {
  void *ptr = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  GPT_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion(symbol, &ptr, kDriverAbiVersion, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !ptr)
    return Status::error(
        std::string("the CUDA driver has no entry point ") + symbol +
        (found == cudaDriverEntryPointVersionNotSufficent ? " for CUDA 12.0" : ""));
  fn = reinterpret_cast<Fn>(ptr);
  return Status::ok();
}

StatusOr<Driver> load() {
  // Ask cudart first: it says why there is no device far better than a
  // failed symbol lookup would.
  if (StatusOr<int> count = deviceCount(); !count)
    return count.status();
  Driver d;
  for (Status s :
       {fetch("cuModuleLoadData", d.moduleLoadData),
        fetch("cuModuleGetFunction", d.moduleGetFunction), fetch("cuModuleUnload", d.moduleUnload),
        fetch("cuLaunchKernel", d.launchKernel), fetch("cuLaunchKernelEx", d.launchKernelEx),
        fetch("cuFuncSetAttribute", d.funcSetAttribute),
        fetch("cuGetErrorString", d.getErrorString), fetch("cuGetErrorName", d.getErrorName)})
    if (!s)
      return s;
  return d;
}

} // namespace

StatusOr<const Driver *> Driver::get() {
  static std::once_flag once;
  static StatusOr<Driver> *driver = nullptr;
  std::call_once(once, [] { driver = new StatusOr<Driver>(load()); });
  if (!*driver)
    return driver->status();
  return &**driver;
}

Status cuStatus(CUresult result, const char *call, const char *file, int line) {
  if (result == CUDA_SUCCESS)
    return Status::ok();
  const char *message = nullptr, *name = nullptr;
  // A failed result implies the table loaded: it is the only way to call.
  StatusOr<const Driver *> driver = Driver::get();
  if (driver) {
    if ((*driver)->getErrorString(result, &message) != CUDA_SUCCESS)
      message = nullptr;
    if ((*driver)->getErrorName(result, &name) != CUDA_SUCCESS)
      name = nullptr;
  }
  return Status::error(sourceLocation(file, line) + ": " + call + ": " +
                       (message ? message : "CUDA driver error") + " (" +
                       (name ? name : "CUresult " + std::to_string(result)) + ")");
}

} // namespace gptc::device
