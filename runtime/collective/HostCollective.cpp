//===- HostCollective.cpp - simulated ranks in threads of one process -----===//

#include "runtime/collective/HostCollective.h"

#include "runtime/blas/CpuGemm.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace gptc {

class HostMember final : public Collective {
public:
  HostMember(HostGroup &group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  Status allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op, void *) override;

private:
  HostGroup &group_;
  int rank_;
};

HostGroup::HostGroup(int size) : size_(size), posted_(size > 0 ? size : 0, nullptr) {}

std::unique_ptr<Collective> HostGroup::member(int rank) {
  return std::make_unique<HostMember>(*this, rank);
}

void HostGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

bool HostGroup::barrier() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_)
    return false;
  unsigned long gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  return generation_ != gen;
}

static float load(const Collective::Buffer &b, size_t e) {
  switch (b.dtype) {
  case schema::DType::BF16:
    return blas::bf16ToFloat(static_cast<const uint16_t *>(b.data)[e]);
  case schema::DType::F16:
    return blas::f16ToFloat(static_cast<const uint16_t *>(b.data)[e]);
  default:
    return static_cast<const float *>(b.data)[e];
  }
}

static void store(const Collective::Buffer &b, size_t e, float x) {
  switch (b.dtype) {
  case schema::DType::BF16:
    static_cast<uint16_t *>(b.data)[e] = blas::floatToBf16(x);
    break;
  case schema::DType::F16:
    static_cast<uint16_t *>(b.data)[e] = blas::floatToF16(x);
    break;
  default:
    static_cast<float *>(b.data)[e] = x;
  }
}

/// Each rank reduces its share of every buffer (elements [r n / N, (r+1) n
/// / N)) reading all ranks' buffers, waits until every rank has read, then
/// writes its share into every rank's buffer.
Status HostMember::allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op, void *) {
  HostGroup &g = group_;
  const int n = g.size();
  Status aborted = Status::error("all-reduce: another rank failed (simulated ranks aborted)");
  g.posted_[rank_] = &buffers;
  if (!g.barrier())
    return aborted;
  // Every rank checks the same thing, so all fail together.
  for (int r = 0; r < n; ++r) {
    const std::vector<Buffer> &other = *g.posted_[r];
    bool same = other.size() == buffers.size();
    for (size_t i = 0; same && i < buffers.size(); ++i)
      same = other[i].count == buffers[i].count && other[i].dtype == buffers[i].dtype;
    if (!same)
      return Status::error("all-reduce: rank " + std::to_string(r) + " passed other buffers than rank " +
                           std::to_string(rank_));
  }
  for (const Buffer &b : buffers)
    if (b.dtype != schema::DType::F32 && b.dtype != schema::DType::BF16 &&
        b.dtype != schema::DType::F16)
      return Status::error(std::string("all-reduce: the host collective reduces F32, BF16 and "
                                       "F16, got ") +
                           schema::EnumNameDType(b.dtype));
  // Narrow buffers are summed in f32 and rounded once, as NCCL's kernels
  // widen each element to reduce it.
  std::vector<std::vector<float>> mine(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    size_t lo = buffers[i].count * rank_ / n, hi = buffers[i].count * (rank_ + 1) / n;
    const bool max = op == schema::ReduceOp::Max;
    mine[i].assign(hi - lo, max ? -INFINITY : 0.0f);
    for (int r = 0; r < n; ++r) {
      const Buffer &src = (*g.posted_[r])[i];
      for (size_t e = lo; e < hi; ++e) {
        float x = load(src, e);
        mine[i][e - lo] = max ? std::max(mine[i][e - lo], x) : mine[i][e - lo] + x;
      }
    }
    if (op == schema::ReduceOp::Avg)
      for (float &x : mine[i])
        x /= static_cast<float>(n);
  }
  if (!g.barrier())
    return aborted;
  for (size_t i = 0; i < buffers.size(); ++i) {
    size_t lo = buffers[i].count * rank_ / n;
    for (int r = 0; r < n; ++r)
      for (size_t e = 0; e < mine[i].size(); ++e)
        store((*g.posted_[r])[i], lo + e, mine[i][e]);
  }
  if (!g.barrier())
    return aborted;
  return Status::ok();
}

} // namespace gptc
