//===- PlanMemory.cpp - liveness-based static memory plan ----------------===//
//
/// Algorithm (see Passes.td): BufferLiveness numbers the ops and gives each
/// non-view result a buffer with a [def, last use] lifetime (views and
/// in-place updates share their source's); placeBuffers puts buffers
/// largest first at the lowest aligned offset free of conflicts with
/// placed, overlapping buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/BufferLiveness.h"
#include "compiler/Transforms/ProgramUtils.h"

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
using gptc::BufferHome;
using gptc::BufferLiveness;
using gptc::LiveBuffer;
using gptc::aliasesOf;
using gptc::overwrittenOperand;
using gptc::tensorBytes;
using gptc::viewSource;

namespace {

constexpr StringLiteral kOffsetsAttr = "gpt.offsets";
constexpr StringLiteral kPlanAttr = "gpt.memory_plan";
/// What the activations hold where they peak (describePeak), for reports.
constexpr StringLiteral kLiveAtPeakAttr = "gpt.live_at_peak";
constexpr StringLiteral kPoolAttr = "gpt.pool";
constexpr StringLiteral kArgOffsetAttr = "gpt.offset";

int64_t alignTo(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// The argument pool of a function argument, by its name attribute.
StringRef poolOf(func::FuncOp fn, unsigned i) {
  if (fn.getArgAttr(i, kParamAttrName))
    return "params";
  if (fn.getArgAttr(i, gptc::kStateAttrName))
    return "state";
  return "inputs";
}

/// Places the buffers of a BufferLiveness and writes the plan's attributes.
struct Planner {
  func::FuncOp fn;
  int64_t alignment;
  BufferLiveness liveness;

  LogicalResult run() {
    FailureOr<BufferLiveness> l = BufferLiveness::compute(fn, alignment);
    if (failed(l))
      return failure();
    liveness = std::move(*l);
    placeBuffers(liveness.buffers);
    annotate();
    return success();
  }

  void annotate() {
    Builder b(fn.getContext());
    int64_t peak = 0;
    for (const LiveBuffer &buf : liveness.buffers)
      peak = std::max(peak, buf.offset + buf.size);
    Block &body = fn.getBody().front();
    for (Operation &op : body.without_terminator()) {
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        BufferHome h = liveness.homes.lookup(r);
        offsets.push_back(h.buffer < 0 ? -1
                                       : liveness.buffers[h.buffer].offset + h.viewOffset);
      }
      op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    }
    llvm::StringMap<int64_t> poolBytes;
    for (BlockArgument arg : body.getArguments()) {
      StringRef pool = poolOf(fn, arg.getArgNumber());
      int64_t &used = poolBytes[pool];
      fn.setArgAttr(arg.getArgNumber(), kPoolAttr, b.getStringAttr(pool));
      fn.setArgAttr(arg.getArgNumber(), kArgOffsetAttr, b.getI64IntegerAttr(used));
      used += alignTo(tensorBytes(arg.getType()), alignment);
    }
    SmallVector<NamedAttribute> plan = {b.getNamedAttr("activations", b.getI64IntegerAttr(peak))};
    for (auto &entry : poolBytes)
      plan.push_back(b.getNamedAttr(entry.getKey(), b.getI64IntegerAttr(entry.getValue())));
    fn->setAttr(kPlanAttr, b.getDictionaryAttr(plan));
    fn->setAttr(kLiveAtPeakAttr, b.getStringAttr(describePeak(liveness)));
  }
};

struct PlanMemoryPass : public gptc::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("gpt-plan-memory: @") << fn.getName() << " has more than one block";
      return signalPassFailure();
    }
    if (alignment < 1 || (alignment & (alignment - 1))) {
      fn.emitError("gpt-plan-memory: alignment must be a power of two");
      return signalPassFailure();
    }
    Planner planner{fn, alignment, {}};
    if (failed(planner.run()))
      return signalPassFailure();
    numBuffers += planner.liveness.buffers.size();
    auto plan = fn->getAttrOfType<DictionaryAttr>(kPlanAttr);
    peakBytes += plan.getAs<IntegerAttr>("activations").getInt();
    // gpt-rematerialize fitted the step to a budget; the passes after it
    // (fusion) must not have lengthened a lifetime past it.
    auto remat = fn->getAttrOfType<DictionaryAttr>("gpt.remat_plan");
    auto budget = remat ? remat.getAs<IntegerAttr>("budget") : IntegerAttr();
    if (budget) {
      int64_t total = 0;
      for (NamedAttribute pool : plan)
        total += llvm::cast<IntegerAttr>(pool.getValue()).getInt();
      if (total > budget.getInt()) {
        fn.emitError("gpt-plan-memory: @")
            << fn.getName() << " plans " << gptc::formatBytes(total)
            << ", above the memory budget of " << gptc::formatBytes(budget.getInt())
            << " that gpt-rematerialize fitted it to (a later pass kept a value alive longer)";
        return signalPassFailure();
      }
    }
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
      if (Value src = overwrittenOperand(llvm::cast<OpResult>(r))) {
        // In place in its operand, whose lifetime covers it: the same bytes.
        auto srcOffsets = src.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
        unsigned n = llvm::cast<OpResult>(src).getResultNumber();
        if (!srcOffsets || srcOffsets.asArrayRef()[n] != off)
          return op.emitOpError("overwrites an operand in place at offset ")
                 << off << ", not at the operand's";
        continue;
      }
      int64_t size = tensorBytes(r.getType());
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
