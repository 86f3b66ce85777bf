//===- GPTFusion.cpp - gpt.fusion verifier and the fusible-op set ---------===//

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <functional>
#include <utility>

using namespace mlir;
using namespace mlir::gpt;

bool mlir::gpt::isFusibleElementwise(Operation *op) {
  // Exactly the ops whose codegen is one element per index (Lowering.cpp's
  // elementOf); transpose, causal_mask and softmax read other indices.
  return llvm::isa<AddOp, SubOp, MulOp, DivOp, MaxOp, NegOp, ExpOp, LogOp, TanhOp, SqrtOp,
                   RsqrtOp, GeluOp, GeluGradOp, ScaleOp, CastOp, BiasAddOp, ConstantOp>(op);
}

/// The body's first OpT (a fusion holds at most one), or null.
template <typename OpT>
static OpT findInBody(FusionOp fusion) {
  auto ops = fusion.getBody().front().getOps<OpT>();
  return ops.empty() ? OpT() : *ops.begin();
}

LayerNormOp FusionOp::getRowOp() { return findInBody<LayerNormOp>(*this); }
ReduceOp FusionOp::getColumnSum() { return findInBody<ReduceOp>(*this); }
LayerNormGradOp FusionOp::getRowGradOp() { return findInBody<LayerNormGradOp>(*this); }

bool mlir::gpt::sumsColumns(ReduceOp sum) {
  int64_t rank = llvm::cast<RankedTensorType>(sum.getInput().getType()).getRank();
  return sum.getKind() == ReduceKind::Sum && !sum.getKeepDims() && rank >= 2 &&
         llvm::equal(sum.getDims(), llvm::seq<int64_t>(0, rank - 1));
}

/// The block argument (fusion operand) that body value `v` loads: the
/// argument itself, or one widened by a gpt.cast (what a kernel that loads
/// it can read); null otherwise.
static BlockArgument loadedArg(Value v) {
  auto cast = v.getDefiningOp<CastOp>();
  Value from = cast ? cast.getInput() : v;
  auto arg = llvm::dyn_cast<BlockArgument>(from);
  if (!arg || (cast && getElementTypeOrSelf(from).getIntOrFloatBitWidth() >=
                           getElementTypeOrSelf(v).getIntOrFloatBitWidth()))
    return {};
  return arg;
}

/// A column-sum fusion's sum: of all but the last dimension of a value the
/// body computes, read only by gpt.yield and casts that only it reads;
/// every other result of that value's shape.
static LogicalResult verifyColumnSum(FusionOp fusion, ReduceOp sum, YieldOp yield) {
  auto in = llvm::cast<RankedTensorType>(sum.getInput().getType());
  if (!sumsColumns(sum))
    return sum.emitOpError("in gpt.fusion must sum all but the last dimension");
  if (llvm::isa<BlockArgument>(sum.getInput()))
    return sum.emitOpError("in gpt.fusion must sum a value the body computes");
  std::function<bool(Value)> onlyYielded = [&](Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation *user) {
      return user == yield || (llvm::isa<CastOp>(user) && onlyYielded(user->getResult(0)));
    });
  };
  if (!onlyYielded(sum.getResult()))
    return sum.emitOpError("in gpt.fusion must be read only by gpt.yield (through casts)");
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    auto shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
    if (stripCasts(v) != sum.getResult() && shape != in.getShape())
      return fusion.emitOpError("result ") << i << " of a column-sum fusion has type "
                                           << v.getType() << ", not the shape of the summed value";
  }
  return success();
}

/// A row fusion's row op: its input computed in the body and yielded (the
/// kernel stores it and normalises what it stored), its weight and bias
/// operands, its result yielded only, every result of its shape.
static LogicalResult verifyRowOp(FusionOp fusion, LayerNormOp ln, YieldOp yield) {
  auto isYielded = [&](Value v) { return llvm::is_contained(yield.getValues(), v); };
  if (llvm::isa<BlockArgument>(ln.getInput()) || !isYielded(ln.getInput()))
    return ln.emitOpError("in gpt.fusion must normalise a value the body computes and yields");
  if (!llvm::isa<BlockArgument>(ln.getWeight()) || !llvm::isa<BlockArgument>(ln.getBias()))
    return ln.emitOpError("in gpt.fusion must take its weight and bias from the operands");
  for (Operation *user : ln->getUsers())
    if (user != yield)
      return ln.emitOpError("in gpt.fusion must be read only by gpt.yield");
  auto row = llvm::cast<RankedTensorType>(ln.getInput().getType()).getShape();
  for (auto [i, t] : llvm::enumerate(fusion.getResultTypes()))
    if (llvm::cast<RankedTensorType>(t).getShape() != row)
      return fusion.emitOpError("result ") << i << " of a row fusion has type " << t
                                           << ", not the shape of its gpt.layernorm's input";
  return success();
}

/// Whether each operand of `op` is the fusion's, widened in the body or
/// not: what a kernel that loads them (a row-gradient or attention
/// gradient) can read.
static LogicalResult verifyLoadedOperands(Operation *op) {
  for (Value v : op->getOperands())
    if (!loadedArg(v))
      return op->emitOpError("in gpt.fusion must take its operands from the fusion's, "
                             "widened or not");
  return success();
}

/// A row-gradient fusion's row op: its operands the fusion's, its weight
/// and bias gradients yielded only, every other result of its input's
/// shape.
static LogicalResult verifyRowGradOp(FusionOp fusion, LayerNormGradOp ln, YieldOp yield) {
  if (failed(verifyLoadedOperands(ln)))
    return failure();
  for (Value v : {ln.getWeightGrad(), ln.getBiasGrad()})
    if (!v.hasOneUse() || *v.getUsers().begin() != yield.getOperation())
      return ln.emitOpError("in gpt.fusion must have its weight and bias gradients yielded "
                            "once and read by no body op");
  auto row = llvm::cast<RankedTensorType>(ln.getInput().getType()).getShape();
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (v != ln.getWeightGrad() && v != ln.getBiasGrad() &&
        llvm::cast<RankedTensorType>(v.getType()).getShape() != row)
      return fusion.emitOpError("result ")
             << i << " of a row-gradient fusion has type " << v.getType()
             << ", not the shape of its gpt.layernorm_grad's input";
  return success();
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments for "
                                    << getInputs().size() << " operands";
  for (auto [i, arg, in] : llvm::enumerate(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("body argument ") << i << " has type " << arg.getType()
                                           << ", its operand " << in.getType();
  // Codegen sizes every value statically.
  // At most one of: a row op, a row-gradient op, a column sum (with an
  // attention gradient, or elementwise ops, before it); or a GEMM and its
  // epilogue (matchGemmFusion's shapes).
  LayerNormOp rowOp;
  LayerNormGradOp rowGradOp;
  bool gemm = false;
  ReduceOp columnSum;
  CausalAttentionGradOp attentionGrad;
  Operation *kindOp = nullptr;
  for (Operation &op : body) {
    for (Type t : op.getResultTypes())
      if (!llvm::cast<RankedTensorType>(t).hasStaticShape())
        return op.emitOpError("in gpt.fusion must have a static shape, got ") << t;
    if (llvm::isa<YieldOp>(op))
      continue;
    if (llvm::isa<LayerNormOp, LayerNormGradOp, ReduceOp>(op)) {
      if (kindOp)
        return op.emitOpError("is a second row op or column sum: a fusion holds one "
                              "gpt.layernorm, gpt.layernorm_grad or gpt.reduce");
      kindOp = &op;
      rowOp = llvm::dyn_cast<LayerNormOp>(op);
      rowGradOp = llvm::dyn_cast<LayerNormGradOp>(op);
      columnSum = llvm::dyn_cast<ReduceOp>(op);
      continue;
    }
    if (auto grad = llvm::dyn_cast<CausalAttentionGradOp>(op)) {
      if (attentionGrad)
        return op.emitOpError("is a second attention gradient: a fusion holds one");
      attentionGrad = grad;
      continue;
    }
    if (llvm::isa<LinearOp, MatmulOp>(op)) {
      gemm = true; // matchGemmFusion checks the rest
      continue;
    }
    if (!isFusibleElementwise(&op))
      return op.emitOpError("cannot be fused: gpt.fusion holds elementwise ops and at most one "
                            "gpt.layernorm, gpt.layernorm_grad, column sum or GEMM");
  }
  for (auto [i, t] : llvm::enumerate(getInputs().getTypes()))
    if (!llvm::cast<RankedTensorType>(t).hasStaticShape())
      return emitOpError("operand ") << i << " must have a static shape, got " << t;
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in gpt.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ") << yield.getValues().getTypes() << " for results "
                                  << getResultTypes();
  // A result is computed, not copied: each must come from a body op.
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (llvm::isa<BlockArgument>(v))
      return emitOpError("result ") << i << " yields a body argument; use the operand";
  if (gemm) {
    std::string whyNot;
    if (!matchGemmFusion(*this, &whyNot))
      return emitOpError("with a GEMM: ") << whyNot;
    return success();
  }
  if (attentionGrad) {
    if (!columnSum || columnSum.getInput() != attentionGrad.getResult())
      return attentionGrad.emitOpError("in gpt.fusion must be summed by its column sum");
    if (failed(verifyLoadedOperands(attentionGrad)))
      return failure();
    // Its kernels store the gradient and the sums, nothing else.
    ValueRange values = yield.getValues();
    if (values.size() != 2 || stripCasts(values[0]) != attentionGrad.getResult() ||
        stripCasts(values[1]) != columnSum.getResult())
      return emitOpError("with an attention gradient yields it and its column sum (through "
                         "casts), nothing else");
  }
  if (rowOp)
    return verifyRowOp(*this, rowOp, yield);
  if (columnSum)
    return verifyColumnSum(*this, columnSum, yield);
  if (rowGradOp)
    return verifyRowGradOp(*this, rowGradOp, yield);
  return success();
}

std::string mlir::gpt::opKindName(Operation *op) {
  auto fusion = llvm::dyn_cast<FusionOp>(op);
  if (!fusion)
    return op->getName().stripDialect().str();
  if (std::optional<GemmFusion> gemm = matchGemmFusion(fusion))
    return gemm->name();
  if (!fusion.getRowOp() && !fusion.getColumnSum() && !fusion.getRowGradOp())
    return op->getName().stripDialect().str();
  std::string name;
  for (Operation &o : fusion.getBody().front())
    if (!llvm::isa<CastOp, YieldOp>(o))
      name += (name.empty() ? "" : "_") +
              (llvm::isa<ReduceOp>(o) ? std::string("sum") : o.getName().stripDialect().str());
  return name;
}

std::optional<AddLayerNormFusion> mlir::gpt::matchAddLayerNorm(FusionOp fusion) {
  LayerNormOp ln = fusion.getRowOp();
  if (!ln)
    return std::nullopt;
  auto add = ln.getInput().getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  Block &body = fusion.getBody().front();
  // An add operand: an operand of the fusion, or one widened in the body.
  auto operandOf = [&](Value v) -> Value {
    if (auto cast = v.getDefiningOp<CastOp>())
      v = cast.getInput();
    auto arg = llvm::dyn_cast<BlockArgument>(v);
    return arg ? fusion.getInputs()[arg.getArgNumber()] : Value();
  };
  Value lhs = operandOf(add.getLhs()), rhs = operandOf(add.getRhs());
  // add, layernorm, yield and the casts: nothing else.
  size_t ops = 3 + !llvm::isa<BlockArgument>(add.getLhs()) + !llvm::isa<BlockArgument>(add.getRhs());
  if (!lhs || !rhs || body.getOperations().size() != ops)
    return std::nullopt;
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 2)
    return std::nullopt;
  AddLayerNormFusion parts{lhs,
                           rhs,
                           fusion.getInputs()[llvm::cast<BlockArgument>(ln.getWeight()).getArgNumber()],
                           fusion.getInputs()[llvm::cast<BlockArgument>(ln.getBias()).getArgNumber()],
                           {},
                           {},
                           ln};
  for (auto [r, v] : llvm::zip(fusion.getResults(), yield.getValues())) {
    if (v == add.getResult())
      parts.sum = r;
    else if (v == ln.getResult())
      parts.result = r;
  }
  if (!parts.sum || !parts.result)
    return std::nullopt;
  return parts;
}

std::string GemmFusion::name() const {
  static const char *const suffix[] = {"_gelu", "_gelu_grad", "_gelu_bias_grad", "_bias_grad"};
  return gemm->getName().stripDialect().str() + suffix[static_cast<int>(epilogue)];
}

std::optional<GemmFusion> mlir::gpt::matchGemmFusion(FusionOp fusion, std::string *whyNot) {
  auto fail = [&](const Twine &why) -> std::optional<GemmFusion> {
    if (whyNot)
      *whyNot = why.str();
    return std::nullopt;
  };
  Block &body = fusion.getBody().front();
  auto yield = body.empty() ? YieldOp() : llvm::dyn_cast<YieldOp>(body.back());
  if (!yield)
    return fail("the body must end in gpt.yield");
  GemmFusion f{};
  GeluOp gelu;
  GeluGradOp geluGrad;
  ReduceOp sum;
  for (Operation &op : body.without_terminator()) {
    bool second = false;
    if (llvm::isa<LinearOp, MatmulOp>(op))
      second = std::exchange(f.gemm, &op) != nullptr;
    else if (auto o = llvm::dyn_cast<GeluOp>(op))
      second = bool(std::exchange(gelu, o));
    else if (auto o = llvm::dyn_cast<GeluGradOp>(op))
      second = bool(std::exchange(geluGrad, o));
    else if (auto o = llvm::dyn_cast<ReduceOp>(op))
      second = bool(std::exchange(sum, o));
    else if (!llvm::isa<CastOp>(op))
      return fail("holds " + op.getName().getStringRef() +
                  ", which no GEMM epilogue computes (gelu, gelu_grad, a column sum, casts)");
    if (second)
      return fail("holds a second " + op.getName().getStringRef());
  }
  if (!f.gemm)
    return fail("holds no gpt.linear or gpt.matmul");
  auto operand = [&](Value v) { return fusion.getInputs()[loadedArg(v).getArgNumber()]; };
  if (!llvm::all_of(f.gemm->getOperands(), [](Value v) { return bool(loadedArg(v)); }))
    return fail("the GEMM must read the fusion's operands, widened or not");
  // cuBLASLt's epilogues read its f32 accumulator; its operands share a type.
  if (!getElementTypeOrSelf(f.gemm->getResult(0)).isF32())
    return fail("the GEMM must give f32, the accumulator its epilogue reads (widen narrow "
                "operands)");
  if (!llvm::all_equal(llvm::map_range(f.gemm->getOperands(), [&](Value v) {
        return getElementTypeOrSelf(fusion.getInputs()[loadedArg(v).getArgNumber()]);
      })))
    return fail("the GEMM's operands must have one element type");
  Value lhsValue;
  if (auto linear = llvm::dyn_cast<LinearOp>(f.gemm)) {
    lhsValue = linear.getInput();
    f.rhs = operand(linear.getWeight());
    f.bias = linear.getBias() ? operand(linear.getBias()) : Value();
    f.transposeRhs = true;
  } else {
    auto matmul = llvm::cast<MatmulOp>(f.gemm);
    if (llvm::cast<RankedTensorType>(matmul.getLhs().getType()).getRank() != 2 ||
        llvm::cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2)
      return fail("its gpt.matmul must be one GEMM, of rank-2 operands");
    lhsValue = matmul.getLhs();
    f.rhs = operand(matmul.getRhs());
    f.transposeLhs = matmul.getTransposeLhs();
    f.transposeRhs = matmul.getTransposeRhs();
  }
  f.lhs = operand(lhsValue);
  Value acc = f.gemm->getResult(0);
  // The values the epilogue yields: D first.
  SmallVector<Value, 2> yielded;
  if (gelu) {
    if (gelu.getInput() != acc || geluGrad || sum)
      return fail("its gelu must be of the GEMM's result, and alone");
    f.epilogue = GemmFusion::Epilogue::Gelu;
    yielded = {gelu.getResult(), acc};
  } else if (geluGrad) {
    if (geluGrad.getGrad() != acc || !loadedArg(geluGrad.getInput()))
      return fail("its gelu_grad must scale the GEMM's result at an operand, widened or not");
    f.pre = operand(geluGrad.getInput());
    f.epilogue = GemmFusion::Epilogue::GeluGrad;
    yielded = {geluGrad.getResult()};
    if (sum) {
      if (sum.getInput() != geluGrad.getResult() || !sumsColumns(sum))
        return fail("its column sum must add up the gelu_grad's columns");
      f.epilogue = GemmFusion::Epilogue::GeluGradSum;
      yielded.push_back(sum.getResult());
    }
  } else if (sum) {
    if (!llvm::isa<MatmulOp>(f.gemm) || !f.transposeLhs || f.transposeRhs ||
        sum.getInput() != lhsValue || !sumsColumns(sum))
      return fail("its column sum must add up the columns of the lhs of a gpt.matmul "
                  "{transpose_lhs}");
    f.epilogue = GemmFusion::Epilogue::LhsSum;
    yielded = {acc, sum.getResult()};
  } else {
    return fail("has no epilogue: a gelu, a gelu_grad or a column sum");
  }
  if (f.bias && f.epilogue != GemmFusion::Epilogue::Gelu)
    return fail("only a gelu epilogue follows a gpt.linear with a bias");
  // Each epilogue value yielded once, through at most one narrowing cast;
  // every other cast widens an operand.
  if (yield.getValues().size() != yielded.size())
    return fail("yields " + Twine(yield.getValues().size()) + " values; its epilogue computes " +
                Twine(yielded.size()));
  SmallVector<Value, 2> results(yielded.size());
  for (auto [r, v] : llvm::zip(fusion.getResults(), yield.getValues())) {
    auto cast = v.getDefiningOp<CastOp>();
    auto *it = llvm::find(yielded, cast ? cast.getInput() : v);
    if (it == yielded.end() || results[it - yielded.begin()])
      return fail("must yield each epilogue value once, through at most one cast");
    results[it - yielded.begin()] = r;
  }
  for (auto cast : body.getOps<CastOp>())
    if (!loadedArg(cast.getResult()) &&
        !(cast->hasOneUse() && *cast->user_begin() == yield &&
          getElementTypeOrSelf(cast.getResult()).getIntOrFloatBitWidth() <
              getElementTypeOrSelf(cast.getInput()).getIntOrFloatBitWidth()))
      return fail("a cast must widen an operand or narrow a yielded value");
  f.result = results[0];
  if (f.epilogue == GemmFusion::Epilogue::Gelu)
    f.aux = results[1];
  else if (results.size() > 1)
    f.sum = results[1];
  return f;
}
