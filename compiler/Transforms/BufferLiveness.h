//===- BufferLiveness.h - activation buffers and their live intervals -----===//
//
// The liveness analysis of gpt-plan-memory, shared with gpt-rematerialize:
// ops are numbered in program order; every non-view result owns a buffer
// live from its op to its last (transitive, through views) use; views,
// in-place all_reduce results and in-place AdamW updates share their
// source's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_TRANSFORMS_BUFFERLIVENESS_H
#define GPTC_COMPILER_TRANSFORMS_BUFFERLIVENESS_H

#include "dialects/GPT/IR/GPTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gptc {

/// Bytes of a static-shaped tensor (at least one byte per element).
int64_t tensorBytes(mlir::Type type);

/// A view keeps its operand's bytes: reshape, or a slice of dimension 0.
/// Returns the source and the byte offset into it.
std::optional<std::pair<mlir::Value, int64_t>> viewSource(mlir::Operation *op);

/// An all_reduce result reduces its operand in place when nothing else
/// reads the operand and the operand owns its buffer.
bool reducesInPlace(mlir::gpt::AllReduceOp op, unsigned i);

/// The operand whose bytes result `r` overwrites, or null: an in-place
/// all_reduce input (reducesInPlace), or the logits of a
/// gpt.cross_entropy_grad that nothing reads after it (its kernels read
/// each logit before writing that element's gradient), or an FP8 amax
/// history nothing reads after its scale or quantization, or a
/// gpt.scaled_matmul's accumulator that nothing reads after the GEMM.
mlir::Value overwrittenOperand(mlir::OpResult r);

/// The values of `user` that share `v`'s bytes: a view of it, or a result
/// overwriting it (overwrittenOperand).
llvm::SmallVector<mlir::Value, 1> aliasesOf(mlir::Operation *user, mlir::Value v);

/// Where a value's bytes live: an argument, or an activation buffer.
struct BufferHome {
  int buffer = -1;             // index into BufferLiveness::buffers; -1: argument
  mlir::BlockArgument arg;     // the argument when buffer == -1
  int64_t viewOffset = 0;      // bytes into the home
};

/// One activation buffer: owned by `value`, live over program points
/// [first, last] (inclusive); `offset` is set by placeBuffers.
struct LiveBuffer {
  mlir::Value value;
  int64_t size = 0, first = 0, last = 0, offset = -1;
};

/// Live intervals of every activation buffer of a single-block function.
struct BufferLiveness {
  mlir::func::FuncOp fn;
  int64_t alignment = 1;
  /// Program point of every op of the body (the terminator included).
  llvm::DenseMap<mlir::Operation *, int64_t> index;
  int64_t numPoints = 0;
  llvm::DenseMap<mlir::Value, BufferHome> homes;
  std::vector<LiveBuffer> buffers; // in program order of their owners
  /// The largest sum of (aligned) buffer sizes live at one program point:
  /// a lower bound of any plan's activation pool; the first point reaching
  /// it, and the buffers live there.
  int64_t peakBytes = 0, peakPoint = 0;
  std::vector<int> liveAtPeak;

  /// Analyzes `fn` (single block, calls inlined: a func.call is an error
  /// at the call, naming `pass`). Sizes are rounded up to `alignment`.
  static mlir::FailureOr<BufferLiveness> compute(mlir::func::FuncOp fn, int64_t alignment,
                                                 llvm::StringRef pass = "gpt-plan-memory");

  /// Last program point where `v` or an alias of it is read (numPoints for
  /// a returned value).
  int64_t lastUse(mlir::Value v) const;

  /// Sum of the function's arguments' aligned sizes (the argument pools).
  int64_t argumentBytes() const;

private:
  bool adamInPlace(mlir::gpt::AdamWOp adam) const;
  bool adamInPlace(llvm::ArrayRef<mlir::Value> sources, mlir::Operation *adam) const;
};

/// Places `buffers` largest first at the lowest aligned offset free of
/// placed buffers with overlapping lifetimes; returns the pool size.
int64_t placeBuffers(std::vector<LiveBuffer> &buffers);

/// The largest sum of buffer sizes live at one of points 0 .. numPoints,
/// and the first point that reaches it.
std::pair<int64_t, int64_t> peakLiveBytes(llvm::ArrayRef<LiveBuffer> buffers, int64_t numPoints);

/// What `l`'s peak point holds, largest first: "kind type bytes xN" per op
/// kind and element type of the buffers' owners, the `top` largest groups
/// named and the rest as "others bytes xN".
std::string describePeak(const BufferLiveness &l, size_t top = 5);

} // namespace gptc

#endif // GPTC_COMPILER_TRANSFORMS_BUFFERLIVENESS_H
