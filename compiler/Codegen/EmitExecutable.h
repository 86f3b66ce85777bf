//===- EmitExecutable.h - lowered programs -> step.fb --------------------===//

#ifndef GPTC_COMPILER_CODEGEN_EMITEXECUTABLE_H
#define GPTC_COMPILER_CODEGEN_EMITEXECUTABLE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gptc::codegen {

struct EmitOptions {
  enum class Target { CUDA, Host } target = Target::CUDA;
  std::string chip = "sm_90";
  std::string features = "+ptx80";
  std::string toolkit = "/usr/local/cuda"; // ptxas and libdevice
  std::string dumpDir;                     // kernels' IR and PTX, if set
  int blockSize = 256;
  bool flashAttention = true; // CUDA: tensor-core attention where it applies
  /// chip sm_90: the blocked flash kernels on Hopper's warpgroup MMA
  /// (wgmma), which compiles the kernel module for sm_90a.
  bool warpgroupMma = true;
  bool fuseCrossEntropy = true; // LoweringOptions::fusedCrossEntropy
  bool crossEntropyOnePass = true; // LoweringOptions::crossEntropyOnePass
  /// Called after each codegen stage (lowering, kernels, serialize), for
  /// a compile's progress display.
  std::function<void(llvm::StringRef stage)> onStage;
};

/// Stages emitExecutable reports through EmitOptions::onStage.
inline constexpr unsigned kEmitStages = 3;

/// Dialects and interfaces the kernel lowering needs (GPU, NVVM, LLVM...).
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// Lowers the planned programs of `module` (init, train_step, forward),
/// compiles their kernels and returns the FlatBuffer executable.
mlir::FailureOr<std::vector<uint8_t>> emitExecutable(mlir::ModuleOp module,
                                                     const EmitOptions &options);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_EMITEXECUTABLE_H
