//===- HostTarget.cpp - index-space kernels -> a host shared object ------===//
//
/// 1) Each kernel becomes `@<name>_impl(lo, hi, memrefs...)` looping its
///    body over the indices [lo, min(hi, threads)), with the loads and
///    arithmetic that do not depend on the index hoisted out of the loop;
///    `@<name>(argv, grid, block)` runs every index, as the Host ABI says
///    (argv[i] points to a tensor pointer), and `@<name>_range(argv, begin,
///    end)` the indices [begin, end), so the runtime can split a launch over
///    threads (indices write disjoint outputs, as CUDA threads do).
/// 2) MLIR lowers them to the LLVM dialect (bare-pointer memrefs), LLVM
///    optimises at O2 and emits an object for this machine.
/// 3) ld.lld links the object into a shared object, returned as bytes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/HostTarget.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

namespace gptc::codegen {

namespace {

/// Moves out of `loop` the loads at its top level whose indices do not
/// depend on the index and that come before anything the body writes: as
/// on CUDA, no index writes what every index reads (a race there), so they
/// read the same value for every index (AdamW's step, for one). Their users
/// may then follow (moveLoopInvariantCode): AdamW's two pow() per element
/// become two per launch.
void hoistInvariantLoads(scf::ForOp loop) {
  SmallVector<Operation *> loads;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (llvm::all_of(load->getOperands(),
                       [&](Value v) { return loop.isDefinedOutsideOfLoop(v); }))
        loads.push_back(load);
      continue;
    }
    if (!isMemoryEffectFree(&op))
      break; // it may write; what follows may read what it wrote
  }
  for (Operation *load : loads)
    load->moveBefore(loop);
}

OwningOpRef<ModuleOp> buildHostKernels(MLIRContext *ctx, const Lowered &lowered) {
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  for (const KernelDef &k : lowered.kernels) {
    int64_t threads = 0;
    for (const ProgramInfo &p : lowered.programs)
      for (const Command &c : p.commands)
        if (c.kind == Command::Launch && &lowered.kernels[c.kernel] == &k)
          threads = c.threads;
    SmallVector<Type> argTypes = {b.getIndexType(), b.getIndexType()};
    argTypes.append(k.argTypes.begin(), k.argTypes.end());
    auto fn = func::FuncOp::create(b, loc, k.name + "_impl", b.getFunctionType(argTypes, {}));
    OpBuilder::InsertionGuard g(b);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value n = arith::ConstantIndexOp::create(b, loc, threads);
    Value hi = arith::MinUIOp::create(b, loc, entry->getArgument(1), n);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(b, loc, entry->getArgument(0), hi, one);
    b.setInsertionPointToStart(loop.getBody());
    k.body(b, loc, loop.getInductionVar(), entry->getArguments().drop_front(2));
    moveLoopInvariantCode(loop); // the constants first: they index the loads
    hoistInvariantLoads(loop);
    moveLoopInvariantCode(loop);
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(b, loc);
  }
  return module;
}

/// After lowering to LLVM: `@name(argv, grid, block)` and
/// `@name_range(argv, begin, end)` calling `@name_impl`.
void addEntryPoints(ModuleOp module, const Lowered &lowered) {
  OpBuilder b(module.getContext());
  Location loc = b.getUnknownLoc();
  b.setInsertionPointToEnd(module.getBody());
  auto ptr = LLVM::LLVMPointerType::get(module.getContext());
  auto voidTy = LLVM::LLVMVoidType::get(module.getContext());
  auto i64 = b.getI64Type();
  for (const KernelDef &k : lowered.kernels) {
    auto impl = module.lookupSymbol<LLVM::LLVMFuncOp>(k.name + "_impl");
    // `name` runs [0, 2^63) (the impl stops at its thread count), and
    // `name_range` the range it is given.
    for (bool range : {false, true}) {
      auto fn = LLVM::LLVMFuncOp::create(
          b, loc, range ? k.name + "_range" : k.name,
          LLVM::LLVMFunctionType::get(voidTy, {ptr, range ? Type(i64) : ptr, range ? Type(i64) : ptr}));
      OpBuilder::InsertionGuard g(b);
      Block *entry = fn.addEntryBlock(b);
      b.setInsertionPointToStart(entry);
      SmallVector<Value> args;
      if (range) {
        args = {entry->getArgument(1), entry->getArgument(2)};
      } else {
        args.push_back(LLVM::ConstantOp::create(b, loc, i64, 0));
        args.push_back(LLVM::ConstantOp::create(b, loc, i64, INT64_MAX));
      }
      for (size_t i = 0; i < k.argTypes.size(); ++i) {
        Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, entry->getArgument(0),
                                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        Value valuePtr = LLVM::LoadOp::create(b, loc, ptr, slot);
        args.push_back(LLVM::LoadOp::create(b, loc, ptr, valuePtr));
      }
      LLVM::CallOp::create(b, loc, impl, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});
    }
  }
}

} // namespace

FailureOr<std::vector<uint8_t>> compileHostKernels(MLIRContext *ctx, const Lowered &lowered,
                                                   const std::string &dumpDir) {
  OwningOpRef<ModuleOp> module = buildHostKernels(ctx, lowered);
  auto dump = [&](const std::string &name, llvm::function_ref<void(llvm::raw_ostream &)> w) {
    if (dumpDir.empty())
      return;
    std::error_code ec;
    llvm::raw_fd_ostream os(dumpDir + "/" + name, ec);
    if (!ec)
      w(os);
  };
  dump("kernels.host.mlir", [&](llvm::raw_ostream &os) { module->print(os); });
  if (failed(module->verify()))
    return failure();

  // bf16 <-> f32 conversions as integer ops (round to nearest even): x86
  // without AVX512-BF16 has no instruction for them, and LLVM would call a
  // libgcc helper that older toolchains lack.
  RewritePatternSet bf16(ctx);
  arith::populateExpandBFloat16Patterns(bf16);
  if (failed(applyPatternsGreedily(*module, std::move(bf16))))
    return failure();

  PassManager pm(ctx);
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLibmPass()); // tanh & co. become libm calls
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(*module)))
    return failure();
  addEntryPoints(*module, lowered);
  dump("kernels.host.llvm.mlir", [&](llvm::raw_ostream &os) { module->print(os); });

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmCtx);
  if (!llvmModule)
    return module->emitError("codegen: host kernels do not translate to LLVM IR");
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module->emitError("codegen: no LLVM target for ") << triple.str() << ": " << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Default));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  if (llvm::Error err = makeOptimizingTransformer(2, 0, machine.get())(llvmModule.get()))
    return module->emitError("codegen: LLVM optimisation failed: ")
           << llvm::toString(std::move(err));
  dump("kernels.host.ll", [&](llvm::raw_ostream &os) { llvmModule->print(os, nullptr); });

  SmallString<128> objPath, soPath;
  int objFd;
  if (llvm::sys::fs::createTemporaryFile("gptc-kernels", "o", objFd, objPath) ||
      llvm::sys::fs::createTemporaryFile("gptc-kernels", "so", soPath))
    return module->emitError("codegen: cannot create temporary files");
  {
    llvm::raw_fd_ostream os(objFd, /*shouldClose=*/true);
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      return module->emitError("codegen: this LLVM cannot emit host objects");
    codegen.run(*llvmModule);
  }
  auto lld = llvm::sys::findProgramByName("ld.lld");
  if (!lld)
    return module->emitError("codegen: ld.lld not found (Debian package lld)");
  std::string objArg = objPath.str().str(), soArg = soPath.str().str();
  // libm for expf, tanhf & co.: the object records it as a dependency.
  llvm::StringRef argv[] = {*lld,     "-shared", "-o", soArg, objArg,
                            "-L/usr/lib/x86_64-linux-gnu", "-L/lib/x86_64-linux-gnu", "-lm"};
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(*lld, argv, std::nullopt, {}, 0, 0, &linkError);
  llvm::sys::fs::remove(objPath);
  if (rc != 0) {
    llvm::sys::fs::remove(soPath);
    return module->emitError("codegen: linking host kernels failed: ") << linkError;
  }
  auto so = llvm::MemoryBuffer::getFile(soPath);
  llvm::sys::fs::remove(soPath);
  if (!so)
    return module->emitError("codegen: cannot read the linked host kernels");
  return std::vector<uint8_t>((*so)->getBufferStart(), (*so)->getBufferEnd());
}

} // namespace gptc::codegen
