//===- Gemm.cpp - reference GEMMs and their epilogues ---------------------===//
//
// The fp64/fp32 reference of the Gemm kernel family
// (compiler/Codegen/Kernels/Gemm.cpp): gpt.matmul, gpt.linear and the FP8
// GEMMs. A GEMM fusion's body is these and elementwise ops.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

namespace gptc::reference {

namespace {

/// y = x W^T (+ b) for x (rows, k), W (n, k).
template <typename T>
void linearInto(const std::vector<T> &x, const std::vector<T> &w, const std::vector<T> *b,
                int64_t n, int64_t k, std::vector<T> &y) {
  int64_t rows = x.size() / k;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      T acc = b ? (*b)[j] : T(0);
      for (int64_t i = 0; i < k; ++i)
        acc += x[r * k + i] * w[j * k + i];
      y[r * n + j] = acc;
    }
}

} // namespace

template <typename T>
LogicalResult Evaluator<T>::linear(LinearOp op) {
  auto wShape = shapeOf(op.getWeight());
  linearInto(in(op.getInput()), in(op.getWeight()), op.getBias() ? &in(op.getBias()) : nullptr,
             wShape[0], wShape[1], out(op.getResult()));
  return success();
}

/// y = op(a) op(b) for the operands of a gpt.matmul (or a fused one);
/// `values` replaces the operands' buffers (gpt.fp8_matmul's quantized
/// copies).
template <typename T>
void Evaluator<T>::matmulInto(Value lhs, Value rhs, bool ta, bool tb, Value result, Buffer &y,
                              std::pair<const Buffer *, const Buffer *> values) {
  const Buffer &a = values.first ? *values.first : in(lhs);
  const Buffer &bm = values.second ? *values.second : in(rhs);
  auto as = shapeOf(lhs), bs = shapeOf(rhs);
  auto ys = shapeOf(result);
  size_t r = ys.size();
  int64_t m = ys[r - 2], n = ys[r - 1];
  int64_t k = ta ? as[r - 2] : as[r - 1];
  int64_t batches = product(ArrayRef<int64_t>(ys).drop_back(2));
  bool sharedRhs = bs.size() == 2;
  for (int64_t bt = 0; bt < batches; ++bt) {
    const T *ab = &a[bt * m * k];
    const T *bb = &bm[sharedRhs ? 0 : bt * k * n];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (ta ? ab[p * m + i] : ab[i * k + p]) *
                 (tb ? bb[j * k + p] : bb[p * n + j]);
        y[(bt * m + i) * n + j] = acc;
      }
  }
}

template <typename T>
LogicalResult Evaluator<T>::matmul(MatmulOp op) {
  matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
             op.getResult(), out(op.getResult()));
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::fp8Matmul(Fp8MatmulOp op) {
  Buffer a = quantized(in(op.getLhs()), op.getLhsFormat());
  Buffer bm = quantized(in(op.getRhs()), op.getRhsFormat());
  matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
             op.getResult(), out(op.getResult()), {&a, &bm});
  return success();
}

/// y = (lhs_scale rhs_scale) op(lhs) op(rhs) (+ bias per column), the
/// FP8 values summed exactly (in T), then scaled once: the tensor cores'
/// order of scaling.
template <typename T>
void Evaluator<T>::scaledProductInto(Value lhs, Value lhsScale, Value rhs, Value rhsScale,
                                     bool ta, bool tb, Value bias, Value result, Buffer &y) {
  matmulInto(lhs, rhs, ta, tb, result, y);
  T scale = in(lhsScale)[0] * in(rhsScale)[0];
  for (T &v : y)
    v *= scale;
  if (bias) {
    const Buffer &b = in(bias);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] += b[i % b.size()];
  }
}

template <typename T>
LogicalResult Evaluator<T>::scaledMatmul(ScaledMatmulOp op) {
  Buffer &y = out(op.getResult());
  scaledProductInto(op.getLhs(), op.getLhsScale(), op.getRhs(), op.getRhsScale(),
                    op.getTransposeLhs(), op.getTransposeRhs(), op.getBias(), op.getResult(), y);
  if (op.getAccumulate()) {
    const Buffer &acc = in(op.getAccumulate());
    for (size_t i = 0; i < y.size(); ++i)
      y[i] += acc[i];
  }
  return success();
}

/// The unrounded product plus bias is GELU's input (the GEMM's epilogue
/// reads its accumulator); `pre` is rounded as the result is stored.
template <typename T>
LogicalResult Evaluator<T>::scaledMatmulGeluFp8(ScaledMatmulGeluFp8Op op) {
  Buffer &acc = out(op.getPre());
  scaledProductInto(op.getLhs(), op.getLhsScale(), op.getRhs(), op.getRhsScale(), false, true,
                    op.getBias(), op.getPre(), acc);
  Buffer g(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    g[i] = gelu(acc[i]);
  Buffer h = in(op.getHistory());
  h[0] = static_cast<T>(amaxOf(g));
  out(op.getRecorded()) = std::move(h);
  out(op.getResult()) = quantize(g, op.getFormat(), in(op.getScale())[0]);
  return success(); // roundResults rounds `pre` to its type
}

#define INSTANTIATE(T)                                                             \
  template LogicalResult Evaluator<T>::linear(LinearOp);                           \
  template LogicalResult Evaluator<T>::matmul(MatmulOp);                           \
  template LogicalResult Evaluator<T>::fp8Matmul(Fp8MatmulOp);                     \
  template LogicalResult Evaluator<T>::scaledMatmul(ScaledMatmulOp);               \
  template LogicalResult Evaluator<T>::scaledMatmulGeluFp8(ScaledMatmulGeluFp8Op);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
