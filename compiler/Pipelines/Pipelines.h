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

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <memory>
#include <optional>

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

/// Options shared by every phase's pipeline.
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
  Option<std::string> model{*this, "model",
                            llvm::cl::desc("Model preset, e.g. tiny, 124M, 1558M")};
  Option<int64_t> batch{*this, "batch", llvm::cl::desc("Batch size B (0: preset's)"),
                        llvm::cl::init(0)};
  Option<int64_t> seq{*this, "seq", llvm::cl::desc("Sequence length T (0: preset's)"),
                      llvm::cl::init(0)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("Precision policy: fp32, bf16, fp16 or fp8"),
                                llvm::cl::init("fp32")};
  Option<int64_t> fp8History{*this, "fp8-history",
                             llvm::cl::desc("gpt-fp8-delayed-scaling's history (steps); 0: "
                                            "current scaling"),
                             llvm::cl::init(16)};
  Option<bool> fp8LmHead{*this, "fp8-lm-head",
                         llvm::cl::desc("gpt-mixed-precision's fp8-lm-head option"),
                         llvm::cl::init(false)};
  Option<bool> fp8CrossEntropyGrad{
      *this, "fp8-cross-entropy-grad",
      llvm::cl::desc("Write an FP8 LM head's logit gradient as FP8 (gpt-fp8-cross-entropy-grad)"),
      llvm::cl::init(true)};
  Option<bool> fuseFp8Cast{
      *this, "fuse-fp8-cast",
      llvm::cl::desc("Fold bias sums and GELU gradients into the FP8 casts (gpt-fuse-fp8-cast)"),
      llvm::cl::init(true)};
  Option<bool> fp8SteadyStep{
      *this, "fp8-steady-step",
      llvm::cl::desc("Split off the first train step; the others take their FP8 scales from the "
                     "histories in one op (gpt-fp8-steady-step)"),
      llvm::cl::init(true)};
  Option<bool> foldFp8InputCast{
      *this, "fold-fp8-input-cast",
      llvm::cl::desc("FP8 casts of a bf16 copy read its f32 source and round as they load "
                     "(gpt-fold-fp8-input-cast)"),
      llvm::cl::init(true)};
  Option<bool> fuseLayerNormFp8{
      *this, "fuse-layernorm-fp8",
      llvm::cl::desc("In the steady FP8 step, residual layernorms write their FP8 codes "
                     "(gpt-fuse-layernorm-fp8)"),
      llvm::cl::init(true)};
  Option<bool> fuseFp8GeluMatmul{
      *this, "fuse-fp8-gelu-matmul",
      llvm::cl::desc("In the steady FP8 step, the MLP's first GEMM writes its GELU's FP8 codes "
                     "(gpt-fuse-fp8-gelu-matmul)"),
      llvm::cl::init(false)};
  Option<bool> fuseGradAccumulation{
      *this, "fuse-grad-accumulation",
      llvm::cl::desc("Sum FP8 weight gradients over the micro-batches in their GEMMs "
                     "(gpt-fuse-grad-accumulation)"),
      llvm::cl::init(false)};
  Option<bool> narrowResidual{*this, "narrow-residual",
                              llvm::cl::desc("gpt-mixed-precision's narrow-residual option"),
                              llvm::cl::init(false)};

  // Train step (see gpt-insert-optimizer for the meaning of each).
  Option<int64_t> accumSteps{*this, "accum-steps",
                             llvm::cl::desc("Micro-batches per step"), llvm::cl::init(1)};
  Option<double> lr{*this, "lr", llvm::cl::desc("Peak learning rate"),
                    llvm::cl::init(3.0e-4)};
  Option<double> minLr{*this, "min-lr", llvm::cl::desc("Final learning rate"),
                       llvm::cl::init(0.0)};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::desc("Warm-up steps"),
                              llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps",
                             llvm::cl::desc("Steps of the learning-rate decay"),
                             llvm::cl::init(0)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("constant, cosine or linear"),
                               llvm::cl::init("constant")};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.95)};
  Option<double> epsilon{*this, "epsilon", llvm::cl::desc("AdamW epsilon"),
                         llvm::cl::init(1.0e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("AdamW weight decay"),
                             llvm::cl::init(0.1)};
  Option<double> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Static loss scale: the backward starts from it, the optimizer divides it out"),
      llvm::cl::init(1.0)};
  Option<double> gradClip{*this, "grad-clip",
                          llvm::cl::desc("Global gradient-norm clip (0: off)"),
                          llvm::cl::init(1.0)};
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("Data-parallel ranks: 0 one device (no collectives), "
                                           "N exactly N, -1 any number (N at run time)"),
                            llvm::cl::init(0)};
  Option<int64_t> zero{*this, "zero",
                       llvm::cl::desc("ZeRO stage: 0 off, 1 each of world-size N >= 2 ranks keeps "
                                      "1/N of the AdamW state (gpt-shard-optimizer)"),
                       llvm::cl::init(0)};
  Option<double> bucketMb{*this, "bucket-mb",
                          llvm::cl::desc("Gradient all-reduce bucket size in MiB"),
                          llvm::cl::init(25.0)};
  Option<double> memoryBudget{*this, "memory-budget",
                              llvm::cl::desc("Recompute activations to fit this many GiB "
                                             "(0: off; gpt-rematerialize)"),
                              llvm::cl::init(0.0)};
  Option<int64_t> rematMaxDepth{*this, "remat-max-depth",
                                llvm::cl::desc("gpt-rematerialize's max-depth"),
                                llvm::cl::init(4)};
  Option<bool> fuseMatmulEpilogue{
      *this, "fuse-matmul-epilogue",
      llvm::cl::desc("Fold GELU and bias gradients into GEMM epilogues (gpt-fuse-matmul-epilogue)"),
      llvm::cl::init(true)};
  Option<bool> epilogueGelu{*this, "epilogue-gelu",
                            llvm::cl::desc("gpt-fuse-matmul-epilogue's gelu option"),
                            llvm::cl::init(true)};
  Option<bool> epilogueGeluGrad{*this, "epilogue-gelu-grad",
                                llvm::cl::desc("gpt-fuse-matmul-epilogue's gelu-grad option"),
                                llvm::cl::init(true)};
  Option<bool> epilogueGeluBiasGrad{
      *this, "epilogue-gelu-bias-grad",
      llvm::cl::desc("gpt-fuse-matmul-epilogue's gelu-bias-grad option"), llvm::cl::init(false)};
  Option<bool> epilogueBiasGrad{*this, "epilogue-bias-grad",
                                llvm::cl::desc("gpt-fuse-matmul-epilogue's bias-grad option"),
                                llvm::cl::init(false)};
  Option<bool> fuseElementwise{*this, "fuse-elementwise",
                               llvm::cl::desc("Fuse elementwise ops (gpt-fuse-elementwise)"),
                               llvm::cl::init(true)};
  Option<bool> fuseAdamW{*this, "fuse-adamw",
                         llvm::cl::desc("Merge the AdamW updates (gpt-fuse-adamw)"),
                         llvm::cl::init(true)};
  Option<bool> narrowGrads{*this, "narrow-grads",
                           llvm::cl::desc("gpt-fuse-adamw's narrow-grads option"),
                           llvm::cl::init(true)};
};

/// Import: pick the configuration, make shapes static, unroll the layers.
void buildImportPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Precision: gpt-mixed-precision on @forward (nothing for fp32).
void buildPrecisionPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Autodiff: differentiate @forward into @forward_grad.
void buildAutodiffPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Train step: optimizer around the gradient function, plus @init.
void buildTrainStepPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// The phases after train-step, each closed by gpt-verify-phase: lower
/// (inline; FP8), distribute (collectives unless world-size is 0),
/// schedule (FP8 steps, recomputation), fuse, memory-plan (offsets).
void buildLowerPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);
void buildDistributePassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);
void buildSchedulePassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);
void buildFusePassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);
void buildMemoryPlanPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Every phase after `Input` up to and including `compileTo`.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
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
