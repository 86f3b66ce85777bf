//===- Device.h - CUDA device discovery and properties --------------------===//
//
// The runtime's first CUDA call. On a machine without a GPU or driver (CI)
// it fails with "no CUDA device: <reason>" instead of crashing: the
// binaries link only cudart, which loads libcuda lazily.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DEVICE_DEVICE_H
#define GPTC_RUNTIME_DEVICE_DEVICE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>

namespace gptc::device {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;         // "NVIDIA H200"
  int major = 0, minor = 0; // compute capability
  int multiprocessors = 0;
  uint64_t memoryBytes = 0;
};

/// The number of CUDA devices (>= 1), or "no CUDA device: <reason>".
StatusOr<int> deviceCount();

/// Properties of device `ordinal`; fails like deviceCount() without one.
StatusOr<DeviceInfo> queryDevice(int ordinal);

struct MemoryInfo {
  uint64_t freeBytes = 0, totalBytes = 0;
  uint64_t usedBytes() const { return totalBytes - freeBytes; }
};
/// cudaMemGetInfo of the current device (all processes' use counts).
StatusOr<MemoryInfo> memoryInfo();

/// Makes `ordinal` current and creates its primary context, which the
/// driver entry points (module loading, launches) then use.
Status activateDevice(int ordinal);

} // namespace gptc::device

#endif // GPTC_RUNTIME_DEVICE_DEVICE_H
