//===- Pipelines.cpp - gptc compilation phases and pass pipelines --------===//

#include "compiler/Pipelines/Pipelines.h"

#include "dialects/GPT/IR/GPTDialect.h"
#include "dialects/GPT/Transforms/Passes.h"
#include "compiler/Codegen/EmitExecutable.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <mutex>

using namespace mlir;

namespace gptc {

//===----------------------------------------------------------------------===//
// Phases
//===----------------------------------------------------------------------===//

static const PhaseInfo kPhases[] = {
    {Phase::Input, "input", "the parsed and verified model file"},
    {Phase::Import, "import",
     "one configuration instantiated: static shapes, unrolled layers, named "
     "parameters"},
    {Phase::Precision, "precision",
     "@forward in the --precision policy: bf16 GEMM operands, fp32 master weights, "
     "statistics and loss (fp32: unchanged)"},
    {Phase::Autodiff, "autodiff",
     "+ @forward_grad: the loss and the gradient of every parameter"},
    {Phase::TrainStep, "train-step",
     "+ @train_step (accumulation, clipping, LR schedule, AdamW), @init and @logits"},
    {Phase::Lower, "lower",
     "calls inlined: one graph per program; with --precision=fp8 the FP8 casts, scales "
     "and amax histories"},
    {Phase::Distribute, "distribute",
     "data parallelism: bucketed gradient all-reduces, or ZeRO-1's reduce-scatter, "
     "sharded update and all-gather (nothing with --world-size=1)"},
    {Phase::Schedule, "schedule",
     "what each step computes: FP8's first and steady steps, folded input casts, "
     "recomputation for --memory-budget"},
    {Phase::Fuse, "fuse",
     "kernels chosen: GEMM epilogues, one AdamW launch, elementwise fusions, FP8 "
     "store fusions"},
    {Phase::MemoryPlan, "memory-plan", "every tensor of each program at a static offset in a pool"},
    {Phase::Executable, "executable",
     "kernels compiled (CUDA: PTX + cubin), GEMM descriptors, the step.fb file (-o)"},
};

llvm::ArrayRef<PhaseInfo> enumeratePhases() { return kPhases; }

std::optional<Phase> parsePhase(llvm::StringRef name) {
  for (const PhaseInfo &info : kPhases)
    if (info.name == name)
      return info.phase;
  return std::nullopt;
}

llvm::StringRef getPhaseName(Phase phase) {
  return kPhases[static_cast<int>(phase)].name;
}

Phase getLastPhase() { return std::end(kPhases)[-1].phase; }

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

void buildImportPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  gpt::InstantiateModelPassOptions instantiate;
  instantiate.model = options.model;
  instantiate.batch = options.batch;
  instantiate.seq = options.seq;
  pm.addPass(gpt::createInstantiateModelPass(instantiate));
  // Unrolling clones nothing shared, but a hand-written model may repeat
  // work; CSE keeps the later phases from seeing duplicates.
  pm.addPass(createCSEPass());
}

void buildPrecisionPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // fp32 is the model as written: no pass.
  if (options.precision == PrecisionPolicy::Fp32 && !options.narrowResidual)
    return;
  // NOTE: before gpt-autodiff, so the backward inherits the casts through
  // their gradient rule (bf16 GEMM gradients, fp32 parameter gradients).
  MixedPrecisionPassOptions mp;
  mp.policy = getPrecisionName(options.precision).str();
  mp.narrowResidual = options.narrowResidual;
  mp.fp8LmHead = options.fp8LmHead;
  for (std::string &prefix : splitList(options.fp8Exclude))
    mp.fp8Exclude.push_back(std::move(prefix));
  for (std::string &kind : splitList(options.fp32Ops))
    mp.fp32Ops.push_back(std::move(kind));
  pm.addPass(createMixedPrecisionPass(mp));
}

void buildAutodiffPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  AutodiffPassOptions ad;
  ad.lossScale = options.lossScale;
  pm.addPass(createAutodiffPass(ad));
  // Gradient rules rebuild shared subexpressions (e.g. the flattened
  // activations read by both dW and db); CSE merges them.
  pm.addPass(createCSEPass());
}

void buildTrainStepPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  InsertOptimizerPassOptions opt;
  opt.accumSteps = options.accumSteps;
  opt.lr = options.lr;
  opt.minLr = options.minLr;
  opt.warmupSteps = options.warmupSteps;
  opt.totalSteps = options.totalSteps;
  opt.schedule = options.schedule;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.epsilon = options.epsilon;
  opt.weightDecay = options.weightDecay;
  opt.gradClip = options.gradClip;
  opt.lossScale = options.lossScale;
  pm.addPass(createInsertOptimizerPass(opt));
  pm.addPass(createInsertInitPass());
  // Sampling reads the logits; cloned from @forward, so it keeps the policy.
  pm.addPass(createInsertLogitsPass());
}

namespace {

/// gpt-fuse-fp8 with the patterns of one place that the options leave on
/// (none: no pass). The place's list stays the pass's enable-patterns, so
/// its dumps keep their number whatever is disabled.
void addFuseFp8(OpPassManager &pm, const CompileOptions &options,
                std::initializer_list<llvm::StringRef> place) {
  FuseFp8PassOptions fp8;
  bool any = false;
  for (llvm::StringRef label : place) {
    fp8.enablePatterns.push_back(label.str());
    if (options.patternOn(label))
      any = true;
    else
      fp8.disablePatterns.push_back(label.str());
  }
  if (any)
    pm.addPass(createFuseFp8Pass(fp8));
}

void addGate(OpPassManager &pm, llvm::StringRef phase) {
  VerifyPhasePassOptions gate;
  gate.phase = phase.str();
  pm.addPass(createVerifyPhasePass(gate));
}

} // namespace

void buildLowerPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // One graph per program: the planner sees every tensor's whole lifetime.
  pm.addPass(createInlinerPass());
  pm.addPass(createCSEPass());
  // Every program holds its own products now (@logits is cloned late).
  // CSE then gives both layouts of an operand one scale.
  if (options.precision == PrecisionPolicy::Fp8) {
    pm.addPass(createLowerFp8Pass());
    pm.addPass(createCSEPass());
    // Before delayed scaling: the logits' gradient needs no history.
    addFuseFp8(pm, options, {"fp8-cross-entropy-grad"});
    // After CSE: one history per scale that CSE left.
    if (options.fp8History > 0) {
      Fp8DelayedScalingPassOptions delayed;
      delayed.history = options.fp8History;
      pm.addPass(createFp8DelayedScalingPass(delayed));
    }
    // After delayed scaling: the fused casts keep the casts' histories.
    addFuseFp8(pm, options, {"fp8-cast-gelu-grad", "fp8-cast-column-sum"});
    // Before remat: its plan counts the sums in place.
    if (options.fuseGradAccumulation && options.accumSteps > 1)
      pm.addPass(createFuseGradAccumulationPass());
  }
  addGate(pm, "lower");
}

void buildDistributePassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // Data parallelism needs the inlined graph: a gradient's bucket is issued
  // after the op that finalises it.
  if (options.worldSize != 0) {
    InsertAllReducePassOptions distribute;
    distribute.worldSize = std::max<int64_t>(options.worldSize, 0); // 0: any
    distribute.bucketMb = options.bucketMb;
    pm.addPass(createInsertAllReducePass(distribute));
    // Before gpt-fuse-adamw, which fuses the sharded updates.
    if (options.zero >= 1)
      pm.addPass(createShardOptimizerPass());
  }
  addGate(pm, "distribute");
}

void buildSchedulePassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // After the collectives (both steps have them); before remat, which
  // plans each step for the budget.
  if (options.fp8SteadySteps())
    pm.addPass(createFp8SteadyStepPass());
  // Before remat, which then plans without the bf16 weight copies.
  if (options.precision == PrecisionPolicy::Fp8)
    addFuseFp8(pm, options, {"fp8-fold-input-cast"});
  // After CSE (which would merge the clones back) and the collectives.
  // Each train step is fitted alone.
  if (options.memoryBudget > 0) {
    RematerializePassOptions remat;
    remat.memoryBudget = options.memoryBudget;
    remat.maxDepth = options.rematMaxDepth;
    pm.addNestedPass<func::FuncOp>(createRematerializePass(remat));
  }
  addGate(pm, "schedule");
}

void buildFusePassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // Before gpt-fuse-elementwise, which would take the GELUs into fusions.
  if (options.fuseMatmulEpilogue) {
    FuseMatmulEpiloguePassOptions epilogue;
    epilogue.gelu = options.epilogueGelu;
    epilogue.geluGrad = options.epilogueGeluGrad;
    epilogue.geluBiasGrad = options.epilogueGeluBiasGrad;
    epilogue.biasGrad = options.epilogueBiasGrad;
    pm.addPass(createFuseMatmulEpiloguePass(epilogue));
  }
  // After the all-reduces, which find the gradients through gpt.adamw;
  // before gpt-fuse-elementwise, which would take the gradient casts that
  // narrow-grads removes into a fusion.
  if (options.fuseAdamW) {
    FuseAdamWPassOptions adamw;
    adamw.narrowGrads = options.narrowGrads;
    pm.addNestedPass<func::FuncOp>(createFuseAdamWPass(adamw));
  }
  // After the collectives: merged siblings never delay a bucket's operand.
  if (options.fuseElementwise)
    pm.addPass(createFuseElementwisePass());
  // After gpt-fuse-elementwise, which makes the residual layernorms; the
  // steady step's scales exist before its layernorms and the MLP's product
  // run.
  if (options.fp8SteadySteps())
    addFuseFp8(pm, options, {"fp8-layernorm-codes", "fp8-gelu-matmul-codes"});
  addGate(pm, "fuse");
}

void buildMemoryPlanPassPipeline(OpPassManager &pm, const CompileOptions &options) {
  // NOTE: must stay last before serialization; any pass that moves or
  // rewrites ops afterwards (CSE included) invalidates the offsets. Each
  // program is planned alone: they run one after another.
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass());
  addGate(pm, "memory-plan");
}

void buildPipeline(OpPassManager &pm, const CompileOptions &options,
                   Phase compileTo) {
  buildPipeline(pm, options, Phase::Input, compileTo);
}

void buildPipeline(OpPassManager &pm, const CompileOptions &options, Phase from,
                   Phase compileTo) {
  // IR that a phase with a gate wrote is checked as the gate left it.
  if (from >= Phase::Lower && from <= Phase::MemoryPlan)
    addGate(pm, getPhaseName(from));
  auto runs = [&](Phase phase) { return from < phase && phase <= compileTo; };
  if (runs(Phase::Import))
    buildImportPassPipeline(pm, options);
  if (runs(Phase::Precision))
    buildPrecisionPassPipeline(pm, options);
  if (runs(Phase::Autodiff))
    buildAutodiffPassPipeline(pm, options);
  if (runs(Phase::TrainStep))
    buildTrainStepPassPipeline(pm, options);
  if (runs(Phase::Lower))
    buildLowerPassPipeline(pm, options);
  if (runs(Phase::Distribute))
    buildDistributePassPipeline(pm, options);
  if (runs(Phase::Schedule))
    buildSchedulePassPipeline(pm, options);
  if (runs(Phase::Fuse))
    buildFusePassPipeline(pm, options);
  if (runs(Phase::MemoryPlan))
    buildMemoryPlanPassPipeline(pm, options);
  // Executable adds no passes: the driver serializes the planned module.
}

void registerDialects(DialectRegistry &registry) {
  registry.insert<gpt::GPTDialect, func::FuncDialect>();
  codegen::registerCodegenDialects(registry);
  func::registerInlinerExtension(registry);
}

//===----------------------------------------------------------------------===//
// gpt-opt's pipeline options
//===----------------------------------------------------------------------===//

/// Makes a pipeline option per CompileOptions field, initialised to its
/// default, and a reader that copies what was parsed back into the field.
struct PipelineOptions::Binder {
  PipelineOptions &self;

  template <typename T>
  Option<T> &opt(T &field, llvm::StringRef flag, OptionGroup, const char *help) {
    auto o = std::make_unique<Option<T>>(self, splitFlag(flag).first, llvm::cl::desc(help),
                                         llvm::cl::init(field));
    Option<T> *raw = o.get();
    self.readers.push_back([raw, &field] { field = raw->getValue(); });
    self.owned.push_back(std::move(o));
    return *raw;
  }
  template <typename E>
  void opt(E &field, llvm::StringRef flag, OptionGroup group, const char *help,
           std::initializer_list<EnumName<E>> names) {
    Option<E> &o = opt(field, flag, group, help);
    for (const EnumName<E> &n : names)
      o.getParser().addLiteralOption(n.name, n.value, "");
  }
};

PipelineOptions::PipelineOptions() {
  Binder binder{*this};
  values.bind(binder);
}

PipelineOptions::~PipelineOptions() = default;

llvm::Expected<CompileOptions> PipelineOptions::resolved() const {
  for (const std::function<void()> &read : readers)
    read();
  CompileOptions result = values;
  if (llvm::Error e = result.resolve())
    return std::move(e);
  return result;
}

namespace {

/// A phase's pipeline for gpt-opt, its options resolved as gptc's are.
void registerPhasePipeline(llvm::StringRef arg, llvm::StringRef description,
                           void (*build)(OpPassManager &, const CompileOptions &)) {
  registerPassPipeline(
      arg, description,
      [build](OpPassManager &pm, llvm::StringRef text,
              llvm::function_ref<LogicalResult(const llvm::Twine &)> errorHandler) {
        PipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        llvm::Expected<CompileOptions> resolved = options.resolved();
        if (!resolved)
          return errorHandler(llvm::toString(resolved.takeError()));
        build(pm, *resolved);
        return success();
      },
      [](llvm::function_ref<void(const detail::PassOptions &)> print) {
        print(PipelineOptions());
      });
}

} // namespace

void registerPasses() {
  gpt::registerGPTPasses();
  registerGPTCPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  registerPhasePipeline("gpt-import-pipeline",
                        "Import phase: instantiate a model preset with static shapes",
                        buildImportPassPipeline);
  registerPhasePipeline("gpt-precision-pipeline",
                        "Precision phase: @forward in the precision policy",
                        buildPrecisionPassPipeline);
  registerPhasePipeline("gpt-autodiff-pipeline", "Autodiff phase: add @forward_grad",
                        buildAutodiffPassPipeline);
  registerPhasePipeline("gpt-train-step-pipeline",
                        "Train-step phase: add @train_step, @init and @logits",
                        buildTrainStepPassPipeline);
  registerPhasePipeline("gpt-lower-pipeline",
                        "Lower phase: inline the programs' calls; FP8 casts and scales",
                        buildLowerPassPipeline);
  registerPhasePipeline("gpt-distribute-pipeline",
                        "Distribute phase: gradient collectives (and ZeRO-1)",
                        buildDistributePassPipeline);
  registerPhasePipeline("gpt-schedule-pipeline",
                        "Schedule phase: FP8 steps, folded casts, recomputation",
                        buildSchedulePassPipeline);
  registerPhasePipeline("gpt-fuse-pipeline",
                        "Fuse phase: epilogues, AdamW, elementwise and FP8 fusions",
                        buildFusePassPipeline);
  registerPhasePipeline("gpt-memory-plan-pipeline",
                        "Memory-plan phase: static offsets of every program",
                        buildMemoryPlanPassPipeline);
}

//===----------------------------------------------------------------------===//
// Per-pass IR dumps
//===----------------------------------------------------------------------===//
//
// --dump-ir-after-each-pass=DIR writes DIR/NN-<pass>.mlir after every pass
// that runs on the module (gptc writes DIR/00-input.mlir, the parsed file,
// before the first). The numbers do not depend on the flags:
//
// - NN is the pass's place, from 1, in the whole pipeline: every phase's
//   pipeline with every optional pass on (kEveryPass). A flag that leaves
//   passes out (--precision=fp32, --fuse-adamw=false, --world-size=1,
//   --compile-to=PHASE, ...) leaves gaps and renumbers nothing, so a pass
//   has one NN in every compile and dumps of two compiles pair up by name.
//   A pass takes the first place of its name (and patterns) after the
//   previous pass's. One that the whole pipeline lacks is numbered after
//   the place before it, NN.1, NN.2, ... (sorted after NN-*): a pass added
//   by a flag that kEveryPass does not turn on shows up so.
// - The per-program passes (gpt-rematerialize, gpt-fuse-adamw,
//   gpt-plan-memory) run nested on every function: one dump when all have
//   run, named after the nested passes (NN-gpt-plan-memory.mlir).
//
// The last dump is the module that codegen reads; commands.txt names the
// values as it does (EmitExecutable.cpp).

namespace {

/// Calls afterModulePass(pass, name, module) once per pass that finishes on
/// the top-level module; a nested pipeline is named after its passes
/// ("a+b") when its adaptor finishes.
class ModulePassInstrumentation : public PassInstrumentation {
public:
  void runAfterPass(Pass *pass, Operation *op) final {
    // A phase's gate changes nothing: no dump, no progress step.
    if (pass->getArgument() == "gpt-verify-phase")
      return;
    std::lock_guard<std::mutex> lock(mutex);
    if (!llvm::isa<ModuleOp>(op) || op->getParentOp()) {
      if (!llvm::is_contained(nested, pass->getArgument()))
        nested.push_back(pass->getArgument().str());
      return;
    }
    std::string name = pass->getArgument().str();
    if (name.empty()) // a pass adaptor
      name = llvm::join(nested, "+");
    nested.clear();
    afterModulePass(pass, name, op);
  }

protected:
  virtual void afterModulePass(Pass *pass, llvm::StringRef name, Operation *module) = 0;

private:
  llvm::SmallVector<std::string> nested;
  std::mutex mutex;
};

/// The options that turn every optional pass on: the whole pipeline that
/// numbers the dumps. An option that adds a pass belongs here.
CompileOptions everyPassOptions() {
  CompileOptions o;
  o.precision = PrecisionPolicy::Fp8;
  o.fp8History = 16;
  o.fp8SteadyStep = o.fp8LmHead = true;
  o.enablePatterns = "fp8-gelu-matmul-codes"; // the others are on by default
  o.fuseGradAccumulation = true;
  o.accumSteps = 2;
  o.worldSize = 2;
  o.zero = 1;
  o.memoryBudget = 1;
  o.fuseMatmulEpilogue = o.fuseAdamW = o.fuseElementwise = true;
  return o;
}

/// A place in the pipeline: the pass (its flag; a nested pipeline's text
/// without options) and, for gpt-fuse-fp8, which runs at several places,
/// its `enable-patterns` ("" where it has none).
struct Slot {
  std::string pass, patterns;
  bool operator==(const Slot &other) const {
    return pass == other.pass && patterns == other.patterns;
  }
};

/// The value of option `name` in a pass's printed options, "{a=1 b=x,y}"
/// (printed sorted, space-separated); "" where absent.
std::string optionValue(llvm::StringRef options, llvm::StringRef name) {
  std::string key = (name + "=").str();
  for (size_t at = options.find(key); at != llvm::StringRef::npos; at = options.find(key, at + 1)) {
    if (at == 0 || (options[at - 1] != '{' && options[at - 1] != ' '))
      continue;
    return options.drop_front(at + key.size())
        .take_until([](char c) { return c == ' ' || c == '}'; })
        .str();
  }
  return "";
}

Slot slotOf(Pass &pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  if (pass.getArgument().empty()) {
    // A pass adaptor: "func.func(gpt-plan-memory{alignment=256})" is
    // "func.func(gpt-plan-memory)" whatever its options.
    std::string names;
    int depth = 0;
    for (char c : text) {
      depth += c == '{';
      if (depth == 0)
        names += c;
      depth -= c == '}';
    }
    return Slot{names, ""};
  }
  llvm::StringRef options = llvm::StringRef(text).drop_until([](char c) { return c == '{'; });
  return Slot{pass.getArgument().str(), optionValue(options, "enable-patterns")};
}

/// The whole pipeline (gates left out, as they are not dumped).
std::vector<Slot> everyPass() {
  OpPassManager pm(ModuleOp::getOperationName());
  buildPipeline(pm, everyPassOptions(), Phase::MemoryPlan);
  std::vector<Slot> slots;
  for (Pass &pass : pm.getPasses())
    if (pass.getArgument() != "gpt-verify-phase")
      slots.push_back(slotOf(pass));
  return slots;
}

class DumpAfterEachPass : public ModulePassInstrumentation {
public:
  explicit DumpAfterEachPass(llvm::StringRef dir) : dir(dir.str()), slots(everyPass()) {
    width = std::max<size_t>(2, std::to_string(slots.size()).size());
  }

protected:
  void afterModulePass(Pass *pass, llvm::StringRef name, Operation *op) override {
    Slot slot = slotOf(*pass);
    auto it = std::find(slots.begin() + next, slots.end(), slot);
    std::string number;
    if (it != slots.end()) {
      next = it - slots.begin() + 1;
      extra = 0;
      number = padded(next);
    } else {
      number = padded(next) + "." + std::to_string(++extra);
    }
    std::string path = dir + "/" + number + "-" + name.str() + ".mlir";
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      op->emitWarning("cannot write IR dump '") << path << "': " << ec.message();
      return;
    }
    op->print(os);
    os << "\n";
  }

private:
  std::string padded(size_t n) const {
    std::string s = std::to_string(n);
    return std::string(width > s.size() ? width - s.size() : 0, '0') + s;
  }

  std::string dir;
  std::vector<Slot> slots;
  size_t width = 2;
  size_t next = 0;  // the place after the last pass's (0: none yet)
  unsigned extra = 0; // passes since then that have no place
};

} // namespace

std::unique_ptr<PassInstrumentation> createDumpAfterEachPassInstrumentation(llvm::StringRef dir) {
  return std::make_unique<DumpAfterEachPass>(dir);
}

//===----------------------------------------------------------------------===//
// Compile progress
//===----------------------------------------------------------------------===//

namespace {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ProgressInstrumentation : public ModulePassInstrumentation {
public:
  explicit ProgressInstrumentation(CompileProgress &progress) : progress(progress) {}

protected:
  void afterModulePass(Pass *, llvm::StringRef name, Operation *) override {
    progress.step(name);
  }

private:
  CompileProgress &progress;
};

} // namespace

CompileProgress::CompileProgress(llvm::raw_ostream &os, Mode mode, unsigned totalSteps)
    : os(os), mode(mode), total(totalSteps), start(nowSeconds()), last(start) {}

void CompileProgress::step(llvm::StringRef name) {
  ++done;
  double now = nowSeconds();
  double took = now - last, elapsed = now - start;
  last = now;
  if (mode == Mode::Lines) {
    os << llvm::formatv("gptc: [{0,2}/{1}] {2,-32} {3:f2} s ({4:f1} s)\n", done, total, name,
                        took, elapsed);
  } else if (mode == Mode::Bar) {
    constexpr unsigned kWidth = 24;
    unsigned filled = total ? std::min(kWidth, done * kWidth / total) : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    // \r and clear-to-end: the bar is redrawn on one line.
    os << llvm::formatv("\rgptc: [{0}] {1}/{2} {3} ({4:f1} s)\x1b[K", bar, done, total, name,
                        elapsed);
  }
  os.flush();
}

void CompileProgress::finish() {
  if (mode == Mode::Bar && done) {
    os << "\n";
    os.flush();
  }
}

std::unique_ptr<PassInstrumentation> createProgressInstrumentation(CompileProgress &progress) {
  return std::make_unique<ProgressInstrumentation>(progress);
}

} // namespace gptc
