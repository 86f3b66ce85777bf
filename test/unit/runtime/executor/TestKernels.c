/*===- TestKernels.c - Host-ABI kernels for the runtime tests ------------===*
 *
 * Built as a shared object and embedded as an executable's host_object.
 * Host ABI (executable.fbs): void name(void **argv, const uint32_t *grid,
 * const uint32_t *block); argv[i] points to argument i's value (a tensor's
 * address, an int64_t or a double), and the kernel runs every thread of
 * the grid itself. DeviceKernels.cu has the same kernels for CUDA.
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>

/* Loops i over every linear thread index of the launch. */
#define FOR_EACH_THREAD(i)                                                                         \
  for (int64_t i = 0,                                                                              \
               gptc_n_ = (int64_t)grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2];    \
       i < gptc_n_; ++i)

/* x[i] *= s for i < n.  (x: f32*, n: i64, s: f64) */
void gptc_test_scale(void **argv, const uint32_t *grid, const uint32_t *block) {
  float *x = *(float **)argv[0];
  int64_t n = *(int64_t *)argv[1];
  double s = *(double *)argv[2];
  FOR_EACH_THREAD(i) if (i < n) x[i] = (float)(x[i] * s);
}

/* out[i] = a[i] + b[i] for i < n.  (a, b, out: f32*, n: i64) */
void gptc_test_add(void **argv, const uint32_t *grid, const uint32_t *block) {
  const float *a = *(const float **)argv[0];
  const float *b = *(const float **)argv[1];
  float *out = *(float **)argv[2];
  int64_t n = *(int64_t *)argv[3];
  FOR_EACH_THREAD(i) if (i < n) out[i] = a[i] + b[i];
}

/*===----------------------------------------------------------------------===*
 * A fake model for gptrun's tests: the programs' plumbing without a model.
 *===----------------------------------------------------------------------===*/

/* w[i] = seed + i.  (w: f32*, n: i64, seed: i32*) */
void gptc_fake_init(void **argv, const uint32_t *grid, const uint32_t *block) {
  float *w = *(float **)argv[0];
  int64_t n = *(int64_t *)argv[1];
  const int32_t *seed = *(const int32_t **)argv[2];
  (void)grid, (void)block;
  for (int64_t i = 0; i < n; ++i)
    w[i] = (float)(*seed + i);
}

/* loss = mean(targets) + w[0]; m[0] += 1 (the optimizer state counts
 * steps, so a missing zeroing shows); norm = m[0]; lr = 1e-4 (step + 1).
 * (targets: i32*, n: i64, step: i32*, w: f32*, m: f32*, loss, norm, lr: f32*) */
void gptc_fake_step(void **argv, const uint32_t *grid, const uint32_t *block) {
  const int32_t *targets = *(const int32_t **)argv[0];
  int64_t n = *(int64_t *)argv[1];
  const int32_t *step = *(const int32_t **)argv[2];
  const float *w = *(const float **)argv[3];
  float *m = *(float **)argv[4];
  float *loss = *(float **)argv[5], *norm = *(float **)argv[6], *lr = *(float **)argv[7];
  (void)grid, (void)block;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += targets[i];
  m[0] += 1;
  *loss = (float)(sum / (double)n + w[0]);
  *norm = m[0];
  *lr = (float)(1e-4 * (*step + 1));
}

/* loss = mean(targets).  (targets: i32*, n: i64, loss: f32*) */
void gptc_fake_forward(void **argv, const uint32_t *grid, const uint32_t *block) {
  const int32_t *targets = *(const int32_t **)argv[0];
  int64_t n = *(int64_t *)argv[1];
  float *loss = *(float **)argv[2];
  (void)grid, (void)block;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += targets[i];
  *loss = (float)(sum / (double)n);
}

/* gptc_fake_step, but the loss of the second step (step input 1) is NaN:
 * gptrun's --on-nan handling. The step's update (m[0] += 1) is done. */
void gptc_fake_step_nan(void **argv, const uint32_t *grid, const uint32_t *block) {
  gptc_fake_step(argv, grid, block);
  if (**(const int32_t **)argv[2] == 1)
    **(float **)argv[5] = __builtin_nanf("");
}

/* gptc_fake_step, but the second step's update (step input 1) makes w[0]
 * infinite while its loss and norm stay finite (a huge lr): the next
 * step's loss is not finite, and a checkpoint of the state would not be. */
void gptc_fake_step_poison(void **argv, const uint32_t *grid, const uint32_t *block) {
  gptc_fake_step(argv, grid, block);
  if (**(const int32_t **)argv[2] == 1)
    (*(float **)argv[3])[0] = __builtin_inff();
}
