//===- CudaBackend.h - run an executable's programs on one GPU ------------===//
//
// Pools are cudaMalloc'ed once (and zeroed); num_streams non-blocking
// streams and num_events events are created once; each kernel's module is
// loaded once from its cubin, falling back to its PTX (JIT-compiled by the
// driver) when the cubin is missing or does not load; cuBLASLt plans are
// cached per GEMM. A program's commands are enqueued in order, each on its
// stream, with RecordEvent/WaitEvent ordering the streams; the other
// streams fork from stream 0 before a program and join it after, so stream
// 0 orders whole programs, the asynchronous copies and the fences (events
// recorded on it); run() then waits for all streams.
//
// With `graphs`, a program's second launch captures all its commands into
// a CUDA graph (the fork/join keeps the streams' overlap as parallel
// branches), and every later launch replays that graph: one launch instead
// of one per command. The first launch runs directly, as a warm-up: it
// builds the cuBLASLt plans and NCCL connections outside the capture. This
// is valid because every address is fixed and per-step values (step, lr
// scale, tokens) are Input tensors, copied into device memory before the
// launch. NCCL collectives are captured like kernels. A capture that fails
// prints one warning and the program launches directly from then on.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_CUDABACKEND_H
#define GPTC_RUNTIME_EXECUTOR_CUDABACKEND_H

#include "runtime/executor/Backend.h"

#include <cstddef>
#include <memory>
#include <string>

namespace gptc {

struct CudaBackendOptions {
  int device = 0;
  bool graphs = false;                          // capture each program once, replay it afterwards
  size_t gemmWorkspaceBytes = size_t(32) << 20; // per stream
  bool gemmAutotune = false;                    // time cuBLASLt's candidates (CublasLtGemm)
  std::string gemmAlgos;                        // autotuning's choices kept in this file
  /// Launch the kernels whose schema entry says they wait for prior grids
  /// (griddepcontrol.wait first, sm_90) with programmatic stream
  /// serialization: their blocks may start while the kernel before them in
  /// the stream drains, and wait for its writes.
  bool programmaticLaunch = true;
  /// This rank's collective for a data-parallel executable (NCCL); null
  /// for one device. AllReduce commands are enqueued through it on their
  /// stream. Must outlive the backend.
  Collective *collective = nullptr;
};

/// Fails with "no CUDA device: <reason>" on a machine without a usable GPU.
/// `exe` must outlive the backend.
StatusOr<std::unique_ptr<Backend>> createCudaBackend(const Executable &exe,
                                                     const CudaBackendOptions &options = {});

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTOR_CUDABACKEND_H
