//===- Kernels/CrossEntropy.cpp - the CrossEntropy kernel family ------------===//
//
// gpt.cross_entropy and its gradients (kernel bodies: LossLowering.cpp).
// Moved from Lowering.cpp (issue 44): its lowerings are LoweringContext
// members (LoweringContext.h), registered by registerCrossEntropyLowerings
// below.
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
void LoweringContext::launchCrossEntropyBackwardRows(Operation *grad, const std::string &name) {
  Value dloss = grad->getOperand(0), logits = grad->getOperand(1), targets = grad->getOperand(2);
  Value dlogits = grad->getResult(0);
  int64_t rows = numel(targets);
  CrossEntropyShape s{rows, *getConfigInt(grad->getAttr("vocab_size")), lastDim(logits),
                      options.rowLanes};
  Type ft = Float32Type::get(ctx);
  GradStore store = gradStore(grad);
  auto saved = savedLse.find(logits);
  bool haveLse = saved != savedLse.end();
  // FP8 codes are bytes to the kernel.
  std::vector<Type> types = {flat(dloss), flat(logits), flat(targets),
                             store.fp8 ? flatOf(numel(dlogits), IntegerType::get(ctx, 8))
                                       : Type(flat(dlogits))};
  std::vector<Operand> args = {t(dloss), t(logits), t(targets), t(dlogits)};
  if (haveLse) {
    types.push_back(flatOf(rows, ft));
    args.push_back(saved->second);
  }
  if (store.fp8) {
    types.push_back(flatOf(1, ft));
    args.push_back(t(grad->getResult(1)));
  }
  launch(grad, keyOf(grad) + (haveLse ? "saved" : "online"), name, types, args, s.threads(),
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           buildCrossEntropyBackwardRows(b, loc, idx, a, s, haveLse, store);
         });
}

LogicalResult LoweringContext::lowerCrossEntropyOp(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  auto lower = [&](CrossEntropyOp ce) {
    int64_t vp = lastDim(ce.getLogits()), rows = numel(ce.getTargets());
    int64_t v = *getConfigInt(ce.getVocabSize());
    Type ft = Float32Type::get(ctx);
    CrossEntropyShape s{rows, v, vp, lanes};
    Operation *grad = onePassGrad(ce, s);
    // The online forward keeps each row's log-sum-exp for the gradient
    // (keep() first: it restarts the scratch above what stays).
    Operand lse;
    if (!grad && options.fusedCrossEntropy) {
      lse = keep(rows * 4);
      savedLse[ce.getLogits()] = lse;
    }
    Operand losses = scratch(rows * 4);
    if (grad) {
      // A bf16 gradient overwrites the logits (planned in place), so
      // the launch passes the logits' tensor for it too; FP8 codes go
      // to their own tensor, with the inverse scale.
      onePassGrads.insert(grad);
      Value dloss = grad->getOperand(0);
      waitFor(dloss); // read a launch earlier than its op
      int64_t threads = options.blockThreads;
      GradStore store = gradStore(grad);
      std::vector<Type> types = {flat(ce.getLogits()), flat(ce.getTargets()), flat(dloss),
                                 flatOf(rows, ft), flat(ce.getLogits())};
      std::vector<Operand> args = {t(ce.getLogits()), t(ce.getTargets()), t(dloss), losses,
                                   t(ce.getLogits())};
      if (store.fp8) {
        // The codes' tensors, placed before their op's turn (mapping
        // them again there keeps these).
        if (failed(mapResults(grad)))
          return failure();
        types[4] = flatOf(numel(ce.getLogits()), IntegerType::get(ctx, 8));
        args[4] = t(grad->getResult(0));
        types.push_back(flatOf(1, ft));
        args.push_back(t(grad->getResult(1)));
      }
      launch(op, key + "onepass" + (store.fp8 ? "[fp8]" : ""), "crossentropy_forward_backward",
             types, args, rows * threads,
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               buildCrossEntropyOnePass(b, loc, idx, a, s, threads, store);
             }, /*minBlocksPerSM=*/2, crossEntropyOnePassSharedBytes(s, threads));
    } else if (options.fusedCrossEntropy) {
      launch(op, key + "online", "crossentropy_forward_online",
             {flat(ce.getLogits()), flat(ce.getTargets()), flatOf(rows, ft), flatOf(rows, ft)},
             {t(ce.getLogits()), t(ce.getTargets()), losses, lse}, s.threads(),
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               buildCrossEntropyForwardRows(b, loc, idx, a, s);
             });
    } else {
      launch(op, key + "rows", "crossentropy_forward_rows",
             {flat(ce.getLogits()), flat(ce.getTargets()), flatOf(rows, ft)},
             {t(ce.getLogits()), t(ce.getTargets()), losses}, rows * lanes,
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               KB k{b, loc};
               RowLanes rl(k, idx, lanes);
               Value r = rl.row;
               Value base = k.mul(r, k.idx(vp));
               auto [mx, sum] = maxAndSumExp(rl, a[0], base, v, ft);
               rl.once([&] {
                 Value target = k.toIndex(k.ld(a[1], r));
                 Value lt = k.ld(a[0], k.add(base, target));
                 k.st(k.sub(k.add(k.log(sum), mx), lt), a[2], r);
               });
             });
    }
    // The rows' losses folded in parallel first: one thread summing
    // every row took 0.27 ms at B x T = 16384.
    auto [left, count] = foldPartials(op, losses, rows, "crossentropy_forward_fold");
    launch(op, key + "mean" + std::to_string(count), "crossentropy_forward_mean",
           {flatOf(count, ft), flat(ce.getResult())}, {left, t(ce.getResult())}, 1,
           [=](OpBuilder &b, Location loc, Value, ValueRange a) {
             KB k{b, loc};
             Value sum = k.loop(k.idx(0), k.idx(count), {k.f(0, ft)}, [&](Value i, ValueRange s) {
               return SmallVector<Value>{k.add(s[0], k.ld(a[0], i))};
             })[0];
             k.st(k.div(sum, k.f(rows, ft)), a[1], k.idx(0));
           });
    return success();
  };
  return lower(llvm::cast<CrossEntropyOp>(op));
}

LogicalResult LoweringContext::lowerFp8CrossEntropyGradOp(Operation *op) {
  auto lower = [&](Fp8CrossEntropyGradOp ce) {
    // Computed by its forward's launch (onePassGrad), or by the rows
    // kernel (whatever --fuse-cross-entropy says: it has no other).
    if (!onePassGrads.contains(ce))
      launchCrossEntropyBackwardRows(ce, "crossentropy_backward_fp8");
    return success();
  };
  return lower(llvm::cast<Fp8CrossEntropyGradOp>(op));
}

LogicalResult LoweringContext::lowerCrossEntropyGradOp(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  auto lower = [&](CrossEntropyGradOp ce) {
    // Computed by its forward's launch (onePassGrad).
    if (onePassGrads.contains(ce))
      return success();
    int64_t vp = lastDim(ce.getLogits()), rows = numel(ce.getTargets());
    int64_t v = *getConfigInt(ce.getVocabSize());
    Type ft = Float32Type::get(ctx);
    if (options.fusedCrossEntropy) {
      launchCrossEntropyBackwardRows(ce, "crossentropy_backward_fused");
      return success();
    }
    Operand stats = scratch(rows * 2 * 4);
    launch(op, key + "rows", "crossentropy_backward_rows",
           {flat(ce.getLogits()), flatOf(rows * 2, ft)}, {t(ce.getLogits()), stats},
           rows * lanes, [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             RowLanes rl(k, idx, lanes);
             Value r = rl.row;
             Value base = k.mul(r, k.idx(vp));
             auto [mx, sum] = maxAndSumExp(rl, a[0], base, v, ft);
             rl.once([&] {
               k.st(mx, a[1], k.mul(r, k.idx(2)));
               k.st(sum, a[1], k.add(k.mul(r, k.idx(2)), k.idx(1)));
             });
           });
    launch(op, key + "elems", "crossentropy_backward",
           {flat(ce.getGrad()), flat(ce.getLogits()), flat(ce.getTargets()),
            flatOf(rows * 2, ft), flat(ce.getResult())},
           {t(ce.getGrad()), t(ce.getLogits()), t(ce.getTargets()), stats, t(ce.getResult())},
           rows * vp, [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
             KB k{b, loc};
             Value r = k.udiv(i, k.idx(vp)), col = k.urem(i, k.idx(vp));
             Value mx = k.ld(a[3], k.mul(r, k.idx(2)));
             Value sum = k.ld(a[3], k.add(k.mul(r, k.idx(2)), k.idx(1)));
             Value p = k.div(k.exp(k.sub(k.ld(a[1], i), mx)), sum);
             Value hit = k.cmpEq(col, k.toIndex(k.ld(a[2], r)));
             Value g = k.div(k.ld(a[0], k.idx(0)), k.f(rows, ft));
             Value d = k.mul(g, k.sub(p, k.select(hit, k.f(1, ft), k.f(0, ft))));
             k.st(k.select(k.cmpUlt(col, k.idx(v)), d, k.f(0, ft)), a[4], i);
           });
    return success();
  };
  return lower(llvm::cast<CrossEntropyGradOp>(op));
}

void registerCrossEntropyLowerings(LoweringRegistry &registry) {
  registry.add<CrossEntropyOp>(&LoweringContext::lowerCrossEntropyOp);
  registry.add<Fp8CrossEntropyGradOp>(&LoweringContext::lowerFp8CrossEntropyGradOp);
  registry.add<CrossEntropyGradOp>(&LoweringContext::lowerCrossEntropyGradOp);
}

} // namespace gptc::codegen
