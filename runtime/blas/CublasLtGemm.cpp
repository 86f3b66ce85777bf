//===- CublasLtGemm.cpp - schema::Gemm on cuBLASLt ------------------------===//

#include "runtime/blas/CublasLtGemm.h"

#include "runtime/blas/GemmAlgoFile.h"
#include "runtime/blas/GemmCheck.h"
#include "runtime/device/CudaCheck.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace gptc::blas {

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatrixLayout_t d = nullptr; // an FP8 D's; else D uses c's layout
  cublasLtMatmulAlgo_t algo{};
  uint32_t alignment = 0; // of the pointers the algorithm was chosen for
  bool f64Scale = false;  // alpha/beta are double (F64 compute), else float

  Status release() {
    Status first = Status::ok();
    auto keep = [&](Status s) {
      if (first && !s)
        first = std::move(s);
    };
    for (cublasLtMatrixLayout_t *l : {&a, &b, &c, &d})
      if (*l) {
        keep(GPT_CUBLAS_STATUS(cublasLtMatrixLayoutDestroy(*l)));
        *l = nullptr;
      }
    if (desc) {
      keep(GPT_CUBLAS_STATUS(cublasLtMatmulDescDestroy(desc)));
      desc = nullptr;
    }
    return first;
  }
  ~Plan() { (void)release(); }
};

namespace {

StatusOr<cudaDataType_t> dataType(schema::DType t) {
  switch (t) {
  case schema::DType::F32:
    return CUDA_R_32F;
  case schema::DType::BF16:
    return CUDA_R_16BF;
  case schema::DType::F16:
    return CUDA_R_16F;
  case schema::DType::F64:
    return CUDA_R_64F;
  case schema::DType::F8E4M3:
    return CUDA_R_8F_E4M3;
  case schema::DType::F8E5M2:
    return CUDA_R_8F_E5M2;
  case schema::DType::I32:
    break;
  }
  return Status::error(std::string("cuBLASLt GEMMs take no ") + schema::EnumNameDType(t) +
                       " operands");
}

cublasComputeType_t computeType(schema::ComputeType t) {
  switch (t) {
  case schema::ComputeType::F32:
    return CUBLAS_COMPUTE_32F;
  case schema::ComputeType::F32FastTF32:
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  case schema::ComputeType::F32FastBF16:
    return CUBLAS_COMPUTE_32F_FAST_16BF;
  case schema::ComputeType::F64:
    return CUBLAS_COMPUTE_64F;
  }
  return CUBLAS_COMPUTE_32F;
}

/// The largest power of two (<= 256) dividing every non-null pointer.
uint32_t alignmentOf(std::initializer_list<const void *> ptrs) {
  uint32_t align = 256;
  for (const void *p : ptrs)
    if (p)
      while (align > 1 && reinterpret_cast<uintptr_t>(p) % align)
        align /= 2;
  return align;
}

StatusOr<cublasLtEpilogue_t> cublasEpilogue(schema::Epilogue e) {
  switch (e) {
  case schema::Epilogue::None:
    return CUBLASLT_EPILOGUE_DEFAULT;
  case schema::Epilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case schema::Epilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case schema::Epilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case schema::Epilogue::BiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case schema::Epilogue::BiasGeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case schema::Epilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case schema::Epilogue::BGradA:
    return CUBLASLT_EPILOGUE_BGRADA;
  case schema::Epilogue::BGradB:
    return CUBLASLT_EPILOGUE_BGRADB;
  case schema::Epilogue::DGeluBGrad:
    return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  return Status::error("epilogue " + std::to_string(int(e)) + " is not one this runtime knows");
}

template <typename T>
Status setDesc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T &v) {
  GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
  return Status::ok();
}

/// The per-call device pointers of `ops` in `desc`: bias, aux, the FP8
/// operands' scales (one f32 each) and an FP8 D's scale and amax. plan()
/// sets them for the heuristic, run() before every call.
Status setPointers(cublasLtMatmulDesc_t desc, uint32_t index, const schema::Gemm &g,
                   const GemmOperands &ops) {
  std::string where = "GEMM " + std::to_string(index) + ": ";
  if (ops.bias)
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ops.bias); !s)
      return s;
  if (ops.aux)
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ops.aux); !s)
      return s;
  if (isFp8Gemm(g)) {
    if (!ops.aScale || !ops.bScale)
      return Status::error(where + "FP8 operands need both scales");
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, ops.aScale); !s)
      return s;
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, ops.bScale); !s)
      return s;
  }
  if (g.d_type()) {
    // D's codes: scaled by *d_scale, their amax (before scaling) into *amax_d.
    if (!ops.dScale || !ops.amaxD)
      return Status::error(where + "an FP8 D needs its scale and amax");
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, ops.dScale); !s)
      return s;
    if (Status s = setDesc(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, ops.amaxD); !s)
      return s;
  }
  return Status::ok();
}

/// What makes two GEMMs share an autotuning result: every descriptor field
/// and the pointers' alignment.
std::string tuningKey(const schema::Gemm &g, uint32_t align) {
  std::string key;
  for (int64_t v : {g.m(), g.n(), g.k(), g.batch(), int64_t(g.transa()), int64_t(g.transb()),
                    g.lda(), g.ldb(), g.ldc(), g.stride_a(), g.stride_b(), g.stride_c(),
                    int64_t(g.a_type()), int64_t(g.b_type()), int64_t(g.c_type()),
                    int64_t(g.compute()), int64_t(g.epilogue()), int64_t(g.fast_accum()),
                    g.d_type() ? int64_t(*g.d_type()) : -1, int64_t(align)})
    key += std::to_string(v) + ",";
  return key + std::to_string(g.alpha());
}

/// A (rows x cols) column-major layout with `batch` batches `stride` apart.
Status makeLayout(cublasLtMatrixLayout_t *layout, cudaDataType_t type, const StoredMatrix &s,
                  int64_t batch) {
  GPT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(layout, type, uint64_t(s.rows), uint64_t(s.cols), s.ld));
  int32_t count = static_cast<int32_t>(batch);
  int64_t stride = s.stride;
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof(count)));
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  return Status::ok();
}

} // namespace

StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::create(uint32_t numGemms, uint32_t numStreams,
                                                             size_t workspaceBytes, bool autotune,
                                                             const std::string &algosPath) {
  std::unique_ptr<CublasLtGemm> g(new CublasLtGemm());
  g->autotune_ = autotune || !algosPath.empty();
  GPT_CUBLAS_CHECK(cublasLtCreate(&g->handle_));
  if (!algosPath.empty()) {
    g->algosPath_ = algosPath;
    int device = 0;
    cudaDeviceProp prop{};
    GPT_CUDA_CHECK(cudaGetDevice(&device));
    GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    g->cublasLtVersion_ = std::to_string(cublasLtGetVersion());
    g->deviceName_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                     std::to_string(prop.minor) + ")";
    // An existing file is read (an unreadable one is an error, not replaced).
    std::error_code missing;
    if (std::filesystem::exists(algosPath, missing)) {
      StatusOr<GemmAlgoFile> file = readGemmAlgos(algosPath);
      if (!file)
        return file.status();
      if (Status s = checkGemmAlgosMatch(*file, algosPath, g->cublasLtVersion_, g->deviceName_);
          !s)
        return s;
      for (const auto &[key, words] : file->algos) {
        cublasLtMatmulAlgo_t algo;
        static_assert(sizeof(algo.data) == sizeof(words), "cublasLtMatmulAlgo_t is 8 words");
        std::memcpy(algo.data, words.data(), sizeof(algo.data));
        g->tuned_[key] = algo;
        g->fromFile_.insert(key);
      }
    }
  }
  g->numStreams_ = std::max<uint32_t>(numStreams, 1);
  g->workspaceBytes_ = workspaceBytes;
  if (workspaceBytes)
    GPT_CUDA_CHECK(cudaMalloc(&g->workspace_, workspaceBytes * g->numStreams_));
  g->plans_.resize(numGemms);
  return g;
}

CublasLtGemm::~CublasLtGemm() {
  if (Status s = release(); !s)
    std::fprintf(stderr, "gptc: warning: %s\n", s.message().c_str());
}

Status CublasLtGemm::release() {
  Status first = Status::ok();
  auto keep = [&](Status s) {
    if (first && !s)
      first = std::move(s);
  };
  for (auto &p : plans_)
    if (p)
      keep(p->release());
  plans_.clear();
  if (workspace_) {
    keep(GPT_CUDA_STATUS(cudaFree(workspace_)));
    workspace_ = nullptr;
  }
  if (handle_) {
    keep(GPT_CUBLAS_STATUS(cublasLtDestroy(handle_)));
    handle_ = nullptr;
  }
  return first;
}

StatusOr<CublasLtGemm::Plan *> CublasLtGemm::plan(uint32_t index, const schema::Gemm &g,
                                                  const GemmOperands &ops, cudaStream_t stream,
                                                  uint32_t streamIndex) {
  uint32_t align = alignmentOf({ops.a, ops.b, ops.c, ops.bias, ops.aux});
  std::unique_ptr<Plan> &cached = plans_[index];
  if (cached && cached->alignment <= align)
    return cached.get();

  std::string where = "GEMM " + std::to_string(index) + ": ";
  auto p = std::make_unique<Plan>();
  StatusOr<cudaDataType_t> at = dataType(g.a_type()), bt = dataType(g.b_type()),
                           ct = dataType(g.c_type());
  for (const StatusOr<cudaDataType_t> *t : {&at, &bt, &ct})
    if (!*t)
      return Status::error(where + t->status().message());
  p->f64Scale = g.compute() == schema::ComputeType::F64;
  GPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, computeType(g.compute()),
                                            p->f64Scale ? CUDA_R_64F : CUDA_R_32F));
  cublasOperation_t opA = g.transa() ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = g.transb() ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, opA); !s)
    return s;
  if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, opB); !s)
    return s;
  StatusOr<cublasLtEpilogue_t> epilogue = cublasEpilogue(g.epilogue());
  if (!epilogue)
    return Status::error(where + epilogue.status().message());
  if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, *epilogue); !s)
    return s;
  // The heuristic reads the pointers' alignment; run() sets them per call.
  if (Status s = setPointers(p->desc, index, g, ops); !s)
    return s;
  if (ops.bias)
    if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(*ct)); !s)
      return s;
  if (ops.aux) {
    if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldc()); !s)
      return s;
    if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, int32_t(*ct)); !s)
      return s;
  }
  if (isFp8Gemm(g))
    if (Status s = setDesc(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(g.fast_accum())); !s)
      return s;
  if (Status s = makeLayout(&p->a, *at, storedA(g), g.batch()); !s)
    return s;
  if (Status s = makeLayout(&p->b, *bt, storedB(g), g.batch()); !s)
    return s;
  if (Status s = makeLayout(&p->c, *ct, storedC(g), g.batch()); !s)
    return s;
  if (g.d_type()) {
    StatusOr<cudaDataType_t> dt = dataType(*g.d_type());
    if (!dt)
      return Status::error(where + dt.status().message());
    if (Status s = makeLayout(&p->d, *dt, storedC(g), g.batch()); !s)
      return s;
  }

  std::vector<cublasLtMatmulAlgo_t> candidates; // the heuristic's order
  cublasLtMatmulPreference_t pref = nullptr;
  GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // Destroyed on every path below; its status joins the result.
  auto heuristic = [&]() -> Status {
    GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes_, sizeof(workspaceBytes_)));
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    GPT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->c,
                                                    p->d ? p->d : p->c, pref,
                                                    autotune_ ? kCandidates : 1, results,
                                                    &found));
    if (found == 0)
      return Status::error(
          where + "cuBLASLt has no algorithm for m=" + std::to_string(g.m()) +
          " n=" + std::to_string(g.n()) + " k=" + std::to_string(g.k()) +
          " batch=" + std::to_string(g.batch()) + " (" + schema::EnumNameDType(g.a_type()) + " x " +
          schema::EnumNameDType(g.b_type()) + " -> " + schema::EnumNameDType(g.c_type()) +
          ", compute " + schema::EnumNameComputeType(g.compute()) + ", epilogue " +
          schema::EnumNameEpilogue(g.epilogue()) + ")");
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS)
        candidates.push_back(results[i].algo);
    if (candidates.empty())
      return Status::error(where + "cuBLASLt's heuristic gave no usable algorithm");
    return Status::ok();
  };
  Status found = heuristic();
  Status destroyed = GPT_CUBLAS_STATUS(cublasLtMatmulPreferenceDestroy(pref));
  if (!found)
    return found;
  if (!destroyed)
    return destroyed;
  p->algo = candidates[0];
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  GPT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  std::string key = autotune_ && g.beta() == 0 ? tuningKey(g, align) : std::string();
  auto known = key.empty() ? tuned_.end() : tuned_.find(key);
  if (known != tuned_.end()) {
    // A choice from the algorithm file must still fit this descriptor.
    if (fromFile_.erase(key)) {
      cublasLtMatmulHeuristicResult_t check{};
      cublasStatus_t st = cublasLtMatmulAlgoCheck(handle_, p->desc, p->a, p->b, p->c,
                                                  p->d ? p->d : p->c, &known->second, &check);
      if (st != CUBLAS_STATUS_SUCCESS || check.workspaceSize > workspaceBytes_)
        return Status::error(where + algosPath_ + ": its algorithm for '" + key +
                             "' does not fit this GEMM (cublasLtMatmulAlgoCheck: " +
                             cublasLtGetStatusString(st) + "); remove the file to choose again");
    }
    p->algo = known->second;
  } else if (!key.empty() && capturing == cudaStreamCaptureStatusNone &&
             (candidates.size() > 1 || !algosPath_.empty())) {
    // A sole candidate is recorded too: the file then holds every GEMM's.
    StatusOr<cublasLtMatmulAlgo_t> best =
        candidates.size() > 1 ? fastest(*p, g, ops, candidates, stream, streamIndex)
                              : StatusOr<cublasLtMatmulAlgo_t>(candidates[0]);
    if (!best)
      return Status::error(where + best.status().message());
    p->algo = tuned_[key] = *best;
    if (!algosPath_.empty())
      if (Status s = saveTuned(); !s)
        return s;
  }
  p->alignment = align;
  if (cached)
    if (Status s = cached->release(); !s)
      return s;
  cached = std::move(p);
  return cached.get();
}

Status CublasLtGemm::launch(const Plan &p, const cublasLtMatmulAlgo_t &algo, const schema::Gemm &g,
                            const GemmOperands &ops, cudaStream_t stream, uint32_t streamIndex) {
  float alpha32 = static_cast<float>(g.alpha()), beta32 = static_cast<float>(g.beta());
  double alpha64 = g.alpha(), beta64 = g.beta();
  const void *alpha = p.f64Scale ? static_cast<const void *>(&alpha64) : &alpha32;
  const void *beta = p.f64Scale ? static_cast<const void *>(&beta64) : &beta32;
  void *workspace =
      workspace_ ? static_cast<char *>(workspace_) + streamIndex * workspaceBytes_ : nullptr;
  // An FP8 D has beta 0, so C is never read: it goes as null (as Transformer
  // Engine does) rather than aliasing D under C's wider layout.
  const void *c = p.d ? nullptr : ops.c;
  GPT_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, alpha, ops.a, p.a, ops.b, p.b, beta, c, p.c,
                                  ops.c, p.d ? p.d : p.c, &algo, workspace, workspaceBytes_,
                                  stream));
  return Status::ok();
}

StatusOr<cublasLtMatmulAlgo_t>
CublasLtGemm::fastest(const Plan &p, const schema::Gemm &g, const GemmOperands &ops,
                      const std::vector<cublasLtMatmulAlgo_t> &candidates, cudaStream_t stream,
                      uint32_t streamIndex) {
  constexpr int kRepeats = 3;
  cudaEvent_t start = nullptr, stop = nullptr;
  GPT_CUDA_CHECK(cudaEventCreate(&start));
  if (Status s = GPT_CUDA_STATUS(cudaEventCreate(&stop)); !s) {
    (void)cudaEventDestroy(start);
    return s;
  }
  // Times every candidate; an algorithm cuBLASLt refuses to launch is
  // skipped. Destroys the events on every path.
  auto time = [&]() -> StatusOr<cublasLtMatmulAlgo_t> {
    size_t best = candidates.size();
    float bestMs = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!launch(p, candidates[i], g, ops, stream, streamIndex)) // warm-up
        continue;
      GPT_CUDA_CHECK(cudaEventRecord(start, stream));
      Status ran = Status::ok();
      for (int r = 0; r < kRepeats && ran; ++r)
        ran = launch(p, candidates[i], g, ops, stream, streamIndex);
      GPT_CUDA_CHECK(cudaEventRecord(stop, stream));
      GPT_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (ran && (best == candidates.size() || ms < bestMs))
        best = i, bestMs = ms;
    }
    if (best == candidates.size())
      return Status::error("cuBLASLt launched none of the heuristic's algorithms");
    return candidates[best];
  };
  StatusOr<cublasLtMatmulAlgo_t> chosen = time();
  Status a = GPT_CUDA_STATUS(cudaEventDestroy(start)), b = GPT_CUDA_STATUS(cudaEventDestroy(stop));
  if (!chosen)
    return chosen;
  if (!a)
    return a;
  if (!b)
    return b;
  return chosen;
}

Status CublasLtGemm::saveTuned() {
  GemmAlgoFile file;
  file.cublasLt = cublasLtVersion_;
  file.device = deviceName_;
  for (const auto &[key, algo] : tuned_) {
    std::array<uint64_t, 8> words;
    std::memcpy(words.data(), algo.data, sizeof(algo.data));
    file.algos[key] = words;
  }
  return writeGemmAlgos(algosPath_, file);
}

Status CublasLtGemm::run(uint32_t index, const schema::Gemm &g, const GemmOperands &ops,
                         cudaStream_t stream, uint32_t streamIndex) {
  if (index >= plans_.size() || streamIndex >= numStreams_)
    return Status::error("GEMM " + std::to_string(index) + " on stream " +
                         std::to_string(streamIndex) + " is out of range");
  StatusOr<Plan *> p = plan(index, g, ops, stream, streamIndex);
  if (!p)
    return p.status();
  if (Status s = setPointers((*p)->desc, index, g, ops); !s)
    return s;
  return launch(**p, (*p)->algo, g, ops, stream, streamIndex);
}

} // namespace gptc::blas
