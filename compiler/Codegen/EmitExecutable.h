//===- EmitExecutable.h - lowered programs -> step.fb --------------------===//

#ifndef GPTC_COMPILER_CODEGEN_EMITEXECUTABLE_H
#define GPTC_COMPILER_CODEGEN_EMITEXECUTABLE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gptc::codegen {

struct EmitOptions {
  enum class Target { CUDA, Host } target = Target::CUDA;
  std::string chip = "sm_90";
  /// LLVM's PTX feature for the kernels ("+ptx80"); empty: the least PTX
  /// ISA version that `chip` needs (cudaPtxFeature).
  std::string features;
  std::string toolkit = "/usr/local/cuda"; // ptxas and libdevice
  std::string dumpDir;                     // kernels' IR and PTX, if set
  int blockSize = 256;
  bool flashAttention = true; // CUDA: tensor-core attention where it applies
  /// chip sm_90: the blocked flash kernels on Hopper's warpgroup MMA
  /// (wgmma), which compiles the kernel module for sm_90a.
  bool warpgroupMma = true;
  bool fuseCrossEntropy = true; // LoweringOptions::fusedCrossEntropy
  bool crossEntropyOnePass = true; // LoweringOptions::crossEntropyOnePass
  bool layerNormGradOneLaunch = true; // LoweringOptions::layerNormGradOneLaunch
  int64_t layerNormGradChunkRows = 0; // LoweringOptions::layerNormGradChunkRows
  /// Called after each codegen stage (lowering, kernels, serialize), for
  /// a compile's progress display.
  std::function<void(llvm::StringRef stage)> onStage;
};

/// The PTX ISA version (LLVM's feature, e.g. "+ptx80") gptc writes the
/// kernels of CUDA chip `chip` in, or why gptc cannot compile for it: the
/// kernels need sm_80's bf16 tensor cores and cp.async, and LLVM a PTX
/// version that knows the chip.
llvm::Expected<std::string> cudaPtxFeature(llvm::StringRef chip);

/// The compute capability of chip "sm_MN[a]" times ten (sm_90a -> 90,
/// sm_120 -> 120), or 0 if `chip` does not name one.
int64_t cudaComputeCapability(llvm::StringRef chip);

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
