//===- CompileOptions.h - every option of a compile, declared once -------===//
//
// One struct holds what a compile is asked to do; `CompileOptions::bind`
// declares each option once (flag, help, field), and binders turn that
// list into what reads it: gptc's command line (bindCommandLine, below)
// and gpt-opt's phase pipelines (PipelineOptions, Pipelines.h), the way
// IREE's OptionsBinder does. Pipeline builders and codegen read the
// struct; the checks across options (fp8 needs sm_89, ZeRO-1 needs ranks)
// live in `resolve`, not in the driver.
//
// A few options have a syntax of their own (--world-size=any|N,
// --matmul-epilogues=a,b, --memory-budget=GiB): the flag is bound to a
// string and `resolve` parses it into the typed field that passes read,
// so that programmatic users (the tests) set the typed field directly.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_PIPELINES_COMPILEOPTIONS_H
#define GPTC_COMPILER_PIPELINES_COMPILEOPTIONS_H

#include "compiler/Codegen/EmitExecutable.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llvm::cl {
class Option;
class OptionCategory;
} // namespace llvm::cl

namespace gptc {

/// The mixed-precision policy (phase precision).
enum class PrecisionPolicy { Fp32, Bf16, Fp16, Fp8 };
llvm::StringRef getPrecisionName(PrecisionPolicy precision);
std::optional<PrecisionPolicy> parsePrecision(llvm::StringRef name);

enum class CompileTarget { Cuda, Host };

/// Where an option is listed in --help. Switches lists the kernel, fusion
/// and FP8 rewrite switches, which --help leaves to --help-hidden: each has
/// the default that measured best, and they are for experiments.
enum class OptionGroup { Compile, TrainStep, Distribute, Switches };

/// bind()'s flag spelling, "flag" or "flag=<what>": the flag, and what
/// --help calls its value ("" where not said).
inline std::pair<llvm::StringRef, llvm::StringRef> splitFlag(llvm::StringRef flag) {
  auto [name, value] = flag.split('=');
  return {name, value.trim("<>")};
}

/// A comma-separated option value's items, trimmed, empty ones left out
/// (--matmul-epilogues, --fp8-exclude, --fp32-ops, the pattern lists).
std::vector<std::string> splitList(llvm::StringRef list);

template <typename E>
struct EnumName {
  E value;
  const char *name;
};

struct CompileOptions {
  // Model and shapes.
  std::string model;       // preset; empty: 124M, or the file's only one
  int64_t batch = 0;       // B per rank; 0: chosen for --gpu-memory, or the preset's
  int64_t seq = 0;         // T; 0: the preset's
  double gpuMemory = 76.0; // GiB the plan may use when gptc chooses B
  bool splitBatch = false;

  // Target and codegen.
  CompileTarget target = CompileTarget::Cuda;
  std::string cudaArch = "sm_90";
  std::string cudaToolkit; // empty: $CUDA_HOME, else /usr/local/cuda
  bool flashAttention = true;
  bool warpgroupMma = true;
  bool fuseCrossEntropy = true;
  bool crossEntropyOnePass = true;
  bool layerNormGradOneLaunch = true;
  int64_t layerNormGradChunkRows = 0;

  // Precision.
  PrecisionPolicy precision = PrecisionPolicy::Bf16;
  int64_t fp8History = 16;
  bool fp8LmHead = false;
  std::string fp8Exclude; // comma-separated parameter-name prefixes kept bf16
  std::string fp32Ops;    // comma-separated kinds of ops computed in fp32
  bool fp8SteadyStep = true;
  std::string enablePatterns;  // comma-separated gpt-fuse-fp8 labels, off by default
  std::string disablePatterns; // comma-separated gpt-fuse-fp8 labels
  bool fuseGradAccumulation = false;
  bool narrowResidual = false;

  // Memory and fusion.
  std::string memoryBudgetFlag = "0"; // --memory-budget, parsed into memoryBudget
  double memoryBudget = 0;            // GiB; 0: no recomputation
  int64_t rematMaxDepth = 4;
  bool fuseMatmulEpilogue = true;
  std::string matmulEpilogues = "gelu,gelu-grad"; // parsed into the epilogue* fields
  bool epilogueGelu = true, epilogueGeluGrad = true;
  bool epilogueGeluBiasGrad = false, epilogueBiasGrad = false;
  bool fuseElementwise = true;
  bool fuseAdamW = true;
  bool narrowGrads = true;

  // Train step (see gpt-insert-optimizer).
  int64_t accumSteps = 1;
  double lr = 3.0e-4;
  double minLr = 0.0;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  std::string schedule = "constant";
  double beta1 = 0.9, beta2 = 0.95;
  double epsilon = 1.0e-8;
  double weightDecay = 0.1;
  double lossScale = 1.0;
  double gradClip = 1.0;

  // Data parallelism.
  std::string worldSizeFlag = "any"; // --world-size, parsed into worldSize
  int64_t worldSize = -1;            // -1 any, 0 one device (no collectives), N exactly N
  double bucketMb = 25.0;
  int64_t zero = 0;

  /// Declares every option once: `b.opt(field, "flag", group, "help")`
  /// ("flag=<what>" names its value in --help), and for an enum field a
  /// list of its names after the help.
  template <typename Binder>
  void bind(Binder &b);

  /// Parses the options with a syntax of their own into their fields and
  /// checks the options against each other and the target; the error names
  /// the flag. The pipelines and codegen read only resolved options.
  llvm::Error resolve();

  /// Whether gpt-fuse-fp8's pattern `label` runs: on by default and not in
  /// --disable-patterns, or in --enable-patterns.
  bool patternOn(llvm::StringRef label) const;

  /// Whether the FP8 policy keeps a first step apart from the steady ones.
  bool fp8SteadySteps() const {
    return precision == PrecisionPolicy::Fp8 && fp8History > 0 && fp8SteadyStep;
  }

  /// What codegen needs (the toolkit resolved from $CUDA_HOME if unset).
  codegen::EmitOptions emitOptions() const;

  /// Every option as (flag, value), in bind order, the values as the phase
  /// pipelines' options parse them: what `gptc --compile-to` records in
  /// the IR for `--compile-from` to go on with.
  std::vector<std::pair<std::string, std::string>> flagValues() const;
};

/// gptc's flags for `options`, each bound to its field (llvm::cl external
/// storage); they parse with llvm::cl::ParseCommandLineOptions. Keep the
/// result alive while the options are parsed and read.
class CommandLineOptions {
public:
  ~CommandLineOptions();
  /// Whether the flag was given on the command line.
  bool given(llvm::StringRef flag) const;
  const llvm::cl::Option *find(llvm::StringRef flag) const;

private:
  friend std::unique_ptr<CommandLineOptions> bindCommandLine(CompileOptions &options);
  struct Impl;
  std::unique_ptr<Impl> impl;
};
std::unique_ptr<CommandLineOptions> bindCommandLine(CompileOptions &options);

/// The --help section of a group of options (gptc hides all others).
llvm::cl::OptionCategory &getOptionCategory(OptionGroup group);

//===----------------------------------------------------------------------===//
// The options
//===----------------------------------------------------------------------===//

template <typename Binder>
void CompileOptions::bind(Binder &b) {
  using G = OptionGroup;
  b.opt(model, "model=<preset>", G::Compile,
        "Model preset: 124M (default), 350M, 774M, 1558M, or the test configs tiny and mini");
  b.opt(batch, "batch=<B>", G::Compile,
        "Batch size B per GPU (default: for CUDA, the largest power-of-two multiple of the "
        "preset's that fits --gpu-memory, where the preset allows it (GPT-2's sizes); else the "
        "preset's)");
  b.opt(gpuMemory, "gpu-memory=<GiB>", G::Compile,
        "GiB of GPU memory the step may plan for when gptc chooses --batch (default 76: an 80 "
        "GB H100 less the CUDA context and the libraries' buffers)");
  b.opt(seq, "seq=<T>", G::Compile, "Sequence length T (default: the preset's)");
  b.opt(splitBatch, "split-batch", G::Compile,
        "With --memory-budget and --batch=B: also try each step's B rows as 2, 4, ... "
        "micro-batches of B/k rows (--accum-steps k times as many), and compile the fewest whose "
        "rematerialization recomputes under 1% more FLOPs (else the one that recomputes least): "
        "where the budget would have GEMMs rebuilt, smaller micro-batches are usually the "
        "cheaper way to fit");

  b.opt(target, "target=<cuda|host>", G::Compile, "Executable target: cuda or host",
        {{CompileTarget::Cuda, "cuda"}, {CompileTarget::Host, "host"}});
  b.opt(cudaArch, "cuda-arch=<sm_NN>", G::Compile,
        "CUDA target chip: sm_80, sm_86, sm_87, sm_89, sm_90(a), sm_100(a), sm_103(a), "
        "sm_120(a) or sm_121(a)");
  b.opt(cudaToolkit, "cuda-toolkit=<dir>", G::Compile,
        "CUDA toolkit for ptxas and libdevice (default: $CUDA_HOME or /usr/local/cuda)");
  b.opt(flashAttention, "flash-attention", G::Switches,
        "CUDA: tensor-core flash attention for bf16 attention whose head dimension and "
        "sequence length are multiples of 16 (=false: the scalar kernels)");
  b.opt(warpgroupMma, "warpgroup-mma", G::Switches,
        "CUDA sm_90: flash attention multiplies on Hopper's warpgroup MMA (wgmma) and the "
        "kernels are compiled for sm_90a (=false: mma.sync, as on sm_80)");
  b.opt(fuseCrossEntropy, "fuse-cross-entropy", G::Switches,
        "Cross-entropy in one row launch forward (saving each row's log-sum-exp) and one "
        "backward (=false: separate statistics and gradient kernels)");
  b.opt(crossEntropyOnePass, "cross-entropy-one-pass", G::Switches,
        "CUDA, with --fuse-cross-entropy: when the logits' gradient overwrites them, the "
        "forward's launch writes it too, one block per row staged in shared memory, so the "
        "logits are read once (=false: a forward and a backward launch)");
  b.opt(layerNormGradOneLaunch, "layernorm-grad-one-launch", G::Switches,
        "CUDA: a layernorm gradient's rows kernel also sums dweight and dbias, a warp keeping "
        "its columns' sums over --layernorm-grad-chunk-rows rows in shared memory, so dy and x "
        "are read once (=false: a column kernel reads them again)");
  b.opt(layerNormGradChunkRows, "layernorm-grad-chunk-rows=<rows>", G::Switches,
        "Rows of one partial sum of a layernorm gradient's dweight and dbias, added up by a "
        "second kernel (1 to 1024; 0: with --layernorm-grad-one-launch 4 to 64, about a wave of "
        "warps, else 64). The same value gives the same bits with and without one launch");

  b.opt(precision, "precision=<fp32|bf16|fp16|fp8>", G::Compile,
        "Precision policy (phase precision): bf16 (default: bf16 GEMMs, fp32 master weights "
        "and statistics, as llm.c and PyTorch AMP), fp32 (for parity work), or fp16 (the same "
        "in fp16; pair it with --loss-scale), or fp8 (bf16 with FP8 linear layers: per-tensor "
        "amax-scaled e4m3 forward, e5m2 gradients)",
        {{PrecisionPolicy::Fp32, "fp32"},
         {PrecisionPolicy::Bf16, "bf16"},
         {PrecisionPolicy::Fp16, "fp16"},
         {PrecisionPolicy::Fp8, "fp8"}});
  b.opt(fp8History, "fp8-history=<N>", G::Compile,
        "With --precision=fp8: take each FP8 scale from the largest amax of that tensor in the "
        "last N steps (delayed scaling, recorded as the tensor is cast, no amax pass); 0: from "
        "the tensor itself (current scaling, one more read per tensor)");
  b.opt(fp8LmHead, "fp8-lm-head", G::Compile,
        "With --precision=fp8: the tied LM head's GEMMs (logits, and their two gradient "
        "products) in FP8 too, the largest GEMMs of the small models (default: bf16; its loss "
        "against the blocks-only recipe: docs/precision.md)");
  b.opt(fp8Exclude, "fp8-exclude=<names>", G::Compile,
        "With --precision=fp8: the linear layers whose weight's parameter name starts with "
        "one of these comma-separated prefixes stay bf16; first and last name the first and "
        "the last block (e.g. first,last, or h.0.mlp.,h.11.)");
  b.opt(fp32Ops, "fp32-ops=<kinds>", G::Compile,
        "With --precision=bf16, fp16 or fp8: these kinds of ops compute in fp32 all the same, "
        "comma-separated: attention (its scores, softmax and output; on CUDA the scalar "
        "attention kernels, slower than flash)");
  b.opt(fp8SteadyStep, "fp8-steady-step", G::Switches,
        "With --precision=fp8 and delayed scaling: a program of its own for the first step "
        "(train_step_first, which measures the tensors whose histories are empty); every later "
        "step takes all its FP8 scales from the histories in one kernel launch instead of two "
        "launches per FP8 operand (gpt-fp8-steady-step)");
  b.opt(disablePatterns, "disable-patterns=<labels>", G::Switches,
        "With --precision=fp8: the rewrites of gpt-fuse-fp8 not to run, comma-separated: "
        "fp8-cross-entropy-grad, fp8-cast-gelu-grad, fp8-cast-column-sum, fp8-fold-input-cast, "
        "fp8-layernorm-codes (each moves an FP8 cast into a neighbour; docs/precision.md)");
  b.opt(enablePatterns, "enable-patterns=<labels>", G::Switches,
        "With --precision=fp8: the rewrites of gpt-fuse-fp8 that are off by default to run: "
        "fp8-gelu-matmul-codes (the steady step's MLP GEMM writes its GELU's FP8 codes through "
        "cuBLASLt's GELU_AUX epilogue and a byte transpose the other layout; no faster than the "
        "cast, and not its bits: docs/precision.md)");
  b.opt(fuseGradAccumulation, "fuse-grad-accumulation", G::Switches,
        "With --precision=fp8 and --accum-steps > 1: the first micro-batch's weight-gradient "
        "GEMMs write f32, and each later one adds its product to that sum in place (cuBLASLt "
        "beta = 1), where a bf16 result, its f32 copy and an add per micro-batch did "
        "(gpt-fuse-grad-accumulation; off by default: the f32 sum takes twice the bytes of the "
        "bf16 gradients it replaces across the micro-batches)");
  b.opt(narrowResidual, "narrow-residual", G::Compile,
        "With --precision=bf16 or fp16: the residual stream (the embedding, the residual adds, "
        "the layernorms' inputs and their gradients) in that type too, as in llm.c (default: "
        "fp32, as under torch.autocast)");

  b.opt(memoryBudgetFlag, "memory-budget=<GiB>", G::Compile,
        "Recompute activations in the backward so the train step needs at most this many GiB "
        "(parameters, AdamW state, inputs and activations; 0: off)");
  b.opt(rematMaxDepth, "remat-max-depth=<N>", G::Switches,
        "With --memory-budget: the most ops (views and FP8 casts aside) on one path of a "
        "recompute chain; deeper chains free values further from what stays live "
        "(gpt-rematerialize's max-depth)");
  b.opt(fuseMatmulEpilogue, "fuse-matmul-epilogue", G::Switches,
        "Fold GELU, GELU's gradient and bias gradients into cuBLASLt GEMM epilogues "
        "(gpt-fuse-matmul-epilogue; =false: separate kernels)");
  b.opt(matmulEpilogues, "matmul-epilogues=<list>", G::Switches,
        "Which folds gpt-fuse-matmul-epilogue makes, comma-separated: gelu, gelu-grad, "
        "gelu-bias-grad, bias-grad (default: gelu,gelu-grad; the bias-gradient folds are "
        "slower: docs/precision.md)");
  b.opt(fuseElementwise, "fuse-elementwise", G::Switches,
        "Fuse elementwise ops into one kernel per group (gpt-fuse-elementwise; =false: one "
        "kernel per op)");
  b.opt(fuseAdamW, "fuse-adamw", G::Switches,
        "Update all parameters with one gpt.adamw_multi, one kernel launch (gpt-fuse-adamw; "
        "=false: a gpt.adamw and a launch per parameter)");
  b.opt(narrowGrads, "narrow-grads", G::Switches,
        "With --fuse-adamw: the update and the gradient norm read bf16/f16 weight gradients as "
        "they are, widening as they load (=false: through an f32 copy)");

  b.opt(accumSteps, "accum-steps", G::TrainStep,
        "Micro-batches per step (gradient accumulation)");
  b.opt(lr, "lr", G::TrainStep, "Peak learning rate");
  b.opt(minLr, "min-lr", G::TrainStep, "Final learning rate of the decay");
  b.opt(warmupSteps, "warmup-steps", G::TrainStep, "Linear warm-up steps");
  b.opt(totalSteps, "total-steps", G::TrainStep, "Steps over which the LR decays to --min-lr");
  b.opt(schedule, "schedule=<constant|cosine|linear>", G::TrainStep, "LR schedule: constant, cosine or linear");
  b.opt(beta1, "beta1", G::TrainStep, "AdamW beta1");
  b.opt(beta2, "beta2", G::TrainStep, "AdamW beta2");
  b.opt(epsilon, "adam-epsilon", G::TrainStep, "AdamW epsilon");
  b.opt(weightDecay, "weight-decay", G::TrainStep,
        "AdamW weight decay (matrices and embeddings only)");
  b.opt(lossScale, "loss-scale", G::TrainStep,
        "Static loss scale S (default 1: none): the backward starts from S instead of 1 and the "
        "optimizer divides the gradients by S, so small fp16 gradients do not flush to zero; a "
        "step whose gradients overflow stops gptrun with a 'not finite' error (lower S)");
  b.opt(gradClip, "grad-clip", G::TrainStep, "Clip the global gradient norm (0: off)");

  b.opt(worldSizeFlag, "world-size=<any|N>", G::Distribute,
        "Data-parallel ranks, each with --batch sequences: any (default: the step has its "
        "gradient all-reduces, gptrun --gpus N or the launcher sets N, one rank skips them), 1 "
        "(one device, no collectives) or N (exactly N)");
  b.opt(bucketMb, "bucket-mb", G::Distribute, "Gradient all-reduce bucket size in MiB");
  b.opt(zero, "zero=<0|1>", G::Distribute,
        "ZeRO stage: 0 (default) every rank keeps the whole AdamW state; 1 each of the "
        "--world-size=N ranks (N >= 2, fixed at compile time: the shards are 1/N of each "
        "tensor) keeps and updates 1/N of the moments, with a reduce-scatter of the gradients "
        "and an all-gather of the new weights (gpt-shard-optimizer)");
}

} // namespace gptc

#endif // GPTC_COMPILER_PIPELINES_COMPILEOPTIONS_H
