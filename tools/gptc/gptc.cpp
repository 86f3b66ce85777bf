//===- gptc.cpp - the gptc compiler driver -------------------------------===//
//
//   gptc compile models/gpt2.mlir --model=124M --batch=16 --seq=1024 -o out.mlir
//   gptc run-reference models/gpt2.mlir --model=tiny --precision=fp64
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Reference/Interpreter.h"
#include "dialects/GPT/IR/GPTDialect.h"
#include "dialects/GPT/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <random>

using namespace mlir;
using namespace gptc;
namespace cl = llvm::cl;

#ifndef GPTC_VERSION
#define GPTC_VERSION "0.1.0"
#endif

namespace {

cl::OptionCategory compileCat("gptc compile / run-reference options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::cat(compileCat));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(compileCat));
cl::opt<std::string> model("model", cl::desc("Model preset: tiny, mini, 124M, 350M, 774M, 1558M"),
                           cl::cat(compileCat));
cl::opt<int64_t> batch("batch", cl::desc("Batch size B (default: the preset's)"),
                       cl::init(0), cl::cat(compileCat));
cl::opt<int64_t> seq("seq", cl::desc("Sequence length T (default: the preset's)"),
                     cl::init(0), cl::cat(compileCat));
cl::opt<std::string> compileTo("compile-to",
                               cl::desc("Stop after this phase (see --list-phases)"),
                               cl::value_desc("phase"), cl::cat(compileCat));
cl::opt<std::string> dumpDir("dump-ir-after-each-pass",
                             cl::desc("Write DIR/NN-<pass>.mlir after every pass"),
                             cl::value_desc("dir"), cl::cat(compileCat));
cl::opt<bool> listPhases("list-phases", cl::desc("Print the phases and exit"),
                         cl::cat(compileCat));

cl::OptionCategory referenceCat("gptc run-reference options");
cl::opt<std::string> precision("precision", cl::desc("fp64 or fp32"), cl::init("fp64"),
                               cl::cat(referenceCat));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the initialisation and the random batch"),
                       cl::init(1337), cl::cat(referenceCat));
cl::opt<bool> decompose("decompose-attention",
                        cl::desc("Run gpt-decompose-attention before interpreting"),
                        cl::cat(referenceCat));
cl::opt<std::string> dataFile("data",
                              cl::desc("llm.c token file (.bin) for the batch "
                                       "(default: random tokens)"),
                              cl::value_desc("file"), cl::cat(referenceCat));

const char *kOverview = R"(gptc: compiles a GPT-2 training step for the GPU.

Usage:
  gptc compile <model.mlir> [options] [-o out]
  gptc run-reference <model.mlir> --model=<preset> [options]
  gptc --version | --list-phases

Examples:
  gptc compile models/gpt2.mlir --model=124M --batch=16 --seq=1024 -o gpt2-124M.mlir
  gptc compile models/gpt2.mlir --model=tiny --compile-to=import --dump-ir-after-each-pass=out/
  gptc run-reference models/gpt2.mlir --model=tiny --precision=fp32

MLIR's pass-manager flags also work (listed by --help-hidden), e.g.
  --mlir-print-ir-after-all, --mlir-print-ir-after=<pass>, --mlir-timing
)";

int fail(const llvm::Twine &message) {
  llvm::errs() << "gptc: error: " << message << "\n";
  return 1;
}

OwningOpRef<ModuleOp> parseInput(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "gptc: error: cannot open '" << inputFile << "': " << error << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

int runCompile(MLIRContext &context) {
  Phase target = getLastPhase();
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
  }
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return 1;

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("bad pass manager options");
  PipelineOptions options;
  options.model = model;
  options.batch = batch;
  options.seq = seq;
  buildPipeline(pm, options, target);

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
  if (failed(pm.run(*module)))
    return 1;

  std::string error;
  auto output = openOutputFile(outputFile, &error);
  if (!output)
    return fail("-o: " + error);
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

/// Reads the first B*T+1 tokens of an llm.c token file (header of 256
/// int32: magic 20240520, version 1, token count; then uint16 tokens).
int readTokens(int64_t needed, std::vector<int64_t> &tokens) {
  auto buffer = llvm::MemoryBuffer::getFile(dataFile);
  if (!buffer)
    return fail("--data: cannot read '" + dataFile + "': " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() < 1024)
    return fail("--data: '" + dataFile + "' is shorter than the 1024-byte header");
  int32_t header[256];
  std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] != 20240520 || header[1] != 1)
    return fail("--data: '" + dataFile + "' is not an llm.c GPT-2 token file "
                "(magic 20240520, version 1)");
  int64_t count = header[2];
  if (count < 0 || static_cast<int64_t>(bytes.size()) != 1024 + 2 * count)
    return fail("--data: '" + dataFile + "' holds " +
                llvm::Twine(bytes.size()) + " bytes, header says " +
                llvm::Twine(count) + " tokens");
  if (count < needed)
    return fail("--data: '" + dataFile + "' has " + llvm::Twine(count) +
                " tokens, one batch needs " + llvm::Twine(needed));
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data() + 1024);
  for (int64_t i = 0; i < needed; ++i)
    tokens.push_back(data[2 * i] | (data[2 * i + 1] << 8));
  return 0;
}

int runReference(MLIRContext &context) {
  if (precision != "fp64" && precision != "fp32")
    return fail("--precision: expected fp64 or fp32, got '" + precision + "'");
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseInput(context, sourceMgr);
  if (!module)
    return 1;
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("bad pass manager options");
  PipelineOptions options;
  options.model = model;
  options.batch = batch;
  options.seq = seq;
  buildPipeline(pm, options, Phase::Import);
  if (decompose)
    pm.addNestedPass<func::FuncOp>(gpt::createDecomposeAttentionPass());
  if (failed(pm.run(*module)))
    return 1;

  auto fn = module->lookupSymbol<func::FuncOp>("forward");
  if (!fn)
    return fail("'" + inputFile + "' has no @forward function");
  auto config = (*module)->getAttrOfType<DictionaryAttr>("gpt.config");
  auto configInt = [&](StringRef key) {
    auto attr = config ? config.getAs<IntegerAttr>(key) : IntegerAttr();
    return attr ? attr.getInt() : int64_t{0};
  };
  int64_t nLayer = configInt("n_layer"), b = configInt("batch"), t = configInt("seq");
  int64_t vocab = configInt("vocab_size");

  std::vector<reference::Tensor> args =
      reference::initializeArguments(fn, seed, nLayer);
  std::vector<int64_t> tokens;
  if (!dataFile.empty()) {
    if (int rc = readTokens(b * t + 1, tokens))
      return rc;
  } else {
    std::mt19937_64 rng(seed + 1);
    for (int64_t i = 0; i < b * t + 1; ++i)
      tokens.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
  }
  std::vector<std::string> names = reference::getArgumentNames(fn);
  for (size_t i = 0; i < names.size(); ++i) {
    int64_t shift = names[i] == "tokens" ? 0 : names[i] == "targets" ? 1 : -1;
    if (shift < 0)
      continue;
    for (int64_t j = 0; j < b * t; ++j)
      args[i].data[j] = static_cast<double>(tokens[j + shift]);
  }
  auto results = reference::evaluate(
      fn, args, precision == "fp64" ? reference::Precision::F64 : reference::Precision::F32);
  if (failed(results))
    return 1;
  llvm::outs() << llvm::formatv("model {0}: B={1} T={2}, {3} parameters\n",
                                config.getAs<StringAttr>("name").getValue(), b, t,
                                fn->getAttrOfType<IntegerAttr>("gpt.num_parameters").getInt());
  llvm::outs() << llvm::formatv("loss ({0}): {1:f10}\n", precision, (*results)[0].data[0]);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::StringRef command = argc > 1 ? argv[1] : "";
  bool isCommand = command == "compile" || command == "run-reference";

  gptc::registerPasses(); // so --mlir-print-ir-after=<pass> knows our passes
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "gptc " << GPTC_VERSION << " (MLIR/LLVM " << LLVM_VERSION_STRING << ")\n";
  });

  // The command word is not an option: drop it before llvm::cl parses.
  std::vector<char *> args(argv, argv + argc);
  std::string program = std::string(argv[0]) + " " + command.str();
  if (isCommand) {
    args.erase(args.begin() + 1);
    args[0] = program.data();
  }
  // libLLVM registers hundreds of backend flags; --help shows ours only.
  cl::HideUnrelatedOptions({&compileCat, &referenceCat});
  cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(), kOverview);

  if (listPhases) {
    for (const gptc::PhaseInfo &info : gptc::enumeratePhases())
      llvm::outs() << llvm::formatv("  {0,-10} {1}\n", info.name, info.description);
    return 0;
  }
  if (!isCommand)
    return fail(command.empty() ? "missing command: compile or run-reference (see --help)"
                                : "unknown command '" + command +
                                      "': expected compile or run-reference");
  if (inputFile.empty())
    return fail("missing input file (e.g. models/gpt2.mlir)");
  if (command == "compile" &&
      (precision.getNumOccurrences() || seed.getNumOccurrences() ||
       decompose.getNumOccurrences() || dataFile.getNumOccurrences()))
    return fail("--precision, --seed, --decompose-attention and --data apply to "
                "run-reference, not compile");
  if (command == "run-reference" &&
      (compileTo.getNumOccurrences() || dumpDir.getNumOccurrences() ||
       outputFile.getNumOccurrences()))
    return fail("--compile-to, --dump-ir-after-each-pass and -o apply to compile");

  DialectRegistry registry;
  gptc::registerDialects(registry);
  MLIRContext context(registry);
  // Diagnostics name the op and its file:line:col; a dump of the whole
  // module on every error helps nobody reading a model file.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  return command == "compile" ? runCompile(context) : runReference(context);
}
