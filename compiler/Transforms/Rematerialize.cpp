//===- Rematerialize.cpp - recompute activations to fit a memory budget ---===//
//
/// Algorithm (see Passes.td): while the estimated peak (arguments plus the
/// largest sum of activation buffers live at one point, BufferLiveness)
/// exceeds the budget, take the buffers live at the peak point p that are
/// defined before p and read only after it; for each, find the ops that
/// rebuild it right before its first read after p from values that stay
/// live there anyway (recursively, up to max-depth ops deep); clone the
/// cheapest chain per byte freed there and point the reads after p at it.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/BufferLiveness.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

namespace gptc {
#define GEN_PASS_DEF_REMATERIALIZEPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;
using namespace gptc;

namespace {

constexpr StringLiteral kRematAttr = "gpt.remat";
constexpr StringLiteral kRematPlanAttr = "gpt.remat_plan";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Cost unit: a FLOP. An H200 does ~1e15 bf16 FLOP/s and moves ~4.8e12
// bytes/s, so a byte of traffic costs ~200 FLOPs and a launch (~4 us)
// 4e9: chains of tiny ops are not worth their launches.
constexpr double kFlopsPerByte = 200.0;
constexpr double kLaunchFlops = 4.0e9;

int64_t numElements(Type t) { return llvm::cast<ShapedType>(t).getNumElements(); }

/// 2 M N K of a product whose lhs is `lhs` (transposed or not) and whose
/// result is `y`.
double gemmFlops(Value lhs, bool transposeLhs, Type y) {
  ArrayRef<int64_t> shape = llvm::cast<ShapedType>(lhs.getType()).getShape();
  int64_t k = transposeLhs ? shape[shape.size() - 2] : shape.back();
  return 2.0 * numElements(y) * k;
}

/// FP8's scales and casts: the values of a tensor in another format.
bool isFp8Cast(Operation *op) {
  return llvm::isa_and_nonnull<Fp8ScaleOp, Fp8QuantizeOp, Fp8CastTransposeOp>(op);
}

/// `v` is the amax history a quantization records in (delayed scaling):
/// its clone quantizes the same values without recording them again.
bool isRecordedHistory(Operation *op, Value v) {
  return !llvm::isa<Fp8ScaleOp>(op) && v && getFp8History(op).history == v;
}

/// A clone of `op` at `b` reading `map`'s values; a recording
/// quantization's clone records nothing (the original's amax stands).
Operation *cloneWithoutRecording(OpBuilder &b, Operation *op, IRMapping &map) {
  if (llvm::isa<Fp8ScaleOp>(op) || !getFp8History(op).history)
    return b.clone(*op, map);
  Operation *clone = cloneFp8Quantization(b, op, /*history=*/Value(), map);
  for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
    map.map(from, to); // all but `recorded`, which the clone lacks
  return clone;
}

/// Arithmetic of one op, roughly: GEMMs and attention exactly, every other
/// op one FLOP per element it reads or writes.
double opFlops(Operation *op) {
  if (viewSource(op))
    return 0;
  if (auto l = llvm::dyn_cast<LinearOp>(op))
    return 2.0 * numElements(l.getType()) * l.getInput().getType().getShape().back();
  if (auto m = llvm::dyn_cast<MatmulOp>(op))
    return gemmFlops(m.getLhs(), m.getTransposeLhs(), m.getType());
  if (auto m = llvm::dyn_cast<ScaledMatmulOp>(op))
    return gemmFlops(m.getLhs(), m.getTransposeLhs(), m.getType());
  // Causal: half of q k^T and of p v, each 2 B T T C.
  if (auto a = llvm::dyn_cast<CausalAttentionOp>(op)) {
    ArrayRef<int64_t> y = a.getResult().getType().getShape();
    return 2.0 * y[0] * y[1] * y[1] * y[2];
  }
  if (auto g = llvm::dyn_cast<CausalAttentionGradOp>(op)) {
    ArrayRef<int64_t> y = llvm::cast<ShapedType>(g->getOperand(0).getType()).getShape();
    return 5.0 * y[0] * y[1] * y[1] * y[2];
  }
  double n = 0;
  for (Type t : op->getOperandTypes())
    n = std::max<double>(n, numElements(t));
  for (Type t : op->getResultTypes())
    n = std::max<double>(n, numElements(t));
  return n;
}

/// What recomputing `op` costs, in FLOP-equivalents (see kFlopsPerByte).
double opCost(Operation *op) {
  if (viewSource(op))
    return 0;
  double bytes = 0;
  for (Type t : op->getOperandTypes())
    bytes += tensorBytes(t);
  for (Type t : op->getResultTypes())
    bytes += tensorBytes(t);
  return kLaunchFlops + opFlops(op) + kFlopsPerByte * bytes;
}

/// Ops that may run twice with the same result: pure gpt ops of one
/// result (and FP8's casts, of two), except randomness and the optimizer
/// (AdamW, its norm and lr).
bool isRecomputable(Operation *op) {
  // A cast-transpose's clone writes both layouts; the one not read after
  // the peak dies at once.
  if (!op || (op->getNumResults() != 1 && !isFp8Cast(op)) ||
      !llvm::isa<GPTDialect>(op->getDialect()) || !isPure(op))
    return false;
  return !llvm::isa<RandomNormalOp, AdamWOp, AllReduceOp, GlobalNormOp, LRScheduleOp, RankSliceOp>(op);
}

/// One way to free a buffer live at the peak: the ops to clone (operands
/// first) before `insertBefore`, and the reads after the peak to redirect.
struct Candidate {
  int buffer = -1;
  Operation *insertBefore = nullptr;
  SmallVector<Operation *> chain;
  SmallVector<OpOperand *> lateUses;
  double cost = 0;
};

struct Rematerializer {
  func::FuncOp fn;
  int64_t maxDepth;
  const BufferLiveness &l;

  /// The buffer of `v` still holds it at point `q` without recomputation.
  bool available(Value v, int64_t q, int freed) const {
    BufferHome h = l.homes.lookup(v);
    if (h.buffer < 0)
      return true; // an argument's bytes
    return h.buffer != freed && l.buffers[h.buffer].last >= q;
  }

  /// Adds to `chain` (operands first) the ops rebuilding `v` at `q`.
  bool rebuild(Value v, int64_t q, int freed, int64_t depth, llvm::SetVector<Operation *> &chain) {
    if (available(v, q, freed))
      return true;
    // A value of one alignment unit or less (an FP8 scale) is read late
    // instead: its longer life costs less than recomputing it.
    BufferHome h = l.homes.lookup(v);
    if (h.buffer != freed && tensorBytes(v.getType()) <= l.alignment)
      return true;
    Operation *def = v.getDefiningOp();
    if (chain.contains(def))
      return true;
    // Views and FP8 scales and casts are not counted: an FP8 product is
    // three ops deep where its bf16 twin is one.
    bool free = def && (viewSource(def) || isFp8Cast(def));
    if (!isRecomputable(def) || (!free && depth >= maxDepth))
      return false;
    for (Value operand : def->getOperands())
      if (!isRecordedHistory(def, operand) &&
          !rebuild(operand, q, freed, free ? depth : depth + 1, chain))
        return false;
    chain.insert(def);
    return true;
  }

  /// The plan freeing buffer `b` at the peak, if any.
  std::optional<Candidate> candidate(int b) {
    const LiveBuffer &buf = l.buffers[b];
    int64_t p = l.peakPoint;
    if (buf.first >= p || !isRecomputable(buf.value.getDefiningOp()))
      return std::nullopt;
    // The value and its views defined before p; reads after p move to the
    // rebuilt values, a read at p keeps the buffer live.
    Candidate c;
    c.buffer = b;
    int64_t q = l.numPoints;
    // The reads after p of `v` and its views, or none if one is at p or
    // cannot move (a return, a collective).
    auto lateReads = [&](Value v) -> std::optional<SmallVector<OpOperand *>> {
      SmallVector<OpOperand *> late;
      SmallVector<Value> aliases = {v};
      for (size_t i = 0; i < aliases.size(); ++i)
        for (OpOperand &use : aliases[i].getUses()) {
          Operation *user = use.getOwner();
          if (llvm::isa<func::ReturnOp, AllReduceOp, ReduceScatterOp, AllGatherOp>(user))
            return std::nullopt;
          int64_t at = l.index.lookup(user);
          if (at == p)
            return std::nullopt;
          if (at > p)
            late.push_back(&use);
          else if (viewSource(user))
            aliases.push_back(user->getResult(0));
        }
      return late;
    };
    std::optional<SmallVector<OpOperand *>> late = lateReads(buf.value);
    if (!late || late->empty())
      return std::nullopt;
    c.lateUses = std::move(*late);
    // The clone of a multi-result op (a cast-transpose) rebuilds its other
    // results too: their late reads move to it where they can.
    for (Value sibling : buf.value.getDefiningOp()->getResults())
      if (sibling != buf.value)
        if (std::optional<SmallVector<OpOperand *>> more = lateReads(sibling))
          llvm::append_range(c.lateUses, *more);
    for (OpOperand *use : c.lateUses) {
      int64_t at = l.index.lookup(use->getOwner());
      if (at < q) {
        q = at;
        c.insertBefore = use->getOwner();
      }
    }
    llvm::SetVector<Operation *> chain;
    for (OpOperand *use : c.lateUses)
      if (!rebuild(use->get(), q, b, 0, chain))
        return std::nullopt;
    c.chain.assign(chain.begin(), chain.end());
    for (Operation *op : c.chain)
      c.cost += opCost(op);
    return c;
  }

  /// Clones `c`'s chain before its first late read and redirects the reads.
  void apply(const Candidate &c) {
    OpBuilder b(c.insertBefore);
    IRMapping map;
    for (Operation *op : c.chain) {
      Operation *clone = cloneWithoutRecording(b, op, map);
      clone->setAttr(kRematAttr, b.getUnitAttr());
    }
    for (OpOperand *use : c.lateUses)
      use->set(map.lookup(use->get()));
  }
};

/// Merging later clones into earlier ones that compute the same (the
/// layernorm that both a Q/K/V projection and its weight gradient rebuild):
/// the later clones' readers read the earlier ones, one launch fewer each
/// for a longer life, taken only where the peak stays within `limit`.
struct CloneMerger {
  const BufferLiveness &l;
  int64_t limit;

  /// `later` computes what `earlier` does once the values in `same` are
  /// taken as equal (a later clone -> the earlier one it merges into).
  static bool duplicates(Operation *earlier, Operation *later,
                         const llvm::DenseMap<Value, Value> &same) {
    return later != earlier && later->hasAttr(kRematAttr) && earlier->hasAttr(kRematAttr) &&
           !viewSource(earlier) &&
           later->getBlock() == earlier->getBlock() && earlier->isBeforeInBlock(later) &&
           OperationEquivalence::isEquivalentTo(
               earlier, later,
               [&](Value a, Value b) { return success(a == b || same.lookup(b) == a); },
               nullptr, OperationEquivalence::IgnoreLocations);
  }

  /// The pairs (earlier, later) merging `later` into `earlier` brings,
  /// their readers that then compute the same included.
  void collect(Operation *earlier, Operation *later,
               SmallVectorImpl<std::pair<Operation *, Operation *>> &pairs,
               llvm::DenseMap<Value, Value> &same) {
    pairs.push_back({earlier, later});
    same[later->getResult(0)] = earlier->getResult(0);
    for (Operation *a : earlier->getUsers())
      for (Operation *b : later->getUsers())
        if (a->getNumResults() == 1 && b->getNumResults() == 1 &&
            !same.count(a->getResult(0)) && !same.count(b->getResult(0)) &&
            duplicates(a, b, same))
          collect(a, b, pairs, same);
  }

  /// A clone whose bytes are its own: no other value lives in its buffer
  /// and no reader overwrites it in place (more readers could change that).
  bool ownsBuffer(Operation *clone) const {
    Value v = clone->getResult(0);
    BufferHome h = l.homes.lookup(v);
    if (h.buffer < 0 || l.buffers[h.buffer].value != v)
      return false;
    for (Operation *user : v.getUsers())
      for (OpResult r : user->getResults())
        if (overwrittenOperand(r) == v)
          return false;
    return true;
  }

  /// The activation bytes at the peak once each pair's later clone is
  /// gone and its earlier one lives until the later one's last read; none
  /// when a clone shares its bytes (the estimate would not hold).
  std::optional<int64_t> peakAfter(ArrayRef<std::pair<Operation *, Operation *>> pairs) const {
    std::vector<LiveBuffer> buffers = l.buffers;
    for (auto [earlier, later] : pairs) {
      if (!ownsBuffer(earlier) || !ownsBuffer(later))
        return std::nullopt;
      LiveBuffer &e = buffers[l.homes.lookup(earlier->getResult(0)).buffer];
      LiveBuffer &g = buffers[l.homes.lookup(later->getResult(0)).buffer];
      e.last = std::max(e.last, g.last);
      g.size = 0; // gone with the later clone
    }
    return peakLiveBytes(buffers, l.numPoints).first;
  }

  /// One merge that fits (its pairs), or none.
  SmallVector<std::pair<Operation *, Operation *>> next() {
    for (Operation &op : const_cast<func::FuncOp &>(l.fn).getBody().front()) {
      if (!op.hasAttr(kRematAttr) || op.getNumOperands() == 0 || op.getNumResults() != 1)
        continue;
      for (Operation *later : op.getOperand(0).getUsers()) {
        llvm::DenseMap<Value, Value> same;
        if (!duplicates(&op, later, same))
          continue;
        SmallVector<std::pair<Operation *, Operation *>> pairs;
        collect(&op, later, pairs, same);
        std::optional<int64_t> peak = peakAfter(pairs);
        if (peak && l.argumentBytes() + *peak <= limit)
          return pairs;
      }
    }
    return {};
  }

  /// Makes the later clones' readers read the earlier ones; erases them.
  static void merge(ArrayRef<std::pair<Operation *, Operation *>> pairs) {
    for (auto [earlier, later] : pairs)
      later->replaceAllUsesWith(earlier);
    for (auto [earlier, later] : llvm::reverse(pairs))
      later->erase();
  }
};

/// "live at the peak: A of arguments, B of activations (...)".
std::string peakContents(const BufferLiveness &l) {
  return llvm::formatv("live at the peak: {0} of arguments, {1} of activations ({2})",
                       gptc::formatBytes(l.argumentBytes()), gptc::formatBytes(l.peakBytes),
                       describePeak(l))
      .str();
}

/// Moves each widening gpt.cast read by one later op of its block to just
/// before that op: the narrow value lives on instead of the wide one. (The
/// micro-batch sums read their first gradient's f32 cast at the step's
/// end; gpt-fuse-elementwise would fuse the cast into the sum later, and
/// the plan here would count the wide copy across every later micro-batch.)
void sinkWideningCasts(func::FuncOp fn) {
  for (auto cast : llvm::to_vector(fn.getBody().front().getOps<CastOp>())) {
    if (!cast->hasOneUse() ||
        tensorBytes(cast.getType()) <= tensorBytes(cast.getInput().getType()))
      continue;
    Operation *user = *cast->getUsers().begin();
    if (user->getBlock() != cast->getBlock() || user == cast->getNextNode())
      continue;
    cast->moveBefore(user);
  }
}

struct RematerializePass : public gptc::impl::RematerializePassBase<RematerializePass> {
  using Base::Base;

  void runOnOperation() override {
    if (!(memoryBudget >= 0) || !std::isfinite(memoryBudget)) {
      getOperation().emitError("gpt-rematerialize: memory-budget must be a number of GiB >= 0");
      return signalPassFailure();
    }
    if (!(headroom >= 0 && headroom < 1)) {
      getOperation().emitError("gpt-rematerialize: headroom must be a fraction in [0, 1)");
      return signalPassFailure();
    }
    func::FuncOp fn = getOperation();
    // The budget is the training step's: only it keeps activations for a
    // backward.
    if (memoryBudget == 0 || !gptc::isTrainStep(fn))
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("gpt-rematerialize: @") << fn.getName() << " has more than one block";
      return signalPassFailure();
    }
    if (failed(run(fn)))
      return signalPassFailure();
  }

  /// Argument bytes plus the activation pool gpt-plan-memory would place.
  static int64_t placedPeak(const BufferLiveness &l) {
    std::vector<LiveBuffer> buffers = l.buffers;
    return l.argumentBytes() + placeBuffers(buffers);
  }

  LogicalResult run(func::FuncOp fn) {
    const int64_t budget = static_cast<int64_t>(memoryBudget * kGiB);
    // The fusions after this pass may lengthen a lifetime a little.
    const int64_t target = budget - static_cast<int64_t>(headroom * static_cast<double>(budget));
    double stepFlops = 0, stepCost = 0;
    fn.walk([&](Operation *op) {
      if (llvm::isa<GPTDialect>(op->getDialect())) {
        stepFlops += opFlops(op);
        stepCost += opCost(op);
      }
    });

    sinkWideningCasts(fn);
    FailureOr<BufferLiveness> l = BufferLiveness::compute(fn, alignment, "gpt-rematerialize");
    if (failed(l))
      return failure();
    const int64_t before = placedPeak(*l);
    int64_t after = before, values = 0, ops = 0;
    double extraFlops = 0, extraCost = 0;
    std::map<std::string, int64_t> kinds; // op name of each recomputed value
    // The loop estimates with the live lower bound; the placement may need
    // more: `slack` grows by the difference until the placed plan fits.
    int64_t slack = 0;
    for (int round = 0; round < 8 && after > target; ++round) {
      while (l->argumentBytes() + l->peakBytes + slack > target) {
        Rematerializer r{fn, maxDepth, *l};
        std::optional<Candidate> best;
        for (int b : l->liveAtPeak) {
          std::optional<Candidate> c = r.candidate(b);
          if (c && (!best || c->cost / l->buffers[c->buffer].size <
                                 best->cost / l->buffers[best->buffer].size))
            best = std::move(c);
        }
        if (!best)
          break;
        ++values;
        kinds[opKindName(l->buffers[best->buffer].value.getDefiningOp())]++;
        r.apply(*best);
        l = BufferLiveness::compute(fn, alignment, "gpt-rematerialize");
        if (failed(l))
          return failure();
      }
      // Clones of the same ops share them where the estimate still fits.
      for (;;) {
        auto pairs = CloneMerger{*l, target - slack}.next();
        if (pairs.empty())
          break;
        CloneMerger::merge(pairs);
        l = BufferLiveness::compute(fn, alignment, "gpt-rematerialize");
        if (failed(l))
          return failure();
      }
      int64_t placed = placedPeak(*l);
      int64_t estimate = l->argumentBytes() + l->peakBytes;
      after = placed;
      if (estimate + slack > target)
        break; // no candidate left
      slack = std::max<int64_t>(slack + 1, placed - estimate);
    }

    // What the plan adds, merged clones counted once.
    fn.walk([&](Operation *op) {
      if (!op->hasAttr(kRematAttr))
        return;
      ++ops;
      extraFlops += opFlops(op);
      extraCost += opCost(op);
    });
    numValues += values;
    numOps += ops;
    Builder b(fn.getContext());
    fn->setAttr(kRematPlanAttr,
                b.getDictionaryAttr({
                    b.getNamedAttr("budget", b.getI64IntegerAttr(budget)),
                    b.getNamedAttr("values", b.getI64IntegerAttr(values)),
                    b.getNamedAttr("ops", b.getI64IntegerAttr(ops)),
                    b.getNamedAttr("peak_before", b.getI64IntegerAttr(before)),
                    b.getNamedAttr("peak_after", b.getI64IntegerAttr(after)),
                    b.getNamedAttr("step_flops", b.getI64IntegerAttr(int64_t(stepFlops))),
                    b.getNamedAttr("extra_flops", b.getI64IntegerAttr(int64_t(extraFlops))),
                }));
    std::string what;
    for (auto &[name, count] : kinds)
      what += llvm::formatv("{0}{1} x{2}", what.empty() ? "" : ", ", name, count).str();
    auto gib = [](int64_t bytes) { return gptc::formatBytes(bytes); };
    if (after > budget)
      return fn.emitError() << "gpt-rematerialize: @" << fn.getName()
                            << " does not fit the memory budget of " << gib(budget)
                            << ": the best plan found peaks at " << gib(after) << " (from "
                            << gib(before) << "; arguments alone take "
                            << gib(l->argumentBytes()) << ") after recomputing " << values
                            << " values";
    fn.emitRemark() << "gpt-rematerialize: @" << fn.getName() << " planned peak " << gib(before)
                    << " -> " << gib(after) << " (budget " << gib(budget) << ", fitted to "
                    << gib(target) << "): "
                    << (values ? "recomputes " + std::to_string(values) + " values (" +
                                     std::to_string(ops) + " ops: " + what + ")"
                               : std::string("nothing recomputed"))
                    << ", " << gib(before - after) << " saved, +"
                    << llvm::formatv("{0:f1}", stepFlops > 0 ? 100.0 * extraFlops / stepFlops : 0)
                    << "% FLOPs (+"
                    << llvm::formatv("{0:f1}", stepCost > 0 ? 100.0 * extraCost / stepCost : 0)
                    << "% by the cost model); " << peakContents(*l);
    return success();
  }
};

} // namespace
