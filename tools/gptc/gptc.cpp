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

/// Every option of the compile, bound to gptc's flags in main().
CompileOptions opts;
std::unique_ptr<CommandLineOptions> flags;

cl::OptionCategory &compileCat = getOptionCategory(OptionGroup::Compile);

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
cl::opt<std::string> compileTo("compile-to",
                               cl::desc("Stop after this phase (see --list-phases)"),
                               cl::value_desc("phase"), cl::cat(compileCat));
cl::opt<std::string> compileFrom(
    "compile-from",
    cl::desc("Go on from MLIR that --compile-to=PHASE wrote, through --compile-to (default: "
             "the executable or memory-plan, as -o says), with the options recorded in it "
             "(gpt.compile_options); only codegen's flags may differ"),
    cl::value_desc("phase"), cl::cat(compileCat));
cl::opt<std::string> dumpDir("dump-ir-after-each-pass",
                             cl::desc("Write DIR/NN-<pass>.mlir after every pass (NN: its place "
                                      "in the whole pipeline, the same whatever the flags; "
                                      "docs/architecture.md), and codegen's kernels and "
                                      "commands"),
                             cl::value_desc("dir"), cl::cat(compileCat));
cl::opt<std::string> progressMode(
    "progress",
    cl::desc("Compile progress on stderr: auto (a bar on a terminal, a line per pass and "
             "codegen stage otherwise), bar, lines or off"),
    cl::init("auto"), cl::cat(compileCat));
cl::opt<bool> listPhases("list-phases", cl::desc("Print the phases and exit"),
                         cl::cat(compileCat));

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

--help-hidden also lists the switches of each kernel, fusion and FP8
rewrite. MLIR's pass-manager flags work too, e.g.
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

/// The phase the input is at: Input, or --compile-from's.
Phase fromPhase = Phase::Input;

/// The options the passes get: the flags, with the preset and the batch
/// gptc resolved, and --split-batch's micro-batches.
CompileOptions pipelineOptions() {
  CompileOptions o = opts;
  o.model = resolvedModel;
  o.batch = (opts.batch ? opts.batch : chosenBatch) / batchSplit;
  o.accumSteps = opts.accumSteps * batchSplit;
  if (ignoreMemoryBudget)
    o.memoryBudget = 0;
  return o;
}

/// MLIR's pass-manager flags plus every phase up to `phase`.
LogicalResult buildPassManager(PassManager &pm, Phase phase) {
  if (failed(applyPassManagerCLOptions(pm))) {
    fail("bad pass manager options");
    return failure();
  }
  buildPipeline(pm, pipelineOptions(), fromPhase, phase);
  return success();
}

/// Flags of the kernels only, which act after every phase.
constexpr const char *kCodegenFlags[] = {
    "target", "cuda-arch", "cuda-toolkit", "flash-attention", "warpgroup-mma",
    "fuse-cross-entropy", "cross-entropy-one-pass", "layernorm-grad-one-launch",
    "layernorm-grad-chunk-rows"};

/// An option value as the phase pipelines' options parse it.
std::string optionText(llvm::StringRef name, llvm::StringRef value) {
  return (name + "=" + (value.contains(' ') ? "{" + value + "}" : value)).str();
}

/// --compile-from: checks that the input is IR that --compile-to=PHASE
/// wrote and takes the options recorded in it, with codegen's flags as
/// given; any other flag must agree with the record. False where not (said).
bool takeRecordedOptions(MLIRContext &context, Phase from) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return false;
  auto phase = (*module)->getAttrOfType<StringAttr>("gpt.phase");
  auto recorded = (*module)->getAttrOfType<DictionaryAttr>("gpt.compile_options");
  if (!phase || !recorded) {
    fail("--compile-from: '" + inputFile + "' records no phase and options (gpt.phase, "
         "gpt.compile_options): give it what gptc compile --compile-to=" + compileFrom +
         " wrote");
    return false;
  }
  if (phase.getValue() != compileFrom) {
    fail("--compile-from=" + compileFrom + ": '" + inputFile + "' is IR after phase " +
         phase.getValue() + " (its gpt.phase)");
    return false;
  }
  llvm::StringMap<std::string> given;
  for (auto &[name, value] : opts.flagValues())
    if (flags->given(name))
      given[name] = value;
  std::string text;
  for (NamedAttribute entry : recorded) {
    auto value = llvm::dyn_cast<StringAttr>(entry.getValue());
    if (!value)
      continue;
    std::string name = entry.getName().str(), chosen = value.getValue().str();
    if (auto it = given.find(name); it != given.end() && it->second != chosen) {
      if (!llvm::is_contained(kCodegenFlags, llvm::StringRef(name))) {
        fail("--" + name + "=" + it->second + ": '" + inputFile + "' was compiled to " +
             compileFrom + " with " + name + "=" + chosen + ", and --compile-from goes on "
             "with the options recorded in it (only codegen's flags may differ)");
        return false;
      }
      chosen = it->second;
    }
    text += (text.empty() ? "" : " ") + optionText(name, chosen);
  }
  PipelineOptions parsed;
  std::string error;
  llvm::raw_string_ostream errors(error);
  if (failed(parsed.parseFromString(text, errors))) {
    fail("--compile-from: '" + inputFile + "' records options gptc cannot read: " + error);
    return false;
  }
  llvm::Expected<CompileOptions> resolved = parsed.resolved();
  if (!resolved) {
    fail(llvm::toString(resolved.takeError()));
    return false;
  }
  opts = std::move(*resolved);
  resolvedModel = opts.model;
  // For the summary line: the shapes the IR has.
  if (auto config = (*module)->getAttrOfType<DictionaryAttr>("gpt.config")) {
    auto key = [&](StringRef k) {
      auto attr = config.getAs<IntegerAttr>(k);
      return attr ? attr.getInt() : int64_t{0};
    };
    presetBatch = key("batch");
    presetSeq = key("seq");
  }
  return true;
}

/// Records in the IR written at --compile-to what --compile-from needs:
/// the phase and every option the passes ran with.
void recordOptions(ModuleOp module, Phase phase) {
  MLIRContext *context = module.getContext();
  llvm::SmallVector<NamedAttribute> entries;
  CompileOptions options = pipelineOptions();
  options.splitBatch = false; // --batch and --accum-steps hold the split
  for (auto &[name, value] : options.flagValues())
    entries.emplace_back(StringAttr::get(context, name), StringAttr::get(context, value));
  module->setAttr("gpt.phase", StringAttr::get(context, getPhaseName(phase)));
  module->setAttr("gpt.compile_options", DictionaryAttr::get(context, entries));
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
  for (int64_t k = 1; k <= opts.batch && opts.batch % k == 0; k *= 2) {
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
                         k > 1 ? "es" : "", opts.batch / k, error)
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
                                  best, best > 1 ? "es" : "", opts.batch / best, tried);
  else
    fail("--split-batch: no split of --batch=" + std::to_string(opts.batch) +
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
  resolvedModel = opts.model;
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
  double limit = opts.gpuMemory * kGiB;
  if (opts.memoryBudget > 0)
    limit = std::min(limit, opts.memoryBudget * kGiB);
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
                         double(opts.gpuMemory), resolvedModel, double(planned[b]) / kGiB)
               .str());
      return false;
    }
  }
  chosenBatch = b;
  how = llvm::formatv("B={0} (the largest to fit --gpu-memory={1} GiB: plans {2:f1} GiB)", b,
                      std::string(llvm::formatv(opts.gpuMemory == std::floor(opts.gpuMemory) ? "{0:f0}"
                                                                                  : "{0:f1}",
                                                double(opts.gpuMemory))),
                      double(planned[b]) / kGiB)
            .str();
  return true;
}

/// One line on stderr saying what is compiled, defaults named as such.
void printSummary(const std::string &batchHow, Phase phase) {
  // Under --compile-from the values come from the input's record.
  auto dflt = [](llvm::StringRef flag) {
    return flags->given(flag) || fromPhase != Phase::Input ? "" : " (default)";
  };
  bool host = opts.target == CompileTarget::Host;
  int64_t b = opts.batch ? opts.batch : presetBatch;
  std::string line = "gptc: model " + resolvedModel + dflt("model") + ", " +
                     (batchHow.empty() ? "B=" + std::to_string(b) : batchHow) +
                     ", T=" + std::to_string(opts.seq ? opts.seq : presetSeq) + ", precision " +
                     getPrecisionName(opts.precision).str() + dflt("precision");
  if (phase == Phase::Executable)
    line += host ? std::string(", host") : ", CUDA " + opts.cudaArch + dflt("cuda-arch");
  int64_t world = opts.worldSize;
  const char *ranks = host ? "ranks" : "GPUs";
  if (phase >= Phase::Distribute)
    line += world < 0    ? llvm::formatv(", any number of {0} (gptrun --gpus N)", ranks).str()
            : world == 0 ? llvm::formatv(", one {0} (no collectives)", host ? "rank" : "GPU").str()
                         : llvm::formatv(", exactly {0} {1}", world, ranks).str();
  if (phase >= Phase::Distribute && opts.zero == 1)
    line += ", ZeRO-1 (each rank keeps 1/" + std::to_string(world) + " of the AdamW state)";
  if (fromPhase != Phase::Input)
    line += ", from phase " + getPhaseName(fromPhase).str() + " (--compile-from)";
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
  if (!compileFrom.empty()) {
    std::optional<Phase> from = parsePhase(compileFrom);
    if (!from || *from == Phase::Input || *from == Phase::Executable)
      return fail("--compile-from: expected a phase from import to memory-plan whose IR "
                  "--compile-to wrote, got '" + compileFrom + "'");
    if (*from >= target)
      return fail("--compile-from=" + compileFrom + ": nothing to do up to phase " +
                  getPhaseName(target).str() + " (--compile-to, or as -o says)");
    fromPhase = *from;
    if (!takeRecordedOptions(context, fromPhase))
      return 1;
  }
  // The toolkit codegen links from, and runs ptxas from (or $PATH),
  // checked before the passes run.
  if (target == Phase::Executable && opts.target == CompileTarget::Cuda) {
    std::string dir = opts.emitOptions().toolkit;
    const char *from = !opts.cudaToolkit.empty()                   ? "--cuda-toolkit"
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
  if (fromPhase == Phase::Input && !resolveModel(context))
    return 1;
  std::string batchHow;
  if (fromPhase == Phase::Input && opts.batch == 0 && opts.target == CompileTarget::Cuda &&
      target >= Phase::MemoryPlan &&
      presetFitsBatch && presetBatch > 0) {
    int64_t seqLen = opts.seq > 0 ? opts.seq : presetSeq;
    if (!chooseBatch(context, presetBatch, std::max<int64_t>(seqLen, 1), batchHow))
      return 1;
  }
  if (opts.splitBatch) {
    if (opts.memoryBudget <= 0)
      return fail("--split-batch: needs --memory-budget=GiB (the budget the split must fit)");
    if (opts.batch <= 0)
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
  std::string policy = getPrecisionName(opts.precision).str();
  if (opts.precision == PrecisionPolicy::Fp8)
    policy += opts.fp8History > 0
                  ? ", delayed scaling (" + std::to_string(opts.fp8History) + " steps)"
                  : ", current scaling";
  policy += opts.fp8LmHead ? ", FP8 LM head" : "";
  policy += opts.fp8Exclude.empty() ? "" : ", bf16 layers " + opts.fp8Exclude;
  policy += opts.fp32Ops.empty() ? "" : ", fp32 " + opts.fp32Ops;
  policy += opts.narrowResidual ? ", narrow residual" : "";
  (*module)->setAttr("gpt.precision", mlir::StringAttr::get(&context, policy));

  if (target == Phase::Executable) {
    if (outputFile == "-")
      return fail("the executable is binary: give -o FILE.fb");
    codegen::EmitOptions emit = opts.emitOptions();
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
  recordOptions(*module, target);
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
  int64_t micro = steps > 0 ? opts.accumSteps : 1;

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
  flags = bindCommandLine(opts);
  cl::OptionCategory *ours[] = {&compileCat, &getOptionCategory(OptionGroup::TrainStep),
                                &getOptionCategory(OptionGroup::Distribute),
                                &getOptionCategory(OptionGroup::Switches), &referenceCat};
  // libLLVM registers hundreds of backend flags; --help shows ours only.
  cl::HideUnrelatedOptions(ours);
  cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(), kOverview);

  auto isOurs = [&](const cl::Option *opt) {
    return llvm::any_of(opt->Categories,
                        [&](cl::OptionCategory *c) { return llvm::is_contained(ours, c); });
  };
  auto spelled = [](const cl::Option *opt) {
    return (llvm::Twine(opt->ArgStr.size() == 1 ? "-" : "--") + opt->ArgStr).str();
  };
  // A flag given twice keeps only its last value: one of the two is a
  // mistake (a list flag takes one comma-separated list).
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *opt = entry.second;
    if (opt->getNumOccurrences() > 1 && isOurs(opt))
      return fail(spelled(opt) + " is given " + llvm::Twine(opt->getNumOccurrences()) +
                  " times: give it once (a list takes its values comma-separated)");
  }

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
      if (isOurs(opt) && opt != &inputFile && opt->getNumOccurrences())
        return fail("explain reads only the executable; " + spelled(opt) +
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
      (compileTo.getNumOccurrences() || compileFrom.getNumOccurrences() ||
       dumpDir.getNumOccurrences() ||
       outputFile.getNumOccurrences() || report.getNumOccurrences()))
    return fail("--compile-to, --compile-from, --dump-ir-after-each-pass, -o and --report "
                "apply to compile");
  // The interpreter runs the IR, not an executable: codegen's flags would
  // be silently ignored.
  if (command == "run-reference")
    for (const char *flag : kCodegenFlags)
      if (flags->given(flag))
        return fail(llvm::Twine("--") + flag + " configures the executable's kernels; "
                    "run-reference interprets the IR (give it to compile)");
  // 0 stands for "not given" inside; given, it is a mistake.
  for (const char *flag : {"batch", "seq"})
    if (flags->given(flag) && (flag[0] == 'b' ? opts.batch : opts.seq) < 1)
      return fail(llvm::Twine("--") + flag + ": expected a number >= 1, got " +
                  llvm::Twine(flag[0] == 'b' ? opts.batch : opts.seq));
  if (llvm::Error e = opts.resolve())
    return fail(llvm::toString(std::move(e)));

  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext context(registry);
  // Diagnostics name the op and its file:line:col; a dump of the whole
  // module on every error helps nobody reading a model file.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  return command == "compile" ? runCompile(context) : runReference(context);
}
