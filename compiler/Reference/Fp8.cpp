//===- Fp8.cpp - reference FP8 scales, casts and transposes ---------------===//
//
// The fp64/fp32 reference of the Fp8 kernel family
// (compiler/Codegen/Kernels/Fp8.cpp): gpt.fp8_scale, gpt.fp8_delayed_scales,
// gpt.fp8_quantize, the cast-transposes and gpt.fp8_transpose; and the
// scales and codes the other families' FP8 ops share (Evaluator.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Evaluator.h"

#include <limits>

namespace gptc::reference {

namespace {

/// An amax a scale can be taken from: > 0 and finite (not NaN).
bool usableAmax(double amax) { return amax > 0 && std::isfinite(amax); }

} // namespace

/// s = max_finite / amax, 1 for an amax that is not usable.
template <typename T>
double Evaluator<T>::scaleOf(double amax, Fp8Format format) {
  return usableAmax(amax) ? fp8MaxFinite(format) / amax : 1.0;
}

/// The scale of `x`'s own amax (a NaN anywhere makes the amax NaN, as
/// the kernels' maxima do).
template <typename T>
double Evaluator<T>::fp8Scale(const Buffer &x, Fp8Format format) {
  return scaleOf(amaxOf(x), format);
}

/// round_to_format(s x) for every element of `x`, nearest even,
/// saturating as the kernels' satfinite conversions do.
template <typename T>
std::vector<T> Evaluator<T>::quantize(const Buffer &x, Fp8Format format, double s) {
  // Significant bits, smallest normal exponent as frexp gives it.
  bool e4m3 = format == Fp8Format::E4M3;
  int digits = e4m3 ? 4 : 3, minExp = e4m3 ? -5 : -13;
  double maxFinite = fp8MaxFinite(format);
  Buffer q(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double r = roundToFormat(static_cast<double>(x[i]) * s, digits, minExp, maxFinite);
    if (std::isinf(r))
      r = std::copysign(maxFinite, r);
    q[i] = static_cast<T>(r);
  }
  return q;
}

/// `x` as gpt.fp8_matmul reads it: quantized with its own scale and
/// scaled back, so that products of these values are the tensor cores'
/// up to the order of summation.
template <typename T>
std::vector<T> Evaluator<T>::quantized(const Buffer &x, Fp8Format format) {
  double s = fp8Scale(x, format);
  Buffer q = quantize(x, format, s);
  for (T &v : q)
    v = static_cast<T>(static_cast<double>(v) / s);
  return q;
}

/// max |x|, NaN if any element is NaN (as the kernels' maxima).
template <typename T>
double Evaluator<T>::amaxOf(const Buffer &x) {
  double amax = 0;
  for (T v : x) {
    double a = std::fabs(static_cast<double>(v));
    amax = std::isnan(a) || a > amax ? a : amax;
    if (std::isnan(amax))
      break;
  }
  return amax;
}

/// What an FP8 op quantizes: its input, or with `gelu` the GELU of it
/// rounded as a stored gpt.gelu result would be (into `storage`).
template <typename T>
const std::vector<T> &Evaluator<T>::fp8Source(Value x, bool withGelu, Buffer &storage) {
  if (!withGelu)
    return in(x);
  Type elt = llvm::cast<ShapedType>(x.getType()).getElementType();
  storage = in(x);
  for (T &e : storage)
    e = static_cast<T>(asStored(elt, gelu(e)));
  return storage;
}

/// Likewise with a `gelu_grad %pre`: gpt.gelu_grad(x, pre), unrounded
/// (into `exact`, for sums) and as stored (the returned buffer).
template <typename T>
const std::vector<T> &Evaluator<T>::fp8Source(Value x, Value pre, bool withGelu,
                                              Buffer &storage, Buffer *exact) {
  if (!pre) {
    const Buffer &values = fp8Source(x, withGelu, storage);
    if (exact)
      *exact = values;
    return values;
  }
  Type elt = llvm::cast<ShapedType>(x.getType()).getElementType();
  storage = in(x);
  const Buffer &p = in(pre);
  for (size_t i = 0; i < storage.size(); ++i)
    storage[i] *= geluDerivative(p[i]);
  if (exact)
    *exact = storage;
  roundAsStored(storage, elt);
  return storage;
}

template <typename T>
LogicalResult Evaluator<T>::fp8ScaleOf(Fp8ScaleOp op) {
  // Delayed: the largest amax of the steps before, where it is usable;
  // else the values' own.
  double amax = std::numeric_limits<double>::quiet_NaN();
  if (Value h = op.getHistory()) {
    amax = amaxOf(in(h));
    shiftInto(in(h), op.getShifted());
  }
  if (!usableAmax(amax)) {
    Buffer storage;
    amax = amaxOf(fp8Source(op.getInput(), op.getPre(), op.getGelu(), storage));
  }
  double s = scaleOf(amax, op.getFormat());
  out(op.getScale())[0] = static_cast<T>(s);
  out(op.getInverse())[0] = static_cast<T>(1.0 / s);
  return success();
}

/// `shifted`: `history` moved one place on, its first element 0.
template <typename T>
void Evaluator<T>::shiftInto(const Buffer &history, Value shifted) {
  Buffer &next = out(shifted);
  next[0] = 0;
  for (size_t i = 1; i < next.size(); ++i)
    next[i] = history[i - 1];
}

/// Each history's scale, as gpt.fp8_scale's delayed one, 1 where the
/// history holds no usable amax; the histories shifted on.
template <typename T>
LogicalResult Evaluator<T>::fp8DelayedScales(Fp8DelayedScalesOp op) {
  for (auto [i, h] : llvm::enumerate(op.getHistories())) {
    double s = scaleOf(amaxOf(in(h)), op.getFormat(i));
    out(op.getScale(i))[0] = static_cast<T>(s);
    out(op.getInverse(i))[0] = static_cast<T>(1.0 / s);
    shiftInto(in(h), op.getShifted(i));
  }
  return success();
}

/// A quantization's `recorded`: its history with the first element
/// raised to the amax of `values` (a NaN amax is kept).
template <typename T>
void Evaluator<T>::record(Value history, Value recorded, const Buffer &values) {
  if (!history)
    return;
  Buffer h = in(history);
  double amax = amaxOf(values);
  if (std::isnan(amax) || amax > static_cast<double>(h[0]))
    h[0] = static_cast<T>(amax);
  out(recorded) = std::move(h);
}

/// `q` of `x`'s shape as a (rows, last dimension) matrix, transposed.
template <typename T>
std::vector<T> Evaluator<T>::transposedOf(const Buffer &q, Value x) {
  auto shape = shapeOf(x);
  int64_t cols = shape.back(), rows = product(ArrayRef<int64_t>(shape).drop_back());
  Buffer t(q.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[j * rows + i] = q[i * cols + j];
  return t;
}

template <typename T>
LogicalResult Evaluator<T>::fp8Quantize(Fp8QuantizeOp op) {
  Buffer storage;
  const Buffer &values = fp8Source(op.getInput(), op.getGelu(), storage);
  record(op.getHistory(), op.getRecorded(), values);
  Buffer q = quantize(values, op.getFormat(), in(op.getScale())[0]);
  out(op.getResult()) = op.getTranspose() ? transposedOf(q, op.getInput()) : std::move(q);
  return success();
}

/// A cast-transpose's codes of `values` in both layouts, and its
/// recorded history.
template <typename T>
template <typename CastOp>
void Evaluator<T>::castBothLayouts(CastOp op, const Buffer &values) {
  record(op.getHistory(), op.getRecorded(), values);
  Buffer q = quantize(values, op.getFormat(), in(op.getScale())[0]);
  out(op.getTransposed()) = transposedOf(q, op.getInput());
  out(op.getResult()) = std::move(q);
}

template <typename T>
LogicalResult Evaluator<T>::fp8CastTranspose(Fp8CastTransposeOp op) {
  Buffer storage;
  if (auto rounded = op.getRoundedToAttr()) { // as a gpt.cast to it would store
    storage = in(op.getInput());
    roundAsStored(storage, rounded.getValue());
    castBothLayouts(op, storage);
    return success();
  }
  castBothLayouts(op, fp8Source(op.getInput(), op.getGelu(), storage));
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::fp8CastTransposeSum(Fp8CastTransposeSumOp op) {
  Buffer storage, exact;
  castBothLayouts(op, fp8Source(op.getInput(), op.getPre(), false, storage, &exact));
  addColumnSums(exact, out(op.getSum()));
  return success();
}

template <typename T>
LogicalResult Evaluator<T>::fp8Transpose(Fp8TransposeOp op) {
  out(op.getResult()) = transposedOf(in(op.getInput()), op.getInput());
  return success();
}

#define INSTANTIATE(T)                                                                       \
  template double Evaluator<T>::scaleOf(double, Fp8Format);                                  \
  template double Evaluator<T>::amaxOf(const std::vector<T> &);                              \
  template std::vector<T> Evaluator<T>::quantize(const std::vector<T> &, Fp8Format, double); \
  template std::vector<T> Evaluator<T>::quantized(const std::vector<T> &, Fp8Format);        \
  template void Evaluator<T>::record(Value, Value, const std::vector<T> &);                  \
  template std::vector<T> Evaluator<T>::transposedOf(const std::vector<T> &, Value);         \
  template LogicalResult Evaluator<T>::fp8ScaleOf(Fp8ScaleOp);                               \
  template LogicalResult Evaluator<T>::fp8DelayedScales(Fp8DelayedScalesOp);                 \
  template LogicalResult Evaluator<T>::fp8Quantize(Fp8QuantizeOp);                           \
  template LogicalResult Evaluator<T>::fp8CastTranspose(Fp8CastTransposeOp);                 \
  template LogicalResult Evaluator<T>::fp8CastTransposeSum(Fp8CastTransposeSumOp);           \
  template LogicalResult Evaluator<T>::fp8Transpose(Fp8TransposeOp);
GPTC_REFERENCE_ELEMENT_TYPES(INSTANTIATE)
#undef INSTANTIATE

} // namespace gptc::reference
