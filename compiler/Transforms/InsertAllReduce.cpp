//===- InsertAllReduce.cpp - bucketed gradient all-reduces ---------------===//
//
/// Algorithm (see Passes.td):
///  1) Collect the gradients: the `grad` operand of every gpt.adamw, or
///     the narrow value it widens (mixed precision).
///  2) Order them by the position of the op that produces them (backward
///     order) and pack them into buckets of >= bucket-mb MiB.
///  3) Insert one gpt.all_reduce mean per bucket right after its last
///     gradient's op and redirect every other use to its results.
///  4) Average the returned loss the same way.
///  5) Take the maximum of the FP8 amax histories the step records, so
///     every rank keeps the same state; record world_size (0: any number
///     of ranks, the mean taken over those that run).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace gptc {
#define GEN_PASS_DEF_INSERTALLREDUCEPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

int64_t bytesOf(Type t) {
  auto shaped = llvm::cast<ShapedType>(t);
  return shaped.getNumElements() * std::max<int64_t>(shaped.getElementTypeBitWidth() / 8, 1);
}

struct InsertAllReducePass
    : public gptc::impl::InsertAllReducePassBase<InsertAllReducePass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  /// Inserts one all_reduce of `values` after `after`; every use of a value
  /// except the new op reads its result instead.
  AllReduceOp reduceAfter(Operation *after, ArrayRef<Value> values, int64_t bytes,
                          llvm::DenseMap<Operation *, int64_t> &index,
                          ReduceKind kind = ReduceKind::Mean) {
    OpBuilder b(after->getContext());
    b.setInsertionPointAfter(after);
    auto op = AllReduceOp::create(b, after->getLoc(), kind, values,
                                  /*bucket=*/0, bytes, worldSize);
    index[op] = index.lookup(after);
    for (auto [v, r] : llvm::zip(values, op.getResults()))
      Value(v).replaceAllUsesExcept(r, op);
    return op;
  }

  /// The value to reduce for the update's gradient `grad`: under a mixed
  /// precision policy the backward writes a weight's gradient narrow and
  /// widens it to the master weight's type after the whole backward (the
  /// cast is the gradient of the forward's first op). Reducing the narrow
  /// value issues the bucket where the backward computed it, and lets
  /// gpt-fuse-adamw's narrow-grads still drop the cast.
  static Value reducedGradient(Value grad) {
    auto cast = grad.getDefiningOp<CastOp>();
    if (!cast || !cast.getInput().getDefiningOp())
      return grad;
    auto bits = [](Value v) { return getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth(); };
    if (bits(cast.getInput()) >= bits(grad))
      return grad;
    // Only updates and norms read it: what else would see the sum of ranks
    // where it expects one rank's gradient, or the reverse?
    for (Operation *user : grad.getUsers())
      if (!llvm::isa<AdamWOp, GlobalNormOp>(user))
        return grad;
    return cast.getInput();
  }

  LogicalResult run(ModuleOp module) {
    auto fn = SymbolTable(module).lookup<func::FuncOp>(function);
    if (!fn || !fn.getBody().hasOneBlock())
      return module.emitError("gpt-insert-all-reduce: no single-block function @") << function;
    if (worldSize < 0)
      return module.emitError("gpt-insert-all-reduce: world-size must be >= 0 (0: any number "
                              "of ranks), got ")
             << worldSize;
    // At most 2^40 MiB: the cap in bytes fits an int64_t.
    if (!(bucketMb >= 0 && bucketMb <= 0x1p40))
      return module.emitError("gpt-insert-all-reduce: bucket-mb must be in [0, 2^40] MiB, got ")
             << static_cast<double>(bucketMb);
    Block &body = fn.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    SmallVector<Value> grads;
    llvm::DenseMap<Value, Operation *> castOf; // narrow gradient -> its widening cast
    for (Operation &op : body) {
      index[&op] = n++;
      if (llvm::isa<func::CallOp>(op))
        return op.emitOpError("gpt-insert-all-reduce: inline calls first");
      if (llvm::isa<AllReduceOp>(op))
        return op.emitOpError("gpt-insert-all-reduce: @")
               << function << " is already distributed";
      if (auto adam = llvm::dyn_cast<AdamWOp>(op)) {
        Value g = reducedGradient(adam.getGrad());
        if (g != adam.getGrad())
          castOf[g] = adam.getGrad().getDefiningOp();
        if (!g.getDefiningOp())
          return adam.emitOpError("gpt-insert-all-reduce: gradient is an argument");
        if (!llvm::is_contained(grads, g))
          grads.push_back(g);
      }
    }
    if (grads.empty())
      return fn.emitError("gpt-insert-all-reduce: @") << function << " has no gpt.adamw";

    // 1-2) Backward order, then buckets of at least bucketMb MiB.
    llvm::stable_sort(grads, [&](Value a, Value b) {
      return index[a.getDefiningOp()] < index[b.getDefiningOp()];
    });
    int64_t cap = static_cast<int64_t>(bucketMb * 1024.0 * 1024.0);
    SmallVector<SmallVector<Value>> buckets(1);
    int64_t filled = 0;
    for (Value g : grads) {
      if (filled > 0 && filled >= cap) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(g);
      filled += bytesOf(g.getType());
    }

    // 3) One all_reduce per bucket, after its last gradient. Each use must
    //    come after it, or the gradient was read before it was final; a
    //    widening cast (a bias gradient's comes right after its sum) moves
    //    after it: only updates and norms, at the step's end, read it.
    for (ArrayRef<Value> bucket : buckets) {
      Operation *last = bucket.back().getDefiningOp();
      int64_t bytes = 0;
      SmallVector<Operation *> early;
      for (Value g : bucket) {
        bytes += bytesOf(g.getType());
        for (Operation *user : g.getUsers()) {
          if (index.lookup(user) > index.lookup(last))
            continue;
          if (user != castOf.lookup(g))
            return user->emitOpError("gpt-insert-all-reduce: reads a gradient before "
                                     "its bucket is complete");
          early.push_back(user);
        }
      }
      AllReduceOp reduce = reduceAfter(last, bucket, bytes, index);
      for (Operation *cast : llvm::reverse(early)) {
        cast->moveAfter(reduce);
        index[cast] = index.lookup(reduce);
      }
    }
    numBuckets = buckets.size();

    // 4) The logged loss: the mean over the ranks.
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      auto out = fn.getResultAttrOfType<StringAttr>(i, gptc::kOutputAttrName);
      if (!out || out.getValue() != "loss")
        continue;
      Value loss = ret.getOperand(i);
      if (!loss.getDefiningOp())
        return fn.emitError("gpt-insert-all-reduce: the loss is an argument");
      reduceAfter(loss.getDefiningOp(), {loss}, bytesOf(loss.getType()), index);
    }

    // 5) The amax histories the quantizations record (delayed scaling) are
    //    state: each rank saw other values, so each takes the maximum of
    //    all ranks' (one bucket after the last recording), and the ranks
    //    keep the same scales and checkpoint the same histories.
    SmallVector<Value> recorded;
    Operation *lastRecording = nullptr;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Operation *def = v.getDefiningOp();
      if (!def || !fn.getResultAttr(i, "gpt.state") || llvm::isa<Fp8ScaleOp>(def) ||
          getFp8History(def).next != v || llvm::is_contained(recorded, v))
        continue;
      recorded.push_back(v);
      if (!lastRecording || index.lookup(def) > index.lookup(lastRecording))
        lastRecording = def;
    }
    if (!recorded.empty()) {
      int64_t bytes = 0;
      for (Value v : recorded)
        bytes += bytesOf(v.getType());
      reduceAfter(lastRecording, recorded, bytes, index, ReduceKind::Max);
    }

    // Buckets numbered in issue (program) order.
    int64_t bucket = 0;
    for (auto op : body.getOps<AllReduceOp>())
      op.setBucket(bucket++);

    Builder b(module.getContext());
    SmallVector<NamedAttribute> config;
    if (auto cfg = module->getAttrOfType<DictionaryAttr>("gpt.config"))
      for (NamedAttribute e : cfg)
        if (e.getName() != "world_size")
          config.push_back(e);
    config.push_back(b.getNamedAttr("world_size", b.getI64IntegerAttr(worldSize)));
    module->setAttr("gpt.config", b.getDictionaryAttr(config));
    return success();
  }
};

} // namespace
