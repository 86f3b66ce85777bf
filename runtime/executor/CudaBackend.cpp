//===- CudaBackend.cpp - run an executable's programs on one GPU ----------===//

#include "runtime/executor/CudaBackend.h"

#include "runtime/blas/CublasLtGemm.h"
#include "runtime/device/CudaCheck.h"
#include "runtime/device/Device.h"
#include "runtime/device/Driver.h"
#include "runtime/executable/Report.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <string_view>

namespace gptc {

namespace {

std::string kernelName(const schema::Kernel &k) { return k.name() ? k.name()->str() : "<unnamed>"; }

class CudaBackend final : public Backend {
public:
  CudaBackend(const Executable &exe, const CudaBackendOptions &options)
      : exe_(exe), options_(options) {}
  ~CudaBackend() override {
    if (Status s = release(); !s)
      std::fprintf(stderr, "gptc: warning: releasing the CUDA backend: %s\n", s.message().c_str());
  }

  Status init();

  schema::TargetKind kind() const override { return schema::TargetKind::CUDA; }
  std::string deviceName() const override { return info_.name; }

  Status write(uint32_t tensor, const void *data) override {
    GPT_CUDA_CHECK(
        cudaMemcpyAsync(address(tensor), data, size(tensor), cudaMemcpyHostToDevice, streams_[0]));
    GPT_CUDA_CHECK(cudaStreamSynchronize(streams_[0]));
    return Status::ok();
  }
  Status read(uint32_t tensor, void *data) override {
    GPT_CUDA_CHECK(
        cudaMemcpyAsync(data, address(tensor), size(tensor), cudaMemcpyDeviceToHost, streams_[0]));
    GPT_CUDA_CHECK(cudaStreamSynchronize(streams_[0]));
    return Status::ok();
  }
  int rank() const override { return options_.collective ? options_.collective->rank() : 0; }
  Status gatherShards(uint32_t tensor, void *data) override {
    const schema::Tensor *t = exe_->tensors()->Get(tensor);
    Collective *collective = options_.collective;
    if (!collective || t->shards() != uint32_t(collective->size()))
      return Status::error("tensor " + std::to_string(tensor) + " is a shard of " +
                           std::to_string(t->shards()) + " ranks, and this session has " +
                           std::to_string(collective ? collective->size() : 1));
    // NCCL gathers device memory: a temporary of the whole tensor.
    size_t count = size(tensor) / elementSize(t->dtype()), bytes = size(tensor) * t->shards();
    void *full = nullptr;
    GPT_CUDA_CHECK(cudaMalloc(&full, bytes));
    Status s = collective->allGather({{address(tensor), count, t->dtype()}},
                                     {{full, count * t->shards(), t->dtype()}}, streams_[0]);
    if (s)
      s = GPT_CUDA_STATUS(
          cudaMemcpyAsync(data, full, bytes, cudaMemcpyDeviceToHost, streams_[0]));
    if (s)
      s = GPT_CUDA_STATUS(cudaStreamSynchronize(streams_[0]));
    Status freed = GPT_CUDA_STATUS(cudaFree(full));
    return !s ? s : freed;
  }
  Status fill(uint32_t tensor, uint8_t byte) override {
    GPT_CUDA_CHECK(cudaMemsetAsync(address(tensor), byte, size(tensor), streams_[0]));
    GPT_CUDA_CHECK(cudaStreamSynchronize(streams_[0]));
    return Status::ok();
  }
  Status run(const schema::Program &program) override;

  Status writeAsync(uint32_t tensor, const void *data) override {
    GPT_CUDA_CHECK(
        cudaMemcpyAsync(address(tensor), data, size(tensor), cudaMemcpyHostToDevice, streams_[0]));
    return Status::ok();
  }
  Status readAsync(uint32_t tensor, void *data) override {
    GPT_CUDA_CHECK(
        cudaMemcpyAsync(data, address(tensor), size(tensor), cudaMemcpyDeviceToHost, streams_[0]));
    return Status::ok();
  }
  Status launch(const schema::Program &program) override;
  StatusOr<Fence> recordFence() override;
  Status waitFence(Fence fence) override;
  StatusOr<double> waitFenceTimed(Fence since, Fence fence) override;
  StatusOr<void *> allocateHost(size_t bytes) override {
    void *p = nullptr;
    GPT_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
    return p;
  }
  void freeHost(void *data) override {
    if (Status s = GPT_CUDA_STATUS(cudaFreeHost(data)); !s)
      std::fprintf(stderr, "gptc: warning: freeing host memory: %s\n", s.message().c_str());
  }

private:
  Status allocatePools();
  Status loadKernels();
  Status prepareLaunches();
  Status enqueue(const schema::Program &program, uint32_t index);
  /// Enqueues commands [begin, end) of the program.
  Status enqueueRange(const schema::Program &program, uint32_t index, size_t begin, size_t end);
  Status profile(const schema::Program &program, uint32_t index);
  Status capture(const schema::Program &program, uint32_t index, cudaGraphExec_t *exec);
  /// Enqueues the program's commands with the other streams forked from
  /// stream 0 and joined back into it, so stream 0 orders whole programs.
  Status enqueueJoined(const schema::Program &program, uint32_t index);
  Status synchronize();
  Status release();
  char *address(uint32_t tensor) const { return tensorAddress(exe_.get(), pools_, tensor); }
  size_t size(uint32_t tensor) const { return exe_->tensors()->Get(tensor)->size_bytes(); }

  const Executable &exe_;
  CudaBackendOptions options_;
  const device::Driver *driver_ = nullptr;
  device::DeviceInfo info_;
  std::vector<void *> allocations_;        // cudaMalloc results
  std::vector<char *> pools_;              // aligned base of each pool
  std::vector<cudaStream_t> streams_;      // num_streams
  std::vector<cudaEvent_t> events_;        // num_events
  std::vector<cudaEvent_t> joinEvents_;    // fork + one join per stream
  std::vector<CUmodule> modules_;          // distinct images
  std::vector<CUfunction> functions_;      // by kernel index
  std::unique_ptr<blas::CublasLtGemm> gemm_;
  LaunchArgTable args_; // by program, then command
  /// Per program index: launches so far, and its graph once captured
  /// (null after a capture failed: direct launches from then on).
  struct GraphState {
    uint64_t launches = 0;
    cudaGraphExec_t exec = nullptr;
  };
  std::map<uint32_t, GraphState> graphs_;
  Fence nextFence_ = 1;
  std::map<Fence, cudaEvent_t> fences_; // recorded, not yet waited for
  std::vector<cudaEvent_t> spareEvents_; // for fences
};

Status CudaBackend::init() {
  // First: a rank mismatch is the news, whether or not there is a GPU.
  if (Status s = checkWorldSize(exe_.get(), options_.collective); !s)
    return s;
  StatusOr<const device::Driver *> driver = device::Driver::get();
  if (!driver)
    return driver.status();
  driver_ = *driver;
  StatusOr<device::DeviceInfo> info = device::queryDevice(options_.device);
  if (!info)
    return info.status();
  info_ = *info;
  if (Status s = device::activateDevice(options_.device); !s)
    return s;
  const schema::Executable &exe = exe_.get();
  if (Status s = checkGemmCommands(exe); !s)
    return s;
  // Refuse up front, with the numbers, rather than fail in cudaMalloc of
  // whichever pool comes last.
  StatusOr<device::MemoryInfo> memory = device::memoryInfo();
  if (!memory)
    return memory.status();
  if (Status s = checkMemoryFits(requiredPoolBytes(exe), memory->freeBytes); !s)
    return Status::error(info_.name + " (device " + std::to_string(options_.device) +
                         "): " + s.message());
  if (Status s = allocatePools(); !s)
    return s;
  for (uint32_t i = 0; i < exe.num_streams(); ++i) {
    cudaStream_t s = nullptr;
    GPT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
  }
  for (uint32_t i = 0; i < exe.num_events() + exe.num_streams(); ++i) {
    cudaEvent_t e = nullptr;
    GPT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    (i < exe.num_events() ? events_ : joinEvents_).push_back(e);
  }
  if (Status s = loadKernels(); !s)
    return s;
  StatusOr<std::unique_ptr<blas::CublasLtGemm>> gemm = blas::CublasLtGemm::create(
      exe.gemms() ? exe.gemms()->size() : 0, exe.num_streams(), options_.gemmWorkspaceBytes,
      options_.gemmAutotune, options_.gemmAlgos);
  if (!gemm)
    return gemm.status();
  gemm_ = std::move(*gemm);
  return prepareLaunches();
}

Status CudaBackend::allocatePools() {
  const schema::Executable &exe = exe_.get();
  if (!exe.pools())
    return Status::ok();
  for (const schema::Pool *pool : *exe.pools()) {
    // cudaMalloc aligns to 256 bytes; a larger alignment is padded for.
    uint64_t align = std::max<uint64_t>(pool->alignment(), 1);
    if (align & (align - 1))
      return Status::error("pool '" + (pool->name() ? pool->name()->str() : "") +
                           "' has alignment " + std::to_string(align) + ", not a power of two");
    uint64_t pad = align > 256 ? align : 0;
    void *p = nullptr;
    if (pool->size_bytes() > 0) {
      cudaError_t err = cudaMalloc(&p, pool->size_bytes() + pad);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); // not sticky; clear it for the next call
        return Status::error("cannot allocate pool '" + (pool->name() ? pool->name()->str() : "") +
                             "' of " + std::to_string(pool->size_bytes()) + " bytes on " +
                             info_.name + " (" + std::to_string(info_.memoryBytes >> 20) + " MiB)");
      }
      GPT_CUDA_CHECK(err);
      allocations_.push_back(p);
      // Zeroed once so that a run never depends on stale memory.
      GPT_CUDA_CHECK(cudaMemset(p, 0, pool->size_bytes() + pad));
    }
    uintptr_t base = (reinterpret_cast<uintptr_t>(p) + align - 1) / align * align;
    pools_.push_back(reinterpret_cast<char *>(base));
  }
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::ok();
}

Status CudaBackend::loadKernels() {
  const schema::Executable &exe = exe_.get();
  if (!exe.kernels())
    return Status::ok();
  std::string device = "sm_" + std::to_string(info_.major) + std::to_string(info_.minor);
  std::string target = exe.target()->arch() ? exe.target()->arch()->str() : "?";
  // Kernels that carry the same image share one module (the compiler puts
  // the kernels in a few cubins, each shared by many); a failed load is
  // remembered as well. Looking up by address first saves comparing
  // megabytes of identical bytes.
  struct Loaded {
    Status status;
    CUmodule module;
  };
  std::map<std::string_view, Loaded> byContent;
  std::map<const char *, const Loaded *> byAddress;
  for (const schema::Kernel *k : *exe.kernels()) {
    std::string name = kernelName(*k);
    bool hasCubin = k->cubin() && k->cubin()->size() > 0;
    bool hasPtx = k->ptx() && k->ptx()->size() > 0;
    if (!hasCubin && !hasPtx)
      return Status::error("kernel '" + name +
                           "' has no cubin or PTX (compiled for the Host target? use "
                           "--target host)");
    // Load `image` (cubin bytes, or NUL-terminated PTX text) once.
    auto load = [&](std::string_view image, CUmodule *module) -> Status {
      auto known = byAddress.find(image.data());
      if (known == byAddress.end()) {
        auto same = byContent.find(image);
        if (same == byContent.end()) {
          CUmodule m = nullptr;
          Status st = GPT_CU_STATUS(driver_->moduleLoadData(&m, image.data()));
          if (st)
            modules_.push_back(m);
          same = byContent.emplace(image, Loaded{st, st ? m : nullptr}).first;
        }
        known = byAddress.emplace(image.data(), &same->second).first;
      }
      *module = known->second->module;
      return known->second->status;
    };
    CUmodule module = nullptr;
    Status cubinStatus = Status::ok();
    if (hasCubin)
      cubinStatus = load(
          std::string_view(reinterpret_cast<const char *>(k->cubin()->data()), k->cubin()->size()),
          &module);
    if (!module && hasPtx) {
      // The driver JIT-compiles PTX for this device: slower to load, but it
      // runs where the cubin's architecture does not.
      if (Status ptxStatus = load(std::string_view(k->ptx()->c_str(), k->ptx()->size()), &module);
          !ptxStatus)
        return Status::error("kernel '" + name + "' (" + target + ") does not load on " +
                             info_.name + " (" + device +
                             "): " + (cubinStatus ? "" : "cubin: " + cubinStatus.message() + "; ") +
                             "PTX: " + ptxStatus.message());
    }
    if (!module)
      return Status::error("kernel '" + name + "' (" + target + ") does not load on " + info_.name +
                           " (" + device + ") and has no PTX: " + cubinStatus.message());
    CUfunction fn = nullptr;
    if (Status s = GPT_CU_STATUS(driver_->moduleGetFunction(&fn, module, name.c_str())); !s)
      return Status::error("kernel '" + name + "': " + s.message());
    functions_.push_back(fn);
  }
  return Status::ok();
}

Status CudaBackend::prepareLaunches() {
  const schema::Executable &exe = exe_.get();
  StatusOr<LaunchArgTable> table = launchArgTable(exe, pools_);
  if (!table)
    return table.status();
  args_ = std::move(*table);
  std::vector<uint32_t> sharedNeeded(functions_.size(), 0);
  if (exe.programs())
    for (const schema::Program *program : *exe.programs())
      if (program->commands())
        for (const schema::Command *cmd : *program->commands())
          if (const auto *launch = cmd->op_as_LaunchKernel())
            sharedNeeded[launch->kernel()] =
                std::max(sharedNeeded[launch->kernel()], launch->shared_bytes());
  for (size_t k = 0; k < functions_.size(); ++k)
    // Any dynamic size: the kernels also declare their dynamic buffer as a
    // static byte, so exactly 48 KiB dynamic is over the default limit.
    if (sharedNeeded[k] > 0)
      if (Status s = GPT_CU_STATUS(driver_->funcSetAttribute(
              functions_[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
              int(sharedNeeded[k])));
          !s)
        return Status::error("kernel '" + kernelName(*exe.kernels()->Get(k)) + "' wants " +
                             std::to_string(sharedNeeded[k]) +
                             " bytes of shared memory: " + s.message());
  return Status::ok();
}

Status CudaBackend::enqueue(const schema::Program &program, uint32_t index) {
  return enqueueRange(program, index, 0, program.commands() ? program.commands()->size() : 0);
}

Status CudaBackend::enqueueRange(const schema::Program &program, uint32_t index, size_t begin,
                                 size_t end) {
  const schema::Executable &exe = exe_.get();
  if (!program.commands())
    return Status::ok();
  std::vector<KernelArgs> &args = args_[index];
  for (size_t c = begin; c < end; ++c) {
    const schema::Command *cmd = program.commands()->Get(c);
    cudaStream_t stream = streams_[cmd->stream()];
    Status s = Status::ok();
    switch (cmd->op_type()) {
    case schema::Op::LaunchKernel: {
      const auto *l = cmd->op_as_LaunchKernel();
      const auto &g = *l->grid(), &b = *l->block();
      if (options_.programmaticLaunch && exe.kernels()->Get(l->kernel())->waits_for_prior_grids()) {
        CUlaunchAttribute attr{};
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig config{};
        config.gridDimX = g[0];
        config.gridDimY = g[1];
        config.gridDimZ = g[2];
        config.blockDimX = b[0];
        config.blockDimY = b[1];
        config.blockDimZ = b[2];
        config.sharedMemBytes = l->shared_bytes();
        config.hStream = stream;
        config.attrs = &attr;
        config.numAttrs = 1;
        s = GPT_CU_STATUS(driver_->launchKernelEx(&config, functions_[l->kernel()],
                                                  args[c].argv.data(), nullptr));
      } else {
        s = GPT_CU_STATUS(driver_->launchKernel(functions_[l->kernel()], g[0], g[1], g[2], b[0],
                                                b[1], b[2], l->shared_bytes(), stream,
                                                args[c].argv.data(), nullptr));
      }
      if (!s)
        s = Status::error("kernel '" + kernelName(*exe.kernels()->Get(l->kernel())) +
                          "': " + s.message());
      break;
    }
    case schema::Op::RunGemm: {
      const auto *r = cmd->op_as_RunGemm();
      blas::GemmOperands ops =
          blas::gemmOperands(*r, [&](uint32_t t) -> char * { return address(t); });
      s = gemm_->run(r->gemm(), *exe.gemms()->Get(r->gemm()), ops, stream, cmd->stream());
      break;
    }
    case schema::Op::Memset: {
      const auto *m = cmd->op_as_Memset();
      s = GPT_CUDA_STATUS(
          cudaMemsetAsync(address(m->tensor()), m->byte_value(), size(m->tensor()), stream));
      break;
    }
    case schema::Op::Copy: {
      const auto *cp = cmd->op_as_Copy();
      s = GPT_CUDA_STATUS(cudaMemcpyAsync(address(cp->dst()), address(cp->src()), size(cp->src()),
                                          cudaMemcpyDeviceToDevice, stream));
      break;
    }
    case schema::Op::RecordEvent:
      s = GPT_CUDA_STATUS(cudaEventRecord(events_[cmd->op_as_RecordEvent()->event()], stream));
      break;
    case schema::Op::WaitEvent:
      s = GPT_CUDA_STATUS(cudaStreamWaitEvent(stream, events_[cmd->op_as_WaitEvent()->event()], 0));
      break;
    case schema::Op::AllReduce: {
      if (!options_.collective)
        break; // one rank: the mean, sum or maximum of one is itself
      const auto *ar = cmd->op_as_AllReduce();
      std::vector<Collective::Buffer> buffers;
      if (ar->tensors())
        for (uint32_t t : *ar->tensors()) {
          schema::DType dtype = exe.tensors()->Get(t)->dtype();
          buffers.push_back({address(t), size(t) / elementSize(dtype), dtype});
        }
      s = options_.collective->allReduce(buffers, ar->op(), stream);
      break;
    }
    case schema::Op::Shard: {
      // ZeRO-1: the loader checked the pairs against world_size >= 2, and
      // checkWorldSize that as many ranks run.
      const auto *shard = cmd->op_as_Shard();
      if (!options_.collective) {
        s = Status::error("ZeRO-1 shards across ranks, and this session has one");
        break;
      }
      std::vector<Collective::Buffer> src, dst;
      for (size_t i = 0; i < shard->src()->size(); ++i)
        for (auto [list, out] : {std::pair{shard->src(), &src}, std::pair{shard->dst(), &dst}}) {
          uint32_t t = list->Get(i);
          schema::DType dtype = exe.tensors()->Get(t)->dtype();
          out->push_back({address(t), size(t) / elementSize(dtype), dtype});
        }
      switch (shard->kind()) {
      case schema::ShardKind::ReduceScatter:
        s = options_.collective->reduceScatter(src, dst, shard->op(), stream);
        break;
      case schema::ShardKind::AllGather:
        s = options_.collective->allGather(src, dst, stream);
        break;
      case schema::ShardKind::RankSlice:
        for (size_t i = 0; i < src.size() && s; ++i) {
          size_t bytes = size(shard->dst()->Get(i));
          const char *from = static_cast<const char *>(src[i].data) +
                             size_t(options_.collective->rank()) * bytes;
          s = GPT_CUDA_STATUS(cudaMemcpyAsync(dst[i].data, from, bytes,
                                              cudaMemcpyDeviceToDevice, stream));
        }
        break;
      }
      break;
    }
    case schema::Op::NONE:
      s = Status::error("cannot run this command on the GPU");
      break;
    }
    if (!s)
      return Status::error("command " + std::to_string(c) + ": " + s.message());
  }
  return Status::ok();
}

Status CudaBackend::capture(const schema::Program &program, uint32_t index, cudaGraphExec_t *exec) {
  cudaStream_t origin = streams_[0];
  GPT_CUDA_CHECK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
  // The fork/join events pull the other streams into the capture, so the
  // graph keeps their overlap as parallel branches.
  Status enqueued = enqueueJoined(program, index);
  // End the capture on every path, or stream 0 stays unusable.
  cudaGraph_t graph = nullptr;
  Status ended = GPT_CUDA_STATUS(cudaStreamEndCapture(origin, &graph));
  if (!enqueued || !ended) {
    if (graph)
      (void)GPT_CUDA_STATUS(cudaGraphDestroy(graph));
    (void)cudaGetLastError(); // capture errors are not sticky
    return Status::error("capturing a CUDA graph: " +
                         (!enqueued ? enqueued.message() : ended.message()));
  }
  Status made = GPT_CUDA_STATUS(cudaGraphInstantiate(exec, graph, 0));
  Status destroyed = GPT_CUDA_STATUS(cudaGraphDestroy(graph));
  if (!made)
    return made;
  return destroyed;
}

Status CudaBackend::enqueueJoined(const schema::Program &program, uint32_t index) {
  cudaStream_t origin = streams_[0];
  if (streams_.size() > 1) {
    GPT_CUDA_CHECK(cudaEventRecord(joinEvents_[0], origin));
    for (size_t s = 1; s < streams_.size(); ++s)
      GPT_CUDA_CHECK(cudaStreamWaitEvent(streams_[s], joinEvents_[0], 0));
  }
  if (Status s = enqueue(program, index); !s)
    return s;
  for (size_t s = 1; s < streams_.size(); ++s) {
    GPT_CUDA_CHECK(cudaEventRecord(joinEvents_[s], streams_[s]));
    GPT_CUDA_CHECK(cudaStreamWaitEvent(origin, joinEvents_[s], 0));
  }
  return Status::ok();
}

Status CudaBackend::synchronize() {
  for (cudaStream_t s : streams_)
    GPT_CUDA_CHECK(cudaStreamSynchronize(s));
  return Status::ok();
}

/// GPTC_PROFILE=1: runs the program one command at a time between events and
/// prints the time per kernel / GEMM shape, largest first, to stderr (the
/// top 20; GPTC_PROFILE=N > 1: the top N). For finding where a step goes,
/// not for timing the step itself.
Status CudaBackend::profile(const schema::Program &program, uint32_t index) {
  const schema::Executable &exe = exe_.get();
  size_t n = program.commands() ? program.commands()->size() : 0;
  cudaEvent_t start, stop;
  GPT_CUDA_CHECK(cudaEventCreate(&start));
  GPT_CUDA_CHECK(cudaEventCreate(&stop));
  std::map<std::string, std::pair<int, double>> byLabel; // count, ms
  double total = 0;
  for (size_t c = 0; c < n; ++c) {
    const schema::Command *cmd = program.commands()->Get(c);
    std::string label;
    if (const auto *l = cmd->op_as_LaunchKernel()) {
      label = kernelName(*exe.kernels()->Get(l->kernel()));
      // Strip the instance number: one row per kernel kind.
      while (!label.empty() && std::isdigit(static_cast<unsigned char>(label.back())))
        label.pop_back();
    } else if (const auto *r = cmd->op_as_RunGemm()) {
      const schema::Gemm *g = exe.gemms()->Get(r->gemm());
      label = "gemm " + std::to_string(g->m()) + "x" + std::to_string(g->n()) + "x" +
              std::to_string(g->k()) + (g->batch() > 1 ? " b" + std::to_string(g->batch()) : "") +
              " " + (g->transa() ? "T" : "N") + (g->transb() ? "T" : "N") +
              (g->epilogue() != schema::Epilogue::None
                   ? std::string(" ") + schema::EnumNameEpilogue(g->epilogue())
                   : std::string()) +
              (g->beta() != 0 ? " +C" : "");
    } else {
      label = schema::EnumNameOp(cmd->op_type());
    }
    GPT_CUDA_CHECK(cudaEventRecord(start, streams_[cmd->stream()]));
    if (Status s = enqueueRange(program, index, c, c + 1); !s)
      return s;
    GPT_CUDA_CHECK(cudaEventRecord(stop, streams_[cmd->stream()]));
    GPT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    auto &[count, sum] = byLabel[label];
    ++count;
    sum += ms;
    total += ms;
  }
  GPT_CUDA_CHECK(cudaEventDestroy(start));
  GPT_CUDA_CHECK(cudaEventDestroy(stop));
  std::vector<std::pair<double, std::string>> rows;
  for (auto &[label, cs] : byLabel)
    rows.push_back({cs.second, label + " x" + std::to_string(cs.first)});
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "profile %s: %.1f ms in %zu commands\n",
               program.name() ? program.name()->c_str() : "?", total, n);
  long top = std::strtol(std::getenv("GPTC_PROFILE"), nullptr, 10);
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(top > 1 ? top : 20); ++i)
    std::fprintf(stderr, "  %9.2f ms %5.1f%%  %s\n", rows[i].first, 100.0 * rows[i].first / total,
                 rows[i].second.c_str());
  return synchronize();
}

Status CudaBackend::run(const schema::Program &program) {
  if (Status s = launch(program); !s)
    return s;
  return synchronize();
}

Status CudaBackend::launch(const schema::Program &program) {
  uint32_t index = programIndex(exe_.get(), program);
  // Profiling times one command at a time, so it never uses the graphs.
  if (std::getenv("GPTC_PROFILE")) {
    if (Status s = synchronize(); !s)
      return s;
    return profile(program, index);
  }
  GraphState &g = graphs_[index];
  // The first launch runs directly: it builds the cuBLASLt plans, loads
  // lazily loaded modules and sets up NCCL's connections, none of which
  // may happen inside a capture. The second captures.
  if (options_.graphs && g.launches == 1) {
    cudaGraphExec_t exec = nullptr;
    if (Status s = capture(program, index, &exec); !s)
      std::fprintf(stderr,
                   "gptc: warning: program '%s': %s; launching its commands directly "
                   "(as with gptrun --no-graph)\n",
                   program.name() ? program.name()->c_str() : "?", s.message().c_str());
    g.exec = exec;
  }
  ++g.launches;
  if (g.exec) {
    GPT_CUDA_CHECK(cudaGraphLaunch(g.exec, streams_[0]));
    return Status::ok();
  }
  if (Status s = enqueueJoined(program, index); !s) {
    (void)synchronize(); // leave nothing in flight; the enqueue error is the news
    return s;
  }
  return Status::ok();
}

StatusOr<Backend::Fence> CudaBackend::recordFence() {
  cudaEvent_t e = nullptr;
  if (spareEvents_.empty()) {
    // Timed: waitFenceTimed reads two of them (a step's two, a few a step).
    GPT_CUDA_CHECK(cudaEventCreate(&e));
  } else {
    e = spareEvents_.back();
    spareEvents_.pop_back();
  }
  if (Status s = GPT_CUDA_STATUS(cudaEventRecord(e, streams_[0])); !s) {
    spareEvents_.push_back(e);
    return s;
  }
  Fence f = nextFence_++;
  fences_.emplace(f, e);
  return f;
}

Status CudaBackend::waitFence(Fence fence) {
  if (fence == 0 || fence >= nextFence_)
    return Status::error("fence " + std::to_string(fence) + " was never recorded");
  auto it = fences_.find(fence);
  if (it == fences_.end())
    return Status::ok(); // an earlier or equal fence was waited for
  GPT_CUDA_CHECK(cudaEventSynchronize(it->second));
  // Stream 0 is in order: the fences before this one have passed too.
  // (The end is taken first: erasing `it` invalidates it.)
  auto passed = std::next(it);
  for (auto done = fences_.begin(); done != passed;) {
    spareEvents_.push_back(done->second);
    done = fences_.erase(done);
  }
  return Status::ok();
}

StatusOr<double> CudaBackend::waitFenceTimed(Fence since, Fence fence) {
  if (since >= fence)
    return Status::error("fence " + std::to_string(since) + " is not before fence " +
                         std::to_string(fence));
  auto from = fences_.find(since);
  if (from == fences_.end())
    return Status::error("fence " + std::to_string(since) +
                         (since < nextFence_ ? " was already waited for" : " was never recorded"));
  cudaEvent_t start = from->second;
  auto to = fences_.find(fence);
  if (to == fences_.end())
    return Status::error("fence " + std::to_string(fence) + " was never recorded");
  cudaEvent_t end = to->second;
  // Recycles both events, so their times are read first.
  GPT_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0;
  GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
  if (Status s = waitFence(fence); !s)
    return s;
  return double(ms) * 1e-3;
}

Status CudaBackend::release() {
  Status first = Status::ok();
  auto keep = [&](Status s) {
    if (first && !s)
      first = std::move(s);
  };
  // Let in-flight work finish before its memory goes.
  for (cudaStream_t s : streams_)
    keep(GPT_CUDA_STATUS(cudaStreamSynchronize(s)));
  for (auto &[index, g] : graphs_)
    if (g.exec)
      keep(GPT_CUDA_STATUS(cudaGraphExecDestroy(g.exec)));
  graphs_.clear();
  for (auto &[fence, e] : fences_)
    spareEvents_.push_back(e);
  fences_.clear();
  for (cudaEvent_t e : spareEvents_)
    keep(GPT_CUDA_STATUS(cudaEventDestroy(e)));
  spareEvents_.clear();
  if (gemm_)
    keep(gemm_->release());
  gemm_.reset();
  for (CUmodule m : modules_)
    keep(GPT_CU_STATUS(driver_->moduleUnload(m)));
  modules_.clear();
  for (cudaEvent_t e : events_)
    keep(GPT_CUDA_STATUS(cudaEventDestroy(e)));
  for (cudaEvent_t e : joinEvents_)
    keep(GPT_CUDA_STATUS(cudaEventDestroy(e)));
  events_.clear();
  joinEvents_.clear();
  for (cudaStream_t s : streams_)
    keep(GPT_CUDA_STATUS(cudaStreamDestroy(s)));
  streams_.clear();
  for (void *p : allocations_)
    keep(GPT_CUDA_STATUS(cudaFree(p)));
  allocations_.clear();
  return first;
}

} // namespace

StatusOr<std::unique_ptr<Backend>> createCudaBackend(const Executable &exe,
                                                     const CudaBackendOptions &options) {
  auto backend = std::make_unique<CudaBackend>(exe, options);
  if (Status s = backend->init(); !s)
    return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace gptc
