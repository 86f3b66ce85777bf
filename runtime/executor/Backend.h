//===- Backend.h - where an executable's programs run ---------------------===//
//
// A Backend owns the memory of one executable's pools and runs its
// programs: the CUDA backend on one GPU, the Host backend on the CPU (for
// tests and the Host target). Both allocate every pool once, when created,
// and check every command they could run (GEMM operands, kernels found),
// so that run() only executes.
//
// Backends address tensors by index and trust the indices: the loader's
// checkExecutable has bounded them. Session is the named, checked API over
// a backend.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_EXECUTOR_BACKEND_H
#define GPTC_RUNTIME_EXECUTOR_BACKEND_H

#include "runtime/collective/Collective.h"
#include "runtime/executable/Executable.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gptc {

class Backend {
public:
  virtual ~Backend() = default;

  virtual schema::TargetKind kind() const = 0;
  /// The device, e.g. "NVIDIA H200" or "host".
  virtual std::string deviceName() const = 0;

  /// Copies exactly the tensor's size_bytes between host memory and the
  /// tensor. Not ordered against a running program: run() has returned.
  virtual Status write(uint32_t tensor, const void *data) = 0;
  virtual Status read(uint32_t tensor, void *data) = 0;
  /// Sets every byte of the tensor to `byte`.
  virtual Status fill(uint32_t tensor, uint8_t byte) = 0;
  /// ZeRO-1: every rank's slice of a sharded tensor (Tensor.shards > 0), in
  /// rank order, into `data` (size_bytes * shards bytes of host memory). A
  /// collective: every rank calls it for the same tensors in the same order.
  /// This session's data-parallel rank (0 without a collective).
  virtual int rank() const { return 0; }
  virtual Status gatherShards(uint32_t tensor, void *data) {
    (void)tensor, (void)data;
    return Status::error("this backend cannot gather ZeRO-1 shards");
  }

  /// Runs the commands of `program` (one of the executable's) in order,
  /// each on its stream, and returns when all of them have finished.
  virtual Status run(const schema::Program &program) = 0;

  // The asynchronous queue, for a step loop without host syncs. Everything
  // enqueued runs in enqueue order: a program launched after a writeAsync
  // sees the bytes, a readAsync after a launch reads its outputs. Host
  // memory given to writeAsync/readAsync must come from allocateHost and
  // stay untouched (or unread) until a fence recorded after the copy has
  // been waited for. The synchronous calls above first finish the queue.

  /// Enqueues a copy of the tensor's size_bytes from host memory.
  virtual Status writeAsync(uint32_t tensor, const void *data) = 0;
  /// Enqueues a copy of the tensor into host memory.
  virtual Status readAsync(uint32_t tensor, void *data) = 0;
  /// Enqueues `program`'s commands and returns without waiting.
  virtual Status launch(const schema::Program &program) = 0;
  /// A fence after everything enqueued so far.
  using Fence = uint64_t;
  virtual StatusOr<Fence> recordFence() = 0;
  /// Returns once everything before the fence has run.
  virtual Status waitFence(Fence fence) = 0;
  /// waitFence(fence), then the seconds between `since` and `fence` passing
  /// on the device's clock: how long the work enqueued between them ran,
  /// counted from when the device reached `since`. `since` is an earlier
  /// fence that no wait has passed yet. (Host timing around waitFence is
  /// off by however long the host was busy elsewhere, e.g. in a launch
  /// that blocks while the device's queue is full.)
  virtual StatusOr<double> waitFenceTimed(Fence since, Fence fence) = 0;
  /// Host memory for the asynchronous copies (page-locked on CUDA), or an
  /// error; freeHost takes it back.
  virtual StatusOr<void *> allocateHost(size_t bytes) = 0;
  virtual void freeHost(void *data) = 0;
};

//===----------------------------------------------------------------------===//
// Shared by the backends
//===----------------------------------------------------------------------===//

/// Checks every RunGemm of every program (blas::checkRunGemm); errors name
/// the program and command.
Status checkGemmCommands(const schema::Executable &exe);

/// Whether any program has an AllReduce (gptc compiled the step for data
/// parallelism: without --world-size, or with --world-size=N > 1).
bool hasCollectives(const schema::Executable &exe);

/// The executable's data-parallel world size (model config "world_size",
/// from gptc --world-size=N): 0 when any number of ranks may run it, or
/// when it has no collectives (one device).
int64_t worldSize(const schema::Executable &exe);

/// An executable compiled for W ranks runs only on W ranks (a missing
/// collective is one rank), and one without collectives only on one. On
/// one rank the backends skip AllReduce commands.
Status checkWorldSize(const schema::Executable &exe, const Collective *collective);

/// The index of `program` in exe.programs().
uint32_t programIndex(const schema::Executable &exe, const schema::Program &program);

/// A launch's arguments as the kernel ABI passes them: `values` holds each
/// argument's 8 bytes (a tensor's address, an int64_t or a double) and
/// argv[i] points to values[i]. Built once per launch command.
/// Move-only: argv points into values.
struct KernelArgs {
  KernelArgs() = default;
  KernelArgs(KernelArgs &&) = default;
  KernelArgs &operator=(KernelArgs &&) = default;
  KernelArgs(const KernelArgs &) = delete;
  KernelArgs &operator=(const KernelArgs &) = delete;

  std::vector<uint64_t> values;
  std::vector<void *> argv;
};
StatusOr<KernelArgs> kernelArgs(const schema::Executable &exe, const schema::LaunchKernel &launch,
                                const std::vector<char *> &poolBases);

/// The arguments of every launch, by program then command (empty for
/// commands that are not launches): what both backends build once.
using LaunchArgTable = std::vector<std::vector<KernelArgs>>;
StatusOr<LaunchArgTable> launchArgTable(const schema::Executable &exe,
                                        const std::vector<char *> &poolBases);

/// The address of tensor `index` given the pools' base addresses.
inline char *tensorAddress(const schema::Executable &exe, const std::vector<char *> &poolBases,
                           uint32_t index) {
  const schema::Tensor *t = exe.tensors()->Get(index);
  return poolBases[t->pool()] + t->offset_bytes();
}

} // namespace gptc

#endif // GPTC_RUNTIME_EXECUTOR_BACKEND_H
