//===- FuseFp8GeluMatmul.cpp - FP8 GEMMs that store their GELU's codes ----===//
//
/// A gpt.scaled_matmul whose GELU a delayed-scaling FP8 cast reads becomes
/// a gpt.scaled_matmul_gelu_fp8 (the GEMM writes the codes) and a byte
/// transpose of them; see Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"

namespace gptc {
#define GEN_PASS_DEF_FUSEFP8GELUMATMULPASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

/// True when `h` is a history moved on by one step, its first element 0:
/// a gpt.fp8_delayed_scales' or gpt.fp8_scale's `shifted`.
bool isShiftedHistory(Value h) {
  if (auto scales = h.getDefiningOp<Fp8DelayedScalesOp>())
    return llvm::any_of(llvm::seq<unsigned>(0, scales.getHistories().size()),
                        [&](unsigned i) { return scales.getShifted(i) == h; });
  if (auto scale = h.getDefiningOp<Fp8ScaleOp>())
    return h == scale.getShifted();
  return false;
}

struct FuseFp8GeluMatmulPass
    : public gptc::impl::FuseFp8GeluMatmulPassBase<FuseFp8GeluMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Fp8CastTransposeOp> casts;
    getOperation().walk([&](Fp8CastTransposeOp cast) {
      if (cast.getGelu() && cast.getHistory())
        casts.push_back(cast);
    });
    for (Fp8CastTransposeOp cast : casts) {
      auto mm = cast.getInput().getDefiningOp<ScaledMatmulOp>();
      // The GEMM computes the codes, so their scale (and the history its
      // amax goes into) must exist before it runs.
      if (!mm || mm.getAccumulate() || mm.getTransposeLhs() || !mm.getTransposeRhs() ||
          !gptc::availableBefore(cast.getScale(), mm) ||
          !gptc::availableBefore(cast.getHistory(), mm) || !isShiftedHistory(cast.getHistory()))
        continue;
      OpBuilder b(mm);
      auto fused = ScaledMatmulGeluFp8Op::create(
          b, mm.getLoc(),
          TypeRange{mm.getType(), cast.getResult().getType(), cast.getRecorded().getType()},
          cast.getFormat(), mm.getLhs(), mm.getLhsScale(), mm.getRhs(), mm.getRhsScale(),
          cast.getScale(), cast.getHistory(), mm.getBias(), mm.getFastAccum());
      if (!cast.getTransposed().use_empty()) {
        b.setInsertionPoint(cast);
        auto transposed = Fp8TransposeOp::create(b, cast.getLoc(), fused.getResult());
        cast.getTransposed().replaceAllUsesWith(transposed.getResult());
      }
      cast.getResult().replaceAllUsesWith(fused.getResult());
      cast.getRecorded().replaceAllUsesWith(fused.getRecorded());
      cast.erase();
      mm.getResult().replaceAllUsesWith(fused.getPre());
      mm.erase();
      ++numFused;
    }
  }
};

} // namespace
