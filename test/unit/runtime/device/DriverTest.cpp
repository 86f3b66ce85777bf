//===- DriverTest.cpp - device discovery and driver entry points ----------===//
//
// Runs on both kinds of machine: without a GPU (CI) every entry point must
// fail with "no CUDA device: <reason>"; with one, the table must be full.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Driver.h"
#include "runtime/device/CudaCheck.h"
#include "runtime/device/Device.h"

#include <gtest/gtest.h>

using namespace gptc;

namespace {

bool haveGpu() { return bool(device::deviceCount()); }

// Verify that a machine without a GPU gets a clear Status, not a crash.
TEST(DriverTest, NoDeviceIsAClearError) {
  if (haveGpu())
    GTEST_SKIP() << "this machine has a GPU";
  StatusOr<const device::Driver *> driver = device::Driver::get();
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.status().message().rfind("no CUDA device: ", 0), 0u)
      << driver.status().message();
  StatusOr<device::DeviceInfo> info = device::queryDevice(0);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.status().message(), driver.status().message());
  EXPECT_FALSE(device::activateDevice(0));
}

// Verify that with a GPU every entry point is found and the device named.
TEST(DriverTest, DeviceHasEveryEntryPoint) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine";
  StatusOr<const device::Driver *> driver = device::Driver::get();
  ASSERT_TRUE(driver) << driver.status().message();
  const device::Driver &d = **driver;
  for (const void *fn : {(const void *)d.moduleLoadData, (const void *)d.moduleGetFunction,
                         (const void *)d.moduleUnload, (const void *)d.launchKernel,
                         (const void *)d.funcSetAttribute, (const void *)d.getErrorString,
                         (const void *)d.getErrorName})
    EXPECT_NE(fn, nullptr);
  StatusOr<device::DeviceInfo> info = device::queryDevice(0);
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->multiprocessors, 0);
  ASSERT_TRUE(device::activateDevice(0));
  // A driver error reads like a runtime one: location, call, message, name.
  Status bad = GPT_CU_STATUS(d.moduleLoadData(nullptr, "not an image"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("DriverTest.cpp:"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("(CUDA_ERROR_"), std::string::npos) << bad.message();
}

// Verify the message format of the runtime-API macro.
TEST(DriverTest, CudaStatusNamesCallAndError) {
  Status s = GPT_CUDA_STATUS(cudaErrorInvalidValue);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("DriverTest.cpp:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(": cudaErrorInvalidValue: invalid argument (cudaErrorInvalidValue)"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(GPT_CUDA_STATUS(cudaSuccess));
}

} // namespace
