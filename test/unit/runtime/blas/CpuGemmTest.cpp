//===- CpuGemmTest.cpp - the Host GEMM against a naive reference ----------===//

#include "runtime/blas/CpuGemm.h"
#include "runtime/blas/GemmCheck.h"
#include "test/unit/runtime/blas/GemmCases.h"

#include <gtest/gtest.h>

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
                           g.epilogue, g.alpha, g.beta));
    gemm = flatbuffers::GetRoot<s::Gemm>(b.GetBufferPointer());
  }
};

template <typename T, typename F> std::vector<T> convert(const std::vector<double> &v, F f) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = f(v[i]);
  return out;
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

// Verify that the shape checks name the fault.
TEST(CpuGemmTest, CheckRejectsBadShapes) {
  auto error = [](GemmSpec g) {
    GemmTable t(g);
    Status s = blas::checkGemm(*t.gemm, 4);
    return s ? std::string() : s.message();
  };
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
