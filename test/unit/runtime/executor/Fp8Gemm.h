//===- Fp8Gemm.h - an FP8 GEMM case as an executable, run by a backend ----===//
//
// One RunGemm with FP8 operands and their scale tensors, built from a
// GemmCases.h case, so that the Host backend (cpuGemm) and the CUDA
// backend (cuBLASLt) are checked against the same exact reference through
// the whole path: loader, checkRunGemm, operand pointers, the GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_EXECUTOR_FP8GEMM_H
#define GPTC_TEST_UNIT_RUNTIME_EXECUTOR_FP8GEMM_H

#include "runtime/blas/CpuGemm.h"
#include "runtime/executor/Session.h"
#include "test/unit/runtime/blas/GemmCases.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

namespace gptc::testing {

/// The FP8 GEMM of `tc` with A and B of `at`/`bt` and D of `ct`, scaled by
/// kAScale and kBScale.
struct Fp8GemmProgram {
  static constexpr float kAScale = 0.5f, kBScale = 4.0f;
  GemmData data; // expected: D with the scales folded into alpha
  ExecutableSpec spec;
  uint32_t a = 0, b = 0, c = 0, bias = 0, aScale = 0, bScale = 0;
};

inline Fp8GemmProgram fp8GemmProgram(GemmCase tc, s::TargetKind target, s::DType at, s::DType bt,
                                     s::DType ct, bool fastAccum) {
  Fp8GemmProgram p;
  double alpha = tc.alpha;
  tc.alpha = alpha * Fp8GemmProgram::kAScale * Fp8GemmProgram::kBScale;
  p.data = makeGemm(tc, 17);
  GemmSpec g = p.data.spec;
  g.alpha = alpha;
  g.aType = at, g.bType = bt, g.cType = ct, g.fastAccum = fastAccum;
  ExecutableSpec &e = p.spec;
  e.target = target;
  auto round = [](uint64_t bytes) { return (bytes + 255) / 256 * 256; };
  uint64_t cBytes = elementSize(ct);
  uint64_t sizes[] = {round(p.data.a.size()), round(p.data.b.size()),
                      round(p.data.c.size() * cBytes),
                      round(std::max<size_t>(p.data.bias.size(), 1) * cBytes), 256, 256};
  uint64_t total = 0;
  for (uint64_t s : sizes)
    total += s;
  uint32_t pool = e.addPool("all", total);
  uint64_t at0 = 0;
  auto next = [&](int i) {
    uint64_t o = at0;
    at0 += sizes[i];
    return o;
  };
  p.a = e.addTensor("a", s::TensorRole::Input, at, {int64_t(p.data.a.size())}, pool, next(0));
  p.b = e.addTensor("b", s::TensorRole::Input, bt, {int64_t(p.data.b.size())}, pool, next(1));
  p.c = e.addTensor("c", s::TensorRole::Output, ct, {int64_t(p.data.c.size())}, pool, next(2));
  p.bias = e.addTensor("bias", s::TensorRole::Input, ct,
                       {int64_t(std::max<size_t>(p.data.bias.size(), 1))}, pool, next(3));
  p.aScale = e.addTensor("a_scale", s::TensorRole::Input, s::DType::F32, {1}, pool, next(4));
  p.bScale = e.addTensor("b_scale", s::TensorRole::Input, s::DType::F32, {1}, pool, next(5));
  uint32_t gemm = e.addGemm(g);
  e.addProgram("gemm", {p.a, p.b, p.bias, p.aScale, p.bScale}, {p.c})
      .gemm(gemm, p.a, p.b, p.c, tc.bias ? int64_t(p.bias) : -1)
      .scales(p.aScale, p.bScale);
  return p;
}

/// `values` encoded as tensor `t`'s dtype, padded to its size.
inline std::vector<uint8_t> encodeTensor(Session &session, uint32_t t,
                                         const std::vector<double> &values) {
  s::DType type = session.tensor(t).dtype();
  std::vector<uint8_t> bytes(session.tensor(t).size_bytes());
  for (size_t i = 0; i < values.size(); ++i) {
    float f = float(values[i]);
    switch (type) {
    case s::DType::F8E4M3:
      bytes[i] = blas::floatToF8e4m3(f);
      break;
    case s::DType::F8E5M2:
      bytes[i] = blas::floatToF8e5m2(f);
      break;
    case s::DType::BF16: {
      uint16_t h = blas::floatToBf16(f);
      std::memcpy(&bytes[i * 2], &h, 2);
      break;
    }
    default:
      std::memcpy(&bytes[i * 4], &f, 4);
    }
  }
  return bytes;
}

using SessionFactory = std::function<StatusOr<std::unique_ptr<Session>>(const ExecutableSpec &)>;

/// Runs the case in a session from `open` and compares D with the exact
/// reference (rounded once to BF16 for a BF16 D); the gaps must stay NaN.
inline void checkFp8Gemm(const SessionFactory &open, s::TargetKind target, const GemmCase &tc,
                         s::DType at, s::DType bt, s::DType ct, bool fastAccum) {
  SCOPED_TRACE(tc.name() + " " + s::EnumNameDType(at) + "x" + s::EnumNameDType(bt) + "->" +
               s::EnumNameDType(ct) + (fastAccum ? " fast" : ""));
  Fp8GemmProgram p = fp8GemmProgram(tc, target, at, bt, ct, fastAccum);
  auto session = open(p.spec);
  ASSERT_TRUE(session) << session.status().message();
  Session &ss = **session;
  const GemmData &d = p.data;
  for (auto [t, values] : {std::pair{p.a, &d.a}, std::pair{p.b, &d.b}, std::pair{p.c, &d.c},
                           std::pair{p.bias, &d.bias}}) {
    std::vector<uint8_t> bytes = encodeTensor(ss, t, *values);
    ASSERT_TRUE(ss.writeTensor(t, bytes.data(), bytes.size()));
  }
  for (auto [t, scale] : {std::pair{p.aScale, Fp8GemmProgram::kAScale},
                          std::pair{p.bScale, Fp8GemmProgram::kBScale}})
    ASSERT_TRUE(ss.writeTensor(t, &scale, 4));
  Status run = ss.run("gemm");
  ASSERT_TRUE(run) << run.message();
  std::vector<uint8_t> out(ss.tensor(p.c).size_bytes());
  ASSERT_TRUE(ss.readTensor(p.c, out.data(), out.size()));
  for (size_t i = 0; i < d.c.size(); ++i) {
    double got, want = d.expected[i];
    if (ct == s::DType::BF16) {
      uint16_t h;
      std::memcpy(&h, &out[i * 2], 2);
      got = blas::bf16ToFloat(h);
      want = blas::bf16ToFloat(blas::floatToBf16(float(want)));
    } else {
      float f;
      std::memcpy(&f, &out[i * 4], 4);
      got = f;
    }
    ASSERT_TRUE((std::isnan(got) && std::isnan(want)) || got == want)
        << "element " << i << ": " << got << " vs " << want;
  }
}

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_EXECUTOR_FP8GEMM_H
