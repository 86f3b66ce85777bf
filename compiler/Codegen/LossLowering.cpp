//===- LossLowering.cpp - fused softmax cross-entropy kernels ------------===//

#include "compiler/Codegen/LossLowering.h"
#include "compiler/Codegen/RowLanes.h"

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
                                   const CrossEntropyShape &s, bool savedLse) {
  KB k{b, loc};
  Type ft = b.getF32Type();
  RowLanes r(k, idx, s.lanes);
  Value base = k.mul(r.row, k.idx(s.paddedVocab));
  Value lse = savedLse ? k.ld(a[4], r.row) : logSumExp(r, a[1], base, s.vocab);
  Value g = k.div(k.ld(a[0], k.idx(0)), k.f(s.rows, ft));
  Value target = k.toIndex(k.ld(a[2], r.row));
  // A gradient rounded to 16 bits does not need expf's last bits.
  Type out = llvm::cast<MemRefType>(a[3].getType()).getElementType();
  bool fast = out.getIntOrFloatBitWidth() <= 16;
  r.each(s.paddedVocab, [&](Value col) -> SmallVector<KB::Store> {
    Value i = k.add(base, col);
    Value p = expFor(k, k.sub(k.ld(a[1], i), lse), fast);
    Value hit = k.cmpEq(col, target);
    Value d = k.mul(g, k.sub(p, k.select(hit, k.f(1, ft), k.f(0, ft))));
    return {{k.select(k.cmpUlt(col, k.idx(s.vocab)), d, k.f(0, ft)), a[3], i}};
  });
}

} // namespace gptc::codegen
