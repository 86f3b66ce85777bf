//===- PlanMemory.cpp - liveness-based static memory plan ----------------===//
//
/// Algorithm (see Passes.td): number the ops, give each non-view result a
/// buffer with a [def, last use] lifetime, merge views and in-place AdamW
/// updates into their source's buffer, then place buffers largest first at
/// the lowest aligned offset free of conflicts with placed, overlapping
/// buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace gptc {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

constexpr StringLiteral kOffsetsAttr = "gpt.offsets";
constexpr StringLiteral kPlanAttr = "gpt.memory_plan";
constexpr StringLiteral kPoolAttr = "gpt.pool";
constexpr StringLiteral kArgOffsetAttr = "gpt.offset";

int64_t bytesOf(Type t) {
  auto shaped = llvm::cast<ShapedType>(t);
  int64_t bits = shaped.getElementTypeBitWidth();
  return shaped.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

int64_t alignTo(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// The buffer a value lives in: an argument, or an activation buffer.
struct Home {
  int buffer = -1;        // index into buffers, -1 for an argument
  BlockArgument arg;      // the argument when buffer == -1
  int64_t viewOffset = 0; // bytes into the home buffer
};

struct Buffer {
  int64_t size = 0, first = 0, last = 0, offset = -1;
};

/// The argument pool of a function argument, by its name attribute.
StringRef poolOf(func::FuncOp fn, unsigned i) {
  if (fn.getArgAttr(i, kParamAttrName))
    return "params";
  if (fn.getArgAttr(i, gptc::kStateAttrName))
    return "state";
  return "inputs";
}

/// A view keeps its operand's bytes: reshape, or a slice of dimension 0.
std::optional<std::pair<Value, int64_t>> viewSource(Operation *op) {
  if (auto r = llvm::dyn_cast<ReshapeOp>(op))
    return std::make_pair(r.getInput(), int64_t{0});
  if (auto s = llvm::dyn_cast<SliceOp>(op); s && s.getDim() == 0) {
    auto t = s.getInput().getType();
    return std::make_pair(s.getInput(), s.getStart() * bytesOf(t) / t.getDimSize(0));
  }
  return std::nullopt;
}

/// An all_reduce result reduces its operand in place when nothing else
/// reads the operand and the operand owns its buffer (not a view, not an
/// argument's bytes).
bool reducesInPlace(AllReduceOp op, unsigned i) {
  Value in = op.getInputs()[i];
  Operation *def = in.getDefiningOp();
  return def && in.hasOneUse() && !viewSource(def) && !llvm::isa<AdamWOp, AllReduceOp>(def);
}

/// The values of `user` that share `v`'s bytes: a view of it, or an
/// in-place all_reduce result.
SmallVector<Value, 1> aliasesOf(Operation *user, Value v) {
  SmallVector<Value, 1> out;
  if (viewSource(user))
    out.push_back(user->getResult(0));
  else if (auto ar = llvm::dyn_cast<AllReduceOp>(user))
    for (auto [i, in] : llvm::enumerate(ar.getInputs()))
      if (in == v && reducesInPlace(ar, i))
        out.push_back(ar.getResult(i));
  return out;
}

struct Planner {
  func::FuncOp fn;
  int64_t alignment;
  llvm::DenseMap<Operation *, int64_t> index;
  llvm::DenseMap<Value, Home> homes;
  std::vector<Buffer> buffers;

  /// Last program point where `v` or an alias of it is read.
  int64_t lastUse(Value v, int64_t end) {
    int64_t last = index.lookup(v.getDefiningOp());
    for (Operation *user : v.getUsers()) {
      if (llvm::isa<func::ReturnOp>(user))
        return end;
      last = std::max(last, index.lookup(user));
      for (Value alias : aliasesOf(user, v))
        last = std::max(last, lastUse(alias, end));
    }
    return last;
  }

  LogicalResult run() {
    Block &body = fn.getBody().front();
    int64_t n = 0;
    for (Operation &op : body)
      index[&op] = n++;
    for (BlockArgument arg : body.getArguments())
      homes[arg] = Home{-1, arg, 0};

    for (Operation &op : body.without_terminator()) {
      if (llvm::isa<func::CallOp>(op))
        return op.emitOpError("gpt-plan-memory: inline calls first");
      if (auto view = viewSource(&op)) {
        Home h = homes.lookup(view->first);
        h.viewOffset += view->second;
        homes[op.getResult(0)] = h;
        continue;
      }
      if (auto adam = llvm::dyn_cast<AdamWOp>(op); adam && inPlace(adam)) {
        // A named vector: a braced ValueRange in the loop header would dangle.
        SmallVector<Value, 3> sources = {adam.getParam(), adam.getM(), adam.getV()};
        for (auto [res, src] : llvm::zip(adam->getResults(), sources))
          homes[res] = homes.lookup(src);
        continue;
      }
      auto allReduce = llvm::dyn_cast<AllReduceOp>(op);
      for (Value r : op.getResults()) {
        unsigned i = llvm::cast<OpResult>(r).getResultNumber();
        if (allReduce && reducesInPlace(allReduce, i)) {
          homes[r] = homes.lookup(allReduce.getInputs()[i]);
          continue;
        }
        homes[r] = Home{static_cast<int>(buffers.size()), BlockArgument(), 0};
        buffers.push_back({alignTo(bytesOf(r.getType()), alignment), index[&op],
                           lastUse(r, n), -1});
      }
    }
    place();
    annotate();
    return success();
  }

  /// AdamW may overwrite its parameter and moments when it reads them last
  /// and they are arguments (no other op's buffer is involved).
  bool inPlace(AdamWOp adam) {
    for (Value v : {adam.getParam(), adam.getM(), adam.getV()}) {
      if (!llvm::isa<BlockArgument>(v))
        return false;
      for (Operation *user : v.getUsers())
        if (user != adam.getOperation() && index.lookup(user) > index.lookup(adam))
          return false;
    }
    return true;
  }

  void place() {
    std::vector<int> order(buffers.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return buffers[a].size > buffers[b].size; });
    std::vector<int> placed;
    for (int i : order) {
      Buffer &buf = buffers[i];
      std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end) of live neighbours
      for (int j : placed)
        if (buffers[j].first <= buf.last && buf.first <= buffers[j].last)
          busy.push_back({buffers[j].offset, buffers[j].offset + buffers[j].size});
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + buf.size <= lo)
          break;
        offset = std::max(offset, hi);
      }
      buf.offset = offset;
      placed.push_back(i);
    }
  }

  void annotate() {
    Builder b(fn.getContext());
    int64_t peak = 0;
    for (const Buffer &buf : buffers)
      peak = std::max(peak, buf.offset + buf.size);
    Block &body = fn.getBody().front();
    for (Operation &op : body.without_terminator()) {
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        Home h = homes.lookup(r);
        offsets.push_back(h.buffer < 0 ? -1 : buffers[h.buffer].offset + h.viewOffset);
      }
      op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    }
    llvm::StringMap<int64_t> poolBytes;
    for (BlockArgument arg : body.getArguments()) {
      StringRef pool = poolOf(fn, arg.getArgNumber());
      int64_t &used = poolBytes[pool];
      fn.setArgAttr(arg.getArgNumber(), kPoolAttr, b.getStringAttr(pool));
      fn.setArgAttr(arg.getArgNumber(), kArgOffsetAttr, b.getI64IntegerAttr(used));
      used += alignTo(bytesOf(arg.getType()), alignment);
    }
    SmallVector<NamedAttribute> plan = {b.getNamedAttr("activations", b.getI64IntegerAttr(peak))};
    for (auto &entry : poolBytes)
      plan.push_back(b.getNamedAttr(entry.getKey(), b.getI64IntegerAttr(entry.getValue())));
    fn->setAttr(kPlanAttr, b.getDictionaryAttr(plan));
  }
};

struct PlanMemoryPass : public gptc::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = SymbolTable(getOperation()).lookup<func::FuncOp>(function);
    if (!fn || !fn.getBody().hasOneBlock()) {
      getOperation().emitError("gpt-plan-memory: no single-block function @") << function;
      return signalPassFailure();
    }
    if (alignment < 1 || (alignment & (alignment - 1))) {
      getOperation().emitError("gpt-plan-memory: alignment must be a power of two");
      return signalPassFailure();
    }
    Planner planner{fn, alignment, {}, {}, {}};
    if (failed(planner.run()))
      return signalPassFailure();
    numBuffers = planner.buffers.size();
    peakBytes = fn->getAttrOfType<DictionaryAttr>(kPlanAttr)
                    .getAs<IntegerAttr>("activations")
                    .getInt();
  }
};

} // namespace

LogicalResult gptc::verifyMemoryPlan(func::FuncOp fn) {
  auto plan = fn->getAttrOfType<DictionaryAttr>(kPlanAttr);
  if (!plan)
    return fn.emitError("no gpt.memory_plan");
  int64_t pool = plan.getAs<IntegerAttr>("activations").getInt();
  // Recompute lifetimes independently of the planner: a value (through
  // views) is live from its op to its last transitive use.
  Block &body = fn.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  struct Interval {
    Operation *op;
    int64_t first, last, lo, hi;
  };
  std::vector<Interval> intervals;
  std::function<int64_t(Value)> lastUse = [&](Value v) {
    int64_t last = v.getDefiningOp() ? index[v.getDefiningOp()] : 0;
    for (Operation *user : v.getUsers()) {
      last = std::max(last, index[user]);
      for (Value alias : aliasesOf(user, v))
        last = std::max(last, lastUse(alias));
    }
    return last;
  };
  for (Operation &op : body.without_terminator()) {
    if (viewSource(&op))
      continue;
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
    if (!offsets || static_cast<unsigned>(offsets.size()) != op.getNumResults())
      return op.emitOpError("has no gpt.offsets for its results");
    for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
      if (off < 0)
        continue; // in place in an argument
      if (auto ar = llvm::dyn_cast<AllReduceOp>(op);
          ar && reducesInPlace(ar, llvm::cast<OpResult>(r).getResultNumber()))
        continue; // in place in its operand, whose lifetime covers it
      int64_t size = bytesOf(r.getType());
      if (off + size > pool)
        return op.emitOpError("buffer [") << off << ", " << off + size
                                          << ") lies outside the pool of " << pool;
      intervals.push_back({&op, index[&op], lastUse(r), off, off + size});
    }
  }
  for (size_t i = 0; i < intervals.size(); ++i)
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      const Interval &a = intervals[i], &b = intervals[j];
      bool liveTogether = a.first <= b.last && b.first <= a.last;
      bool overlap = a.lo < b.hi && b.lo < a.hi;
      if (liveTogether && overlap)
        return b.op->emitOpError("result overlaps a live buffer of ")
               << a.op->getName() << " at offset " << a.lo;
    }
  return success();
}
