//===- GPTOps.cpp - gpt dialect shape rules and verifiers ----------------===//
//
// Each op's shape rule lives in its inferReturnTypes: it verifies parsed IR
// (through InferTypeOpInterface's trait verifier) and re-derives result
// types when gpt-instantiate-model makes the argument shapes static. Rules
// accept dynamic (`?`) dimensions and check only what is known.
//
//===----------------------------------------------------------------------===//

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// Emits "'gpt.<op>' op <message>" at `loc` (when the caller wants errors).
template <typename... Args>
LogicalResult shapeError(std::optional<Location> loc, StringRef op,
                         Args &&...args) {
  return emitOptionalError(loc, "'gpt.", op, "' op ",
                           std::forward<Args>(args)...);
}

bool isDyn(int64_t d) { return ShapedType::isDynamic(d); }
bool compatible(int64_t a, int64_t b) { return isDyn(a) || isDyn(b) || a == b; }
/// The more precise of two compatible dimensions.
int64_t merge(int64_t a, int64_t b) { return isDyn(a) ? b : a; }

std::string dimStr(int64_t d) { return isDyn(d) ? "?" : std::to_string(d); }

/// Whether `t` is the float type `of` or a strictly narrower float: a value
/// computed in `of` and rounded once when stored as `t`, or a `t` widened
/// exactly as it is read (not bf16 <-> f16).
bool sameOrNarrowerFloat(Type t, Type of) {
  auto a = llvm::dyn_cast<FloatType>(t), b = llvm::dyn_cast<FloatType>(of);
  return a && b && (a == b || a.getWidth() < b.getWidth());
}

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

RankedTensorType rtt(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

} // namespace

//===----------------------------------------------------------------------===//
// EmbedOp
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto wte = rtt(adaptor.getWte()), wpe = rtt(adaptor.getWpe());
  auto ids = rtt(adaptor.getIds());
  if (wte.getRank() != 2 || wpe.getRank() != 2 || ids.getRank() != 2)
    return shapeError(loc, "embed", "expects wte (V, C), wpe (maxT, C) and ids "
                                    "(B, T), got ranks ",
                      wte.getRank(), ", ", wpe.getRank(), ", ", ids.getRank());
  if (wte.getElementType() != wpe.getElementType())
    return shapeError(loc, "embed", "wte and wpe must have one element type");
  int64_t c = wte.getDimSize(1), cp = wpe.getDimSize(1);
  if (!compatible(c, cp))
    return shapeError(loc, "embed", "wte has ", dimStr(c), " channels but wpe has ",
                      dimStr(cp));
  int64_t maxT = wpe.getDimSize(0), t = ids.getDimSize(1);
  if (!isDyn(maxT) && !isDyn(t) && t > maxT)
    return shapeError(loc, "embed", "sequence length ", t,
                      " exceeds the ", maxT, " rows of wpe");
  results.push_back(tensorOf({ids.getDimSize(0), t, merge(c, cp)},
                             wte.getElementType()));
  return success();
}

/// The inferred type, or its shape in a narrower float type: the value is
/// computed in the inferred type and rounded once when stored.
static bool sameOrNarrower(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  auto want = llvm::dyn_cast<RankedTensorType>(inferred[0]);
  auto got = llvm::dyn_cast<RankedTensorType>(actual[0]);
  return want && got && succeeded(verifyCompatibleShape(want.getShape(), got.getShape())) &&
         sameOrNarrowerFloat(got.getElementType(), want.getElementType());
}

bool EmbedOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return sameOrNarrower(inferred, actual);
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  auto w = rtt(adaptor.getWeight()), b = rtt(adaptor.getBias());
  if (x.getRank() < 1 || w.getRank() != 1 || b.getRank() != 1)
    return shapeError(loc, "layernorm",
                      "expects input (..., C), weight (C) and bias (C)");
  int64_t c = x.getDimSize(x.getRank() - 1);
  if (!compatible(c, w.getDimSize(0)) || !compatible(c, b.getDimSize(0)))
    return shapeError(loc, "layernorm", "normalises ", dimStr(c),
                      " channels but weight has ", dimStr(w.getDimSize(0)),
                      " and bias ", dimStr(b.getDimSize(0)));
  if (b.getElementType() != w.getElementType() ||
      !sameOrNarrowerFloat(x.getElementType(), w.getElementType()))
    return shapeError(loc, "layernorm",
                      "weight and bias must have one float type, the input it or a narrower one");
  results.push_back(x);
  return success();
}

/// The inferred type (the input's), or its shape in a narrower float type.
bool LayerNormOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return sameOrNarrower(inferred, actual);
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

/// The rule of gpt.linear: (..., N).
static FailureOr<RankedTensorType> inferLinear(std::optional<Location> loc, StringRef name,
                                               Value input, Value weight, Value bias) {
  auto x = rtt(input), w = rtt(weight);
  if (x.getRank() < 1 || w.getRank() != 2)
    return shapeError(loc, name, "expects input (..., K) and weight (N, K)");
  int64_t k = x.getDimSize(x.getRank() - 1), n = w.getDimSize(0);
  if (!compatible(k, w.getDimSize(1)))
    return shapeError(loc, name, "input has ", dimStr(k),
                      " features but weight (N, K) has K = ",
                      dimStr(w.getDimSize(1)));
  if (w.getElementType() != x.getElementType())
    return shapeError(loc, name, "input and weight must have one element type");
  if (bias) {
    auto b = rtt(bias);
    if (b.getRank() != 1 || !compatible(b.getDimSize(0), n))
      return shapeError(loc, name, "bias must be (N) with N = ", dimStr(n));
    if (b.getElementType() != x.getElementType())
      return shapeError(loc, name, "bias must have the input's element type");
    n = merge(n, b.getDimSize(0));
  }
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = n;
  return tensorOf(shape, x.getElementType());
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> y =
      inferLinear(loc, "linear", adaptor.getInput(), adaptor.getWeight(), adaptor.getBias());
  if (failed(y))
    return failure();
  results.push_back(*y);
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

/// The rule of gpt.matmul, shared by the FP8 GEMMs (`name`).
/// The result of op(lhs) op(rhs), in the lhs's element type; with
/// `oneElementType` the operands must share it (gpt.scaled_matmul's FP8
/// operands may differ).
static FailureOr<RankedTensorType> inferMatmul(std::optional<Location> loc, StringRef name,
                                               Value lhs, Value rhs, bool ta, bool tb,
                                               bool oneElementType = true) {
  auto a = rtt(lhs), b = rtt(rhs);
  int64_t rank = a.getRank();
  if (rank < 2)
    return shapeError(loc, name, "lhs must have rank >= 2, got ", rank);
  if (b.getRank() != 2 && b.getRank() != rank)
    return shapeError(loc, name, "rhs must have rank 2 or the lhs rank (",
                      rank, "), got ", b.getRank());
  if (oneElementType && a.getElementType() != b.getElementType())
    return shapeError(loc, name, "lhs and rhs must have one element type");
  SmallVector<int64_t> shape(a.getShape().drop_back(2));
  for (int64_t i = 0, e = b.getRank() - 2; i < e; ++i) {
    if (!compatible(shape[i], b.getDimSize(i)))
      return shapeError(loc, name, "batch dimension ", i, " differs: ",
                        dimStr(shape[i]), " vs ", dimStr(b.getDimSize(i)));
    shape[i] = merge(shape[i], b.getDimSize(i));
  }
  int64_t ar = rank - 2, br = b.getRank() - 2;
  int64_t m = a.getDimSize(ta ? ar + 1 : ar), ka = a.getDimSize(ta ? ar : ar + 1);
  int64_t kb = b.getDimSize(tb ? br + 1 : br), n = b.getDimSize(tb ? br : br + 1);
  if (!compatible(ka, kb))
    return shapeError(loc, name, "contraction sizes differ: lhs K = ",
                      dimStr(ka), ", rhs K = ", dimStr(kb));
  shape.push_back(m);
  shape.push_back(n);
  return tensorOf(shape, a.getElementType());
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> y =
      inferMatmul(loc, "matmul", adaptor.getLhs(), adaptor.getRhs(), adaptor.getTransposeLhs(),
                  adaptor.getTransposeRhs());
  if (failed(y))
    return failure();
  results.push_back(*y);
  return success();
}

//===----------------------------------------------------------------------===//
// Fp8MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult Fp8MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> y =
      inferMatmul(loc, "fp8_matmul", adaptor.getLhs(), adaptor.getRhs(),
                  adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(y))
    return failure();
  results.push_back(*y);
  return success();
}

LogicalResult Fp8MatmulOp::verify() {
  if (getLhsFormat() == Fp8Format::E5M2 && getRhsFormat() == Fp8Format::E5M2)
    return emitOpError("at most one operand may be e5m2 (the tensor cores take e4m3 x e4m3, "
                       "e5m2 x e4m3 and e4m3 x e5m2)");
  return success();
}

//===----------------------------------------------------------------------===//
// Fp8QuantizeOp
//===----------------------------------------------------------------------===//

static Type fp8Type(MLIRContext *ctx, Fp8Format format) {
  if (format == Fp8Format::E4M3)
    return Float8E4M3FNType::get(ctx);
  return Float8E5M2Type::get(ctx);
}

LogicalResult Fp8QuantizeOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  SmallVector<int64_t> shape(x.getShape());
  if (adaptor.getTranspose()) {
    if (x.getRank() != 2)
      return shapeError(loc, "fp8_quantize", "transpose takes a rank-2 input, got rank ",
                        x.getRank());
    std::swap(shape[0], shape[1]);
  }
  results.push_back(RankedTensorType::get(shape, fp8Type(ctx, adaptor.getFormat())));
  if (adaptor.getHistory())
    results.push_back(adaptor.getHistory().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Fp8CastTransposeOp
//===----------------------------------------------------------------------===//

/// `x` (rank >= 2) seen as (rows, its last dimension), transposed, of
/// element type `e`.
static RankedTensorType transposedMatrix(RankedTensorType x, Type e) {
  int64_t cols = x.getShape().back(), rows = 1;
  for (int64_t d : x.getShape().drop_back())
    rows = isDyn(d) || isDyn(rows) ? ShapedType::kDynamic : rows * d;
  return RankedTensorType::get({cols, rows}, e);
}

LogicalResult Fp8CastTransposeOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  if (x.getRank() < 2)
    return shapeError(loc, "fp8_cast_transpose", "input must have rank >= 2, got ", x.getRank());
  Type e = fp8Type(ctx, adaptor.getFormat());
  results.push_back(RankedTensorType::get(x.getShape(), e));
  results.push_back(transposedMatrix(x, e));
  if (adaptor.getHistory())
    results.push_back(adaptor.getHistory().getType());
  return success();
}

LogicalResult Fp8CastTransposeOp::verify() {
  Type rounded = getRoundedToAttr() ? getRoundedToAttr().getValue() : Type();
  if (!rounded)
    return success();
  // The types a gpt.cast narrows to, as the kernels and the interpreter
  // round them.
  Type elt = rtt(getInput()).getElementType();
  if (!(rounded.isBF16() || rounded.isF16()) ||
      rounded.getIntOrFloatBitWidth() >= elt.getIntOrFloatBitWidth())
    return emitOpError("rounded_to must be bf16 or f16, narrower than the input's ")
           << elt << ", got " << rounded;
  if (getGelu())
    return emitOpError("rounded_to and gelu cannot be combined");
  return success();
}

//===----------------------------------------------------------------------===//
// Fp8CastTransposeSumOp
//===----------------------------------------------------------------------===//

LogicalResult Fp8CastTransposeSumOp::inferReturnTypes(MLIRContext *ctx,
                                                      std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  if (x.getRank() < 2)
    return shapeError(loc, "fp8_cast_transpose_sum", "input must have rank >= 2, got ",
                      x.getRank());
  Type e = fp8Type(ctx, adaptor.getFormat());
  results.push_back(RankedTensorType::get(x.getShape(), e));
  results.push_back(transposedMatrix(x, e));
  results.push_back(RankedTensorType::get({x.getShape().back()}, x.getElementType()));
  if (adaptor.getHistory())
    results.push_back(adaptor.getHistory().getType());
  return success();
}

/// A GELU gradient's `pre` is of its gradient's type.
static LogicalResult verifyGeluGradPre(Operation *op, Value input, Value pre) {
  if (pre && pre.getType() != input.getType())
    return op->emitOpError("gelu_grad's pre-activation must have the input's type ")
           << input.getType() << ", got " << pre.getType();
  return success();
}

LogicalResult Fp8CastTransposeSumOp::verify() {
  return verifyGeluGradPre(*this, getInput(), getPre());
}

//===----------------------------------------------------------------------===//
// Fp8ScaleOp
//===----------------------------------------------------------------------===//

Fp8History mlir::gpt::getFp8History(Operation *op) {
  if (auto scaling = llvm::dyn_cast<Fp8ScalingOpInterface>(op))
    return {scaling.getAmaxHistory(), scaling.getRecordedHistory()};
  return {};
}

// Fp8ScalingOpInterface where an op's names differ from the defaults'.
Value Fp8ScaleOp::getRecordedHistory() { return getShifted(); }
Type Fp8CastTransposeOp::getRoundedType() {
  return getRoundedTo() ? *getRoundedTo() : Type();
}
Type AddLayerNormFp8Op::getRoundedType() { return getRoundedTo(); }
Fp8Format Fp8CrossEntropyGradOp::getFp8Format() { return Fp8Format::E5M2; }
Value Fp8CrossEntropyGradOp::getFp8Scale() { return {}; } // |dloss| / P, inside
Value Fp8CrossEntropyGradOp::getAmaxHistory() { return {}; }
Value Fp8CrossEntropyGradOp::getRecordedHistory() { return {}; }

LogicalResult Fp8ScaleOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                           Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
  results.assign({scalar, scalar});
  if (adaptor.getHistory())
    results.push_back(adaptor.getHistory().getType());
  return success();
}

LogicalResult Fp8ScaleOp::verify() {
  if (getPre() && getGelu())
    return emitOpError("takes gelu or gelu_grad, not both");
  if (failed(verifyGeluGradPre(*this, getInput(), getPre())))
    return failure();
  if (Value h = getHistory()) {
    auto type = rtt(h);
    if (!type.hasStaticShape() || type.getNumElements() < 1)
      return emitOpError("history must hold at least one amax, got ") << type;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Fp8DelayedScalesOp
//===----------------------------------------------------------------------===//

/// `(e4m3 %h0, e5m2 %h1, ...)`: each history with its format.
static ParseResult parseFp8Histories(OpAsmParser &parser,
                                     SmallVectorImpl<OpAsmParser::UnresolvedOperand> &histories,
                                     DenseI32ArrayAttr &formats) {
  SmallVector<int32_t> codes;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
        StringRef keyword;
        SMLoc at = parser.getCurrentLocation();
        if (parser.parseKeyword(&keyword))
          return failure();
        std::optional<Fp8Format> format = symbolizeFp8Format(keyword);
        if (!format)
          return parser.emitError(at, "expected an FP8 format (e4m3 or e5m2), got '")
                 << keyword << "'";
        codes.push_back(static_cast<int32_t>(*format));
        return parser.parseOperand(histories.emplace_back());
      }))
    return failure();
  formats = DenseI32ArrayAttr::get(parser.getContext(), codes);
  return success();
}

static void printFp8Histories(OpAsmPrinter &printer, Operation *, OperandRange histories,
                              DenseI32ArrayAttr formats) {
  printer << "(";
  for (auto [i, h] : llvm::enumerate(histories)) {
    if (i)
      printer << ", ";
    std::optional<Fp8Format> format;
    if (i < static_cast<size_t>(formats.size()))
      format = symbolizeFp8Format(static_cast<uint32_t>(formats[i]));
    printer << (format ? stringifyFp8Format(*format) : StringRef("invalid")) << " " << h;
  }
  printer << ")";
}

LogicalResult Fp8DelayedScalesOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &results) {
  auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
  size_t n = adaptor.getHistories().size();
  results.assign(2 * n, scalar);
  for (Value h : adaptor.getHistories())
    results.push_back(h.getType());
  return success();
}

LogicalResult Fp8DelayedScalesOp::verify() {
  size_t n = getHistories().size();
  if (n == 0)
    return emitOpError("needs at least one history");
  if (getFormats().size() != static_cast<int64_t>(n))
    return emitOpError("needs one format per history (") << n << "), got "
                                                          << getFormats().size();
  for (auto [i, code] : llvm::enumerate(getFormats()))
    if (!symbolizeFp8Format(static_cast<uint32_t>(code)))
      return emitOpError("format ") << i << " is not an FP8 format: " << code;
  llvm::SmallDenseMap<Value, size_t> seen;
  for (auto [i, h] : llvm::enumerate(getHistories())) {
    // Each shifted history may take its history's bytes: one entry each.
    if (auto [it, inserted] = seen.try_emplace(h, i); !inserted)
      return emitOpError("history ") << i << " repeats history " << it->second;
    auto type = rtt(h);
    if (!type.hasStaticShape() || type.getNumElements() < 1)
      return emitOpError("history ") << i << " must hold at least one amax, got " << type;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult ScaledMatmulOp::verify() {
  if (llvm::isa<Float8E5M2Type>(rtt(getLhs()).getElementType()) &&
      llvm::isa<Float8E5M2Type>(rtt(getRhs()).getElementType()))
    return emitOpError("at most one operand may be e5m2 (the tensor cores take e4m3 x e4m3, "
                       "e5m2 x e4m3 and e4m3 x e5m2)");
  FailureOr<RankedTensorType> y =
      inferMatmul(getLoc(), "scaled_matmul", getLhs(), getRhs(), getTransposeLhs(),
                  getTransposeRhs(), /*oneElementType=*/false);
  if (failed(y))
    return failure();
  if (failed(verifyCompatibleShape(y->getShape(), rtt(getResult()).getShape()))) {
    InFlightDiagnostic d = emitOpError("result ");
    d << rtt(getResult()) << " does not have the product's shape ";
    llvm::interleave(y->getShape(), d, [&](int64_t v) { d << dimStr(v); }, "x");
    return d;
  }
  if (Value bias = getBias()) {
    RankedTensorType b = rtt(bias), r = rtt(getResult());
    if (b.getRank() != 1 || !compatible(b.getDimSize(0), r.getShape().back()))
      return emitOpError("bias ") << b << " is not one value per column of the result " << r;
    if (b.getElementType() != r.getElementType())
      return emitOpError("bias ") << b << " must have the result's element type "
                                   << r.getElementType();
  }
  if (Value acc = getAccumulate()) {
    if (acc.getType() != getResult().getType())
      return emitOpError("accumulate ") << acc.getType() << " must have the result's type "
                                         << getResult().getType();
    if (getBias())
      return emitOpError("takes a bias or an accumulator, not both");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ScaledMatmulGeluFp8Op
//===----------------------------------------------------------------------===//

LogicalResult ScaledMatmulGeluFp8Op::verify() {
  if (llvm::isa<Float8E5M2Type>(rtt(getLhs()).getElementType()) &&
      llvm::isa<Float8E5M2Type>(rtt(getRhs()).getElementType()))
    return emitOpError("at most one operand may be e5m2 (the tensor cores take e4m3 x e4m3, "
                       "e5m2 x e4m3 and e4m3 x e5m2)");
  FailureOr<RankedTensorType> y =
      inferMatmul(getLoc(), "scaled_matmul_gelu_fp8", getLhs(), getRhs(), /*transposeLhs=*/false,
                  /*transposeRhs=*/true, /*oneElementType=*/false);
  if (failed(y))
    return failure();
  RankedTensorType pre = rtt(getPre()), q = rtt(getResult());
  if (failed(verifyCompatibleShape(y->getShape(), pre.getShape())) ||
      failed(verifyCompatibleShape(pre.getShape(), q.getShape()))) {
    InFlightDiagnostic d = emitOpError("pre ");
    d << pre << " and result " << q << " must have the product's shape ";
    llvm::interleave(y->getShape(), d, [&](int64_t v) { d << dimStr(v); }, "x");
    return d;
  }
  bool e5m2 = getFormat() == Fp8Format::E5M2;
  if (e5m2 != llvm::isa<Float8E5M2Type>(q.getElementType()))
    return emitOpError("result must hold ") << stringifyFp8Format(getFormat()) << " codes, got "
                                            << q;
  if (Value bias = getBias()) {
    RankedTensorType b = rtt(bias);
    if (b.getRank() != 1 || !compatible(b.getDimSize(0), pre.getShape().back()) ||
        b.getElementType() != pre.getElementType())
      return emitOpError("bias ") << b << " must be one value per column of pre " << pre
                                   << ", of its element type";
  }
  return success(); // the history's checks: Fp8ScalingOpInterface
}

//===----------------------------------------------------------------------===//
// BiasAddOp
//===----------------------------------------------------------------------===//

LogicalResult BiasAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput()), b = rtt(adaptor.getBias());
  if (x.getRank() < 1 || b.getRank() != 1)
    return shapeError(loc, "bias_add", "expects input (..., N) and bias (N)");
  if (!compatible(x.getShape().back(), b.getDimSize(0)))
    return shapeError(loc, "bias_add", "input has ", dimStr(x.getShape().back()),
                      " columns but bias has ", dimStr(b.getDimSize(0)));
  if (x.getElementType() != b.getElementType())
    return shapeError(loc, "bias_add", "input and bias must have one element type");
  results.push_back(x);
  return success();
}

//===----------------------------------------------------------------------===//
// CausalAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult CausalAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto qkv = rtt(adaptor.getQkv());
  if (qkv.getRank() != 3)
    return shapeError(loc, "causal_attention", "expects qkv (B, T, 3C), got rank ",
                      qkv.getRank());
  int64_t c3 = qkv.getDimSize(2), c = ShapedType::kDynamic;
  if (!isDyn(c3)) {
    if (c3 % 3 != 0)
      return shapeError(loc, "causal_attention", "last dimension ", c3,
                        " is not 3C");
    c = c3 / 3;
  }
  std::optional<int64_t> heads = getConfigInt(adaptor.getNumHeads());
  if (heads && *heads < 1)
    return shapeError(loc, "causal_attention", "num_heads must be positive");
  if (heads && !isDyn(c) && c % *heads != 0)
    return shapeError(loc, "causal_attention", c, " channels do not split into ",
                      *heads, " heads");
  results.push_back(
      tensorOf({qkv.getDimSize(0), qkv.getDimSize(1), c}, qkv.getElementType()));
  // The log-sum-exp of each (b, h, i) row: fp32 whatever the compute type.
  int64_t h = heads ? *heads : ShapedType::kDynamic;
  results.push_back(tensorOf({qkv.getDimSize(0), h, qkv.getDimSize(1)},
                             Float32Type::get(qkv.getContext())));
  return success();
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

/// The rules shared by gpt.cross_entropy and its gradient: logits
/// (..., Vp), targets (...), 1 <= vocab_size <= Vp.
static LogicalResult checkLogitsAndTargets(std::optional<Location> loc, StringRef op,
                                           RankedTensorType logits, RankedTensorType targets,
                                           Attribute vocabSize) {
  if (logits.getRank() < 1 || targets.getRank() != logits.getRank() - 1)
    return shapeError(loc, op, "expects logits (..., Vp) and targets (...), got ranks ",
                      logits.getRank(), " and ", targets.getRank());
  for (int64_t i = 0; i < targets.getRank(); ++i)
    if (!compatible(logits.getDimSize(i), targets.getDimSize(i)))
      return shapeError(loc, op, "logits and targets differ in dimension ", i);
  int64_t vp = logits.getShape().back();
  if (std::optional<int64_t> v = getConfigInt(vocabSize)) {
    if (*v < 1)
      return shapeError(loc, op, "vocab_size must be positive");
    if (!isDyn(vp) && *v > vp)
      return shapeError(loc, op, "vocab_size ", *v, " exceeds the ", vp,
                        " logits per position");
  }
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  auto logits = rtt(adaptor.getLogits());
  if (failed(checkLogitsAndTargets(loc, "cross_entropy", logits, rtt(adaptor.getTargets()),
                                   adaptor.getVocabSize())))
    return failure();
  // The loss sums every position: at least fp32 whatever the logits' storage.
  Type elt = logits.getElementType();
  if (elt.getIntOrFloatBitWidth() < 32)
    elt = Float32Type::get(elt.getContext());
  results.push_back(tensorOf({}, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// RepeatOp
//===----------------------------------------------------------------------===//

LogicalResult RepeatOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto callee =
      symbols.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError("'") << getCallee() << "' does not name a func.func";
  FunctionType type = callee.getFunctionType();
  if (type.getNumInputs() < 1 || type.getNumResults() != 1)
    return emitOpError("callee @")
           << getCallee() << " must take the activation first and return one value";
  auto input = getInput().getType();
  for (Type t : {type.getInput(0), type.getResult(0)})
    if (!llvm::isa<TensorType>(t) || failed(verifyCompatibleShape(t, input)) ||
        llvm::cast<ShapedType>(t).getElementType() != input.getElementType())
      return emitOpError("activation type ")
             << input << " does not match callee @" << getCallee() << " type " << t;
  for (unsigned i = 1; i < type.getNumInputs(); ++i)
    if (!callee.getArgAttrOfType<StringAttr>(i, kParamAttrName))
      return emitOpError("callee @")
             << getCallee() << " argument " << i << " needs a '" << kParamAttrName
             << "' name";
  if (std::optional<int64_t> n = getConfigInt(getCount()); n && *n < 1)
    return emitOpError("count must be positive, got ") << *n;
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops with verifiers
//===----------------------------------------------------------------------===//

LogicalResult CausalMaskOp::verify() {
  auto t = getInput().getType();
  if (t.getRank() < 2 || !compatible(t.getDimSize(t.getRank() - 1),
                                     t.getDimSize(t.getRank() - 2)))
    return emitOpError("expects scores (..., T, T), got ") << t;
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

Operation *GPTDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto f = llvm::dyn_cast<FloatAttr>(value);
  auto t = llvm::dyn_cast<RankedTensorType>(type);
  if (!f || !t || !t.hasStaticShape())
    return nullptr;
  return ConstantOp::create(builder, loc, t, builder.getF64FloatAttr(f.getValueAsDouble()));
}

LogicalResult ConstantOp::verify() {
  if (!getType().hasStaticShape())
    return emitOpError("result type must be static, got ") << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (dims.empty())
    return shapeError(loc, "reduce", "needs at least one dimension");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= x.getRank())
      return shapeError(loc, "reduce", "dimension ", dims[i],
                        " is out of range for rank ", x.getRank());
    if (i > 0 && dims[i] <= dims[i - 1])
      return shapeError(loc, "reduce", "dims must be sorted and unique");
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < x.getRank(); ++i) {
    if (!llvm::is_contained(dims, i))
      shape.push_back(x.getDimSize(i));
    else if (adaptor.getKeepDims())
      shape.push_back(1);
  }
  results.push_back(tensorOf(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeOp, TransposeOp, SliceOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return emitOpError("needs static shapes, got ") << in << " to " << out;
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in.getNumElements() << " elements into " << out.getNumElements();
  if (in.getElementType() != out.getElementType())
    return emitOpError("must keep the element type");
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != x.getRank())
    return shapeError(loc, "transpose", "permutation has ", perm.size(),
                      " entries for rank ", x.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return shapeError(loc, "transpose", "permutation is not a permutation of [0, ",
                        x.getRank(), ")");
    seen[p] = true;
    shape.push_back(x.getDimSize(p));
  }
  results.push_back(tensorOf(shape, x.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  int64_t dim = adaptor.getDim(), start = adaptor.getStart(),
          size = adaptor.getSize();
  if (dim < 0 || dim >= x.getRank())
    return shapeError(loc, "slice", "dimension ", dim, " is out of range for rank ",
                      x.getRank());
  if (start < 0 || size < 1)
    return shapeError(loc, "slice", "needs start >= 0 and size >= 1");
  int64_t extent = x.getDimSize(dim);
  // `start > extent - size` rather than `start + size > extent`: the sum can
  // overflow for a huge start and then wrap round to an accepted range.
  if (!isDyn(extent) && (size > extent || start > extent - size)) {
    int64_t end;
    if (llvm::AddOverflow(start, size, end))
      return shapeError(loc, "slice", "range start ", start, " plus size ", size,
                        " overflows");
    return shapeError(loc, "slice", "range [", start, ", ", end,
                      ") exceeds dimension ", dim, " of size ", extent);
  }
  SmallVector<int64_t> shape(x.getShape());
  shape[dim] = size;
  results.push_back(tensorOf(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult EmbedGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto dy = rtt(adaptor.getGrad()), ids = rtt(adaptor.getIds());
  if (dy.getRank() != 3 || ids.getRank() != 2)
    return shapeError(loc, "embed_grad", "expects grad (B, T, C) and ids (B, T)");
  for (int64_t i = 0; i < 2; ++i)
    if (!compatible(dy.getDimSize(i), ids.getDimSize(i)))
      return shapeError(loc, "embed_grad", "grad and ids differ in dimension ", i);
  int64_t v = adaptor.getVocabRows(), maxT = adaptor.getPositionRows();
  if (v < 1 || maxT < 1)
    return shapeError(loc, "embed_grad", "row counts must be positive");
  if (!isDyn(dy.getDimSize(1)) && dy.getDimSize(1) > maxT)
    return shapeError(loc, "embed_grad", "sequence length ", dy.getDimSize(1),
                      " exceeds position_rows ", maxT);
  int64_t c = dy.getDimSize(2);
  results.push_back(tensorOf({v, c}, dy.getElementType()));
  results.push_back(tensorOf({maxT, c}, dy.getElementType()));
  return success();
}

/// dy's element type (inferred), or one wider float type for both tables.
bool EmbedGradOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 2 || actual.size() != 2)
    return false;
  auto wide = llvm::dyn_cast<RankedTensorType>(actual[0]);
  auto narrow = llvm::dyn_cast<RankedTensorType>(inferred[0]);
  if (!wide || !narrow || !sameOrNarrowerFloat(narrow.getElementType(), wide.getElementType()))
    return false;
  for (auto [want, got] : llvm::zip(inferred, actual)) {
    auto w = llvm::dyn_cast<RankedTensorType>(want), g = llvm::dyn_cast<RankedTensorType>(got);
    if (!w || !g || g.getElementType() != wide.getElementType() ||
        failed(verifyCompatibleShape(w.getShape(), g.getShape())))
      return false;
  }
  return true;
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &results) {
  auto dy = rtt(adaptor.getGrad()), x = rtt(adaptor.getInput());
  auto w = rtt(adaptor.getWeight());
  if (dy.getShape() != x.getShape() ||
      !sameOrNarrowerFloat(dy.getElementType(), x.getElementType()))
    return shapeError(loc, "layernorm_grad", "grad ", dy, " must have input ", x,
                      "'s shape, in its element type or a narrower float type");
  if (x.getRank() < 1 || w.getRank() != 1 ||
      !compatible(x.getShape().back(), w.getDimSize(0)))
    return shapeError(loc, "layernorm_grad", "expects input (..., C) and weight (C)");
  results.push_back(x);
  results.push_back(w);
  results.push_back(w);
  return success();
}

/// The operands of causal_attention_grad: grad (B, T, C), qkv
/// (B, T, 3C), output like grad, lse (B, H, T) f32.
static LogicalResult verifyAttentionGradOperands(std::optional<Location> loc, StringRef name,
                                                 Value grad, Value qkvV, Value output,
                                                 Value lseV, Attribute numHeads) {
  auto dy = rtt(grad), qkv = rtt(qkvV);
  if (qkv.getRank() != 3 || dy.getRank() != 3)
    return shapeError(loc, name,
                      "expects grad (B, T, C) and qkv (B, T, 3C)");
  if (!isDyn(qkv.getDimSize(2)) && !isDyn(dy.getDimSize(2)) &&
      qkv.getDimSize(2) != 3 * dy.getDimSize(2))
    return shapeError(loc, name, "grad has ", dy.getDimSize(2),
                      " channels but qkv has ", qkv.getDimSize(2));
  std::optional<int64_t> heads = getConfigInt(numHeads);
  if (heads && (*heads < 1 || (!isDyn(dy.getDimSize(2)) && dy.getDimSize(2) % *heads)))
    return shapeError(loc, name, "num_heads must divide C");
  auto y = rtt(output), lse = rtt(lseV);
  if (failed(verifyCompatibleShape(y.getShape(), dy.getShape())))
    return shapeError(loc, name, "output ", y, " and grad ", dy,
                      " must have one shape");
  if (lse.getRank() != 3 || !lse.getElementType().isF32() ||
      !compatible(lse.getDimSize(0), dy.getDimSize(0)) ||
      !compatible(lse.getDimSize(1), heads ? *heads : ShapedType::kDynamic) ||
      !compatible(lse.getDimSize(2), dy.getDimSize(1)))
    return shapeError(loc, name, "lse ", lse, " is not (B, H, T) f32");
  return success();
}

LogicalResult CausalAttentionGradOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(verifyAttentionGradOperands(loc, "causal_attention_grad", adaptor.getGrad(),
                                         adaptor.getQkv(), adaptor.getOutput(),
                                         adaptor.getLse(), adaptor.getNumHeads())))
    return failure();
  results.push_back(adaptor.getQkv().getType());
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *,
                                                   std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &results) {
  auto logits = rtt(adaptor.getLogits());
  if (failed(checkLogitsAndTargets(loc, "cross_entropy_grad", logits,
                                   rtt(adaptor.getTargets()), adaptor.getVocabSize())))
    return failure();
  results.push_back(logits);
  return success();
}

LogicalResult Fp8CrossEntropyGradOp::inferReturnTypes(MLIRContext *ctx,
                                                      std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &results) {
  auto logits = rtt(adaptor.getLogits());
  if (failed(checkLogitsAndTargets(loc, "fp8_cross_entropy_grad", logits,
                                   rtt(adaptor.getTargets()), adaptor.getVocabSize())))
    return failure();
  results.push_back(RankedTensorType::get(logits.getShape(), Float8E5M2Type::get(ctx)));
  results.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

LogicalResult Fp8TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  auto x = rtt(adaptor.getInput());
  if (x.getRank() < 2)
    return shapeError(loc, "fp8_transpose", "input must have rank >= 2, got ", x.getRank());
  results.push_back(transposedMatrix(x, x.getElementType()));
  return success();
}

LogicalResult RandomNormalOp::verify() {
  if (!getType().hasStaticShape())
    return emitOpError("result type must be static, got ") << getType();
  if (getStd().convertToDouble() < 0)
    return emitOpError("std must not be negative");
  return success();
}

//===----------------------------------------------------------------------===//
// AllReduceOp
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor, SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  // The accessor is unsigned: read the attribute's signed value.
  if (int64_t world = getWorldSizeAttr().getInt(); world < 0)
    return emitOpError("world_size must be >= 0 (0: any number of ranks), got ") << world;
  for (Value v : getInputs())
    if (!llvm::cast<RankedTensorType>(v.getType()).hasStaticShape())
      return emitOpError("needs static shapes, got ") << v.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// ZeRO-1: ReduceScatterOp, AllGatherOp, RankSliceOp
//===----------------------------------------------------------------------===//

/// A world size of at least 2 that divides `t`'s element count.
static LogicalResult verifyShardable(Operation *op, Type t, int64_t world) {
  auto shaped = llvm::cast<RankedTensorType>(t);
  if (!shaped.hasStaticShape())
    return op->emitOpError("needs static shapes, got ") << t;
  if (world < 2)
    return op->emitOpError("world_size must be >= 2 (a shard of one rank is the tensor), got ")
           << world;
  if (shaped.getNumElements() % world != 0)
    return op->emitOpError("world_size ")
           << world << " does not divide the " << shaped.getNumElements() << " elements of " << t;
  return success();
}

/// The 1-D slice type of one rank: numel / world elements of `t`'s type.
static RankedTensorType shardType(Type t, int64_t world) {
  auto shaped = llvm::cast<RankedTensorType>(t);
  return RankedTensorType::get({shaped.getNumElements() / world}, shaped.getElementType());
}

LogicalResult ReduceScatterOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &results) {
  // The parser infers before it moves attr-dict's inherent attributes
  // into the properties: look in the dictionary too.
  IntegerAttr worldAttr = adaptor.getWorldSizeAttr();
  if (!worldAttr && adaptor.getAttributes())
    worldAttr = llvm::dyn_cast_or_null<IntegerAttr>(adaptor.getAttributes().get("world_size"));
  int64_t world = worldAttr ? worldAttr.getInt() : 0;
  for (Type t : adaptor.getInputs().getTypes()) {
    auto shaped = llvm::dyn_cast<RankedTensorType>(t);
    if (!shaped || !shaped.hasStaticShape() || world < 2 || shaped.getNumElements() % world)
      return emitOptionalError(loc, "'gpt.reduce_scatter' needs static shapes whose element "
                                    "counts world_size (>= 2, got ",
                               world, ") divides, got ", t);
    results.push_back(shardType(t, world));
  }
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  for (Value v : getInputs())
    if (failed(verifyShardable(*this, v.getType(), getWorldSizeAttr().getInt())))
      return failure();
  return success();
}

LogicalResult AllGatherOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor, SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInits().getTypes());
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  if (getInputs().size() != getInits().size())
    return emitOpError("needs one destination per input, got ")
           << getInputs().size() << " inputs and " << getInits().size() << " destinations";
  int64_t world = getWorldSizeAttr().getInt();
  for (auto [in, out] : llvm::zip(getInputs(), getInits())) {
    if (failed(verifyShardable(*this, out.getType(), world)))
      return failure();
    if (in.getType() != shardType(out.getType(), world))
      return emitOpError("gathers ")
             << in.getType() << " from each of " << world << " ranks into " << out.getType()
             << ": expected the shard " << shardType(out.getType(), world);
  }
  return success();
}

LogicalResult RankSliceOp::verify() {
  if (failed(verifyShardable(*this, getInput().getType(), getWorldSizeAttr().getInt())))
    return failure();
  if (getType() != shardType(getInput().getType(), getWorldSizeAttr().getInt()))
    return emitOpError("result must be ")
           << shardType(getInput().getType(), getWorldSizeAttr().getInt()) << ", got "
           << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AdamWMultiOp
//===----------------------------------------------------------------------===//

/// `(t0, t1, ...)`: the parameters' types, which the moments and results
/// share; then `grads (g0, g1, ...)` when a gradient is narrower than its
/// parameter (gpt-fuse-adamw's narrow-grads), else the gradients share them
/// too.
static ParseResult parseAdamWMultiTypes(OpAsmParser &parser, SmallVectorImpl<Type> &params,
                                        SmallVectorImpl<Type> &grads, SmallVectorImpl<Type> &ms,
                                        SmallVectorImpl<Type> &vs,
                                        SmallVectorImpl<Type> &newParams,
                                        SmallVectorImpl<Type> &newMs,
                                        SmallVectorImpl<Type> &newVs) {
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                     [&] { return parser.parseType(params.emplace_back()); }))
    return failure();
  for (SmallVectorImpl<Type> *same : {&ms, &vs, &newParams, &newMs, &newVs})
    same->assign(params.begin(), params.end());
  if (failed(parser.parseOptionalKeyword("grads"))) {
    grads.assign(params.begin(), params.end());
    return success();
  }
  return parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                        [&] { return parser.parseType(grads.emplace_back()); });
}

static void printAdamWMultiTypes(OpAsmPrinter &printer, Operation *, TypeRange params,
                                 TypeRange grads, TypeRange, TypeRange, TypeRange, TypeRange,
                                 TypeRange) {
  printer << "(";
  llvm::interleaveComma(params, printer);
  printer << ")";
  if (grads == params)
    return;
  printer << " grads (";
  llvm::interleaveComma(grads, printer);
  printer << ")";
}

LogicalResult AdamWMultiOp::verify() {
  size_t n = getParams().size();
  if (n == 0)
    return emitOpError("needs at least one parameter");
  if (getGrads().size() != n || getMs().size() != n || getVs().size() != n)
    return emitOpError("needs as many gradients and moments as parameters (")
           << n << "), got " << getGrads().size() << ", " << getMs().size() << " and "
           << getVs().size();
  if (getNewParams().size() != n || getNewMs().size() != n || getNewVs().size() != n)
    return emitOpError("needs three results per parameter");
  if (getWeightDecays().size() != n)
    return emitOpError("needs one weight decay per parameter (") << n << "), got "
                                                                  << getWeightDecays().size();
  for (size_t i = 0; i < n; ++i) {
    Type t = getParams()[i].getType();
    for (Value v : {getMs()[i], getVs()[i]})
      if (v.getType() != t)
        return emitOpError("parameter ") << i << " has type " << t
                                         << " but its moment has " << v.getType();
    // A gradient may be narrower: the update widens it as it loads.
    auto pt = llvm::cast<RankedTensorType>(t);
    auto gt = llvm::cast<RankedTensorType>(getGrads()[i].getType());
    if (gt.getShape() != pt.getShape() ||
        !sameOrNarrowerFloat(gt.getElementType(), pt.getElementType()))
      return emitOpError("parameter ") << i << " has type " << t << " but its gradient has "
                                       << gt << " (the parameter's type, or its shape in a "
                                       << "narrower float type)";
    for (Value r : {getNewParams()[i], getNewMs()[i], getNewVs()[i]})
      if (r.getType() != t)
        return emitOpError("result of parameter ") << i << " must have type " << t;
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/GPT/IR/GPTOps.cpp.inc"

//===----------------------------------------------------------------------===//
// AddLayerNormFp8Op
//===----------------------------------------------------------------------===//

LogicalResult AddLayerNormFp8Op::verify() {
  auto a = rtt(getLhs()), b = rtt(getRhs()), sum = rtt(getSum()), q = rtt(getResult());
  auto w = rtt(getWeight()), bias = rtt(getBias());
  auto width = [](Type t) { return t.getIntOrFloatBitWidth(); };
  if (a.getShape() != sum.getShape() || b.getShape() != sum.getShape() ||
      q.getShape() != sum.getShape() || sum.getRank() < 1)
    return emitOpError("lhs, rhs, sum and result must have one shape (..., C)");
  if (width(a.getElementType()) > width(sum.getElementType()) ||
      width(b.getElementType()) > width(sum.getElementType()))
    return emitOpError("sum must have the widest element type, got ")
           << a << " + " << b << " -> " << sum;
  int64_t c = sum.getShape().back();
  if (w.getRank() != 1 || bias.getRank() != 1 || !compatible(w.getDimSize(0), c) ||
      !compatible(bias.getDimSize(0), c) || w.getElementType() != bias.getElementType() ||
      !sameOrNarrowerFloat(sum.getElementType(), w.getElementType()))
    return emitOpError("weight and bias must be (C) in the sum's type or a wider one");
  auto rounded = llvm::dyn_cast<FloatType>(getRoundedTo());
  if (!rounded || width(rounded) > width(sum.getElementType()) || width(rounded) < 16)
    return emitOpError("rounded_to must be a float type of 16 bits up to the sum's, got ")
           << getRoundedTo();
  bool e5m2 = getFormat() == Fp8Format::E5M2;
  if (e5m2 != llvm::isa<Float8E5M2Type>(q.getElementType()))
    return emitOpError("result must hold ") << stringifyFp8Format(getFormat()) << " codes, got "
                                            << q;
  auto qt = rtt(getTransposed());
  if (qt.getElementType() != q.getElementType() || qt.getRank() != 2 ||
      qt.getDimSize(0) != c || qt.getDimSize(1) * c != q.getNumElements())
    return emitOpError("transposed must be the result's codes as (C, rows), got ") << qt;
  return success(); // the history's checks: Fp8ScalingOpInterface
}

