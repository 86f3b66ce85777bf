//===- Lowering.h - planned gpt programs -> kernels, GEMMs, commands -----===//
//
// Codegen turns each planned program (@train_step, @init, @forward) into a
// list of commands over the tensors of the memory plan:
//   - gpt.matmul / gpt.linear become cuBLASLt GEMM descriptors, and
//     gpt.scaled_matmul FP8 ones with their scale tensors;
//   - views (gpt.reshape, outer gpt.slice) become nothing;
//   - gpt.all_reduce becomes an AllReduce on the communication stream,
//     after an event of the compute stream; the compute stream waits for
//     its done-event right before the first command reading its results;
//   - every other op becomes one or more index-space kernels: a body run
//     for each index in [0, threads), built with arith/math/scf/memref ops
//     on flat 1-D memrefs. The same body becomes a gpu.func (CUDA) or a
//     host loop (Host), so both targets compute the same thing.
// Kernels with the same op, types and attributes are built once. The data
// types of the result are in Program.h; the lowerings themselves in
// Kernels/<Family>.cpp (README.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_LOWERING_H
#define GPTC_COMPILER_CODEGEN_LOWERING_H

#include "compiler/Codegen/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace gptc::codegen {

/// Kernel choices that depend on the target.
struct LoweringOptions {
  /// Tensor-core flash attention (FlashAttention.h) where it applies; CUDA
  /// only. Otherwise the scalar kernels, which both targets can run.
  bool flashAttention = false;
  /// The blocked flash kernels on sm_90a's warpgroup MMA (wgmma); the
  /// kernel module must then be compiled for sm_90a (Lowered::sm90a).
  bool warpgroupMma = false;
  /// Threads per row of the row kernels (layernorm, softmax, cross-entropy
  /// statistics): 32, a warp reducing with shuffles, on CUDA; 1 on Host.
  int64_t rowLanes = 1;
  /// Vector loads and stores (several elements at once) in the column
  /// reductions and the fused AdamW; CUDA only: the Host lowering has no
  /// vector dialect conversion.
  bool vectorAccess = false;
  /// Cross-entropy as one online-softmax row launch forward that saves
  /// each row's log-sum-exp, and one backward launch that reads it
  /// (LossLowering.h). Otherwise separate statistics and gradient kernels.
  bool fusedCrossEntropy = true;
  /// With fusedCrossEntropy and vectorAccess (CUDA): the forward's launch
  /// also writes the gradient over the logits when nothing else reads
  /// them, reading each row from global memory once
  /// (buildCrossEntropyOnePass).
  bool crossEntropyOnePass = true;
  /// gpt.layernorm_grad's rows kernel also folds dweight and dbias over
  /// layerNormGradChunkRows rows per warp into partials, so the columns are
  /// not read a second time; CUDA, where a lane's columns fit in registers
  /// and the warps' sums in shared memory. Otherwise a column reduction of
  /// its own (with the same chunk, in the same order: the same bits).
  bool layerNormGradOneLaunch = true;
  /// Rows of one partial of dweight and dbias (a warp's rows when fused);
  /// 0: with layerNormGradOneLaunch about a wave of warps (4 to 64 rows),
  /// else 64 (reduceColumns').
  int64_t layerNormGradChunkRows = 0;
  /// The CUDA chip's compute capability times ten (90 for sm_90); 0 for the
  /// Host target. sm_89 and later convert to FP8 in hardware and run FP8
  /// GEMMs.
  int64_t cudaArch = 0;
  /// Threads per block of every launch (EmitOptions::blockSize).
  int64_t blockThreads = 256;
};

/// Lowers the planned functions `programs` of `module` (gpt-plan-memory
/// must have run on each). Errors are emitted at the offending op.
mlir::FailureOr<Lowered> lowerPrograms(mlir::ModuleOp module,
                                       llvm::ArrayRef<std::string> programs,
                                       const LoweringOptions &options = {});

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_LOWERING_H
