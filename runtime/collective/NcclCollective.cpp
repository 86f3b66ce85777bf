//===- NcclCollective.cpp - collectives across GPUs through NCCL ----------===//

#include "runtime/collective/NcclCollective.h"

#include "runtime/device/CudaCheck.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace gptc {

namespace {

/// "runtime/collective/NcclCollective.cpp:40: ncclAllReduce(...): unhandled
/// cuda error (run with NCCL_DEBUG=INFO for details) [last: <detail>]".
Status ncclStatus(ncclResult_t r, ncclComm_t comm, const char *call, const char *file, int line) {
  if (r == ncclSuccess)
    return Status::ok();
  std::string message = device::sourceLocation(file, line) + ": " + call + ": " +
                        ncclGetErrorString(r);
  // The last error's detail: per communicator when there is one.
  if (const char *last = ncclGetLastError(comm); last && *last)
    message += " [" + std::string(last) + "]";
  if (r == ncclSystemError || r == ncclInternalError || r == ncclUnhandledCudaError)
    message += " (NCCL_DEBUG=INFO shows more)";
  return Status::error(message);
}

#define GPT_NCCL_STATUS(comm, call) ncclStatus((call), (comm), #call, __FILE__, __LINE__)
#define GPT_NCCL_CHECK(comm, call)                                                                 \
  do {                                                                                             \
    if (::gptc::Status gptStatus_ = GPT_NCCL_STATUS(comm, call); !gptStatus_)                      \
      return gptStatus_;                                                                           \
  } while (0)

/// The NCCL type that reduces `t`; `what` ("all-reduce") starts the error.
StatusOr<ncclDataType_t> ncclType(schema::DType t, const char *what = "all-reduce") {
  switch (t) {
  case schema::DType::F32:
    return ncclFloat32;
  case schema::DType::BF16:
    return ncclBfloat16;
  case schema::DType::F16:
    return ncclFloat16;
  default:
    return Status::error(std::string(what) + ": NCCL reduces F32, BF16 and F16 buffers here, got " +
                         schema::EnumNameDType(t));
  }
}

/// The NCCL type that moves `t` (an all-gather only copies), and how many
/// of it make one element: types NCCL has no name for go as bytes.
std::pair<ncclDataType_t, size_t> copyType(schema::DType t) {
  switch (t) {
  case schema::DType::F32:
    return {ncclFloat32, 1};
  case schema::DType::BF16:
    return {ncclBfloat16, 1};
  case schema::DType::F16:
    return {ncclFloat16, 1};
  case schema::DType::F64:
    return {ncclFloat64, 1};
  case schema::DType::I32:
    return {ncclInt32, 1};
  default:
    return {ncclUint8, elementSize(t)};
  }
}

ncclRedOp_t redOpOf(schema::ReduceOp op) {
  return op == schema::ReduceOp::Avg   ? ncclAvg
         : op == schema::ReduceOp::Max ? ncclMax
                                       : ncclSum;
}

} // namespace

struct NcclCollective::Comm {
  ncclComm_t comm = nullptr;
  std::atomic<bool> aborted{false};
  // Held while this rank enqueues, so that abort() from another thread does
  // not free the communicator under an NCCL call that is only enqueueing.
  std::timed_mutex inUse;
};

void disableNvlsUnlessSet() { ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

StatusOr<std::string> ncclVersion() {
  int v = 0;
  GPT_NCCL_CHECK(nullptr, ncclGetVersion(&v));
  // 22809 -> 2.28.9 (NCCL_VERSION: major*10000 + minor*100 + patch).
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

StatusOr<NcclId> newNcclId() {
  disableNvlsUnlessSet(); // before NCCL's first call reads its environment
  ncclUniqueId id;
  GPT_NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
  const auto *bytes = reinterpret_cast<const uint8_t *>(id.internal);
  return NcclId(bytes, bytes + sizeof(id.internal));
}

NcclCollective::NcclCollective(std::unique_ptr<Comm> comm, int rank, int size)
    : comm_(std::move(comm)), rank_(rank), size_(size) {}

StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::create(const NcclId &id, int rank,
                                                                 int size, int device) {
  if (id.size() != NCCL_UNIQUE_ID_BYTES)
    return Status::error("NCCL id has " + std::to_string(id.size()) + " bytes, not " +
                         std::to_string(NCCL_UNIQUE_ID_BYTES));
  if (size < 1 || rank < 0 || rank >= size)
    return Status::error("NCCL rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         " is out of range");
  disableNvlsUnlessSet();
  GPT_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), sizeof(uid.internal));
  auto comm = std::make_unique<Comm>();
  if (Status s = GPT_NCCL_STATUS(nullptr, ncclCommInitRank(&comm->comm, size, uid, rank)); !s)
    return Status::error("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         " on GPU " + std::to_string(device) + ": " + s.message());
  return std::unique_ptr<NcclCollective>(new NcclCollective(std::move(comm), rank, size));
}

NcclCollective::~NcclCollective() {
  if (!comm_->comm)
    return;
  // An aborted communicator is already gone; destroying it again is wrong.
  if (!comm_->aborted)
    (void)GPT_NCCL_STATUS(comm_->comm, ncclCommDestroy(comm_->comm));
}

void NcclCollective::abort() {
  if (!comm_->comm || comm_->aborted.exchange(true))
    return;
  // An enqueue normally returns at once; one that waits for a dead peer
  // (connection set-up) never does, and only the abort can end it.
  bool locked = comm_->inUse.try_lock_for(std::chrono::seconds(5));
  // No per-communicator detail: the abort has freed it.
  (void)GPT_NCCL_STATUS(nullptr, ncclCommAbort(comm_->comm));
  if (locked)
    comm_->inUse.unlock();
}

Status NcclCollective::allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op,
                                 void *stream) {
  std::lock_guard<std::timed_mutex> lock(comm_->inUse);
  if (comm_->aborted)
    return Status::error("all-reduce: the NCCL communicator was aborted (another rank failed)");
  ncclComm_t comm = comm_->comm;
  ncclRedOp_t redOp = redOpOf(op);
  auto s = static_cast<cudaStream_t>(stream);
  // Types first: a refused buffer must not leave half a bucket enqueued.
  std::vector<ncclDataType_t> types;
  for (const Buffer &b : buffers) {
    StatusOr<ncclDataType_t> type = ncclType(b.dtype);
    if (!type)
      return type.status();
    types.push_back(*type);
  }
  // One group: NCCL fuses the bucket's buffers into one launch.
  GPT_NCCL_CHECK(comm, ncclGroupStart());
  Status enqueued = Status::ok();
  for (size_t i = 0; i < buffers.size() && enqueued; ++i)
    enqueued = GPT_NCCL_STATUS(comm, ncclAllReduce(buffers[i].data, buffers[i].data,
                                                   buffers[i].count, types[i], redOp, comm, s));
  // Close the group on every path, or the next NCCL call of this thread
  // joins a broken one.
  Status ended = GPT_NCCL_STATUS(comm, ncclGroupEnd());
  return !enqueued ? enqueued : ended;
}

Status NcclCollective::reduceScatter(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                                     schema::ReduceOp op, void *stream) {
  std::lock_guard<std::timed_mutex> lock(comm_->inUse);
  if (comm_->aborted)
    return Status::error(
        "reduce-scatter: the NCCL communicator was aborted (another rank failed)");
  // Every check before the group: a refused buffer must not leave half a
  // bucket enqueued.
  if (Status s = checkScatterGather(false, src, dst, rank_, size_); !s)
    return s;
  std::vector<ncclDataType_t> types;
  for (const Buffer &b : src) {
    StatusOr<ncclDataType_t> type = ncclType(b.dtype, "reduce-scatter");
    if (!type)
      return type.status();
    types.push_back(*type);
  }
  ncclComm_t comm = comm_->comm;
  ncclRedOp_t redOp = redOpOf(op);
  auto s = static_cast<cudaStream_t>(stream);
  GPT_NCCL_CHECK(comm, ncclGroupStart());
  Status enqueued = Status::ok();
  for (size_t i = 0; i < src.size() && enqueued; ++i)
    enqueued = GPT_NCCL_STATUS(comm, ncclReduceScatter(src[i].data, dst[i].data, dst[i].count,
                                                       types[i], redOp, comm, s));
  Status ended = GPT_NCCL_STATUS(comm, ncclGroupEnd());
  return !enqueued ? enqueued : ended;
}

Status NcclCollective::allGather(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                                 void *stream) {
  std::lock_guard<std::timed_mutex> lock(comm_->inUse);
  if (comm_->aborted)
    return Status::error("all-gather: the NCCL communicator was aborted (another rank failed)");
  if (Status s = checkScatterGather(true, src, dst, rank_, size_); !s)
    return s;
  ncclComm_t comm = comm_->comm;
  auto s = static_cast<cudaStream_t>(stream);
  GPT_NCCL_CHECK(comm, ncclGroupStart());
  Status enqueued = Status::ok();
  for (size_t i = 0; i < src.size() && enqueued; ++i) {
    // In place (src == dst + rank * count) NCCL recognizes by the addresses.
    auto [type, per] = copyType(src[i].dtype);
    enqueued = GPT_NCCL_STATUS(
        comm, ncclAllGather(src[i].data, dst[i].data, src[i].count * per, type, comm, s));
  }
  Status ended = GPT_NCCL_STATUS(comm, ncclGroupEnd());
  return !enqueued ? enqueued : ended;
}

} // namespace gptc
