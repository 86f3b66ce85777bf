//===- NcclCollective.h - collectives across GPUs through NCCL ------------===//
//
// One rank's NCCL communicator as a Collective: allReduce enqueues one
// in-place ncclAllReduce per buffer (grouped, so a bucket is one NCCL
// launch) on the command's stream and returns without waiting; the
// executable's events order it against the compute stream. reduceScatter
// and allGather do the same with ncclReduceScatter and ncclAllGather.
//
// Ranks meet through a 128-byte ncclUniqueId that rank 0 creates
// (newNcclId) and hands to the others: by memory when the ranks are
// threads of one process, by Bootstrap.h's TCP exchange when they are
// processes. create() blocks until every rank has joined.
//
// NVLink multicast (NVLS) is switched off (NCCL_NVLS_ENABLE=0) unless the
// user set the variable: the machines we run on do not allow it.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_COLLECTIVE_NCCLCOLLECTIVE_H
#define GPTC_RUNTIME_COLLECTIVE_NCCLCOLLECTIVE_H

#include "runtime/collective/Collective.h"

#include <memory>
#include <vector>

namespace gptc {

/// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
using NcclId = std::vector<uint8_t>;

/// A fresh id for a new communicator (rank 0 calls this once).
StatusOr<NcclId> newNcclId();

/// Sets NCCL_NVLS_ENABLE=0 unless already set; newNcclId and create call it.
void disableNvlsUnlessSet();

/// "NCCL 2.28.9", or an error when the library does not answer.
StatusOr<std::string> ncclVersion();

class NcclCollective final : public Collective {
public:
  /// Joins communicator `id` as `rank` of `size` on CUDA device `device`
  /// (made current on the calling thread). Blocks until all ranks join.
  static StatusOr<std::unique_ptr<NcclCollective>> create(const NcclId &id, int rank, int size,
                                                          int device);
  ~NcclCollective() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// F32 and BF16 buffers; `stream` is a cudaStream_t of this rank's device.
  Status allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op, void *stream) override;
  /// F32, BF16 and F16 buffers, as allReduce.
  Status reduceScatter(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                       schema::ReduceOp op, void *stream) override;
  /// Any dtype: FP8 goes as bytes.
  Status allGather(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                   void *stream) override;
  /// Aborts the communicator: this rank's pending collectives end and its
  /// later ones fail, and the other ranks' fail instead of waiting for it.
  /// Safe from another thread (gptrun aborts every rank when one fails).
  void abort();

private:
  struct Comm;
  NcclCollective(std::unique_ptr<Comm> comm, int rank, int size);
  std::unique_ptr<Comm> comm_;
  int rank_, size_;
};

} // namespace gptc

#endif // GPTC_RUNTIME_COLLECTIVE_NCCLCOLLECTIVE_H
