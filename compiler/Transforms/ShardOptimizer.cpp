//===- ShardOptimizer.cpp - ZeRO-1: each rank updates 1/N of the weights --===//
//
/// Algorithm (see Passes.td):
///  1) Find the updates to shard: a gpt.adamw whose gradient is a result of
///     a gradient all-reduce (or its widening cast), whose parameter and
///     moments are arguments, and whose parameter's element count the
///     world size divides.
///  2) Split each such all-reduce: a gpt.reduce_scatter of those gradients
///     where it was, a gpt.all_reduce of the others; a widening cast moves
///     to the shard, before its first reader.
///  3) Each update reads gpt.rank_slice of its parameter and the moments'
///     arguments, which become 1-D shards; after the last update one
///     gpt.all_gather per bucket writes the new parameters back.
///  4) The gradient norm: the shards' squared norm summed over the ranks,
///     plus the replicated gradients' squared norm, under one sqrt.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/BufferLiveness.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/MapVector.h"

namespace gptc {
#define GEN_PASS_DEF_SHARDOPTIMIZERPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

RankedTensorType shardOf(Type t, int64_t world) {
  auto shaped = llvm::cast<RankedTensorType>(t);
  return RankedTensorType::get({shaped.getNumElements() / world}, shaped.getElementType());
}

/// One update to shard.
struct Update {
  AdamWOp adam;
  AllReduceOp reduce; // the bucket holding its gradient
  unsigned index;     // the gradient's position in it
  CastOp cast;        // the widening cast between them, if any
  Value shard;        // the reduced gradient's shard, as the update reads it
};

struct ShardOptimizerPass : public gptc::impl::ShardOptimizerPassBase<ShardOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = SymbolTable(module).lookup<func::FuncOp>(function);
    if (!fn) {
      module.emitError("gpt-shard-optimizer: no function @") << function;
      return signalPassFailure();
    }
    if (failed(run(fn)))
      return signalPassFailure();
    Builder b(module.getContext());
    SmallVector<NamedAttribute> config;
    if (auto cfg = module->getAttrOfType<DictionaryAttr>("gpt.config"))
      for (NamedAttribute e : cfg)
        if (e.getName() != "zero")
          config.push_back(e);
    config.push_back(b.getNamedAttr("zero", b.getI64IntegerAttr(1)));
    module->setAttr("gpt.config", b.getDictionaryAttr(config));
  }

  /// The update's gradient as a bucket result: the all-reduce, the result
  /// index and the widening cast between them.
  static std::optional<Update> reducedUpdate(AdamWOp adam) {
    Value g = adam.getGrad();
    CastOp cast = g.getDefiningOp<CastOp>();
    if (cast)
      g = cast.getInput();
    auto r = llvm::dyn_cast<OpResult>(g);
    auto reduce = r ? llvm::dyn_cast<AllReduceOp>(r.getOwner()) : AllReduceOp();
    if (!reduce || reduce.getKind() != ReduceKind::Mean)
      return std::nullopt;
    return Update{adam, reduce, r.getResultNumber(), cast, Value()};
  }

  /// Whether `v` is an argument read by `adam` alone, returned (new) by it alone.
  static bool ownedArgument(Value v, AdamWOp adam) {
    return llvm::isa<BlockArgument>(v) && v.hasOneUse() && *v.getUsers().begin() == adam;
  }

  LogicalResult run(func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("gpt-shard-optimizer: @") << fn.getName() << " has more than one block";
    Block &body = fn.getBody().front();
    MLIRContext *ctx = fn.getContext();
    int64_t world = 0;
    for (auto ar : body.getOps<AllReduceOp>())
      world = std::max<int64_t>(world, ar.getWorldSizeAttr().getInt());
    if (world < 2)
      return fn.emitError("gpt-shard-optimizer: @")
             << fn.getName()
             << " is not a step of N >= 2 ranks (run gpt-insert-all-reduce with world-size=N: "
                "the shards are 1/N of each tensor)";

    // 1) The updates to shard, by bucket in program order.
    llvm::MapVector<Operation *, SmallVector<Update>> byBucket;
    SmallVector<AdamWOp> adams;
    for (auto adam : body.getOps<AdamWOp>()) {
      adams.push_back(adam);
      std::optional<Update> u = reducedUpdate(adam);
      auto shaped = llvm::cast<RankedTensorType>(adam.getParam().getType());
      if (!u || shaped.getNumElements() % world != 0 ||
          !llvm::isa<BlockArgument>(adam.getParam()) || !ownedArgument(adam.getM(), adam) ||
          !ownedArgument(adam.getV(), adam))
        continue;
      // The reduced gradient feeds updates and norms only (and its cast).
      Value reduced = u->reduce.getResult(u->index);
      bool onlyOptimizer = llvm::all_of(reduced.getUsers(), [&](Operation *user) {
        return user == u->cast || llvm::isa<AdamWOp, GlobalNormOp>(user);
      });
      if (u->cast)
        onlyOptimizer &= llvm::all_of(u->cast->getUsers(), [](Operation *user) {
          return llvm::isa<AdamWOp, GlobalNormOp>(user);
        });
      if (onlyOptimizer)
        byBucket[u->reduce].push_back(*u);
    }
    if (byBucket.empty())
      return success(); // nothing the world size divides: plain data parallelism

    // 2) Reduce-scatter what is sharded, all-reduce the rest.
    llvm::DenseMap<Value, Value> shardOfGrad; // reduced gradient (or its cast) -> shard
    for (auto &[op, updates] : byBucket) {
      auto reduce = llvm::cast<AllReduceOp>(op);
      llvm::SmallDenseSet<unsigned> sharded;
      SmallVector<Value> scatterInputs;
      int64_t scatterBytes = 0;
      for (const Update &u : updates)
        if (sharded.insert(u.index).second) {
          scatterInputs.push_back(reduce.getInputs()[u.index]);
          scatterBytes += gptc::tensorBytes(scatterInputs.back().getType());
        }
      OpBuilder b(reduce);
      auto scatter = ReduceScatterOp::create(b, reduce.getLoc(), ReduceKind::Mean, scatterInputs,
                                             /*bucket=*/0, scatterBytes, world);
      SmallVector<Value> restInputs;
      SmallVector<unsigned> restIndex;
      int64_t restBytes = 0;
      for (auto [i, in] : llvm::enumerate(reduce.getInputs()))
        if (!sharded.contains(i)) {
          restInputs.push_back(in);
          restIndex.push_back(i);
          restBytes += gptc::tensorBytes(in.getType());
        }
      if (!restInputs.empty()) {
        auto rest = AllReduceOp::create(b, reduce.getLoc(), ReduceKind::Mean, restInputs,
                                        /*bucket=*/0, restBytes, reduce.getWorldSize());
        for (auto [j, i] : llvm::enumerate(restIndex))
          reduce.getResult(i).replaceAllUsesWith(rest.getResult(j));
      }
      // The shards, in the scatter's order.
      unsigned next = 0;
      llvm::DenseMap<unsigned, Value> shardAt;
      for (Update &u : updates) {
        auto [it, fresh] = shardAt.try_emplace(u.index, Value());
        if (fresh)
          it->second = scatter.getResult(next++);
        Value s = it->second;
        Value full = reduce.getResult(u.index);
        shardOfGrad[full] = s;
        if (u.cast) {
          // Where the whole gradient was widened's first reader (the norm,
          // at the backward's end): a read right after the scatter would
          // make the compute stream wait for it there.
          Value &castShard = shardOfGrad[u.cast.getResult()];
          if (!castShard) {
            Operation *first = *llvm::min_element(
                u.cast->getUsers(), [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
            OpBuilder at(first);
            castShard = CastOp::create(at, u.cast.getLoc(), shardOf(u.cast.getType(), world), s);
          }
          s = castShard;
        }
        u.shard = s;
      }
    }

    // 4) The norms that read a sharded gradient (before the updates change).
    SmallVector<GlobalNormOp> norms(body.getOps<GlobalNormOp>());
    for (GlobalNormOp norm : norms) {
      SmallVector<Value> shards, replicated;
      for (Value v : norm.getInputs()) {
        if (Value s = shardOfGrad.lookup(v))
          shards.push_back(s);
        else
          replicated.push_back(v);
      }
      if (shards.empty())
        continue;
      OpBuilder b(norm);
      Location loc = norm.getLoc();
      Type scalar = norm.getType();
      // sqrt(sum over ranks of |shard|^2 + |replicated|^2)
      Value local = GlobalNormOp::create(b, loc, scalar, shards);
      Value squares = MulOp::create(b, loc, local, local);
      Value total = AllReduceOp::create(b, loc, ReduceKind::Sum, ValueRange{squares},
                                        /*bucket=*/0, gptc::tensorBytes(scalar), world)
                        .getResult(0);
      if (!replicated.empty()) {
        Value rest = GlobalNormOp::create(b, loc, scalar, replicated);
        total = AddOp::create(b, loc, total, MulOp::create(b, loc, rest, rest));
      }
      norm.getResult().replaceAllUsesWith(SqrtOp::create(b, loc, total).getResult());
      norm.erase();
    }

    // 3) The updates on shards; the gathers after the last update.
    SmallVector<Type> argTypes(fn.getArgumentTypes());
    auto shardAttr = [&](Type full) {
      auto shaped = llvm::cast<RankedTensorType>(full);
      return DenseI64ArrayAttr::get(ctx, shaped.getShape());
    };
    OpBuilder gather(ctx);
    gather.setInsertionPointAfter(adams.back());
    for (auto &[op, updates] : byBucket) {
      SmallVector<Value> newShards, inits;
      SmallVector<AdamWOp> old;
      int64_t bytes = 0;
      for (Update &u : updates) {
        AdamWOp adam = u.adam;
        OpBuilder b(adam);
        Value param = adam.getParam();
        Value slice = RankSliceOp::create(b, adam.getLoc(), shardOf(param.getType(), world),
                                          param, world);
        for (Value moment : {adam.getM(), adam.getV()}) {
          auto arg = llvm::cast<BlockArgument>(moment);
          fn.setArgAttr(arg.getArgNumber(), "gpt.shard_of", shardAttr(arg.getType()));
          arg.setType(shardOf(arg.getType(), world));
          argTypes[arg.getArgNumber()] = arg.getType();
        }
        auto sharded = AdamWOp::create(b, adam.getLoc(), slice, u.shard, adam.getM(), adam.getV(),
                                       adam.getLr(), adam.getStep(), adam.getGradScale(),
                                       adam.getBeta1Attr(), adam.getBeta2Attr(),
                                       adam.getEpsilonAttr(), adam.getWeightDecayAttr());
        adam.getNewM().replaceAllUsesWith(sharded.getNewM());
        adam.getNewV().replaceAllUsesWith(sharded.getNewV());
        newShards.push_back(sharded.getNewParam());
        inits.push_back(param);
        bytes += gptc::tensorBytes(sharded.getNewParam().getType());
        old.push_back(adam);
      }
      auto gathered = AllGatherOp::create(gather, op->getLoc(), newShards, inits,
                                          /*bucket=*/0, bytes, world);
      gather.setInsertionPointAfter(gathered);
      for (auto [adam, r] : llvm::zip(old, gathered.getResults()))
        adam.getNewParam().replaceAllUsesWith(r);
      for (AdamWOp adam : old)
        adam.erase();
    }
    for (auto &entry : byBucket) {
      auto reduce = llvm::cast<AllReduceOp>(entry.first);
      // The casts of sharded gradients are unread now; the replicated
      // results moved to their own all-reduce.
      for (Value r : reduce.getResults())
        for (Operation *user : llvm::make_early_inc_range(r.getUsers()))
          if (auto cast = llvm::dyn_cast<CastOp>(user); cast && cast->use_empty())
            cast.erase();
      if (!reduce->use_empty())
        return reduce.emitOpError("gpt-shard-optimizer: a reduced gradient is still read "
                                  "in full");
      reduce.erase();
    }

    // The moments' results are shards too.
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto state = fn.getResultAttrOfType<StringAttr>(i, gptc::kStateAttrName);
      auto arg = llvm::find_if(body.getArguments(), [&](BlockArgument a) {
        return fn.getArgAttr(a.getArgNumber(), "gpt.shard_of") &&
               fn.getArgAttr(a.getArgNumber(), gptc::kStateAttrName) == state;
      });
      if (state && arg != body.getArguments().end())
        fn.setResultAttr(i, "gpt.shard_of", fn.getArgAttr(arg->getArgNumber(), "gpt.shard_of"));
    }
    fn.setType(FunctionType::get(ctx, argTypes, ret.getOperandTypes()));

    // Every collective numbered in issue (program) order.
    int64_t bucket = 0;
    for (Operation &op : body) {
      Builder b(ctx);
      if (llvm::isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op))
        op.setAttr("bucket", b.getI64IntegerAttr(bucket++));
    }
    for (auto &entry : byBucket)
      numSharded += entry.second.size();
    return success();
  }
};

} // namespace
