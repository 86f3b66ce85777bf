//===- HostBackend.cpp - run an executable's programs on the CPU ----------===//

#include "runtime/executor/HostBackend.h"

#include "runtime/blas/CpuGemm.h"
#include "runtime/support/ThreadPool.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>

namespace gptc {

namespace {

/// Host ABI: extern "C" void name(void **argv, const uint32_t *grid,
/// const uint32_t *block).
using HostKernel = void (*)(void **, const uint32_t *, const uint32_t *);
/// Optional, beside it: `name_range(void **argv, uint64_t begin, uint64_t
/// end)` runs the flat indices (block * block size + thread) [begin, end).
/// Indices write disjoint outputs, as CUDA threads do, so a launch split
/// over threads computes the same bits.
using HostKernelRange = void (*)(void **, uint64_t, uint64_t);

/// A launch is split over the pool once its first run took this long:
/// shorter ones would lose more to waking threads than they gain.
constexpr std::chrono::microseconds kSplitAbove{100};

std::string kernelName(const schema::Kernel &k) { return k.name() ? k.name()->str() : "<unnamed>"; }

class HostBackend final : public Backend {
public:
  HostBackend(const Executable &exe, Collective *collective)
      : exe_(exe), collective_(collective) {}
  ~HostBackend() override {
    for (char *p : pools_)
      std::free(p);
    if (library_)
      dlclose(library_);
  }

  Status init();

  schema::TargetKind kind() const override { return schema::TargetKind::Host; }
  std::string deviceName() const override { return "host"; }

  Status write(uint32_t tensor, const void *data) override {
    if (Status s = drain(queue_.size()); !s)
      return s;
    std::memcpy(address(tensor), data, size(tensor));
    return Status::ok();
  }
  Status read(uint32_t tensor, void *data) override {
    if (Status s = drain(queue_.size()); !s)
      return s;
    std::memcpy(data, address(tensor), size(tensor));
    return Status::ok();
  }
  int rank() const override { return collective_ ? collective_->rank() : 0; }
  Status gatherShards(uint32_t tensor, void *data) override {
    if (Status s = drain(queue_.size()); !s)
      return s;
    const schema::Tensor *t = exe_.get().tensors()->Get(tensor);
    if (!collective_ || t->shards() != uint32_t(collective_->size()))
      return Status::error("tensor " + std::to_string(tensor) + " is a shard of " +
                           std::to_string(t->shards()) + " ranks, and this session has " +
                           std::to_string(collective_ ? collective_->size() : 1));
    size_t count = size(tensor) / elementSize(t->dtype());
    return collective_->allGather({{address(tensor), count, t->dtype()}},
                                  {{data, count * t->shards(), t->dtype()}}, nullptr);
  }
  Status fill(uint32_t tensor, uint8_t byte) override {
    if (Status s = drain(queue_.size()); !s)
      return s;
    std::memset(address(tensor), byte, size(tensor));
    return Status::ok();
  }
  Status run(const schema::Program &program) override {
    if (Status s = drain(queue_.size()); !s)
      return s;
    return execute(program);
  }

  // The queue runs nothing until a fence is waited for, later than any
  // device would: a caller that reads results or reuses a buffer before
  // waiting sees stale bytes in the host tests, as it could on a GPU.
  Status writeAsync(uint32_t tensor, const void *data) override {
    queue_.push_back([this, tensor, data] {
      std::memcpy(address(tensor), data, size(tensor));
      return Status::ok();
    });
    return Status::ok();
  }
  Status readAsync(uint32_t tensor, void *data) override {
    queue_.push_back([this, tensor, data] {
      std::memcpy(data, address(tensor), size(tensor));
      return Status::ok();
    });
    return Status::ok();
  }
  Status launch(const schema::Program &program) override {
    queue_.push_back([this, &program] { return execute(program); });
    return Status::ok();
  }
  // A fence is an operation of its own, which notes when the queue ran
  // past it: the host's clock stands in for the device's.
  StatusOr<Fence> recordFence() override {
    Fence f = done_ + queue_.size() + 1;
    queue_.push_back([this, f] {
      passedAt_[f] = Clock::now();
      return Status::ok();
    });
    return f;
  }
  Status waitFence(Fence fence) override {
    Status s = waitFenceRun(fence);
    if (fence <= done_) { // recorded: the queue ran past it, or dropped it
      passedAt_.erase(passedAt_.begin(), passedAt_.upper_bound(fence));
      waited_ = std::max(waited_, fence);
    }
    return s;
  }
  StatusOr<double> waitFenceTimed(Fence since, Fence fence) override {
    if (since >= fence)
      return Status::error("fence " + std::to_string(since) + " is not before fence " +
                           std::to_string(fence));
    if (since <= waited_)
      return Status::error("fence " + std::to_string(since) + " was already waited for");
    if (Status s = waitFenceRun(fence); !s)
      return s;
    auto start = passedAt_.find(since), end = passedAt_.find(fence);
    if (start == passedAt_.end() || end == passedAt_.end())
      return Status::error("fence " + std::to_string(start == passedAt_.end() ? since : fence) +
                           " was never recorded");
    double seconds = std::chrono::duration<double>(end->second - start->second).count();
    if (Status s = waitFence(fence); !s) // forgets the fences it passed
      return s;
    return seconds;
  }
  StatusOr<void *> allocateHost(size_t bytes) override {
    void *p = std::malloc(std::max<size_t>(bytes, 1));
    if (!p)
      return Status::error("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return p;
  }
  void freeHost(void *data) override { std::free(data); }

private:
  Status loadHostObject();
  Status execute(const schema::Program &program);
  /// Runs the queue up to `fence`.
  Status waitFenceRun(Fence fence) {
    if (fence > done_ + queue_.size())
      return Status::error("fence " + std::to_string(fence) + " was never recorded");
    return drain(fence > done_ ? size_t(fence - done_) : 0);
  }
  /// Runs the first `n` queued operations; the first error empties the
  /// queue (what followed it would run on a broken state).
  Status drain(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      Status s = queue_.front()();
      queue_.pop_front();
      ++done_;
      if (!s) {
        done_ += queue_.size();
        queue_.clear();
        return s;
      }
    }
    return Status::ok();
  }
  char *address(uint32_t tensor) const { return tensorAddress(exe_.get(), pools_, tensor); }
  size_t size(uint32_t tensor) const { return exe_->tensors()->Get(tensor)->size_bytes(); }

  const Executable &exe_;
  Collective *collective_;                    // null: one rank
  std::vector<char *> pools_;                 // base of each pool
  void *library_ = nullptr;                   // dlopen'ed host_object
  std::vector<HostKernel> kernels_;           // by kernel index
  std::vector<HostKernelRange> ranges_;       // by kernel index; null: none
  LaunchArgTable args_; // by program, then command
  enum class Split : uint8_t { Untimed, Serial, Threads };
  std::vector<std::vector<Split>> split_; // by program, then command
  std::deque<std::function<Status()>> queue_; // enqueued, not yet run
  uint64_t done_ = 0;                         // operations run (or dropped)
  using Clock = std::chrono::steady_clock;
  std::map<Fence, Clock::time_point> passedAt_; // fences run, not yet waited for
  Fence waited_ = 0;                            // the latest fence waited for
};

Status HostBackend::init() {
  const schema::Executable &exe = exe_.get();
  if (exe.pools())
    for (const schema::Pool *pool : *exe.pools()) {
      // aligned_alloc wants a power-of-two alignment and a size it divides.
      size_t align = std::max<size_t>(pool->alignment(), alignof(std::max_align_t));
      if (align & (align - 1))
        return Status::error("pool '" + (pool->name() ? pool->name()->str() : "") +
                             "' has alignment " + std::to_string(align) + ", not a power of two");
      size_t bytes = (std::max<uint64_t>(pool->size_bytes(), 1) + align - 1) / align * align;
      char *p = static_cast<char *>(std::aligned_alloc(align, bytes));
      if (!p)
        return Status::error("cannot allocate pool '" + (pool->name() ? pool->name()->str() : "") +
                             "' of " + std::to_string(pool->size_bytes()) + " bytes on the host");
      std::memset(p, 0, bytes);
      pools_.push_back(p);
    }
  if (Status s = checkGemmCommands(exe); !s)
    return s;
  if (Status s = checkWorldSize(exe, collective_); !s)
    return s;
  if (Status s = loadHostObject(); !s)
    return s;
  // Argument arrays of every launch, built once.
  StatusOr<LaunchArgTable> table = launchArgTable(exe, pools_);
  if (!table)
    return table.status();
  args_ = std::move(*table);
  for (const std::vector<KernelArgs> &program : args_)
    split_.emplace_back(program.size(), Split::Untimed);
  return Status::ok();
}

Status HostBackend::loadHostObject() {
  const schema::Executable &exe = exe_.get();
  size_t numKernels = exe.kernels() ? exe.kernels()->size() : 0;
  if (numKernels == 0)
    return Status::ok();
  const auto *object = exe.host_object();
  if (!object || object->size() == 0)
    return Status::error("kernel '" + kernelName(*exe.kernels()->Get(0)) +
                         "' needs host_object, which the executable lacks (compiled for "
                         "the CUDA target? use --target cuda)");
  // dlopen needs a file: write one, open it, and unlink it at once (the
  // mapping stays valid).
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/gptc-host-XXXXXX.so";
  int fd = mkstemps(path.data(), 3);
  if (fd < 0)
    return Status::error("cannot create a temporary file for host_object in " + path + ": " +
                         std::strerror(errno));
  const uint8_t *bytes = object->data();
  size_t left = object->size();
  while (left > 0) {
    ssize_t n = ::write(fd, bytes, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(path.c_str());
      return Status::error("cannot write host_object to " + path + ": " + why);
    }
    bytes += n;
    left -= size_t(n);
  }
  ::close(fd);
  library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = library_ ? "" : dlerror();
  ::unlink(path.c_str());
  if (!library_)
    return Status::error("cannot load host_object: " + why);
  for (const schema::Kernel *k : *exe.kernels()) {
    std::string symbol =
        k->host_symbol() && k->host_symbol()->size() ? k->host_symbol()->str() : kernelName(*k);
    dlerror();
    void *fn = dlsym(library_, symbol.c_str());
    if (!fn)
      return Status::error("kernel '" + kernelName(*k) + "': host_object has no symbol '" + symbol +
                           "'");
    kernels_.push_back(reinterpret_cast<HostKernel>(fn));
    ranges_.push_back(reinterpret_cast<HostKernelRange>(dlsym(library_, (symbol + "_range").c_str())));
  }
  return Status::ok();
}

Status HostBackend::execute(const schema::Program &program) {
  const schema::Executable &exe = exe_.get();
  if (!program.commands())
    return Status::ok();
  size_t index = programIndex(exe, program);
  std::vector<KernelArgs> &args = args_[index];
  std::vector<Split> &split = split_[index];
  for (size_t c = 0; c < program.commands()->size(); ++c) {
    const schema::Command *cmd = program.commands()->Get(c);
    switch (cmd->op_type()) {
    case schema::Op::LaunchKernel: {
      const auto *launch = cmd->op_as_LaunchKernel();
      HostKernelRange range = ranges_[launch->kernel()];
      ThreadPool &pool = ThreadPool::host();
      if (!range || pool.size() == 1 || split[c] == Split::Serial) {
        kernels_[launch->kernel()](args[c].argv.data(), launch->grid()->data(),
                                   launch->block()->data());
        break;
      }
      if (split[c] == Split::Untimed) {
        auto start = Clock::now();
        kernels_[launch->kernel()](args[c].argv.data(), launch->grid()->data(),
                                   launch->block()->data());
        split[c] = Clock::now() - start >= kSplitAbove ? Split::Threads : Split::Serial;
        break;
      }
      uint64_t total = 1;
      for (uint32_t d : *launch->grid())
        total *= d;
      for (uint32_t d : *launch->block())
        total *= d;
      // A few parts per thread: one slowed by another process leaves less
      // behind.
      size_t parts = size_t(std::min<uint64_t>(total, 4 * pool.size()));
      void **argv = args[c].argv.data();
      pool.parallelFor(parts,
                       [&](size_t p) { range(argv, total * p / parts, total * (p + 1) / parts); });
      break;
    }
    case schema::Op::RunGemm: {
      const auto *r = cmd->op_as_RunGemm();
      blas::GemmOperands ops =
          blas::gemmOperands(*r, [&](uint32_t t) -> char * { return address(t); });
      if (Status s = blas::cpuGemm(*exe.gemms()->Get(r->gemm()), r->gemm(), ops); !s)
        return s;
      break;
    }
    case schema::Op::Memset: {
      const auto *m = cmd->op_as_Memset();
      std::memset(address(m->tensor()), m->byte_value(), size(m->tensor()));
      break;
    }
    case schema::Op::Copy: {
      const auto *cp = cmd->op_as_Copy();
      std::memmove(address(cp->dst()), address(cp->src()), size(cp->src()));
      break;
    }
    case schema::Op::RecordEvent:
    case schema::Op::WaitEvent:
      break; // serial execution already orders everything
    case schema::Op::AllReduce: {
      if (!collective_)
        break; // one rank: the mean, sum or maximum of one is itself
      const auto *ar = cmd->op_as_AllReduce();
      std::vector<Collective::Buffer> buffers;
      for (uint32_t t : *ar->tensors()) {
        schema::DType dtype = exe.tensors()->Get(t)->dtype();
        buffers.push_back({address(t), size(t) / elementSize(dtype), dtype});
      }
      if (Status s = collective_->allReduce(buffers, ar->op(), nullptr); !s)
        return Status::error("command " + std::to_string(c) + ": " + s.message());
      break;
    }
    case schema::Op::Shard: {
      // ZeRO-1: the loader checked the pairs against world_size >= 2, and
      // checkWorldSize that as many ranks run.
      const auto *shard = cmd->op_as_Shard();
      if (!collective_)
        return Status::error("command " + std::to_string(c) +
                             ": ZeRO-1 shards across ranks, and this session has one");
      std::vector<Collective::Buffer> src, dst;
      for (size_t i = 0; i < shard->src()->size(); ++i) {
        for (auto [list, out] : {std::pair{shard->src(), &src}, std::pair{shard->dst(), &dst}}) {
          uint32_t t = list->Get(i);
          schema::DType dtype = exe.tensors()->Get(t)->dtype();
          out->push_back({address(t), size(t) / elementSize(dtype), dtype});
        }
      }
      Status s = Status::ok();
      switch (shard->kind()) {
      case schema::ShardKind::ReduceScatter:
        s = collective_->reduceScatter(src, dst, shard->op(), nullptr);
        break;
      case schema::ShardKind::AllGather:
        s = collective_->allGather(src, dst, nullptr);
        break;
      case schema::ShardKind::RankSlice:
        for (size_t i = 0; i < src.size(); ++i) {
          size_t bytes = size(shard->dst()->Get(i));
          std::memmove(dst[i].data,
                       static_cast<const char *>(src[i].data) + size_t(collective_->rank()) * bytes,
                       bytes);
        }
        break;
      }
      if (!s)
        return Status::error("command " + std::to_string(c) + ": " + s.message());
      break;
    }
    case schema::Op::NONE:
      return Status::error("command " + std::to_string(c) + " cannot run on the host");
    }
  }
  return Status::ok();
}

} // namespace

StatusOr<std::unique_ptr<Backend>> createHostBackend(const Executable &exe) {
  return createHostRankBackend(exe, nullptr);
}

StatusOr<std::unique_ptr<Backend>> createHostRankBackend(const Executable &exe,
                                                         Collective *collective) {
  auto backend = std::make_unique<HostBackend>(exe, collective);
  if (Status s = backend->init(); !s)
    return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace gptc
