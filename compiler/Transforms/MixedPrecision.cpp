//===- MixedPrecision.cpp - bf16 compute with fp32 masters and statistics -===//
//
// One forward walk over the function: each op is put in a class (GEMM:
// bf16 operands; statistics: fp32 operands; readers: operands as they are;
// the rest: the widest operand type), its operands are cast to that type,
// and its result types are re-derived from the new operands. See Passes.td
// for the policy and why the pass runs before gpt-autodiff.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

namespace gptc {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

llvm::ArrayRef<llvm::StringLiteral> gptc::getFp32OpKinds() {
  static constexpr llvm::StringLiteral kinds[] = {"attention"};
  return kinds;
}

using namespace mlir;
using namespace mlir::gpt;

namespace {

enum class OpClass {
  Gemm,       // operands in the compute type (bf16)
  Statistics, // operands at least fp32
  Follow,     // operands promoted to the widest among them
  Reader,     // operands as they are: the op widens on load
};

OpClass classify(Operation *op, bool narrowResidual, bool fp32Attention) {
  if (llvm::isa<LinearOp, MatmulOp, Fp8MatmulOp>(op))
    return OpClass::Gemm;
  // The user's per-op choice: fp32 operands, so an fp32 result.
  if (fp32Attention && llvm::isa<CausalAttentionOp>(op))
    return OpClass::Statistics;
  // A narrow residual stream is normalised as stored: the row kernel widens
  // it as it loads, and the statistics are taken in the fp32 weight's type.
  if (narrowResidual && llvm::isa<LayerNormOp>(op))
    return OpClass::Reader;
  // Row statistics, losses and anything summing many terms: fp32, since a
  // bf16 accumulator loses the small terms (8 bits of mantissa).
  if (llvm::isa<LayerNormOp, LayerNormGradOp, SoftmaxOp, SoftmaxGradOp, ReduceOp, GlobalNormOp,
                AdamWOp>(op))
    return OpClass::Statistics;
  // The loss reads the bf16 logits directly (fp32 arithmetic, fp32 loss) and
  // its gradient is bf16 like them: an fp32 copy of (B, T, V) logits, and of
  // their gradient, would cost more memory traffic than the rest of the head.
  if (llvm::isa<CrossEntropyOp, CrossEntropyGradOp>(op))
    return OpClass::Reader;
  return OpClass::Follow;
}

FloatType floatElementOf(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t ? llvm::dyn_cast<FloatType>(t.getElementType()) : FloatType();
}

struct MixedPrecisionPass : public gptc::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn) {
      module.emitError("gpt-mixed-precision: no function @") << function;
      return signalPassFailure();
    }
    if (policy == "fp32" && narrowResidual) {
      module.emitError("gpt-mixed-precision: narrow-residual needs a narrow policy (bf16 or "
                       "fp16), got fp32");
      return signalPassFailure();
    }
    if (!fp8Exclude.empty() && policy != "fp8") {
      module.emitError("gpt-mixed-precision: fp8-exclude needs policy fp8, got ") << policy;
      return signalPassFailure();
    }
    if (fp8LmHead && policy != "fp8") {
      module.emitError("gpt-mixed-precision: fp8-lm-head needs policy fp8, got ") << policy;
      return signalPassFailure();
    }
    for (const std::string &kind : fp32Ops)
      if (!llvm::is_contained(gptc::getFp32OpKinds(), kind)) {
        module.emitError("gpt-mixed-precision: fp32-ops: no kind '")
            << kind << "' (the kinds: " << llvm::join(gptc::getFp32OpKinds(), ", ") << ")";
        return signalPassFailure();
      }
    if (!fp32Ops.empty() && policy == "fp32") {
      module.emitError("gpt-mixed-precision: fp32-ops needs a narrow policy (bf16, fp16 or "
                       "fp8), got fp32");
      return signalPassFailure();
    }
    fp32Attention = llvm::is_contained(fp32Ops, "attention");
    if (policy == "fp32")
      return; // fp32 everywhere: the model as written
    if (policy != "bf16" && policy != "fp16" && policy != "fp8") {
      module.emitError("gpt-mixed-precision: unknown policy '")
          << policy << "' (expected fp32, bf16, fp16 or fp8)";
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("gpt-mixed-precision: @") << function << " must be a single block";
      return signalPassFailure();
    }
    for (Type t : llvm::concat<const Type>(fn.getArgumentTypes(), fn.getResultTypes()))
      if (!llvm::isa<RankedTensorType>(t)) {
        fn.emitError("gpt-mixed-precision: @")
            << function << " takes and returns ranked tensors only, got " << t;
        return signalPassFailure();
      }
    casts.clear(); // values of an earlier module are gone
    // fp8: bf16 everywhere but the linear layers' products (fp8Linears).
    compute = policy == "fp16" ? FloatType(Float16Type::get(&getContext()))
                               : FloatType(BFloat16Type::get(&getContext()));
    f32 = Float32Type::get(&getContext());
    if (failed(rewrite(fn)))
      return signalPassFailure();
    if (policy == "fp8" && failed(fp8Linears(fn)))
      return signalPassFailure();
    if (fp8LmHead)
      fp8LmHeads(fn);
  }

private:
  FloatType compute, f32;
  bool fp32Attention = false;
  /// (value, element type) -> its one cast.
  llvm::DenseMap<std::pair<Value, Type>, CastOp> casts;

  /// `v` as element type `elt`, through one shared gpt.cast placed right
  /// after v's definition so that it dominates every later use.
  Value castTo(Value v, Type elt) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    if (type.getElementType() == elt)
      return v;
    CastOp &cast = casts[{v, elt}];
    if (!cast) {
      OpBuilder b(v.getContext());
      b.setInsertionPointAfterValue(v);
      cast = CastOp::create(b, v.getLoc(), type.clone(elt), v);
      ++numCasts;
    }
    return cast.getResult();
  }

  /// The element type operand `v` of an op of class `cls` should have;
  /// `widest` is the widest float element type among the op's operands.
  Type wanted(OpClass cls, FloatType elt, FloatType widest) {
    switch (cls) {
    case OpClass::Gemm:
      return elt.getWidth() > compute.getWidth() ? compute : elt;
    case OpClass::Statistics:
      return elt.getWidth() < f32.getWidth() ? f32 : elt;
    case OpClass::Follow:
      return widest;
    case OpClass::Reader:
      return elt;
    }
    return elt;
  }

  LogicalResult rewrite(func::FuncOp fn) {
    Block &body = fn.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        // Results keep the declared types (the loss stays fp32).
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          auto declared = llvm::cast<ShapedType>(fn.getResultTypes()[i]).getElementType();
          if (floatElementOf(v) && floatElementOf(v) != declared)
            ret->setOperand(i, castTo(v, declared));
        }
        continue;
      }
      if (auto c = llvm::dyn_cast<CastOp>(op)) {
        // A cast already in the function (written by hand, or by an earlier
        // run) is shared like ours; a second cast of one value to one type
        // folds into the first.
        auto [it, inserted] = casts.try_emplace({c.getInput(), c.getType().getElementType()}, c);
        if (!inserted && it->second != c) {
          c.replaceAllUsesWith(it->second.getResult());
          c.erase();
        }
        continue;
      }
      OpClass cls = classify(&op, narrowResidual, fp32Attention);
      FloatType widest;
      for (Value v : op.getOperands())
        if (FloatType e = floatElementOf(v); e && (!widest || e.getWidth() > widest.getWidth()))
          widest = e;
      if (!widest)
        continue; // no float operand: nothing to decide
      bool changed = false;
      for (OpOperand &operand : op.getOpOperands()) {
        FloatType e = floatElementOf(operand.get());
        if (!e)
          continue;
        Type want = wanted(cls, e, widest);
        if (want == e)
          continue;
        operand.set(castTo(operand.get(), want));
        changed = true;
      }
      if (failed(updateResultTypes(&op, changed)))
        return failure();
      // The stream starts narrow: the embedding's sum (of fp32 tables, whose
      // gradients stay fp32) is cast once, and everything downstream follows.
      if (narrowResidual && llvm::isa<EmbedOp>(op)) {
        Value sum = op.getResult(0);
        // A cast already there (an earlier run) is the one: the walk has not
        // reached it yet to share it.
        for (Operation *user : sum.getUsers())
          if (auto c = llvm::dyn_cast<CastOp>(user); c && c.getType().getElementType() == compute)
            casts.try_emplace({sum, compute}, c);
        Value narrow = castTo(sum, compute);
        sum.replaceAllUsesExcept(narrow, narrow.getDefiningOp());
      }
    }
    return success();
  }

  /// fp8: every gpt.linear (the blocks' layers; the tied LM head is a
  /// gpt.matmul and stays bf16) becomes an e4m3 x e4m3 gpt.fp8_matmul plus
  /// its bias, on the bf16 operands the walk gave it, but those whose
  /// weight fp8-exclude names.
  LogicalResult fp8Linears(func::FuncOp fn) {
    // "first" and "last" are the blocks h.0. and h.<n_layer-1>.
    std::vector<std::string> prefixes;
    auto config = fn->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>("gpt.config");
    auto layers = config ? config.getAs<IntegerAttr>("n_layer") : IntegerAttr();
    for (const std::string &p : fp8Exclude) {
      if ((p == "first" || p == "last") && !layers)
        return fn.emitError("gpt-mixed-precision: fp8-exclude=") << p
               << " needs the model's n_layer (gpt.config): instantiate it first";
      prefixes.push_back(p == "first"  ? std::string("h.0.")
                         : p == "last" ? "h." + std::to_string(layers.getInt() - 1) + "."
                                       : p);
    }
    std::vector<bool> used(prefixes.size(), false);
    for (auto linear : llvm::to_vector(fn.getOps<LinearOp>())) {
      if (llvm::StringRef name = paramName(linear.getWeight()); !name.empty()) {
        bool keep = false;
        for (auto [i, p] : llvm::enumerate(prefixes))
          if (name.starts_with(p))
            keep = used[i] = true;
        if (keep)
          continue;
      }
      OpBuilder b(linear);
      Value y = Fp8MatmulOp::create(b, linear.getLoc(), Fp8Format::E4M3, linear.getInput(),
                                    Fp8Format::E4M3, linear.getWeight(), /*transpose_lhs=*/false,
                                    /*transpose_rhs=*/true);
      if (Value bias = linear.getBias())
        y = BiasAddOp::create(b, linear.getLoc(), y, bias);
      linear.replaceAllUsesWith(y);
      linear.erase();
      ++numFp8Products;
    }
    for (auto [i, p] : llvm::enumerate(fp8Exclude))
      if (!used[i])
        return fn.emitError("gpt-mixed-precision: fp8-exclude=")
               << p << " names no linear layer's weight (parameter names: h.0.attn.c_attn.weight, "
                  "h.0.mlp.c_fc.weight, ...)";
    return success();
  }

  /// The gpt.param name of the argument `v` is (through casts), or "".
  static llvm::StringRef paramName(Value v) {
    auto arg = llvm::dyn_cast<BlockArgument>(stripCasts(v));
    auto fn = arg ? llvm::dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    auto name = fn ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "gpt.param")
                   : StringAttr();
    return name ? name.getValue() : llvm::StringRef();
  }

  /// fp8-lm-head: a gpt.matmul whose result is a gpt.cross_entropy's
  /// logits (the tied LM head) becomes an e4m3 x e4m3 gpt.fp8_matmul with
  /// the same transposes.
  void fp8LmHeads(func::FuncOp fn) {
    for (auto matmul : llvm::to_vector(fn.getOps<MatmulOp>())) {
      bool logits = llvm::any_of(matmul->getUses(), [](OpOperand &use) {
        auto ce = llvm::dyn_cast<CrossEntropyOp>(use.getOwner());
        return ce && use.get() == ce.getLogits();
      });
      if (!logits)
        continue;
      OpBuilder b(matmul);
      Value y = Fp8MatmulOp::create(b, matmul.getLoc(), Fp8Format::E4M3, matmul.getLhs(),
                                    Fp8Format::E4M3, matmul.getRhs(), matmul.getTransposeLhs(),
                                    matmul.getTransposeRhs());
      matmul.replaceAllUsesWith(y);
      matmul.erase();
      ++numFp8Products;
    }
  }

  /// Re-derives result types after operand types changed here or upstream.
  LogicalResult updateResultTypes(Operation *op, bool changed) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(op)) {
      auto in = llvm::cast<RankedTensorType>(reshape.getInput().getType());
      reshape.getResult().setType(reshape.getType().clone(in.getElementType()));
      return success();
    }
    auto infer = llvm::dyn_cast<InferTypeOpInterface>(op);
    if (!infer) {
      // Ops with fixed result types (gpt.global_norm, gpt.adamw) verify
      // against their new operands at the end of the pass.
      return success();
    }
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types)))
      return op->emitOpError("gpt-mixed-precision: cannot re-derive the result types")
             << (changed ? " after casting its operands" : "");
    for (auto [r, t] : llvm::zip(op->getResults(), types))
      r.setType(t);
    return success();
  }
};

} // namespace
