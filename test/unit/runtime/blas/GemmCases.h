//===- GemmCases.h - GEMM test cases with a naive row-major reference -----===//
//
// A case draws small-integer logical matrices op(A) (m x k), op(B) (k x n),
// C (m x n) and bias (m) per batch, so that every product and sum is exact
// in float. It stores them the way the schema's Gemm says (column-major,
// transposed when transa/transb, leading dimensions with padding, batch
// strides with gaps, a stride-0 shared operand), with NaN in every gap, and
// computes D with plain row-major loops in double. A GEMM that reads a gap,
// reads C when beta == 0, or writes outside D shows up as a NaN or a
// changed gap.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_BLAS_GEMMCASES_H
#define GPTC_TEST_UNIT_RUNTIME_BLAS_GEMMCASES_H

#include "test/unit/runtime/ExecutableBuilder.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace gptc::testing {

struct GemmCase {
  int64_t m = 3, n = 4, k = 5, batch = 1;
  bool transa = false, transb = false;
  bool bias = false;
  bool sharedB = false; // stride_b = 0: one B for all batches
  double alpha = 1, beta = 0;
  int64_t pad = 2; // extra rows per leading dimension, extra elements per batch

  std::string name() const {
    return "m" + std::to_string(m) + "n" + std::to_string(n) + "k" + std::to_string(k) + "b" +
           std::to_string(batch) + (transa ? "_ta" : "") + (transb ? "_tb" : "") +
           (bias ? "_bias" : "") + (sharedB ? "_sharedB" : "") + (beta != 0 ? "_beta" : "") +
           (alpha != 1 ? "_alpha" : "");
  }
};

/// The stored operands and expected result of a GemmCase, all as doubles
/// (the tests convert to the operand type).
struct GemmData {
  GemmSpec spec;
  std::vector<double> a, b, c, bias; // stored, NaN in the gaps
  std::vector<double> expected;      // D as stored in c (gaps kept NaN)
};

inline GemmData makeGemm(const GemmCase &tc, uint32_t seed = 1) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  uint32_t state = seed * 2654435761u + 12345;
  auto draw = [&]() { // small integers in [-3, 3]
    state = state * 1664525u + 1013904223u;
    return double(int((state >> 16) % 7) - 3);
  };
  GemmData d;
  GemmSpec &g = d.spec;
  g.m = tc.m, g.n = tc.n, g.k = tc.k, g.batch = tc.batch;
  g.transa = tc.transa, g.transb = tc.transb;
  int64_t aRows = tc.transa ? tc.k : tc.m, aCols = tc.transa ? tc.m : tc.k;
  int64_t bRows = tc.transb ? tc.n : tc.k, bCols = tc.transb ? tc.k : tc.n;
  g.lda = aRows + tc.pad;
  g.ldb = bRows + tc.pad;
  g.ldc = tc.m + tc.pad;
  g.strideA = g.lda * aCols + tc.pad;
  g.strideB = tc.sharedB ? 0 : g.ldb * bCols + tc.pad;
  g.strideC = g.ldc * tc.n + tc.pad;
  g.alpha = tc.alpha;
  g.beta = tc.beta;
  g.epilogue = tc.bias ? s::Epilogue::Bias : s::Epilogue::None;
  int64_t bBatches = tc.sharedB ? 1 : tc.batch;
  d.a.assign(g.strideA * tc.batch, nan);
  d.b.assign(tc.sharedB ? g.ldb * bCols : g.strideB * tc.batch, nan);
  d.c.assign(g.strideC * tc.batch, nan);
  d.expected = d.c;
  if (tc.bias) {
    d.bias.resize(tc.m);
    for (double &v : d.bias)
      v = draw();
  }
  for (int64_t batch = 0; batch < tc.batch; ++batch) {
    // Logical row-major op(A) (m x k), op(B) (k x n), C (m x n).
    std::vector<double> opA(tc.m * tc.k), opB(tc.k * tc.n), c(tc.m * tc.n);
    for (double &v : opA)
      v = draw();
    if (batch < bBatches)
      for (double &v : opB)
        v = draw();
    else // shared B: the batch-0 values, as stored
      for (int64_t p = 0; p < tc.k; ++p)
        for (int64_t j = 0; j < tc.n; ++j)
          opB[p * tc.n + j] = tc.transb ? d.b[j + p * g.ldb] : d.b[p + j * g.ldb];
    for (double &v : c)
      v = tc.beta != 0 ? draw() : nan;
    double *a = &d.a[batch * g.strideA], *bb = &d.b[std::min(batch, bBatches - 1) * g.strideB];
    double *cs = &d.c[batch * g.strideC], *e = &d.expected[batch * g.strideC];
    for (int64_t i = 0; i < tc.m; ++i)
      for (int64_t p = 0; p < tc.k; ++p)
        (tc.transa ? a[p + i * g.lda] : a[i + p * g.lda]) = opA[i * tc.k + p];
    if (batch < bBatches)
      for (int64_t p = 0; p < tc.k; ++p)
        for (int64_t j = 0; j < tc.n; ++j)
          (tc.transb ? bb[j + p * g.ldb] : bb[p + j * g.ldb]) = opB[p * tc.n + j];
    for (int64_t i = 0; i < tc.m; ++i)
      for (int64_t j = 0; j < tc.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < tc.k; ++p)
          sum += opA[i * tc.k + p] * opB[p * tc.n + j];
        double v = tc.alpha * sum;
        if (tc.beta != 0)
          v += tc.beta * c[i * tc.n + j];
        if (tc.bias)
          v += d.bias[i];
        cs[i + j * g.ldc] = c[i * tc.n + j];
        e[i + j * g.ldc] = v;
      }
  }
  return d;
}

/// GELU (tanh approximation) and its derivative, in double.
inline double geluOf(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
inline double geluDerivativeOf(double x) {
  const double k = 0.7978845608028654, a = 0.044715;
  double th = std::tanh(k * (x + a * x * x * x));
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * a * x * x);
}

/// A GEMM with an epilogue beyond Bias (one batch, beta 0, ldc 8 as the
/// aux matrix needs), its stored operands and what the epilogue reads and
/// writes. GELU makes the expected values inexact: compare with a bound.
struct EpilogueData {
  GemmData gemm;                    // a, b, the bias read by Bias*, expected D
  std::vector<double> aux;          // DGelu*: the pre-activation read, D's layout
  std::vector<double> expectedAux;  // GeluAux*: acc (+ bias), D's layout
  std::vector<double> expectedBias; // BGradA (m) / BGradB (n): the sums over k;
                                    // DGeluBGrad (m): D's row sums
};

inline EpilogueData makeEpilogueGemm(s::Epilogue e, bool transa, bool transb, uint32_t seed = 5) {
  GemmCase tc;
  tc.m = 6, tc.n = 3, tc.k = 4, tc.pad = 2; // ldc = 8
  tc.transa = transa, tc.transb = transb;
  tc.bias = e == s::Epilogue::Bias || e == s::Epilogue::BiasGelu || e == s::Epilogue::BiasGeluAux;
  EpilogueData d;
  d.gemm = makeGemm(tc, seed);
  GemmSpec &g = d.gemm.spec;
  g.epilogue = e;
  std::vector<double> &out = d.gemm.expected;
  bool geluGrad = e == s::Epilogue::DGelu || e == s::Epilogue::DGeluBGrad;
  bool hasAux = e == s::Epilogue::GeluAux || e == s::Epilogue::BiasGeluAux || geluGrad;
  if (hasAux)
    d.aux.assign(out.size(), std::numeric_limits<double>::quiet_NaN());
  for (int64_t j = 0; j < tc.n; ++j)
    for (int64_t i = 0; i < tc.m; ++i) {
      double &v = out[i + j * g.ldc];
      if (e == s::Epilogue::GeluAux || e == s::Epilogue::BiasGeluAux)
        d.aux[i + j * g.ldc] = v;
      if (e == s::Epilogue::Gelu || e == s::Epilogue::GeluAux || e == s::Epilogue::BiasGelu ||
          e == s::Epilogue::BiasGeluAux)
        v = geluOf(v);
      if (geluGrad) {
        double pre = double(int64_t(i + 3 * j) % 9 - 4) / 2; // -2 .. 2 in halves
        d.aux[i + j * g.ldc] = pre;
        v *= geluDerivativeOf(pre);
      }
    }
  if (!geluGrad)
    std::swap(d.expectedAux, d.aux); // written, not read
  if (e == s::Epilogue::DGeluBGrad)
    for (int64_t i = 0; i < tc.m; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < tc.n; ++j)
        sum += out[i + j * g.ldc];
      d.expectedBias.push_back(sum);
    }
  if (e == s::Epilogue::BGradA)
    for (int64_t i = 0; i < tc.m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < tc.k; ++p)
        sum += transa ? d.gemm.a[p + i * g.lda] : d.gemm.a[i + p * g.lda];
      d.expectedBias.push_back(sum);
    }
  if (e == s::Epilogue::BGradB)
    for (int64_t j = 0; j < tc.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < tc.k; ++p)
        sum += transb ? d.gemm.b[j + p * g.ldb] : d.gemm.b[p + j * g.ldb];
      d.expectedBias.push_back(sum);
    }
  return d;
}

/// The epilogues beyond Bias, each with its own output checks.
inline std::vector<s::Epilogue> fusedEpilogues() {
  return {s::Epilogue::Gelu,        s::Epilogue::GeluAux, s::Epilogue::BiasGelu,
          s::Epilogue::BiasGeluAux, s::Epilogue::DGelu,   s::Epilogue::BGradA,
          s::Epilogue::BGradB,      s::Epilogue::DGeluBGrad};
}

/// Every case the GEMM tests run: all transpose pairs, with batches,
/// shared B, bias, alpha/beta, and sizes that are not multiples of anything.
inline std::vector<GemmCase> allGemmCases() {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmCase c;
      c.transa = ta, c.transb = tb;
      cases.push_back(c);
      GemmCase batched = c;
      batched.batch = 3, batched.m = 5, batched.n = 2, batched.k = 7;
      cases.push_back(batched);
      GemmCase shared = batched;
      shared.sharedB = true;
      cases.push_back(shared);
      GemmCase bias = c;
      bias.bias = true, bias.m = 6, bias.n = 3, bias.k = 4;
      cases.push_back(bias);
      GemmCase scaled = batched;
      scaled.alpha = 2, scaled.beta = -0.5, scaled.bias = true;
      cases.push_back(scaled);
      GemmCase large = c;
      large.m = 67, large.n = 33, large.k = 129, large.batch = 2, large.pad = 3;
      cases.push_back(large);
    }
  return cases;
}

/// Cases within FP8's rules (executable.fbs, checkGemm) for a D of type
/// `d`: A transposed, B not, m, k and the leading dimensions multiples of
/// 16, and no bias into an F32 D (cuBLASLt has no FP8 kernel with an F32
/// bias). The values ([-3, 3]) are exact in E4M3 and E5M2.
inline std::vector<GemmCase> fp8GemmCases(s::DType d) {
  GemmCase plain;
  plain.m = 16, plain.n = 8, plain.k = 32, plain.transa = true, plain.pad = 16;
  GemmCase batched = plain;
  batched.m = 32, batched.n = 5, batched.k = 48, batched.batch = 2;
  GemmCase bias = plain;
  bias.m = 48, bias.n = 7, bias.k = 16, bias.bias = true;
  GemmCase scaled = batched;
  scaled.alpha = 2, scaled.beta = -0.5, scaled.bias = true;
  GemmCase large = plain;
  large.m = 64, large.n = 33, large.k = 256;
  if (d == s::DType::F32)
    return {plain, batched, large};
  return {plain, batched, bias, scaled, large};
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_BLAS_GEMMCASES_H
