//===- Reduction.cpp - reference reductions -------------------------------===//
//
// The fp64/fp32 reference of the Reduction kernel family
// (compiler/Codegen/Kernels/Reduction.cpp): gpt.reduce, gpt.gelu_grad_sum
// and gpt.global_norm.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include <algorithm>
#include <limits>

namespace gptc::reference {

template <typename T>
LogicalResult Evaluator<T>::reduce(ReduceOp op) {
  const Buffer &x = in(op.getInput());
  auto xs = shapeOf(op.getInput());
  ArrayRef<int64_t> dims = op.getDims();
  // Output strides per input dimension: 0 along reduced dimensions.
  std::vector<int64_t> keptShape;
  for (size_t i = 0; i < xs.size(); ++i)
    keptShape.push_back(llvm::is_contained(dims, int64_t(i)) ? 1 : xs[i]);
  std::vector<int64_t> outStrides = stridesOf(keptShape), inStrides = stridesOf(xs);
  for (int64_t d : dims)
    outStrides[d] = 0;
  Buffer &y = out(op.getResult());
  bool isMax = op.getKind() == ReduceKind::Max;
  if (isMax)
    std::fill(y.begin(), y.end(), -std::numeric_limits<T>::infinity());
  for (size_t idx = 0; idx < x.size(); ++idx) {
    int64_t o = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      o += (static_cast<int64_t>(idx) / inStrides[d] % xs[d]) * outStrides[d];
    y[o] = isMax ? std::max(y[o], x[idx]) : y[o] + x[idx];
  }
  if (op.getKind() == ReduceKind::Mean) {
    T count = static_cast<T>(x.size() / std::max<size_t>(y.size(), 1));
    for (T &v : y)
      v /= count;
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::globalNorm(GlobalNormOp op) {
  T sum = 0;
  for (Value v : op.getInputs())
    for (T x : in(v))
      sum += x * x;
  out(op.getResult())[0] = std::sqrt(sum);
  return success();
}

#define INSTANTIATE(T)                                             \
  template LogicalResult Evaluator<T>::reduce(ReduceOp);           \
  template LogicalResult Evaluator<T>::globalNorm(GlobalNormOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
