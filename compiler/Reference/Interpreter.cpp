//===- Interpreter.cpp - reference interpreter for the gpt dialect -------===//
//
// Straightforward loops, written for clarity over speed: each op reads its
// operands from an environment of dense buffers and writes its results.
// This is the driver: it runs functions, calls and fusions, rounds narrow
// results, and dispatches each op to its family, the <Family>.cpp beside
// the kernel family in compiler/Codegen/Kernels/ (README.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/Reference/Interpreter.h"
#include "compiler/Reference/Evaluator.h"

#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

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

double roundToFormat(double x, int digits, int minExp, double maxFinite) {
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

bool isNarrow(Type elt) { return elt.isBF16() || elt.isF16(); }

double asStored(Type elt, double x) { return isNarrow(elt) ? roundTo(elt, x) : x; }

//===----------------------------------------------------------------------===//
// Evaluator: the driver
//===----------------------------------------------------------------------===//

template <typename T>
LogicalResult Evaluator<T>::run(func::FuncOp fn, ArrayRef<Tensor> args,
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

template <typename T>
LogicalResult Evaluator<T>::call(func::FuncOp fn, std::vector<Buffer> args,
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

/// Narrow results hold values of their format, as stored tensors would.
template <typename T>
void Evaluator<T>::roundResults(Operation *op) {
  for (Value r : op->getResults())
    roundAsStored(*env[r], llvm::cast<ShapedType>(r.getType()).getElementType());
}

/// The body op by op on whole tensors, each rounded: fusion changes where
/// values live, not what they are.
template <typename T>
LogicalResult Evaluator<T>::fusion(FusionOp op) {
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

template <typename T>
LogicalResult Evaluator<T>::callOp(func::CallOp op) {
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

/// Each op to its family's member (Evaluator.h); an op no family lists is
/// elementwise, as in codegen's registry.
template <typename T>
LogicalResult Evaluator<T>::execute(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // Gemm.cpp
      .template Case<LinearOp>([&](auto o) { return linear(o); })
      .template Case<MatmulOp>([&](auto o) { return matmul(o); })
      .template Case<Fp8MatmulOp>([&](auto o) { return fp8Matmul(o); })
      .template Case<ScaledMatmulOp>([&](auto o) { return scaledMatmul(o); })
      .template Case<ScaledMatmulGeluFp8Op>([&](auto o) { return scaledMatmulGeluFp8(o); })
      // Embedding.cpp
      .template Case<EmbedOp>([&](auto o) { return embed(o); })
      .template Case<EmbedGradOp>([&](auto o) { return embedGrad(o); })
      // LayerNorm.cpp
      .template Case<LayerNormOp>([&](auto o) { return layernorm(o); })
      .template Case<AddLayerNormFp8Op>([&](auto o) { return addLayernormFp8(o); })
      .template Case<LayerNormGradOp>([&](auto o) { return layernormGrad(o); })
      // Attention.cpp
      .template Case<CausalAttentionOp>([&](auto o) { return attention(o); })
      .template Case<CausalAttentionGradOp>([&](auto o) { return attentionGrad(o); })
      // CrossEntropy.cpp
      .template Case<CrossEntropyOp>([&](auto o) { return crossEntropy(o); })
      .template Case<CrossEntropyGradOp>([&](auto o) { return crossEntropyGrad(o); })
      .template Case<Fp8CrossEntropyGradOp>([&](auto o) { return fp8CrossEntropyGrad(o); })
      // Reduction.cpp
      .template Case<ReduceOp>([&](auto o) { return reduce(o); })
      .template Case<GlobalNormOp>([&](auto o) { return globalNorm(o); })
      // Fp8.cpp
      .template Case<Fp8ScaleOp>([&](auto o) { return fp8ScaleOf(o); })
      .template Case<Fp8DelayedScalesOp>([&](auto o) { return fp8DelayedScales(o); })
      .template Case<Fp8QuantizeOp>([&](auto o) { return fp8Quantize(o); })
      .template Case<Fp8CastTransposeOp>([&](auto o) { return fp8CastTranspose(o); })
      .template Case<Fp8CastTransposeSumOp>([&](auto o) { return fp8CastTransposeSum(o); })
      .template Case<Fp8TransposeOp>([&](auto o) { return fp8Transpose(o); })
      // AdamW.cpp
      .template Case<AdamWOp>([&](auto o) { return adamw(o); })
      .template Case<AdamWMultiOp>([&](auto o) { return adamwMulti(o); })
      .template Case<LRScheduleOp>([&](auto o) { return lrSchedule(o); })
      // Random.cpp
      .template Case<RandomNormalOp>([&](auto o) { return randomNormal(o); })
      // Here: bodies of other functions and of fusions.
      .template Case<func::CallOp>([&](auto o) { return callOp(o); })
      .template Case<FusionOp>([&](auto o) { return fusion(o); })
      .template Case<RepeatOp>([&](auto o) {
        return o.emitOpError("reference interpreter: instantiate the model "
                             "first (gpt-instantiate-model)");
      })
      .Default([&](Operation *o) { return elementwise(o); }); // Elementwise.cpp
}

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
