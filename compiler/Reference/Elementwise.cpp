//===- Elementwise.cpp - reference elementwise ops and views --------------===//
//
// The fp64/fp32 reference of the Elementwise kernel family
// (compiler/Codegen/Kernels/Elementwise.cpp): elementwise ops, gpt.bias_add,
// row softmax and causal mask, views and gpt.slice copies. gpt.fusion runs
// its body through the driver (Interpreter.cpp), op by op.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <limits>

namespace gptc::reference {

/// The elementwise ops, views and copies: the driver's fallback, so any
/// other op is unsupported.
template <typename T>
LogicalResult Evaluator<T>::elementwise(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .template Case<AddOp>([&](auto o) { return binary(o, [](T a, T b) { return a + b; }); })
      .template Case<SubOp>([&](auto o) { return binary(o, [](T a, T b) { return a - b; }); })
      .template Case<MulOp>([&](auto o) { return binary(o, [](T a, T b) { return a * b; }); })
      .template Case<DivOp>([&](auto o) { return binary(o, [](T a, T b) { return a / b; }); })
      .template Case<MaxOp>([&](auto o) { return binary(o, [](T a, T b) { return a > b ? a : b; }); })
      .template Case<NegOp>([&](auto o) { return unary(o, [](T x) { return -x; }); })
      .template Case<ExpOp>([&](auto o) { return unary(o, [](T x) { return std::exp(x); }); })
      .template Case<LogOp>([&](auto o) { return unary(o, [](T x) { return std::log(x); }); })
      .template Case<TanhOp>([&](auto o) { return unary(o, [](T x) { return std::tanh(x); }); })
      .template Case<SqrtOp>([&](auto o) { return unary(o, [](T x) { return std::sqrt(x); }); })
      .template Case<RsqrtOp>([&](auto o) { return unary(o, [](T x) { return T(1) / std::sqrt(x); }); })
      .template Case<GeluOp>([&](auto o) { return unary(o, gelu); })
      .template Case<ScaleOp>([&](auto o) {
        T f = static_cast<T>(o.getFactor().convertToDouble());
        return unary(o, [f](T x) { return x * f; });
      })
      .template Case<CastOp>([&](auto o) { return unary(o, [](T x) { return x; }); })
      .template Case<ConstantOp>([&](auto o) {
        Buffer &y = out(o.getResult());
        std::fill(y.begin(), y.end(), static_cast<T>(o.getValue().convertToDouble()));
        return success();
      })
      .template Case<BiasAddOp>([&](auto o) { return biasAdd(o); })
      .template Case<SoftmaxOp>([&](auto o) { return softmax(o); })
      .template Case<CausalMaskOp>([&](auto o) { return causalMask(o); })
      .template Case<ReshapeOp>([&](auto o) {
        const Buffer &x = in(o.getInput());
        out(o.getResult()) = x;
        return success();
      })
      .template Case<TransposeOp>([&](auto o) { return transpose(o); })
      .template Case<SliceOp>([&](auto o) { return slice(o); })
      .template Case<GeluGradOp>([&](auto o) { return geluGrad(o); })
      .template Case<SoftmaxGradOp>([&](auto o) { return softmaxGrad(o); })
      .Default([&](Operation *o) {
        return o->emitOpError("reference interpreter: unsupported op");
      });
}

template <typename T>
template <typename OpT, typename F>
LogicalResult Evaluator<T>::unary(OpT op, F f) {
  const Buffer &x = in(op.getInput());
  Buffer &y = out(op.getResult());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = f(x[i]);
  return success();
}

template <typename T>
template <typename OpT, typename F>
LogicalResult Evaluator<T>::binary(OpT op, F f) {
  const Buffer &a = in(op.getLhs()), &b = in(op.getRhs());
  Buffer &y = out(op.getResult());
  for (size_t i = 0; i < a.size(); ++i)
    y[i] = f(a[i], b[i]);
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::biasAdd(BiasAddOp op) {
  const Buffer &x = in(op.getInput()), &b = in(op.getBias());
  Buffer &y = out(op.getResult());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = x[i] + b[i % b.size()];
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::softmax(SoftmaxOp op) {
  const Buffer &x = in(op.getInput());
  int64_t c = shapeOf(op.getInput()).back(), rows = x.size() / c;
  Buffer &y = out(op.getResult());
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = &x[r * c];
    T mx = *std::max_element(xr, xr + c), sum = 0;
    for (int64_t i = 0; i < c; ++i)
      sum += (y[r * c + i] = std::exp(xr[i] - mx));
    for (int64_t i = 0; i < c; ++i)
      y[r * c + i] /= sum;
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::causalMask(CausalMaskOp op) {
  const Buffer &x = in(op.getInput());
  int64_t t = shapeOf(op.getInput()).back();
  Buffer &y = out(op.getResult());
  for (size_t idx = 0; idx < x.size(); ++idx) {
    int64_t j = idx % t, i = (idx / t) % t;
    y[idx] = j > i ? -std::numeric_limits<T>::infinity() : x[idx];
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::transpose(TransposeOp op) {
  const Buffer &x = in(op.getInput());
  auto xs = shapeOf(op.getInput()), ys = shapeOf(op.getResult());
  ArrayRef<int64_t> perm = op.getPermutation();
  std::vector<int64_t> inStrides = stridesOf(xs), outStrides = stridesOf(ys);
  Buffer &y = out(op.getResult());
  for (size_t idx = 0; idx < y.size(); ++idx) {
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      src += (static_cast<int64_t>(idx) / outStrides[d] % ys[d]) * inStrides[perm[d]];
    y[idx] = x[src];
  }
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::slice(SliceOp op) {
  const Buffer &x = in(op.getInput());
  auto xs = shapeOf(op.getInput());
  int64_t dim = op.getDim(), start = op.getStart(), size = op.getSize();
  int64_t inner = product(ArrayRef<int64_t>(xs).drop_front(dim + 1));
  int64_t outer = product(ArrayRef<int64_t>(xs).take_front(dim));
  Buffer &y = out(op.getResult());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < size; ++s)
      std::copy_n(&x[(o * xs[dim] + start + s) * inner], inner,
                  &y[(o * size + s) * inner]);
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::geluGrad(GeluGradOp op) {
  const Buffer &dy = in(op.getGrad()), &x = in(op.getInput());
  Buffer &dx = out(op.getResult());
  for (size_t i = 0; i < x.size(); ++i)
    dx[i] = dy[i] * geluDerivative(x[i]);
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::softmaxGrad(SoftmaxGradOp op) {
  const Buffer &dy = in(op.getGrad()), &y = in(op.getOutput());
  int64_t c = shapeOf(op.getOutput()).back(), rows = y.size() / c;
  Buffer &dx = out(op.getResult());
  for (int64_t r = 0; r < rows; ++r) {
    T dot = 0;
    for (int64_t i = 0; i < c; ++i)
      dot += dy[r * c + i] * y[r * c + i];
    for (int64_t i = 0; i < c; ++i)
      dx[r * c + i] = y[r * c + i] * (dy[r * c + i] - dot);
  }
  return success();
}

#define INSTANTIATE(T)                                           \
  template LogicalResult Evaluator<T>::elementwise(Operation *);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
