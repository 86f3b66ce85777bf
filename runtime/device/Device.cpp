//===- Device.cpp - CUDA device discovery and properties ------------------===//

#include "runtime/device/Device.h"

#include "runtime/device/CudaCheck.h"

namespace gptc::device {

std::string sourceLocation(const char *file, int line) {
  std::string path(file);
  size_t at = path.rfind("/runtime/");
  if (at != std::string::npos)
    path = path.substr(at + 1);
  else if ((at = path.rfind('/')) != std::string::npos)
    path = path.substr(at + 1);
  return path + ":" + std::to_string(line);
}

StatusOr<int> deviceCount() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return Status::error(std::string("no CUDA device: ") + cudaGetErrorString(err) + " (" +
                         cudaGetErrorName(err) + ")");
  if (count == 0)
    return Status::error("no CUDA device: the driver reports none");
  return count;
}

StatusOr<DeviceInfo> queryDevice(int ordinal) {
  StatusOr<int> count = deviceCount();
  if (!count)
    return count.status();
  if (ordinal < 0 || ordinal >= *count)
    return Status::error("no CUDA device " + std::to_string(ordinal) + ": this machine has " +
                         std::to_string(*count));
  cudaDeviceProp prop{};
  GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.memoryBytes = prop.totalGlobalMem;
  return info;
}

StatusOr<MemoryInfo> memoryInfo() {
  MemoryInfo m;
  size_t freeBytes = 0, totalBytes = 0;
  GPT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  m.freeBytes = freeBytes;
  m.totalBytes = totalBytes;
  return m;
}

Status activateDevice(int ordinal) {
  if (StatusOr<DeviceInfo> info = queryDevice(ordinal); !info)
    return info.status();
  GPT_CUDA_CHECK(cudaSetDevice(ordinal));
  // cudaFree(nullptr) is the idiom that forces the primary context into
  // existence, so driver calls made next find it current.
  GPT_CUDA_CHECK(cudaFree(nullptr));
  return Status::ok();
}

} // namespace gptc::device
