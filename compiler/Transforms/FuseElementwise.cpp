//===- FuseElementwise.cpp - elementwise ops into gpt.fusion regions ------===//
//
/// Per function body (after inlining, before memory planning):
///   0) Row kernels: a narrowing cast that is the only reader of a
///      layernorm or an embedding becomes the op's own result type, and a widening
///      cast feeding a layernorm_grad's or an embed_grad's gradient is read
///      narrow instead;
///      a layernorm of an add becomes one row gpt.fusion, and a
///      layernorm_grad whose dx joins the residual gradient (an add, and
///      its narrowing cast if any) one row-gradient gpt.fusion; a sum over all but the last
///      dimension of a gelu_grad (the bias gradient before the MLP's GELU)
///      becomes one column-sum gpt.fusion with it.
///   1) Chains: in block order, each fusible elementwise op joins the groups
///      of the producers of its operands that have its element count.
///   2) Siblings: groups of one structure (the same op names and types, e.g.
///      every fp32 -> bf16 weight cast) merge into one, so they share a launch.
///   3) Each group of two or more ops becomes one gpt.fusion; a member's
///      value is a result only when something outside the group reads it.
/// Accumulation adds of different micro-batches never share a group.
/// No merge gives a group more than maxArguments operands plus results: each
/// is a kernel pointer argument, and kernel parameters are capped.
/// A group is placed at one point. It is legal at its last member when no
/// outside op reads a member before that point (this also rules out cycles:
/// a path leaving the group and coming back passes through such a reader).
/// A group whose outside operands are all function arguments is placed at
/// its first member instead: everything it reads exists from the start.
/// Constant operands are cloned into the body rather than passed in.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVectorExtras.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

int64_t numel(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getNumElements(); }

bool fusible(Operation *op) {
  return isFusibleElementwise(op) && !llvm::isa<ConstantOp>(op) &&
         llvm::cast<RankedTensorType>(op->getResult(0).getType()).hasStaticShape();
}

/// Whether `cast` converts between floats and makes them narrower (wider):
/// false when either side is not a float.
bool castsFloat(CastOp cast, bool narrower) {
  auto from = llvm::dyn_cast<FloatType>(cast.getInput().getType().getElementType());
  auto to = llvm::dyn_cast<FloatType>(cast.getType().getElementType());
  if (!from || !to)
    return false;
  return narrower ? to.getWidth() < from.getWidth() : to.getWidth() > from.getWidth();
}
bool narrows(CastOp cast) { return castsFloat(cast, /*narrower=*/true); }
bool widens(CastOp cast) { return castsFloat(cast, /*narrower=*/false); }

/// `%y = gpt.layernorm ... -> f32; %z = gpt.cast %y to bf16` with the cast
/// as %y's only reader becomes `%z = gpt.layernorm ... -> bf16`: the row
/// kernel computes in f32 and rounds once when it stores, as the cast did,
/// and the f32 tensor is never written. The same for gpt.embed (the start
/// of a narrow residual stream).
int64_t narrowOutputs(Block &block) {
  int64_t n = 0;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto cast = llvm::dyn_cast<CastOp>(op);
    Operation *def = cast ? cast.getInput().getDefiningOp() : nullptr;
    if (!def || !llvm::isa<LayerNormOp, EmbedOp>(def) || !def->getResult(0).hasOneUse() ||
        !narrows(cast))
      continue;
    def->getResult(0).setType(cast.getType());
    cast.replaceAllUsesWith(def->getResult(0));
    cast.erase();
    ++n;
  }
  return n;
}

/// `%g = gpt.cast %h : bf16 to f32; gpt.layernorm_grad %g, %x, %w` reads %h
/// instead: the row kernels widen it as they load, which is exact, and the
/// wide copy is never written (mixed precision's GEMMs give bf16
/// gradients, the layernorm's statistics and dx stay f32). The same for
/// gpt.embed_grad (a narrow residual stream's gradient reaching the fp32
/// tables). The cast goes when nothing else reads it.
int64_t narrowGradInputs(Block &block) {
  int64_t n = 0;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    OpOperand *grad = nullptr;
    if (auto ln = llvm::dyn_cast<LayerNormGradOp>(op))
      grad = &ln.getGradMutable();
    else if (auto eg = llvm::dyn_cast<EmbedGradOp>(op))
      grad = &eg.getGradMutable();
    auto cast = grad ? grad->get().getDefiningOp<CastOp>() : CastOp();
    if (!cast || !widens(cast))
      continue;
    grad->set(cast.getInput());
    if (cast->use_empty())
      cast.erase();
    ++n;
  }
  return n;
}

/// `%d = GradOp %operands...; %s = gpt.reduce sum %d dims [all but last]`
/// -> one column-sum gpt.fusion yielding both (gelu_grad: the bias gradient
/// before the MLP's GELU; causal_attention_grad: the qkv projection's). Its
/// body computes in f32 and sums the gradient before it is rounded (one
/// rounding of the sum, as a column reduction of the f32 values would have
/// it): widening casts of narrow operands, the f32 gradient, a narrowing
/// cast of it and of the sum.
template <typename GradOp>
Operation *buildColumnSum(OpBuilder &b, GradOp grad, ReduceOp reduce) {
  Location loc = grad.getLoc();
  auto type = llvm::cast<RankedTensorType>(grad.getType());
  auto fused = gptc::createFusion(b, loc, TypeRange{type, reduce.getType()}, grad->getOperands());
  Block &body = fused.getBody().front();
  Type f32 = b.getF32Type();
  SmallVector<Value> wide;
  for (Value arg : body.getArguments())
    wide.push_back(gptc::castElements(b, loc, arg, f32));
  Operation *d = GradOp::create(b, loc, TypeRange{type.clone(f32)}, wide, grad->getAttrs());
  Value sum = ReduceOp::create(b, loc, ReduceKind::Sum, d->getResult(0), reduce.getDims());
  Type elt = type.getElementType();
  YieldOp::create(b, loc,
                  ValueRange{gptc::castElements(b, loc, d->getResult(0), elt),
                             gptc::castElements(b, loc, sum, elt)});
  return fused;
}

/// reduce sum (GradOp ...) dims [all but last], in the gradient's element
/// type -> buildColumnSum's fusion at the gradient (the reduce follows it,
/// so its readers do too).
template <typename GradOp>
int64_t fuseColumnSum(Block &block) {
  int64_t n = 0;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto reduce = llvm::dyn_cast<ReduceOp>(op);
    auto grad = reduce ? reduce.getInput().template getDefiningOp<GradOp>() : GradOp();
    if (!grad || grad->getBlock() != &block)
      continue;
    auto type = llvm::cast<RankedTensorType>(grad.getType());
    if (!sumsColumns(reduce) || reduce.getType().getElementType() != type.getElementType())
      continue;
    OpBuilder b(grad);
    Operation *fused = buildColumnSum(b, grad, reduce);
    grad.getResult().replaceAllUsesWith(fused->getResult(0));
    reduce.getResult().replaceAllUsesWith(fused->getResult(1));
    reduce.erase();
    grad.erase();
    ++n;
  }
  return n;
}

/// `%s = gpt.add %a, %b; %y = gpt.layernorm %s, %w, %c` becomes one row
/// gpt.fusion at the add, yielding both: its kernel stores the sum and
/// normalises it without reading it back. A widening cast read only by the
/// add moves into the body (the kernel widens as it loads). Bit-identical:
/// the body is the ops it replaces.
int64_t fuseAddLayerNorm(Block &block) {
  int64_t n = 0;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto ln = llvm::dyn_cast<LayerNormOp>(op);
    auto add = ln ? ln.getInput().getDefiningOp<AddOp>() : AddOp();
    if (!add || add->getBlock() != &block || !gptc::availableBefore(ln.getWeight(), add) ||
        !gptc::availableBefore(ln.getBias(), add))
      continue;
    SmallVector<CastOp> casts;
    auto narrowest = [&](Value v) -> CastOp {
      auto cast = v.getDefiningOp<CastOp>();
      if (!cast || !cast->hasOneUse() || !widens(cast))
        return {};
      casts.push_back(cast);
      return cast;
    };
    CastOp lhsCast = narrowest(add.getLhs()), rhsCast = narrowest(add.getRhs());
    Value lhs = lhsCast ? lhsCast.getInput() : add.getLhs();
    Value rhs = rhsCast ? rhsCast.getInput() : add.getRhs();
    OpBuilder b(add);
    SmallVector<Value> inputs = {lhs, rhs, ln.getWeight(), ln.getBias()};
    auto fused =
        gptc::createFusion(b, add.getLoc(), TypeRange{add.getType(), ln.getType()}, inputs);
    IRMapping map;
    map.map(inputs, fused.getBody().getArguments());
    for (CastOp cast : casts)
      b.clone(*cast, map);
    Operation *sum = b.clone(*add, map);
    Operation *norm = b.clone(*ln, map);
    YieldOp::create(b, add.getLoc(), ValueRange{sum->getResult(0), norm->getResult(0)});
    ln.getResult().replaceAllUsesWith(fused.getResult(1));
    add.getResult().replaceAllUsesWith(fused.getResult(0));
    ln.erase();
    add.erase();
    for (CastOp cast : casts)
      cast.erase();
    ++n;
  }
  return n;
}

/// `%g, %dw, %db = gpt.layernorm_grad %dy, %x, %w; %s = gpt.add %acc, %g;
/// %h = gpt.cast %s` (narrowing) becomes one row-gradient gpt.fusion at the
/// layernorm_grad, whose row kernel stores %s and %h: dx never goes to
/// memory. Bit-identical for an f32 %x (the same f32 sum, rounded once).
/// Without a narrowing reader of %s (a narrow residual stream, or fp32)
/// only %s is stored; for a narrow %x the body widens %x and %acc, so dx
/// joins in f32 and the sum is rounded once where the unfused step rounds
/// dx and then the sum.
int64_t fuseLayerNormGradAdd(Block &block) {
  int64_t n = 0;
  // Collected first: the rewrite erases ops after the layernorm_grad.
  SmallVector<LayerNormGradOp> grads(block.getOps<LayerNormGradOp>());
  for (LayerNormGradOp ln : grads) {
    if (!ln.getInputGrad().hasOneUse())
      continue;
    auto add = llvm::dyn_cast<AddOp>(*ln.getInputGrad().getUsers().begin());
    if (!add || add->getBlock() != &block)
      continue;
    Value acc = add.getLhs() == ln.getInputGrad() ? add.getRhs() : add.getLhs();
    if (acc == ln.getInputGrad() || !gptc::availableBefore(acc, ln))
      continue;
    CastOp narrow;
    for (Operation *user : add->getUsers())
      if (auto cast = llvm::dyn_cast<CastOp>(user); cast && narrows(cast))
        narrow = cast;
    OpBuilder b(ln);
    Location loc = ln.getLoc();
    SmallVector<Type> types = {add.getType()};
    if (narrow)
      types.push_back(narrow.getType());
    types.append({ln.getWeightGrad().getType(), ln.getBiasGrad().getType()});
    SmallVector<Value> inputs = {ln.getGrad(), ln.getInput(), ln.getWeight(), acc};
    auto fused = gptc::createFusion(b, loc, types, inputs);
    Block &body = fused.getBody().front();
    // dx and the sum in f32 (the input's type when it is wider).
    auto xType = llvm::cast<RankedTensorType>(ln.getInput().getType());
    Type wide = xType.getElementType().getIntOrFloatBitWidth() < 32 ? b.getF32Type()
                                                                    : xType.getElementType();
    Value x = gptc::castElements(b, loc, body.getArgument(1), wide);
    auto grad = LayerNormGradOp::create(b, loc, TypeRange{x.getType(), ln.getWeightGrad().getType(),
                                                          ln.getBiasGrad().getType()},
                                        body.getArgument(0), x, body.getArgument(2),
                                        ln.getEpsilonAttr());
    Value sum = AddOp::create(b, loc, gptc::castElements(b, loc, body.getArgument(3), wide),
                              grad.getInputGrad());
    // The sum as the add stored it, and the narrow copy of that.
    SmallVector<Value> yielded = {
        gptc::castElements(b, loc, sum, add.getType().getElementType())};
    if (narrow)
      yielded.push_back(gptc::castElements(b, loc, yielded[0], narrow.getType().getElementType()));
    yielded.append({grad.getWeightGrad(), grad.getBiasGrad()});
    YieldOp::create(b, loc, yielded);
    add.getResult().replaceAllUsesWith(fused.getResult(0));
    if (narrow) {
      narrow.getResult().replaceAllUsesWith(fused.getResult(1));
      narrow.erase();
    }
    ln.getWeightGrad().replaceAllUsesWith(fused.getResults()[types.size() - 2]);
    ln.getBiasGrad().replaceAllUsesWith(fused.getResults()[types.size() - 1]);
    add.erase();
    ln.erase();
    ++n;
  }
  return n;
}

struct Fuser {
  Block &block;
  llvm::DenseMap<Operation *, int64_t> pos;
  llvm::DenseMap<Operation *, int> groupOf;
  std::vector<std::vector<Operation *>> groups; // members in block order; empty once merged
  bool siblings;
  unsigned maxArguments;

  Fuser(Block &block, bool siblings, unsigned maxArguments)
      : block(block), siblings(siblings), maxArguments(maxArguments) {
    int64_t n = 0;
    for (Operation &op : block)
      pos[&op] = n++;
  }

  bool argumentsOnly(const std::vector<Operation *> &g) {
    for (Operation *m : g)
      for (Value v : m->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && !llvm::isa<ConstantOp>(def) && !llvm::is_contained(g, def))
          return false;
      }
    return true;
  }

  /// Whether `g` can be computed at one point: its first member if it reads
  /// only arguments, else its last, which no outside reader may precede.
  bool legal(const std::vector<Operation *> &g) {
    if (argumentsOnly(g))
      return true;
    int64_t last = 0;
    for (Operation *m : g)
      last = std::max(last, pos[m]);
    for (Operation *m : g)
      for (Operation *user : m->getUsers())
        if (pos.lookup(user) < last && !llvm::is_contained(g, user))
          return false;
    return true;
  }

  /// The fusion's operands plus results, were `g` one: its kernel's pointers.
  static size_t numArguments(const std::vector<Operation *> &g) {
    llvm::SmallPtrSet<Operation *, 16> members(g.begin(), g.end());
    llvm::SmallPtrSet<void *, 16> inputs;
    size_t results = 0;
    for (Operation *m : g) {
      for (Value v : m->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && (members.contains(def) || llvm::isa<ConstantOp>(def))))
          inputs.insert(v.getAsOpaquePointer());
      }
      results += llvm::any_of(m->getResult(0).getUsers(),
                              [&](Operation *u) { return !members.contains(u); });
    }
    return inputs.size() + results;
  }

  static std::vector<Operation *> unite(const std::vector<Operation *> &a,
                                        const std::vector<Operation *> &b,
                                        llvm::DenseMap<Operation *, int64_t> &pos) {
    std::vector<Operation *> u(a);
    u.insert(u.end(), b.begin(), b.end());
    llvm::sort(u, [&](Operation *x, Operation *y) { return pos[x] < pos[y]; });
    return u;
  }

  void absorb(int into, int from) {
    for (Operation *m : groups[from])
      groupOf[m] = into;
    groups[into] = unite(groups[into], groups[from], pos);
    groups[from].clear();
  }

  /// The micro-batch of `g`'s accumulation adds, or -1 if it has none.
  static int64_t microBatch(const std::vector<Operation *> &g) {
    for (Operation *m : g)
      if (auto a = m->getAttrOfType<IntegerAttr>(kMicroBatchAttrName))
        return a.getInt();
    return -1;
  }

  /// Accumulation adds of two micro-batches stay apart: one group would run
  /// at the later one's end, keeping the earlier gradients alive across a
  /// whole forward and backward (8 micro-batches nearly doubled 124M's peak).
  static bool sameMicroBatch(const std::vector<Operation *> &a,
                             const std::vector<Operation *> &b) {
    int64_t x = microBatch(a), y = microBatch(b);
    return x < 0 || y < 0 || x == y;
  }

  void chains() {
    for (Operation &op : block) {
      if (!fusible(&op))
        continue;
      int g = static_cast<int>(groups.size());
      groups.push_back({&op});
      groupOf[&op] = g;
      for (OpOperand &use : op.getOpOperands()) {
        // A bias is read at other indices: it does not join through bias_add.
        if (llvm::isa<BiasAddOp>(op) && use.getOperandNumber() == 1)
          continue;
        Operation *def = use.get().getDefiningOp();
        auto it = def ? groupOf.find(def) : groupOf.end();
        if (it == groupOf.end() || it->second == g || numel(use.get()) != numel(op.getResult(0)))
          continue;
        if (!sameMicroBatch(groups[g], groups[it->second]))
          continue;
        std::vector<Operation *> u = unite(groups[g], groups[it->second], pos);
        if (legal(u) && numArguments(u) <= maxArguments)
          absorb(g, it->second);
      }
    }
  }

  /// The op names and types of a group, in order: groups with one structure
  /// are siblings.
  std::string structure(const std::vector<Operation *> &g) {
    std::string s;
    llvm::raw_string_ostream os(s);
    for (Operation *m : g) {
      os << m->getName() << "(";
      for (Type t : m->getOperandTypes())
        os << llvm::cast<RankedTensorType>(t).getElementType() << ",";
      os << ")" << llvm::cast<RankedTensorType>(m->getResult(0).getType()).getElementType()
         << ";";
    }
    if (int64_t micro = microBatch(g); micro >= 0)
      os << "micro_batch " << micro;
    return s;
  }

  void siblingGroups() {
    // Open sibling group per structure; a group that cannot join starts a
    // new one. Visited in order of first member, so placement stays sane.
    std::map<std::string, int> open;
    for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
      // Recomputed values (gpt-rematerialize) sit where the backward reads
      // them: a sibling merge would move them back next to the forward's.
      if (groups[g].empty() || llvm::any_of(groups[g], [](Operation *m) {
            return m->hasAttr("gpt.remat");
          }))
        continue;
      auto [it, inserted] = open.try_emplace(structure(groups[g]), g);
      if (inserted)
        continue;
      int into = it->second;
      std::vector<Operation *> u = unite(groups[into], groups[g], pos);
      // Siblings of one structure either all read arguments or none do.
      if (argumentsOnly(groups[into]) == argumentsOnly(groups[g]) && legal(u) &&
          numArguments(u) <= maxArguments)
        absorb(into, g);
      else
        it->second = g;
    }
  }

  /// Replaces group `g` (two or more ops) with a gpt.fusion.
  void build(const std::vector<Operation *> &g) {
    llvm::SmallPtrSet<Operation *, 16> members(g.begin(), g.end());
    llvm::SetVector<Value> inputs;
    for (Operation *m : g)
      for (Value v : m->getOperands()) {
        Operation *def = v.getDefiningOp();
        if ((def && members.contains(def)) || (def && llvm::isa<ConstantOp>(def)))
          continue;
        inputs.insert(v);
      }
    SmallVector<Value> outs;
    for (Operation *m : g)
      for (Operation *user : m->getResult(0).getUsers())
        if (!members.contains(user)) {
          outs.push_back(m->getResult(0));
          break;
        }
    Operation *at = argumentsOnly(g) ? g.front() : g.back();
    OpBuilder b(at);
    Location loc = b.getFusedLoc(llvm::map_to_vector(g, [](Operation *m) { return m->getLoc(); }));
    auto fusion = gptc::createFusion(b, loc, TypeRange(ValueRange(outs)), inputs.getArrayRef());
    IRMapping map;
    map.map(inputs.getArrayRef(), fusion.getBody().getArguments());
    for (Operation *m : g)
      for (Value v : m->getOperands())
        if (auto c = v.getDefiningOp<ConstantOp>(); c && !map.contains(v))
          map.map(v, b.clone(*c)->getResult(0));
    for (Operation *m : g)
      b.clone(*m, map);
    YieldOp::create(b, loc, llvm::map_to_vector(outs, [&](Value v) { return map.lookup(v); }));
    for (auto [v, r] : llvm::zip(outs, fusion.getResults()))
      v.replaceAllUsesWith(r);
    for (Operation *m : llvm::reverse(g))
      m->erase();
  }

  int run() {
    chains();
    if (siblings)
      siblingGroups();
    int made = 0;
    for (const std::vector<Operation *> &g : groups)
      if (g.size() > 1) {
        build(g);
        ++made;
      }
    // Constants now cloned into every fusion that read them.
    for (Operation &op : llvm::make_early_inc_range(block))
      if (llvm::isa<ConstantOp>(op) && op.use_empty())
        op.erase();
    return made;
  }
};

struct FuseElementwisePass
    : public gptc::impl::FuseElementwisePassBase<FuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        continue;
      Block &block = fn.getBody().front();
      if (narrowRowOutputs)
        numNarrowed += narrowOutputs(block) + narrowGradInputs(block);
      if (addLayerNorm)
        numAddLayerNorms += fuseAddLayerNorm(block) + fuseLayerNormGradAdd(block);
      // The GELU layer's bias gradient; the qkv projection's.
      if (geluGradSum)
        numGeluGradSums += fuseColumnSum<GeluGradOp>(block);
      if (attentionGradSum)
        numAttentionGradSums += fuseColumnSum<CausalAttentionGradOp>(block);
      int64_t before = 0;
      for (Operation &op : block)
        before += fusible(&op);
      numFusions += Fuser(block, siblings, maxArguments).run();
      int64_t after = 0;
      for (Operation &op : block)
        after += fusible(&op);
      numFused += before - after;
    }
  }
};

} // namespace
