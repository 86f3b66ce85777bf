//===- CompileOptions.cpp - every option of a compile, declared once -----===//

#include "compiler/Pipelines/CompileOptions.h"

#include "compiler/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cl = llvm::cl;

namespace gptc {

llvm::StringRef getPrecisionName(PrecisionPolicy precision) {
  switch (precision) {
  case PrecisionPolicy::Fp32: return "fp32";
  case PrecisionPolicy::Bf16: return "bf16";
  case PrecisionPolicy::Fp16: return "fp16";
  case PrecisionPolicy::Fp8: return "fp8";
  }
  return "";
}

std::optional<PrecisionPolicy> parsePrecision(llvm::StringRef name) {
  for (PrecisionPolicy p : {PrecisionPolicy::Fp32, PrecisionPolicy::Bf16, PrecisionPolicy::Fp16, PrecisionPolicy::Fp8})
    if (getPrecisionName(p) == name)
      return p;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

namespace {

/// NCCL's communicators are int-ranked; past 2^16 GPUs the per-rank batch
/// bookkeeping is not what anyone means.
constexpr int64_t kMaxWorldSize = 1 << 16;

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Whether the comma-separated `list` names `label`.
bool patternListed(llvm::StringRef list, llvm::StringRef label) {
  return llvm::is_contained(splitList(list), label);
}

} // namespace

std::vector<std::string> splitList(llvm::StringRef list) {
  llvm::SmallVector<llvm::StringRef> items;
  list.split(items, ',', -1, /*KeepEmpty=*/false);
  std::vector<std::string> trimmed;
  for (llvm::StringRef item : items)
    if (!item.trim().empty())
      trimmed.push_back(item.trim().str());
  return trimmed;
}

bool CompileOptions::patternOn(llvm::StringRef label) const {
  if (patternListed(disablePatterns, label))
    return false;
  if (patternListed(enablePatterns, label))
    return true;
  const Fp8Pattern *p = findFp8Pattern(label);
  return p && p->byDefault;
}

llvm::Error CompileOptions::resolve() {
  // Options with a syntax of their own.
  double gib = 0;
  if (llvm::StringRef(memoryBudgetFlag).trim().getAsDouble(gib) || !std::isfinite(gib) ||
      gib < 0)
    return error("--memory-budget: expected a number of GiB >= 0 (0: off), got '" +
                 memoryBudgetFlag + "'");
  memoryBudget = gib;

  epilogueGelu = epilogueGeluGrad = epilogueGeluBiasGrad = epilogueBiasGrad = false;
  for (const std::string &name : splitList(matmulEpilogues)) {
    bool *fold = name == "gelu"             ? &epilogueGelu
                 : name == "gelu-grad"      ? &epilogueGeluGrad
                 : name == "gelu-bias-grad" ? &epilogueGeluBiasGrad
                 : name == "bias-grad"      ? &epilogueBiasGrad
                                            : nullptr;
    if (!fold)
      return error("--matmul-epilogues: expected gelu, gelu-grad, gelu-bias-grad or bias-grad, "
                   "got '" + name + "'");
    *fold = true;
  }

  llvm::StringRef ranks = llvm::StringRef(worldSizeFlag).trim();
  int64_t n = 0;
  if (ranks == "any")
    worldSize = -1;
  else if (ranks.getAsInteger(10, n) || n < 1 || n > kMaxWorldSize)
    return error("--world-size: expected any or a number of ranks from 1 to " +
                 llvm::Twine(kMaxWorldSize) + ", got '" + worldSizeFlag + "'");
  else
    worldSize = n == 1 ? 0 : n; // one rank: no collectives at all

  // Each option alone.
  if (batch < 0 || seq < 0)
    return error(llvm::formatv("--{0}: expected a number >= 1, got {1}",
                               batch < 0 ? "batch" : "seq", batch < 0 ? batch : seq)
                     .str());
  if (!(gpuMemory > 0) || !std::isfinite(gpuMemory))
    return error(llvm::formatv("--gpu-memory: expected a number of GiB > 0, got {0}", gpuMemory)
                     .str());
  if (fp8History < 0)
    return error("--fp8-history: expected a number of steps >= 0, got " +
                 llvm::Twine(fp8History));
  if (!(lossScale > 0) || !std::isfinite(lossScale))
    return error("--loss-scale: expected a finite number > 0, got " + std::to_string(lossScale));
  if (zero != 0 && zero != 1)
    return error("--zero: expected 0 or 1 (ZeRO stage 1 shards the optimizer state), got " +
                 llvm::Twine(zero));
  if (!(bucketMb >= 0 && bucketMb <= 0x1p40))
    return error("--bucket-mb: expected a number of MiB from 0 to 2^40, got " +
                 std::to_string(bucketMb));
  if (rematMaxDepth < 1)
    return error("--remat-max-depth: expected a number of ops >= 1, got " +
                 llvm::Twine(rematMaxDepth));
  if (layerNormGradChunkRows < 0 || layerNormGradChunkRows > 1024)
    return error("--layernorm-grad-chunk-rows: expected 0 (auto) to 1024 rows, got " +
                 llvm::Twine(layerNormGradChunkRows));

  for (auto [flag, list] : {std::pair{"enable-patterns", &enablePatterns},
                            std::pair{"disable-patterns", &disablePatterns}}) {
    for (const std::string &label : splitList(*list)) {
      if (!findFp8Pattern(label))
        return error(llvm::Twine("--") + flag + ": no pattern '" + label +
                     "' (the patterns: " + getFp8PatternLabels() + ")");
      if (flag == llvm::StringRef("enable-patterns") && patternListed(disablePatterns, label))
        return error("--enable-patterns and --disable-patterns both name '" + label + "'");
    }
  }

  // Options against each other and the target.
  if ((!enablePatterns.empty() || !disablePatterns.empty()) && precision != PrecisionPolicy::Fp8)
    return error(llvm::Twine("--") +
                 (enablePatterns.empty() ? "disable-patterns" : "enable-patterns") +
                 ": the patterns are FP8 rewrites; they need --precision=fp8, got " +
                 getPrecisionName(precision));
  if (!fp8Exclude.empty() && precision != PrecisionPolicy::Fp8)
    return error("--fp8-exclude: needs --precision=fp8, got " + getPrecisionName(precision));
  if (!fp32Ops.empty() && precision == PrecisionPolicy::Fp32)
    return error("--fp32-ops: needs --precision=bf16, fp16 or fp8 (every op is fp32 already)");
  for (const std::string &kind : splitList(fp32Ops))
    if (!llvm::is_contained(getFp32OpKinds(), kind))
      return error("--fp32-ops: no kind '" + kind + "' (the kinds: " +
                   llvm::join(getFp32OpKinds(), ", ") + ")");
  if (fp8LmHead && precision != PrecisionPolicy::Fp8)
    return error("--fp8-lm-head: needs --precision=fp8, got " + getPrecisionName(precision));
  if (narrowResidual && precision == PrecisionPolicy::Fp32)
    return error("--narrow-residual: needs --precision=bf16, fp16 or fp8 (the stream is fp32 "
                 "already)");
  if (zero == 1 && worldSize < 2)
    return error("--zero=1: the optimizer state is cut into one shard per rank at compile time: "
                 "give --world-size=N with N >= 2 (got --world-size=" + worldSizeFlag + ")");
  if (target == CompileTarget::Cuda) {
    if (llvm::Expected<std::string> feature = codegen::cudaPtxFeature(cudaArch); !feature)
      return error("--cuda-arch: " + llvm::toString(feature.takeError()));
    if (precision == PrecisionPolicy::Fp8 && codegen::cudaComputeCapability(cudaArch) < 89)
      return error("--precision=fp8: FP8 GEMMs and conversions need sm_89 or newer, but "
                   "--cuda-arch is " + cudaArch);
  }
  return llvm::Error::success();
}

codegen::EmitOptions CompileOptions::emitOptions() const {
  codegen::EmitOptions emit;
  emit.target = target == CompileTarget::Host ? codegen::EmitOptions::Target::Host
                                              : codegen::EmitOptions::Target::CUDA;
  emit.chip = cudaArch;
  emit.flashAttention = flashAttention;
  emit.warpgroupMma = warpgroupMma;
  emit.fuseCrossEntropy = fuseCrossEntropy;
  emit.crossEntropyOnePass = crossEntropyOnePass;
  emit.layerNormGradOneLaunch = layerNormGradOneLaunch;
  emit.layerNormGradChunkRows = layerNormGradChunkRows;
  if (!cudaToolkit.empty())
    emit.toolkit = cudaToolkit;
  else if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    emit.toolkit = home;
  return emit;
}

namespace {

/// Collects each option's flag and value as text.
struct FlagPrinter {
  std::vector<std::pair<std::string, std::string>> values;

  static std::string text(bool v) { return v ? "true" : "false"; }
  static std::string text(int64_t v) { return std::to_string(v); }
  static std::string text(double v) {
    // The shortest text that reads back as the same double.
    char buffer[32];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(buffer, sizeof(buffer), "%.*g", digits, v);
      if (std::strtod(buffer, nullptr) == v)
        break;
    }
    return buffer;
  }
  static std::string text(const std::string &v) { return v; }

  template <typename T>
  void opt(T &field, llvm::StringRef flag, OptionGroup, const char *) {
    values.emplace_back(splitFlag(flag).first.str(), text(field));
  }
  template <typename E>
  void opt(E &field, llvm::StringRef flag, OptionGroup, const char *,
           std::initializer_list<EnumName<E>> names) {
    for (const EnumName<E> &n : names)
      if (n.value == field)
        values.emplace_back(splitFlag(flag).first.str(), n.name);
  }
};

} // namespace

std::vector<std::pair<std::string, std::string>> CompileOptions::flagValues() const {
  CompileOptions copy = *this; // bind() hands out mutable fields
  FlagPrinter printer;
  copy.bind(printer);
  return std::move(printer.values);
}

//===----------------------------------------------------------------------===//
// The command line
//===----------------------------------------------------------------------===//

namespace {

cl::OptionCategory &categoryOf(OptionGroup group) {
  static cl::OptionCategory compile("gptc compile / run-reference options");
  static cl::OptionCategory trainStep("gptc train-step options (phase train-step)");
  static cl::OptionCategory distribute("gptc data-parallel options (phase distribute)");
  static cl::OptionCategory switches(
      "gptc kernel, fusion and FP8 switches (--help-hidden; defaults as measured best)");
  switch (group) {
  case OptionGroup::Switches: return switches;
  case OptionGroup::Compile: return compile;
  case OptionGroup::TrainStep: return trainStep;
  case OptionGroup::Distribute: return distribute;
  }
  return compile;
}

/// An enum flag whose error lists the names it takes.
template <typename E>
class EnumParser : public cl::parser<E> {
public:
  using cl::parser<E>::parser;
  bool parse(cl::Option &o, llvm::StringRef, llvm::StringRef arg, E &value) {
    std::vector<std::string> names;
    for (const auto &v : this->Values) {
      if (v.Name == arg) {
        value = v.V.getValue();
        return false;
      }
      names.push_back(v.Name.str());
    }
    std::string list = llvm::join(llvm::ArrayRef(names).drop_back(), ", ");
    return o.error("expected " + (names.size() > 1 ? list + " or " : "") + names.back() +
                   ", got '" + arg + "'");
  }
  // Listed as "--flag=<value>" with its help, which names the values: not
  // a line per value.
  size_t getOptionWidth(const cl::Option &o) const {
    return o.ArgStr.size() + o.ValueStr.size() + 9;
  }
  void printOptionInfo(const cl::Option &o, size_t globalWidth) const {
    llvm::outs() << "  --" << o.ArgStr << "=<" << o.ValueStr << ">";
    cl::Option::printHelpStr(o.HelpStr, globalWidth, getOptionWidth(o));
  }
};

} // namespace

struct CommandLineOptions::Impl {
  std::vector<std::unique_ptr<cl::Option>> owned;
  llvm::StringMap<cl::Option *> byFlag;

  template <typename T>
  void opt(T &field, llvm::StringRef flag, OptionGroup group, const char *help) {
    auto [name, value] = splitFlag(flag);
    auto o = std::make_unique<cl::opt<T, /*ExternalStorage=*/true>>(
        name, cl::desc(help), cl::location(field), cl::cat(categoryOf(group)));
    if (!value.empty())
      o->setValueStr(value);
    if (group == OptionGroup::Switches)
      o->setHiddenFlag(cl::Hidden);
    add(std::move(o));
  }
  template <typename E>
  void opt(E &field, llvm::StringRef flag, OptionGroup group, const char *help,
           std::initializer_list<EnumName<E>> names) {
    auto [name, value] = splitFlag(flag);
    auto o = std::make_unique<cl::opt<E, /*ExternalStorage=*/true, EnumParser<E>>>(
        name, cl::desc(help), cl::location(field), cl::cat(categoryOf(group)));
    o->setValueStr(value.empty() ? llvm::StringRef("value") : value);
    for (const EnumName<E> &n : names)
      o->getParser().addLiteralOption(n.name, n.value, "");
    add(std::move(o));
  }
  void add(std::unique_ptr<cl::Option> o) {
    byFlag[o->ArgStr] = o.get();
    owned.push_back(std::move(o));
  }
};

CommandLineOptions::~CommandLineOptions() {
  // Unregistered, so that a second binding (a test's) finds no duplicate.
  for (std::unique_ptr<cl::Option> &o : impl->owned)
    o->removeArgument();
}

bool CommandLineOptions::given(llvm::StringRef flag) const {
  const cl::Option *o = find(flag);
  return o && o->getNumOccurrences();
}

const cl::Option *CommandLineOptions::find(llvm::StringRef flag) const {
  return impl->byFlag.lookup(flag);
}

std::unique_ptr<CommandLineOptions> bindCommandLine(CompileOptions &options) {
  auto result = std::unique_ptr<CommandLineOptions>(new CommandLineOptions());
  result->impl = std::make_unique<CommandLineOptions::Impl>();
  options.bind(*result->impl);
  return result;
}

llvm::cl::OptionCategory &getOptionCategory(OptionGroup group) { return categoryOf(group); }

} // namespace gptc
