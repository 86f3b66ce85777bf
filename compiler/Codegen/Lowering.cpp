//===- Lowering.cpp - planned gpt programs -> kernels, GEMMs, commands ---===//
//
// The driver: walks each planned program (arguments, returns, collectives
// and their events, ZeRO-1's reduce-scatter, all-gather and rank slices,
// runs of random draws) and hands every other op to its kernel family
// through the LoweringRegistry (LoweringContext.h, Kernels/*.cpp).
//
// One lowering per op kind. Kernels are "index-space" bodies: thread `idx`
// of `threads` computes one element, one row or one column, with loops for
// the rest. These are simple, deterministic kernels (no atomics): speed is
// the business of the fusion and Hopper-kernel passes that replace them.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/Lowering.h"
#include "compiler/Codegen/LoweringContext.h"

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::gpt;

namespace gptc::codegen {
namespace {

/// The lowering of a module's programs: the context the families lower
/// with, and what only the driver does.
class Lowerer : public LoweringContext {
public:
  Lowerer(ModuleOp module, const LoweringOptions &options) : LoweringContext(module, options) {
    registerElementwiseLowerings(registry);
    registerGemmLowerings(registry);
    registerFp8Lowerings(registry);
    registerEmbeddingLowerings(registry);
    registerLayerNormLowerings(registry);
    registerAttentionLowerings(registry);
    registerCrossEntropyLowerings(registry);
    registerReductionLowerings(registry);
    registerAdamWLowerings(registry);
    registerRandomLowerings(registry);
  }

  LogicalResult lowerProgram(func::FuncOp fn);

private:
  LoweringRegistry registry;

  /// The op's family lowering (an elementwise kernel without one).
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerAllReduce(AllReduceOp op);
  /// ZeRO-1's reduce-scatter and all-gather: like an all-reduce, on the
  /// communication stream between two events.
  void lowerShardCollective(Operation *op, Command::Kind kind, ValueRange inputs,
                            ValueRange results);
};

/// Copies operands that are not reduced in place into their results, then
/// record (compute) -> wait + all-reduce + record (comm).
LogicalResult Lowerer::lowerAllReduce(AllReduceOp op) {
  std::string name = op->getName().getStringRef().str();
  Command reduce{Command::AllReduce, 0, 0, 0, {}, name, kCommStream};
  switch (op.getKind()) {
  case ReduceKind::Sum:
    reduce.reduce = Command::Sum;
    break;
  case ReduceKind::Mean:
    reduce.reduce = Command::Mean;
    break;
  case ReduceKind::Max:
    reduce.reduce = Command::Max;
    break;
  }
  for (auto [in, r] : llvm::zip(op.getInputs(), op.getResults())) {
    copyUnlessInPlace(op, in, r);
    reduce.args.push_back(t(r));
  }
  unsigned ready = result.numEvents++, done = result.numEvents++;
  size_t first = program->commands.size();
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kComputeStream, ready});
  program->commands.push_back({Command::Wait, 0, 0, 0, {}, name, kCommStream, ready});
  program->commands.push_back(std::move(reduce));
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kCommStream, done});
  for (size_t i = first; i < program->commands.size(); ++i)
    program->commands[i].source = op;
  eventOps[done] = op;
  for (Value r : op.getResults())
    pending[r] = done;
  result.numStreams = 2;
  return success();
}

void Lowerer::lowerShardCollective(Operation *op, Command::Kind kind, ValueRange inputs,
                                   ValueRange results) {
  std::string name = op->getName().getStringRef().str();
  Command c{kind, 0, 0, 0, {}, name, kCommStream};
  c.reduce = Command::Mean;
  for (Value in : inputs)
    c.args.push_back(t(in));
  for (Value r : results)
    c.args.push_back(t(r));
  unsigned ready = result.numEvents++, done = result.numEvents++;
  size_t first = program->commands.size();
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kComputeStream, ready});
  program->commands.push_back({Command::Wait, 0, 0, 0, {}, name, kCommStream, ready});
  program->commands.push_back(std::move(c));
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kCommStream, done});
  for (size_t i = first; i < program->commands.size(); ++i)
    program->commands[i].source = op;
  eventOps[done] = op;
  for (Value r : results)
    pending[r] = done;
  result.numStreams = 2;
}

/// The largest head dimension the attention kernels take (GPT-2's is 64).
constexpr int64_t kMaxHeadDim = 256;

/// The kernels load and store f32, bf16 and f16 (computing in f32) and i32
/// token ids, and unroll attention's head dimension (at most kMaxHeadDim).
/// The dialect accepts more (the reference interpreter runs any float, f64
/// parameters over an f32 input, any head dimension); refuse those here, at
/// the op that holds one, before they become ill-typed or unbounded kernel
/// code.
static LogicalResult checkCodegenSupports(func::FuncOp fn) {
  auto supported = [](Type t) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(t);
    if (!tensor)
      return true;
    Type e = tensor.getElementType();
    return e.isF32() || e.isBF16() || e.isF16() || e.isInteger(32);
  };
  auto refuse = [](Operation *at, Type t, llvm::StringRef what) {
    return at->emitError("codegen: ")
           << what << " is " << t
           << "; kernels take f32, bf16 and f16 tensors and i32 token ids";
  };
  // FP8 tensors pass from the ops that make them (the quantizations, the
  // loss gradient's codes) through views and byte transposes to a
  // gpt.scaled_matmul only.
  auto fp8Use = [](Operation *op, Value v) {
    if (!llvm::isa<Float8E4M3FNType, Float8E5M2Type>(rtt(v).getElementType()))
      return false;
    if (llvm::isa<ScaledMatmulOp, ScaledMatmulGeluFp8Op, Fp8TransposeOp, ReshapeOp>(op))
      return true;
    return llvm::isa<Fp8ScalingOpInterface>(op) && v.getDefiningOp() == op;
  };
  // The signature first: it names the parameter (folded constants in @init
  // have lost their locations).
  auto named = [&](llvm::StringRef kind, unsigned i, DictionaryAttr attrs) {
    std::string what = ("@" + fn.getName() + " " + kind + " #" + llvm::Twine(i)).str();
    for (llvm::StringRef key : {llvm::StringRef(kParamAttrName), llvm::StringRef("gpt.state"),
                                llvm::StringRef(kInputAttrName), llvm::StringRef("gpt.output")})
      if (auto name = attrs ? attrs.getAs<StringAttr>(key) : StringAttr())
        return what + " ('" + name.str() + "')";
    return what;
  };
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes()))
    if (!supported(t))
      return refuse(fn, t, named("argument", i, fn.getArgAttrDict(i)));
  for (auto [i, t] : llvm::enumerate(fn.getResultTypes()))
    if (!supported(t))
      return refuse(fn, t, named("result", i, fn.getResultAttrDict(i)));
  WalkResult walk = fn.walk([&](Operation *op) {
    if (llvm::isa<Fp8MatmulOp>(op)) {
      op->emitError("codegen: gpt.fp8_matmul needs gpt-lower-fp8 first (gptc's memory-plan "
                    "phase runs it under --precision=fp8)");
      return WalkResult::interrupt();
    }
    // The attention kernels unroll the head dimension into registers.
    Value qkv;
    Attribute heads;
    if (auto a = llvm::dyn_cast<CausalAttentionOp>(op))
      qkv = a.getQkv(), heads = a.getNumHeads();
    else if (auto a = llvm::dyn_cast<CausalAttentionGradOp>(op))
      qkv = a.getQkv(), heads = a.getNumHeads();
    if (qkv) {
      std::optional<int64_t> h = getConfigInt(heads);
      int64_t d = h && *h > 0 ? rtt(qkv).getShape().back() / 3 / *h : 0;
      if (d > kMaxHeadDim) {
        op->emitError("codegen: head dimension ")
            << d << " is over " << kMaxHeadDim
            << ", the most the attention kernels keep in registers";
        return WalkResult::interrupt();
      }
    }
    for (OpOperand &use : op->getOpOperands())
      if (!supported(use.get().getType()) && !fp8Use(op, use.get())) {
        (void)refuse(op, use.get().getType(),
                     ("'" + op->getName().getStringRef() + "' operand #" +
                      llvm::Twine(use.getOperandNumber())).str());
        return WalkResult::interrupt();
      }
    for (OpResult r : op->getResults())
      if (!supported(r.getType()) && !fp8Use(op, r)) {
        (void)refuse(op, r.getType(), ("'" + op->getName().getStringRef() + "' result #" +
                                       llvm::Twine(r.getResultNumber())).str());
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult Lowerer::lowerProgram(func::FuncOp fn) {
  result.programs.push_back(ProgramInfo{fn.getName().str(), {}, {}, {}, {}});
  program = &result.programs.back();
  if (auto live = fn->getAttrOfType<StringAttr>("gpt.live_at_peak"))
    program->liveAtPeak = live.str();
  pending.clear();
  scratchBase = 0;
  savedLse.clear();
  auto plan = fn->getAttrOfType<DictionaryAttr>("gpt.memory_plan");
  if (!plan)
    return fn.emitError("codegen: @") << fn.getName() << " has no memory plan";
  if (failed(checkCodegenSupports(fn)))
    return failure();
  for (NamedAttribute entry : plan) {
    int64_t &pool = result.poolBytes[entry.getName().str()];
    pool = std::max(pool, llvm::cast<IntegerAttr>(entry.getValue()).getInt());
  }
  // Arguments: parameters and state are shared by name across programs.
  for (BlockArgument arg : fn.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    std::string role = "params";
    if (!name) {
      name = fn.getArgAttrOfType<StringAttr>(i, "gpt.state");
      role = "state";
    }
    if (!name) {
      name = fn.getArgAttrOfType<StringAttr>(i, kInputAttrName);
      role = "inputs";
    }
    auto pool = fn.getArgAttrOfType<StringAttr>(i, "gpt.pool");
    auto offset = fn.getArgAttrOfType<IntegerAttr>(i, "gpt.offset");
    if (!name || !pool || !offset)
      return fn.emitError("codegen: argument ") << i << " lacks a name or a planned offset";
    auto shape = rtt(arg).getShape();
    TensorInfo info{name.str(), role, pool.str(), eltOf(arg),
                    std::vector<int64_t>(shape.begin(), shape.end()), offset.getInt(),
                    bytesOf(arg.getType())};
    if (auto full = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, "gpt.shard_of")) {
      info.fullShape.assign(full.asArrayRef().begin(), full.asArrayRef().end());
      int64_t numel = 1;
      for (int64_t d : info.fullShape)
        numel *= d;
      info.shards = numel / rtt(arg).getNumElements();
    }
    int64_t index;
    if (role != "inputs") {
      auto [it, inserted] = globals.try_emplace(info.name, result.tensors.size());
      if (inserted)
        addTensor(info);
      else if (result.tensors[it->second].bytes != info.bytes)
        return fn.emitError("codegen: '") << info.name << "' has different sizes in programs";
      index = it->second;
    } else {
      index = addTensor(info);
    }
    tensorOf[arg] = index;
    program->inputs.push_back(index);
  }
  SmallVector<RandomNormalOp> normals;
  for (Operation &op : fn.getBody().front()) {
    scratchTop = scratchBase;
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      waitFor(ret.getOperands());
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        int64_t src = tensorOf.lookup(v);
        auto param = fn.getResultAttrOfType<StringAttr>(i, kParamAttrName);
        auto state = fn.getResultAttrOfType<StringAttr>(i, "gpt.state");
        auto out = fn.getResultAttrOfType<StringAttr>(i, "gpt.output");
        if (param || state) {
          std::string name = (param ? param : state).str();
          auto [it, inserted] = globals.try_emplace(name, result.tensors.size());
          if (inserted) {
            TensorInfo info = result.tensors[src];
            info.name = name;
            info.role = info.pool = param ? "params" : "state";
            info.offset = result.poolBytes[info.pool];
            result.poolBytes[info.pool] += (info.bytes + 255) / 256 * 256;
            addTensor(info);
          }
          if (it->second != src) {
            Operand from = t(v);
            program->commands.push_back({Command::Copy, 0, 0, 0,
                                         {from, Operand{Operand::Tensor, it->second}},
                                         "func.return"});
            program->commands.back().source = ret;
          }
          program->outputs.push_back(it->second);
        } else {
          if (out)
            result.tensors[src].name = out.str();
          result.tensors[src].role = "outputs";
          program->outputs.push_back(src);
        }
      }
      return success();
    }
    if (failed(mapResults(&op)))
      return failure();
    if (auto ar = llvm::dyn_cast<AllReduceOp>(op)) {
      if (failed(lowerAllReduce(ar)))
        return failure();
      continue;
    }
    if (auto rs = llvm::dyn_cast<ReduceScatterOp>(op)) {
      waitFor(rs.getInputs());
      lowerShardCollective(&op, Command::ReduceScatter, rs.getInputs(), rs.getResults());
      continue;
    }
    if (auto ag = llvm::dyn_cast<AllGatherOp>(op)) {
      waitFor(ag.getInputs());
      lowerShardCollective(&op, Command::AllGather, ag.getInputs(), ag.getResults());
      continue;
    }
    if (auto slice = llvm::dyn_cast<RankSliceOp>(op)) {
      waitFor(op.getOperands());
      program->commands.push_back({Command::RankSlice, 0, 0, 0,
                                   {t(slice.getInput()), t(slice.getResult())},
                                   op.getName().getStringRef().str()});
      program->commands.back().source = &op;
      continue;
    }
    // A run of random_normal ops of one seed: batched launches at its end.
    // One launch writes its outputs concurrently, so a result placed over
    // an earlier one of the run (possible for a draw nobody reads) starts
    // a new run, keeping the later draw last.
    if (auto rn = llvm::dyn_cast<RandomNormalOp>(op)) {
      waitFor(op.getOperands());
      auto flush = [&] {
        lowerRandomNormals(normals);
        normals.clear();
      };
      const TensorInfo &out = result.tensors[tensorOf.lookup(rn.getResult())];
      if (llvm::any_of(normals, [&](RandomNormalOp other) {
            const TensorInfo &o = result.tensors[tensorOf.lookup(other.getResult())];
            return o.pool == out.pool && o.offset < out.offset + out.bytes &&
                   out.offset < o.offset + o.bytes;
          }))
        flush();
      normals.push_back(rn);
      auto next = llvm::dyn_cast_or_null<RandomNormalOp>(op.getNextNode());
      if (!next || next.getSeed() != rn.getSeed())
        flush();
      continue;
    }
    // Views read nothing; the op that reads through them waits.
    if (!llvm::isa<ReshapeOp>(op) && !(llvm::isa<SliceOp>(op) && llvm::cast<SliceOp>(op).getDim() == 0))
      waitFor(op.getOperands());
    if (failed(lowerOp(&op)))
      return failure();
  }
  return success();
}

LogicalResult Lowerer::lowerOp(Operation *op) {
  if (const LoweringFn *lower = registry.lookup(op))
    return (*lower)(*this, op);
  return lowerElementwise(op);
}

} // namespace

FailureOr<Lowered> lowerPrograms(ModuleOp module, ArrayRef<std::string> programs,
                                 const LoweringOptions &options) {
  Lowerer lowerer(module, options);
  for (const std::string &name : programs) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn)
      return module.emitError("codegen: no program @") << name;
    if (failed(lowerer.lowerProgram(fn)))
      return failure();
  }
  return std::move(lowerer.result);
}

} // namespace gptc::codegen
