//===- CrossEntropy.cpp - reference cross-entropy -------------------------===//
//
// The fp64/fp32 reference of the CrossEntropy kernel family
// (compiler/Codegen/Kernels/CrossEntropy.cpp): gpt.cross_entropy,
// gpt.cross_entropy_grad and gpt.fp8_cross_entropy_grad.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include <algorithm>

namespace gptc::reference {

namespace {

/// max of x[0, n) and sum of exp(x - max): a stable log-sum-exp row.
template <typename T>
std::pair<T, T> maxAndSumExp(const T *x, int64_t n) {
  T mx = *std::max_element(x, x + n), sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += std::exp(x[i] - mx);
  return {mx, sum};
}

} // namespace

template <typename T>
LogicalResult Evaluator<T>::crossEntropy(CrossEntropyOp op) {
  const Buffer &logits = in(op.getLogits()), &targets = in(op.getTargets());
  int64_t vp = shapeOf(op.getLogits()).back();
  FailureOr<int64_t> vocab = configNumber(op, op.getVocabSize(), "vocab_size");
  if (failed(vocab))
    return failure();
  int64_t v = *vocab;
  int64_t rows = targets.size();
  T total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t target = static_cast<int64_t>(targets[r]);
    if (target < 0 || target >= v)
      return op.emitOpError("target ") << target << " at position " << r
                                       << " is outside the vocabulary [0, " << v << ")";
    const T *lr = &logits[r * vp];
    auto [mx, sum] = maxAndSumExp(lr, v);
    total += std::log(sum) + mx - lr[target];
  }
  out(op.getResult())[0] = total / static_cast<T>(rows);
  return success();
}

/// dlogits of a cross_entropy_grad or fp8_cross_entropy_grad `op` into
/// `dl` (zeroed, of the logits' size).
template <typename T>
template <typename GradOp>
LogicalResult Evaluator<T>::crossEntropyGradInto(GradOp op, Buffer &dl) {
  const Buffer &dloss = in(op.getGrad()), &logits = in(op.getLogits());
  const Buffer &targets = in(op.getTargets());
  int64_t vp = shapeOf(op.getLogits()).back();
  FailureOr<int64_t> vocab = configNumber(op, op.getVocabSize(), "vocab_size");
  if (failed(vocab))
    return failure();
  int64_t v = *vocab;
  int64_t rows = targets.size();
  T g = dloss[0] / static_cast<T>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t target = static_cast<int64_t>(targets[r]);
    if (target < 0 || target >= v)
      return op.emitOpError("target ") << target << " at position " << r
                                       << " is outside the vocabulary [0, " << v << ")";
    const T *lr = &logits[r * vp];
    auto [mx, sum] = maxAndSumExp(lr, v);
    for (int64_t i = 0; i < v; ++i)
      dl[r * vp + i] = g * (std::exp(lr[i] - mx) / sum - (i == target ? T(1) : T(0)));
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::crossEntropyGrad(CrossEntropyGradOp op) {
  return crossEntropyGradInto(op, out(op.getResult()));
}

/// The gradient's codes at the scale of its bound |dloss| / P.
template <typename T>
LogicalResult Evaluator<T>::fp8CrossEntropyGrad(Fp8CrossEntropyGradOp op) {
  Buffer dl(in(op.getLogits()).size(), T(0));
  if (failed(crossEntropyGradInto(op, dl)))
    return failure();
  T bound = std::fabs(in(op.getGrad())[0] / static_cast<T>(in(op.getTargets()).size()));
  double s = scaleOf(static_cast<double>(bound), Fp8Format::E5M2);
  // A scale past f32's range is 1, as the kernels' f32 quotient.
  if (!std::isfinite(static_cast<float>(s)))
    s = 1.0;
  out(op.getResult()) = quantize(dl, Fp8Format::E5M2, s);
  out(op.getInverse())[0] = static_cast<T>(1.0 / s);
  return success();
}

#define INSTANTIATE(T)                                                             \
  template LogicalResult Evaluator<T>::crossEntropy(CrossEntropyOp);               \
  template LogicalResult Evaluator<T>::crossEntropyGrad(CrossEntropyGradOp);       \
  template LogicalResult Evaluator<T>::fp8CrossEntropyGrad(Fp8CrossEntropyGradOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
