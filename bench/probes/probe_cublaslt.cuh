// bench/probes/probe_cublaslt.cuh: what the cuBLASLt probes (probe_fp8_*.cu)
// share: error checks, operand fills, and timing the heuristic's best
// algorithm of one matmul.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__);                \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
// In a function returning float: -1 (no time) on a cuBLAS error.
#define CB(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t st_ = (x);                                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::printf("cuBLAS %d at %s:%d\n", int(st_), __FILE__, __LINE__);                           \
      return -1.0f;                                                                                \
    }                                                                                              \
  } while (0)

struct Shape {
  const char *name;
  int m, n, k;
};

// Hashed values in [-amp, amp) as T (an FP8 type).
template <typename T> __global__ void fillHashed(T *p, size_t n, unsigned seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = T(amp * (float(h & 0xffff) / 32768.0f - 1.0f));
  }
}

// A cuBLASLt handle, made after the CUDA context (as gptrun makes its own),
// and a 32 MiB workspace.
struct ProbeContext {
  cublasLtHandle_t h = nullptr;
  void *ws = nullptr;
  size_t wsBytes = 32u << 20;
  ProbeContext() {
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) {
      std::printf("cublasLtCreate failed\n");
      std::exit(1);
    }
    CK(cudaMalloc(&ws, wsBytes));
  }
  ~ProbeContext() {
    cudaFree(ws);
    cublasLtDestroy(h);
  }
  ProbeContext(const ProbeContext &) = delete;
  ProbeContext &operator=(const ProbeContext &) = delete;
};

// D = alpha op(A) op(B) (+ desc's epilogue), beta 0, with each of the
// heuristic's first 8 algorithms: 3 calls, then 20 timed. Prints and
// returns the best time in ms, or -1 when none runs. C is passed as null
// when `cNull` (an FP8 D, as gptrun does); if cuBLASLt refuses that, C = D
// from there on, said in the output. Destroys the layouts and the desc.
inline float bestAlgorithm(const char *name, cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                           cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                           cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, const void *a,
                           const void *b, void *d, bool cNull, void *ws, size_t wsBytes) {
  float best = -1.0f;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t res[8];
  int found = 0;
  cublasStatus_t hs = cublasLtMatmulPreferenceCreate(&pref);
  if (hs == CUBLAS_STATUS_SUCCESS)
    hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &wsBytes, sizeof(wsBytes));
  if (hs == CUBLAS_STATUS_SUCCESS)
    hs = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 8, res, &found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    std::printf("  %-30s heuristic: status %d, %d algorithms\n", name, int(hs), found);
  } else {
    float alpha = 1.0f, beta = 0.0f;
    const void *c = cNull ? nullptr : d;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < found; ++i) {
      auto call = [&] {
        return cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, c, lc, d, ld, &res[i].algo,
                              ws, wsBytes, 0);
      };
      cublasStatus_t st = call();
      if (st != CUBLAS_STATUS_SUCCESS && c == nullptr) {
        std::printf("  %-30s algorithm %d refuses C = null (status %d); C = D from here\n", name,
                    i, int(st));
        c = d;
        st = call();
      }
      for (int r = 0; r < 2 && st == CUBLAS_STATUS_SUCCESS; ++r)
        st = call();
      if (st != CUBLAS_STATUS_SUCCESS) {
        std::printf("  %-30s algorithm %d: cublasLtMatmul status %d\n", name, i, int(st));
        continue;
      }
      CK(cudaEventRecord(e0));
      for (int r = 0; r < 20; ++r)
        call();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (best < 0 || ms / 20 < best)
        best = ms / 20;
    }
    // The last algorithm's D is left for the caller's check (any gives a
    // correct one).
    CK(cudaDeviceSynchronize());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::printf("  %-30s %8.1f us  (%d algorithms)\n", name, best * 1000, found);
  }
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {la, lb, lc, ld})
    cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

// One FP8 matmul as gptc's GEMMs run them: D (m x n) = A^T B with A stored
// k x m and B k x n (column-major, "TN"), fast accumulation, f32 scales of
// A and B at scales[0] and scales[1], bf16 C.
struct Fp8Matmul {
  cudaDataType_t aType = CUDA_R_8F_E4M3, bType = CUDA_R_8F_E4M3, dType = CUDA_R_16BF;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void *bias = nullptr;    // bf16: the bias, or the bias gradient (BGRAD)
  void *aux = nullptr;     // bf16, m x n: GELU_AUX's output, DGELU's input
  float *dScale = nullptr; // with an FP8 D: its scale and amax
  float *amaxD = nullptr;
};

// bestAlgorithm of `f` on shape `s`; -1 if a descriptor cannot be made.
inline float timeFp8Matmul(const char *name, const ProbeContext &ctx, const Shape &s,
                           const Fp8Matmul &f, float *scales, const void *a, const void *b,
                           void *d) {
  cublasLtMatmulDesc_t desc;
  CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto &v) {
    return cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v));
  };
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  cudaDataType_t bf = CUDA_R_16BF;
  float *sa = scales, *sb = scales + 1;
  CB(set(CUBLASLT_MATMUL_DESC_TRANSA, t));
  CB(set(CUBLASLT_MATMUL_DESC_TRANSB, n));
  CB(set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(1)));
  CB(set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sa));
  CB(set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sb));
  CB(set(CUBLASLT_MATMUL_DESC_EPILOGUE, f.epilogue));
  if (f.bias) {
    CB(set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, f.bias));
    CB(set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bf));
  }
  if (f.aux) {
    CB(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, f.aux));
    CB(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(s.m)));
    CB(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, bf));
  }
  if (f.dScale) {
    CB(set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, f.dScale));
    CB(set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, f.amaxD));
  }
  cublasLtMatrixLayout_t la, lb, lc, ld;
  CB(cublasLtMatrixLayoutCreate(&la, f.aType, s.k, s.m, s.k));
  CB(cublasLtMatrixLayoutCreate(&lb, f.bType, s.k, s.n, s.k));
  CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.m, s.n, s.m));
  CB(cublasLtMatrixLayoutCreate(&ld, f.dType, s.m, s.n, s.m));
  return bestAlgorithm(name, ctx.h, desc, la, lb, lc, ld, a, b, d, f.dScale != nullptr, ctx.ws,
                       ctx.wsBytes);
}

// The four sizes' MLP products at the issue's batches (T = 1024):
// m = 4C, n = B*T tokens, k = C.
constexpr Shape kMlpShapes[] = {{"124M, B=64", 3072, 65536, 768},
                                {"350M, B=32", 4096, 32768, 1024},
                                {"774M, B=16", 5120, 16384, 1280},
                                {"1558M, B=16", 6400, 16384, 1600}};

// One shape's device buffers: A (k x m) and B (k x n) codes, D (m x n,
// room for bf16), aux (m x n, bf16), vec (m, bf16: a bias or its
// gradient), the scales of A, B and D, and an amax (zero). The caller
// fills A, B and what its variants read.
struct ProbeBuffers {
  static constexpr float kScales[3] = {0.05f, 0.05f, 16.0f};
  void *a = nullptr, *b = nullptr, *d = nullptr, *aux = nullptr, *vec = nullptr;
  float *scales = nullptr, *amax = nullptr;
  explicit ProbeBuffers(const Shape &s) {
    size_t mn = size_t(s.m) * s.n;
    CK(cudaMalloc(&a, size_t(s.m) * s.k));
    CK(cudaMalloc(&b, size_t(s.k) * s.n));
    CK(cudaMalloc(&d, mn * 2));
    CK(cudaMalloc(&aux, mn * 2));
    CK(cudaMalloc(&vec, size_t(s.m) * 2));
    CK(cudaMalloc(&scales, sizeof(kScales)));
    CK(cudaMalloc(&amax, sizeof(float)));
    CK(cudaMemcpy(scales, kScales, sizeof(kScales), cudaMemcpyHostToDevice));
    CK(cudaMemset(amax, 0, sizeof(float)));
  }
  ~ProbeBuffers() {
    for (void *p : {a, b, d, aux, vec, static_cast<void *>(scales), static_cast<void *>(amax)})
      cudaFree(p);
  }
  ProbeBuffers(const ProbeBuffers &) = delete;
  ProbeBuffers &operator=(const ProbeBuffers &) = delete;
};
