//===- FlashAttention.h - tensor-core causal attention, sm_80+ / sm_90a ---===//
//
// Flash attention as warp-level index-space kernels: each warp owns a tile
// of 16 query rows (forward, dQ) or 16 key rows (dK/dV) of one (batch,
// head), walks the other side in tiles of 16 with bf16 mma.sync (m16n8k16,
// fp32 accumulation) and keeps the softmax online, so no (T, T) matrix is
// ever stored. On sm_90 the blocked kernels multiply on warpgroup MMA
// (wgmma) instead. The kernels are CUDA-only (NVVM ops); the Host target keeps
// the scalar kernels of Lowering.cpp, which are the reference these are
// checked against.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_FLASHATTENTION_H
#define GPTC_COMPILER_CODEGEN_FLASHATTENTION_H

#include "mlir/IR/Builders.h"

namespace gptc::codegen {

struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, headDim = 0;
  double scale = 1.0;       // 1 / sqrt(headDim)
  int64_t blockThreads = 0; // threads per block of the launches
  /// sm_90a: the blocked kernels multiply on Hopper's warpgroup tensor
  /// cores (wgmma, B operands read from shared memory) instead of
  /// mma.sync; see flashAttentionWarpgroup.
  bool warpgroupMma = false;
  /// The backward kernels also store the column sums of each 16-row tile
  /// of dq, dk and dv (the qkv bias gradient's partials) to args[6], a
  /// (B T / 16, 3C) f32 matrix.
  bool columnSums = false;
};

/// bf16 operands, a head dimension and a sequence length that are
/// multiples of 16: the shapes the mma tiles cover exactly.
bool flashAttentionApplies(const AttentionShape &s, mlir::Type element);

/// 256-thread blocks, T a multiple of 128 and a head dimension of 32 or 64:
/// the kernels stage keys/values (or queries/output gradients) through
/// shared memory, 64 rows at a time, for a block of 8 warps.
bool flashAttentionBlocked(const AttentionShape &s);

/// The blocked kernels on warpgroup MMA: s.warpgroupMma and a blocked
/// shape. Their kernel module must be compiled for sm_90a.
bool flashAttentionWarpgroup(const AttentionShape &s);

/// Threads of every flash launch: one warp per 16-row tile.
int64_t flashAttentionThreads(const AttentionShape &s);

enum class FlashKernel { Forward, BackwardQuery, BackwardKeyValue };
/// Blocks per SM to ask ptxas for (KernelDef::minBlocksPerSM). The blocked
/// forward and dQ kernels wait at two barriers per stage, which a second
/// resident block hides, and they need about 130 registers uncapped: 2
/// caps them at 128. The dK/dV kernel holds two accumulators and would
/// spill; 0.
int64_t flashAttentionMinBlocks(const AttentionShape &s, FlashKernel kernel);

/// Dynamic shared memory of a kernel's launches (KernelDef::sharedBytes):
/// the staging buffers of the blocked kernels, 0 for the others.
int64_t flashAttentionSharedBytes(const AttentionShape &s, FlashKernel kernel);

/// args: qkv (B, T, 3C), y (B, T, C), lse (B, H, T, f32).
void buildFlashAttentionForward(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                                mlir::ValueRange args, const AttentionShape &s);
/// args: dy (B, T, C), qkv, stats (B*H*T x {-lse log2 e, D}, f32), dqkv
/// (B, T, 3C), y (B, T, C) and lse (B, H, T) of the forward. Writes the row
/// statistics (from lse, and D = dy . y) and the q third of dqkv.
void buildFlashAttentionBackwardQuery(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                                      mlir::ValueRange args, const AttentionShape &s);
/// The same arguments; reads the statistics, writes the k and v thirds.
void buildFlashAttentionBackwardKeyValue(mlir::OpBuilder &b, mlir::Location loc,
                                         mlir::Value idx, mlir::ValueRange args,
                                         const AttentionShape &s);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_FLASHATTENTION_H
