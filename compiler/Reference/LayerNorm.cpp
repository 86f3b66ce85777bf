//===- LayerNorm.cpp - reference layernorms and gradients -----------------===//
//
// The fp64/fp32 reference of the LayerNorm kernel family
// (compiler/Codegen/Kernels/LayerNorm.cpp): gpt.layernorm,
// gpt.add_layernorm(_fp8) and gpt.layernorm_grad(_add).
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

namespace gptc::reference {

namespace {

/// Mean and 1 / sqrt(biased variance + eps) of x[0, n): a layernorm row.
template <typename T>
std::pair<T, T> meanAndRstd(const T *x, int64_t n, T eps) {
  T mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i)
    mean += x[i];
  mean /= static_cast<T>(n);
  for (int64_t i = 0; i < n; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<T>(n);
  return {mean, T(1) / std::sqrt(var + eps)};
}

/// y = layernorm(x) over rows of c, weight w and bias b.
template <typename T>
void layernormInto(const std::vector<T> &x, const std::vector<T> &w, const std::vector<T> &b,
                   int64_t c, T eps, std::vector<T> &y) {
  int64_t rows = x.size() / c;
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = &x[r * c];
    auto [mean, rstd] = meanAndRstd(xr, c, eps);
    for (int64_t i = 0; i < c; ++i)
      y[r * c + i] = (xr[i] - mean) * rstd * w[i] + b[i];
  }
}

template <typename T>
void layernormGradInto(const std::vector<T> &dy, const std::vector<T> &x, const std::vector<T> &w,
                       int64_t c, T eps, std::vector<T> &dx, std::vector<T> &dw,
                       std::vector<T> &db) {
  int64_t rows = x.size() / c;
  std::vector<T> xhat(c);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = &x[r * c], *dyr = &dy[r * c];
    auto [mean, rstd] = meanAndRstd(xr, c, eps);
    T dnormMean = 0, dnormXhatMean = 0;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (xr[i] - mean) * rstd;
      T dnorm = dyr[i] * w[i];
      dnormMean += dnorm;
      dnormXhatMean += dnorm * xhat[i];
      dw[i] += dyr[i] * xhat[i];
      db[i] += dyr[i];
    }
    dnormMean /= static_cast<T>(c);
    dnormXhatMean /= static_cast<T>(c);
    for (int64_t i = 0; i < c; ++i)
      dx[r * c + i] = (dyr[i] * w[i] - dnormMean - xhat[i] * dnormXhatMean) * rstd;
  }
}

} // namespace

template <typename T>
LogicalResult Evaluator<T>::layernorm(LayerNormOp op) {
  layernormInto(in(op.getInput()), in(op.getWeight()), in(op.getBias()),
                shapeOf(op.getInput()).back(),
                static_cast<T>(op.getEpsilon().convertToDouble()), out(op.getResult()));
  return success();
}

/// A residual layernorm's sum lhs + rhs as stored (rounded when narrow),
/// which the layernorm reads.
template <typename T>
std::vector<T> &Evaluator<T>::residualSum(Value lhs, Value rhs, Value result) {
  const Buffer &a = in(lhs), &bb = in(rhs);
  Type sumElt = llvm::cast<ShapedType>(result.getType()).getElementType();
  Buffer &sum = out(result);
  for (size_t i = 0; i < a.size(); ++i)
    sum[i] = static_cast<T>(asStored(sumElt, a[i] + bb[i]));
  return sum;
}

/// The residual sum and the FP8 codes of its layernorm, rounded to
/// rounded_to, as its fp8_cast_transpose quantized them.
template <typename T>
LogicalResult Evaluator<T>::addLayernormFp8(AddLayerNormFp8Op op) {
  const Buffer &sum = residualSum(op.getLhs(), op.getRhs(), op.getSum());
  Buffer y(sum.size());
  layernormInto(sum, in(op.getWeight()), in(op.getBias()), shapeOf(op.getSum()).back(),
                static_cast<T>(op.getEpsilon().convertToDouble()), y);
  // As roundResults would round the unfused layernorm's result.
  roundAsStored(y, op.getRoundedTo());
  record(op.getHistory(), op.getRecorded(), y);
  Buffer q = quantize(y, op.getFormat(), in(op.getScale())[0]);
  out(op.getTransposed()) = transposedOf(q, op.getSum());
  out(op.getResult()) = std::move(q);
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::layernormGrad(LayerNormGradOp op) {
  layernormGradInto(in(op.getGrad()), in(op.getInput()), in(op.getWeight()),
                    shapeOf(op.getInput()).back(),
                    static_cast<T>(op.getEpsilon().convertToDouble()), out(op.getInputGrad()),
                    out(op.getWeightGrad()), out(op.getBiasGrad()));
  return success();
}

#define INSTANTIATE(T)                                                       \
  template LogicalResult Evaluator<T>::layernorm(LayerNormOp);               \
  template LogicalResult Evaluator<T>::addLayernormFp8(AddLayerNormFp8Op);   \
  template LogicalResult Evaluator<T>::layernormGrad(LayerNormGradOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
