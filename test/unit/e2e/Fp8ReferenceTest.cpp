//===- Fp8ReferenceTest.cpp - --precision=fp8 tracks bf16 (interpreter) ---===//
//
// --precision=fp8's numerics against bf16's on the reference interpreter,
// whose gpt.fp8_matmul rounds each operand exactly to e4m3 / e5m2 after
// per-tensor amax scaling (the executables' kernels are checked against
// the interpreter in E2EHostTrainTest). `tiny` (B=2, T=8,
// lr 1e-2, a learnable token stream) trains with bf16 and with fp8 from the
// same @init; the fp8 losses must track bf16's, the run must learn, and the
// two must differ (the quantization happened). About 0.2 s.
//
//===----------------------------------------------------------------------===//

#include "e2e/HostTraining.h"

#include <cmath>

using namespace gptc;
using namespace gptc::testing;

namespace {

constexpr int64_t kBatch = 2, kSeq = 8, kSteps = 40, kVocab = 60; // tiny's vocab_size

class Fp8ReferenceTest : public HostTrainingTest {
protected:
  /// The fp64 interpreter's losses over kSteps steps of `precision`.
  void train(const std::string &precision, std::vector<double> &losses) {
    ASSERT_TRUE(compile("tiny", Phase::TrainStep, [&](CompileOptions &o) {
      o.precision = *parsePrecision(precision);
      o.lr = 1e-2;
    }));
    std::vector<reference::Tensor> state = referenceState(1337);
    ASSERT_FALSE(state.empty());
    size_t n = state.size();
    for (int64_t step = 0; step < kSteps; ++step) {
      std::vector<int32_t> in, tgt;
      learnableBatch(step, kBatch * kSeq, kVocab, in, tgt);
      std::vector<reference::Tensor> out = referenceTrainStep(state, in, tgt, kBatch, kSeq, step);
      ASSERT_FALSE(out.empty());
      losses.push_back(out[output("train_step", "loss")].data[0]);
      out.resize(n);
      state = std::move(out);
    }
  }
};

/// Mean of v[from, to).
double mean(const std::vector<double> &v, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i)
    sum += v[i];
  return sum / double(to - from);
}

// Measured (tiny, lr 1e-2, 40 steps, fp64 interpreter): fp8 within 1.42e-2
// relative of bf16 at each of the first 20 steps; later this small, noisy
// run (single-batch loss spikes at steps 9, 33, 37) amplifies any rounding
// difference, so the last 10 steps are compared as a mean: fp8 3.2953
// against bf16 3.2288 (+2.1%), from 4.098 at step 1. Bounds: 2e-2 per step
// to step 20, +4% for the mean, and the mean 0.5 below the first loss. The
// interpreter is deterministic: these are fixed numbers, not a flaky margin.
TEST_F(Fp8ReferenceTest, Fp8TracksBf16) {
  std::vector<double> bf16, fp8;
  ASSERT_NO_FATAL_FAILURE(train("bf16", bf16));
  ASSERT_NO_FATAL_FAILURE(train("fp8", fp8));
  double worst = 0;
  bool differs = false;
  for (int64_t i = 0; i < kSteps; ++i) {
    ASSERT_TRUE(std::isfinite(fp8[i])) << "step " << i;
    if (i < kSteps / 2)
      worst = std::max(worst, std::fabs(fp8[i] - bf16[i]) / bf16[i]);
    differs |= fp8[i] != bf16[i];
  }
  double lastBf16 = mean(bf16, kSteps - 10, kSteps), lastFp8 = mean(fp8, kSteps - 10, kSteps);
  std::printf("fp8 vs bf16: worst relative loss difference to step %lld %.3g; mean of the last 10 "
              "steps %.4f against %.4f\n",
              (long long)kSteps / 2, worst, lastFp8, lastBf16);
  EXPECT_LT(worst, 2e-2);
  EXPECT_LT(lastFp8, 1.04 * lastBf16);
  EXPECT_TRUE(differs) << "fp8 gave bf16's losses bit for bit: nothing was quantized";
  EXPECT_LT(lastFp8, fp8.front() - 0.5) << "the fp8 step learns";
}

} // namespace
