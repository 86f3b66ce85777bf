//===- CpuGemm.cpp - the schema's GEMM with loops, for the Host target ----===//

#include "runtime/blas/CpuGemm.h"

#include "runtime/blas/GemmCheck.h"
#include "runtime/executable/Executable.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
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

/// One batch in accumulator type Acc. opA is op(A) as a contiguous (m x k)
/// column-major copy, opB is op(B) as (k x n): converting once keeps the
/// inner loop a plain multiply-add over contiguous memory.
template <typename Acc>
void gemmBatch(const schema::Gemm &g, const void *a, const void *b, void *c,
               const GemmOperands &ops, std::vector<Acc> &opA, std::vector<Acc> &opB,
               std::vector<Acc> &column) {
  const int64_t m = g.m(), n = g.n(), k = g.k();
  const int64_t lda = g.lda(), ldb = g.ldb(), ldc = g.ldc();
  const schema::Epilogue e = g.epilogue();
  for (int64_t p = 0; p < k; ++p)
    for (int64_t i = 0; i < m; ++i)
      opA[i + p * m] =
          static_cast<Acc>(load(g.a_type(), a, g.transa() ? p + i * lda : i + p * lda));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p)
      opB[p + j * k] =
          static_cast<Acc>(load(g.b_type(), b, g.transb() ? j + p * ldb : p + j * ldb));
  // FP8: the operands' dequantization scales fold into alpha (in f32, as
  // cuBLASLt's scale type is).
  const float abScale = ops.aScale ? *static_cast<const float *>(ops.aScale) *
                                         *static_cast<const float *>(ops.bScale)
                                   : 1.0f;
  const Acc alpha = static_cast<Acc>(g.alpha()) * static_cast<Acc>(abScale),
            beta = static_cast<Acc>(g.beta());
  // DGeluBGrad: D's row sums, over j in ascending order.
  std::vector<Acc> rowSums(e == schema::Epilogue::DGeluBGrad ? m : 0, Acc(0));
  // FP8 D: codes of dScale * d, and max |d| (NaN if any d is NaN).
  const flatbuffers::Optional<schema::DType> dType = g.d_type();
  const Fp8Format &dFormat = dType == schema::DType::F8E5M2 ? kE5M2 : kE4M3;
  const float dScale = ops.dScale ? *static_cast<const float *>(ops.dScale) : 1.0f;
  float amaxD = 0;
  for (int64_t j = 0; j < n; ++j) {
    // (m) column j of op(A) op(B), summed over p in ascending order.
    std::fill(column.begin(), column.end(), Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      const Acc bpj = opB[p + j * k];
      const Acc *ap = &opA[p * m];
      for (int64_t i = 0; i < m; ++i)
        column[i] += ap[i] * bpj;
    }
    for (int64_t i = 0; i < m; ++i) {
      Acc d = alpha * column[i];
      if (g.beta() != 0)
        d += beta * static_cast<Acc>(load(g.c_type(), c, i + j * ldc));
      if (epilogueReadsBias(e))
        d += static_cast<Acc>(load(g.c_type(), ops.bias, i));
      if (epilogueHasAux(e) && !epilogueAppliesGeluGrad(e))
        store(g.c_type(), ops.aux, i + j * ldc, d);
      if (epilogueAppliesGelu(e))
        d = gelu(d);
      if (epilogueAppliesGeluGrad(e))
        d *= geluDerivative(static_cast<Acc>(load(g.c_type(), ops.aux, i + j * ldc)));
      if (e == schema::Epilogue::DGeluBGrad)
        rowSums[i] += d;
      if (dType) {
        float v = static_cast<float>(d);
        amaxD = std::isnan(v) || std::isnan(amaxD) ? NAN : std::max(amaxD, std::fabs(v));
        static_cast<uint8_t *>(c)[i + j * ldc] = encode(dFormat, dScale * v);
        continue;
      }
      store(g.c_type(), c, i + j * ldc, d);
    }
  }
  if (dType)
    *static_cast<float *>(ops.amaxD) = amaxD;
  // Bias gradients: sums over k of op(A)'s rows or op(B)'s columns, in
  // ascending k, from the operands as loaded.
  if (e == schema::Epilogue::BGradA)
    for (int64_t i = 0; i < m; ++i) {
      Acc sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += opA[i + p * m];
      store(g.c_type(), ops.bias, i, sum);
    }
  for (int64_t i = 0; i < static_cast<int64_t>(rowSums.size()); ++i)
    store(g.c_type(), ops.bias, i, rowSums[i]);
  if (e == schema::Epilogue::BGradB)
    for (int64_t j = 0; j < n; ++j) {
      Acc sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += opB[p + j * k];
      store(g.c_type(), ops.bias, j, sum);
    }
}

template <typename Acc> void gemm(const schema::Gemm &g, const GemmOperands &ops) {
  std::vector<Acc> opA(g.m() * g.k()), opB(g.k() * g.n()), column(g.m());
  // Epilogues beyond Bias have one batch (checkGemm); the bias is shared.
  for (int64_t batch = 0; batch < g.batch(); ++batch)
    gemmBatch<Acc>(g, offset(ops.a, g.a_type(), batch * g.stride_a()),
                   offset(ops.b, g.b_type(), batch * g.stride_b()),
                   const_cast<void *>(offset(ops.c, g.c_type(), batch * g.stride_c())), ops, opA,
                   opB, column);
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

Status cpuGemm(const schema::Gemm &g, uint32_t index, const GemmOperands &ops) {
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
  if (g.compute() == schema::ComputeType::F64)
    gemm<double>(g, ops);
  else
    gemm<float>(g, ops);
  return Status::ok();
}

} // namespace gptc::blas
