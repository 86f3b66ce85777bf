//===- HostBackend.h - run an executable's programs on the CPU ------------===//
//
// The Host target, and the CPU twin of the CUDA backend for tests: pools
// are aligned host allocations, kernels are symbols of the executable's
// host_object (written to a temporary file and dlopen'ed), called per the
// Host kernel ABI in executable.fbs; RunGemm runs blas::cpuGemm. Commands
// run serially in list order, which the compiler emits as a valid
// serialization of the streams, so events are no-ops. The asynchronous
// queue (writeAsync, launch, readAsync) runs only when a fence is waited
// for, so tests on the host catch a step loop that reads too early.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_HOSTBACKEND_H
#define GPTC_RUNTIME_EXECUTOR_HOSTBACKEND_H

#include "runtime/executor/Backend.h"

#include <memory>

namespace gptc {

/// Allocates the pools (zeroed), loads host_object and finds every kernel.
/// `exe` must outlive the backend.
StatusOr<std::unique_ptr<Backend>> createHostBackend(const Executable &exe);

/// One rank of a data-parallel step: `collective` runs the AllReduce
/// commands and must outlive the backend.
StatusOr<std::unique_ptr<Backend>> createHostRankBackend(const Executable &exe,
                                                         Collective *collective);

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTOR_HOSTBACKEND_H
