//===- Kernels/Attention.cpp - the Attention kernel family ------------------===//
//
// gpt.causal_attention and its gradients: the scalar kernels (the tensor-
// core ones: FlashAttention.cpp). Moved from Lowering.cpp (issue 44): its
// lowerings are LoweringContext members (LoweringContext.h), registered by
// registerAttentionLowerings below.
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
namespace {
/// Index math of the attention kernels: thread idx = (b, h, row) and the
/// offsets of q/k/v (in qkv (B, T, 3C)) and of y/dy (in (B, T, C)).
struct AttentionIndex {
  KB &k;
  Value row, head, batch;
  int64_t t, c, d;
  AttentionIndex(KB &k, Value idx, int64_t t, int64_t h, int64_t c, int64_t d)
      : k(k), t(t), c(c), d(d) {
    row = k.urem(idx, k.idx(t));
    head = k.urem(k.udiv(idx, k.idx(t)), k.idx(h));
    batch = k.udiv(idx, k.idx(t * h));
  }
  Value qkv(Value r, int64_t part) {
    return k.add(k.mul(k.add(k.mul(batch, k.idx(t)), r), k.idx(3 * c)),
                 k.add(k.idx(part * c), k.mul(head, k.idx(d))));
  }
  Value out(Value r) {
    return k.add(k.mul(k.add(k.mul(batch, k.idx(t)), r), k.idx(c)), k.mul(head, k.idx(d)));
  }
};

} // namespace

LogicalResult LoweringContext::lowerCausalAttentionOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](CausalAttentionOp at) {
    auto s = rtt(at.getQkv()).getShape();
    int64_t bsz = s[0], tl = s[1], c = s[2] / 3, h = *getConfigInt(at.getNumHeads()),
            d = c / h;
    double scale = 1.0 / std::sqrt(static_cast<double>(d));
    AttentionShape shape{bsz, tl, h, d, scale, options.blockThreads, options.warpgroupMma};
    std::vector<Type> types = {flat(at.getQkv()), flat(at.getResult()), flat(at.getLse())};
    std::vector<Operand> args = {t(at.getQkv()), t(at.getResult()), t(at.getLse())};
    if (options.flashAttention && flashAttentionApplies(shape, eltOf(at.getQkv()))) {
      result.sm90a |= flashAttentionWarpgroup(shape);
      launch(op, key, "flash_attention_forward", types, args, flashAttentionThreads(shape),
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               buildFlashAttentionForward(b, loc, idx, a, shape);
             }, flashAttentionMinBlocks(shape, FlashKernel::Forward),
             flashAttentionSharedBytes(shape, FlashKernel::Forward));
      return success();
    }
    // One thread per (b, h, i) query row: q and the output accumulator
    // live in registers (the head dimension is unrolled); keys and values
    // are read in lockstep by a warp, so each load is a broadcast.
    launch(op, key, "attention_forward", types, args, bsz * h * tl,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Type ft = b.getF32Type();
             AttentionIndex ai{k, idx, tl, h, c, d};
             SmallVector<Value> q = k.loadVec(a[0], ai.qkv(ai.row, 0), d);
             SmallVector<Value> init = {k.f(-INFINITY, ft), k.f(0, ft)};
             init.append(d, k.f(0, ft));
             auto st = k.loop(k.idx(0), k.add(ai.row, k.idx(1)), init,
                              [&](Value j, ValueRange cur) {
               Value sc = k.mul(k.dotVec(q, a[0], ai.qkv(j, 1)), k.f(scale, ft));
               Value mNew = k.fmax(cur[0], sc);
               Value corr = k.exp(k.sub(cur[0], mNew));
               Value p = k.exp(k.sub(sc, mNew));
               SmallVector<Value> next = {mNew, k.add(k.mul(cur[1], corr), p)};
               Value vb = ai.qkv(j, 2);
               for (int64_t e = 0; e < d; ++e)
                 next.push_back(k.add(k.mul(cur[2 + e], corr),
                                      k.mul(p, k.ld(a[0], k.add(vb, k.idx(e))))));
               return next;
             });
             Value yb = ai.out(ai.row);
             for (int64_t e = 0; e < d; ++e)
               k.st(k.div(st[2 + e], st[1]), a[1], k.add(yb, k.idx(e)));
             k.st(k.add(st[0], k.log(st[1])), a[2], idx); // idx = (b, h, i)
           });
    return success();
  };
  return lower(llvm::cast<CausalAttentionOp>(op));
}

/// gpt.causal_attention_grad's kernels for its operands and result; with
/// `sum`, also the column sums of the result (an attention-gradient
/// column-sum fusion).
LogicalResult LoweringContext::lowerCausalAttentionGrad(Operation *op, const std::string &key,
                                                        AttentionGradValues at, Value sum) {
  auto s = rtt(at.qkv).getShape();
  int64_t bsz = s[0], tl = s[1], c = s[2] / 3, h = *getConfigInt(at.numHeads),
          d = c / h;
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Type ft = Float32Type::get(ctx);
  int64_t rowsN = bsz * h * tl;
  // Per row a statistic of lse_i (the scalar kernels: lse_i; flash:
  // -lse_i log2 e) and D_i = sum_j p_ij dy_i.v_j.
  Operand stats = scratch(rowsN * 2 * 4);
  auto statsType = flatOf(rowsN * 2, ft);
  AttentionShape shape{bsz, tl, h, d, scale, options.blockThreads, options.warpgroupMma};
  // dy, qkv, (lse statistic, D) pairs, dqkv, y, lse: the q kernel fills the pairs
  // for the k and v kernels, which walk rows of other queries.
  std::vector<Type> types = {flat(at.grad), flat(at.qkv), statsType,
                             flat(at.result), flat(at.output), flat(at.lse)};
  std::vector<Operand> args = {t(at.grad), t(at.qkv), stats, t(at.result),
                               t(at.output), t(at.lse)};
  // sums[col] of a (rows, 3C) f32 or dqkv-typed matrix `in`.
  auto sumColumns = [&](Type inType, Operand in, int64_t rows, Type ft) {
    reduceMatrix(op, key + "sum", "attention_backward_sum", inType, in, flat(sum), t(sum),
                 rows, 3 * c, ft, ReduceKind::Sum);
  };
  if (options.flashAttention && flashAttentionApplies(shape, eltOf(at.qkv)) &&
      eltOf(at.grad).isBF16() && eltOf(at.output).isBF16()) {
    result.sm90a |= flashAttentionWarpgroup(shape);
    // The kernels store each 16-row tile's column sums (unrounded); a
    // column reduction folds the B T / 16 rows of them.
    int64_t tileRows = bsz * tl / 16;
    Operand partials;
    if (sum) {
      shape.columnSums = true;
      partials = scratch(tileRows * 3 * c * 4);
      types.push_back(flatOf(tileRows * 3 * c, ft));
      args.push_back(partials);
    }
    // dQ, then dK and dV: one kernel each over the same arguments.
    for (bool query : {true, false}) {
      FlashKernel kernel = query ? FlashKernel::BackwardQuery : FlashKernel::BackwardKeyValue;
      launch(op, key + (query ? "q" : "kv"),
             query ? "flash_attention_backward_q" : "flash_attention_backward_kv", types, args,
             flashAttentionThreads(shape),
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               (query ? buildFlashAttentionBackwardQuery : buildFlashAttentionBackwardKeyValue)(
                   b, loc, idx, a, shape);
             },
             flashAttentionMinBlocks(shape, kernel), flashAttentionSharedBytes(shape, kernel));
    }
    if (sum)
      sumColumns(types.back(), partials, tileRows, ft);
    return success();
  }
  // Rows i: lse_i, D_i and dq_i = scale sum_j p_ij (dy_i.v_j - D_i) k_j.
  launch(op, key + "q", "attention_backward_q", types, args, rowsN,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           AttentionIndex ai{k, idx, tl, h, c, d};
           SmallVector<Value> q = k.loadVec(a[1], ai.qkv(ai.row, 0), d);
           SmallVector<Value> dy = k.loadVec(a[0], ai.out(ai.row), d);
           Value end = k.add(ai.row, k.idx(1));
           auto score = [&](Value j) {
             return k.mul(k.dotVec(q, a[1], ai.qkv(j, 1)), k.f(scale, ft));
           };
           // The forward's lse, and D_i = dy_i . y_i = sum_j p_ij dy_i . v_j.
           Value lse = k.ld(a[5], idx);
           Value dsum = k.dotVec(dy, a[4], ai.out(ai.row));
           k.st(lse, a[2], k.mul(idx, k.idx(2)));
           k.st(dsum, a[2], k.add(k.mul(idx, k.idx(2)), k.idx(1)));
           SmallVector<Value> zeros(d, k.f(0, ft));
           auto dq = k.loop(k.idx(0), end, zeros, [&](Value j, ValueRange cur) {
             Value kb = ai.qkv(j, 1);
             Value p = k.exp(k.sub(score(j), lse));
             Value dp = k.dotVec(dy, a[1], ai.qkv(j, 2));
             Value ds = k.mul(k.mul(p, k.sub(dp, dsum)), k.f(scale, ft));
             SmallVector<Value> next;
             for (int64_t e = 0; e < d; ++e)
               next.push_back(k.add(cur[e], k.mul(ds, k.ld(a[1], k.add(kb, k.idx(e))))));
             return next;
           });
           Value qb = ai.qkv(ai.row, 0);
           for (int64_t e = 0; e < d; ++e)
             k.st(dq[e], a[3], k.add(qb, k.idx(e)));
         });
  // Columns j: dk_j = scale sum_{i>=j} ds_ij q_i and dv_j = sum_{i>=j}
  // p_ij dy_i, one kernel each so that k_j (and v_j), the accumulator
  // and the row values fit in registers. Every thread of a warp walks
  // the rows i together (broadcast loads) and masks rows before its j.
  for (bool keys : {true, false}) {
    launch(op, key + (keys ? "k" : "v"), keys ? "attention_backward_k" : "attention_backward_v",
           types, args, rowsN,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             AttentionIndex ai{k, idx, tl, h, c, d};
             Value j = ai.row;
             SmallVector<Value> kj = k.loadVec(a[1], ai.qkv(j, 1), d);
             SmallVector<Value> vj;
             if (keys)
               vj = k.loadVec(a[1], ai.qkv(j, 2), d);
             Value rowBase = k.sub(idx, j); // the (b, h, 0) row of the stats
             Value start = k.sub(j, k.urem(j, k.idx(32))); // the warp's first j
             SmallVector<Value> zeros(d, k.f(0, ft));
             auto acc = k.loop(start, k.idx(tl), zeros, [&](Value i, ValueRange cur) {
               Value qb = ai.qkv(i, 0), dyb = ai.out(i);
               Value srow = k.mul(k.add(rowBase, i), k.idx(2));
               Value lse = k.ld(a[2], srow);
               Value sc = k.mul(k.dotVec(kj, a[1], qb), k.f(scale, ft));
               Value visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, i, j);
               Value p = k.select(visible, k.exp(k.sub(sc, lse)), k.f(0, ft));
               SmallVector<Value> next;
               if (keys) {
                 Value dsum = k.ld(a[2], k.add(srow, k.idx(1)));
                 Value dp = k.dotVec(vj, a[0], dyb);
                 Value ds = k.mul(k.mul(p, k.sub(dp, dsum)), k.f(scale, ft));
                 for (int64_t e = 0; e < d; ++e)
                   next.push_back(k.add(cur[e], k.mul(ds, k.ld(a[1], k.add(qb, k.idx(e))))));
               } else {
                 for (int64_t e = 0; e < d; ++e)
                   next.push_back(k.add(cur[e], k.mul(p, k.ld(a[0], k.add(dyb, k.idx(e))))));
               }
               return next;
             });
             Value outBase = ai.qkv(j, keys ? 1 : 2);
             for (int64_t e = 0; e < d; ++e)
               k.st(acc[e], a[3], k.add(outBase, k.idx(e)));
           });
  }
  // The scalar kernels' sums are of dqkv as stored, where the fusion's
  // body sums it before rounding: within dqkv's rounding.
  if (sum)
    sumColumns(flat(at.result), t(at.result), bsz * tl,
               computeOf(eltOf(at.result)));
  return success();
}

LogicalResult LoweringContext::lowerCausalAttentionGradOp(Operation *op) {
  auto grad = llvm::cast<CausalAttentionGradOp>(op);
  return lowerCausalAttentionGrad(op, keyOf(op),
                                  {grad.getGrad(), grad.getQkv(), grad.getOutput(), grad.getLse(),
                                   grad.getResult(), grad.getNumHeads()},
                                  Value());
}

LogicalResult LoweringContext::lowerAttentionGradSumFusion(FusionOp fusion,
                                                           CausalAttentionGradOp grad,
                                                           ReduceOp sum) {
  // The fusion's operands the body widens, and its results the body
  // narrows: the kernels load and store them.
  auto operand = [&](Value v) {
    return fusion.getInputs()[llvm::cast<BlockArgument>(stripCasts(v)).getArgNumber()];
  };
  auto yield = llvm::cast<YieldOp>(fusion.getBody().front().getTerminator());
  Value result, sums;
  for (auto [r, v] : llvm::zip(fusion.getResults(), yield.getValues()))
    (stripCasts(v) == sum.getResult() ? sums : result) = r;
  return lowerCausalAttentionGrad(fusion, fusionKey(fusion),
                                  {operand(grad.getGrad()), operand(grad.getQkv()),
                                   operand(grad.getOutput()), operand(grad.getLse()), result,
                                   grad.getNumHeads()},
                                  sums);
}

void registerAttentionLowerings(LoweringRegistry &registry) {
  registry.add<CausalAttentionOp>(&LoweringContext::lowerCausalAttentionOp);
  registry.add<CausalAttentionGradOp>(&LoweringContext::lowerCausalAttentionGradOp);
}

} // namespace gptc::codegen
