//===- Collective.h - collectives across data-parallel ranks --------------===//
//
// The runtime's view of a communicator: this rank, the world size, an
// in-place all-reduce of a list of buffers (one AllReduce command, one
// bucket), and ZeRO-1's pair: a reduce-scatter of the gradients (each rank
// keeps the slice whose optimizer state it owns) and an all-gather of the
// updated weights. Implementations: HostCollective (simulated ranks in
// threads of one process, reducing through shared memory: tests and the
// Host target) and, for GPUs, NCCL.
//
// Every rank must make the same calls with the same number of buffers, of
// the same sizes and types, in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H
#define GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H

#include "runtime/executable/Executable.h"
#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
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
  /// ZeRO-1's gradient step: dst[i] (count c) becomes this rank's slice,
  /// elements [rank*c, (rank+1)*c), of the sum, mean (Avg) or maximum over
  /// the ranks of src[i] (count c*size(), same dtype). src and dst do not
  /// overlap (NCCL's in-place form, dst == src + rank*c elements, is also
  /// accepted). `stream` as for allReduce.
  virtual Status reduceScatter(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                               schema::ReduceOp op, void *stream) = 0;
  /// ZeRO-1's weight step: dst[i] (count c*size()) becomes every rank's src[i]
  /// (count c) in rank order; src[i] may be dst[i]'s own slice of this rank
  /// (in place, as NCCL allows: src == dst + rank*c elements) or another
  /// buffer. Any dtype (copied by bytes). `stream` as for allReduce.
  virtual Status allGather(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                           void *stream) = 0;

protected:
  /// The checks of one rank's reduceScatter (gather false) or allGather
  /// (gather true) buffers that need no other rank: as many sources as
  /// destinations, equal dtypes pairwise, counts in the ratio `size`, and
  /// no overlap but the in-place form. Errors start "reduce-scatter: " or
  /// "all-gather: " and name the rank and buffer.
  static Status checkScatterGather(bool gather, const std::vector<Buffer> &src,
                                   const std::vector<Buffer> &dst, int rank, int size) {
    const std::string what = gather ? "all-gather: " : "reduce-scatter: ";
    const std::string ofRank = "rank " + std::to_string(rank);
    if (src.size() != dst.size())
      return Status::error(what + ofRank + " passes " + std::to_string(src.size()) +
                           " source buffers but " + std::to_string(dst.size()) +
                           " destination buffers");
    for (size_t i = 0; i < src.size(); ++i) {
      const std::string at = what + "buffer " + std::to_string(i) + " of " + ofRank + ": ";
      const Buffer &s = src[i], &d = dst[i];
      if (s.dtype != d.dtype)
        return Status::error(at + "the source is " + schema::EnumNameDType(s.dtype) +
                             " but the destination " + schema::EnumNameDType(d.dtype));
      const uint32_t bytes = elementSize(s.dtype);
      if (bytes == 0)
        return Status::error(at + "unknown dtype " + std::to_string(static_cast<int>(s.dtype)));
      // The whole buffer and the slice: gather's destination, scatter's source.
      const Buffer &whole = gather ? d : s, &slice = gather ? s : d;
      if (whole.count != slice.count * static_cast<size_t>(size))
        return Status::error(at + (gather ? "the destination" : "the source") + " has " +
                             std::to_string(whole.count) + " elements, not " +
                             std::to_string(slice.count * static_cast<size_t>(size)) + " (" +
                             (gather ? "the source's " : "the destination's ") +
                             std::to_string(slice.count) + " times " + std::to_string(size) +
                             " ranks)");
      const auto w = reinterpret_cast<uintptr_t>(whole.data),
                 p = reinterpret_cast<uintptr_t>(slice.data);
      const size_t wBytes = whole.count * bytes, pBytes = slice.count * bytes;
      const bool overlap = wBytes && pBytes && p < w + wBytes && w < p + pBytes;
      if (overlap && p != w + static_cast<size_t>(rank) * pBytes)
        return Status::error(at + "the source and the destination overlap other than as " +
                             ofRank + "'s slice (in place)");
    }
    return Status::ok();
  }
};

} // namespace gptc

#endif // GPTC_RUNTIME_COLLECTIVE_COLLECTIVE_H
