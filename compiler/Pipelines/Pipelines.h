//===- Pipelines.h - gptc compilation phases and pass pipelines ----------===//
//
// The compiler runs a fixed sequence of phases. `--compile-to=<phase>` stops
// after one; each phase has a `build<Phase>PassPipeline` and is registered
// as `--gpt-<phase>-pipeline` for gpt-opt. Later phases (autodiff,
// optimizer, precision, remat, fusion, distribute, bufferize, codegen,
// schedule, serialize) plug in here, in order.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_PIPELINES_PIPELINES_H
#define GPTC_COMPILER_PIPELINES_PIPELINES_H

#include "compiler/Pipelines/CompileOptions.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace gptc {

/// Phases in pipeline order. `Input` is the parsed, verified file.
enum class Phase {
  Input,
  Import,    // config instantiated: static shapes, unrolled layers
  Precision, // @forward in the --precision policy (bf16 GEMMs, fp32 masters)
  Autodiff,  // + @forward_grad: loss and parameter gradients
  TrainStep, // + @train_step (accumulation, clipping, schedule, AdamW), @init
  Lower,      // calls inlined (one graph per program); FP8 casts, scales, histories
  Distribute, // gradient collectives (all-reduce buckets, or ZeRO-1's shards)
  Schedule,   // FP8 first/steady steps, folded input casts, recomputation
  Fuse,       // GEMM epilogues, one AdamW launch, elementwise and FP8 store fusions
  MemoryPlan, // static offsets of every tensor of each program
  Executable, // kernels and GEMMs: the step.fb file (written by the driver)
};

struct PhaseInfo {
  Phase phase;
  llvm::StringLiteral name;
  llvm::StringLiteral description;
};

/// Every phase, in order, with its `--compile-to` name.
llvm::ArrayRef<PhaseInfo> enumeratePhases();
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef getPhaseName(Phase phase);
/// The last phase the driver can reach (its default `--compile-to`).
Phase getLastPhase();

/// gpt-opt's phase pipelines take the CompileOptions by gptc's flag names
/// (`--gpt-fuse-pipeline="precision=fp8 world-size=2 zero=1"`), each bound
/// to a pipeline option by CompileOptions::bind.
class PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
public:
  PipelineOptions();
  ~PipelineOptions();
  /// The options as parsed (the defaults where not given), resolved.
  llvm::Expected<CompileOptions> resolved() const;

private:
  struct Binder;
  mutable CompileOptions values; // each option's reader writes its field
  std::vector<std::unique_ptr<llvm::cl::Option>> owned;
  std::vector<std::function<void()>> readers;
};

/// Import: pick the configuration, make shapes static, unroll the layers.
void buildImportPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Precision: gpt-mixed-precision on @forward (nothing for fp32).
void buildPrecisionPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Autodiff: differentiate @forward into @forward_grad.
void buildAutodiffPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Train step: optimizer around the gradient function, plus @init.
void buildTrainStepPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// The phases after train-step, each closed by gpt-verify-phase: lower
/// (inline; FP8), distribute (collectives unless world-size is 0),
/// schedule (FP8 steps, recomputation), fuse, memory-plan (offsets).
void buildLowerPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);
void buildDistributePassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);
void buildSchedulePassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);
void buildFusePassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);
void buildMemoryPlanPassPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Every phase after `Input` up to and including `compileTo`.
void buildPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                   Phase compileTo);
/// The phases after `from` up to and including `compileTo`, for IR that
/// phase `from` wrote (--compile-from): its gate first, where it has one.
void buildPipeline(mlir::OpPassManager &pm, const CompileOptions &options, Phase from,
                   Phase compileTo);

/// Dialects a gpt module may contain.
void registerDialects(mlir::DialectRegistry &registry);
/// gpt passes, the upstream passes our pipelines use, and the phase pipelines.
void registerPasses();

/// Writes `<dir>/NN-<pass-flag>.mlir` after every pass that runs on the
/// top-level module (nested passes are named after the adaptor finishes).
/// NN is the pass's place in the whole pipeline (every optional pass on):
/// flags leave gaps but renumber nothing. A pass that the pipeline runs for
/// several functions is named after its function too
/// (`NN-gpt-plan-memory.train_step.mlir`). See "Per-pass IR dumps" in
/// Pipelines.cpp.
std::unique_ptr<mlir::PassInstrumentation>
createDumpAfterEachPassInstrumentation(llvm::StringRef dir);

/// A compile's progress on a stream (stderr): a bar redrawn in place on a
/// terminal, one line per step otherwise. Steps are the passes that run on
/// the module and the codegen stages.
class CompileProgress {
public:
  enum class Mode { Off, Lines, Bar };
  CompileProgress(llvm::raw_ostream &os, Mode mode, unsigned totalSteps);
  /// One step done: `name` and the time since the previous step.
  void step(llvm::StringRef name);
  /// Ends the bar's line.
  void finish();

private:
  llvm::raw_ostream &os;
  Mode mode;
  unsigned total, done = 0;
  double start, last;
};

/// Reports every pass that finishes on the top-level module (a nested
/// pipeline counts once, after its adaptor) to `progress`.
std::unique_ptr<mlir::PassInstrumentation>
createProgressInstrumentation(CompileProgress &progress);

} // namespace gptc

#endif // GPTC_COMPILER_PIPELINES_PIPELINES_H
