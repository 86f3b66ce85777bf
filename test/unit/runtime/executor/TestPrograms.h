//===- TestPrograms.h - the hand-built executables of the backend tests ---===//
//
// One executable whose program "main" uses every command kind a single
// GPU runs, over small tensors with exactly known results:
//   0 scale(x, 8, 0.5)                 x  = [0.5, 1, ..., 4]
//   1 gemm d = a b + bias              (2x3)(3x2) column-major, epilogue Bias
//   2 copy d -> e
//   3 scale(e, 4, 3)                   e  = 3 d
//   4 add(d, e, y, 4)                  y  = 4 d
//   5 memset(m, 0x41)                  m  = 0x41414141 twice
//   6 copy x -> xs
// With twoStreams, commands 2-3 run on stream 1 between events (record 0 on
// stream 0 after the GEMM, wait on stream 1; record 1 on stream 1, wait on
// stream 0 before the add). Both backends must give identical bytes.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_TEST_UNIT_RUNTIME_EXECUTOR_TESTPROGRAMS_H
#define GPTC_TEST_UNIT_RUNTIME_EXECUTOR_TESTPROGRAMS_H

#include "test/unit/runtime/ExecutableBuilder.h"

#include <cstring>

namespace gptc::testing {

struct PipelineTensors {
  uint32_t x, a, b, bias, d, e, y, m, xs;
};

/// The executable described above; the caller adds kernel images
/// (host_object, cubin or PTX) to kernels 0 (scale) and 1 (add).
inline ExecutableSpec pipelineExecutable(s::TargetKind target, bool twoStreams = false,
                                         PipelineTensors *tensorsOut = nullptr) {
  ExecutableSpec e;
  e.target = target;
  e.arch = target == s::TargetKind::CUDA ? "sm_90" : "x86_64";
  uint32_t params = e.addPool("params", 256);
  uint32_t inputs = e.addPool("inputs", 512);
  uint32_t acts = e.addPool("activations", 1024);
  PipelineTensors t;
  t.x = e.addTensor("x", s::TensorRole::Input, s::DType::F32, {8}, inputs, 0);
  t.a = e.addTensor("a", s::TensorRole::Input, s::DType::F32, {3, 2}, inputs,
                    256); // (m=2, k=3) col-major
  t.b = e.addTensor("b", s::TensorRole::Input, s::DType::F32, {2, 3}, inputs,
                    384); // (k=3, n=2) col-major
  t.bias = e.addTensor("bias", s::TensorRole::Parameter, s::DType::F32, {2}, params, 0);
  t.d = e.addTensor("d", s::TensorRole::Activation, s::DType::F32, {2, 2}, acts, 0);
  t.e = e.addTensor("e", s::TensorRole::Activation, s::DType::F32, {2, 2}, acts, 256);
  t.y = e.addTensor("y", s::TensorRole::Output, s::DType::F32, {2, 2}, acts, 512);
  t.m = e.addTensor("m", s::TensorRole::Output, s::DType::F32, {2}, acts, 768);
  t.xs = e.addTensor("xs", s::TensorRole::Output, s::DType::F32, {8}, acts, 800);
  uint32_t scale = e.addKernel("gptc_test_scale", 3);
  uint32_t add = e.addKernel("gptc_test_add", 4);
  GemmSpec g;
  g.m = 2, g.n = 2, g.k = 3, g.lda = 2, g.ldb = 3, g.ldc = 2;
  g.epilogue = s::Epilogue::Bias;
  uint32_t gemm = e.addGemm(g);
  uint32_t side = twoStreams ? 1 : 0;
  e.numStreams = twoStreams ? 2 : 1;
  e.numEvents = twoStreams ? 2 : 0;
  ProgramSpec &p = e.addProgram("main", {t.x, t.a, t.b, t.bias}, {t.y, t.m, t.xs});
  p.launch(scale, {tensorArg(t.x), intArg(8), floatArg(0.5)}, /*gridX=*/2, /*blockX=*/4);
  p.gemm(gemm, t.a, t.b, t.d, t.bias);
  if (twoStreams)
    p.record(0, 0).wait(0, side);
  p.copy(t.d, t.e, side);
  p.launch(scale, {tensorArg(t.e), intArg(4), floatArg(3.0)}, 1, 32, side);
  if (twoStreams)
    p.record(1, side).wait(1, 0);
  p.launch(add, {tensorArg(t.d), tensorArg(t.e), tensorArg(t.y), intArg(4)}, 1, 4);
  p.memset(t.m, 0x41);
  p.copy(t.x, t.xs);
  if (tensorsOut)
    *tensorsOut = t;
  return e;
}

/// Inputs of "main" and the outputs they must give.
struct PipelineValues {
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> a{1, 2, 3, 4, 5, 6}; // A = [[1 3 5], [2 4 6]]
  std::vector<float> b{1, 0, 2, 3, 1, 0}; // B = [[1 3], [0 1], [2 0]]
  std::vector<float> bias{10, 20};

  /// D = A B + bias, column-major: d00 = 1+0+10+10, d10 = 2+0+12+20, d01 = 3+3+0+10, d11 =
  /// 6+4+0+20.
  std::vector<float> y() const { return {4 * 21.f, 4 * 34.f, 4 * 16.f, 4 * 30.f}; }
  std::vector<float> xs() const { return {0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4}; }
  std::vector<float> m() const {
    float f;
    std::memset(&f, 0x41, 4);
    return {f, f};
  }
};

} // namespace gptc::testing

#endif // GPTC_TEST_UNIT_RUNTIME_EXECUTOR_TESTPROGRAMS_H
