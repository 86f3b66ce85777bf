//===- FlashAttention.cpp - tensor-core causal attention for sm_80+ ------===//
//
// Fragment layouts are PTX's for mma.sync.m16n8k16 with bf16 operands
// (lane = 4 * g + t):
//   A (16 x 16, row): 4 regs of 2 bf16: (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8)
//   B (16 x 8, col):  2 regs of 2 bf16: rows (2t, 2t+1) and (2t+8, 2t+9) of column g
//   C (16 x 8, f32):  (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
// Two C tiles side by side hold exactly an A fragment's elements, so scores
// turn into the A operand of the next product without leaving registers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/FlashAttention.h"
#include "compiler/Codegen/KernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace gptc::codegen {
namespace {

constexpr int64_t kTile = 16;

using Frag = SmallVector<Value, 4>;
/// Offset of element (row, 0) of a row-major matrix.
using RowFn = std::function<Value(Value)>;

/// Warp-level helpers: the lane's coordinates and the fragment plumbing.
struct Warp {
  KB &k;
  Value g, t; // lane / 4, lane % 4
  Type i32, f32, bf16;
  VectorType pairType;

  Warp(KB &k, Value idx) : k(k) {
    Value lane = k.urem(idx, k.idx(32));
    g = k.udiv(lane, k.idx(4));
    t = k.urem(lane, k.idx(4));
    i32 = k.b.getI32Type();
    f32 = k.b.getF32Type();
    bf16 = k.b.getBF16Type();
    pairType = VectorType::get({2}, bf16);
  }

  Value bits(Value pair) { return LLVM::BitcastOp::create(k.b, k.loc, i32, pair); }
  /// mem[off], mem[off + 1] (4-byte aligned) as one register.
  Value pairAt(Value mem, Value off) {
    return bits(vector::LoadOp::create(k.b, k.loc, pairType, mem, ValueRange{off},
                                       /*nontemporal=*/false, llvm::MaybeAlign(4)));
  }
  /// mem[off0], mem[off1] as one register.
  Value pairOf(Value mem, Value off0, Value off1) {
    Value x = memref::LoadOp::create(k.b, k.loc, mem, ValueRange{off0});
    Value y = memref::LoadOp::create(k.b, k.loc, mem, ValueRange{off1});
    return bits(vector::FromElementsOp::create(k.b, k.loc, pairType, ValueRange{x, y}));
  }
  /// f32 x, y rounded to bf16 in one register.
  Value pack(Value x, Value y) {
    return bits(vector::FromElementsOp::create(
        k.b, k.loc, pairType, ValueRange{k.trunc(x, bf16), k.trunc(y, bf16)}));
  }

  /// A: the 16 x 16 block at rows r0.., columns c0.. of a row-major matrix.
  Frag loadA(Value mem, const RowFn &row, Value r0, int64_t c0) {
    Value ra = row(k.add(r0, g)), rb = row(k.add(r0, k.add(g, k.idx(8))));
    Value c = k.add(k.idx(c0), k.mul(t, k.idx(2)));
    Value c8 = k.add(c, k.idx(8));
    return {pairAt(mem, k.add(ra, c)), pairAt(mem, k.add(rb, c)), pairAt(mem, k.add(ra, c8)),
            pairAt(mem, k.add(rb, c8))};
  }
  /// B[kk][n] = M[n0 + n][c0 + kk]: 8 rows of M are B's columns.
  Frag loadBRows(Value mem, const RowFn &row, Value n0, int64_t c0) {
    Value r = row(k.add(n0, g));
    Value c = k.add(k.idx(c0), k.mul(t, k.idx(2)));
    return {pairAt(mem, k.add(r, c)), pairAt(mem, k.add(r, k.add(c, k.idx(8))))};
  }
  /// B[kk][n] = M[k0 + kk][c0 + n]: 16 rows of M, 8 of its columns.
  Frag loadBCols(Value mem, const RowFn &row, Value k0, int64_t c0) {
    Value col = k.add(k.idx(c0), g);
    Value r = k.add(k0, k.mul(t, k.idx(2)));
    auto at = [&](int64_t dr) { return k.add(row(k.add(r, k.idx(dr))), col); };
    return {pairOf(mem, at(0), at(1)), pairOf(mem, at(8), at(9))};
  }
  /// Two C tiles (columns 0-7 and 8-15) as the A fragment of a 16-wide step.
  Frag toA(ArrayRef<Value> lo, ArrayRef<Value> hi) {
    return {pack(lo[0], lo[1]), pack(lo[2], lo[3]), pack(hi[0], hi[1]), pack(hi[2], hi[3])};
  }

  /// c + a b on the tensor cores.
  Frag mma(ArrayRef<Value> a, ArrayRef<Value> bm, ArrayRef<Value> c) {
    auto result = LLVM::LLVMStructType::getLiteral(k.b.getContext(), {f32, f32, f32, f32});
    auto op = NVVM::MmaOp::create(
        k.b, k.loc, result, a, bm, c, {16, 8, 16}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
    Frag out;
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, op.getRes(), i));
    return out;
  }
  Frag zeros() { return Frag(4, k.f(0, f32)); }

  /// Reductions over the 4 lanes of a group (one C row).
  Value shuffle(Value v, int32_t mask) {
    return gpu::ShuffleOp::create(k.b, k.loc, v, mask, 32, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  Value groupMax(Value v) {
    v = k.fmax(v, shuffle(v, 1));
    return k.fmax(v, shuffle(v, 2));
  }
  Value groupSum(Value v) {
    v = k.add(v, shuffle(v, 1));
    return k.add(v, shuffle(v, 2));
  }
};

/// The (batch, head) of a warp and the row offsets of its q, k, v, y/dy.
struct Heads {
  RowFn q, key, val, out;
  Value bh; // batch * H + head
};

Heads headsOf(KB &k, Value bh, const AttentionShape &s) {
  int64_t c = s.heads * s.headDim;
  Value batch = k.udiv(bh, k.idx(s.heads)), head = k.urem(bh, k.idx(s.heads));
  Value hd = k.mul(head, k.idx(s.headDim));
  Value qkvBase = k.add(k.mul(batch, k.idx(s.seq * 3 * c)), hd);
  Value outBase = k.add(k.mul(batch, k.idx(s.seq * c)), hd);
  KB *kp = &k;
  auto rows = [kp](Value base, int64_t part, int64_t stride) -> RowFn {
    return [kp, base, part, stride](Value r) {
      return kp->add(kp->add(base, kp->idx(part)), kp->mul(r, kp->idx(stride)));
    };
  };
  return {rows(qkvBase, 0, 3 * c), rows(qkvBase, c, 3 * c), rows(qkvBase, 2 * c, 3 * c),
          rows(outBase, 0, c), bh};
}

/// The 16-row tile of thread idx's warp and its (batch, head). Query tiles
/// are dealt latest first and key tiles earliest first: either way the
/// longest work starts first and the grid's tail is short.
struct WarpTile {
  Value tile, row0; // tile index, its first row
  Heads hs;
};

WarpTile warpTile(KB &k, Value idx, const AttentionShape &s, bool queries) {
  int64_t tiles = s.seq / kTile;
  Value warp = k.udiv(idx, k.idx(32));
  Value tile = k.urem(warp, k.idx(tiles));
  if (queries)
    tile = k.sub(k.idx(tiles - 1), tile);
  return {tile, k.mul(tile, k.idx(kTile)), headsOf(k, k.udiv(warp, k.idx(tiles)), s)};
}

/// Scores of the 16 x 16 block (rows r0.., columns n0..): two C tiles of
/// sum over the head dimension of A(rows) B(columns).
std::array<Frag, 2> scores(Warp &w, ArrayRef<Frag> rowsA, Value mem, const RowFn &cols,
                           Value n0) {
  std::array<Frag, 2> s;
  for (int64_t n = 0; n < 2; ++n) {
    Frag acc = w.zeros();
    Value first = w.k.add(n0, w.k.idx(8 * n));
    for (size_t kk = 0; kk < rowsA.size(); ++kk)
      acc = w.mma(rowsA[kk], w.loadBRows(mem, cols, first, kTile * kk), acc);
    s[n] = acc;
  }
  return s;
}

/// Column of C element e of tile n, relative to the tile pair's start.
Value columnOf(Warp &w, int64_t n, int64_t e) {
  return w.k.add(w.k.idx(8 * n + (e & 1)), w.k.mul(w.t, w.k.idx(2)));
}
/// Row of C element e, relative to the tile's start.
Value rowOf(Warp &w, int64_t e) { return e < 2 ? w.g : w.k.add(w.g, w.k.idx(8)); }

/// Tiles [first, first + count) of a loop's flat carried values, 4 each.
SmallVector<Frag> tilesOf(ValueRange values, int64_t first, int64_t count) {
  SmallVector<Frag> tiles;
  for (int64_t i = first; i < first + count; ++i)
    tiles.push_back(Frag(values.begin() + 4 * i, values.begin() + 4 * i + 4));
  return tiles;
}

/// p = exp(scale * score - lse) where key <= query, else 0: a probability
/// recomputed from the row's log-sum-exp, as both backward kernels do.
Value causalProbability(KB &k, Value score, Value lse, Value key, Value query, double scale) {
  Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
  Type f32 = score.getType();
  Value p = k.exp(k.sub(k.mul(score, k.f(scale, f32)), lse));
  return k.select(visible, p, k.f(0, f32));
}

/// dS = scale * p * (dP - D): the score gradient, from dP = dy . v.
Value scoreGrad(KB &k, Value p, Value dp, Value dsum, double scale) {
  return k.mul(k.mul(p, k.sub(dp, dsum)), k.f(scale, p.getType()));
}

/// The forward recurrence of one query tile: row maxima m, lane-partial
/// row sums l (rows g and g + 8) and the unnormalised output O, d/8 tiles.
struct Online {
  Value m[2], l[2];
  SmallVector<Frag> o;
};

Online forwardTile(Warp &w, ArrayRef<Frag> qa, Value qkv, const Heads &hs, Value q0,
                   Value tile, const AttentionShape &s) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  SmallVector<Value> init = {k.f(-INFINITY, w.f32), k.f(-INFINITY, w.f32), k.f(0, w.f32),
                             k.f(0, w.f32)};
  init.append(dTiles * 4, k.f(0, w.f32));
  auto st = k.loop(k.idx(0), k.add(tile, k.idx(1)), init, [&](Value kt, ValueRange cur) {
    Value key0 = k.mul(kt, k.idx(kTile));
    std::array<Frag, 2> sc = scores(w, qa, qkv, hs.key, key0);
    // Scale, and hide keys after the query (only the diagonal tile has any).
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value key = k.add(key0, columnOf(w, n, e)), query = k.add(q0, rowOf(w, e));
        Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
        sc[n][e] = k.select(visible, k.mul(sc[n][e], k.f(s.scale, w.f32)),
                            k.f(-INFINITY, w.f32));
      }
    SmallVector<Value> next(4);
    Value mNew[2], corr[2];
    for (int64_t r = 0; r < 2; ++r) {
      Value mx = k.fmax(k.fmax(sc[0][2 * r], sc[0][2 * r + 1]), k.fmax(sc[1][2 * r], sc[1][2 * r + 1]));
      mNew[r] = k.fmax(cur[r], w.groupMax(mx));
      corr[r] = k.exp(k.sub(cur[r], mNew[r]));
      next[r] = mNew[r];
    }
    Value rowSum[2] = {k.f(0, w.f32), k.f(0, w.f32)};
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        sc[n][e] = k.exp(k.sub(sc[n][e], mNew[e / 2]));
        rowSum[e / 2] = k.add(rowSum[e / 2], sc[n][e]);
      }
    for (int64_t r = 0; r < 2; ++r)
      next[2 + r] = k.add(k.mul(cur[2 + r], corr[r]), rowSum[r]);
    Frag pa = w.toA(sc[0], sc[1]);
    for (int64_t dt = 0; dt < dTiles; ++dt) {
      Frag o;
      for (int64_t e = 0; e < 4; ++e)
        o.push_back(k.mul(cur[4 + 4 * dt + e], corr[e / 2]));
      o = w.mma(pa, w.loadBCols(qkv, hs.val, key0, 8 * dt), o);
      next.append(o.begin(), o.end());
    }
    return next;
  });
  Online on;
  for (int64_t r = 0; r < 2; ++r) {
    on.m[r] = st[r];
    on.l[r] = w.groupSum(st[2 + r]);
  }
  on.o = tilesOf(ValueRange(st).drop_front(4), 0, dTiles);
  return on;
}

/// Stores C fragments (16 rows from r0, d/8 tiles) into a row-major matrix.
void storeTiles(Warp &w, ArrayRef<Frag> tiles, Value mem, const RowFn &row, Value r0,
                ArrayRef<Value> rowScale) {
  KB &k = w.k;
  for (size_t dt = 0; dt < tiles.size(); ++dt)
    for (int64_t e = 0; e < 4; ++e) {
      Value at = k.add(row(k.add(r0, rowOf(w, e))), columnOf(w, 0, e));
      at = k.add(at, k.idx(8 * dt));
      Value v = tiles[dt][e];
      if (!rowScale.empty())
        v = k.mul(v, rowScale[e / 2]);
      k.st(v, mem, at);
    }
}

SmallVector<Frag> loadRowsA(Warp &w, Value mem, const RowFn &row, Value r0, int64_t d) {
  SmallVector<Frag> a;
  for (int64_t kk = 0; kk < d / kTile; ++kk)
    a.push_back(w.loadA(mem, row, r0, kTile * kk));
  return a;
}

} // namespace

bool flashAttentionApplies(const AttentionShape &s, Type element) {
  return element.isBF16() && s.headDim % kTile == 0 && s.seq % kTile == 0;
}

int64_t flashAttentionThreads(const AttentionShape &s) {
  return s.batch * s.heads * (s.seq / kTile) * 32;
}

void buildFlashAttentionForward(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                const AttentionShape &s) {
  KB k{b, loc};
  Warp w(k, idx);
  WarpTile wt = warpTile(k, idx, s, /*queries=*/true);
  Value tile = wt.tile, q0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> qa = loadRowsA(w, a[0], hs.q, q0, s.headDim);
  Online on = forwardTile(w, qa, a[0], hs, q0, tile, s);
  Value inv[2] = {k.div(k.f(1, w.f32), on.l[0]), k.div(k.f(1, w.f32), on.l[1])};
  storeTiles(w, on.o, a[1], hs.out, q0, inv);
}

void buildFlashAttentionBackwardQuery(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                      const AttentionShape &s) {
  KB k{b, loc};
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2], dqkv = a[3];
  int64_t dTiles = s.headDim / 8;
  WarpTile wt = warpTile(k, idx, s, /*queries=*/true);
  Value tile = wt.tile, q0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> qa = loadRowsA(w, qkv, hs.q, q0, s.headDim);

  // Pass 1: the forward again, for lse_i and D_i = dy_i . y_i.
  Online on = forwardTile(w, qa, qkv, hs, q0, tile, s);
  Value lse[2], dsum[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value inv = k.div(k.f(1, w.f32), on.l[r]);
    lse[r] = k.add(on.m[r], k.log(on.l[r]));
    Value part = k.f(0, w.f32);
    for (int64_t dt = 0; dt < dTiles; ++dt)
      for (int64_t e = 2 * r; e < 2 * r + 2; ++e) {
        Value at = k.add(hs.out(k.add(q0, rowOf(w, e))), k.add(columnOf(w, 0, e), k.idx(8 * dt)));
        part = k.add(part, k.mul(k.mul(on.o[dt][e], inv), k.ld(dy, at)));
      }
    dsum[r] = w.groupSum(part);
  }
  Value rowBase = k.add(k.mul(hs.bh, k.idx(s.seq)), q0);
  auto first = scf::IfOp::create(b, loc, k.cmpEq(w.t, k.idx(0)), /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    for (int64_t r = 0; r < 2; ++r) {
      Value row = k.add(rowBase, rowOf(w, 2 * r));
      k.st(lse[r], stats, k.mul(row, k.idx(2)));
      k.st(dsum[r], stats, k.add(k.mul(row, k.idx(2)), k.idx(1)));
    }
  }

  // Pass 2: dq_i = scale sum_j p_ij (dy_i . v_j - D_i) k_j.
  SmallVector<Frag> dya = loadRowsA(w, dy, hs.out, q0, s.headDim);
  SmallVector<Value> init(dTiles * 4, k.f(0, w.f32));
  auto dq = k.loop(k.idx(0), k.add(tile, k.idx(1)), init, [&](Value kt, ValueRange cur) {
    Value key0 = k.mul(kt, k.idx(kTile));
    std::array<Frag, 2> p = scores(w, qa, qkv, hs.key, key0);
    std::array<Frag, 2> dp = scores(w, dya, qkv, hs.val, key0);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value key = k.add(key0, columnOf(w, n, e)), query = k.add(q0, rowOf(w, e));
        Value pe = causalProbability(k, p[n][e], lse[e / 2], key, query, s.scale);
        p[n][e] = scoreGrad(k, pe, dp[n][e], dsum[e / 2], s.scale);
      }
    Frag dsa = w.toA(p[0], p[1]);
    SmallVector<Value> next;
    for (int64_t dt = 0; dt < dTiles; ++dt) {
      Frag acc(cur.begin() + 4 * dt, cur.begin() + 4 * dt + 4);
      acc = w.mma(dsa, w.loadBCols(qkv, hs.key, key0, 8 * dt), acc);
      next.append(acc.begin(), acc.end());
    }
    return next;
  });
  storeTiles(w, tilesOf(dq, 0, dTiles), dqkv, hs.q, q0, {});
}

void buildFlashAttentionBackwardKeyValue(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                         const AttentionShape &s) {
  KB k{b, loc};
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2], dqkv = a[3];
  int64_t tiles = s.seq / kTile, dTiles = s.headDim / 8;
  // Key tile j meets the query tiles j.. .
  WarpTile wt = warpTile(k, idx, s, /*queries=*/false);
  Value tile = wt.tile, k0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> ka = loadRowsA(w, qkv, hs.key, k0, s.headDim);
  SmallVector<Frag> va = loadRowsA(w, qkv, hs.val, k0, s.headDim);
  Value rowBase = k.mul(hs.bh, k.idx(s.seq));

  // Transposed blocks (rows = keys, columns = queries): dv_j = sum_i p_ij
  // dy_i and dk_j = scale sum_i p_ij (dy_i . v_j - D_i) q_i.
  SmallVector<Value> init(2 * dTiles * 4, k.f(0, w.f32));
  auto acc = k.loop(tile, k.idx(tiles), init, [&](Value qt, ValueRange cur) {
    Value q0 = k.mul(qt, k.idx(kTile));
    std::array<Frag, 2> p = scores(w, ka, qkv, hs.q, q0);
    std::array<Frag, 2> ds = scores(w, va, dy, hs.out, q0);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value query = k.add(q0, columnOf(w, n, e)), key = k.add(k0, rowOf(w, e));
        Value row = k.mul(k.add(rowBase, query), k.idx(2));
        Value lse = k.ld(stats, row), dsum = k.ld(stats, k.add(row, k.idx(1)));
        p[n][e] = causalProbability(k, p[n][e], lse, key, query, s.scale);
        ds[n][e] = scoreGrad(k, p[n][e], ds[n][e], dsum, s.scale);
      }
    Frag pa = w.toA(p[0], p[1]), dsa = w.toA(ds[0], ds[1]);
    SmallVector<Value> next;
    for (int64_t dt = 0; dt < dTiles; ++dt) {
      Frag dv(cur.begin() + 4 * dt, cur.begin() + 4 * dt + 4);
      dv = w.mma(pa, w.loadBCols(dy, hs.out, q0, 8 * dt), dv);
      next.append(dv.begin(), dv.end());
    }
    for (int64_t dt = 0; dt < dTiles; ++dt) {
      Frag dk(cur.begin() + 4 * (dTiles + dt), cur.begin() + 4 * (dTiles + dt) + 4);
      dk = w.mma(dsa, w.loadBCols(qkv, hs.q, q0, 8 * dt), dk);
      next.append(dk.begin(), dk.end());
    }
    return next;
  });
  storeTiles(w, tilesOf(acc, dTiles, dTiles), dqkv, hs.key, k0, {});
  storeTiles(w, tilesOf(acc, 0, dTiles), dqkv, hs.val, k0, {});
}

} // namespace gptc::codegen
