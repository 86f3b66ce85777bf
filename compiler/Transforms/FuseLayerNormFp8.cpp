//===- FuseLayerNormFp8.cpp - layernorms that store their FP8 codes -------===//
//
/// A gpt.add_layernorm read only by an FP8 cast whose scale is known before
/// it becomes a gpt.add_layernorm_fp8: the layernorm's kernel writes both
/// layouts of the codes; see Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/ProgramUtils.h"

#include "mlir/IR/Builders.h"

namespace gptc {
#define GEN_PASS_DEF_FUSELAYERNORMFP8PASS
#include "compiler/Transforms/Passes.h.inc"
} // namespace gptc

using namespace mlir;
using namespace mlir::gpt;

namespace {

struct FuseLayerNormFp8Pass
    : public gptc::impl::FuseLayerNormFp8PassBase<FuseLayerNormFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AddLayerNormOp> layernorms;
    getOperation().walk([&](AddLayerNormOp ln) { layernorms.push_back(ln); });
    for (AddLayerNormOp ln : layernorms) {
      Value y = ln.getResult();
      if (!y.hasOneUse())
        continue;
      auto cast = llvm::dyn_cast<Fp8CastTransposeOp>(*y.getUsers().begin());
      // The scale (and the history it records in) must exist before the
      // layernorm runs: delayed scaling's steady step, not a scale of y.
      if (!cast || cast.getGelu() || !gptc::availableBefore(cast.getScale(), ln) ||
          (cast.getHistory() && !gptc::availableBefore(cast.getHistory(), ln)))
        continue;
      OpBuilder b(ln);
      SmallVector<Type> types = {ln.getSum().getType(), cast.getResult().getType(),
                                 cast.getTransposed().getType()};
      if (cast.getRecorded())
        types.push_back(cast.getRecorded().getType());
      auto fused = AddLayerNormFp8Op::create(
          b, ln.getLoc(), types, cast.getFormat(), ln.getLhs(), ln.getRhs(), ln.getWeight(),
          ln.getBias(), cast.getScale(), cast.getHistory(),
          getElementTypeOrSelf(y.getType()), ln.getEpsilon());
      cast.getResult().replaceAllUsesWith(fused.getResult());
      cast.getTransposed().replaceAllUsesWith(fused.getTransposed());
      if (cast.getRecorded())
        cast.getRecorded().replaceAllUsesWith(fused.getRecorded());
      ln.getSum().replaceAllUsesWith(fused.getSum());
      cast.erase();
      ln.erase();
      ++numFused;
    }
  }
};

} // namespace
