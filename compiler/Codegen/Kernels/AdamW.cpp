//===- Kernels/AdamW.cpp - the AdamW kernel family --------------------------===//
//
// gpt.adamw(_multi) and gpt.lr_schedule (kernel bodies:
// OptimizerLowering.cpp). Moved from Lowering.cpp (issue 44): its lowerings
// are LoweringContext members (LoweringContext.h), registered by
// registerAdamWLowerings below.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/LoweringContext.h"
#include "compiler/Codegen/Lowering.h"
#include "compiler/Codegen/FlashAttention.h"
#include "compiler/Codegen/Fp8Codes.h"
#include "compiler/Codegen/KernelBuilder.h"
#include "compiler/Codegen/LossLowering.h"
#include "compiler/Codegen/NvvmKernel.h"
#include "compiler/Codegen/OptimizerLowering.h"
#include "compiler/Codegen/RowLanes.h"

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::gpt;

namespace gptc::codegen {
/// One launch per gradient element type (a span has one), over all its
/// parameters when each of param, grad, m, v and the results lies in one
/// pool (always, for a planned train step); otherwise one launch per
/// parameter with the same body.
void LoweringContext::lowerAdamWMulti(AdamWMultiOp multi) {
  llvm::MapVector<Type, SmallVector<size_t>> byGradType;
  for (auto [i, g] : llvm::enumerate(multi.getGrads()))
    byGradType[getElementTypeOrSelf(g.getType())].push_back(i);
  for (auto &[type, which] : byGradType)
    lowerAdamWGroup(multi, which);
}

void LoweringContext::lowerAdamWGroup(AdamWMultiOp multi, ArrayRef<size_t> which) {
  Operation *op = multi.getOperation();
  size_t n = which.size();
  std::array<SmallVector<int64_t>, kNumAdamWArrays> members;
  for (size_t i : which) {
    members[kParam].push_back(tensorOf.lookup(multi.getParams()[i]));
    members[kGrad].push_back(tensorOf.lookup(multi.getGrads()[i]));
    members[kM].push_back(tensorOf.lookup(multi.getMs()[i]));
    members[kV].push_back(tensorOf.lookup(multi.getVs()[i]));
    members[kNewParam].push_back(tensorOf.lookup(multi.getNewParams()[i]));
    members[kNewM].push_back(tensorOf.lookup(multi.getNewMs()[i]));
    members[kNewV].push_back(tensorOf.lookup(multi.getNewVs()[i]));
  }
  static const char *names[] = {"params", "grads", "m", "v", "new_params", "new_m", "new_v"};
  AdamWLaunch all{multi.getBeta1().convertToDouble(), multi.getBeta2().convertToDouble(),
                  multi.getEpsilon().convertToDouble(), {}, options.vectorAccess};
  for (int a = 0; a < kNumAdamWArrays; ++a)
    all.elementBytes[a] = result.tensors[members[a][0]].elementType.getIntOrFloatBitWidth() / 8;
  std::vector<TensorInfo> spans;
  std::array<std::vector<int64_t>, kNumAdamWArrays> offsets;
  for (int a = 0; a < kNumAdamWArrays; ++a)
    if (auto s = spanOf(result.tensors, members[a], std::string("adamw.") + names[a], offsets[a]))
      spans.push_back(*s);
  std::vector<Operand> scalars = {t(multi.getLr()), t(multi.getStep()), t(multi.getGradScale())};
  std::vector<Type> scalarTypes = {flat(multi.getLr()), flat(multi.getStep()),
                                   flat(multi.getGradScale())};
  auto emit = [&](const AdamWLaunch &l, std::vector<Type> types, std::vector<Operand> args) {
    types.insert(types.end(), scalarTypes.begin(), scalarTypes.end());
    args.insert(args.end(), scalars.begin(), scalars.end());
    launch(op, keyOf(op) + l.key(), "adamw_multi", types, args, l.threads(),
           [l](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             buildAdamWMulti(b, loc, idx, a, l);
           });
  };
  auto segment = [&](size_t i) {
    AdamWSegment s;
    s.size = numel(multi.getParams()[i]);
    s.weightDecay = multi.getWeightDecays()[i];
    return s;
  };
  if (spans.size() == kNumAdamWArrays) {
    // A span covers the bytes between its members too, which may hold a
    // value a collective still writes (the loss, reduced for the log);
    // the kernel never touches them, but the schedule check cannot know.
    waitForAll();
    // The chunked layout's 16-byte vectors need 16-byte aligned spans
    // (gpt-plan-memory aligns to 256 bytes unless told otherwise).
    for (const TensorInfo &s : spans)
      all.vectorAccess &= s.offset % 16 == 0;
    std::vector<Type> types;
    std::vector<Operand> args;
    for (const TensorInfo &s : spans) {
      types.push_back(flatOf(s.shape[0], s.elementType));
      args.push_back(Operand{Operand::Tensor, addTensor(s)});
    }
    for (size_t j = 0; j < n; ++j) {
      AdamWSegment s = segment(which[j]);
      for (int a = 0; a < kNumAdamWArrays; ++a)
        s.offsets[a] = offsets[a][j];
      all.segments.push_back(s);
    }
    emit(all, types, args);
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    AdamWLaunch one = all;
    one.segments = {segment(which[j])};
    std::vector<Type> types;
    std::vector<Operand> args;
    for (int a = 0; a < kNumAdamWArrays; ++a) {
      const TensorInfo &info = result.tensors[members[a][j]];
      one.elementBytes[a] = info.elementType.getIntOrFloatBitWidth() / 8;
      one.vectorAccess &= info.offset % 16 == 0;
      types.push_back(flatOf(numel(multi.getParams()[which[j]]), info.elementType));
      args.push_back(Operand{Operand::Tensor, members[a][j]});
    }
    emit(one, types, args);
  }
}

LogicalResult LoweringContext::lowerAdamWMultiOp(Operation *op) {
  auto lower = [&](AdamWMultiOp multi) {
    lowerAdamWMulti(multi);
    return success();
  };
  return lower(llvm::cast<AdamWMultiOp>(op));
}

LogicalResult LoweringContext::lowerLRScheduleOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](LRScheduleOp lr) {
    double maxLr = lr.getMaxLr().convertToDouble(), minLr = lr.getMinLr().convertToDouble();
    double warmup = static_cast<double>(lr.getWarmupSteps());
    double total = static_cast<double>(lr.getTotalSteps());
    ScheduleKind kind = lr.getKind();
    Type outT = eltOf(lr.getResult());
    launch(op, key, "lr_schedule", {flat(lr.getStep()), flat(lr.getResult())},
           {t(lr.getStep()), t(lr.getResult())}, 1,
           [=](OpBuilder &b, Location loc, Value, ValueRange a) {
             KB k{b, loc};
             Type dt = b.getF64Type();
             Value step = arith::SIToFPOp::create(b, loc, dt, k.ld(a[0], k.idx(0)));
             Value out = k.f(maxLr, dt);
             if (kind != ScheduleKind::Constant) {
               Value warm = k.div(k.mul(k.f(maxLr, dt), k.add(step, k.f(1, dt))),
                                  k.f(std::max(warmup, 1.0), dt));
               Value r = k.div(k.sub(step, k.f(warmup, dt)),
                               k.f(total > warmup ? total - warmup : 1.0, dt));
               r = arith::MinimumFOp::create(b, loc, k.fmax(r, k.f(0, dt)), k.f(1, dt));
               Value decay =
                   kind == ScheduleKind::Cosine
                       ? k.add(k.f(minLr, dt),
                               k.mul(k.mul(k.f(0.5, dt),
                                           k.add(k.f(1, dt), k.cos(k.mul(k.f(M_PI, dt), r)))),
                                     k.f(maxLr - minLr, dt)))
                       : k.sub(k.f(maxLr, dt), k.mul(r, k.f(maxLr - minLr, dt)));
               Value inWarmup = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, step,
                                                      k.f(warmup, dt));
               out = k.select(inWarmup, warm, decay);
             }
             k.st(k.convert(out, outT), a[1], k.idx(0));
           });
    return success();
  };
  return lower(llvm::cast<LRScheduleOp>(op));
}

LogicalResult LoweringContext::lowerAdamWOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](AdamWOp adam) {
    double b1 = adam.getBeta1().convertToDouble(), b2 = adam.getBeta2().convertToDouble();
    double eps = adam.getEpsilon().convertToDouble();
    double wd = adam.getWeightDecay().convertToDouble();
    launch(op, key, "adamw",
           {flat(adam.getParam()), flat(adam.getGrad()), flat(adam.getM()), flat(adam.getV()),
            flat(adam.getLr()), flat(adam.getStep()), flat(adam.getGradScale()),
            flat(adam.getNewParam()), flat(adam.getNewM()), flat(adam.getNewV())},
           {t(adam.getParam()), t(adam.getGrad()), t(adam.getM()), t(adam.getV()),
            t(adam.getLr()), t(adam.getStep()), t(adam.getGradScale()),
            t(adam.getNewParam()), t(adam.getNewM()), t(adam.getNewV())},
           numel(adam.getParam()), [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
             KB k{b, loc};
             Type ft = b.getF32Type(), dt = b.getF64Type();
             Value tt = k.add(arith::SIToFPOp::create(b, loc, dt, k.ld(a[5], k.idx(0))),
                              k.f(1, dt));
             Value c1 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b1, dt), tt)), ft);
             Value c2 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b2, dt), tt)), ft);
             Value lr = k.ld(a[4], k.idx(0));
             Value g = k.mul(k.ld(a[1], i), k.ld(a[6], k.idx(0)));
             Value p = k.ld(a[0], i);
             Value m = k.add(k.mul(k.f(b1, ft), k.ld(a[2], i)), k.mul(k.f(1 - b1, ft), g));
             Value v = k.add(k.mul(k.f(b2, ft), k.ld(a[3], i)), k.mul(k.f(1 - b2, ft), k.mul(g, g)));
             Value upd = k.div(k.div(m, c1), k.add(k.sqrt(k.div(v, c2)), k.f(eps, ft)));
             Value np = k.sub(p, k.mul(lr, k.add(upd, k.mul(k.f(wd, ft), p))));
             k.st(np, a[7], i);
             k.st(m, a[8], i);
             k.st(v, a[9], i);
           });
    return success();
  };
  return lower(llvm::cast<AdamWOp>(op));
}

void registerAdamWLowerings(LoweringRegistry &registry) {
  registry.add<AdamWMultiOp>(&LoweringContext::lowerAdamWMultiOp);
  registry.add<LRScheduleOp>(&LoweringContext::lowerLRScheduleOp);
  registry.add<AdamWOp>(&LoweringContext::lowerAdamWOp);
}

} // namespace gptc::codegen
