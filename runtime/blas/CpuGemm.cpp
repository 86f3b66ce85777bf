//===- CpuGemm.cpp - the schema's GEMM with loops, for the Host target ----===//

#include "runtime/blas/CpuGemm.h"

#include "runtime/blas/GemmCheck.h"
#include "runtime/executable/Executable.h"

#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace gptc::blas {

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double load(schema::DType t, const void *base, uint64_t i) {
  switch (t) {
  case schema::DType::F32:
    return static_cast<const float *>(base)[i];
  case schema::DType::F64:
    return static_cast<const double *>(base)[i];
  case schema::DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
  case schema::DType::F16:
    return f16ToFloat(static_cast<const uint16_t *>(base)[i]);
  case schema::DType::F8E4M3:
    return f8e4m3ToFloat(static_cast<const uint8_t *>(base)[i]);
  case schema::DType::F8E5M2:
    return f8e5m2ToFloat(static_cast<const uint8_t *>(base)[i]);
  case schema::DType::I32:
    break; // rejected by checkGemm
  }
  return 0;
}

void store(schema::DType t, void *base, uint64_t i, double v) {
  switch (t) {
  case schema::DType::F32:
    static_cast<float *>(base)[i] = static_cast<float>(v);
    return;
  case schema::DType::F64:
    static_cast<double *>(base)[i] = v;
    return;
  case schema::DType::BF16:
    static_cast<uint16_t *>(base)[i] = floatToBf16(static_cast<float>(v));
    return;
  case schema::DType::F16:
    static_cast<uint16_t *>(base)[i] = floatToF16(static_cast<float>(v));
    return;
  case schema::DType::F8E4M3:
  case schema::DType::F8E5M2:
  case schema::DType::I32:
    return; // never D (checkGemm)
  }
}

/// An FP8 format: `mantissa` bits, exponent `bias`, the smallest normal
/// exponent, and the largest finite value.
struct Fp8Format {
  int mantissa, bias, minExponent;
  float maxFinite;
  uint8_t nan; // the NaN encoders write (with the sign)
};
constexpr Fp8Format kE4M3{3, 7, -6, 448.0f, 0x7f};
constexpr Fp8Format kE5M2{2, 15, -14, 57344.0f, 0x7e};

/// |f| (not NaN) rounded to nearest-even and saturated, as the format's 7
/// magnitude bits.
uint8_t encodeMagnitude(const Fp8Format &fmt, float a) {
  if (!(a < fmt.maxFinite)) // saturate (infinity included)
    a = fmt.maxFinite;
  int e = a == 0 ? fmt.minExponent : std::max(std::ilogb(a), fmt.minExponent);
  // The spacing of representable values at a's exponent; the division and
  // the product below are exact (powers of two), nearbyint ties to even.
  float quantum = std::ldexp(1.0f, e - fmt.mantissa);
  float q = std::min(std::nearbyint(a / quantum) * quantum, fmt.maxFinite);
  if (q < std::ldexp(1.0f, fmt.minExponent)) // subnormal (or zero)
    return uint8_t(q / std::ldexp(1.0f, fmt.minExponent - fmt.mantissa));
  int qe = std::ilogb(q); // rounding may have carried into the next binade
  int mant = int(q / std::ldexp(1.0f, qe - fmt.mantissa)) - (1 << fmt.mantissa);
  return uint8_t(((qe + fmt.bias) << fmt.mantissa) | mant);
}

uint8_t encode(const Fp8Format &fmt, float f) {
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f))
    return sign | fmt.nan;
  return sign | encodeMagnitude(fmt, std::fabs(f));
}

float decodeMagnitude(const Fp8Format &fmt, uint8_t bits) {
  int exp = bits >> fmt.mantissa, mant = bits & ((1 << fmt.mantissa) - 1);
  if (exp == 0)
    return std::ldexp(float(mant), fmt.minExponent - fmt.mantissa);
  return std::ldexp(float(mant + (1 << fmt.mantissa)), exp - fmt.bias - fmt.mantissa);
}

const void *offset(const void *base, schema::DType t, uint64_t elements) {
  return static_cast<const char *>(base) + elements * elementSize(t);
}

template <typename Acc> Acc gelu(Acc x) {
  const Acc k = Acc(0.7978845608028654), a = Acc(0.044715); // sqrt(2 / pi)
  return Acc(0.5) * x * (Acc(1) + std::tanh(k * (x + a * x * x * x)));
}

template <typename Acc> Acc geluDerivative(Acc x) {
  const Acc k = Acc(0.7978845608028654), a = Acc(0.044715);
  Acc th = std::tanh(k * (x + a * x * x * x));
  return Acc(0.5) * (Acc(1) + th) + Acc(0.5) * x * (Acc(1) - th * th) * k * (Acc(1) + 3 * a * x * x);
}

// ---- Blocked GEMM -----------------------------------------------------------
//
// Goto's scheme: D is cut into tiles of at most kMC x nc (one task each, run
// on the host pool); a task packs op(A) and op(B) kKC deep at a time into
// panels the micro-kernel streams, converting them to Acc as it packs, and
// keeps its tile's sums in Acc until k is done, then applies the epilogue.
// Every element of D is sum_p op(A)[i,p] op(B)[p,j] from 0, p ascending,
// each step one fused multiply-add (rounded once), so neither the tiling,
// the ISA nor the thread count changes a bit of the result.

constexpr int64_t kKC = 256; // depth of a packed block
constexpr int64_t kMC = 128; // rows of a task's tile: a multiple of every MR

#if defined(__GNUC__)
#define GPTC_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define GPTC_ALWAYS_INLINE inline
#endif

/// The register tile: kMR = two vectors of VB bytes by NR columns. With
/// SoftFma each lane calls std::fma (a CPU without FMA units); otherwise
/// `acc += a * b` is one FMA instruction: this file is compiled with
/// -ffp-contract=fast and the callers target FMA.
template <typename Acc, int VB, int NR, bool SoftFma> struct Micro {
  typedef Acc V __attribute__((vector_size(VB)));
  static constexpr int kL = VB / int(sizeof(Acc)), kMR = 2 * kL;

  /// c (kMR x NR, column-major) = (first ? 0 : c) + sum over p < kc of
  /// a[p] (kMR values) times b[p] (NR values), p ascending.
  static GPTC_ALWAYS_INLINE void tile(int64_t kc, const Acc *a, const Acc *b, Acc *c, bool first) {
    V acc[NR][2];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j)
      for (int h = 0; h < 2; ++h) {
        acc[j][h] = V{};
        if (!first)
          __builtin_memcpy(&acc[j][h], c + j * kMR + h * kL, VB);
      }
    for (int64_t p = 0; p < kc; ++p) {
      V a0, a1;
      __builtin_memcpy(&a0, a + p * kMR, VB);
      __builtin_memcpy(&a1, a + p * kMR + kL, VB);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        const Acc bj = b[p * NR + j];
        if constexpr (SoftFma) {
          for (int l = 0; l < kL; ++l) {
            acc[j][0][l] = std::fma(a0[l], bj, acc[j][0][l]);
            acc[j][1][l] = std::fma(a1[l], bj, acc[j][1][l]);
          }
        } else {
          acc[j][0] += a0 * bj;
          acc[j][1] += a1 * bj;
        }
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j)
      for (int h = 0; h < 2; ++h)
        __builtin_memcpy(c + j * kMR + h * kL, &acc[j][h], VB);
  }

  /// Every register tile of a packed block: mPanels x nPanels of them, the
  /// B panel staying in L1 while the A panels stream from L2.
  static GPTC_ALWAYS_INLINE void block(int64_t mPanels, int64_t nPanels, int64_t kc,
                                       const Acc *pa, const Acc *pb, Acc *c, bool first) {
    for (int64_t jp = 0; jp < nPanels; ++jp)
      for (int64_t ip = 0; ip < mPanels; ++ip)
        tile(kc, pa + ip * kc * kMR, pb + jp * kc * NR, c + (jp * mPanels + ip) * kMR * NR, first);
  }
};

template <typename Acc> struct MicroKernel {
  int64_t mr, nr;
  void (*block)(int64_t mPanels, int64_t nPanels, int64_t kc, const Acc *pa, const Acc *pb,
                Acc *c, bool first);
};

// One instantiation per ISA, each compiled for it. AVX2 gets 6 columns
// (12 accumulators of its 16 registers), AVX-512 8 (16 of 32).
#if defined(__x86_64__) && defined(__GNUC__)
#define GPTC_BLOCK_FOR(name, isa, Acc, VB, NR)                                                   \
  __attribute__((target(isa))) void name(int64_t mp, int64_t np, int64_t kc, const Acc *pa,      \
                                         const Acc *pb, Acc *c, bool first) {                     \
    Micro<Acc, VB, NR, false>::block(mp, np, kc, pa, pb, c, first);                               \
  }
GPTC_BLOCK_FOR(blockAvx512F, "avx512f,fma", float, 64, 8)
GPTC_BLOCK_FOR(blockAvx512D, "avx512f,fma", double, 64, 8)
GPTC_BLOCK_FOR(blockAvx2F, "avx2,fma", float, 32, 6)
GPTC_BLOCK_FOR(blockAvx2D, "avx2,fma", double, 32, 6)
#undef GPTC_BLOCK_FOR
#endif

void blockGenericF(int64_t mp, int64_t np, int64_t kc, const float *pa, const float *pb, float *c,
                   bool first) {
  Micro<float, 16, 6, true>::block(mp, np, kc, pa, pb, c, first);
}
void blockGenericD(int64_t mp, int64_t np, int64_t kc, const double *pa, const double *pb,
                   double *c, bool first) {
  Micro<double, 16, 6, true>::block(mp, np, kc, pa, pb, c, first);
}

template <typename Acc> MicroKernel<Acc> microKernel(CpuIsa isa) {
  if constexpr (std::is_same<Acc, float>::value) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == CpuIsa::Avx512)
      return {Micro<float, 64, 8, false>::kMR, 8, blockAvx512F};
    if (isa == CpuIsa::Avx2)
      return {Micro<float, 32, 6, false>::kMR, 6, blockAvx2F};
#endif
    return {Micro<float, 16, 6, false>::kMR, 6, blockGenericF};
  } else {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == CpuIsa::Avx512)
      return {Micro<double, 64, 8, false>::kMR, 8, blockAvx512D};
    if (isa == CpuIsa::Avx2)
      return {Micro<double, 32, 6, false>::kMR, 6, blockAvx2D};
#endif
    return {Micro<double, 16, 6, false>::kMR, 6, blockGenericD};
  }
}

/// out[c * outStride] = element start + c * stride of `base` (type t), as Acc,
/// for c < count: one switch per run keeps the copy loops typed.
template <typename Acc>
void loadRun(schema::DType t, const void *base, int64_t start, int64_t stride, int64_t count,
             Acc *out, int64_t outStride) {
  auto copy = [&](const auto *p, auto convert) {
    p += start;
    for (int64_t c = 0; c < count; ++c)
      out[c * outStride] = static_cast<Acc>(convert(p[c * stride]));
  };
  auto same = [](auto v) { return v; };
  switch (t) {
  case schema::DType::F32:
    return copy(static_cast<const float *>(base), same);
  case schema::DType::F64:
    return copy(static_cast<const double *>(base), same);
  case schema::DType::BF16:
    return copy(static_cast<const uint16_t *>(base), bf16ToFloat);
  case schema::DType::F16:
    return copy(static_cast<const uint16_t *>(base), f16ToFloat);
  case schema::DType::F8E4M3:
    return copy(static_cast<const uint8_t *>(base), f8e4m3ToFloat);
  case schema::DType::F8E5M2:
    return copy(static_cast<const uint8_t *>(base), f8e5m2ToFloat);
  case schema::DType::I32:
    break; // rejected by checkGemm
  }
}

/// Elements start .. start + count - 1 of `base` (type t, a D type) = v.
template <typename Acc>
void storeRun(schema::DType t, void *base, int64_t start, int64_t count, const Acc *v) {
  switch (t) {
  case schema::DType::F32:
    for (int64_t c = 0; c < count; ++c)
      static_cast<float *>(base)[start + c] = static_cast<float>(v[c]);
    return;
  case schema::DType::BF16:
    for (int64_t c = 0; c < count; ++c)
      static_cast<uint16_t *>(base)[start + c] = floatToBf16(static_cast<float>(v[c]));
    return;
  default:
    for (int64_t c = 0; c < count; ++c)
      store(t, base, start + c, v[c]);
  }
}

/// A packed operand: `panels` panels of `width` rows (A) or columns (B), each
/// kc deep and `width` wide per step; what lies past the matrix is zero.
/// Element (r, p) of the operand (r a row of op(A) or a column of op(B)) is
/// at base[r * rStride + p * pStride].
template <typename Acc>
void pack(schema::DType t, const void *base, int64_t rStride, int64_t pStride, int64_t r0,
          int64_t rows, int64_t p0, int64_t kc, int64_t width, Acc *out) {
  for (int64_t panel = 0; panel * width < rows; ++panel) {
    Acc *dst = out + panel * kc * width;
    int64_t first = r0 + panel * width, count = std::min(width, rows - panel * width);
    if (rStride == 1) // a step of p is contiguous in r
      for (int64_t p = 0; p < kc; ++p)
        loadRun(t, base, first + (p0 + p) * pStride, 1, count, dst + p * width, 1);
    else
      for (int64_t r = 0; r < count; ++r)
        loadRun(t, base, (first + r) * rStride + p0 * pStride, pStride, kc, dst + r, width);
    if (count < width)
      for (int64_t p = 0; p < kc; ++p)
        std::fill(dst + p * width + count, dst + (p + 1) * width, Acc(0));
  }
}

/// One thread's packing and accumulator space, kept between GEMMs: fresh
/// allocations of this size would fault in new pages on every call.
template <typename Acc> struct Scratch {
  std::vector<Acc> a, b, acc, d, x;
};
template <typename Acc> Scratch<Acc> &scratch() {
  thread_local Scratch<Acc> s;
  return s;
}

/// What every task of one GEMM shares.
template <typename Acc> struct GemmJob {
  const schema::Gemm &g;
  const GemmOperands &ops;
  MicroKernel<Acc> kernel;
  int64_t m, n, k, nc; // nc: columns of a task's tile, a multiple of kernel.nr
  Acc alpha, beta;
  schema::Epilogue e;
  bool fp8D;
  const Fp8Format *dFormat;
  float dScale;
};

/// Rows [i0, i0 + mc) of D times columns [j0, j1) of batch `batch`, the
/// columns in tiles of job.nc, ascending. Adds to `rowSums` (DGeluBGrad,
/// mc entries) and raises `amaxD` (FP8 D).
template <typename Acc>
void runTask(const GemmJob<Acc> &job, int64_t batch, int64_t i0, int64_t mc, int64_t j0,
             int64_t j1, Acc *rowSums, float &amaxD) {
  const schema::Gemm &g = job.g;
  const GemmOperands &ops = job.ops;
  const int64_t mr = job.kernel.mr, nr = job.kernel.nr, mPanels = (mc + mr - 1) / mr;
  const void *a = offset(ops.a, g.a_type(), batch * g.stride_a());
  const void *b = offset(ops.b, g.b_type(), batch * g.stride_b());
  void *c = const_cast<void *>(offset(ops.c, g.c_type(), batch * g.stride_c()));
  const int64_t lda = g.lda(), ldb = g.ldb(), ldc = g.ldc();
  // op(A)[i, p] = a[i * aR + p * aP], op(B)[p, j] = b[j * bR + p * bP].
  const int64_t aR = g.transa() ? lda : 1, aP = g.transa() ? 1 : lda;
  const int64_t bR = g.transb() ? 1 : ldb, bP = g.transb() ? ldb : 1;
  Scratch<Acc> &s = scratch<Acc>();
  const int64_t kcMax = std::min(job.k, kKC);
  s.a.resize(mPanels * mr * std::max<int64_t>(kcMax, 1));
  s.b.resize((job.nc / nr) * nr * std::max<int64_t>(kcMax, 1));
  s.acc.resize(mPanels * mr * job.nc);
  s.d.resize(mc);
  s.x.resize(mc);
  const schema::Epilogue e = job.e;
  const bool readsBias = epilogueReadsBias(e), hasAux = epilogueHasAux(e),
             gelu_ = epilogueAppliesGelu(e), geluGrad = epilogueAppliesGeluGrad(e);
  std::vector<Acc> bias;
  if (readsBias) {
    bias.resize(mc);
    loadRun(g.c_type(), ops.bias, i0, 1, mc, bias.data(), 1);
  }
  for (int64_t jc = j0; jc < j1; jc += job.nc) {
    const int64_t nc = std::min(job.nc, j1 - jc), nPanels = (nc + nr - 1) / nr;
    // k == 0 still runs one empty block, which zeroes the sums.
    for (int64_t pc = 0; pc == 0 || pc < job.k; pc += kKC) {
      const int64_t kc = std::min(kKC, job.k - pc);
      pack(g.a_type(), a, aR, aP, i0, mc, pc, kc, mr, s.a.data());
      pack(g.b_type(), b, bR, bP, jc, nc, pc, kc, nr, s.b.data());
      job.kernel.block(mPanels, nPanels, kc, s.a.data(), s.b.data(), s.acc.data(), pc == 0);
    }
    // The epilogue, column by column, in the order the naive loop had.
    Acc *d = s.d.data(), *x = s.x.data();
    for (int64_t jj = 0; jj < nc; ++jj) {
      const int64_t j = jc + jj, col = j * ldc + i0;
      const Acc *sums = s.acc.data() + (jj / nr) * mPanels * mr * nr + (jj % nr) * mr;
      for (int64_t ip = 0; ip < mPanels; ++ip)
        for (int64_t r = 0, rows = std::min(mr, mc - ip * mr); r < rows; ++r)
          d[ip * mr + r] = job.alpha * sums[ip * mr * nr + r];
      if (g.beta() != 0) {
        loadRun(g.c_type(), c, col, 1, mc, x, 1);
        for (int64_t i = 0; i < mc; ++i)
          d[i] += job.beta * x[i];
      }
      if (readsBias)
        for (int64_t i = 0; i < mc; ++i)
          d[i] += bias[i];
      if (hasAux && !geluGrad)
        storeRun(g.c_type(), ops.aux, col, mc, d);
      if (gelu_)
        for (int64_t i = 0; i < mc; ++i)
          d[i] = gelu(d[i]);
      if (geluGrad) {
        loadRun(g.c_type(), ops.aux, col, 1, mc, x, 1);
        for (int64_t i = 0; i < mc; ++i)
          d[i] *= geluDerivative(x[i]);
      }
      if (rowSums)
        for (int64_t i = 0; i < mc; ++i)
          rowSums[i] += d[i];
      if (job.fp8D) {
        for (int64_t i = 0; i < mc; ++i) {
          float v = static_cast<float>(d[i]);
          amaxD = std::isnan(v) || std::isnan(amaxD) ? NAN : std::max(amaxD, std::fabs(v));
          static_cast<uint8_t *>(c)[col + i] = encode(*job.dFormat, job.dScale * v);
        }
        continue;
      }
      storeRun(g.c_type(), c, col, mc, d);
    }
  }
}

template <typename Acc>
void gemm(const schema::Gemm &g, const GemmOperands &ops, CpuIsa isa, ThreadPool &pool) {
  const schema::Epilogue e = g.epilogue();
  // FP8: the operands' dequantization scales fold into alpha (in f32, as
  // cuBLASLt's scale type is).
  const float abScale = ops.aScale ? *static_cast<const float *>(ops.aScale) *
                                         *static_cast<const float *>(ops.bScale)
                                   : 1.0f;
  const flatbuffers::Optional<schema::DType> dType = g.d_type();
  MicroKernel<Acc> kernel = microKernel<Acc>(isa);
  GemmJob<Acc> job{g,
                   ops,
                   kernel,
                   g.m(),
                   g.n(),
                   g.k(),
                   16 * kernel.nr,
                   static_cast<Acc>(g.alpha()) * static_cast<Acc>(abScale),
                   static_cast<Acc>(g.beta()),
                   e,
                   dType.has_value(),
                   dType == schema::DType::F8E5M2 ? &kE5M2 : &kE4M3,
                   ops.dScale ? *static_cast<const float *>(ops.dScale) : 1.0f};
  const int64_t mTiles = (job.m + kMC - 1) / kMC;
  // DGeluBGrad sums each row of D over j in ascending order: its tasks take
  // whole rows. Otherwise a task is one tile.
  const bool wholeRows = e == schema::Epilogue::DGeluBGrad;
  const int64_t nTiles = wholeRows ? 1 : (job.n + job.nc - 1) / job.nc;
  const int64_t tasks = g.batch() * mTiles * nTiles;
  std::vector<Acc> rowSums(wholeRows ? job.m : 0, Acc(0));
  std::vector<float> amax(job.fp8D ? tasks : 0, 0.0f);
  pool.parallelFor(size_t(tasks), [&](size_t t) {
    const int64_t batch = int64_t(t) / (mTiles * nTiles), tile = int64_t(t) % (mTiles * nTiles);
    const int64_t i0 = (tile / nTiles) * kMC, mc = std::min(kMC, job.m - i0);
    const int64_t j0 = wholeRows ? 0 : (tile % nTiles) * job.nc,
                  j1 = wholeRows ? job.n : std::min(job.n, j0 + job.nc);
    float unused = 0;
    runTask(job, batch, i0, mc, j0, j1, wholeRows ? rowSums.data() + i0 : nullptr,
            job.fp8D ? amax[t] : unused);
  });
  if (job.fp8D) { // the maximum (or NaN) does not depend on the order
    float amaxD = 0;
    for (float v : amax)
      amaxD = std::isnan(v) || std::isnan(amaxD) ? NAN : std::max(amaxD, v);
    *static_cast<float *>(ops.amaxD) = amaxD;
  }
  // Bias gradients: sums over k of op(A)'s rows or op(B)'s columns, in
  // ascending k, from the operands as loaded.
  if (e == schema::Epilogue::BGradA || e == schema::Epilogue::BGradB) {
    const bool rowsOfA = e == schema::Epilogue::BGradA;
    const int64_t len = rowsOfA ? job.m : job.n;
    const int64_t ld = rowsOfA ? g.lda() : g.ldb();
    // Element (r, p): op(A)[r, p] or op(B)[p, r].
    const bool trans = rowsOfA ? g.transa() : g.transb();
    const int64_t rStride = rowsOfA ? (trans ? ld : 1) : (trans ? 1 : ld);
    const int64_t pStride = rowsOfA ? (trans ? 1 : ld) : (trans ? ld : 1);
    std::vector<Acc> sums(len, Acc(0)), x(len);
    for (int64_t p = 0; p < job.k; ++p) {
      loadRun(rowsOfA ? g.a_type() : g.b_type(), rowsOfA ? ops.a : ops.b, p * pStride, rStride,
              len, x.data(), 1);
      for (int64_t r = 0; r < len; ++r)
        sums[r] += x[r];
    }
    storeRun(g.c_type(), ops.bias, 0, len, sums.data());
  }
  if (wholeRows)
    storeRun(g.c_type(), ops.bias, 0, job.m, rowSums.data());
}

} // namespace

float bf16ToFloat(uint16_t h) { return floatOf(uint32_t(h) << 16); }

uint16_t floatToBf16(float f) {
  uint32_t u = bitsOf(f);
  if (std::isnan(f))
    return uint16_t((u >> 16) | 0x0040); // keep it a (quiet) NaN
  u += 0x7fff + ((u >> 16) & 1);         // round to nearest, ties to even
  return uint16_t(u >> 16);
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) // zero or subnormal: mant * 2^-24
    return floatOf(bitsOf(std::ldexp(float(mant), -24)) | sign);
  if (exp == 31)
    return floatOf(sign | 0x7f800000 | (mant << 13));
  return floatOf(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToF16(float f) {
  uint32_t x = bitsOf(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) // inf or NaN
    return sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (x >= 0x477ff000) // rounds above 65504
    return sign | 0x7c00;
  if (x < 0x38800000) // below 2^-14: subnormal; the scaling is exact, lrint rounds to even
    return sign | uint16_t(std::lrint(std::ldexp(floatOf(x), 24)));
  x += 0xfff + ((x >> 13) & 1);
  x -= uint32_t(127 - 15) << 23;
  return sign | uint16_t(x >> 13);
}

float f8e4m3ToFloat(uint8_t v) {
  float sign = v & 0x80 ? -1.0f : 1.0f;
  if ((v & 0x7f) == 0x7f) // E4M3FN's only NaN; it has no infinities
    return std::numeric_limits<float>::quiet_NaN();
  return sign * decodeMagnitude(kE4M3, v & 0x7f);
}

uint8_t floatToF8e4m3(float f) { return encode(kE4M3, f); }

float f8e5m2ToFloat(uint8_t v) {
  float sign = v & 0x80 ? -1.0f : 1.0f;
  if ((v & 0x7c) == 0x7c) // exponent all ones: infinity or NaN, as in IEEE
    return (v & 3) ? std::numeric_limits<float>::quiet_NaN()
                   : sign * std::numeric_limits<float>::infinity();
  return sign * decodeMagnitude(kE5M2, v & 0x7f);
}

uint8_t floatToF8e5m2(float f) { return encode(kE5M2, f); }

Status cpuGemm(const schema::Gemm &g, uint32_t index, const GemmOperands &ops, CpuIsa isa,
               ThreadPool &pool) {
  if (Status s = checkGemm(g, index); !s)
    return s;
  std::string where = "GEMM " + std::to_string(index) + ": epilogue " +
                      schema::EnumNameEpilogue(g.epilogue());
  if ((epilogueBiasLength(g) > 0) != (ops.bias != nullptr))
    return Status::error(where + (ops.bias ? " takes no bias" : " needs a bias"));
  if (epilogueHasAux(g.epilogue()) != (ops.aux != nullptr))
    return Status::error(where + (ops.aux ? " takes no aux matrix" : " needs an aux matrix"));
  if (isFp8Gemm(g) ? !(ops.aScale && ops.bScale) : (ops.aScale || ops.bScale))
    return Status::error("GEMM " + std::to_string(index) +
                         (isFp8Gemm(g) ? ": FP8 operands need both scales"
                                       : ": only FP8 operands take scales"));
  if (g.d_type().has_value() != (ops.dScale && ops.amaxD))
    return Status::error("GEMM " + std::to_string(index) +
                         (g.d_type() ? ": an FP8 D needs its scale and amax"
                                     : ": only an FP8 D takes a D scale and amax"));
  isa = std::min(isa, cpuIsa());
  if (g.compute() == schema::ComputeType::F64)
    gemm<double>(g, ops, isa, pool);
  else
    gemm<float>(g, ops, isa, pool);
  return Status::ok();
}

Status cpuGemm(const schema::Gemm &g, uint32_t index, const GemmOperands &ops) {
  return cpuGemm(g, index, ops, cpuIsa(), ThreadPool::host());
}

CpuIsa cpuIsa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const CpuIsa isa =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? CpuIsa::Avx512
      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")  ? CpuIsa::Avx2
                                                                         : CpuIsa::Generic;
  return isa;
#else
  return CpuIsa::Generic;
#endif
}

} // namespace gptc::blas
