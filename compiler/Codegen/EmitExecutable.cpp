//===- EmitExecutable.cpp - lowered programs -> step.fb ------------------===//
//
/// 1) lowerPrograms: commands, kernels (bodies), GEMMs, tensors.
/// 2) CUDA: the bodies become gpu.funcs of one gpu.module with an NVVM
///    target; MLIR lowers them to NVVM and serializes PTX and a cubin.
/// 3) The FlatBuffer (runtime/schemas/executable.fbs) is written.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/EmitExecutable.h"

#include "compiler/Codegen/HostTarget.h"
#include "compiler/Codegen/Lowering.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/ScheduleCheck.h"
#include "runtime/schemas/executable_generated.h"
#include "runtime/support/Version.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace fb = flatbuffers;
namespace s = gptc::schema;

namespace gptc::codegen {

void registerCodegenDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, cf::ControlFlowDialect, gpu::GPUDialect,
                  LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                  NVVM::NVVMDialect, scf::SCFDialect, ub::UBDialect, vector::VectorDialect>();
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

llvm::Expected<std::string> cudaPtxFeature(llvm::StringRef chip) {
  // The least PTX ISA version that knows each chip gptc compiles for.
  static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kChips[] = {
      {"sm_80", "+ptx80"},  {"sm_86", "+ptx80"},   {"sm_87", "+ptx80"},
      {"sm_89", "+ptx80"},  {"sm_90", "+ptx80"},   {"sm_90a", "+ptx80"},
      {"sm_100", "+ptx86"}, {"sm_100a", "+ptx86"}, {"sm_103", "+ptx88"},
      {"sm_103a", "+ptx88"}, {"sm_120", "+ptx87"}, {"sm_120a", "+ptx87"},
      {"sm_121", "+ptx88"}, {"sm_121a", "+ptx88"},
  };
  for (const auto &[name, feature] : kChips)
    if (chip == name)
      return feature.str();
  std::string known;
  for (const auto &[name, feature] : kChips)
    known += (known.empty() ? "" : ", ") + name.str();
  // sm_MN with M < 8: a real chip, too old for the kernels.
  bool older = chip.size() == 5 && chip.starts_with("sm_") && llvm::isDigit(chip[3]) &&
               chip[3] < '8' && llvm::isDigit(chip[4]);
  return llvm::createStringError(
      "unsupported CUDA chip '" + chip.str() + "'" +
      (older ? " (the kernels need sm_80 or newer: bf16 tensor cores, cp.async)" : "") +
      "; expected one of " + known);
}

int64_t cudaComputeCapability(llvm::StringRef chip) {
  int64_t cc = 0;
  if (!chip.consume_front("sm_") || chip.take_while(llvm::isDigit).getAsInteger(10, cc))
    return 0;
  return cc;
}

namespace {

void dump(const EmitOptions &options, const std::string &name,
          llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (options.dumpDir.empty())
    return;
  std::error_code ec;
  llvm::raw_fd_ostream os(options.dumpDir + "/" + name, ec);
  if (!ec)
    write(os);
}

/// Whether each CUDA kernel starts with griddepcontrol.wait (sm_90 and
/// later): the schema's Kernel.waits_for_prior_grids.
bool waitsForPriorGrids(const EmitOptions &options) {
  return cudaComputeCapability(options.chip) >= 90;
}

/// The chip the kernels are compiled for: wgmma exists only on sm_90a
/// (PTX for exactly sm_90 parts).
std::string kernelChip(const EmitOptions &options, const Lowered &lowered) {
  return lowered.sm90a && options.chip == "sm_90" ? "sm_90a" : options.chip;
}

/// Kernel modules compiled (LLVM, then ptxas) in parallel, each to its own
/// cubin: a fixed count, so that the executable does not depend on the
/// machine that compiled it.
constexpr int64_t kKernelParts = 4;
/// Kernel i's module: round robin, which spreads the large kernels (flash
/// attention's three are created one after another).
size_t partOf(size_t kernel) { return kernel % kKernelParts; }

/// The kernel modules: one gpu.func per kernel, thread idx = global x id.
OwningOpRef<ModuleOp> buildGpuKernels(MLIRContext *ctx, const Lowered &lowered,
                                      const EmitOptions &options, StringRef features) {
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto target = NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda",
                                          kernelChip(options, lowered), features);
  SmallVector<gpu::GPUModuleOp> parts;
  for (int64_t p = 0; p < std::min<int64_t>(kKernelParts, lowered.kernels.size()); ++p) {
    b.setInsertionPointToEnd(module->getBody());
    parts.push_back(gpu::GPUModuleOp::create(b, loc, "gptc_kernels_" + std::to_string(p),
                                             b.getArrayAttr({target})));
  }
  for (auto [index, k] : llvm::enumerate(lowered.kernels)) {
    b.setInsertionPointToEnd(parts[partOf(index)].getBody());
    auto fn = gpu::GPUFuncOp::create(b, loc, k.name, b.getFunctionType(k.argTypes, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    if (k.minBlocksPerSM > 0) {
      // ptxas derives the register cap from both: 64K / (blocks * threads).
      fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                  b.getDenseI32ArrayAttr({static_cast<int32_t>(options.blockSize), 1, 1}));
      fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(static_cast<int32_t>(k.minBlocksPerSM)));
    }
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&fn.getBody().front());
    // sm_90: the runtime may launch a kernel before the one it depends on
    // has finished (programmatic dependent launch); it waits here until
    // that one's writes are visible. Without such a launch this is a no-op.
    if (waitsForPriorGrids(options))
      NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
    Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value bdim = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value idx = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bid, bdim), tid);
    gpu::ReturnOp::create(b, loc);
    b.setInsertionPoint(fn.getBody().front().getTerminator());
    // The launch may round the grid up: guard with the kernel's thread count.
    int64_t threads = 0;
    for (const ProgramInfo &p : lowered.programs)
      for (const Command &c : p.commands)
        if (c.kind == Command::Launch && &lowered.kernels[c.kernel] == &k)
          threads = c.threads;
    Value n = arith::ConstantIndexOp::create(b, loc, threads);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, idx, n);
    auto ifOp = scf::IfOp::create(b, loc, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    k.body(b, loc, idx, fn.getArguments());
  }
  return module;
}

/// Gives every branch that reaches one block more than once with arguments
/// (a switch whose cases the conversion merged) a forwarding block per
/// repeat, in successor order. LLVM IR needs this for its PHIs; MLIR's own
/// legalization at translation does the same but creates the blocks in
/// hash-map order, so the PTX differed from run to run.
void makeSuccessorsDistinct(Operation *root) {
  root->walk([](Operation *terminator) {
    if (terminator->getNumSuccessors() < 2)
      return;
    llvm::SmallPtrSet<Block *, 8> seen;
    OpBuilder b(terminator->getContext());
    for (unsigned i = 0, e = terminator->getNumSuccessors(); i < e; ++i) {
      Block *to = terminator->getSuccessor(i);
      if (to->getNumArguments() == 0 || seen.insert(to).second)
        continue;
      // The forwarder's arguments carry this edge's values to `to`.
      Block *forward = b.createBlock(terminator->getBlock()->getParent());
      for (BlockArgument arg : to->getArguments())
        forward->addArgument(arg.getType(), arg.getLoc());
      LLVM::BrOp::create(b, terminator->getLoc(), forward->getArguments(), to);
      terminator->setSuccessor(forward, i);
    }
  });
}

/// A kernel module's PTX and cubin.
struct CompiledPart {
  std::string ptx;
  std::vector<uint8_t> cubin;
};
using CompiledKernels = std::vector<CompiledPart>;

FailureOr<CompiledKernels> compileGpuKernels(ModuleOp module, const EmitOptions &options) {
  dump(options, "kernels.gpu.mlir", [&](llvm::raw_ostream &os) { module.print(os); });
  if (failed(module.verify()))
    return failure();
  PassManager pm(module.getContext());
  OpPassManager &nested = pm.nest<gpu::GPUModuleOp>();
  nested.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true; // kernels take plain pointers (the ABI)
  nested.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  nested.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(module)))
    return failure();
  makeSuccessorsDistinct(module);
  dump(options, "kernels.nvvm.mlir", [&](llvm::raw_ostream &os) { module.print(os); });

  // One LLVM compile per module: the PTX that ptxas turns into the cubin
  // is the executable's PTX as well.
  auto gpuModules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
  CompiledKernels out(gpuModules.size());
  auto compile = [&](size_t i) -> LogicalResult {
    gpu::GPUModuleOp gpuModule = gpuModules[i];
    auto target = llvm::cast<gpu::TargetAttrInterface>(gpuModule.getTargetsAttr()[0]);
    auto keepPtx = [&](StringRef ptx) { out[i].ptx = ptx.str(); };
    gpu::TargetOptions opts(options.toolkit, {}, "", "", gpu::CompilationTarget::Binary,
                            /*getSymbolTableCallback=*/{}, /*initialLlvmIRCallback=*/{},
                            /*linkedLlvmIRCallback=*/{}, /*optimizedLlvmIRCallback=*/{}, keepPtx);
    std::optional<SmallVector<char, 0>> cubin = target.serializeToObject(gpuModule, opts);
    if (!cubin || out[i].ptx.empty())
      return gpuModule.emitError("codegen: NVVM serialization failed; is the CUDA toolkit at ")
             << options.toolkit << "?";
    out[i].cubin.assign(cubin->begin(), cubin->end());
    return success();
  };
  if (failed(failableParallelForEachN(module.getContext(), 0, gpuModules.size(), compile)))
    return failure();
  dump(options, "kernels.ptx", [&](llvm::raw_ostream &os) {
    for (const CompiledPart &part : out)
      os << part.ptx;
  });
  return out;
}

s::DType dtypeOf(Type t) {
  if (t.isF64())
    return s::DType::F64;
  if (t.isBF16())
    return s::DType::BF16;
  if (t.isF16())
    return s::DType::F16;
  if (t.isInteger(32))
    return s::DType::I32;
  if (llvm::isa<Float8E4M3FNType>(t))
    return s::DType::F8E4M3;
  if (llvm::isa<Float8E5M2Type>(t))
    return s::DType::F8E5M2;
  return s::DType::F32;
}

s::Epilogue schemaEpilogue(GemmEpilogue e) {
  switch (e) {
  case GemmEpilogue::None:
    return s::Epilogue::None;
  case GemmEpilogue::Bias:
    return s::Epilogue::Bias;
  case GemmEpilogue::GeluAux:
    return s::Epilogue::GeluAux;
  case GemmEpilogue::BiasGeluAux:
    return s::Epilogue::BiasGeluAux;
  case GemmEpilogue::DGelu:
    return s::Epilogue::DGelu;
  case GemmEpilogue::BGradB:
    return s::Epilogue::BGradB;
  case GemmEpilogue::DGeluBGrad:
    return s::Epilogue::DGeluBGrad;
  }
  llvm_unreachable("unknown GEMM epilogue");
}

s::TensorRole roleOf(const std::string &role) {
  if (role == "params")
    return s::TensorRole::Parameter;
  if (role == "state")
    return s::TensorRole::OptimizerState;
  if (role == "inputs")
    return s::TensorRole::Input;
  if (role == "outputs")
    return s::TensorRole::Output;
  if (role == "workspace")
    return s::TensorRole::Workspace;
  return s::TensorRole::Activation;
}

} // namespace

FailureOr<std::vector<uint8_t>> emitExecutable(ModuleOp module, const EmitOptions &options) {
  MLIRContext *ctx = module.getContext();
  LoweringOptions lowering;
  bool cuda = options.target == EmitOptions::Target::CUDA;
  // The kernels' PTX version, checked before any lowering.
  std::string features = options.features;
  if (cuda && features.empty()) {
    llvm::Expected<std::string> feature = cudaPtxFeature(options.chip);
    if (!feature)
      return module.emitError(llvm::toString(feature.takeError()));
    features = *feature;
  }
  lowering.flashAttention = options.flashAttention && cuda;
  lowering.warpgroupMma =
      options.warpgroupMma && cuda && (options.chip == "sm_90" || options.chip == "sm_90a");
  lowering.rowLanes = cuda ? 32 : 1;
  lowering.vectorAccess = cuda;
  lowering.cudaArch = cuda ? cudaComputeCapability(options.chip) : 0;
  lowering.fusedCrossEntropy = options.fuseCrossEntropy;
  lowering.crossEntropyOnePass = options.crossEntropyOnePass;
  lowering.layerNormGradOneLaunch = options.layerNormGradOneLaunch;
  lowering.layerNormGradChunkRows = options.layerNormGradChunkRows;
  lowering.blockThreads = options.blockSize;
  std::vector<std::string> names = {"init", "train_step", "forward"};
  // The pipeline always adds @logits (sampling); hand-built modules may not.
  if (module.lookupSymbol<func::FuncOp>("logits"))
    names.push_back("logits");
  // gpt-fp8-steady-step's first step, where the runtime finds it.
  if (module.lookupSymbol<func::FuncOp>("train_step_first"))
    names.push_back("train_step_first");
  FailureOr<Lowered> lowered = lowerPrograms(module, names, lowering);
  if (failed(lowered))
    return failure();
  // The grid's x dimension is 32-bit (and CUDA's limit 2^31-1): a larger
  // launch would be stored truncated.
  for (const ProgramInfo &p : lowered->programs)
    for (const Command &c : p.commands)
      if (c.kind == Command::Launch &&
          (c.threads + options.blockSize - 1) / options.blockSize > (int64_t(1) << 31) - 1)
        return module.emitError("codegen: @")
               << p.name << " launches " << lowered->kernels[c.kernel].name << " over "
               << c.threads << " threads, more than 2^31-1 blocks of " << options.blockSize;
  auto stage = [&](llvm::StringRef name) {
    if (options.onStage)
      options.onStage(name);
  };
  stage("codegen: lower programs");
  // commands.txt names values and ops as the last IR dump does, so that a
  // reader can go from a command to its op: the operands by their SSA
  // names (parameters, state and inputs by name), and each line ends with
  // how its op's line starts there ("%12 = gpt.linear"). Names, not
  // locations: the dumps print no locations by default, and an op's
  // location (a line of the model file) is shared by every layer's copy
  // and by the gradient ops built from it. The last dump printed this very
  // module (codegen changes nothing in it), and an AsmState of the whole
  // module with the default printing flags numbers its values as that
  // op->print did: per function, so that a program's names do not depend
  // on the others.
  dump(options, "commands.txt", [&](llvm::raw_ostream &os) {
    AsmState state(module);
    auto ssaName = [&](Value v) {
      std::string s;
      llvm::raw_string_ostream vs(s);
      v.printAsOperand(vs, state);
      return s;
    };
    auto name = [&](const Operand &o) -> std::string {
      if (o.kind != Operand::Tensor)
        return "scratch+" + std::to_string(o.scratch);
      const TensorInfo &t = lowered->tensors[o.tensor];
      std::string shape;
      for (int64_t d : t.shape)
        shape += (shape.empty() ? "" : "x") + std::to_string(d);
      std::string label = t.name;
      if (o.value && llvm::isa<OpResult>(o.value))
        label = ssaName(o.value);
      else if (!o.value && llvm::StringRef(t.name).starts_with("%"))
        label = "tensor#" + std::to_string(o.tensor); // no SSA name to give
      return label + "<" + shape + ">@" + t.pool + "+" + std::to_string(t.offset);
    };
    // "%5 = gpt.embed", "%7:3 = gpt.fusion", "%result, %lse =
    // gpt.causal_attention": result groups as the printer writes them.
    auto opLine = [&](const Command &c) -> std::string {
      Operation *op = c.source;
      if (!op)
        return c.op;
      std::string line;
      for (unsigned i = 0, e = op->getNumResults(); i < e;) {
        std::string group = ssaName(op->getResult(i));
        unsigned n = 1;
        if (size_t hash = group.find('#'); hash != std::string::npos) {
          group.resize(hash);
          while (i + n < e &&
                 llvm::StringRef(ssaName(op->getResult(i + n))).starts_with(group + "#"))
            ++n;
          group += ":" + std::to_string(n);
        }
        line += (i ? ", " : "") + group;
        i += n;
      }
      return line + (line.empty() ? "" : " = ") + op->getName().getStringRef().str();
    };
    os << "// Commands of each program. Values are named as in the last NN-*.mlir dump:\n"
          "// %12<shape>@pool+offset is @program's %12 there (parameters, state and inputs\n"
          "// by name; tensor#N: the executable's tensor N), and each line ends with how\n"
          "// its op's line starts there.\n";
    for (const ProgramInfo &p : lowered->programs) {
      os << "program " << p.name << "\n";
      for (auto [i, c] : llvm::enumerate(p.commands)) {
        static const char *kinds[] = {"launch",         "gemm",       "zero",      "copy",
                                      "all_reduce",     "record",     "wait",      "reduce_scatter",
                                      "all_gather",     "rank_slice"};
        os << llvm::format("  %4d ", static_cast<int>(i));
        if (c.stream != kComputeStream)
          os << "[comm] ";
        os << kinds[c.kind] << " ";
        if (c.kind == Command::Record || c.kind == Command::Wait)
          os << "event " << c.event;
        if (c.kind == Command::AllReduce || c.kind == Command::ReduceScatter)
          os << (c.reduce == Command::Max ? "max" : c.reduce == Command::Mean ? "mean" : "sum");
        if (c.kind == Command::Launch)
          os << lowered->kernels[c.kernel].name << " threads=" << c.threads;
        if (c.kind == Command::Gemm) {
          const GemmDesc &g = lowered->gemms[c.gemm];
          os << "m=" << g.m << " n=" << g.n << " k=" << g.k << " batch=" << g.batch
             << (g.transa ? " T" : " N") << (g.transb ? "T" : "N") << " " << g.aType << "x"
             << g.bType << "->" << g.cType;
          if (g.dType)
            os << " d=" << g.dType;
          if (g.epilogue != GemmEpilogue::None)
            os << " epilogue=" << s::EnumNameEpilogue(schemaEpilogue(g.epilogue));
          if (g.fastAccum)
            os << " fast_accum";
          if (g.beta != 0)
            os << " beta=" << g.beta;
        }
        for (const Operand &o : c.args)
          os << " " << name(o);
        os << "   // " << opLine(c) << "\n";
      }
    }
  });
  bool host = options.target == EmitOptions::Target::Host;
  CompiledKernels compiled;
  std::vector<uint8_t> hostObject;
  if (host) {
    FailureOr<std::vector<uint8_t>> so = compileHostKernels(ctx, *lowered, options.dumpDir);
    if (failed(so))
      return failure();
    hostObject = std::move(*so);
  } else {
    OwningOpRef<ModuleOp> kernels = buildGpuKernels(ctx, *lowered, options, features);
    FailureOr<CompiledKernels> cuda = compileGpuKernels(*kernels, options);
    if (failed(cuda))
      return failure();
    compiled = std::move(*cuda);
  }
  stage(host ? "codegen: host object" : "codegen: PTX + cubin");

  fb::FlatBufferBuilder b;
  // Pools.
  std::vector<std::string> poolNames = {"params", "state", "inputs", "activations", "workspace"};
  std::vector<fb::Offset<s::Pool>> pools;
  std::map<std::string, uint32_t> poolIndex;
  for (const std::string &p : poolNames) {
    poolIndex[p] = pools.size();
    uint64_t bytes = lowered->poolBytes.count(p) ? lowered->poolBytes.at(p) : 0;
    pools.push_back(s::CreatePool(b, b.CreateString(p), std::max<uint64_t>(bytes, 256)));
  }
  // Tensors, plus one per scratch operand.
  std::vector<fb::Offset<s::Tensor>> tensors;
  auto addTensor = [&](const std::string &name, s::TensorRole role, s::DType dt,
                       const std::vector<int64_t> &shape, const std::string &pool,
                       uint64_t offset, uint64_t bytes, uint32_t first, uint32_t last,
                       uint32_t shards = 0, const std::vector<int64_t> &fullShape = {}) {
    tensors.push_back(s::CreateTensor(b, b.CreateString(name), role, dt, b.CreateVector(shape),
                                      poolIndex.at(pool), offset, bytes, first, last, shards,
                                      shards ? b.CreateVector(fullShape) : 0));
    return static_cast<uint32_t>(tensors.size() - 1);
  };
  // Lifetimes: the first and last command of its program that names the
  // tensor (parameters and state are live throughout).
  std::vector<std::pair<uint32_t, uint32_t>> life(lowered->tensors.size(), {~0u, 0u});
  for (const ProgramInfo &p : lowered->programs)
    for (auto [i, c] : llvm::enumerate(p.commands))
      for (const Operand &o : c.args)
        if (o.kind == Operand::Tensor) {
          auto &[first, last] = life[o.tensor];
          first = std::min<uint32_t>(first, i);
          last = std::max<uint32_t>(last, i);
        }
  for (auto [i, t] : llvm::enumerate(lowered->tensors)) {
    auto [first, last] = life[i];
    if (t.role == "params" || t.role == "state" || first > last)
      first = 0, last = ~0u;
    addTensor(t.name, roleOf(t.role), dtypeOf(t.elementType), t.shape, t.pool, t.offset, t.bytes,
              first, last, static_cast<uint32_t>(t.shards), t.fullShape);
  }

  auto operandTensor = [&](const Operand &o) -> uint32_t {
    if (o.kind == Operand::Tensor)
      return static_cast<uint32_t>(o.tensor);
    return addTensor("scratch", s::TensorRole::Workspace, s::DType::F32, {o.bytes / 4},
                     "workspace", o.scratch, o.bytes / 4 * 4, 0, ~0u);
  };
  // The kernels of one module share its cubin (stored once): each Kernel
  // entry names its function.
  std::vector<fb::Offset<s::Kernel>> kernelDefs;
  std::vector<fb::Offset<fb::Vector<uint8_t>>> cubins;
  std::vector<fb::Offset<fb::String>> ptxs;
  for (const CompiledPart &part : compiled) {
    cubins.push_back(b.CreateVector(part.cubin));
    ptxs.push_back(b.CreateString(part.ptx));
  }
  bool waits = !host && waitsForPriorGrids(options);
  for (auto [index, k] : llvm::enumerate(lowered->kernels)) {
    // The extent each pointer argument is compiled for (flat static memrefs).
    std::vector<uint64_t> argBytes;
    for (Type t : k.argTypes) {
      auto mem = llvm::dyn_cast<MemRefType>(t);
      argBytes.push_back(mem && mem.hasStaticShape()
                             ? uint64_t(mem.getNumElements()) *
                                   std::max<uint64_t>(mem.getElementTypeBitWidth() / 8, 1)
                             : 0);
    }
    kernelDefs.push_back(s::CreateKernel(b, b.CreateString(k.name),
                                         host ? 0 : cubins[partOf(index)],
                                         host ? 0 : ptxs[partOf(index)],
                                         host ? b.CreateString(k.name) : 0,
                                         static_cast<uint32_t>(k.argTypes.size()), waits,
                                         b.CreateVector(argBytes)));
  }
  auto hostBytes = host ? b.CreateVector(hostObject) : fb::Offset<fb::Vector<uint8_t>>();
  std::vector<fb::Offset<s::Gemm>> gemms;
  for (const GemmDesc &g : lowered->gemms)
    gemms.push_back(s::CreateGemm(b, g.m, g.n, g.k, g.batch, g.transa, g.transb, g.lda, g.ldb,
                                  g.ldc, g.strideA, g.strideB, g.strideC, dtypeOf(g.aType),
                                  dtypeOf(g.bType), dtypeOf(g.cType), s::ComputeType::F32,
                                  schemaEpilogue(g.epilogue), /*alpha=*/1.0, g.beta,
                                  g.fastAccum,
                                  g.dType ? fb::Optional<s::DType>(dtypeOf(g.dType))
                                          : fb::Optional<s::DType>(fb::nullopt)));
  std::vector<fb::Offset<s::Program>> programs;
  for (const ProgramInfo &p : lowered->programs) {
    std::vector<fb::Offset<s::Command>> cmds;
    for (const Command &c : p.commands) {
      switch (c.kind) {
      case Command::Launch: {
        std::vector<fb::Offset<void>> args;
        std::vector<s::Arg> types;
        for (const Operand &o : c.args) {
          args.push_back(s::CreateTensorArg(b, operandTensor(o)).Union());
          types.push_back(s::Arg::TensorArg);
        }
        uint32_t blocks = static_cast<uint32_t>((c.threads + options.blockSize - 1) / options.blockSize);
        std::vector<uint32_t> grid = {blocks, 1, 1};
        std::vector<uint32_t> block = {static_cast<uint32_t>(options.blockSize), 1, 1};
        auto shared = static_cast<uint32_t>(lowered->kernels[c.kernel].sharedBytes);
        auto launch = s::CreateLaunchKernel(b, c.kernel, b.CreateVector(grid),
                                            b.CreateVector(block), shared, b.CreateVector(types),
                                            b.CreateVector(args));
        cmds.push_back(s::CreateCommand(b, 0, s::Op::LaunchKernel, launch.Union()));
        break;
      }
      case Command::Gemm: {
        GemmEpilogue e = lowered->gemms[c.gemm].epilogue;
        size_t next = 3;
        int64_t bias = -1, aux = -1;
        if (epilogueHasBias(e))
          bias = static_cast<int64_t>(operandTensor(c.args[next++]));
        if (epilogueHasAux(e))
          aux = static_cast<int64_t>(operandTensor(c.args[next++]));
        int64_t aScale = -1, bScale = -1;
        if (llvm::isa<Float8E4M3FNType, Float8E5M2Type>(lowered->gemms[c.gemm].aType)) {
          aScale = static_cast<int64_t>(operandTensor(c.args[next++]));
          bScale = static_cast<int64_t>(operandTensor(c.args[next++]));
        }
        int64_t dScale = -1, amaxD = -1;
        if (lowered->gemms[c.gemm].dType) {
          dScale = static_cast<int64_t>(operandTensor(c.args[next++]));
          amaxD = static_cast<int64_t>(operandTensor(c.args[next++]));
        }
        auto gemm = s::CreateRunGemm(b, c.gemm, operandTensor(c.args[0]), operandTensor(c.args[1]),
                                     operandTensor(c.args[2]), bias, aux, aScale, bScale, dScale,
                                     amaxD);
        cmds.push_back(s::CreateCommand(b, 0, s::Op::RunGemm, gemm.Union()));
        break;
      }
      case Command::Zero: {
        auto memset = s::CreateMemset(b, operandTensor(c.args[0]), 0);
        cmds.push_back(s::CreateCommand(b, 0, s::Op::Memset, memset.Union()));
        break;
      }
      case Command::Copy: {
        auto copy = s::CreateCopy(b, operandTensor(c.args[0]), operandTensor(c.args[1]));
        cmds.push_back(s::CreateCommand(b, c.stream, s::Op::Copy, copy.Union()));
        break;
      }
      case Command::AllReduce: {
        std::vector<uint32_t> ts;
        for (const Operand &o : c.args)
          ts.push_back(operandTensor(o));
        s::ReduceOp op = c.reduce == Command::Max    ? s::ReduceOp::Max
                         : c.reduce == Command::Mean ? s::ReduceOp::Avg
                                                     : s::ReduceOp::Sum;
        auto reduce = s::CreateAllReduce(b, b.CreateVector(ts), op);
        cmds.push_back(s::CreateCommand(b, c.stream, s::Op::AllReduce, reduce.Union()));
        break;
      }
      case Command::ReduceScatter:
      case Command::AllGather:
      case Command::RankSlice: {
        std::vector<uint32_t> src, dst;
        size_t n = c.args.size() / 2;
        for (size_t i = 0; i < c.args.size(); ++i)
          (i < n ? src : dst).push_back(operandTensor(c.args[i]));
        s::ShardKind kind = c.kind == Command::ReduceScatter ? s::ShardKind::ReduceScatter
                            : c.kind == Command::AllGather   ? s::ShardKind::AllGather
                                                             : s::ShardKind::RankSlice;
        auto shard = s::CreateShard(b, kind, b.CreateVector(src), b.CreateVector(dst),
                                    s::ReduceOp::Avg);
        cmds.push_back(s::CreateCommand(b, c.stream, s::Op::Shard, shard.Union()));
        break;
      }
      case Command::Record:
        cmds.push_back(s::CreateCommand(b, c.stream, s::Op::RecordEvent,
                                        s::CreateRecordEvent(b, c.event).Union()));
        break;
      case Command::Wait:
        cmds.push_back(s::CreateCommand(b, c.stream, s::Op::WaitEvent,
                                        s::CreateWaitEvent(b, c.event).Union()));
        break;
      }
    }
    std::vector<uint32_t> ins(p.inputs.begin(), p.inputs.end()), outs(p.outputs.begin(), p.outputs.end());
    programs.push_back(s::CreateProgram(
        b, b.CreateString(p.name), b.CreateVector(ins), b.CreateVector(outs),
        b.CreateVector(cmds), p.liveAtPeak.empty() ? 0 : b.CreateString(p.liveAtPeak)));
  }
  // Model metadata.
  std::vector<fb::Offset<s::KeyValue>> config;
  std::string modelName;
  if (auto cfg = module->getAttrOfType<DictionaryAttr>("gpt.config"))
    for (NamedAttribute e : cfg) {
      if (auto i = llvm::dyn_cast<IntegerAttr>(e.getValue()))
        config.push_back(s::CreateKeyValue(b, b.CreateString(e.getName().str()), i.getInt()));
      else if (auto str = llvm::dyn_cast<StringAttr>(e.getValue()))
        modelName = str.str();
    }
  int64_t params = 0;
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
    if (auto n = fwd->getAttrOfType<IntegerAttr>("gpt.num_parameters"))
      params = n.getInt();
  std::vector<fb::Offset<s::Hyperparameter>> optimizer;
  if (auto opt = module->getAttrOfType<DictionaryAttr>("gpt.optimizer"))
    for (NamedAttribute e : opt)
      if (auto f = llvm::dyn_cast<FloatAttr>(e.getValue()))
        optimizer.push_back(s::CreateHyperparameter(b, b.CreateString(e.getName().str()),
                                                    f.getValueAsDouble()));
  fb::Offset<fb::String> precision;
  if (auto p = module->getAttrOfType<StringAttr>("gpt.precision"))
    precision = b.CreateString(p.getValue().str());
  auto model = s::CreateModel(b, b.CreateString(modelName), b.CreateVector(config), params,
                              b.CreateVector(optimizer), precision);
  auto target = s::CreateTarget(b, host ? s::TargetKind::Host : s::TargetKind::CUDA,
                                b.CreateString(host ? "x86_64" : kernelChip(options, *lowered)));
  fb::Offset<s::Remat> remat;
  if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
    if (auto plan = step->getAttrOfType<DictionaryAttr>("gpt.remat_plan")) {
      auto get = [&](StringRef key) {
        auto v = plan.getAs<IntegerAttr>(key);
        return v ? v.getInt() : int64_t{0};
      };
      remat = s::CreateRemat(b, get("budget"), get("values"), get("ops"), get("peak_before"),
                             get("peak_after"), double(get("step_flops")),
                             double(get("extra_flops")));
    }
  auto exe = s::CreateExecutable(
      b, static_cast<uint32_t>(s::FormatVersion::Current), target, model, b.CreateVector(pools),
      b.CreateVector(tensors), b.CreateVector(kernelDefs), b.CreateVector(gemms),
      b.CreateVector(programs), lowered->numStreams, lowered->numEvents, hostBytes,
      b.CreateString(std::string("gptc ") + gptc::versionString()), remat, kUnsealedChecksum);
  s::FinishExecutableBuffer(b, exe);
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  if (gptc::Status sealed = sealExecutable(bytes); !sealed)
    return module.emitError("codegen: ") << sealed.message();
  // The loader refuses a racy schedule too; failing here blames gptc.
  if (gptc::Status ordered = checkSchedule(*s::GetExecutable(bytes.data())); !ordered)
    return module.emitError("codegen: internal error, the streams race: ") << ordered.message();
  stage("codegen: serialize");
  return bytes;
}

} // namespace gptc::codegen
