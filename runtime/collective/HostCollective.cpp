//===- HostCollective.cpp - simulated ranks in threads of one process -----===//

#include "runtime/collective/HostCollective.h"

#include "runtime/blas/CpuGemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace gptc {

class HostMember final : public Collective {
public:
  HostMember(HostGroup &group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  Status allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op, void *) override;
  Status reduceScatter(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                       schema::ReduceOp op, void *) override;
  Status allGather(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                   void *) override;

private:
  using Call = HostGroup::Call;
  /// Posts this rank's call and waits for every rank; then fails (on every
  /// rank) unless all ranks made the same call.
  Status meet(Call call, const std::vector<Buffer> *src, const std::vector<Buffer> *dst);
  /// Returns `error` once every rank has read the others' posts (all ranks
  /// fail at the same check), so that none posts its next call early.
  Status fail(Status error);
  /// Every rank's source buffer `i` of the current call.
  std::vector<const Buffer *> sources(size_t i) const;
  /// The checks every rank makes of every rank's reduceScatter (gather
  /// false) or allGather post, in the same order, so that all fail together.
  Status checkPosts(bool gather) const;
  static const char *callName(Call call);
  static Status abortedError(Call call);

  HostGroup &group_;
  int rank_;
};

HostGroup::HostGroup(int size) : size_(size), posted_(size > 0 ? size : 0) {}

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

const char *HostMember::callName(Call call) {
  switch (call) {
  case Call::ReduceScatter:
    return "reduce-scatter";
  case Call::AllGather:
    return "all-gather";
  default:
    return "all-reduce";
  }
}

Status HostMember::abortedError(Call call) {
  return Status::error(std::string(callName(call)) +
                       ": another rank failed (simulated ranks aborted)");
}

Status HostMember::meet(Call call, const std::vector<Buffer> *src,
                        const std::vector<Buffer> *dst) {
  HostGroup &g = group_;
  g.posted_[rank_] = {call, src, dst};
  if (!g.barrier())
    return abortedError(call);
  for (int r = 0; r < g.size(); ++r)
    if (g.posted_[r].call != call)
      return fail(Status::error(std::string(callName(call)) + ": rank " + std::to_string(r) +
                                " called " + callName(g.posted_[r].call) + " meanwhile"));
  return Status::ok();
}

Status HostMember::fail(Status error) {
  (void)group_.barrier(); // aborted or not, the error is the answer
  return error;
}

std::vector<const Collective::Buffer *> HostMember::sources(size_t i) const {
  std::vector<const Buffer *> out;
  for (const HostGroup::Posted &p : group_.posted_)
    out.push_back(&(*p.src)[i]);
  return out;
}

/// Elements [lo, hi) of `srcs` (one buffer per rank) reduced in rank order
/// 0..N-1 in f32 (then divided by N for a mean): narrow buffers are summed
/// in f32 and rounded once (by store), as NCCL's kernels widen each element
/// to reduce it. allReduce and reduceScatter share it, so that a
/// reduce-scatter's slice is the all-reduce's bit for bit.
static std::vector<float> reduceRange(const std::vector<const Collective::Buffer *> &srcs,
                                      size_t lo, size_t hi, schema::ReduceOp op) {
  const bool max = op == schema::ReduceOp::Max;
  std::vector<float> out(hi - lo, max ? -INFINITY : 0.0f);
  for (const Collective::Buffer *src : srcs)
    for (size_t e = lo; e < hi; ++e) {
      float x = load(*src, e);
      out[e - lo] = max ? std::max(out[e - lo], x) : out[e - lo] + x;
    }
  if (op == schema::ReduceOp::Avg)
    for (float &x : out)
      x /= static_cast<float>(srcs.size());
  return out;
}

static Status checkReducible(const char *what, const std::vector<Collective::Buffer> &buffers) {
  for (const Collective::Buffer &b : buffers)
    if (b.dtype != schema::DType::F32 && b.dtype != schema::DType::BF16 &&
        b.dtype != schema::DType::F16)
      return Status::error(std::string(what) +
                           ": the host collective reduces F32, BF16 and F16, got " +
                           schema::EnumNameDType(b.dtype));
  return Status::ok();
}

/// Each rank reduces its share of every buffer (elements [r n / N, (r+1) n
/// / N)) reading all ranks' buffers, waits until every rank has read, then
/// writes its share into every rank's buffer.
Status HostMember::allReduce(const std::vector<Buffer> &buffers, schema::ReduceOp op, void *) {
  HostGroup &g = group_;
  const int n = g.size();
  if (Status met = meet(Call::AllReduce, &buffers, nullptr); !met)
    return met;
  // Every rank checks the same thing, so all fail together.
  for (int r = 0; r < n; ++r) {
    const std::vector<Buffer> &other = *g.posted_[r].src;
    bool same = other.size() == buffers.size();
    for (size_t i = 0; same && i < buffers.size(); ++i)
      same = other[i].count == buffers[i].count && other[i].dtype == buffers[i].dtype;
    if (!same)
      return fail(Status::error("all-reduce: rank " + std::to_string(r) +
                                " passed other buffers than rank " + std::to_string(rank_)));
  }
  if (Status s = checkReducible("all-reduce", buffers); !s)
    return fail(s);
  std::vector<std::vector<float>> mine(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    mine[i] = reduceRange(sources(i), buffers[i].count * rank_ / n,
                          buffers[i].count * (rank_ + 1) / n, op);
  if (!g.barrier())
    return abortedError(Call::AllReduce);
  for (size_t i = 0; i < buffers.size(); ++i) {
    size_t lo = buffers[i].count * rank_ / n;
    for (int r = 0; r < n; ++r)
      for (size_t e = 0; e < mine[i].size(); ++e)
        store((*g.posted_[r].src)[i], lo + e, mine[i][e]);
  }
  if (!g.barrier())
    return abortedError(Call::AllReduce);
  return Status::ok();
}

/// Each rank's own buffers, then each rank's against rank 0's.
Status HostMember::checkPosts(bool gather) const {
  const std::vector<HostGroup::Posted> &posted = group_.posted_;
  const int n = static_cast<int>(posted.size());
  for (int r = 0; r < n; ++r)
    if (Status s = checkScatterGather(gather, *posted[r].src, *posted[r].dst, r, n); !s)
      return s;
  const std::vector<Collective::Buffer> &first = *posted[0].src;
  for (int r = 1; r < n; ++r) {
    const std::vector<Collective::Buffer> &other = *posted[r].src;
    std::string what = gather ? "all-gather: " : "reduce-scatter: ";
    what += "rank " + std::to_string(r) + " passed other buffers than rank 0";
    if (other.size() != first.size())
      return Status::error(what + " (" + std::to_string(other.size()) + " against " +
                           std::to_string(first.size()) + ")");
    for (size_t i = 0; i < first.size(); ++i)
      if (other[i].count != first[i].count || other[i].dtype != first[i].dtype)
        return Status::error(what + " (buffer " + std::to_string(i) + ": " +
                             std::to_string(other[i].count) + " " +
                             schema::EnumNameDType(other[i].dtype) + " source elements against " +
                             std::to_string(first[i].count) + " " +
                             schema::EnumNameDType(first[i].dtype) + ")");
  }
  return Status::ok();
}

/// Each rank reduces its own slice of every buffer from all ranks' sources
/// into its own destination (which no other rank reads: the in-place form
/// too, as the other ranks read only their own slices), then waits until
/// every rank has read, so that none changes its source early.
Status HostMember::reduceScatter(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                                 schema::ReduceOp op, void *) {
  HostGroup &g = group_;
  if (Status met = meet(Call::ReduceScatter, &src, &dst); !met)
    return met;
  if (Status s = checkPosts(false); !s)
    return fail(s);
  if (Status s = checkReducible("reduce-scatter", src); !s)
    return fail(s);
  for (size_t i = 0; i < src.size(); ++i) {
    const size_t c = dst[i].count;
    std::vector<float> mine = reduceRange(sources(i), c * rank_, c * (rank_ + 1), op);
    for (size_t e = 0; e < c; ++e)
      store(dst[i], e, mine[e]);
  }
  if (!g.barrier())
    return abortedError(Call::ReduceScatter);
  return Status::ok();
}

/// Each rank copies every rank's source into its own destination. In
/// place, rank r's source is slice r of its own destination, which rank r
/// does not write (it skips the copy onto itself) and no other rank writes
/// (each writes only its own destination); the last barrier keeps every
/// source unchanged until all ranks have read it.
Status HostMember::allGather(const std::vector<Buffer> &src, const std::vector<Buffer> &dst,
                             void *) {
  HostGroup &g = group_;
  if (Status met = meet(Call::AllGather, &src, &dst); !met)
    return met;
  if (Status s = checkPosts(true); !s)
    return fail(s);
  for (size_t i = 0; i < src.size(); ++i) {
    const size_t bytes = src[i].count * elementSize(src[i].dtype);
    if (bytes == 0)
      continue;
    std::vector<const Buffer *> from = sources(i);
    for (int r = 0; r < g.size(); ++r) {
      char *to = static_cast<char *>(dst[i].data) + static_cast<size_t>(r) * bytes;
      if (from[r]->data != to)
        std::memcpy(to, from[r]->data, bytes);
    }
  }
  if (!g.barrier())
    return abortedError(Call::AllGather);
  return Status::ok();
}

} // namespace gptc
