//===- gptc.cpp - the gptc compiler driver -------------------------------===//
//
//   gptc compile models/gpt2.mlir -o step.fb      (124M, bf16, CUDA, any GPU count)
//   gptc compile models/gpt2.mlir --model=124M --batch=16 --seq=1024 -o out.mlir
//   gptc run-reference models/gpt2.mlir --model=tiny --arithmetic=fp64
//   gptc explain step.fb
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/EmitExecutable.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Reference/Interpreter.h"
#include "dialects/GPT/IR/GPTDialect.h"
#include "dialects/GPT/Transforms/Passes.h"
#include "runtime/executable/Report.h"
#include "runtime/support/Version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>

using namespace mlir;
using namespace gptc;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory compileCat("gptc compile / run-reference options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir | step.fb>"),
                               cl::cat(compileCat));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout); also --output"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(compileCat));
cl::alias outputAlias("output", cl::desc("Alias for -o"), cl::aliasopt(outputFile),
                      cl::cat(compileCat));
cl::opt<bool> report("report",
                     cl::desc("After writing -o FILE.fb, print what it holds (as gptc explain)"),
                     cl::cat(compileCat));
cl::opt<std::string> model("model",
                           cl::desc("Model preset: 124M (default), 350M, 774M, 1558M, or the "
                                    "test configs tiny and mini"),
                           cl::cat(compileCat));
cl::opt<int64_t> batch("batch",
                       cl::desc("Batch size B per GPU (default: for CUDA, the largest power-of-two "
                                "multiple of the preset's that fits --gpu-memory, where the preset "
                                "allows it (GPT-2's sizes); else the preset's)"),
                       cl::init(0), cl::cat(compileCat));
cl::opt<double> gpuMemory(
    "gpu-memory",
    cl::desc("GiB of GPU memory the step may plan for when gptc chooses --batch (default 76: an "
             "80 GB H100 less the CUDA context and the libraries' buffers)"),
    cl::value_desc("GiB"), cl::init(76.0), cl::cat(compileCat));
cl::opt<int64_t> seq("seq", cl::desc("Sequence length T (default: the preset's)"),
                     cl::init(0), cl::cat(compileCat));
cl::opt<std::string> compileTo("compile-to",
                               cl::desc("Stop after this phase (see --list-phases)"),
                               cl::value_desc("phase"), cl::cat(compileCat));
cl::opt<std::string> dumpDir("dump-ir-after-each-pass",
                             cl::desc("Write DIR/NN-<pass>.mlir after every pass"),
                             cl::value_desc("dir"), cl::cat(compileCat));
cl::opt<std::string> target("target", cl::desc("Executable target: cuda or host"),
                           cl::init("cuda"), cl::cat(compileCat));
cl::opt<std::string> cudaArch("cuda-arch",
                              cl::desc("CUDA target chip: sm_80, sm_86, sm_87, sm_89, sm_90(a), "
                                       "sm_100(a), sm_103(a), sm_120(a) or sm_121(a)"),
                              cl::init("sm_90"), cl::cat(compileCat));
cl::opt<bool> flashAttention(
    "flash-attention",
    cl::desc("CUDA: tensor-core flash attention for bf16 attention whose head dimension "
             "and sequence length are multiples of 16 (=false: the scalar kernels)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> warpgroupMma(
    "warpgroup-mma",
    cl::desc("CUDA sm_90: flash attention multiplies on Hopper's warpgroup MMA (wgmma) and "
             "the kernels are compiled for sm_90a (=false: mma.sync, as on sm_80)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fuseAdamW(
    "fuse-adamw",
    cl::desc("Update all parameters with one gpt.adamw_multi, one kernel launch "
             "(gpt-fuse-adamw; =false: a gpt.adamw and a launch per parameter)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> narrowGrads(
    "narrow-grads",
    cl::desc("With --fuse-adamw: the update and the gradient norm read bf16/f16 weight "
             "gradients as they are, widening as they load (=false: through an f32 copy)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fuseCrossEntropy(
    "fuse-cross-entropy",
    cl::desc("Cross-entropy in one row launch forward (saving each row's log-sum-exp) and "
             "one backward (=false: separate statistics and gradient kernels)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> crossEntropyOnePass(
    "cross-entropy-one-pass",
    cl::desc("CUDA, with --fuse-cross-entropy: when the logits' gradient overwrites them, the "
             "forward's launch writes it too, one block per row staged in shared memory, so "
             "the logits are read once (=false: a forward and a backward launch)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> layerNormGradOneLaunch(
    "layernorm-grad-one-launch",
    cl::desc("CUDA: a layernorm gradient's rows kernel also sums dweight and dbias, a warp "
             "keeping its columns' sums over --layernorm-grad-chunk-rows rows in shared "
             "memory, so dy and x are read once (=false: a column kernel reads them again)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<int> layerNormGradChunkRows(
    "layernorm-grad-chunk-rows",
    cl::desc("Rows of one partial sum of a layernorm gradient's dweight and dbias, added "
             "up by a second kernel (1 to 1024; 0: with --layernorm-grad-one-launch 4 to 64, "
             "about a wave of warps, else 64). The same value gives the same bits with and "
             "without one launch"),
    cl::init(0), cl::cat(compileCat));
cl::opt<std::string> progressMode(
    "progress",
    cl::desc("Compile progress on stderr: auto (a bar on a terminal, a line per pass and "
             "codegen stage otherwise), bar, lines or off"),
    cl::init("auto"), cl::cat(compileCat));
cl::opt<std::string> cudaToolkit("cuda-toolkit",
                                 cl::desc("CUDA toolkit for ptxas and libdevice "
                                          "(default: $CUDA_HOME or /usr/local/cuda)"),
                                 cl::value_desc("dir"), cl::cat(compileCat));
cl::opt<std::string> precision("precision",
                               cl::desc("Precision policy (phase precision): bf16 (default: "
                                        "bf16 GEMMs, fp32 master weights and statistics, as "
                                        "llm.c and PyTorch AMP), fp32 (for parity work), or "
                                        "fp16 (the same in fp16; pair it with --loss-scale), or fp8 "
                                        "(bf16 with FP8 linear layers: per-tensor amax-scaled e4m3 "
                                        "forward, e5m2 gradients)"),
                               cl::init("bf16"), cl::cat(compileCat));
cl::opt<int64_t> fp8History(
    "fp8-history",
    cl::desc("With --precision=fp8: take each FP8 scale from the largest amax of that tensor in "
             "the last N steps (delayed scaling, recorded as the tensor is cast, no amax pass); "
             "0: from the tensor itself (current scaling, one more read per tensor)"),
    cl::value_desc("N"), cl::init(16), cl::cat(compileCat));
cl::opt<bool> fp8LmHead(
    "fp8-lm-head",
    cl::desc("With --precision=fp8: the tied LM head's GEMMs (logits, and their two gradient "
             "products) in FP8 too, the largest GEMMs of the small models (default: bf16; its "
             "loss against the blocks-only recipe: docs/precision.md)"),
    cl::init(false), cl::cat(compileCat));
cl::opt<bool> fp8CrossEntropyGrad(
    "fp8-cross-entropy-grad",
    cl::desc("With --fp8-lm-head: the loss kernel writes the logits' gradient as e5m2 codes "
             "at the scale of its bound |dloss| / positions, and a byte transpose gives the "
             "other layout (gpt-fp8-cross-entropy-grad; =false: a bf16 gradient, scaled by its "
             "amax and cast)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fuseFp8Cast(
    "fuse-fp8-cast",
    cl::desc("With --precision=fp8: the backward's FP8 casts also sum the bias gradients' "
             "columns, and cast the MLP's GELU gradient from the GEMM output and the "
             "pre-activation, which is then never stored in bf16 (gpt-fuse-fp8-cast)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fp8SteadyStep(
    "fp8-steady-step",
    cl::desc("With --precision=fp8 and delayed scaling: a program of its own for the first "
             "step (train_step_first, which measures the tensors whose histories are empty); "
             "every later step takes all its FP8 scales from the histories in one kernel "
             "launch instead of two launches per FP8 operand (gpt-fp8-steady-step)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> foldFp8InputCast(
    "fold-fp8-input-cast",
    cl::desc("With --precision=fp8: an FP8 cast of a bf16 copy that nothing else reads (the "
             "steady step's block weights) reads the f32 tensor and rounds each element to "
             "bf16 as it loads, the same codes without the copy (gpt-fold-fp8-input-cast)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fuseLayerNormFp8(
    "fuse-layernorm-fp8",
    cl::desc("With --fp8-steady-step: the steady step's residual layernorms write both "
             "layouts of the FP8 codes of their result (the scale is known before they run), "
             "where a bf16 result and a cast kernel did (gpt-fuse-layernorm-fp8)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<bool> fuseFp8GeluMatmul(
    "fuse-fp8-gelu-matmul",
    cl::desc("With --fp8-steady-step: the steady step's MLP GEMM applies the GELU and writes "
             "its FP8 codes itself (cuBLASLt's GELU_AUX epilogue with an FP8 D; the scale is "
             "known before it runs) and a byte transpose the other layout, where a cast "
             "kernel read the bf16 pre-activation back (gpt-fuse-fp8-gelu-matmul; off by "
             "default: no faster than the cast, and not its bits; docs/precision.md)"),
    cl::init(false), cl::cat(compileCat));
cl::opt<bool> fuseGradAccumulation(
    "fuse-grad-accumulation",
    cl::desc("With --precision=fp8 and --accum-steps > 1: the first micro-batch's weight-gradient "
             "GEMMs write f32, and each later one adds its product to that sum in place "
             "(cuBLASLt beta = 1), where a bf16 result, its f32 copy and an add per micro-batch "
             "did (gpt-fuse-grad-accumulation; off by default: the f32 sum takes twice the "
             "bytes of the bf16 gradients it replaces across the micro-batches)"),
    cl::init(false), cl::cat(compileCat));
cl::opt<bool> narrowResidual(
    "narrow-residual",
    cl::desc("With --precision=bf16 or fp16: the residual stream (the embedding, the residual "
             "adds, the layernorms' inputs and their gradients) in that type too, as in llm.c "
             "(default: fp32, as under torch.autocast)"),
    cl::init(false), cl::cat(compileCat));
cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Recompute activations in the backward so the train step needs at most this "
             "many GiB (parameters, AdamW state, inputs and activations; 0: off)"),
    cl::value_desc("GiB"), cl::init("0"), cl::cat(compileCat));
cl::opt<int64_t> rematMaxDepth(
    "remat-max-depth",
    cl::desc("With --memory-budget: the most ops (views and FP8 casts aside) on one path of a "
             "recompute chain; deeper chains free values further from what stays live "
             "(gpt-rematerialize's max-depth)"),
    cl::value_desc("N"), cl::init(4), cl::cat(compileCat));
cl::opt<bool> fuseMatmulEpilogue(
    "fuse-matmul-epilogue",
    cl::desc("Fold GELU, GELU's gradient and bias gradients into cuBLASLt GEMM epilogues "
             "(gpt-fuse-matmul-epilogue; =false: separate kernels)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<std::string> matmulEpilogues(
    "matmul-epilogues",
    cl::desc("Which folds gpt-fuse-matmul-epilogue makes, comma-separated: gelu, gelu-grad, "
             "gelu-bias-grad, bias-grad (default: gelu,gelu-grad; the bias-gradient folds are "
             "slower: docs/precision.md)"),
    cl::value_desc("list"), cl::init("gelu,gelu-grad"), cl::cat(compileCat));
cl::opt<bool> fuseElementwise("fuse-elementwise",
                              cl::desc("Fuse elementwise ops into one kernel per group "
                                       "(gpt-fuse-elementwise; =false: one kernel per op)"),
                              cl::init(true), cl::cat(compileCat));
cl::opt<bool> listPhases("list-phases", cl::desc("Print the phases and exit"),
                         cl::cat(compileCat));

cl::OptionCategory trainCat("gptc train-step options (phase train-step)");
cl::opt<bool> splitBatch(
    "split-batch",
    cl::desc("With --memory-budget and --batch=B: also try each step's B rows as 2, 4, ... "
             "micro-batches of B/k rows (--accum-steps k times as many), and compile the fewest "
             "whose rematerialization recomputes under 1% more FLOPs (else the one that "
             "recomputes least): where the budget would have GEMMs rebuilt, smaller "
             "micro-batches are usually the cheaper way to fit"),
    cl::init(false), cl::cat(compileCat));
cl::opt<int64_t> accumSteps("accum-steps", cl::desc("Micro-batches per step (gradient accumulation)"),
                            cl::init(1), cl::cat(trainCat));
cl::opt<double> lr("lr", cl::desc("Peak learning rate"), cl::init(3.0e-4), cl::cat(trainCat));
cl::opt<double> minLr("min-lr", cl::desc("Final learning rate of the decay"), cl::init(0.0),
                      cl::cat(trainCat));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warm-up steps"), cl::init(0),
                             cl::cat(trainCat));
cl::opt<int64_t> totalSteps("total-steps", cl::desc("Steps over which the LR decays to --min-lr"),
                            cl::init(0), cl::cat(trainCat));
cl::opt<std::string> schedule("schedule", cl::desc("LR schedule: constant, cosine or linear"),
                              cl::init("constant"), cl::cat(trainCat));
cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9), cl::cat(trainCat));
cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.95), cl::cat(trainCat));
cl::opt<double> adamEps("adam-epsilon", cl::desc("AdamW epsilon"), cl::init(1.0e-8),
                        cl::cat(trainCat));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("AdamW weight decay (matrices and embeddings only)"),
                            cl::init(0.1), cl::cat(trainCat));
cl::opt<double> lossScale(
    "loss-scale",
    cl::desc("Static loss scale S (default 1: none): the backward starts from S instead of 1 "
             "and the optimizer divides the gradients by S, so small fp16 gradients do not "
             "flush to zero; a step whose gradients overflow stops gptrun with a 'not finite' "
             "error (lower S)"),
    cl::init(1.0), cl::cat(trainCat));
cl::opt<double> gradClip("grad-clip", cl::desc("Clip the global gradient norm (0: off)"),
                         cl::init(1.0), cl::cat(trainCat));

cl::OptionCategory distributeCat("gptc data-parallel options (phase memory-plan)");
/// NCCL's communicators are int-ranked; past 2^16 GPUs the per-rank batch
/// bookkeeping is not what anyone means.
constexpr int64_t kMaxWorldSize = 1 << 16;
cl::opt<std::string> worldSize(
    "world-size",
    cl::desc("Data-parallel ranks, each with --batch sequences: any (default: the step has its "
             "gradient all-reduces, gptrun --gpus N or the launcher sets N, one rank skips them), "
             "1 (one device, no collectives) or N (exactly N)"),
    cl::value_desc("any|N"), cl::init("any"), cl::cat(distributeCat));
cl::opt<double> bucketMb("bucket-mb", cl::desc("Gradient all-reduce bucket size in MiB"),
                         cl::init(25.0), cl::cat(distributeCat));
cl::opt<int64_t> zero(
    "zero",
    cl::desc("ZeRO stage: 0 (default) every rank keeps the whole AdamW state; 1 each of the "
             "--world-size=N ranks (N >= 2, fixed at compile time: the shards are 1/N of each "
             "tensor) keeps and updates 1/N of the moments, with a reduce-scatter of the "
             "gradients and an all-gather of the new weights (gpt-shard-optimizer)"),
    cl::value_desc("0|1"), cl::init(0), cl::cat(distributeCat));

cl::OptionCategory referenceCat("gptc run-reference options");
cl::opt<int64_t> steps("steps",
                       cl::desc("Train steps to run (0: only the forward loss)"),
                       cl::init(0), cl::cat(referenceCat));
cl::opt<std::string> arithmetic("arithmetic",
                                cl::desc("Interpreter arithmetic: fp64 or fp32 (bf16/f16 "
                                         "values are rounded after every op in both)"),
                                cl::init("fp64"), cl::cat(referenceCat));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the initialisation and the random batch"),
                       cl::init(1337), cl::cat(referenceCat));
cl::opt<bool> decompose("decompose-attention",
                        cl::desc("Run gpt-decompose-attention before interpreting"),
                        cl::cat(referenceCat));
cl::opt<std::string> dataFile("data",
                              cl::desc("llm.c token file (.bin) for the batches (default: a "
                                       "synthetic stream where each token decides the next)"),
                              cl::value_desc("file"), cl::cat(referenceCat));

const char *kOverview = R"(gptc: compiles a GPT-2 training step for the GPU.

Usage:
  gptc compile <model.mlir> [options] -o step.fb
  gptc run-reference <model.mlir> [options]
  gptc explain <step.fb>
  gptc --version | --list-phases

With no option, compile builds GPT-2 124M at T=1024 in the bf16 policy
(fp32 master weights) for CUDA sm_90, with the largest power-of-two batch
whose memory plan fits --gpu-memory (76 GiB), for any number of GPUs
(gptrun step.fb --data train.bin --gpus N). It prints what it chose.

Examples:
  gptc compile models/gpt2.mlir -o step.fb
  gptc compile models/gpt2.mlir --model=1558M --precision=fp8 -o step.fb --report
  gptc compile models/gpt2.mlir --model=124M --batch=16 --precision=fp32 -o step.fb
  gptc explain step.fb
  gptc compile models/gpt2.mlir --model=tiny --compile-to=import --dump-ir-after-each-pass=out/
  gptc compile models/gpt2.mlir --model=mini --target=host -o mini.fb
  gptc run-reference models/gpt2.mlir --model=tiny --precision=fp32 --steps=10 --lr=1e-2

MLIR's pass-manager flags also work (listed by --help-hidden), e.g.
  --mlir-print-ir-after-all, --mlir-print-ir-after=<pass>, --mlir-timing
)";

int fail(const llvm::Twine &message) {
  llvm::errs() << "gptc: error: " << message << "\n";
  return 1;
}

/// Loads and verifies `path`, then prints its report (runtime/executable/Report.h).
int printReport(const std::string &path) {
  StatusOr<Executable> exe = Executable::loadFile(path);
  if (!exe)
    return fail(exe.status().message());
  llvm::outs() << formatReport(summarize(exe->get()), path);
  return 0;
}

/// A model file is text of a few KiB; anything past this is not one.
constexpr uint64_t kMaxModelBytes = uint64_t(1) << 30;

OwningOpRef<ModuleOp> parseInput(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  // An endless or huge input (/dev/zero) would be read whole first.
  llvm::sys::fs::file_status status;
  if (inputFile != "-" && !llvm::sys::fs::status(inputFile, status)) {
    if (status.type() != llvm::sys::fs::file_type::regular_file) {
      llvm::errs() << "gptc: error: '" << inputFile << "' is not a regular file\n";
      return nullptr;
    }
    if (status.getSize() > kMaxModelBytes) {
      llvm::errs() << "gptc: error: '" << inputFile << "' holds " << status.getSize()
                   << " bytes, more than a model file's 1 GiB bound\n";
      return nullptr;
    }
  }
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "gptc: error: cannot open '" << inputFile << "': " << error << "\n";
    return nullptr;
  }
  // An executable given as the model: say so, not a parse error quoting
  // its bytes.
  llvm::StringRef head = file->getBuffer().take_front(8);
  if (head.size() == 8 && head.substr(4) == "GPTX") {
    llvm::errs() << "gptc: error: '" << inputFile
                 << "' is a gptc executable (step.fb), not a model: gptc explain reads it\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// --split-batch's choice: each step's --batch rows as this many
/// micro-batches.
int64_t batchSplit = 1;

/// The preset compiled: --model, else 124M where the file has it (else the
/// file's only preset, which gpt-instantiate-model picks).
std::string resolvedModel;
/// The batch gptc chose for --gpu-memory (0: --batch or the preset's).
int64_t chosenBatch = 0;
/// The resolved preset's batch, seq (0 where it has none) and fit_batch.
int64_t presetBatch = 0, presetSeq = 0;
bool presetFitsBatch = false;
/// Set while gptc tries batches: plan without the budget's recomputation.
bool ignoreMemoryBudget = false;

/// --world-size as PipelineOptions::worldSize (-1 any, 0 one device, N);
/// nullopt when it is none of those.
std::optional<int64_t> worldSizeValue() {
  llvm::StringRef text = llvm::StringRef(worldSize).trim();
  if (text == "any")
    return -1;
  int64_t n = 0;
  if (text.getAsInteger(10, n) || n < 1 || n > kMaxWorldSize)
    return std::nullopt;
  return n == 1 ? 0 : n; // one rank: no collectives at all
}

/// worldSizeValue(), or an error naming the flag.
std::optional<int64_t> parseWorldSize() {
  std::optional<int64_t> n = worldSizeValue();
  if (!n)
    fail("--world-size: expected any or a number of ranks from 1 to " +
         std::to_string(kMaxWorldSize) + ", got '" + worldSize + "'");
  return n;
}

/// The driver's flags as pipeline options (PassOptions cannot be copied).
void setPipelineOptions(PipelineOptions &options) {
  options.model = resolvedModel;
  options.batch = (batch ? batch : chosenBatch) / batchSplit;
  options.seq = seq;
  options.precision = precision;
  options.fp8History = fp8History;
  options.accumSteps = accumSteps * batchSplit;
  options.lr = lr;
  options.minLr = minLr;
  options.warmupSteps = warmupSteps;
  options.totalSteps = totalSteps;
  options.schedule = schedule;
  options.beta1 = beta1;
  options.beta2 = beta2;
  options.epsilon = adamEps;
  options.weightDecay = weightDecay;
  options.gradClip = gradClip;
  options.lossScale = lossScale;
  options.worldSize = worldSizeValue().value_or(0);
  options.bucketMb = bucketMb;
  options.zero = zero;
  options.fuseMatmulEpilogue = fuseMatmulEpilogue;
  options.fuseElementwise = fuseElementwise;
  options.fuseAdamW = fuseAdamW;
  options.narrowGrads = narrowGrads;
  options.narrowResidual = narrowResidual;
  options.fp8LmHead = fp8LmHead;
  options.fp8CrossEntropyGrad = fp8CrossEntropyGrad;
  options.fuseFp8Cast = fuseFp8Cast;
  options.fp8SteadyStep = fp8SteadyStep;
  options.foldFp8InputCast = foldFp8InputCast;
  options.fuseLayerNormFp8 = fuseLayerNormFp8;
  options.fuseFp8GeluMatmul = fuseFp8GeluMatmul;
  options.fuseGradAccumulation = fuseGradAccumulation;
  options.rematMaxDepth = rematMaxDepth;
}

/// --matmul-epilogues into the pipeline's four switches, or an error naming
/// the flag and the unknown entry.
bool parseMatmulEpilogues(PipelineOptions &options) {
  options.epilogueGelu = options.epilogueGeluGrad = options.epilogueGeluBiasGrad =
      options.epilogueBiasGrad = false;
  llvm::SmallVector<llvm::StringRef> names;
  llvm::StringRef(matmulEpilogues).split(names, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef name : names) {
    name = name.trim();
    if (name == "gelu")
      options.epilogueGelu = true;
    else if (name == "gelu-grad")
      options.epilogueGeluGrad = true;
    else if (name == "gelu-bias-grad")
      options.epilogueGeluBiasGrad = true;
    else if (name == "bias-grad")
      options.epilogueBiasGrad = true;
    else {
      fail("--matmul-epilogues: expected gelu, gelu-grad, gelu-bias-grad or bias-grad, got '" +
           name.str() + "'");
      return false;
    }
  }
  return true;
}

/// --memory-budget as GiB >= 0, or an error naming the flag.
std::optional<double> parseMemoryBudget() {
  double gib = 0;
  if (llvm::StringRef(memoryBudget).trim().getAsDouble(gib) || !std::isfinite(gib) || gib < 0) {
    fail("--memory-budget: expected a number of GiB >= 0 (0: off), got '" + memoryBudget + "'");
    return std::nullopt;
  }
  return gib;
}

/// MLIR's pass-manager flags plus every phase up to `phase`.
LogicalResult buildPassManager(PassManager &pm, Phase phase) {
  if (precision != "fp32" && precision != "bf16" && precision != "fp16" && precision != "fp8") {
    fail("--precision: expected fp32, bf16, fp16 or fp8, got '" + precision + "'");
    return failure();
  }
  if (fp8History < 0) {
    fail("--fp8-history: expected a number of steps >= 0, got " + std::to_string(fp8History));
    return failure();
  }
  if (fp8LmHead && precision != "fp8") {
    fail("--fp8-lm-head: needs --precision=fp8, got " + precision);
    return failure();
  }
  if (narrowResidual && precision == "fp32") {
    fail("--narrow-residual: needs --precision=bf16, fp16 or fp8 (the stream is fp32 already)");
    return failure();
  }
  if (!(lossScale > 0) || !std::isfinite(lossScale)) {
    fail("--loss-scale: expected a finite number > 0, got " + std::to_string(lossScale));
    return failure();
  }
  if (failed(applyPassManagerCLOptions(pm))) {
    fail("bad pass manager options");
    return failure();
  }
  PipelineOptions options;
  setPipelineOptions(options);
  std::optional<double> budget = parseMemoryBudget();
  if (!budget || !parseMatmulEpilogues(options))
    return failure();
  if (!parseWorldSize())
    return failure();
  if (zero != 0 && zero != 1) {
    fail("--zero: expected 0 or 1 (ZeRO stage 1 shards the optimizer state), got " +
         std::to_string(zero));
    return failure();
  }
  if (zero == 1 && worldSizeValue().value_or(0) < 2) {
    fail("--zero=1: the optimizer state is cut into one shard per rank at compile time: give "
         "--world-size=N with N >= 2 (got --world-size=" + worldSize + ")");
    return failure();
  }
  // 0 stands for "not given" inside; given, it is a mistake.
  for (cl::opt<int64_t> *opt : {&batch, &seq})
    if (opt->getNumOccurrences() && *opt < 1) {
      fail("--" + opt->ArgStr + ": expected a number >= 1, got " + std::to_string(*opt));
      return failure();
    }
  if (!(bucketMb >= 0 && bucketMb <= 0x1p40)) {
    fail("--bucket-mb: expected a number of MiB from 0 to 2^40, got " + std::to_string(bucketMb));
    return failure();
  }
  options.memoryBudget = ignoreMemoryBudget ? 0.0 : *budget;
  if (rematMaxDepth < 1) {
    fail("--remat-max-depth: expected a number of ops >= 1, got " + std::to_string(rematMaxDepth));
    return failure();
  }
  buildPipeline(pm, options, phase);
  return success();
}

/// The CUDA toolkit codegen uses: --cuda-toolkit, else $CUDA_HOME (if not
/// empty), else /usr/local/cuda.
std::string toolkitDir() {
  if (!cudaToolkit.empty())
    return cudaToolkit;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    return home;
  return codegen::EmitOptions().toolkit;
}

/// Writes -o through `write`, keeps the file only if every byte got there
/// (a failed write, -o /dev/full, would end in LLVM's fatal "IO failure"),
/// and closes it, so that a report can read it back.
int writeOutput(llvm::function_ref<void(llvm::raw_ostream &)> write) {
  // Regular files are written next to their destination and renamed over
  // it, so a failed or interrupted compile leaves the old file whole;
  // stdout, devices and pipes are written in place.
  llvm::sys::fs::file_status status;
  bool inPlace = outputFile == "-" ||
                 (!llvm::sys::fs::status(outputFile, status) &&
                  status.type() != llvm::sys::fs::file_type::regular_file &&
                  status.type() != llvm::sys::fs::file_type::file_not_found);
  std::string target = outputFile;
  llvm::SmallString<256> temp;
  if (!inPlace) {
    llvm::SmallString<256> model(llvm::sys::path::parent_path(outputFile));
    llvm::sys::path::append(model, "." + llvm::sys::path::filename(outputFile).str() +
                                       ".tmp-%%%%%%");
    int fd = -1;
    if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, temp))
      return fail("-o " + outputFile + ": cannot create a file beside it: " + ec.message());
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    target = temp.str().str();
  }
  auto removeTemp = llvm::make_scope_exit([&] {
    if (!temp.empty())
      llvm::sys::fs::remove(temp);
  });
  std::string error;
  auto output = openOutputFile(target, &error);
  if (!output)
    return fail("-o: " + error);
  write(output->os());
  output->os().flush();
  if (std::error_code ec = output->os().error()) {
    output->os().clear_error();
    return fail("-o " + outputFile + ": cannot write: " + ec.message());
  }
  output->keep();
  output.reset(); // closed before the rename
  if (!temp.empty()) {
    if (std::error_code ec = llvm::sys::fs::rename(temp, outputFile))
      return fail("-o " + outputFile + ": cannot rename " + temp.str() + " over it: " +
                  ec.message());
    temp.clear();
  }
  return 0;
}

/// --split-batch: the fewest micro-batches k (a power of two dividing
/// --batch) whose memory plan recomputes under 1% more FLOPs, else the k
/// that recomputes least; each candidate runs the passes up to the memory
/// plan with its diagnostics held back. 0 where none fits the budget (said
/// here), -1 where the input or the flags are bad (said as found).
int64_t chooseBatchSplit(MLIRContext &context) {
  constexpr double kCheapRecompute = 0.01;
  int64_t best = 0;
  double bestFraction = 0;
  std::string tried;
  for (int64_t k = 1; k <= batch && batch % k == 0; k *= 2) {
    batchSplit = k;
    llvm::SourceMgr sourceMgr;
    SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
    OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
    if (!module)
      return -1;
    PassManager pm(&context);
    if (failed(buildPassManager(pm, Phase::MemoryPlan)))
      return -1;
    // A budget a split misses is an answer; any other error is the news.
    std::string error;
    ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && error.empty())
        error = d.str();
      return success();
    });
    bool ran = succeeded(pm.run(*module));
    if (!ran && !error.empty() && !llvm::StringRef(error).contains("memory budget")) {
      fail(llvm::formatv("--split-batch: {0} micro-batch{1} of {2} rows: {3}", k,
                         k > 1 ? "es" : "", batch / k, error)
               .str());
      return -1;
    }
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    auto plan = step ? step->getAttrOfType<DictionaryAttr>("gpt.remat_plan") : DictionaryAttr();
    auto flops = [&](StringRef key) {
      auto a = plan ? plan.getAs<IntegerAttr>(key) : IntegerAttr();
      return a ? static_cast<double>(a.getInt()) : 0.0;
    };
    if (!ran || !plan) {
      tried += llvm::formatv("{0}{1}: does not fit", tried.empty() ? "" : ", ", k).str();
      continue;
    }
    double fraction = flops("step_flops") > 0 ? flops("extra_flops") / flops("step_flops") : 0;
    tried += llvm::formatv("{0}{1}: +{2:f1}%", tried.empty() ? "" : ", ", k, 100 * fraction).str();
    if (!best || fraction < bestFraction) {
      best = k;
      bestFraction = fraction;
    }
    if (fraction < kCheapRecompute)
      break;
  }
  batchSplit = 1;
  if (best)
    llvm::errs() << llvm::formatv("gptc: --split-batch: {0} micro-batch{1} of {2} rows a step "
                                  "(FLOPs recomputed per split: {3})\n",
                                  best, best > 1 ? "es" : "", batch / best, tried);
  else
    fail("--split-batch: no split of --batch=" + std::to_string(batch) +
         " fits --memory-budget (tried " + tried + ")");
  return best;
}

/// The preset `name` of the model file (null where it has none).
DictionaryAttr presetOf(ModuleOp module, StringRef name) {
  auto presets = module->getAttrOfType<DictionaryAttr>("gpt.models");
  return presets ? presets.getAs<DictionaryAttr>(name) : DictionaryAttr();
}

/// Sets resolvedModel from the parsed input; false (said) if it cannot be
/// parsed.
bool resolveModel(MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return false;
  resolvedModel = model;
  if (resolvedModel.empty() && presetOf(*module, "124M"))
    resolvedModel = "124M";
  DictionaryAttr preset = presetOf(*module, resolvedModel);
  auto key = [&](StringRef k) {
    auto attr = preset ? preset.getAs<IntegerAttr>(k) : IntegerAttr();
    return attr ? attr.getInt() : int64_t{0};
  };
  presetBatch = key("batch");
  presetSeq = key("seq") > 0 ? key("seq") : key("block_size");
  presetFitsBatch = key("fit_batch") != 0;
  return true;
}

/// What the memory plans of `module` ask for: each pool at its largest
/// over the programs, summed (gptrun allocates each pool once).
int64_t plannedBytes(ModuleOp module) {
  llvm::StringMap<int64_t> pools;
  module.walk([&](func::FuncOp fn) {
    if (auto plan = fn->getAttrOfType<DictionaryAttr>("gpt.memory_plan"))
      for (NamedAttribute entry : plan)
        if (auto bytes = llvm::dyn_cast<IntegerAttr>(entry.getValue()))
          pools[entry.getName()] = std::max(pools[entry.getName()], bytes.getInt());
  });
  int64_t total = 0;
  for (const auto &entry : pools)
    total += entry.getValue();
  return total;
}

/// The step planned at batch `b` without recomputation: its planned bytes,
/// or -1 where the passes failed (their diagnostics said why).
int64_t plannedBytesAt(MLIRContext &context, int64_t b) {
  chosenBatch = b;
  ignoreMemoryBudget = true;
  auto reset = llvm::make_scope_exit([] { ignoreMemoryBudget = false; });
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return -1;
  PassManager pm(&context);
  if (failed(buildPassManager(pm, Phase::MemoryPlan)) || failed(pm.run(*module)))
    return -1;
  return plannedBytes(*module);
}

/// gptc's batch for --gpu-memory: the largest power of two whose plan fits
/// (and --memory-budget, where given), at most 2^19 tokens a step (GPT-2's
/// batch; more only costs optimizer steps). The plan is affine in B, so
/// two plans predict it and a third confirms. Sets chosenBatch and `how`;
/// false (said) where none fits.
bool chooseBatch(MLIRContext &context, int64_t base, int64_t seqLen, std::string &how) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  constexpr int64_t kMaxTokens = int64_t(1) << 19;
  double limit = gpuMemory * kGiB;
  if (std::optional<double> budget = parseMemoryBudget(); budget && *budget > 0)
    limit = std::min(limit, *budget * kGiB);
  int64_t p1 = plannedBytesAt(context, base), p2 = plannedBytesAt(context, 2 * base);
  if (p1 < 0 || p2 < 0)
    return false;
  double perRow = double(p2 - p1) / double(base), fixed = double(p1) - double(base) * perRow;
  int64_t b = 1;
  while (2 * b * seqLen <= kMaxTokens && fixed + double(2 * b) * perRow <= limit)
    b *= 2;
  std::map<int64_t, int64_t> planned = {{base, p1}, {2 * base, p2}};
  for (;; b /= 2) {
    if (!planned.count(b) && (planned[b] = plannedBytesAt(context, b)) < 0)
      return false;
    if (double(planned[b]) <= limit)
      break;
    if (b == 1) {
      fail(llvm::formatv("--gpu-memory={0:f1}: model {1} needs {2:f1} GiB even at --batch=1 "
                         "(give --batch and --memory-budget, which recomputes activations to fit)",
                         double(gpuMemory), resolvedModel, double(planned[b]) / kGiB)
               .str());
      return false;
    }
  }
  chosenBatch = b;
  how = llvm::formatv("B={0} (the largest to fit --gpu-memory={1} GiB: plans {2:f1} GiB)", b,
                      std::string(llvm::formatv(gpuMemory == std::floor(gpuMemory) ? "{0:f0}"
                                                                                  : "{0:f1}",
                                                double(gpuMemory))),
                      double(planned[b]) / kGiB)
            .str();
  return true;
}

/// One line on stderr saying what is compiled, defaults named as such.
void printSummary(const std::string &batchHow, Phase phase) {
  auto dflt = [](const cl::Option &opt) { return opt.getNumOccurrences() ? "" : " (default)"; };
  int64_t b = batch ? batch : presetBatch;
  std::string line = "gptc: model " + resolvedModel + dflt(model) + ", " +
                     (batchHow.empty() ? "B=" + std::to_string(b) : batchHow) +
                     ", T=" + std::to_string(seq ? int64_t(seq) : presetSeq) + ", precision " +
                     precision + dflt(precision);
  if (phase == Phase::Executable)
    line += ::target == "cuda" ? ", CUDA " + cudaArch + dflt(cudaArch) : std::string(", host");
  std::optional<int64_t> world = worldSizeValue();
  const char *ranks = ::target == "host" ? "ranks" : "GPUs";
  if (phase >= Phase::Distribute && world)
    line += *world < 0    ? llvm::formatv(", any number of {0} (gptrun --gpus N)", ranks).str()
            : *world == 0 ? llvm::formatv(", one {0} (no collectives)",
                                          ::target == "host" ? "rank" : "GPU").str()
                          : llvm::formatv(", exactly {0} {1}", *world, ranks).str();
  if (phase >= Phase::Distribute && zero == 1)
    line += ", ZeRO-1 (each rank keeps 1/" + std::to_string(world.value_or(0)) +
            " of the AdamW state)";
  llvm::errs() << line << "\n";
}

int runCompile(MLIRContext &context) {
  // The input itself, or a link to it, as -o would be destroyed: checked
  // by device and inode before any work.
  bool same = false;
  if (outputFile != "-" && inputFile != "-" &&
      !llvm::sys::fs::equivalent(inputFile, outputFile, same) && same)
    return fail("-o " + outputFile + " is the input file '" + inputFile +
                "': gptc never overwrites its input (give another -o)");
  // Default: the executable when -o names a .fb file, else the last IR phase.
  Phase target = llvm::StringRef(outputFile).ends_with(".fb") ? Phase::Executable
                                                               : Phase::MemoryPlan;
  if (!compileTo.empty()) {
    std::optional<Phase> parsed = parsePhase(compileTo);
    if (!parsed) {
      std::vector<std::string> names;
      for (const PhaseInfo &info : enumeratePhases())
        names.push_back(info.name.str());
      return fail("--compile-to: unknown phase '" + compileTo + "' (phases: " +
                  llvm::join(names, ", ") + ")");
    }
    target = *parsed;
    // gptrun and `gptc explain` would find MLIR text where step.fb belongs.
    if (target != Phase::Executable && llvm::StringRef(outputFile).ends_with(".fb"))
      return fail("--compile-to=" + compileTo + " writes MLIR text, but -o " + outputFile +
                  " names an executable (.fb): use --compile-to=executable or another name");
  }
  // Flags of the executable, checked before the passes run.
  if (target == Phase::Executable) {
    if (::target != "cuda" && ::target != "host")
      return fail("--target: expected cuda or host, got '" + ::target + "'");
    if (layerNormGradChunkRows < 0 || layerNormGradChunkRows > 1024)
      return fail("--layernorm-grad-chunk-rows: expected 0 (auto) to 1024 rows, got " +
                  std::to_string(layerNormGradChunkRows));
    if (::target == "cuda") {
      if (llvm::Expected<std::string> feature = codegen::cudaPtxFeature(cudaArch); !feature)
        return fail("--cuda-arch: " + llvm::toString(feature.takeError()));
      if (precision == "fp8" && codegen::cudaComputeCapability(cudaArch) < 89)
        return fail("--precision=fp8: FP8 GEMMs and conversions need sm_89 or newer, but "
                    "--cuda-arch is " + cudaArch);
      // What codegen links from the toolkit, and runs from it or $PATH.
      std::string dir = toolkitDir();
      const char *from = !cudaToolkit.empty() ? "--cuda-toolkit"
                         : dir != codegen::EmitOptions().toolkit ? "$CUDA_HOME"
                                                                 : "the default toolkit";
      auto missing = [&](const char *file) {
        return fail(llvm::Twine(from) + ": no " + file + " in '" + dir +
                    "' (--cuda-toolkit=DIR or $CUDA_HOME names the CUDA toolkit)");
      };
      if (!llvm::sys::fs::exists(dir + "/nvvm/libdevice/libdevice.10.bc"))
        return missing("nvvm/libdevice/libdevice.10.bc");
      if (!llvm::sys::fs::can_execute(dir + "/bin/ptxas") && !llvm::sys::findProgramByName("ptxas"))
        return missing("bin/ptxas (nor ptxas on $PATH)");
    }
  }
  if (!resolveModel(context))
    return 1;
  std::string batchHow;
  if (!(gpuMemory > 0) || !std::isfinite(gpuMemory))
    return fail(llvm::formatv("--gpu-memory: expected a number of GiB > 0, got {0}",
                              double(gpuMemory)).str());
  if (batch == 0 && ::target == "cuda" && target >= Phase::MemoryPlan && presetFitsBatch &&
      presetBatch > 0) {
    int64_t seqLen = seq > 0 ? seq : presetSeq;
    if (!chooseBatch(context, presetBatch, std::max<int64_t>(seqLen, 1), batchHow))
      return 1;
  }
  if (splitBatch) {
    std::optional<double> budget = parseMemoryBudget();
    if (!budget)
      return 1;
    if (*budget <= 0)
      return fail("--split-batch: needs --memory-budget=GiB (the budget the split must fit)");
    if (batch <= 0)
      return fail("--split-batch: needs --batch=B (the rows of a step to split)");
    if (target < Phase::MemoryPlan)
      return fail("--split-batch: the memory plan decides the split; --compile-to=" +
                  compileTo + " stops before it");
    int64_t k = chooseBatchSplit(context);
    if (k <= 0)
      return 1;
    batchSplit = k;
  }
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return 1;
  PassManager pm(&context);
  if (failed(buildPassManager(pm, target)))
    return 1;

  if (!dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("--dump-ir-after-each-pass: cannot create '" + dumpDir +
                  "': " + ec.message());
    std::error_code ec;
    llvm::raw_fd_ostream os(dumpDir + "/00-input.mlir", ec);
    if (ec)
      return fail("--dump-ir-after-each-pass: cannot write in '" + dumpDir +
                  "': " + ec.message());
    module->print(os);
    pm.addInstrumentation(createDumpAfterEachPassInstrumentation(dumpDir));
  }
  CompileProgress::Mode mode = CompileProgress::Mode::Off;
  if (progressMode == "auto")
    mode = llvm::sys::Process::StandardErrIsDisplayed() ? CompileProgress::Mode::Bar
                                                        : CompileProgress::Mode::Lines;
  else if (progressMode == "bar")
    mode = CompileProgress::Mode::Bar;
  else if (progressMode == "lines")
    mode = CompileProgress::Mode::Lines;
  else if (progressMode != "off")
    return fail("--progress: expected auto, bar, lines or off, got '" + progressMode + "'");
  // The phases' gates (gpt-verify-phase) change nothing: not steps.
  unsigned steps = static_cast<unsigned>(llvm::count_if(
                       pm.getPasses(),
                       [](Pass &p) { return p.getArgument() != "gpt-verify-phase"; })) +
                   (target == Phase::Executable ? codegen::kEmitStages : 0);
  if (mode != CompileProgress::Mode::Off && !resolvedModel.empty())
    printSummary(batchHow, target);
  CompileProgress progress(llvm::errs(), mode, steps);
  auto endBar = llvm::make_scope_exit([&] { progress.finish(); });
  if (mode != CompileProgress::Mode::Off)
    pm.addInstrumentation(createProgressInstrumentation(progress));
  if (failed(pm.run(*module)))
    return 1;
  // For the executable's Model.precision (after the passes: the IR dumps
  // show the module as the passes left it).
  std::string policy = precision;
  if (precision == "fp8")
    policy += fp8History > 0 ? ", delayed scaling (" + std::to_string(fp8History) + " steps)"
                             : ", current scaling";
  policy += fp8LmHead ? ", FP8 LM head" : "";
  policy += narrowResidual ? ", narrow residual" : "";
  (*module)->setAttr("gpt.precision", mlir::StringAttr::get(&context, policy));

  if (target == Phase::Executable) {
    if (outputFile == "-")
      return fail("the executable is binary: give -o FILE.fb");
    codegen::EmitOptions emit;
    emit.target = ::target == "host" ? codegen::EmitOptions::Target::Host
                                     : codegen::EmitOptions::Target::CUDA;
    emit.chip = cudaArch;
    emit.flashAttention = flashAttention;
    emit.warpgroupMma = warpgroupMma;
    emit.fuseCrossEntropy = fuseCrossEntropy;
    emit.crossEntropyOnePass = crossEntropyOnePass;
    emit.layerNormGradOneLaunch = layerNormGradOneLaunch;
    emit.layerNormGradChunkRows = layerNormGradChunkRows;
    emit.toolkit = toolkitDir();
    emit.dumpDir = dumpDir;
    if (mode != CompileProgress::Mode::Off)
      emit.onStage = [&](llvm::StringRef stage) { progress.step(stage); };
    FailureOr<std::vector<uint8_t>> bytes = codegen::emitExecutable(*module, emit);
    if (failed(bytes))
      return 1;
    if (int rc = writeOutput([&](llvm::raw_ostream &os) {
          os.write(reinterpret_cast<const char *>(bytes->data()), bytes->size());
        }))
      return rc;
    return report ? printReport(outputFile) : 0;
  }
  if (report)
    return fail("--report describes an executable: give -o FILE.fb");
  return writeOutput([&](llvm::raw_ostream &os) { module->print(os), os << "\n"; });
}

/// Reads the first B*T+1 tokens of an llm.c token file (header of 256
/// int32: magic 20240520, version 1, token count; then uint16 tokens).
int readTokens(int64_t needed, std::vector<int64_t> &tokens) {
  // Read what is needed, never the whole file: it may be endless (a device)
  // or hold billions of tokens.
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(dataFile, status))
    return fail("--data: cannot read '" + dataFile + "': " + ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail("--data: '" + dataFile + "' is not a regular file");
  if (status.getSize() < 1024)
    return fail("--data: '" + dataFile + "' is shorter than the 1024-byte header");
  auto head = llvm::MemoryBuffer::getFileSlice(dataFile, 1024, 0);
  if (!head)
    return fail("--data: cannot read '" + dataFile + "': " + head.getError().message());
  int32_t header[256];
  std::memcpy(header, (*head)->getBufferStart(), sizeof(header));
  if (header[0] != 20240520 || header[1] != 1)
    return fail("--data: '" + dataFile + "' is not an llm.c GPT-2 token file "
                "(magic 20240520, version 1)");
  int64_t count = header[2];
  if (count < 0 || status.getSize() != uint64_t(1024 + 2 * count))
    return fail("--data: '" + dataFile + "' holds " + llvm::Twine(status.getSize()) +
                " bytes, header says " + llvm::Twine(count) + " tokens");
  if (count < needed)
    return fail("--data: '" + dataFile + "' has " + llvm::Twine(count) +
                " tokens, one batch needs " + llvm::Twine(needed));
  auto body = llvm::MemoryBuffer::getFileSlice(dataFile, 2 * needed, 1024);
  if (!body)
    return fail("--data: cannot read '" + dataFile + "': " + body.getError().message());
  const auto *data = reinterpret_cast<const uint8_t *>((*body)->getBufferStart());
  for (int64_t i = 0; i < needed; ++i)
    tokens.push_back(data[2 * i] | (data[2 * i + 1] << 8));
  return 0;
}

/// Evaluates `name` in `module`, reporting a missing function.
FailureOr<std::vector<reference::Tensor>>
evaluateFunction(ModuleOp module, StringRef name, ArrayRef<reference::Tensor> args,
                 reference::Precision precision) {
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    fail("the compiled module has no @" + name);
    return failure();
  }
  return reference::evaluate(fn, args, precision);
}

int runReference(MLIRContext &context) {
  if (arithmetic != "fp64" && arithmetic != "fp32")
    return fail("--arithmetic: expected fp64 or fp32, got '" + arithmetic + "'");
  if (steps < 0)
    return fail("--steps must not be negative");
  auto prec = arithmetic == "fp64" ? reference::Precision::F64 : reference::Precision::F32;
  if (!resolveModel(context))
    return 1;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return 1;
  PassManager pm(&context);
  if (failed(buildPassManager(pm, Phase::TrainStep)))
    return 1;
  if (decompose)
    pm.addNestedPass<func::FuncOp>(gpt::createDecomposeAttentionPass());
  if (failed(pm.run(*module)))
    return 1;

  auto config = (*module)->getAttrOfType<DictionaryAttr>("gpt.config");
  auto configInt = [&](StringRef key) {
    auto attr = config ? config.getAs<IntegerAttr>(key) : IntegerAttr();
    return attr ? attr.getInt() : int64_t{0};
  };
  int64_t b = configInt("batch"), t = configInt("seq"), vocab = configInt("vocab_size");
  int64_t micro = steps > 0 ? accumSteps : 1;

  // Tokens: consecutive windows of B*T+1 from --data, or seeded random ids.
  int64_t window = b * t;
  int64_t needed = std::max<int64_t>(steps, 1) * micro * window + 1;
  std::vector<int64_t> tokens;
  if (!dataFile.empty()) {
    if (int rc = readTokens(std::min<int64_t>(needed, window + 1), tokens))
      return rc;
    std::vector<int64_t> all;
    if (needed > window + 1 && readTokens(needed, all) == 0)
      tokens = all;
  } else {
    // A learnable synthetic stream: each token decides the next
    // (t' = 7 t + 3 mod V), from a seeded random start in every window.
    std::mt19937_64 rng(seed + 1);
    for (int64_t i = 0; i < needed; ++i)
      tokens.push_back(i % window == 0
                           ? static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab))
                           : (7 * tokens.back() + 3) % vocab);
  }
  // Batch k reads window k (wrapping around a short file).
  auto batchOf = [&](int64_t k, int64_t shift, std::vector<int64_t> shape) {
    reference::Tensor tensor(std::move(shape));
    int64_t windows = (static_cast<int64_t>(tokens.size()) - 1) / window;
    for (int64_t m = 0; m < tensor.numElements() / window; ++m)
      for (int64_t j = 0; j < window; ++j)
        tensor.data[m * window + j] =
            static_cast<double>(tokens[((k + m) % windows) * window + j + shift]);
    return tensor;
  };

  reference::Tensor seedTensor({}, static_cast<double>(seed % (1u << 24)));
  auto params = evaluateFunction(*module, "init", {seedTensor}, prec);
  if (failed(params))
    return 1;
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  llvm::outs() << llvm::formatv("model {0}: B={1} T={2}, {3} parameters\n",
                                config.getAs<StringAttr>("name").getValue(), b, t,
                                forward->getAttrOfType<IntegerAttr>("gpt.num_parameters").getInt());

  if (steps == 0) {
    std::vector<reference::Tensor> args = {batchOf(0, 0, {b, t}), batchOf(0, 1, {b, t})};
    args.insert(args.end(), params->begin(), params->end());
    auto results = evaluateFunction(*module, "forward", args, prec);
    if (failed(results))
      return 1;
    llvm::outs() << llvm::formatv("loss ({0}): {1:f10}\n", arithmetic, (*results)[0].data[0]);
    return 0;
  }

  // Train: state = params, m = v = 0; train_step returns the new state.
  std::vector<reference::Tensor> state = *params;
  for (int copy = 0; copy < 2; ++copy)
    for (const reference::Tensor &p : *params)
      state.emplace_back(p.shape, 0.0);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<reference::Tensor> args = state;
    args.push_back(batchOf(s * micro, 0, {micro, b, t}));
    args.push_back(batchOf(s * micro, 1, {micro, b, t}));
    args.emplace_back(std::vector<int64_t>{}, static_cast<double>(s));
    args.emplace_back(std::vector<int64_t>{}, 1.0); // lr_scale: as compiled
    auto results = evaluateFunction(*module, "train_step", args, prec);
    if (failed(results))
      return 1;
    size_t n = results->size();
    double loss = (*results)[n - 3].data[0], norm = (*results)[n - 2].data[0];
    llvm::outs() << llvm::formatv("step {0,4}/{1}: loss {2:f6}  grad_norm {3:f6}\n", s + 1,
                                  steps, loss, norm);
    // As gptrun: a diverged run is a failure, not a result.
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      llvm::outs().flush();
      return fail("step " + llvm::Twine(s + 1) + ": the loss or the grad norm is not finite");
    }
    results->resize(n - 3); // drop loss, grad_norm, lr
    state = std::move(*results);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::StringRef command = argc > 1 ? argv[1] : "";
  bool isCommand = command == "compile" || command == "run-reference" || command == "explain";

  gptc::registerPasses(); // so --mlir-print-ir-after=<pass> knows our passes
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "gptc " << gptc::versionString() << " (MLIR/LLVM " << LLVM_VERSION_STRING << ")\n"
       << "executable format " << static_cast<uint32_t>(gptc::schema::FormatVersion::Current)
       << " (step.fb, runtime/schemas/executable.fbs)\n";
  });

  // A mistyped command would reach llvm::cl as a second positional
  // ("Too many positional arguments"): name it first.
  if (!isCommand && !command.empty() && !command.starts_with("-"))
    return fail("unknown command '" + command.str() +
                "': expected compile, run-reference or explain");
  // The command word is not an option: drop it before llvm::cl parses.
  std::vector<char *> args(argv, argv + argc);
  std::string program = std::string(argv[0]) + " " + command.str();
  if (isCommand) {
    args.erase(args.begin() + 1);
    args[0] = program.data();
  }
  // libLLVM registers hundreds of backend flags; --help shows ours only.
  cl::HideUnrelatedOptions({&compileCat, &trainCat, &distributeCat, &referenceCat});
  cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(), kOverview);

  if (listPhases) {
    for (const gptc::PhaseInfo &info : gptc::enumeratePhases())
      llvm::outs() << llvm::formatv("  {0,-10} {1}\n", info.name, info.description);
    return 0;
  }
  if (!isCommand)
    return fail(command.empty()
                    ? "missing command: compile, run-reference or explain (see --help)"
                    : "unknown command '" + command +
                          "': expected compile, run-reference or explain");
  if (command == "explain") {
    if (inputFile.empty())
      return fail("explain: missing executable (gptc explain step.fb)");
    // Every flag of ours configures compile or run-reference.
    for (auto &entry : cl::getRegisteredOptions()) {
      cl::Option *opt = entry.second;
      bool ours = llvm::any_of(opt->Categories, [](cl::OptionCategory *c) {
        return c == &compileCat || c == &trainCat || c == &distributeCat || c == &referenceCat;
      });
      if (ours && opt != &inputFile && opt->getNumOccurrences())
        return fail("explain reads only the executable; " +
                    llvm::Twine(opt->ArgStr.size() == 1 ? "-" : "--") + opt->ArgStr +
                    " applies to compile or run-reference");
    }
    return printReport(inputFile);
  }
  if (inputFile.empty())
    return fail("missing input file (e.g. models/gpt2.mlir)");
  if (command == "compile" &&
      (arithmetic.getNumOccurrences() || seed.getNumOccurrences() ||
       decompose.getNumOccurrences() || dataFile.getNumOccurrences() ||
       steps.getNumOccurrences()))
    return fail("--arithmetic, --seed, --decompose-attention, --data and --steps apply "
                "to run-reference, not compile");
  if (command == "run-reference" &&
      (compileTo.getNumOccurrences() || dumpDir.getNumOccurrences() ||
       outputFile.getNumOccurrences() || report.getNumOccurrences()))
    return fail("--compile-to, --dump-ir-after-each-pass, -o and --report apply to compile");
  // The interpreter runs the IR, not an executable: codegen's flags would
  // be silently ignored.
  if (command == "run-reference")
    for (cl::Option *opt : std::initializer_list<cl::Option *>{
             &target, &cudaArch, &cudaToolkit, &flashAttention, &warpgroupMma, &fuseCrossEntropy,
             &crossEntropyOnePass, &layerNormGradOneLaunch, &layerNormGradChunkRows})
      if (opt->getNumOccurrences())
        return fail("--" + opt->ArgStr + " configures the executable's kernels; run-reference "
                    "interprets the IR (give it to compile)");

  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext context(registry);
  // Diagnostics name the op and its file:line:col; a dump of the whole
  // module on every error helps nobody reading a model file.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  return command == "compile" ? runCompile(context) : runReference(context);
}
