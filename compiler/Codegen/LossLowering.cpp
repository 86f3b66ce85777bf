//===- LossLowering.cpp - fused softmax cross-entropy kernels ------------===//

#include "compiler/Codegen/LossLowering.h"
#include "compiler/Codegen/Fp8Codes.h"
#include "compiler/Codegen/RowLanes.h"
#include "compiler/Codegen/NvvmKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <cfloat>

using namespace mlir;

namespace gptc::codegen {
namespace {

/// Merges running (max, sum of exp(x - max)) pairs.
std::pair<Value, Value> mergeStats(KB &k, Value m1, Value s1, Value m2, Value s2) {
  Value m = k.fmax(m1, m2);
  return {m, k.add(k.mul(s1, k.exp(k.sub(m1, m))), k.mul(s2, k.exp(k.sub(m2, m))))};
}

/// exp for values that come from (or go to) 16-bit tensors: their rounding
/// dwarfs the SFU's error (KB::fastExp); wider ones keep the rounded expf.
Value expFor(KB &k, Value v, bool fast) { return fast ? k.fastExp(v) : k.exp(v); }

/// log(sum exp(x[base + i])) over i < n in one pass: each lane folds its
/// columns online (kUnroll at a time: their maximum first, then one rescale
/// of the running sum), then the lanes merge in a fixed butterfly order.
/// The running maximum starts at the lowest finite float, not -inf, so that
/// exp(m - max) of an empty lane is exp(0) * 0 and never NaN.
Value logSumExp(RowLanes &r, Value x, Value base, int64_t n) {
  KB &k = r.k;
  Type ft = k.b.getF32Type();
  bool fast = llvm::cast<MemRefType>(x.getType()).getElementType().getIntOrFloatBitWidth() <= 16;
  auto acc = r.foldChunks(n, {k.f(-FLT_MAX, ft), k.f(0, ft)},
                          [&](ArrayRef<Value> cols, ValueRange cur) {
    SmallVector<Value> xs;
    for (Value i : cols)
      xs.push_back(k.ld(x, k.add(base, i)));
    Value m = cur[0];
    for (Value xi : xs)
      m = k.fmax(m, xi);
    Value s = k.mul(cur[1], expFor(k, k.sub(cur[0], m), fast));
    for (Value xi : xs)
      s = k.add(s, expFor(k, k.sub(xi, m), fast));
    return SmallVector<Value>{m, s};
  });
  Value m = acc[0], s = acc[1];
  for (int32_t mask = 1; mask < r.lanes; mask *= 2)
    std::tie(m, s) = mergeStats(k, m, s, r.shuffle(m, mask), r.shuffle(s, mask));
  return k.add(m, k.log(s));
}

/// cond ? then() : otherwise(), both yielding values of the same types.
SmallVector<Value> ifElseValues(OpBuilder &b, Location loc, Value cond,
                                function_ref<SmallVector<Value>()> then,
                                function_ref<SmallVector<Value>()> otherwise) {
  auto op = scf::IfOp::create(
      b, loc, cond, [&](OpBuilder &, Location l) { scf::YieldOp::create(b, l, then()); },
      [&](OpBuilder &, Location l) { scf::YieldOp::create(b, l, otherwise()); });
  return SmallVector<Value>(op.getResults());
}

/// The e5m2 scale of gradients bounded by |g|: 57344 / |g|, 1 where |g|
/// is 0 or not finite or the quotient overflows f32 (|g| below ~1.7e-34)
/// (gpt.fp8_cross_entropy_grad).
Value boundScale(KB &k, Value g) {
  Type ft = k.b.getF32Type();
  Value bound = math::AbsFOp::create(k.b, k.loc, g);
  Value s = k.div(k.f(gpt::fp8MaxFinite(gpt::Fp8Format::E5M2), ft), bound);
  Value usable = arith::AndIOp::create(k.b, k.loc, usableAmax(k, bound), usableAmax(k, s));
  return k.select(usable, s, k.f(1, ft));
}

} // namespace

void buildCrossEntropyForwardRows(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                  const CrossEntropyShape &s) {
  KB k{b, loc};
  RowLanes r(k, idx, s.lanes);
  Value base = k.mul(r.row, k.idx(s.paddedVocab));
  Value lse = logSumExp(r, a[0], base, s.vocab);
  r.once([&] {
    Value target = k.toIndex(k.ld(a[1], r.row));
    k.st(k.sub(lse, k.ld(a[0], k.add(base, target))), a[2], r.row);
    k.st(lse, a[3], r.row);
  });
}

void buildCrossEntropyBackwardRows(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                   const CrossEntropyShape &s, bool savedLse,
                                   GradStore store) {
  KB k{b, loc};
  Type ft = b.getF32Type();
  RowLanes r(k, idx, s.lanes);
  Value base = k.mul(r.row, k.idx(s.paddedVocab));
  Value lse = savedLse ? k.ld(a[4], r.row) : logSumExp(r, a[1], base, s.vocab);
  Value g = k.div(k.ld(a[0], k.idx(0)), k.f(s.rows, ft));
  Value scale = store.fp8 ? boundScale(k, g) : Value();
  Value target = k.toIndex(k.ld(a[2], r.row));
  // A gradient rounded to 16 bits (or 8) does not need expf's last bits.
  Type out = llvm::cast<MemRefType>(a[3].getType()).getElementType();
  bool fast = out.getIntOrFloatBitWidth() <= 16;
  r.each(s.paddedVocab, [&](Value col) -> SmallVector<KB::Store> {
    Value i = k.add(base, col);
    Value p = expFor(k, k.sub(k.ld(a[1], i), lse), fast);
    Value hit = k.cmpEq(col, target);
    Value d = k.mul(g, k.sub(p, k.select(hit, k.f(1, ft), k.f(0, ft))));
    d = k.select(k.cmpUlt(col, k.idx(s.vocab)), d, k.f(0, ft));
    if (store.fp8)
      d = fp8Bits(k, k.mul(d, scale), gpt::Fp8Format::E5M2);
    return {{d, a[3], i}};
  });
  if (store.fp8)
    r.once([&] {
      buildIf(k, k.cmpEq(r.row, k.idx(0)),
              [&] { k.st(k.div(k.f(1, ft), scale), a.back(), k.idx(0)); });
    });
}

int64_t crossEntropyOnePassSharedBytes(const CrossEntropyShape &s, int64_t blockThreads) {
  return s.paddedVocab * 2 + blockThreads / 32 * 2 * 4;
}

bool crossEntropyOnePassApplies(const CrossEntropyShape &s, Type logits, int64_t blockThreads) {
  // 99 KiB: the least a block may opt in to on the chips gptc compiles for
  // (sm_86, sm_89, sm_120, sm_121; cudaPtxFeature);
  // GPT-2's row takes 98.3 KiB.
  return logits.getIntOrFloatBitWidth() == 16 && s.paddedVocab % 8 == 0 &&
         blockThreads % 32 == 0 && crossEntropyOnePassSharedBytes(s, blockThreads) <= 99 * 1024;
}

void buildCrossEntropyOnePass(OpBuilder &b, Location loc, Value idx, ValueRange a,
                              const CrossEntropyShape &s, int64_t blockThreads,
                              GradStore store) {
  KB k{b, loc};
  Type f32 = b.getF32Type();
  Type elt = llvm::cast<MemRefType>(a[0].getType()).getElementType();
  int64_t warps = blockThreads / 32, vectors = s.paddedVocab / 8;
  Value tid = k.urem(idx, k.idx(blockThreads)), row = k.udiv(idx, k.idx(blockThreads));
  Value base = k.mul(row, k.idx(s.paddedVocab));
  // Dynamic shared memory: the row, then each warp's (max, sum).
  Value raw = dynamicSharedMemory(k);
  Value rowSm = sharedView(k, raw, 0, s.paddedVocab, elt);
  Value stats = sharedView(k, raw, s.paddedVocab * 2, 2 * warps, f32);

  // The row into shared memory, 16 bytes per copy, all in flight at once.
  Value from = globalPointer(k, a[0]), to = sharedPointer(k, rowSm);
  for (int64_t j = 0; j * blockThreads < vectors; ++j) {
    Value v = k.add(tid, k.idx(j * blockThreads));
    auto copy = [&] {
      Value at = k.mul(v, k.idx(8));
      copyAsync(k, elementPtr(k, to, elt, at), elementPtr(k, from, elt, k.add(base, at)), 16);
    };
    if ((j + 1) * blockThreads <= vectors) {
      copy();
      continue;
    }
    auto op = scf::IfOp::create(b, loc, k.cmpUlt(v, k.idx(vectors)), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    copy();
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);

  // The thread's (max, sum of exp(x - max)) over its vectors (each thread
  // reads back the vectors it copied), then the warp's in a fixed
  // butterfly order, then the block's, folding the warps in order.
  // Exponentials are 2^(x log2 e - max log2 e): one FMA and the SFU's ex2
  // per element. Only the row's last vectors hold columns past the vocab.
  Value log2e = k.f(kLog2e, f32);
  auto vectorAt = [&](Value v) { return k.ldVector(rowSm, k.mul(v, k.idx(8)), 8); };
  auto whole = [&](Value v) {
    return k.cmpUlt(k.add(k.mul(v, k.idx(8)), k.idx(7)), k.idx(s.vocab));
  };
  auto masked = [&](Value v, SmallVector<Value> xs, Value fill) {
    for (int64_t e = 0; e < 8; ++e) {
      Value col = k.add(k.mul(v, k.idx(8)), k.idx(e));
      xs[e] = k.select(k.cmpUlt(col, k.idx(s.vocab)), xs[e], fill);
    }
    return xs;
  };
  auto fold = [&](ArrayRef<Value> xs, ValueRange cur) {
    Value m = cur[0];
    for (Value x : xs)
      m = k.fmax(m, x);
    // A thread that has seen only padding keeps m = -FLT_MAX, whose
    // -m log2 e overflows: clamped, its terms are 2^(-huge) = 0, not NaN.
    Value negM = arith::MinimumFOp::create(b, loc, k.mul(m, k.f(-kLog2e, f32)),
                                           k.f(FLT_MAX, f32));
    Value sum = k.mul(cur[1], exp2Approx(k, k.mul(k.sub(cur[0], m), log2e)));
    for (Value x : xs)
      sum = k.add(sum, exp2Approx(k, math::FmaOp::create(b, loc, x, log2e, negM)));
    return SmallVector<Value>{m, sum};
  };
  auto acc = k.loop(tid, k.idx(vectors), k.idx(blockThreads), {k.f(-FLT_MAX, f32), k.f(0, f32)},
                    [&](Value v, ValueRange cur) {
    SmallVector<Value> cv(cur);
    return ifElseValues(b, loc, whole(v), [&] { return fold(vectorAt(v), cv); },
                        [&] { return fold(masked(v, vectorAt(v), k.f(-FLT_MAX, f32)), cv); });
  });
  Value m = acc[0], sum = acc[1];
  for (int32_t mask = 1; mask < 32; mask *= 2) {
    auto other = [&](Value x) {
      return gpu::ShuffleOp::create(b, loc, x, mask, 32, gpu::ShuffleMode::XOR).getShuffleResult();
    };
    std::tie(m, sum) = mergeStats(k, m, sum, other(m), other(sum));
  }
  Value warp = k.udiv(tid, k.idx(32));
  {
    auto first = scf::IfOp::create(b, loc, k.cmpEq(k.urem(tid, k.idx(32)), k.idx(0)),
                                   /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    k.st(m, stats, k.mul(warp, k.idx(2)));
    k.st(sum, stats, k.add(k.mul(warp, k.idx(2)), k.idx(1)));
  }
  gpu::BarrierOp::create(b, loc);
  m = k.ld(stats, k.idx(0));
  sum = k.ld(stats, k.idx(1));
  for (int64_t w = 1; w < warps; ++w)
    std::tie(m, sum) = mergeStats(k, m, sum, k.ld(stats, k.idx(2 * w)),
                                  k.ld(stats, k.idx(2 * w + 1)));
  Value lse = k.add(m, k.log(sum));
  Value negLse2 = k.mul(lse, k.f(-kLog2e, f32));
  auto probability = [&](Value x) {
    return exp2Approx(k, math::FmaOp::create(b, loc, x, log2e, negLse2));
  };

  // The gradient g p from the staged row over the logits in global memory
  // (they may be the same buffer); columns past the vocab get 0. As FP8:
  // the codes of g p s, s the scale of the bound |g|.
  Value g = k.div(k.ld(a[2], k.idx(0)), k.f(s.rows, f32));
  Value scale = store.fp8 ? boundScale(k, g) : Value();
  auto stored = [&](SmallVector<Value> ds) {
    if (!store.fp8)
      return ds;
    for (Value &d : ds)
      d = k.mul(d, scale);
    return fp8Codes(k, ds, gpt::Fp8Format::E5M2, store.cvt);
  };
  Value target = k.toIndex(k.ld(a[1], row));
  k.loop(tid, k.idx(vectors), k.idx(blockThreads), {}, [&](Value v, ValueRange) {
    auto grads = [&](SmallVector<Value> xs) {
      for (Value &x : xs)
        x = k.mul(g, probability(x));
      return xs;
    };
    SmallVector<Value> ds = ifElseValues(b, loc, whole(v), [&] { return grads(vectorAt(v)); },
                                         [&] { return masked(v, grads(vectorAt(v)), k.f(0, f32)); });
    k.stVector(stored(ds), a[4], k.add(base, k.mul(v, k.idx(8))));
    return SmallVector<Value>{};
  });
  if (store.fp8)
    buildIf(k, k.cmpEq(idx, k.idx(0)), [&] { k.st(k.div(k.f(1, f32), scale), a[5], k.idx(0)); });
  // The target's g (p - 1) and the row's loss, by the thread that stored
  // the target's vector (after it, in its program order).
  buildIf(k, k.cmpEq(k.urem(k.udiv(target, k.idx(8)), k.idx(blockThreads)), tid), [&] {
    Value xt = k.ld(rowSm, target);
    Value dt = k.mul(g, k.sub(probability(xt), k.f(1, f32)));
    if (store.fp8)
      dt = fp8Bits(k, k.mul(dt, scale), gpt::Fp8Format::E5M2);
    k.st(dt, a[4], k.add(base, target));
    k.st(k.sub(lse, xt), a[3], row);
  });
}

} // namespace gptc::codegen
