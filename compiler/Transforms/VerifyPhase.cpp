//===- VerifyPhase.cpp - what each phase of the compile leaves behind -----===//
//
/// The gate at the end of each phase after train-step (see Passes.td): it
/// checks what the next phases rely on and names the phase when it fails.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"

namespace gptc {
#define GEN_PASS_DEF_VERIFYPHASEPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// The functions gptrun runs.
constexpr llvm::StringLiteral kPrograms[] = {"train_step", "train_step_first", "init", "forward",
                                             "logits"};

using gptc::isTrainStep;

struct VerifyPhasePass : public gptc::impl::VerifyPhasePassBase<VerifyPhasePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    LogicalResult ok = failure();
    if (phase == "lower")
      ok = lowered(module);
    else if (phase == "distribute")
      ok = distributed(module);
    else if (phase == "schedule")
      ok = scheduled(module);
    else if (phase == "fuse")
      ok = fused(module);
    else if (phase == "memory-plan")
      ok = planned(module);
    else
      ok = module.emitError("gpt-verify-phase: unknown phase '")
           << phase << "' (lower, distribute, schedule, fuse, memory-plan)";
    if (failed(ok))
      signalPassFailure();
  }

  InFlightDiagnostic fail(Operation *op) {
    return op->emitError("after phase ") << phase << ": ";
  }

  /// One graph per program, and no FP8 matmul left for the kernels.
  LogicalResult lowered(ModuleOp module) {
    WalkResult r = module.walk([&](Operation *op) {
      if (llvm::isa<func::CallOp>(op)) {
        fail(op) << "a call is left (programs are one graph each)";
        return WalkResult::interrupt();
      }
      if (llvm::isa<Fp8MatmulOp>(op)) {
        fail(op) << "gpt.fp8_matmul is left (gpt-lower-fp8 splits it)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return failure();
    // The per-program passes after this phase run on every function.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock())
        return fail(fn) << "@" << fn.getName() << " has more than one block";
      if (!llvm::is_contained(kPrograms, fn.getName()))
        return fail(fn) << "@" << fn.getName() << " is not a program gptrun runs ("
                        << llvm::join(llvm::ArrayRef(kPrograms), ", ") << ")";
      if (isTrainStep(fn) != fn.getName().starts_with("train_step"))
        return fail(fn) << "@" << fn.getName() << (isTrainStep(fn) ? " is" : " is not")
                        << " marked gpt.train_step";
    }
    return success();
  }

  /// Collectives only in train steps, all over the module's world size;
  /// ZeRO-1's shards 1/N of the tensors they stand for.
  LogicalResult distributed(ModuleOp module) {
    if (failed(lowered(module)))
      return failure();
    auto config = module->getAttrOfType<DictionaryAttr>("gpt.config");
    auto worldAttr = config ? config.getAs<IntegerAttr>("world_size") : IntegerAttr();
    auto zeroAttr = config ? config.getAs<IntegerAttr>("zero") : IntegerAttr();
    int64_t shardArgs = 0;
    for (auto fn : module.getOps<func::FuncOp>()) {
      WalkResult r = fn.walk([&](Operation *op) {
        if (!llvm::isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op))
          return WalkResult::advance();
        if (!isTrainStep(fn)) {
          fail(op) << "a collective in @" << fn.getName() << " (only train steps have them)";
          return WalkResult::interrupt();
        }
        auto world = op->getAttrOfType<IntegerAttr>("world_size");
        if (!worldAttr || world.getInt() != worldAttr.getInt()) {
          fail(op) << "its world_size " << world.getInt()
                   << " is not the module's gpt.config world_size "
                   << (worldAttr ? std::to_string(worldAttr.getInt()) : "(none)");
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return failure();
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        auto full = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, "gpt.shard_of");
        if (!full)
          continue;
        ++shardArgs;
        auto type = llvm::cast<RankedTensorType>(fn.getArgumentTypes()[i]);
        int64_t whole = 1;
        for (int64_t d : full.asArrayRef())
          whole *= d;
        int64_t world = worldAttr ? worldAttr.getInt() : 0;
        if (type.getRank() != 1 || world < 2 || type.getNumElements() * world != whole)
          return fail(fn) << "@" << fn.getName() << " argument " << i << " (" << type
                          << ") is not a 1/" << world << " shard of " << whole << " elements";
      }
    }
    if (zeroAttr && zeroAttr.getInt() >= 1 && shardArgs == 0)
      return fail(module) << "ZeRO-1 recorded (zero = 1) but no argument is a shard";
    return success();
  }

  /// The FP8 first step, where there is one, takes what the steady one takes.
  LogicalResult scheduled(ModuleOp module) {
    if (failed(distributed(module)))
      return failure();
    SymbolTable symbols(module);
    auto step = symbols.lookup<func::FuncOp>("train_step");
    auto first = symbols.lookup<func::FuncOp>("train_step_first");
    if (first && (!step || first.getFunctionType() != step.getFunctionType()))
      return fail(first) << "@train_step_first's signature is not @train_step's";
    return success();
  }

  /// Ready for planning: no plan yet (planning must be last).
  LogicalResult fused(ModuleOp module) {
    if (failed(scheduled(module)))
      return failure();
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr("gpt.memory_plan"))
        return fail(fn) << "@" << fn.getName() << " is planned before the memory-plan phase";
    return success();
  }

  /// Every program planned: each op's results at offsets.
  LogicalResult planned(ModuleOp module) {
    SymbolTable symbols(module);
    for (llvm::StringRef name : kPrograms) {
      auto fn = symbols.lookup<func::FuncOp>(name);
      if (!fn)
        continue;
      if (!fn->hasAttr("gpt.memory_plan"))
        return fail(fn) << "@" << name << " has no memory plan";
      for (Operation &op : fn.getBody().front().without_terminator()) {
        auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("gpt.offsets");
        if (op.getNumResults() && (!offsets || offsets.size() != int64_t(op.getNumResults())))
          return fail(&op) << "@" << name << " has an op without an offset per result";
      }
    }
    return success();
  }
};

} // namespace
