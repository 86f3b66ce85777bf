//===- LossLowering.h - fused softmax cross-entropy kernels --------------===//
//
// The cross-entropy of (rows, Vp) logits in one pass per direction:
//   - forward: one row launch keeps a running (max, sum of exp) over the
//     row (online softmax), writes the row's loss and saves its
//     log-sum-exp; a one-thread launch takes the mean of the losses;
//   - backward: one row launch writes
//     dlogits = (exp(logit - lse) - onehot) * dloss / rows straight from the
//     logits and the saved log-sum-exp (padding columns get 0), so neither
//     the probabilities nor a second statistics pass ever exist.
// Rows are shared by `lanes` threads as in Lowering.cpp's row kernels (a
// warp with butterfly shuffles on CUDA, one thread on Host).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_LOSSLOWERING_H
#define GPTC_COMPILER_CODEGEN_LOSSLOWERING_H

#include "mlir/IR/Builders.h"

namespace gptc::codegen {

struct CrossEntropyShape {
  int64_t rows = 0, vocab = 0, paddedVocab = 0, lanes = 1;
  int64_t threads() const { return rows * lanes; }
};

/// args: logits (rows x Vp), targets (rows, i32), losses (rows, f32),
/// lse (rows, f32).
void buildCrossEntropyForwardRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                                  mlir::ValueRange args, const CrossEntropyShape &s);

/// How a kernel stores dlogits: in their tensor's type, or with `fp8` as
/// the e5m2 codes of gpt.fp8_cross_entropy_grad (an i8 tensor) at the
/// scale of their bound |dloss| / rows, the inverse scale into one more
/// argument (f32 scalar, the last). `cvt`: the codes from cvt instructions
/// (CUDA, sm_89+).
struct GradStore {
  bool fp8 = false, cvt = false;
};

/// args: dloss (f32 scalar), logits, targets, dlogits, then lse (rows, f32)
/// when `savedLse`; without it the row's log-sum-exp is computed online
/// first, in the same launch.
void buildCrossEntropyBackwardRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                                   mlir::ValueRange args, const CrossEntropyShape &s,
                                   bool savedLse, GradStore store = {});

/// The forward and the gradient in one launch, one block (blockThreads
/// threads) per row, on CUDA: the row is copied into shared memory once
/// (cp.async), its log-sum-exp reduced across the block in a fixed order,
/// then the row's loss written and its gradient computed from the staged
/// row. The logits are read from global memory once instead of twice, and
/// the gradient may overwrite them. args: logits (rows x Vp, 16-bit),
/// targets (rows, i32), dloss (f32 scalar), losses (rows, f32), dlogits
/// (rows x Vp).
void buildCrossEntropyOnePass(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                              mlir::ValueRange args, const CrossEntropyShape &s,
                              int64_t blockThreads, GradStore store = {});
/// Its dynamic shared memory: the row and each warp's (max, sum).
int64_t crossEntropyOnePassSharedBytes(const CrossEntropyShape &s, int64_t blockThreads);
/// 16-bit logits whose padded rows are whole 16-byte vectors and fit in
/// the shared memory every CUDA chip from sm_80 on gives a block.
bool crossEntropyOnePassApplies(const CrossEntropyShape &s, mlir::Type logits,
                                int64_t blockThreads);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_LOSSLOWERING_H
