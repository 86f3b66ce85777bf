// bench/probe_fp8_dgelu_gemm.cu: can cuBLASLt's FP8 GEMM write the MLP's
// GELU gradient as FP8 itself (DGELU or DGELU_BGRAD with the bf16
// pre-activation as aux, an e5m2 D, a D scale and amax_D), and at what cost
// next to the product gptc runs now (bf16 D, then fp8_cast_transpose_sum
// applies gelu', casts and sums the bias gradient)?
// GPU side only (nvcc, cuBLASLt):
//   nvcc -O2 -arch=sm_90 -o probe bench/probe_fp8_dgelu_gemm.cu -lcublasLt
//   ./probe            # the four GPT-2 sizes' c_proj data-gradient products
// The FP8-D variants pass C as null (beta 0), as gptc's runtime does; if
// cuBLASLt refuses that, they are retried with C = D and the probe says so.
// Prints per shape the best of the heuristic's algorithms (20 timed calls
// after 3) for each variant, then checks the e5m2 D against
// product * gelu'(aux) * scale (the product from the plain bf16 variant),
// amax_D against the largest |product * gelu'(aux)|, and the bias gradient
// of DGELU_BGRAD against its row sums.
// On the 2026-12-06 H100 every cublasLtMatmul call here returned status 15
// (NOT_SUPPORTED) while gptrun ran the same GEMMs; the handle was then
// created before any CUDA context (now after one; not yet rerun). The
// heuristic's answers (which variants have algorithms) hold either way.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__);                \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define CB(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t st_ = (x);                                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::printf("cuBLAS %d at %s:%d\n", int(st_), __FILE__, __LINE__);                           \
      return -1.0f;                                                                                \
    }                                                                                              \
  } while (0)

template <typename T> __global__ void fillFp8(T *p, size_t n, unsigned seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = T(amp * (float(h & 0xffff) / 32768.0f - 1.0f));
  }
}

// Pre-activations in about [-4, 4): every part of gelu' is exercised.
__global__ void fillAux(__nv_bfloat16 *p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(0.0625f * float(int((i * 40503u) % 128u) - 64));
}

struct Shape {
  const char *name;
  int m, n, k;
};

enum Variant { kBf16, kBf16DGelu, kBf16DGeluBGrad, kFp8DGelu, kFp8DGeluBGrad };
const char *kNames[] = {"bf16 D, DEFAULT (now)", "bf16 D, DGELU", "bf16 D, DGELU_BGRAD",
                        "e5m2 D, DGELU, amax", "e5m2 D, DGELU_BGRAD, amax"};
bool isFp8(Variant v) { return v == kFp8DGelu || v == kFp8DGeluBGrad; }
bool hasBGrad(Variant v) { return v == kBf16DGeluBGrad || v == kFp8DGeluBGrad; }

// Best time (ms) of the heuristic's first 8 algorithms, or < 0 if none runs.
float timeVariant(cublasLtHandle_t h, const Shape &s, Variant v, void *a, void *b, void *d,
                  void *aux, void *bgrad, float *scales, float *amax, void *ws, size_t wsBytes) {
  cublasLtMatmulDesc_t desc;
  CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
  int8_t fast = 1;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  float *sa = scales, *sb = scales + 1, *sd = scales + 2;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
  cublasLtEpilogue_t epi = v == kBf16      ? CUBLASLT_EPILOGUE_DEFAULT
                           : hasBGrad(v)   ? CUBLASLT_EPILOGUE_DGELU_BGRAD
                                           : CUBLASLT_EPILOGUE_DGELU;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  cudaDataType_t bf = CUDA_R_16BF;
  if (hasBGrad(v)) {
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bgrad,
                                      sizeof(bgrad)));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf, sizeof(bf)));
  }
  if (v != kBf16) {
    int64_t ld = s.m;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                      sizeof(aux)));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &bf,
                                      sizeof(bf)));
  }
  if (isFp8(v)) {
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &sd, sizeof(sd)));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax,
                                      sizeof(amax)));
  }
  cublasLtMatrixLayout_t la, lb, lc, ld;
  CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, s.k, s.m, s.k));
  CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E5M2, s.k, s.n, s.k));
  CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.m, s.n, s.m));
  CB(cublasLtMatrixLayoutCreate(&ld, isFp8(v) ? CUDA_R_8F_E5M2 : CUDA_R_16BF, s.m, s.n, s.m));
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes,
                                          sizeof(wsBytes)));
  cublasLtMatmulHeuristicResult_t res[8];
  int found = 0;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 8, res, &found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    std::printf("  %-28s heuristic: status %d, %d algorithms\n", kNames[v], int(hs), found);
    return -1.0f;
  }
  float alpha = 1.0f, beta = 0.0f, best = -1.0f;
  const void *c = isFp8(v) ? nullptr : d;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < found; ++i) {
    auto call = [&] {
      return cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, c, lc, d, ld, &res[i].algo, ws,
                            wsBytes, 0);
    };
    cublasStatus_t st = call();
    if (st != CUBLAS_STATUS_SUCCESS && c == nullptr) {
      std::printf("  %-28s algorithm %d refuses C = null (status %d); C = D from here\n",
                  kNames[v], i, int(st));
      c = d;
      st = call();
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      std::printf("  %-28s algorithm %d: cublasLtMatmul status %d\n", kNames[v], i, int(st));
      continue;
    }
    call(), call();
    CK(cudaEventRecord(e0));
    for (int r = 0; r < 20; ++r)
      call();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= 20;
    if (best < 0 || ms < best)
      best = ms;
  }
  CK(cudaDeviceSynchronize());
  std::printf("  %-28s %8.1f us  (%d algorithms)\n", kNames[v], best * 1000, found);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

// d/dx of the tanh GELU.
double geluGrad(double x) {
  const double k = 0.7978845608028654, c = 0.044715;
  double u = k * (x + c * x * x * x), th = std::tanh(u);
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * c * x * x);
}

int main() {
  Shape shapes[] = {{"124M c_proj dgrad, B=64", 3072, 65536, 768},
                    {"350M c_proj dgrad, B=32", 4096, 32768, 1024},
                    {"774M c_proj dgrad, B=16", 5120, 16384, 1280},
                    {"1558M c_proj dgrad, B=16", 6400, 16384, 1600}};
  cublasLtHandle_t h;
  // The context first, as gptrun makes it: a handle created without one is
  // the one difference from gptrun's GEMMs (which run) found so far.
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS)
    return 1;
  size_t wsBytes = 32u << 20;
  void *ws;
  CK(cudaMalloc(&ws, wsBytes));
  for (const Shape &s : shapes) {
    std::printf("%s: m=%d n=%d k=%d\n", s.name, s.m, s.n, s.k);
    size_t mk = size_t(s.m) * s.k, kn = size_t(s.k) * s.n, mn = size_t(s.m) * s.n;
    __nv_fp8_e4m3 *a;
    __nv_fp8_e5m2 *b;
    void *prod, *d, *aux, *bgrad;
    float *scales, *amax;
    CK(cudaMalloc(&a, mk));
    CK(cudaMalloc(&b, kn));
    CK(cudaMalloc(&prod, mn * 2));
    CK(cudaMalloc(&d, mn * 2));
    CK(cudaMalloc(&aux, mn * 2));
    CK(cudaMalloc(&bgrad, s.m * 2));
    CK(cudaMalloc(&scales, 3 * sizeof(float)));
    CK(cudaMalloc(&amax, sizeof(float)));
    fillFp8<<<1024, 256>>>(a, mk, 1, 1.0f);
    fillFp8<<<1024, 256>>>(b, kn, 2, 1.0f);
    fillAux<<<1024, 256>>>(static_cast<__nv_bfloat16 *>(aux), mn);
    float hs[3] = {0.05f, 0.05f, 16.0f};
    CK(cudaMemcpy(scales, hs, sizeof(hs), cudaMemcpyHostToDevice));
    CK(cudaMemset(amax, 0, sizeof(float)));
    float times[5];
    times[kBf16] = timeVariant(h, s, kBf16, a, b, prod, aux, bgrad, scales, amax, ws, wsBytes);
    for (Variant v : {kBf16DGelu, kBf16DGeluBGrad, kFp8DGelu, kFp8DGeluBGrad})
      times[v] = timeVariant(h, s, v, a, b, d, aux, bgrad, scales, amax, ws, wsBytes);
    if (times[kFp8DGeluBGrad] < 0 && times[kFp8DGelu] >= 0) {
      CK(cudaMemset(amax, 0, sizeof(float)));
      timeVariant(h, s, kFp8DGelu, a, b, d, aux, bgrad, scales, amax, ws, wsBytes);
    }
    if (times[kFp8DGeluBGrad] < 0 && times[kFp8DGelu] < 0) {
      std::printf("  no FP8-D DGELU variant runs: nothing to check\n");
    } else {
      // The last FP8 variant that ran left its D (and bias gradient).
      std::vector<__nv_bfloat16> ph(mn), ah(mn), bh(s.m);
      std::vector<uint8_t> dh(mn);
      float am = 0;
      CK(cudaMemcpy(ph.data(), prod, mn * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ah.data(), aux, mn * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(dh.data(), d, mn, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(bh.data(), bgrad, s.m * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(&am, amax, sizeof(float), cudaMemcpyDeviceToHost));
      double worst = 0, largest = 0, worstBias = 0;
      for (size_t i = 0; i < mn; i += 7) {
        double g = double(__bfloat162float(ph[i])) * geluGrad(__bfloat162float(ah[i]));
        __nv_fp8_e5m2 q;
        q.__x = dh[i];
        double got = double(float(q)) / hs[2];
        largest = std::fmax(largest, std::fabs(g));
        // e5m2's half ulp (12.5%) and the bf16 product's rounding.
        double tol = 0.14 * std::fabs(g) + 1e-2 / hs[2];
        worst = std::fmax(worst, std::fabs(got - g) / tol);
      }
      if (times[kFp8DGeluBGrad] >= 0)
        for (int row = 0; row < s.m; row += s.m / 8) {
          double sum = 0, mag = 0;
          for (int col = 0; col < s.n; ++col) {
            size_t i = size_t(col) * s.m + row;
            double g = double(__bfloat162float(ph[i])) * geluGrad(__bfloat162float(ah[i]));
            sum += g, mag += std::fabs(g);
          }
          double got = __bfloat162float(bh[row]);
          worstBias =
              std::fmax(worstBias, std::fabs(got - sum) / (0.01 * std::fabs(sum) + 1e-3 * mag));
        }
      std::printf("  check: e5m2 D vs prod*gelu'(aux)*scale worst/tolerance %.3f; amax_D %.4f, "
                  "max |prod*gelu'| (sampled) %.4f; bias gradient worst/tolerance %.3f\n",
                  worst, am, largest, worstBias);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(prod));
    CK(cudaFree(d));
    CK(cudaFree(aux));
    CK(cudaFree(bgrad));
    CK(cudaFree(scales));
    CK(cudaFree(amax));
  }
  cublasLtDestroy(h);
  return 0;
}
