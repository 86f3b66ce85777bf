//===- CpuGemmTest.cpp - the Host GEMM against a naive reference ----------===//

#include "runtime/blas/CpuGemm.h"
#include "runtime/blas/GemmCheck.h"
#include "runtime/support/ThreadPool.h"
#include "test/unit/runtime/blas/GemmCases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace gptc;
using namespace gptc::testing;

namespace {

/// A Gemm table from a spec, kept alive with its builder.
struct GemmTable {
  flatbuffers::FlatBufferBuilder b;
  const s::Gemm *gemm = nullptr;

  explicit GemmTable(const GemmSpec &g) {
    b.Finish(s::CreateGemm(b, g.m, g.n, g.k, g.batch, g.transa, g.transb, g.lda, g.ldb, g.ldc,
                           g.strideA, g.strideB, g.strideC, g.aType, g.bType, g.cType, g.compute,
                           g.epilogue, g.alpha, g.beta, g.fastAccum,
                           g.dType ? flatbuffers::Optional<s::DType>(*g.dType)
                                   : flatbuffers::Optional<s::DType>()));
    gemm = flatbuffers::GetRoot<s::Gemm>(b.GetBufferPointer());
  }
};

/// checkGemm's message for spec `g` as GEMM `index`; empty if it passes.
std::string checkError(const GemmSpec &g, uint32_t index) {
  GemmTable t(g);
  Status s = blas::checkGemm(*t.gemm, index);
  return s ? std::string() : s.message();
}

template <typename T, typename F> std::vector<T> convert(const std::vector<double> &v, F f) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = f(v[i]);
  return out;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool sameOrBothNan(double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

// Verify that the F32 GEMM matches the row-major reference exactly for all
// transpose pairs, batches, shared B, bias and alpha/beta, and leaves every
// gap of D untouched.
TEST(CpuGemmTest, MatchesReferenceF32) {
  for (const GemmCase &tc : allGemmCases()) {
    SCOPED_TRACE(tc.name());
    GemmData d = makeGemm(tc);
    GemmTable t(d.spec);
    ASSERT_TRUE(blas::checkGemm(*t.gemm, 0));
    auto f = [](double x) { return float(x); };
    std::vector<float> a = convert<float>(d.a, f), b = convert<float>(d.b, f),
                       c = convert<float>(d.c, f), bias = convert<float>(d.bias, f);
    Status st =
        blas::cpuGemm(*t.gemm, 0, {a.data(), b.data(), c.data(), tc.bias ? bias.data() : nullptr});
    ASSERT_TRUE(st) << st.message();
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_TRUE(sameOrBothNan(c[i], d.expected[i]))
          << "element " << i << ": " << c[i] << " vs " << d.expected[i];
  }
}

// Verify the F64 compute path on double operands.
TEST(CpuGemmTest, MatchesReferenceF64) {
  for (const GemmCase &tc : allGemmCases()) {
    SCOPED_TRACE(tc.name());
    GemmData d = makeGemm(tc, 7);
    d.spec.aType = d.spec.bType = d.spec.cType = s::DType::F64;
    d.spec.compute = s::ComputeType::F64;
    GemmTable t(d.spec);
    Status st = blas::cpuGemm(*t.gemm, 0,
                              {d.a.data(), d.b.data(), d.c.data(), tc.bias ? d.bias.data() : nullptr});
    ASSERT_TRUE(st) << st.message();
    for (size_t i = 0; i < d.c.size(); ++i)
      ASSERT_TRUE(sameOrBothNan(d.c[i], d.expected[i])) << "element " << i;
  }
}

// Verify mixed types: BF16 x BF16 -> F32 and F16 x F16 -> F16 (small
// integers are exact in both).
TEST(CpuGemmTest, MatchesReferenceMixedTypes) {
  for (s::DType in : {s::DType::BF16, s::DType::F16}) {
    for (s::DType out : {s::DType::F32, in}) {
      GemmCase tc;
      tc.transa = true, tc.batch = 2, tc.bias = true;
      SCOPED_TRACE(std::string(s::EnumNameDType(in)) + "->" + s::EnumNameDType(out));
      GemmData d = makeGemm(tc, 3);
      d.spec.aType = d.spec.bType = in;
      d.spec.cType = out;
      GemmTable t(d.spec);
      auto half = [in](double x) {
        return in == s::DType::BF16 ? blas::floatToBf16(float(x)) : blas::floatToF16(float(x));
      };
      std::vector<uint16_t> a = convert<uint16_t>(d.a, half), b = convert<uint16_t>(d.b, half);
      std::vector<float> c32 = convert<float>(d.c, [](double x) { return float(x); });
      std::vector<float> bias32 = convert<float>(d.bias, [](double x) { return float(x); });
      std::vector<uint16_t> c16 = convert<uint16_t>(d.c, half),
                            bias16 = convert<uint16_t>(d.bias, half);
      bool wide = out == s::DType::F32;
      Status st = blas::cpuGemm(*t.gemm, 0,
                                {a.data(), b.data(), wide ? static_cast<void *>(c32.data()) : c16.data(),
                                 wide ? static_cast<void *>(bias32.data()) : bias16.data()});
      ASSERT_TRUE(st) << st.message();
      for (size_t i = 0; i < d.c.size(); ++i) {
        double got =
            wide ? c32[i]
                 : (in == s::DType::BF16 ? blas::bf16ToFloat(c16[i]) : blas::f16ToFloat(c16[i]));
        ASSERT_TRUE(sameOrBothNan(got, d.expected[i])) << "element " << i;
      }
    }
  }
}

/// |got - want| within a float GELU's error of the double reference.
bool close(double got, double want) {
  return (std::isnan(got) && std::isnan(want)) || std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want));
}

// Verify every epilogue beyond Bias in F32 against the double reference:
// GELU (with its aux pre-activation, with and without bias), DGelu from
// an aux input (alone and with D's row sums), and the bias gradients of A
// and B, for all transposes; the
// gaps of D and aux stay untouched.
TEST(CpuGemmTest, EpiloguesMatchReference) {
  auto f = [](double x) { return float(x); };
  for (s::Epilogue e : fusedEpilogues())
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string(s::EnumNameEpilogue(e)) + (ta ? " T" : " N") + (tb ? "T" : "N"));
        EpilogueData d = makeEpilogueGemm(e, ta, tb);
        GemmTable t(d.gemm.spec);
        ASSERT_TRUE(blas::checkGemm(*t.gemm, 0));
        std::vector<float> a = convert<float>(d.gemm.a, f), b = convert<float>(d.gemm.b, f),
                           c = convert<float>(d.gemm.c, f);
        std::vector<float> bias = convert<float>(d.gemm.bias, f);
        bias.resize(std::max(d.gemm.bias.size(), d.expectedBias.size()));
        std::vector<double> auxIn = d.aux.empty() ? d.expectedAux : d.aux;
        std::vector<float> aux = convert<float>(auxIn, f);
        if (!d.expectedAux.empty()) // written: start from NaN but keep the gaps
          for (size_t i = 0; i < aux.size(); ++i)
            aux[i] = std::isnan(d.expectedAux[i]) ? aux[i] : NAN;
        Status st = blas::cpuGemm(*t.gemm, 0,
                                  {a.data(), b.data(), c.data(), bias.empty() ? nullptr : bias.data(),
                                   aux.empty() ? nullptr : aux.data()});
        ASSERT_TRUE(st) << st.message();
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_TRUE(close(c[i], d.gemm.expected[i]))
              << "D element " << i << ": " << c[i] << " vs " << d.gemm.expected[i];
        for (size_t i = 0; i < d.expectedAux.size(); ++i)
          ASSERT_TRUE(close(aux[i], d.expectedAux[i]))
              << "aux element " << i << ": " << aux[i] << " vs " << d.expectedAux[i];
        // Sums of operands are exact in float; DGeluBGrad's sums D's rows.
        for (size_t i = 0; i < d.expectedBias.size(); ++i)
          if (e == s::Epilogue::DGeluBGrad)
            ASSERT_TRUE(close(bias[i], d.expectedBias[i]))
                << "bias gradient " << i << ": " << bias[i] << " vs " << d.expectedBias[i];
          else
            ASSERT_EQ(bias[i], d.expectedBias[i]) << "bias gradient " << i;
      }
}

/// A GEMM past one tile in every dimension (kMC = 128 rows, 16 register
/// tiles of columns, kKC = 256 deep) with ragged edges, of random reals so
/// that a different summation order would show in the bits.
struct BigGemm {
  GemmSpec spec;
  std::vector<float> a, b, c, bias, aux;

  BigGemm(s::Epilogue e, bool ta, bool tb, int64_t batch, double beta) {
    GemmSpec &g = spec;
    g.m = 301, g.n = 203, g.k = 517, g.batch = batch, g.transa = ta, g.transb = tb;
    g.lda = (ta ? g.k : g.m) + 3, g.ldb = (tb ? g.n : g.k) + 1, g.ldc = 304; // aux: ldc % 8 == 0
    g.strideA = g.lda * (ta ? g.m : g.k) + 5, g.strideB = g.ldb * (tb ? g.k : g.n);
    g.strideC = g.ldc * g.n + 7, g.epilogue = e, g.alpha = 0.75, g.beta = beta;
    uint32_t state = 12345;
    auto draw = [&] { // in [-1, 1), 24 random bits
      state = state * 1664525u + 1013904223u;
      return float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
    };
    auto fill = [&](std::vector<float> &v, size_t size) {
      v.resize(size);
      for (float &x : v)
        x = draw();
    };
    fill(a, g.strideA * batch), fill(b, g.strideB * batch), fill(c, g.strideC * batch);
    fill(bias, std::max(g.m, g.n)), fill(aux, g.ldc * g.n);
  }
};

/// D, aux and bias after cpuGemm with `isa` on a pool of `threads`.
std::vector<float> runBig(const BigGemm &big, blas::CpuIsa isa, unsigned threads) {
  GemmTable t(big.spec);
  std::vector<float> c = big.c, bias = big.bias, aux = big.aux;
  s::Epilogue e = big.spec.epilogue;
  bool hasBias = e != s::Epilogue::None, hasAux = blas::epilogueHasAux(e);
  ThreadPool pool(threads);
  Status st = blas::cpuGemm(*t.gemm, 0,
                            {big.a.data(), big.b.data(), c.data(), hasBias ? bias.data() : nullptr,
                             hasAux ? aux.data() : nullptr},
                            isa, pool);
  EXPECT_TRUE(st) << st.message();
  c.insert(c.end(), aux.begin(), aux.end());
  c.insert(c.end(), bias.begin(), bias.end());
  return c;
}

// Verify that the thread count and the ISA's kernels change no bit of D, aux
// or the bias (gradient), and that D is the naive loop's: sums from 0 over
// p ascending, one fused multiply-add per step.
TEST(CpuGemmTest, SameBitsForEveryThreadCountAndIsa) {
  struct Case {
    s::Epilogue e;
    bool ta, tb;
    int64_t batch;
    double beta;
  };
  for (Case k : {Case{s::Epilogue::None, false, false, 2, 0.5}, Case{s::Epilogue::Bias, true, false, 1, 0},
                 Case{s::Epilogue::BiasGeluAux, true, true, 1, 0},
                 Case{s::Epilogue::DGeluBGrad, false, true, 1, 0},
                 Case{s::Epilogue::BGradB, false, false, 1, 0}}) {
    SCOPED_TRACE(std::string(s::EnumNameEpilogue(k.e)) + (k.ta ? " T" : " N") + (k.tb ? "T" : "N"));
    BigGemm big(k.e, k.ta, k.tb, k.batch, k.beta);
    std::vector<float> want = runBig(big, blas::CpuIsa::Generic, 1);
    if (k.e == s::Epilogue::None) { // D against the naive loop
      const GemmSpec &g = big.spec;
      for (int64_t bt = 0; bt < g.batch; ++bt)
        for (int64_t j = 0; j < g.n; ++j)
          for (int64_t i = 0; i < g.m; ++i) {
            float sum = 0;
            for (int64_t p = 0; p < g.k; ++p) {
              sum = std::fma(big.a[bt * g.strideA + (g.transa ? p + i * g.lda : i + p * g.lda)],
                             big.b[bt * g.strideB + (g.transb ? j + p * g.ldb : p + j * g.ldb)], sum);
            }
            int64_t at = bt * g.strideC + i + j * g.ldc;
            float d = float(g.alpha) * sum + float(g.beta) * big.c[at];
            ASSERT_EQ(bitsOf(want[at]), bitsOf(d)) << "batch " << bt << " (" << i << ", " << j << ")";
          }
    }
    for (int isa = 0; isa <= int(blas::cpuIsa()); ++isa)
      for (unsigned threads : {1u, 2u, 3u}) {
        std::vector<float> got = runBig(big, blas::CpuIsa(isa), threads);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i]))
              << "isa " << isa << ", " << threads << " threads, element " << i;
      }
  }
}

// Verify that cpuGemm refuses operands the epilogue does not match: no aux
// for DGelu, a bias for BGrad-less epilogues.
TEST(CpuGemmTest, EpilogueOperandsMustMatch) {
  EpilogueData d = makeEpilogueGemm(s::Epilogue::DGelu, false, false);
  GemmTable t(d.gemm.spec);
  std::vector<float> a(d.gemm.a.size()), b(d.gemm.b.size()), c(d.gemm.c.size()), v(64);
  Status st = blas::cpuGemm(*t.gemm, 3, {a.data(), b.data(), c.data()});
  EXPECT_EQ(st.message(), "GEMM 3: epilogue DGelu needs an aux matrix");
  st = blas::cpuGemm(*t.gemm, 3, {a.data(), b.data(), c.data(), v.data(), v.data()});
  EXPECT_EQ(st.message(), "GEMM 3: epilogue DGelu takes no bias");
}

// Verify the conversions' rounding: nearest, ties to even, subnormals, and
// overflow to infinity.
TEST(CpuGemmTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(blas::floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(blas::floatToBf16(1.00390625f), 0x3f80); // 1 + 2^-8: a tie, to even
  EXPECT_EQ(blas::floatToBf16(1.01171875f), 0x3f82); // 1 + 3*2^-8: a tie, to even
  EXPECT_TRUE(std::isnan(blas::bf16ToFloat(blas::floatToBf16(NAN))));
  EXPECT_EQ(blas::floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(blas::floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(blas::floatToF16(65520.0f), 0x7c00);              // rounds up to infinity
  EXPECT_EQ(blas::floatToF16(1.00048828125f), 0x3c00);        // 1 + 2^-11: a tie, to even
  EXPECT_EQ(blas::floatToF16(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(blas::floatToF16(-2.0f), 0xc000);
  for (uint32_t h = 0; h < 0x7c00; ++h) // every finite positive half round-trips
    ASSERT_EQ(blas::floatToF16(blas::f16ToFloat(uint16_t(h))), h) << h;
}

// Verify every FP8 code: E4M3's 0x7f and E5M2's 0x7d-0x7f are NaN, E5M2's
// 0x7c infinity; every other code decodes to the value its fields give,
// encodes back to itself, and decoding is monotone over the magnitudes.
TEST(CpuGemmTest, Fp8CodesRoundTrip) {
  struct Format {
    const char *name;
    float (*decode)(uint8_t);
    uint8_t (*encode)(float);
    int mantissa, bias;
  };
  for (const Format &f : {Format{"E4M3", blas::f8e4m3ToFloat, blas::floatToF8e4m3, 3, 7},
                          Format{"E5M2", blas::f8e5m2ToFloat, blas::floatToF8e5m2, 2, 15}}) {
    SCOPED_TRACE(f.name);
    float previous = -1;
    for (int code = 0; code < 256; ++code) {
      float v = f.decode(uint8_t(code));
      int mag = code & 0x7f, exp = mag >> f.mantissa, mant = mag & ((1 << f.mantissa) - 1);
      bool e5m2 = f.mantissa == 2;
      if (e5m2 ? exp == 31 : mag == 0x7f) {
        if (e5m2 && mant == 0)
          EXPECT_EQ(v, code & 0x80 ? -INFINITY : INFINITY) << code;
        else
          EXPECT_TRUE(std::isnan(v)) << code;
        continue;
      }
      // The value from its fields, in double.
      double want = exp == 0 ? std::ldexp(double(mant), 1 - f.bias - f.mantissa)
                             : std::ldexp(double(mant + (1 << f.mantissa)), exp - f.bias - f.mantissa);
      EXPECT_EQ(double(v), code & 0x80 ? -want : want) << code;
      EXPECT_EQ(f.encode(v), code) << code << " decodes to " << v;
      if (code < 0x80) {
        EXPECT_GT(v, previous) << code;
        previous = v;
      }
    }
  }
}

// Verify FP8 encoding: nearest, ties to even (including into the next
// binade and at the subnormals), saturation of large values and
// infinities, NaN kept.
TEST(CpuGemmTest, Fp8EncodingRoundsAndSaturates) {
  EXPECT_EQ(blas::floatToF8e4m3(1.0f), 0x38);
  EXPECT_EQ(blas::floatToF8e4m3(1.0625f), 0x38); // 1 + 2^-4: a tie, to even (1)
  EXPECT_EQ(blas::floatToF8e4m3(1.1875f), 0x3a); // 1 + 3*2^-4: a tie, to even (1.25)
  EXPECT_EQ(blas::floatToF8e4m3(1.07f), 0x39);   // past the tie: up
  EXPECT_EQ(blas::floatToF8e4m3(1.9375f), 0x40); // 1.875 + 2^-4: a tie, to even: 2
  EXPECT_EQ(blas::floatToF8e4m3(448.0f), 0x7e);
  EXPECT_EQ(blas::floatToF8e4m3(1e6f), 0x7e);
  EXPECT_EQ(blas::floatToF8e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(blas::floatToF8e4m3(std::ldexp(1.0f, -9)), 0x01); // smallest subnormal
  EXPECT_EQ(blas::floatToF8e4m3(std::ldexp(1.0f, -10)), 0x00); // half of it: a tie, to 0
  EXPECT_EQ(blas::floatToF8e4m3(std::ldexp(3.0f, -10)), 0x02); // 1.5 of it: a tie, to 2
  EXPECT_EQ(blas::floatToF8e4m3(-0.0f), 0x80);
  EXPECT_TRUE(std::isnan(blas::f8e4m3ToFloat(blas::floatToF8e4m3(NAN))));
  EXPECT_EQ(blas::floatToF8e5m2(1.0f), 0x3c);
  EXPECT_EQ(blas::floatToF8e5m2(1.125f), 0x3c); // 1 + 2^-3: a tie, to even
  EXPECT_EQ(blas::floatToF8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(blas::floatToF8e5m2(INFINITY), 0x7b); // saturated, not infinity
  EXPECT_EQ(blas::floatToF8e5m2(std::ldexp(1.0f, -16)), 0x01); // smallest subnormal
  EXPECT_TRUE(std::isnan(blas::f8e5m2ToFloat(blas::floatToF8e5m2(NAN))));
}

/// Converts stored doubles to FP8 bytes.
std::vector<uint8_t> toFp8(const std::vector<double> &v, s::DType t) {
  return convert<uint8_t>(v, [t](double x) {
    return t == s::DType::F8E4M3 ? blas::floatToF8e4m3(float(x)) : blas::floatToF8e5m2(float(x));
  });
}

// Verify FP8 GEMMs against the exact reference with the scales folded into
// alpha, for E4M3 x E4M3 and each E5M2 pairing, into F32 and BF16 (the
// values and the power-of-two scales are exact in FP8, the sums in f32;
// bias into BF16 only), and that D's gaps stay NaN.
TEST(CpuGemmTest, Fp8MatchesReference) {
  const float aScale = 0.5f, bScale = 4.0f;
  for (auto [at, bt] : {std::pair{s::DType::F8E4M3, s::DType::F8E4M3},
                        std::pair{s::DType::F8E5M2, s::DType::F8E4M3},
                        std::pair{s::DType::F8E4M3, s::DType::F8E5M2}})
    for (s::DType ct : {s::DType::F32, s::DType::BF16})
      for (GemmCase tc : fp8GemmCases(ct)) {
        SCOPED_TRACE(tc.name() + " " + s::EnumNameDType(at) + "x" + s::EnumNameDType(bt) + "->" +
                     s::EnumNameDType(ct));
        double alpha = tc.alpha;
        tc.alpha = alpha * aScale * bScale; // what the reference computes
        GemmData d = makeGemm(tc, 5);
        d.spec.alpha = alpha;
        d.spec.aType = at, d.spec.bType = bt, d.spec.cType = ct;
        GemmTable t(d.spec);
        ASSERT_TRUE(blas::checkGemm(*t.gemm, 0)) << blas::checkGemm(*t.gemm, 0).message();
        std::vector<uint8_t> a = toFp8(d.a, at), b = toFp8(d.b, bt);
        bool wide = ct == s::DType::F32;
        auto bf = [](double x) { return blas::floatToBf16(float(x)); };
        std::vector<float> c32 = convert<float>(d.c, [](double x) { return float(x); }),
                           bias32 = convert<float>(d.bias, [](double x) { return float(x); });
        std::vector<uint16_t> c16 = convert<uint16_t>(d.c, bf), bias16 = convert<uint16_t>(d.bias, bf);
        blas::GemmOperands ops{a.data(), b.data(), wide ? static_cast<void *>(c32.data()) : c16.data(),
                               tc.bias ? (wide ? static_cast<void *>(bias32.data()) : bias16.data())
                                       : nullptr};
        ops.aScale = &aScale, ops.bScale = &bScale;
        Status st = blas::cpuGemm(*t.gemm, 0, ops);
        ASSERT_TRUE(st) << st.message();
        for (size_t i = 0; i < d.c.size(); ++i) {
          double got = wide ? c32[i] : blas::bf16ToFloat(c16[i]);
          // The f32 sum is exact, so BF16's D is the reference rounded once.
          double want = wide ? d.expected[i] : blas::bf16ToFloat(bf(d.expected[i]));
          ASSERT_TRUE(sameOrBothNan(got, want))
              << "element " << i << ": " << got << " vs " << want;
        }
        ops.bScale = nullptr;
        EXPECT_EQ(blas::cpuGemm(*t.gemm, 0, ops).message(), "GEMM 0: FP8 operands need both scales");
      }
}

// Verify that FP8's rules name the fault: both operands FP8, not both
// E5M2, A transposed and B not, multiples of 16, F32 compute, no epilogue
// beyond Bias (but GELU with an FP8 D), no Bias into an F32 D, no FP8 C,
// and fast_accum only with FP8.
TEST(CpuGemmTest, CheckRejectsFp8OutsideItsRules) {
  auto error = [](const GemmSpec &g) { return checkError(g, 2); };
  GemmSpec ok;
  ok.m = 32, ok.n = 8, ok.k = 64, ok.transa = true, ok.lda = 64, ok.ldb = 64, ok.ldc = 32;
  ok.aType = ok.bType = s::DType::F8E4M3, ok.cType = s::DType::BF16, ok.fastAccum = true;
  EXPECT_EQ(error(ok), "");
  auto refused = [&](GemmSpec g, const std::string &why) {
    std::string e = error(g);
    EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  GemmSpec g = ok;
  g.bType = s::DType::BF16;
  refused(g, "FP8 GEMM (F8E4M3 x BF16): both operands must be FP8");
  g = ok;
  g.aType = g.bType = s::DType::F8E5M2;
  refused(g, "at most one operand may be F8E5M2");
  g = ok;
  g.transa = false, g.lda = 32;
  refused(g, "A must be transposed and B not");
  g = ok;
  g.transb = true, g.ldb = 8;
  refused(g, "A must be transposed and B not");
  g = ok;
  g.m = 24, g.ldc = 24;
  refused(g, "m, k, lda and ldb must be multiples of 16, ldc of 16 bytes");
  g = ok;
  g.ldc = 36; // 72 bytes
  refused(g, "multiples of 16, ldc of 16 bytes");
  g = ok;
  g.compute = s::ComputeType::F32FastTF32;
  refused(g, "compute must be F32, got F32FastTF32");
  g = ok;
  g.epilogue = s::Epilogue::Gelu;
  refused(g, "epilogue Gelu (None and Bias, and GeluAux and BiasGeluAux with an FP8 D)");
  g.epilogue = s::Epilogue::BiasGeluAux;
  refused(g, "epilogue BiasGeluAux (None and Bias, and GeluAux");
  g = ok;
  g.epilogue = s::Epilogue::Bias;
  EXPECT_EQ(error(g), "");
  g.cType = s::DType::F32;
  refused(g, "a Bias epilogue needs a BF16 or F16 D");
  g = ok;
  g.cType = s::DType::F8E4M3;
  refused(g, "C is F32, BF16 or F16 (an FP8 D is d_type), not F8E4M3");
  g = ok;
  g.aType = g.bType = s::DType::BF16;
  refused(g, "fast_accum is for FP8 operands");
}

// Verify an FP8 D's rules: GELU_AUX epilogues allowed, FP8 operands, a
// BF16 or F16 C, batch 1 and beta 0, ldc a multiple of 16, and d_type FP8.
TEST(CpuGemmTest, CheckFp8DRules) {
  auto error = [](const GemmSpec &g) { return checkError(g, 3); };
  GemmSpec ok;
  ok.m = 32, ok.n = 8, ok.k = 64, ok.transa = true, ok.lda = 64, ok.ldb = 64, ok.ldc = 32;
  ok.aType = ok.bType = s::DType::F8E4M3, ok.cType = s::DType::BF16, ok.fastAccum = true;
  ok.dType = s::DType::F8E4M3, ok.epilogue = s::Epilogue::BiasGeluAux;
  EXPECT_EQ(error(ok), "");
  for (s::Epilogue e : {s::Epilogue::None, s::Epilogue::Bias, s::Epilogue::GeluAux}) {
    GemmSpec g = ok;
    g.epilogue = e;
    EXPECT_EQ(error(g), "") << s::EnumNameEpilogue(e);
  }
  auto refused = [&](GemmSpec g, const std::string &why) {
    std::string e = error(g);
    EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  GemmSpec g = ok;
  g.dType = s::DType::BF16;
  refused(g, "FP8 D (BF16): d_type is for FP8 codes only");
  g = ok;
  g.aType = g.bType = s::DType::BF16, g.fastAccum = false;
  refused(g, "FP8 D (F8E4M3): needs FP8 operands");
  g = ok;
  g.cType = s::DType::F32;
  refused(g, "C, the bias and aux must be BF16 or F16, got F32");
  g = ok;
  g.ldc = 40;
  refused(g, "ldc must be a multiple of 16");
  g = ok;
  g.epilogue = s::Epilogue::DGelu;
  refused(g, "epilogue DGelu (None and Bias, and GeluAux and BiasGeluAux with an FP8 D)");
}

// Verify that an FP8 D holds the codes of d_scale * gelu(acc + bias), aux
// the bf16 acc + bias, and amax_d the largest |gelu(acc + bias)|; a GEMM
// without its D scale is refused.
TEST(CpuGemmTest, Fp8DWritesGeluCodesAndAmax) {
  GemmSpec g;
  g.m = 16, g.n = 2, g.k = 16, g.transa = true, g.lda = 16, g.ldb = 16, g.ldc = 16;
  g.aType = g.bType = s::DType::F8E4M3, g.cType = s::DType::BF16;
  g.dType = s::DType::F8E4M3, g.epilogue = s::Epilogue::BiasGeluAux;
  GemmTable t(g);
  ASSERT_TRUE(blas::checkGemm(*t.gemm, 0)) << blas::checkGemm(*t.gemm, 0).message();
  // A^T (m x k): row i has 1 at column i; B (k x n): column j is (j + 1) *
  // (p - 8) / 4: acc[i][j] = (j + 1)(i - 8) / 4, exact in FP8.
  std::vector<uint8_t> a(16 * 16, blas::floatToF8e4m3(0)), b(16 * 2);
  for (int i = 0; i < 16; ++i)
    a[i + i * 16] = blas::floatToF8e4m3(1);
  for (int j = 0; j < 2; ++j)
    for (int p = 0; p < 16; ++p)
      b[p + j * 16] = blas::floatToF8e4m3(float(j + 1) * float(p - 8) / 4);
  std::vector<uint16_t> bias(16), aux(32, 0);
  for (int i = 0; i < 16; ++i)
    bias[i] = blas::floatToBf16(0.5f);
  std::vector<uint8_t> d(32, 0);
  const float aScale = 1, bScale = 2, dScale = 64;
  float amax = -1;
  blas::GemmOperands ops{a.data(), b.data(), d.data(), bias.data(), aux.data()};
  ops.aScale = &aScale, ops.bScale = &bScale, ops.dScale = &dScale, ops.amaxD = &amax;
  Status st = blas::cpuGemm(*t.gemm, 0, ops);
  ASSERT_TRUE(st) << st.message();
  auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  };
  double largest = 0;
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 16; ++i) {
      double pre = 2.0 * (j + 1) * (i - 8) / 4 + 0.5;
      EXPECT_EQ(blas::bf16ToFloat(aux[i + j * 16]), float(pre)) << i << "," << j;
      float want = float(gelu(pre));
      EXPECT_EQ(d[i + j * 16], blas::floatToF8e4m3(dScale * want)) << i << "," << j;
      largest = std::max(largest, std::fabs(double(want)));
    }
  EXPECT_FLOAT_EQ(amax, float(largest));
  EXPECT_GT(amax * dScale, 448.0f) << "no code saturates: the case tests less";
  ops.dScale = nullptr;
  EXPECT_EQ(blas::cpuGemm(*t.gemm, 0, ops).message(),
            "GEMM 0: an FP8 D needs its scale and amax");
}

// Verify that the shape checks name the fault.
TEST(CpuGemmTest, CheckRejectsBadShapes) {
  auto error = [](const GemmSpec &g) { return checkError(g, 4); };
  GemmSpec ok;
  ok.m = 4, ok.n = 2, ok.k = 3, ok.lda = 4, ok.ldb = 3, ok.ldc = 4;
  EXPECT_EQ(error(ok), "");
  GemmSpec g = ok;
  g.lda = 3;
  EXPECT_NE(error(g).find("GEMM 4 (m=4 n=2 k=3 batch=1): leading dimension of A is 3"),
            std::string::npos)
      << error(g);
  g = ok;
  g.transa = true; // A is now stored (k x m) = (3 x 4): lda 4 is fine
  EXPECT_EQ(error(g), "");
  g = ok;
  g.k = 0;
  EXPECT_NE(error(g).find("sizes must be"), std::string::npos);
  g = ok;
  g.epilogue = static_cast<s::Epilogue>(42);
  EXPECT_NE(error(g).find("epilogue 42 is not one this runtime knows"), std::string::npos);
  g = ok;
  g.epilogue = s::Epilogue::Gelu, g.beta = 1;
  EXPECT_NE(error(g).find("epilogue Gelu needs batch 1 and beta 0"), std::string::npos);
  g = ok;
  g.epilogue = s::Epilogue::GeluAux; // aux is stored like D: ldc 4
  EXPECT_NE(error(g).find("epilogue GeluAux needs ldc divisible by 8"), std::string::npos);
  g.ldc = 8;
  EXPECT_EQ(error(g), "");
  g = ok;
  g.batch = 2, g.strideC = 4;
  EXPECT_NE(error(g).find("batches of D overlap"), std::string::npos);
  g = ok;
  g.aType = s::DType::I32;
  EXPECT_NE(error(g).find("operand type I32"), std::string::npos);
}

} // namespace
