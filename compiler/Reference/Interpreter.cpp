//===- Interpreter.cpp - reference interpreter for the gpt dialect -------===//
//
// Straightforward loops, written for clarity over speed: each op reads its
// operands from an environment of dense buffers and writes its results.
// Element type T (double or float) is the precision of every arithmetic
// operation, accumulations included.
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Interpreter.h"

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

using namespace mlir;
using namespace mlir::gpt;

namespace gptc::reference {

Tensor::Tensor(std::vector<int64_t> shape, double fill) : shape(std::move(shape)) {
  int64_t n = std::accumulate(this->shape.begin(), this->shape.end(), int64_t{1},
                              std::multiplies<int64_t>());
  data.assign(n, fill);
}

Tensor::Tensor(std::vector<int64_t> shape, std::vector<double> data)
    : shape(std::move(shape)), data(std::move(data)) {}

//===----------------------------------------------------------------------===//
// Rounding to storage formats
//===----------------------------------------------------------------------===//

/// Rounds to a binary format with `digits` significant bits, smallest
/// normal exponent `minExp` (as frexp reports it) and largest finite value.
static double roundToFormat(double x, int digits, int minExp, double maxFinite) {
  if (x == 0.0 || !std::isfinite(x))
    return x;
  int exp;
  std::frexp(x, &exp);
  double quantum = std::ldexp(1.0, std::max(exp, minExp) - digits);
  double r = std::nearbyint(x / quantum) * quantum; // ties to even
  if (std::fabs(r) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

double roundTo(Type type, double x) {
  if (type.isF64())
    return x;
  if (type.isF32())
    return static_cast<double>(static_cast<float>(x));
  if (type.isBF16())
    return roundToFormat(x, 8, -125, 3.3895313892515355e38);
  if (type.isF16())
    return roundToFormat(x, 11, -13, 65504.0);
  return x;
}

/// The formats whose stored values the interpreter rounds (bf16, f16):
/// f32 storage is exact in fp64 mode, and fp32 mode computes in f32.
bool isNarrow(Type elt) { return elt.isBF16() || elt.isF16(); }

/// x as a tensor of element type `elt` holds it.
double asStored(Type elt, double x) { return isNarrow(elt) ? roundTo(elt, x) : x; }

//===----------------------------------------------------------------------===//
// Evaluator
//===----------------------------------------------------------------------===//

namespace {

std::vector<int64_t> shapeOf(Value v) {
  auto shape = llvm::cast<ShapedType>(v.getType()).getShape();
  return {shape.begin(), shape.end()};
}

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

std::vector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

} // namespace

double counterNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t key = splitmix64(seed) ^ splitmix64(stream * 0xD1B54A32D192ED03ull);
  uint64_t a = splitmix64(key + 2 * index), b = splitmix64(key + 2 * index + 1);
  double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53; // (0, 1]
  double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;         // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {

template <typename T>
class Evaluator {
public:
  using Buffer = std::vector<T>;

  LogicalResult run(func::FuncOp fn, ArrayRef<Tensor> args,
                    std::vector<Tensor> &results) {
    if (args.size() != fn.getNumArguments())
      return fn.emitError("reference interpreter: @")
             << fn.getName() << " takes " << fn.getNumArguments()
             << " arguments, got " << args.size();
    std::vector<Buffer> buffers;
    for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !type.hasStaticShape())
        return fn.emitError("reference interpreter: argument ")
               << i << " must be a statically shaped tensor, got " << arg.getType();
      if (args[i].shape != shapeOf(arg) ||
          args[i].numElements() != type.getNumElements())
        return fn.emitError("reference interpreter: argument ")
               << i << " has the wrong shape for " << type;
      Type elt = type.getElementType();
      Buffer buf;
      buf.reserve(args[i].data.size());
      for (double x : args[i].data)
        buf.push_back(static_cast<T>(asStored(elt, x)));
      buffers.push_back(std::move(buf));
    }
    std::vector<Buffer> outs;
    if (failed(call(fn, std::move(buffers), outs)))
      return failure();
    for (auto [v, buf] : llvm::zip(fn.getFunctionType().getResults(), outs)) {
      auto shape = llvm::cast<ShapedType>(v).getShape();
      results.emplace_back(std::vector<int64_t>(shape.begin(), shape.end()),
                           std::vector<double>(buf.begin(), buf.end()));
    }
    return success();
  }

  /// Runs `fn` on buffers that already match its argument types.
  LogicalResult call(func::FuncOp fn, std::vector<Buffer> args,
                     std::vector<Buffer> &results) {
    for (auto [arg, buf] : llvm::zip(fn.getArguments(), args))
      env[arg] = std::make_unique<Buffer>(std::move(buf));
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          results.push_back(in(v));
        return success();
      }
      if (failed(execute(&op)))
        return failure();
      roundResults(&op);
    }
    return fn.emitError("reference interpreter: @") << fn.getName() << " has no return";
  }

private:
  /// `values` as a tensor of element type `elt` would store them.
  static void roundAsStored(Buffer &values, Type elt) {
    if (isNarrow(elt))
      for (T &x : values)
        x = static_cast<T>(roundTo(elt, x));
  }

  /// Narrow results hold values of their format, as stored tensors would.
  void roundResults(Operation *op) {
    for (Value r : op->getResults())
      roundAsStored(*env[r], llvm::cast<ShapedType>(r.getType()).getElementType());
  }

  /// The body op by op on whole tensors, each rounded: fusion changes where
  /// values live, not what they are.
  LogicalResult fusion(FusionOp op) {
    Evaluator<T> inner;
    Block &body = op.getBody().front();
    for (auto [arg, v] : llvm::zip(body.getArguments(), op.getInputs()))
      inner.env[arg] = std::make_unique<Buffer>(in(v));
    for (Operation &o : body) {
      if (auto yield = llvm::dyn_cast<YieldOp>(o)) {
        for (auto [r, v] : llvm::zip(op.getResults(), yield.getValues()))
          env[r] = std::make_unique<Buffer>(inner.in(v));
        return success();
      }
      if (failed(inner.execute(&o)))
        return failure();
      inner.roundResults(&o);
    }
    return op.emitOpError("reference interpreter: body without gpt.yield");
  }

  // Buffers live behind pointers: inserting a result must not move the
  // operands an op is still reading.
  llvm::DenseMap<Value, std::unique_ptr<Buffer>> env;

  const Buffer &in(Value v) { return *env.at(v); }
  Buffer &out(Value v) {
    auto &slot = env[v];
    slot = std::make_unique<Buffer>(
        product(llvm::cast<ShapedType>(v.getType()).getShape()), T(0));
    return *slot;
  }

  LogicalResult execute(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .template Case<EmbedOp>([&](auto o) { return embed(o); })
        .template Case<LayerNormOp>([&](auto o) { return layernorm(o); })
        .template Case<AddLayerNormOp>([&](auto o) { return addLayernorm(o); })
        .template Case<AddLayerNormFp8Op>([&](auto o) { return addLayernormFp8(o); })
        .template Case<LinearOp>([&](auto o) { return linear(o); })
        .template Case<MatmulOp>([&](auto o) { return matmul(o); })
        .template Case<Fp8MatmulOp>([&](auto o) { return fp8Matmul(o); })
        .template Case<Fp8ScaleOp>([&](auto o) { return fp8ScaleOf(o); })
        .template Case<Fp8DelayedScalesOp>([&](auto o) { return fp8DelayedScales(o); })
        .template Case<Fp8QuantizeOp>([&](auto o) { return fp8Quantize(o); })
        .template Case<Fp8CastTransposeOp>([&](auto o) { return fp8CastTranspose(o); })
        .template Case<Fp8CastTransposeSumOp>([&](auto o) { return fp8CastTransposeSum(o); })
        .template Case<ScaledMatmulOp>([&](auto o) { return scaledMatmul(o); })
        .template Case<ScaledMatmulGeluFp8Op>([&](auto o) { return scaledMatmulGeluFp8(o); })
        .template Case<LinearGeluOp>([&](auto o) { return linearGelu(o); })
        .template Case<MatmulGeluGradOp>([&](auto o) { return matmulGeluGrad(o); })
        .template Case<MatmulGeluBiasGradOp>([&](auto o) { return matmulGeluBiasGrad(o); })
        .template Case<GeluGradSumOp>([&](auto o) { return geluGradSum(o); })
        .template Case<MatmulBiasGradOp>([&](auto o) { return matmulBiasGrad(o); })
        .template Case<BiasAddOp>([&](auto o) { return biasAdd(o); })
        .template Case<CausalAttentionOp>([&](auto o) { return attention(o); })
        .template Case<CrossEntropyOp>([&](auto o) { return crossEntropy(o); })
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
        .template Case<SoftmaxOp>([&](auto o) { return softmax(o); })
        .template Case<CausalMaskOp>([&](auto o) { return causalMask(o); })
        .template Case<ReduceOp>([&](auto o) { return reduce(o); })
        .template Case<ReshapeOp>([&](auto o) {
          const Buffer &x = in(o.getInput());
          out(o.getResult()) = x;
          return success();
        })
        .template Case<TransposeOp>([&](auto o) { return transpose(o); })
        .template Case<SliceOp>([&](auto o) { return slice(o); })
        .template Case<EmbedGradOp>([&](auto o) { return embedGrad(o); })
        .template Case<LayerNormGradOp>([&](auto o) { return layernormGrad(o); })
        .template Case<LayerNormGradAddOp>([&](auto o) { return layernormGradAdd(o); })
        .template Case<GeluGradOp>([&](auto o) { return geluGrad(o); })
        .template Case<SoftmaxGradOp>([&](auto o) { return softmaxGrad(o); })
        .template Case<CausalAttentionGradOp>([&](auto o) { return attentionGrad(o); })
        .template Case<CausalAttentionGradSumOp>([&](auto o) { return attentionGradSum(o); })
        .template Case<CrossEntropyGradOp>([&](auto o) { return crossEntropyGrad(o); })
        .template Case<Fp8CrossEntropyGradOp>([&](auto o) { return fp8CrossEntropyGrad(o); })
        .template Case<Fp8TransposeOp>([&](auto o) {
          out(o.getResult()) = transposedOf(in(o.getInput()), o.getInput());
          return success();
        })
        .template Case<LRScheduleOp>([&](auto o) { return lrSchedule(o); })
        .template Case<GlobalNormOp>([&](auto o) { return globalNorm(o); })
        .template Case<AdamWOp>([&](auto o) { return adamw(o); })
        .template Case<AdamWMultiOp>([&](auto o) { return adamwMulti(o); })
        .template Case<RandomNormalOp>([&](auto o) { return randomNormal(o); })
        .template Case<func::CallOp>([&](auto o) { return callOp(o); })
        .template Case<FusionOp>([&](auto o) { return fusion(o); })
        .template Case<RepeatOp>([&](auto o) {
          return o.emitOpError("reference interpreter: instantiate the model "
                               "first (gpt-instantiate-model)");
        })
        .Default([&](Operation *o) {
          return o->emitOpError("reference interpreter: unsupported op");
        });
  }

  /// Mean and 1 / sqrt(biased variance + eps) of x[0, n): a layernorm row.
  static std::pair<T, T> meanAndRstd(const T *x, int64_t n, T eps) {
    T mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += x[i];
    mean /= static_cast<T>(n);
    for (int64_t i = 0; i < n; ++i)
      var += (x[i] - mean) * (x[i] - mean);
    var /= static_cast<T>(n);
    return {mean, T(1) / std::sqrt(var + eps)};
  }

  /// max of x[0, n) and sum of exp(x - max): a stable log-sum-exp row.
  static std::pair<T, T> maxAndSumExp(const T *x, int64_t n) {
    T mx = *std::max_element(x, x + n), sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += std::exp(x[i] - mx);
    return {mx, sum};
  }

  static T gelu(T x) {
    const T k = static_cast<T>(0.7978845608028654); // sqrt(2 / pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }

  template <typename OpT, typename F>
  LogicalResult unary(OpT op, F f) {
    const Buffer &x = in(op.getInput());
    Buffer &y = out(op.getResult());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = f(x[i]);
    return success();
  }

  template <typename OpT, typename F>
  LogicalResult binary(OpT op, F f) {
    const Buffer &a = in(op.getLhs()), &b = in(op.getRhs());
    Buffer &y = out(op.getResult());
    for (size_t i = 0; i < a.size(); ++i)
      y[i] = f(a[i], b[i]);
    return success();
  }

  LogicalResult embed(EmbedOp op) {
    const Buffer &wte = in(op.getWte()), &wpe = in(op.getWpe()), &ids = in(op.getIds());
    auto wteShape = shapeOf(op.getWte());
    int64_t v = wteShape[0], c = wteShape[1], t = shapeOf(op.getIds())[1];
    Buffer &y = out(op.getResult());
    for (int64_t r = 0; r < static_cast<int64_t>(ids.size()); ++r) {
      int64_t id = static_cast<int64_t>(ids[r]);
      if (id < 0 || id >= v)
        return op.emitOpError("token id ") << id << " at position " << r
                                           << " is outside the vocabulary [0, " << v << ")";
      int64_t pos = r % t;
      for (int64_t i = 0; i < c; ++i)
        y[r * c + i] = wte[id * c + i] + wpe[pos * c + i];
    }
    return success();
  }

  LogicalResult layernorm(LayerNormOp op) {
    layernormInto(in(op.getInput()), in(op.getWeight()), in(op.getBias()),
                  shapeOf(op.getInput()).back(),
                  static_cast<T>(op.getEpsilon().convertToDouble()), out(op.getResult()));
    return success();
  }

  /// A residual layernorm's sum lhs + rhs as stored (rounded when narrow),
  /// which the layernorm reads.
  Buffer &residualSum(Value lhs, Value rhs, Value result) {
    const Buffer &a = in(lhs), &bb = in(rhs);
    Type sumElt = llvm::cast<ShapedType>(result.getType()).getElementType();
    Buffer &sum = out(result);
    for (size_t i = 0; i < a.size(); ++i)
      sum[i] = static_cast<T>(asStored(sumElt, a[i] + bb[i]));
    return sum;
  }

  LogicalResult addLayernorm(AddLayerNormOp op) {
    const Buffer &sum = residualSum(op.getLhs(), op.getRhs(), op.getSum());
    layernormInto(sum, in(op.getWeight()), in(op.getBias()), shapeOf(op.getSum()).back(),
                  static_cast<T>(op.getEpsilon().convertToDouble()), out(op.getResult()));
    return success();
  }

  /// gpt.add_layernorm's sum, and the FP8 codes of its result rounded to
  /// rounded_to, as its fp8_cast_transpose quantized it.
  LogicalResult addLayernormFp8(AddLayerNormFp8Op op) {
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

  /// y = layernorm(x) over rows of c, weight w and bias b.
  void layernormInto(const Buffer &x, const Buffer &w, const Buffer &b, int64_t c, T eps,
                     Buffer &y) {
    int64_t rows = x.size() / c;
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = &x[r * c];
      auto [mean, rstd] = meanAndRstd(xr, c, eps);
      for (int64_t i = 0; i < c; ++i)
        y[r * c + i] = (xr[i] - mean) * rstd * w[i] + b[i];
    }
  }

  /// y = x W^T (+ b) for x (rows, k), W (n, k).
  void linearInto(const Buffer &x, const Buffer &w, const Buffer *b, int64_t n, int64_t k,
                  Buffer &y) {
    int64_t rows = x.size() / k;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        T acc = b ? (*b)[j] : T(0);
        for (int64_t i = 0; i < k; ++i)
          acc += x[r * k + i] * w[j * k + i];
        y[r * n + j] = acc;
      }
  }

  LogicalResult linear(LinearOp op) {
    auto wShape = shapeOf(op.getWeight());
    linearInto(in(op.getInput()), in(op.getWeight()), op.getBias() ? &in(op.getBias()) : nullptr,
               wShape[0], wShape[1], out(op.getResult()));
    return success();
  }

  LogicalResult linearGelu(LinearGeluOp op) {
    auto wShape = shapeOf(op.getWeight());
    Buffer &pre = out(op.getPreActivation());
    linearInto(in(op.getInput()), in(op.getWeight()), op.getBias() ? &in(op.getBias()) : nullptr,
               wShape[0], wShape[1], pre);
    Buffer &y = out(op.getResult());
    for (size_t i = 0; i < pre.size(); ++i)
      y[i] = gelu(pre[i]);
    return success();
  }

  /// y = op(a) op(b) for the operands of a gpt.matmul (or a fused one);
  /// `values` replaces the operands' buffers (gpt.fp8_matmul's quantized
  /// copies).
  void matmulInto(Value lhs, Value rhs, bool ta, bool tb, Value result, Buffer &y,
                  std::pair<const Buffer *, const Buffer *> values = {}) {
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

  LogicalResult matmul(MatmulOp op) {
    matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
               op.getResult(), out(op.getResult()));
    return success();
  }

  /// An amax a scale can be taken from: > 0 and finite (not NaN).
  static bool usableAmax(double amax) { return amax > 0 && std::isfinite(amax); }

  /// s = max_finite / amax, 1 for an amax that is not usable.
  static double scaleOf(double amax, Fp8Format format) {
    return usableAmax(amax) ? fp8MaxFinite(format) / amax : 1.0;
  }

  /// The scale of `x`'s own amax (a NaN anywhere makes the amax NaN, as
  /// the kernels' maxima do).
  static double fp8Scale(const Buffer &x, Fp8Format format) {
    return scaleOf(amaxOf(x), format);
  }

  /// round_to_format(s x) for every element of `x`, nearest even,
  /// saturating as the kernels' satfinite conversions do.
  static Buffer quantize(const Buffer &x, Fp8Format format, double s) {
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
  static Buffer quantized(const Buffer &x, Fp8Format format) {
    double s = fp8Scale(x, format);
    Buffer q = quantize(x, format, s);
    for (T &v : q)
      v = static_cast<T>(static_cast<double>(v) / s);
    return q;
  }

  LogicalResult fp8Matmul(Fp8MatmulOp op) {
    Buffer a = quantized(in(op.getLhs()), op.getLhsFormat());
    Buffer bm = quantized(in(op.getRhs()), op.getRhsFormat());
    matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
               op.getResult(), out(op.getResult()), {&a, &bm});
    return success();
  }

  /// What an FP8 op quantizes: its input, or with `gelu` the GELU of it
  /// rounded as a stored gpt.gelu result would be (into `storage`).
  const Buffer &fp8Source(Value x, bool withGelu, Buffer &storage) {
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
  const Buffer &fp8Source(Value x, Value pre, bool withGelu, Buffer &storage,
                          Buffer *exact = nullptr) {
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

  /// max |x|, NaN if any element is NaN (as the kernels' maxima).
  static double amaxOf(const Buffer &x) {
    double amax = 0;
    for (T v : x) {
      double a = std::fabs(static_cast<double>(v));
      amax = std::isnan(a) || a > amax ? a : amax;
      if (std::isnan(amax))
        break;
    }
    return amax;
  }

  LogicalResult fp8ScaleOf(Fp8ScaleOp op) {
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
  void shiftInto(const Buffer &history, Value shifted) {
    Buffer &next = out(shifted);
    next[0] = 0;
    for (size_t i = 1; i < next.size(); ++i)
      next[i] = history[i - 1];
  }

  /// Each history's scale, as gpt.fp8_scale's delayed one, 1 where the
  /// history holds no usable amax; the histories shifted on.
  LogicalResult fp8DelayedScales(Fp8DelayedScalesOp op) {
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
  void record(Value history, Value recorded, const Buffer &values) {
    if (!history)
      return;
    Buffer h = in(history);
    double amax = amaxOf(values);
    if (std::isnan(amax) || amax > static_cast<double>(h[0]))
      h[0] = static_cast<T>(amax);
    out(recorded) = std::move(h);
  }

  /// `q` of `x`'s shape as a (rows, last dimension) matrix, transposed.
  Buffer transposedOf(const Buffer &q, Value x) {
    auto shape = shapeOf(x);
    int64_t cols = shape.back(), rows = product(ArrayRef<int64_t>(shape).drop_back());
    Buffer t(q.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        t[j * rows + i] = q[i * cols + j];
    return t;
  }

  LogicalResult fp8Quantize(Fp8QuantizeOp op) {
    Buffer storage;
    const Buffer &values = fp8Source(op.getInput(), op.getGelu(), storage);
    record(op.getHistory(), op.getRecorded(), values);
    Buffer q = quantize(values, op.getFormat(), in(op.getScale())[0]);
    out(op.getResult()) = op.getTranspose() ? transposedOf(q, op.getInput()) : std::move(q);
    return success();
  }

  /// A cast-transpose's codes of `values` in both layouts, and its
  /// recorded history.
  template <typename CastOp> void castBothLayouts(CastOp op, const Buffer &values) {
    record(op.getHistory(), op.getRecorded(), values);
    Buffer q = quantize(values, op.getFormat(), in(op.getScale())[0]);
    out(op.getTransposed()) = transposedOf(q, op.getInput());
    out(op.getResult()) = std::move(q);
  }

  LogicalResult fp8CastTranspose(Fp8CastTransposeOp op) {
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

  LogicalResult fp8CastTransposeSum(Fp8CastTransposeSumOp op) {
    Buffer storage, exact;
    castBothLayouts(op, fp8Source(op.getInput(), op.getPre(), false, storage, &exact));
    addColumnSums(exact, out(op.getSum()));
    return success();
  }

  /// y = (lhs_scale rhs_scale) op(lhs) op(rhs) (+ bias per column), the
  /// FP8 values summed exactly (in T), then scaled once: the tensor cores'
  /// order of scaling.
  void scaledProductInto(Value lhs, Value lhsScale, Value rhs, Value rhsScale, bool ta, bool tb,
                         Value bias, Value result, Buffer &y) {
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

  LogicalResult scaledMatmul(ScaledMatmulOp op) {
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
  LogicalResult scaledMatmulGeluFp8(ScaledMatmulGeluFp8Op op) {
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

  /// y[i] *= gelu'(pre[i]); with `sums`, sums[c] += y[i] for y's column c.
  /// sums[c] += x[..., c] over every leading index (sums.size() columns).
  static void addColumnSums(const Buffer &x, Buffer &sums) {
    for (size_t i = 0; i < x.size(); ++i)
      sums[i % sums.size()] += x[i];
  }

  static void scaleByGeluGrad(Buffer &y, const Buffer &pre, Buffer *sums) {
    for (size_t i = 0; i < y.size(); ++i)
      y[i] *= geluDerivative(pre[i]);
    if (sums)
      addColumnSums(y, *sums);
  }

  LogicalResult matmulGeluGrad(MatmulGeluGradOp op) {
    Buffer &y = out(op.getResult());
    matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
               op.getResult(), y);
    scaleByGeluGrad(y, in(op.getPre()), nullptr);
    return success();
  }

  LogicalResult matmulGeluBiasGrad(MatmulGeluBiasGradOp op) {
    Buffer &y = out(op.getResult());
    matmulInto(op.getLhs(), op.getRhs(), op.getTransposeLhs(), op.getTransposeRhs(),
               op.getResult(), y);
    scaleByGeluGrad(y, in(op.getPre()), &out(op.getBiasGrad()));
    return success();
  }

  LogicalResult geluGradSum(GeluGradSumOp op) {
    Buffer &y = out(op.getResult());
    y = in(op.getGrad());
    scaleByGeluGrad(y, in(op.getInput()), &out(op.getSum()));
    return success();
  }

  LogicalResult matmulBiasGrad(MatmulBiasGradOp op) {
    matmulInto(op.getLhs(), op.getRhs(), true, false, op.getWeightGrad(),
               out(op.getWeightGrad()));
    addColumnSums(in(op.getLhs()), out(op.getBiasGrad()));
    return success();
  }

  LogicalResult biasAdd(BiasAddOp op) {
    const Buffer &x = in(op.getInput()), &b = in(op.getBias());
    Buffer &y = out(op.getResult());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] + b[i % b.size()];
    return success();
  }

  LogicalResult attention(CausalAttentionOp op) {
    const Buffer &qkv = in(op.getQkv());
    auto s = shapeOf(op.getQkv());
    int64_t bsz = s[0], t = s[1], c = s[2] / 3;
    int64_t h = *getConfigInt(op.getNumHeads()), d = c / h;
    T scale = T(1) / std::sqrt(static_cast<T>(d));
    Buffer &y = out(op.getResult());
    Buffer &lse = out(op.getLse()); // (B, H, T)
    std::vector<T> p(t);
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t hd = 0; hd < h; ++hd)
        for (int64_t i = 0; i < t; ++i) {
          const T *q = &qkv[(b * t + i) * 3 * c + hd * d];
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j <= i; ++j) {
            const T *kj = &qkv[(b * t + j) * 3 * c + c + hd * d];
            T dot = 0;
            for (int64_t e = 0; e < d; ++e)
              dot += q[e] * kj[e];
            p[j] = dot * scale;
            mx = std::max(mx, p[j]);
          }
          T sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            p[j] = std::exp(p[j] - mx);
            sum += p[j];
          }
          lse[(b * h + hd) * t + i] = mx + std::log(sum);
          T *yi = &y[(b * t + i) * c + hd * d];
          for (int64_t j = 0; j <= i; ++j) {
            const T *vj = &qkv[(b * t + j) * 3 * c + 2 * c + hd * d];
            for (int64_t e = 0; e < d; ++e)
              yi[e] += p[j] / sum * vj[e];
          }
        }
    return success();
  }

  LogicalResult crossEntropy(CrossEntropyOp op) {
    const Buffer &logits = in(op.getLogits()), &targets = in(op.getTargets());
    int64_t vp = shapeOf(op.getLogits()).back();
    int64_t v = *getConfigInt(op.getVocabSize());
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

  LogicalResult softmax(SoftmaxOp op) {
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

  LogicalResult causalMask(CausalMaskOp op) {
    const Buffer &x = in(op.getInput());
    int64_t t = shapeOf(op.getInput()).back();
    Buffer &y = out(op.getResult());
    for (size_t idx = 0; idx < x.size(); ++idx) {
      int64_t j = idx % t, i = (idx / t) % t;
      y[idx] = j > i ? -std::numeric_limits<T>::infinity() : x[idx];
    }
    return success();
  }

  LogicalResult reduce(ReduceOp op) {
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

  LogicalResult transpose(TransposeOp op) {
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

  LogicalResult slice(SliceOp op) {
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
  //===--------------------------------------------------------------------===//
  // Gradient ops
  //===--------------------------------------------------------------------===//

  LogicalResult embedGrad(EmbedGradOp op) {
    const Buffer &dy = in(op.getGrad()), &ids = in(op.getIds());
    int64_t c = shapeOf(op.getGrad())[2], t = shapeOf(op.getIds())[1];
    int64_t v = op.getVocabRows();
    Buffer &dwte = out(op.getWteGrad());
    Buffer &dwpe = out(op.getWpeGrad());
    for (int64_t r = 0; r < static_cast<int64_t>(ids.size()); ++r) {
      int64_t id = static_cast<int64_t>(ids[r]);
      if (id < 0 || id >= v)
        return op.emitOpError("token id ") << id << " at position " << r
                                           << " is outside the vocabulary [0, " << v << ")";
      for (int64_t i = 0; i < c; ++i) {
        dwte[id * c + i] += dy[r * c + i];
        dwpe[(r % t) * c + i] += dy[r * c + i];
      }
    }
    return success();
  }

  LogicalResult layernormGrad(LayerNormGradOp op) {
    layernormGradInto(in(op.getGrad()), in(op.getInput()), in(op.getWeight()),
                      shapeOf(op.getInput()).back(),
                      static_cast<T>(op.getEpsilon().convertToDouble()), out(op.getInputGrad()),
                      out(op.getWeightGrad()), out(op.getBiasGrad()));
    return success();
  }

  /// dx = residual + the layernorm's dx, and its copy rounded narrower.
  LogicalResult layernormGradAdd(LayerNormGradAddOp op) {
    Buffer &dx = out(op.getInputGrad());
    layernormGradInto(in(op.getGrad()), in(op.getInput()), in(op.getWeight()),
                      shapeOf(op.getInput()).back(),
                      static_cast<T>(op.getEpsilon().convertToDouble()), dx,
                      out(op.getWeightGrad()), out(op.getBiasGrad()));
    const Buffer &acc = in(op.getResidual());
    for (size_t i = 0; i < dx.size(); ++i)
      dx[i] += acc[i];
    if (op.getInputGradNarrow())
      out(op.getInputGradNarrow()) = dx; // roundResults rounds it
    return success();
  }

  void layernormGradInto(const Buffer &dy, const Buffer &x, const Buffer &w, int64_t c, T eps,
                         Buffer &dx, Buffer &dw, Buffer &db) {
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

  LogicalResult geluGrad(GeluGradOp op) {
    const Buffer &dy = in(op.getGrad()), &x = in(op.getInput());
    Buffer &dx = out(op.getResult());
    for (size_t i = 0; i < x.size(); ++i)
      dx[i] = dy[i] * geluDerivative(x[i]);
    return success();
  }

  static T geluDerivative(T x) {
    const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
    T th = std::tanh(k * (x + a * x * x * x)), sech2 = T(1) - th * th;
    return T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * k * (T(1) + T(3) * a * x * x);
  }

  LogicalResult softmaxGrad(SoftmaxGradOp op) {
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

  /// Recomputes everything from qkv (not from the given y and lse), so that
  /// it checks the kernels that trust them.
  template <typename AttentionGradOp>
  LogicalResult attentionGrad(AttentionGradOp op) {
    const Buffer &dy = in(op.getGrad()), &qkv = in(op.getQkv());
    auto s = shapeOf(op.getQkv());
    int64_t bsz = s[0], t = s[1], c = s[2] / 3;
    int64_t h = *getConfigInt(op.getNumHeads()), d = c / h;
    T scale = T(1) / std::sqrt(static_cast<T>(d));
    Buffer &dqkv = out(op.getResult());
    std::vector<T> p(t), dp(t);
    auto at = [&](int64_t b, int64_t j, int64_t part, int64_t hd) {
      return ((b * t + j) * 3 + part) * c + hd * d;
    };
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t hd = 0; hd < h; ++hd)
        for (int64_t i = 0; i < t; ++i) {
          // Recompute the probabilities of row i (as the forward).
          const T *q = &qkv[at(b, i, 0, hd)];
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j <= i; ++j) {
            const T *kj = &qkv[at(b, j, 1, hd)];
            T dot = 0;
            for (int64_t e = 0; e < d; ++e)
              dot += q[e] * kj[e];
            p[j] = dot * scale;
            mx = std::max(mx, p[j]);
          }
          T sum = 0;
          for (int64_t j = 0; j <= i; ++j)
            sum += (p[j] = std::exp(p[j] - mx));
          for (int64_t j = 0; j <= i; ++j)
            p[j] /= sum;
          // dv_j += p_j dy_i;  dp_j = dy_i . v_j;  ds = p (dp - p.dp).
          const T *dyi = &dy[(b * t + i) * c + hd * d];
          T pdp = 0;
          for (int64_t j = 0; j <= i; ++j) {
            const T *vj = &qkv[at(b, j, 2, hd)];
            T *dvj = &dqkv[at(b, j, 2, hd)];
            T acc = 0;
            for (int64_t e = 0; e < d; ++e) {
              dvj[e] += p[j] * dyi[e];
              acc += dyi[e] * vj[e];
            }
            dp[j] = acc;
            pdp += p[j] * acc;
          }
          T *dq = &dqkv[at(b, i, 0, hd)];
          for (int64_t j = 0; j <= i; ++j) {
            T ds = p[j] * (dp[j] - pdp) * scale;
            const T *kj = &qkv[at(b, j, 1, hd)];
            T *dkj = &dqkv[at(b, j, 1, hd)];
            for (int64_t e = 0; e < d; ++e) {
              dq[e] += ds * kj[e];
              dkj[e] += ds * q[e];
            }
          }
        }
    return success();
  }

  /// The sums are of the unrounded gradient, as the fused kernels take them.
  LogicalResult attentionGradSum(CausalAttentionGradSumOp op) {
    if (failed(attentionGrad(op)))
      return failure();
    addColumnSums(in(op.getResult()), out(op.getSum()));
    return success();
  }

  /// dlogits of a cross_entropy_grad or fp8_cross_entropy_grad `op` into
  /// `dl` (zeroed, of the logits' size).
  template <typename GradOp>
  LogicalResult crossEntropyGradInto(GradOp op, Buffer &dl) {
    const Buffer &dloss = in(op.getGrad()), &logits = in(op.getLogits());
    const Buffer &targets = in(op.getTargets());
    int64_t vp = shapeOf(op.getLogits()).back();
    int64_t v = *getConfigInt(op.getVocabSize());
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

  LogicalResult crossEntropyGrad(CrossEntropyGradOp op) {
    return crossEntropyGradInto(op, out(op.getResult()));
  }

  /// The gradient's codes at the scale of its bound |dloss| / P.
  LogicalResult fp8CrossEntropyGrad(Fp8CrossEntropyGradOp op) {
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

  //===--------------------------------------------------------------------===//
  // Optimizer and initialisation ops
  //===--------------------------------------------------------------------===//

  LogicalResult lrSchedule(LRScheduleOp op) {
    double step = static_cast<double>(in(op.getStep())[0]);
    double maxLr = op.getMaxLr().convertToDouble(), minLr = op.getMinLr().convertToDouble();
    double warmup = static_cast<double>(op.getWarmupSteps());
    double total = static_cast<double>(op.getTotalSteps());
    double lr = maxLr;
    if (op.getKind() != ScheduleKind::Constant) {
      if (step < warmup) {
        lr = maxLr * (step + 1) / warmup;
      } else {
        double r = total > warmup ? (step - warmup) / (total - warmup) : 1.0;
        r = std::min(1.0, std::max(0.0, r));
        lr = op.getKind() == ScheduleKind::Cosine
                 ? minLr + 0.5 * (1.0 + std::cos(M_PI * r)) * (maxLr - minLr)
                 : maxLr - r * (maxLr - minLr);
      }
    }
    out(op.getResult())[0] = static_cast<T>(lr);
    return success();
  }

  LogicalResult globalNorm(GlobalNormOp op) {
    T sum = 0;
    for (Value v : op.getInputs())
      for (T x : in(v))
        sum += x * x;
    out(op.getResult())[0] = std::sqrt(sum);
    return success();
  }

  LogicalResult adamw(AdamWOp op) {
    update(op, op.getParam(), op.getGrad(), op.getM(), op.getV(), op.getNewParam(),
           op.getNewM(), op.getNewV(), op.getWeightDecay().convertToDouble());
    return success();
  }

  /// gpt.adamw_multi: each parameter exactly as its own gpt.adamw.
  LogicalResult adamwMulti(AdamWMultiOp op) {
    for (size_t i = 0; i < op.getParams().size(); ++i)
      update(op, op.getParams()[i], op.getGrads()[i], op.getMs()[i], op.getVs()[i],
             op.getNewParams()[i], op.getNewMs()[i], op.getNewVs()[i],
             op.getWeightDecays()[i]);
    return success();
  }

  /// One AdamW update; `op` (gpt.adamw or gpt.adamw_multi) gives the shared
  /// scalars and hyper-parameters.
  template <typename AdamOp>
  void update(AdamOp op, Value param, Value grad, Value mv, Value vv, Value newParam,
              Value newM, Value newV, double weightDecay) {
    const Buffer &p = in(param), &g = in(grad);
    const Buffer &m = in(mv), &v = in(vv);
    T lr = in(op.getLr())[0], scale = in(op.getGradScale())[0];
    double t = static_cast<double>(in(op.getStep())[0]) + 1.0;
    T b1 = static_cast<T>(op.getBeta1().convertToDouble());
    T b2 = static_cast<T>(op.getBeta2().convertToDouble());
    T eps = static_cast<T>(op.getEpsilon().convertToDouble());
    T wd = static_cast<T>(weightDecay);
    T c1 = static_cast<T>(1.0 - std::pow(op.getBeta1().convertToDouble(), t));
    T c2 = static_cast<T>(1.0 - std::pow(op.getBeta2().convertToDouble(), t));
    Buffer &np = out(newParam);
    Buffer &nm = out(newM);
    Buffer &nv = out(newV);
    for (size_t i = 0; i < p.size(); ++i) {
      T gi = g[i] * scale;
      nm[i] = b1 * m[i] + (T(1) - b1) * gi;
      nv[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
      T update = (nm[i] / c1) / (std::sqrt(nv[i] / c2) + eps);
      np[i] = p[i] - lr * (update + wd * p[i]);
    }
  }

  LogicalResult randomNormal(RandomNormalOp op) {
    double seedValue = static_cast<double>(in(op.getSeed())[0]);
    if (seedValue != std::floor(seedValue) || std::fabs(seedValue) >= 16777216.0)
      return op.emitOpError("seed must be an integer below 2^24 in the interpreter");
    uint64_t seed = static_cast<uint64_t>(static_cast<int64_t>(seedValue));
    Buffer &y = out(op.getResult());
    T std = static_cast<T>(op.getStd().convertToDouble());
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = std * static_cast<T>(counterNormal(seed, op.getStream(), i));
    return success();
  }

  LogicalResult callOp(func::CallOp op) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, op.getCalleeAttr());
    if (!callee || callee.isExternal())
      return op.emitOpError("reference interpreter: cannot find @") << op.getCallee();
    std::vector<Buffer> args;
    for (Value v : op.getOperands())
      args.push_back(in(v));
    std::vector<Buffer> results;
    if (failed(Evaluator<T>().call(callee, std::move(args), results)))
      return failure();
    for (auto [r, buf] : llvm::zip(op.getResults(), results))
      env[r] = std::make_unique<Buffer>(std::move(buf));
    return success();
  }
};

} // namespace

FailureOr<std::vector<Tensor>> evaluate(func::FuncOp fn, ArrayRef<Tensor> args,
                                        Precision precision) {
  std::vector<Tensor> results;
  LogicalResult ok = precision == Precision::F64
                         ? Evaluator<double>().run(fn, args, results)
                         : Evaluator<float>().run(fn, args, results);
  if (failed(ok))
    return failure();
  return results;
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

std::vector<std::string> getArgumentNames(func::FuncOp fn) {
  std::vector<std::string> names;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    if (!name)
      name = fn.getArgAttrOfType<StringAttr>(i, kInputAttrName);
    names.push_back(name ? name.str() : "");
  }
  return names;
}


} // namespace gptc::reference
