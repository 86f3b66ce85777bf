//===- DeviceKernels.cu - TestKernels.c's kernels in the CUDA ABI ---------===//
//
// Compiled by nvcc to a cubin and to PTX at build time (not with the CUDA
// language in CMake: the runtime has no .cu of its own), then embedded in
// executables by CudaBackendTest.

#include <cstdint>

// x[i] *= s for i < n.
extern "C" __global__ void gptc_test_scale(float *x, int64_t n, double s) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = float(x[i] * s);
}

// out[i] = a[i] + b[i] for i < n.
extern "C" __global__ void gptc_test_add(const float *a, const float *b, float *out, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = a[i] + b[i];
}

//===----------------------------------------------------------------------===//
// TestKernels.c's fake model, one thread each (gptrun's GPU tests)
//===----------------------------------------------------------------------===//

extern "C" __global__ void gptc_fake_init(float *w, int64_t n, const int32_t *seed) {
  for (int64_t i = 0; i < n; ++i)
    w[i] = float(*seed + i);
}

extern "C" __global__ void gptc_fake_step(const int32_t *targets, int64_t n, const int32_t *step,
                                          const float *w, float *m, float *loss, float *norm,
                                          float *lr) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += targets[i];
  m[0] += 1;
  *loss = float(sum / double(n) + w[0]);
  *norm = m[0];
  *lr = float(1e-4 * (*step + 1));
}

extern "C" __global__ void gptc_fake_forward(const int32_t *targets, int64_t n, float *loss) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += targets[i];
  *loss = float(sum / double(n));
}
