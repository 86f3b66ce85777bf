//===- RowLanes.h - row kernels: a row shared by a warp's lanes ----------===//
//
// Shared by the row kernels of Lowering.cpp (layernorm, softmax) and
// LossLowering.cpp (cross-entropy).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_ROWLANES_H
#define GPTC_COMPILER_CODEGEN_ROWLANES_H

#include "compiler/Codegen/KernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>

namespace gptc::codegen {

/// How the threads of a row kernel share a row: `lanes` consecutive threads
/// (a warp on CUDA, one thread on the Host target) take row idx / lanes;
/// lane l visits columns l, l + lanes, ... (coalesced), and sums and
/// maxima are combined across the lanes with butterfly shuffles, in a fixed
/// order, so that every lane ends with the row's value.
struct RowLanes {
  KB &k;
  int64_t lanes;
  Value row, lane;

  RowLanes(KB &k, Value idx, int64_t lanes) : k(k), lanes(lanes) {
    row = lanes == 1 ? idx : k.udiv(idx, k.idx(lanes));
    lane = lanes == 1 ? k.idx(0) : k.urem(idx, k.idx(lanes));
  }
  /// Columns per lane and loop trip of `each` and `fold`: straight-line
  /// code whose loads are all in flight together.
  static constexpr int64_t kUnroll = 8;

  /// Stores storesAt(i) for this lane's columns i < n; in each trip of
  /// kUnroll columns the values (loads included) come before the stores.
  void each(int64_t n, function_ref<SmallVector<KB::Store>(Value)> storesAt) {
    if (isResident(n)) {
      // kUnroll columns' values, then their stores, as the loop's trips.
      for (size_t j0 = 0; j0 < residentCols.size(); j0 += kUnroll) {
        SmallVector<KB::Store> stores;
        for (size_t j = j0; j < std::min(residentCols.size(), j0 + kUnroll); ++j)
          llvm::append_range(stores, storesAt(residentCols[j]));
        for (const KB::Store &s : stores)
          k.st(s.value, s.mem, s.index);
      }
      return;
    }
    int64_t full = unrolledEnd(n);
    if (full > 0)
      k.loop(lane, k.idx(full), k.idx(lanes * kUnroll), {}, [&](Value i, ValueRange) {
        k.storeStrided(i, kUnroll, lanes, storesAt);
        return SmallVector<Value>{};
      });
    k.loop(k.add(k.idx(full), lane), k.idx(n), k.idx(lanes), {}, [&](Value i, ValueRange) {
      k.storeStrided(i, 1, lanes, storesAt);
      return SmallVector<Value>{};
    });
  }
  /// A fold over this lane's columns i < n in chunks, in increasing i:
  /// body(columns, carried) gets kUnroll columns per loop trip, then the
  /// rest one at a time.
  SmallVector<Value> foldChunks(int64_t n, ValueRange init,
                                function_ref<SmallVector<Value>(llvm::ArrayRef<Value>, ValueRange)> body) {
    if (isResident(n))
      return body(residentCols, init);
    int64_t full = unrolledEnd(n);
    SmallVector<Value> cur(init);
    if (full > 0)
      cur = k.loop(lane, k.idx(full), k.idx(lanes * kUnroll), cur, [&](Value i, ValueRange c) {
        SmallVector<Value> cols;
        for (int64_t e = 0; e < kUnroll; ++e)
          cols.push_back(e == 0 ? i : k.add(i, k.idx(e * lanes)));
        return body(cols, c);
      });
    return k.loop(k.add(k.idx(full), lane), k.idx(n), k.idx(lanes), cur,
                  [&](Value i, ValueRange c) { return body({i}, c); });
  }
  /// A fold over this lane's columns i < n, one column at a time in
  /// increasing i (straight-line within a chunk): the same order, so the
  /// same bits, as a plain loop.
  SmallVector<Value> fold(int64_t n, ValueRange init,
                          function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return foldChunks(n, init, [&](llvm::ArrayRef<Value> cols, ValueRange c) {
      SmallVector<Value> v(c);
      for (Value i : cols)
        v = body(i, v);
      return v;
    });
  }
  /// The end of the columns the unrolled trips cover.
  int64_t unrolledEnd(int64_t n) const { return n / (lanes * kUnroll) * (lanes * kUnroll); }

  /// Most columns per lane a row kernel keeps in registers.
  static constexpr int64_t kMaxResident = 64;
  /// The columns of a resident row (keepResident), else empty.
  SmallVector<Value> residentCols;
  int64_t residentN = 0;
  /// Makes the row resident when a lane's columns of it fit in registers
  /// (n a multiple of the lanes, at most kMaxResident per lane): `fold` and
  /// `each` over n columns then visit this lane's columns straight-line,
  /// passing the same column values every pass, so that RowVals can hold a
  /// row's values in registers instead of each pass reading the row again
  /// (from L1 or L2: the wide rows of all warps of an SM do not fit in L1).
  /// The order of the columns, and so the bits, stay those of the loops.
  bool keepResident(int64_t n) {
    if (lanes == 1 || n % lanes || n / lanes > kMaxResident)
      return false;
    residentN = n;
    for (int64_t j = 0; j < n / lanes; ++j)
      residentCols.push_back(j == 0 ? lane : k.add(lane, k.idx(j * lanes)));
    return true;
  }
  bool isResident(int64_t n) const { return !residentCols.empty() && n == residentN; }

  /// The value of lane (this lane xor mask).
  Value shuffle(Value v, int32_t mask) {
    return mlir::gpu::ShuffleOp::create(k.b, k.loc, v, mask, static_cast<int32_t>(lanes),
                                        mlir::gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  Value combine(Value v, bool max) {
    for (int32_t m = 1; m < lanes; m *= 2) {
      Value other = shuffle(v, m);
      v = max ? k.fmax(v, other) : k.add(v, other);
    }
    return v;
  }
  Value sum(Value v) { return combine(v, false); }
  Value max(Value v) { return combine(v, true); }
  /// body() on lane 0 only: row scalars are written once.
  void once(function_ref<void()> body) {
    if (lanes == 1)
      return body();
    auto op = mlir::scf::IfOp::create(k.b, k.loc, k.cmpEq(lane, k.idx(0)), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(k.b);
    k.b.setInsertionPointToStart(&op.getThenRegion().front());
    body();
  }
};

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_ROWLANES_H
