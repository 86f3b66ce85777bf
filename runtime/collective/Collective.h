//===- Collective.h - collectives across data-parallel ranks --------------===//
//
// The runtime's view of a communicator: this rank, the world size, and an
// in-place all-reduce of a list of buffers (one AllReduce command, one
// bucket). Implementations: HostCollective (simulated ranks in threads of
// one process, reducing through shared memory: tests and the Host target)
// and, for GPUs, NCCL.
//
// Every rank must call allReduce with the same number of buffers, of the
// same sizes and types, in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H
#define GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H

#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cstddef>
#include <vector>

namespace gptc {

class Collective {
public:
  struct Buffer {
    void *data = nullptr;
    size_t count = 0; // elements
    schema::DType dtype = schema::DType::F32;
  };

  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Replaces every buffer, on every rank, by the sum or mean over the
  /// ranks. `stream` is the cudaStream_t to enqueue on (NCCL); the host
  /// implementation ignores it and returns when done.
  virtual Status allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op,
                           void *stream) = 0;
};

} // namespace gptc

#endif // GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H
