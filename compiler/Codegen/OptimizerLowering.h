//===- OptimizerLowering.h - gpt.adamw_multi as one kernel launch -------===//
//
// The parameters, gradients and moments of a train step each lie in one
// pool (params, activations, state), so an update of all parameters can
// index each as one flat "span" covering its tensors. Thread i of the
// launch finds its parameter by a binary search over the parameters' first
// elements and reads its offsets and weight decay, all from constant
// tables (switches LLVM turns into lookup tables), and updates its
// elements with exactly the arithmetic of the per-parameter gpt.adamw
// kernel (bit-identical results).
// When every parameter's size is a multiple of kAdamWChunk and every
// offset of a 16-byte vector's elements (4 in f32, 8 in bf16), a thread's
// elements are kAdamWChunk consecutive ones in one parameter: one lookup
// per thread and 16-byte vector loads; otherwise they are strided (i,
// i + threads, ...) and each finds its own. Gradients may be narrower than
// the parameters (gpt-fuse-adamw's narrow-grads); loads widen them.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_OPTIMIZERLOWERING_H
#define GPTC_COMPILER_CODEGEN_OPTIMIZERLOWERING_H

#include "compiler/Codegen/KernelBuilder.h"
#include "compiler/Codegen/Lowering.h"

#include <algorithm>
#include <array>
#include <optional>

namespace gptc::codegen {

/// The arrays of an update, in kernel-argument order.
enum AdamWArray { kParam, kGrad, kM, kV, kNewParam, kNewM, kNewV, kNumAdamWArrays };

/// Consecutive elements per thread in the chunked layout.
constexpr int64_t kAdamWChunk = 8;

/// One parameter of the launch: `size` elements, the element offset of its
/// first element in each array's span, and its weight decay.
struct AdamWSegment {
  int64_t size = 0;
  std::array<int64_t, kNumAdamWArrays> offsets{};
  double weightDecay = 0;
};

struct AdamWLaunch {
  double beta1 = 0, beta2 = 0, epsilon = 0;
  std::vector<AdamWSegment> segments;
  /// Whether the chunked layout may be used (LoweringOptions::vectorAccess).
  bool vectorAccess = false;
  /// Bytes per element of each array (the gradients may be bf16 or f16).
  std::array<int64_t, kNumAdamWArrays> elementBytes{4, 4, 4, 4, 4, 4, 4};
  /// Elements of `array` per 16-byte vector in the chunked layout.
  int64_t vectorWidth(AdamWArray array) const {
    return std::min<int64_t>(kAdamWChunk, 16 / elementBytes[array]);
  }
  /// Elements in all segments; per thread (thread i takes kAdamWChunk
  /// consecutive ones when chunked, else i, i + threads, ...: more loads in
  /// flight); threads.
  int64_t elements() const;
  bool chunked() const;
  int64_t perThread() const;
  int64_t threads() const { return elements() / perThread(); }
  /// The segments, for kernel keys: the body depends on them.
  std::string key() const;
};

/// One tensor covering `members` (indices into `tensors`): from the
/// lowest offset to the highest end, role "activations" (so no checkpoint
/// or zeroing of a role touches it). Fails when they lie in different
/// pools, have different element types or offsets that are not a whole
/// number of elements apart. `elementOffsets` gets each member's offset.
std::optional<TensorInfo> spanOf(const std::vector<TensorInfo> &tensors,
                                 llvm::ArrayRef<int64_t> members, const std::string &name,
                                 std::vector<int64_t> &elementOffsets);

/// entry(i) for a runtime i < n (entry(n - 1) for any larger i): a switch
/// whose cases yield constants, which LLVM turns into lookup tables (loads).
/// A tree of compares yielding the constants instead kept them all in
/// registers (hundreds at 1.5B: spills).
llvm::SmallVector<mlir::Value>
tableAt(KB &k, mlir::Value i, size_t n, mlir::TypeRange types,
        llvm::function_ref<llvm::SmallVector<mlir::Value>(size_t)> entry);

/// Kernel body; args: the kNumAdamWArrays spans (flat memrefs), lr, step,
/// grad_scale.
void buildAdamWMulti(mlir::OpBuilder &b, mlir::Location loc, mlir::Value idx,
                     mlir::ValueRange args, const AdamWLaunch &launch);

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_OPTIMIZERLOWERING_H
