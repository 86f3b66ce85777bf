//===- Evaluator.h - the reference interpreter's evaluator ------*- C++ -*-===//
//
// The state of evaluating one function (the tensor table of dense buffers)
// and the helpers more than one op family uses, below the families: each
// <Family>.cpp defines its ops' members (the reference beside the kernels of
// compiler/Codegen/Kernels/<Family>.cpp) and instantiates them for double
// and float; the driver (Interpreter.cpp) runs functions and dispatches each
// op to its family. Families include this header, never the driver.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_REFERENCE_EVALUATOR_H
#define GPTC_COMPILER_REFERENCE_EVALUATOR_H

#include "compiler/Reference/Interpreter.h"

#include "dialects/GPT/IR/GPTOps.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

namespace gptc::reference {

using namespace mlir;
using namespace mlir::gpt;

/// Expands M(T) for each element type evaluate() runs in: a family's file
/// instantiates its ops' members with it.
#define GPTC_REFERENCE_ELEMENT_TYPES(M) M(double) M(float)

/// Rounds to a binary format with `digits` significant bits, smallest
/// normal exponent `minExp` (as frexp reports it) and largest finite value.
double roundToFormat(double x, int digits, int minExp, double maxFinite);

/// The formats whose stored values the interpreter rounds (bf16, f16):
/// f32 storage is exact in fp64 mode, and fp32 mode computes in f32.
bool isNarrow(Type elt);

/// x as a tensor of element type `elt` holds it.
double asStored(Type elt, double x);

inline std::vector<int64_t> shapeOf(Value v) {
  auto shape = llvm::cast<ShapedType>(v.getType()).getShape();
  return {shape.begin(), shape.end()};
}

/// The number a configuration attribute of `op` holds, or an error naming
/// it: a #gpt.cfg<"..."> is resolved only by instantiating the model.
inline FailureOr<int64_t> configNumber(Operation *op, Attribute value, StringRef name) {
  if (std::optional<int64_t> n = getConfigInt(value))
    return *n;
  return op->emitError() << name << " is " << value
                         << ", not a number: instantiate the model first "
                            "(gpt-instantiate-model)";
}

inline int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

inline std::vector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Element type T (double or float) is the precision of every arithmetic
/// operation, accumulations included.
template <typename T>
class Evaluator {
public:
  using Buffer = std::vector<T>;

  LogicalResult run(func::FuncOp fn, ArrayRef<Tensor> args, std::vector<Tensor> &results);

  /// Runs `fn` on buffers that already match its argument types.
  LogicalResult call(func::FuncOp fn, std::vector<Buffer> args, std::vector<Buffer> &results);

private:
  //===--------------------------------------------------------------------===//
  // The driver (Interpreter.cpp)
  //===--------------------------------------------------------------------===//

  LogicalResult execute(Operation *op);
  void roundResults(Operation *op);
  LogicalResult fusion(FusionOp op);
  LogicalResult callOp(func::CallOp op);

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

  //===--------------------------------------------------------------------===//
  // Helpers more than one family uses
  //===--------------------------------------------------------------------===//

  /// `values` as a tensor of element type `elt` would store them.
  static void roundAsStored(Buffer &values, Type elt) {
    if (isNarrow(elt))
      for (T &x : values)
        x = static_cast<T>(roundTo(elt, x));
  }

  static T gelu(T x) {
    const T k = static_cast<T>(0.7978845608028654); // sqrt(2 / pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }

  static T geluDerivative(T x) {
    const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
    T th = std::tanh(k * (x + a * x * x * x)), sech2 = T(1) - th * th;
    return T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * k * (T(1) + T(3) * a * x * x);
  }

  /// sums[c] += x[..., c] over every leading index (sums.size() columns).
  static void addColumnSums(const Buffer &x, Buffer &sums) {
    for (size_t i = 0; i < x.size(); ++i)
      sums[i % sums.size()] += x[i];
  }

  // FP8 scales and codes (Fp8.cpp), which the layernorm, GEMM and loss
  // references of FP8 ops share.
  static double scaleOf(double amax, Fp8Format format);
  static double amaxOf(const Buffer &x);
  static Buffer quantize(const Buffer &x, Fp8Format format, double s);
  static Buffer quantized(const Buffer &x, Fp8Format format);
  void record(Value history, Value recorded, const Buffer &values);
  Buffer transposedOf(const Buffer &q, Value x);

  //===--------------------------------------------------------------------===//
  // The families: compiler/Codegen/Kernels/<Family>.cpp's ops
  //===--------------------------------------------------------------------===//

  // Elementwise.cpp: the driver's fallback, as in codegen's registry.
  LogicalResult elementwise(Operation *op);
  template <typename OpT, typename F> LogicalResult unary(OpT op, F f);
  template <typename OpT, typename F> LogicalResult binary(OpT op, F f);
  LogicalResult biasAdd(BiasAddOp op);
  LogicalResult softmax(SoftmaxOp op);
  LogicalResult causalMask(CausalMaskOp op);
  LogicalResult transpose(TransposeOp op);
  LogicalResult slice(SliceOp op);
  LogicalResult geluGrad(GeluGradOp op);
  LogicalResult softmaxGrad(SoftmaxGradOp op);

  // Gemm.cpp
  LogicalResult linear(LinearOp op);
  LogicalResult matmul(MatmulOp op);
  LogicalResult fp8Matmul(Fp8MatmulOp op);
  LogicalResult scaledMatmul(ScaledMatmulOp op);
  LogicalResult scaledMatmulGeluFp8(ScaledMatmulGeluFp8Op op);
  void matmulInto(Value lhs, Value rhs, bool ta, bool tb, Value result, Buffer &y,
                  std::pair<const Buffer *, const Buffer *> values = {});
  void scaledProductInto(Value lhs, Value lhsScale, Value rhs, Value rhsScale, bool ta, bool tb,
                         Value bias, Value result, Buffer &y);

  // Embedding.cpp
  LogicalResult embed(EmbedOp op);
  LogicalResult embedGrad(EmbedGradOp op);

  // LayerNorm.cpp
  LogicalResult layernorm(LayerNormOp op);
  LogicalResult addLayernormFp8(AddLayerNormFp8Op op);
  LogicalResult layernormGrad(LayerNormGradOp op);
  Buffer &residualSum(Value lhs, Value rhs, Value result);

  // Attention.cpp
  LogicalResult attention(CausalAttentionOp op);
  LogicalResult attentionGrad(CausalAttentionGradOp op);

  // CrossEntropy.cpp
  LogicalResult crossEntropy(CrossEntropyOp op);
  LogicalResult crossEntropyGrad(CrossEntropyGradOp op);
  LogicalResult fp8CrossEntropyGrad(Fp8CrossEntropyGradOp op);
  template <typename GradOp> LogicalResult crossEntropyGradInto(GradOp op, Buffer &dl);

  // Reduction.cpp
  LogicalResult reduce(ReduceOp op);
  LogicalResult globalNorm(GlobalNormOp op);

  // Fp8.cpp
  LogicalResult fp8ScaleOf(Fp8ScaleOp op);
  LogicalResult fp8DelayedScales(Fp8DelayedScalesOp op);
  LogicalResult fp8Quantize(Fp8QuantizeOp op);
  LogicalResult fp8CastTranspose(Fp8CastTransposeOp op);
  LogicalResult fp8CastTransposeSum(Fp8CastTransposeSumOp op);
  LogicalResult fp8Transpose(Fp8TransposeOp op);
  static double fp8Scale(const Buffer &x, Fp8Format format);
  const Buffer &fp8Source(Value x, bool withGelu, Buffer &storage);
  const Buffer &fp8Source(Value x, Value pre, bool withGelu, Buffer &storage,
                          Buffer *exact = nullptr);
  void shiftInto(const Buffer &history, Value shifted);
  template <typename CastOp> void castBothLayouts(CastOp op, const Buffer &values);

  // AdamW.cpp
  LogicalResult adamw(AdamWOp op);
  LogicalResult adamwMulti(AdamWMultiOp op);
  LogicalResult lrSchedule(LRScheduleOp op);
  template <typename AdamOp>
  void update(AdamOp op, Value param, Value grad, Value mv, Value vv, Value newParam,
              Value newM, Value newV, double weightDecay);

  // Random.cpp
  LogicalResult randomNormal(RandomNormalOp op);
};

} // namespace gptc::reference

#endif // GPTC_COMPILER_REFERENCE_EVALUATOR_H
