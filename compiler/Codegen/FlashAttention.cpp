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

  Value lane;

  Warp(KB &k, Value idx) : k(k) {
    lane = k.urem(idx, k.idx(32));
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
/// Blocks wholly below the diagonal skip the mask (`masked` false).
Value causalProbability(KB &k, Value score, Value lse, Value key, Value query, double scale,
                        bool masked) {
  Type f32 = score.getType();
  Value p = k.fastExp(k.sub(k.mul(score, k.f(scale, f32)), lse));
  if (!masked)
    return p;
  Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
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

/// One step of the online softmax over J = sc.size() blocks of 16 keys:
/// one row maximum, one rescale of O and J p.v products. `cur` is (m0, m1,
/// l0, l1, O...), sc[j] the raw scores of keys key0 + 16 j.. (global
/// indices, for the mask) and vFrags(j) the B fragments of those keys'
/// values, one per 8 d-columns, loaded only when block j's product needs
/// them (registers: this decides the kernel's occupancy).
SmallVector<Value> onlineStep(Warp &w, ValueRange cur, SmallVector<std::array<Frag, 2>> sc,
                              Value key0, Value q0, const AttentionShape &s, bool masked,
                              function_ref<SmallVector<Frag>(int64_t)> vFrags) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  // Scale, and hide keys after the query (only the diagonal tile has any).
  for (size_t j = 0; j < sc.size(); ++j)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value &x = sc[j][n][e];
        x = k.mul(x, k.f(s.scale, w.f32));
        if (!masked)
          continue;
        Value key = k.add(k.add(key0, k.idx(kTile * j)), columnOf(w, n, e));
        Value query = k.add(q0, rowOf(w, e));
        Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
        x = k.select(visible, x, k.f(-INFINITY, w.f32));
      }
  SmallVector<Value> next(4);
  Value mNew[2], corr[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value mx = cur[r];
    for (auto &blk : sc)
      for (int64_t n = 0; n < 2; ++n)
        mx = k.fmax(mx, k.fmax(blk[n][2 * r], blk[n][2 * r + 1]));
    mNew[r] = w.groupMax(mx);
    corr[r] = k.fastExp(k.sub(cur[r], mNew[r]));
    next[r] = mNew[r];
  }
  Value rowSum[2] = {k.f(0, w.f32), k.f(0, w.f32)};
  for (auto &blk : sc)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        blk[n][e] = k.fastExp(k.sub(blk[n][e], mNew[e / 2]));
        rowSum[e / 2] = k.add(rowSum[e / 2], blk[n][e]);
      }
  for (int64_t r = 0; r < 2; ++r)
    next[2 + r] = k.add(k.mul(cur[2 + r], corr[r]), rowSum[r]);
  SmallVector<Frag> o;
  for (int64_t dt = 0; dt < dTiles; ++dt) {
    Frag t;
    for (int64_t e = 0; e < 4; ++e)
      t.push_back(k.mul(cur[4 + 4 * dt + e], corr[e / 2]));
    o.push_back(t);
  }
  for (size_t j = 0; j < sc.size(); ++j) {
    Frag pa = w.toA(sc[j][0], sc[j][1]);
    SmallVector<Frag> v = vFrags(j);
    for (int64_t dt = 0; dt < dTiles; ++dt)
      o[dt] = w.mma(pa, v[dt], o[dt]);
  }
  for (const Frag &t : o)
    next.append(t.begin(), t.end());
  return next;
}

/// The recurrence's starting values: m = -inf, l = 0, O = 0.
SmallVector<Value> onlineInit(Warp &w, const AttentionShape &s) {
  KB &k = w.k;
  SmallVector<Value> init = {k.f(-INFINITY, w.f32), k.f(-INFINITY, w.f32), k.f(0, w.f32),
                             k.f(0, w.f32)};
  init.append(s.headDim / 8 * 4, k.f(0, w.f32));
  return init;
}

Online onlineResult(Warp &w, ValueRange st, const AttentionShape &s) {
  Online on;
  for (int64_t r = 0; r < 2; ++r) {
    on.m[r] = st[r];
    on.l[r] = w.groupSum(st[2 + r]);
  }
  on.o = tilesOf(st.drop_front(4), 0, s.headDim / 8);
  return on;
}

Online forwardTile(Warp &w, ArrayRef<Frag> qa, Value qkv, const Heads &hs, Value q0,
                   Value tile, const AttentionShape &s) {
  KB &k = w.k;
  auto st = k.loop(k.idx(0), k.add(tile, k.idx(1)), onlineInit(w, s),
                   [&](Value kt, ValueRange cur) {
    Value key0 = k.mul(kt, k.idx(kTile));
    return onlineStep(w, cur, {scores(w, qa, qkv, hs.key, key0)}, key0, q0, s, /*masked=*/true,
                      [&](int64_t) {
                        SmallVector<Frag> v;
                        for (int64_t dt = 0; dt < s.headDim / 8; ++dt)
                          v.push_back(w.loadBCols(qkv, hs.val, key0, 8 * dt));
                        return v;
                      });
  });
  return onlineResult(w, st, s);
}

/// lse_i = m_i + log l_i of the warp's 16 rows: lane t = 0 of each group
/// writes them to `lse` (B, H, T) for the backward.
void storeLogSumExp(Warp &w, const Online &on, Value lse, const Heads &hs, Value q0,
                    const AttentionShape &s) {
  KB &k = w.k;
  Value rowBase = k.add(k.mul(hs.bh, k.idx(s.seq)), q0);
  auto first = scf::IfOp::create(k.b, k.loc, k.cmpEq(w.t, k.idx(0)), /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(&first.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r)
    k.st(k.add(on.m[r], k.log(on.l[r])), lse, k.add(rowBase, rowOf(w, 2 * r)));
}

/// The forward's lse_i and D_i = dy_i . y_i of the warp's 16 rows; lane
/// t = 0 of each group writes both to `stats` for the key/value kernel.
struct RowStats {
  Value lse[2], dsum[2];
};

RowStats rowStatistics(Warp &w, Value lse, Value dy, Value y, Value stats, const Heads &hs,
                       Value q0, const AttentionShape &s) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  Value rowBase = k.add(k.mul(hs.bh, k.idx(s.seq)), q0);
  RowStats rs;
  for (int64_t r = 0; r < 2; ++r) {
    rs.lse[r] = k.ld(lse, k.add(rowBase, rowOf(w, 2 * r)));
    Value part = k.f(0, w.f32);
    for (int64_t dt = 0; dt < dTiles; ++dt)
      for (int64_t e = 2 * r; e < 2 * r + 2; ++e) {
        Value at = k.add(hs.out(k.add(q0, rowOf(w, e))), k.add(columnOf(w, 0, e), k.idx(8 * dt)));
        part = k.add(part, k.mul(k.ld(y, at), k.ld(dy, at)));
      }
    rs.dsum[r] = w.groupSum(part);
  }
  auto first = scf::IfOp::create(k.b, k.loc, k.cmpEq(w.t, k.idx(0)), /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(&first.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r) {
    Value row = k.add(rowBase, rowOf(w, 2 * r));
    k.st(rs.lse[r], stats, k.mul(row, k.idx(2)));
    k.st(rs.dsum[r], stats, k.add(k.mul(row, k.idx(2)), k.idx(1)));
  }
  return rs;
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

/// dq += dS k over one 16-key block: p and dp are the raw scores q.k and
/// dy.v of keys key0.. (global indices), kFrag(dt) the keys as B fragments.
SmallVector<Value> queryGradStep(Warp &w, ValueRange cur, std::array<Frag, 2> p,
                                 const std::array<Frag, 2> &dp, Value key0, Value q0,
                                 const RowStats &rs, const AttentionShape &s, bool masked,
                                 function_ref<Frag(int64_t)> kFrag) {
  KB &k = w.k;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 4; ++e) {
      Value key = k.add(key0, columnOf(w, n, e)), query = k.add(q0, rowOf(w, e));
      Value pe = causalProbability(k, p[n][e], rs.lse[e / 2], key, query, s.scale, masked);
      p[n][e] = scoreGrad(k, pe, dp[n][e], rs.dsum[e / 2], s.scale);
    }
  Frag dsa = w.toA(p[0], p[1]);
  SmallVector<Value> next;
  for (int64_t dt = 0; dt < s.headDim / 8; ++dt) {
    Frag acc(cur.begin() + 4 * dt, cur.begin() + 4 * dt + 4);
    acc = w.mma(dsa, kFrag(dt), acc);
    next.append(acc.begin(), acc.end());
  }
  return next;
}

/// dv += P^T dy and dk += dS^T q over one 16-query block, in transposed
/// blocks (rows = keys k0.., columns = queries q0..). statsOf(query, n, e)
/// gives (lse, D) of a query; dyFrag/qFrag(dt) are B fragments.
using StatsFn = function_ref<std::pair<Value, Value>(Value query, int64_t n, int64_t e)>;
SmallVector<Value> keyValueGradStep(Warp &w, ValueRange cur, std::array<Frag, 2> p,
                                    std::array<Frag, 2> ds, Value q0, Value k0,
                                    const AttentionShape &s, bool masked, StatsFn statsOf,
                                    function_ref<Frag(int64_t)> dyFrag,
                                    function_ref<Frag(int64_t)> qFrag) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 4; ++e) {
      Value query = k.add(q0, columnOf(w, n, e)), key = k.add(k0, rowOf(w, e));
      auto [lse, dsum] = statsOf(query, n, e);
      p[n][e] = causalProbability(k, p[n][e], lse, key, query, s.scale, masked);
      ds[n][e] = scoreGrad(k, p[n][e], ds[n][e], dsum, s.scale);
    }
  Frag pa = w.toA(p[0], p[1]), dsa = w.toA(ds[0], ds[1]);
  SmallVector<Value> next;
  for (int64_t dt = 0; dt < dTiles; ++dt) {
    Frag dv(cur.begin() + 4 * dt, cur.begin() + 4 * dt + 4);
    dv = w.mma(pa, dyFrag(dt), dv);
    next.append(dv.begin(), dv.end());
  }
  for (int64_t dt = 0; dt < dTiles; ++dt) {
    Frag dk(cur.begin() + 4 * (dTiles + dt), cur.begin() + 4 * (dTiles + dt) + 4);
    dk = w.mma(dsa, qFrag(dt), dk);
    next.append(dk.begin(), dk.end());
  }
  return next;
}

//===----------------------------------------------------------------------===//
// Blocked kernels: the 8 warps of a 256-thread block own 128 consecutive
// rows of one head and walk the other side in stages of 64 rows that the
// block copies to shared memory once, instead of every warp reading them
// from global memory. The copies are asynchronous (cp.async, 16 bytes) into
// two buffers: stage s + 1 loads while stage s computes. Fragments come
// from shared memory with ldmatrix: plain for operands along the head
// dimension (k in q.k), and transposed for operands along the rows (v in
// p.v).
//===----------------------------------------------------------------------===//

constexpr int64_t kBlockWarps = 8, kBlockThreads = 32 * kBlockWarps;
constexpr int64_t kBlockRows = kBlockWarps * kTile;
constexpr int64_t kStage = 64;
/// Row padding of shared tiles: rows start 4 banks apart, so the 8 rows an
/// ldmatrix phase reads (16 bytes each) hit 32 different banks.
constexpr int64_t kPad = 8;

/// A bf16 matrix in shared memory, row-major with row stride ld; ptr is its
/// address (for ldmatrix and cp.async).
struct Smem {
  Value ptr;
  int64_t ld;
};

/// &base[offset] for a pointer to `elt` elements.
Value elementPtr(KB &k, Value base, Type elt, Value offset) {
  offset = arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), offset);
  return LLVM::GEPOp::create(k.b, k.loc, base.getType(), elt, base, ValueRange{offset});
}

LLVM::LLVMPointerType pointerType(KB &k, NVVM::NVVMMemorySpace space) {
  return LLVM::LLVMPointerType::get(k.b.getContext(), static_cast<unsigned>(space));
}

/// The address of a kernel argument's first element, as a global pointer
/// (cp.async's source space).
Value globalPointer(KB &k, Value mem) {
  Value at = memref::ExtractAlignedPointerAsIndexOp::create(k.b, k.loc, mem);
  at = arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), at);
  Value generic = LLVM::IntToPtrOp::create(k.b, k.loc, LLVM::LLVMPointerType::get(k.b.getContext()), at);
  return LLVM::AddrSpaceCastOp::create(k.b, k.loc, pointerType(k, NVVM::NVVMMemorySpace::Global),
                                       generic);
}

/// The address of a shared buffer's first element.
Value sharedPointer(KB &k, Value mem) {
  Value at = memref::ExtractAlignedPointerAsIndexOp::create(k.b, k.loc, mem);
  at = arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), at);
  return LLVM::IntToPtrOp::create(k.b, k.loc, pointerType(k, NVVM::NVVMMemorySpace::Shared), at);
}

/// cp.async of `bytes` (4, 8 or 16) from global `src` to shared `dst`.
void copyAsync(KB &k, Value dst, Value src, int32_t bytes) {
  auto cache = bytes == 16 ? NVVM::LoadCacheModifierKind::CG : NVVM::LoadCacheModifierKind::CA;
  NVVM::CpAsyncOp::create(k.b, k.loc, dst, src, bytes, cache, Value());
}

/// A static shared-memory buffer of the enclosing kernel (a workgroup
/// memref.global, 16-byte aligned for 16-byte cp.async copies).
Value sharedBuffer(KB &k, int64_t elements, Type elt) {
  auto module = k.b.getInsertionBlock()->getParentOp()->getParentOfType<gpu::GPUModuleOp>();
  auto space = gpu::AddressSpaceAttr::get(k.b.getContext(), gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({elements}, elt, MemRefLayoutAttrInterface{}, space);
  int64_t count = 0;
  for (auto g : module.getOps<memref::GlobalOp>())
    (void)g, ++count;
  std::string name = "gptc_shared_" + std::to_string(count);
  {
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(module.getBody());
    memref::GlobalOp::create(k.b, k.loc, name, k.b.getStringAttr("private"), type, Attribute(),
                             /*constant=*/false, k.b.getI64IntegerAttr(16));
  }
  return memref::GetGlobalOp::create(k.b, k.loc, type, name);
}

/// A kStage x cols tile in two buffers; tile(k, parity) is one of them.
struct SharedStage {
  Value base;
  int64_t ld;
  Smem tile(KB &k, Value parity) const {
    Value at = elementPtr(k, base, k.b.getBF16Type(), k.mul(parity, k.idx(kStage * ld)));
    return {at, ld};
  }
};

SharedStage sharedStage(KB &k, int64_t cols) {
  Value mem = sharedBuffer(k, 2 * kStage * (cols + kPad), k.b.getBF16Type());
  return {sharedPointer(k, mem), cols + kPad};
}

void barrier(KB &k) { gpu::BarrierOp::create(k.b, k.loc); }

/// Starts copying rows r0..r0+kStage of a row-major bf16 matrix (global
/// pointer `src`) with d columns into `dst`, 16 bytes per copy; the block's
/// threads share the rows.
void copyRowsAsync(KB &k, Value tid, Value src, const RowFn &row, Value r0, int64_t d,
                   const Smem &dst) {
  int64_t perRow = d / 8;
  Type bf16 = k.b.getBF16Type();
  for (int64_t j = 0; j < kStage * perRow / kBlockThreads; ++j) {
    Value c = k.add(tid, k.idx(j * kBlockThreads));
    Value r = k.udiv(c, k.idx(perRow)), c8 = k.mul(k.urem(c, k.idx(perRow)), k.idx(8));
    copyAsync(k, elementPtr(k, dst.ptr, bf16, k.add(k.mul(r, k.idx(dst.ld)), c8)),
              elementPtr(k, src, bf16, k.add(row(k.add(r0, r)), c8)), 16);
  }
}

/// ldmatrix.x4: lane L gives the address of row L % 8 of 8x8 matrix L / 8,
/// at(m, r) its element offset; `trans` delivers each matrix transposed.
SmallVector<Value, 4> ldmatrix(Warp &w, const Smem &sm, function_ref<Value(Value, Value)> at,
                               bool trans) {
  KB &k = w.k;
  Value m = k.udiv(w.lane, k.idx(8)), r = k.urem(w.lane, k.idx(8));
  Value off = arith::IndexCastOp::create(k.b, k.loc, k.b.getI64Type(), at(m, r));
  Value addr = LLVM::GEPOp::create(k.b, k.loc, sm.ptr.getType(), w.bf16, sm.ptr, ValueRange{off});
  auto result = LLVM::LLVMStructType::getLiteral(k.b.getContext(), {w.i32, w.i32, w.i32, w.i32});
  auto op = NVVM::LdMatrixOp::create(
      k.b, k.loc, result, addr, 4, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(k.b.getContext(), 8, 8), NVVM::LdStMatrixEltType::B16);
  SmallVector<Value, 4> regs;
  for (int64_t i = 0; i < 4; ++i)
    regs.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, op.getRes(), i));
  return regs;
}

/// Scores of rows A against shared rows n0..n0+16 (B[kk][n] = sm[n0 + n][kk]):
/// per k-step, one ldmatrix gives both 8-column tiles.
std::array<Frag, 2> scoresShared(Warp &w, ArrayRef<Frag> rowsA, const Smem &sm, int64_t n0) {
  KB &k = w.k;
  std::array<Frag, 2> s = {w.zeros(), w.zeros()};
  for (size_t kk = 0; kk < rowsA.size(); ++kk) {
    auto regs = ldmatrix(w, sm, [&](Value m, Value r) {
      Value row = k.add(k.add(k.idx(n0), k.mul(k.udiv(m, k.idx(2)), k.idx(8))), r);
      Value col = k.add(k.idx(kTile * kk), k.mul(k.urem(m, k.idx(2)), k.idx(8)));
      return k.add(k.mul(row, k.idx(sm.ld)), col);
    }, /*trans=*/false);
    s[0] = w.mma(rowsA[kk], {regs[0], regs[1]}, s[0]);
    s[1] = w.mma(rowsA[kk], {regs[2], regs[3]}, s[1]);
  }
  return s;
}

/// B fragments B[kk][n] = sm[r0 + kk][8 dt + n] for every d-tile dt: rows
/// r0..r0+16 as the reduction dimension, through transposing ldmatrix.
SmallVector<Frag> columnsShared(Warp &w, const Smem &sm, int64_t r0, int64_t d) {
  KB &k = w.k;
  SmallVector<Frag> frags;
  for (int64_t dt = 0; dt < d / 8; dt += 2) {
    auto regs = ldmatrix(w, sm, [&](Value m, Value r) {
      Value row = k.add(k.add(k.idx(r0), k.mul(k.urem(m, k.idx(2)), k.idx(8))), r);
      Value col = k.add(k.idx(8 * dt), k.mul(k.udiv(m, k.idx(2)), k.idx(8)));
      return k.add(k.mul(row, k.idx(sm.ld)), col);
    }, /*trans=*/true);
    frags.push_back({regs[0], regs[1]});
    frags.push_back({regs[2], regs[3]});
  }
  return frags;
}

/// cond ? then() : cur, for loop-carried values.
SmallVector<Value> when(KB &k, Value cond, ValueRange cur,
                        function_ref<SmallVector<Value>()> then) {
  auto op = scf::IfOp::create(k.b, k.loc, TypeRange(cur), cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(&op.getThenRegion().front());
  scf::YieldOp::create(k.b, k.loc, then());
  k.b.setInsertionPointToStart(&op.getElseRegion().front());
  scf::YieldOp::create(k.b, k.loc, cur);
  return SmallVector<Value>(op.getResults());
}

/// The block's 128 rows (from `first`) of one head and the warp's 16 (its
/// tile). Query blocks are dealt latest first, key blocks earliest first.
struct BlockTile {
  Value tid, tile, row0, first;
  Heads hs;
};

BlockTile blockTile(KB &k, Value idx, const AttentionShape &s, bool queries) {
  int64_t blocks = s.seq / kBlockRows;
  Value warp = k.udiv(idx, k.idx(32));
  Value block = k.udiv(warp, k.idx(kBlockWarps));
  Value bt = k.urem(block, k.idx(blocks));
  if (queries)
    bt = k.sub(k.idx(blocks - 1), bt);
  Value tile = k.add(k.mul(bt, k.idx(kBlockWarps)), k.urem(warp, k.idx(kBlockWarps)));
  return {k.urem(idx, k.idx(kBlockThreads)), tile, k.mul(tile, k.idx(kTile)),
          k.mul(bt, k.idx(kBlockRows)), headsOf(k, k.udiv(block, k.idx(blocks)), s)};
}

/// Sub-blocks of 16 rows in a stage.
constexpr int64_t kSubTiles = kStage / kTile;
/// Sub-blocks per online-softmax step of the forward's unmasked stages
/// (4, 2 and 1 timed alike on the H200; bench/RESULTS.md, 92e974f).
constexpr int64_t kStepTiles = 4;
static_assert(kSubTiles % kStepTiles == 0, "steps tile a stage");
/// Resident blocks per SM asked of the forward and dQ kernels: 2 instead
/// of ptxas's free choice (1) took 124M from 44.1 to 42.4 ms/step.
constexpr int64_t kMinBlocks = 2;

/// Stages [lo, mid) then [mid, hi) of a blocked kernel's loop, carrying
/// `init`, with the copies of stage s + 1 (issue(s + 1, parity)) in flight
/// while stage s computes (compute(s, parity, carried, masked)) on the
/// other buffer. compute is emitted twice: without the causal mask and its
/// per-tile branches for the stages that every warp of the block sees
/// whole, and with them for the stages that cross the diagonal.
SmallVector<Value>
pipelinedStages(KB &k, Value lo, Value mid, Value hi, bool maskedFirst, ValueRange init,
                function_ref<void(Value, Value)> issue,
                function_ref<SmallVector<Value>(Value, Value, ValueRange, bool)> compute) {
  auto parityOf = [&](Value sb) { return k.urem(sb, k.idx(2)); };
  // One commit group per stage, empty past the end, so that "all but the
  // newest group done" always means "this stage has landed".
  auto issueIfAny = [&](Value sb) {
    auto op = scf::IfOp::create(k.b, k.loc, k.cmpUlt(sb, hi), /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPointToStart(&op.getThenRegion().front());
      issue(sb, parityOf(sb));
    }
    NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc);
  };
  auto step = [&](Value sb, ValueRange cur, bool masked) {
    issueIfAny(k.add(sb, k.idx(1)));
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 1);
    barrier(k); // every thread's copies of stage sb have landed
    SmallVector<Value> next = compute(sb, parityOf(sb), cur, masked);
    barrier(k); // nobody reads this buffer when stage sb + 2 is copied into it
    return next;
  };
  issueIfAny(lo);
  auto st = k.loop(lo, mid, init, [&](Value sb, ValueRange cur) {
    return step(sb, cur, maskedFirst);
  });
  return k.loop(mid, hi, st, [&](Value sb, ValueRange cur) {
    return step(sb, cur, !maskedFirst);
  });
}

/// The key/value stages of a query-side kernel (forward, dQ): keys
/// [0, first of the block) whole, then the block's own two stages masked;
/// stage(sb, key0, sK, sV, carried, masked) computes one on its buffers.
SmallVector<Value>
keyValueStages(KB &k, const BlockTile &bt, Value qkv, const SharedStage &sKs,
               const SharedStage &sVs, const AttentionShape &s, ValueRange init,
               function_ref<SmallVector<Value>(Value, Value, const Smem &, const Smem &,
                                               ValueRange, bool)> stage) {
  Value whole = k.udiv(bt.first, k.idx(kStage));
  Value stages = k.udiv(k.add(bt.first, k.idx(kBlockRows)), k.idx(kStage));
  Value src = globalPointer(k, qkv);
  auto issue = [&](Value sb, Value parity) {
    Value key0 = k.mul(sb, k.idx(kStage));
    copyRowsAsync(k, bt.tid, src, bt.hs.key, key0, s.headDim, sKs.tile(k, parity));
    copyRowsAsync(k, bt.tid, src, bt.hs.val, key0, s.headDim, sVs.tile(k, parity));
  };
  return pipelinedStages(k, k.idx(0), whole, stages, /*maskedFirst=*/false, init, issue,
                         [&](Value sb, Value parity, ValueRange cur, bool masked) {
    return stage(sb, k.mul(sb, k.idx(kStage)), sKs.tile(k, parity), sVs.tile(k, parity), cur,
                 masked);
  });
}

/// In a masked stage, `step` runs only for the warp's visible sub-blocks;
/// in an unmasked one every sub-block is visible.
SmallVector<Value> maybeWhen(KB &k, bool masked, function_ref<Value()> visible, ValueRange cur,
                             function_ref<SmallVector<Value>()> step) {
  return masked ? when(k, visible(), cur, step) : step();
}

/// The forward recurrence of a blocked kernel's warp (keys and values
/// staged in sKs and sVs). Keys before the block's first query are seen
/// whole by all its warps; the two stages of the block's own rows are
/// masked.
Online forwardBlocked(Warp &w, ArrayRef<Frag> qa, Value qkv, const BlockTile &bt,
                      const SharedStage &sKs, const SharedStage &sVs, const AttentionShape &s) {
  KB &k = w.k;
  auto st = keyValueStages(k, bt, qkv, sKs, sVs, s, onlineInit(w, s),
                           [&](Value sb, Value key0, const Smem &sK, const Smem &sV,
                               ValueRange cur, bool masked) {
    if (!masked) {
      // kStepTiles sub-blocks per step: one maximum and one rescale of O
      // per 16 kStepTiles keys.
      SmallVector<Value> vals(cur);
      for (int64_t j0 = 0; j0 < kSubTiles; j0 += kStepTiles) {
        SmallVector<std::array<Frag, 2>> sc;
        for (int64_t j = j0; j < j0 + kStepTiles; ++j)
          sc.push_back(scoresShared(w, qa, sK, kTile * j));
        vals = onlineStep(w, vals, sc, k.add(key0, k.idx(kTile * j0)), bt.row0, s,
                          /*masked=*/false, [&](int64_t j) {
                            return columnsShared(w, sV, kTile * (j0 + j), s.headDim);
                          });
      }
      return vals;
    }
    SmallVector<Value> vals(cur);
    for (int64_t j = 0; j < kSubTiles; ++j) {
      Value kt = k.add(k.mul(sb, k.idx(kSubTiles)), k.idx(j));
      Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, kt, bt.tile);
      vals = when(k, visible, vals, [&] {
        return onlineStep(w, vals, {scoresShared(w, qa, sK, kTile * j)},
                          k.add(key0, k.idx(kTile * j)), bt.row0, s, /*masked=*/true,
                          [&](int64_t) { return columnsShared(w, sV, kTile * j, s.headDim); });
      });
    }
    return vals;
  });
  return onlineResult(w, st, s);
}

void forwardKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  BlockTile bt = blockTile(k, idx, s, /*queries=*/true);
  SharedStage sK = sharedStage(k, s.headDim), sV = sharedStage(k, s.headDim);
  SmallVector<Frag> qa = loadRowsA(w, a[0], bt.hs.q, bt.row0, s.headDim);
  Online on = forwardBlocked(w, qa, a[0], bt, sK, sV, s);
  Value inv[2] = {k.div(k.f(1, w.f32), on.l[0]), k.div(k.f(1, w.f32), on.l[1])};
  storeTiles(w, on.o, a[1], bt.hs.out, bt.row0, inv);
  storeLogSumExp(w, on, a[2], bt.hs, bt.row0, s);
}

void backwardQueryKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2], dqkv = a[3];
  int64_t dTiles = s.headDim / 8;
  BlockTile bt = blockTile(k, idx, s, /*queries=*/true);
  const Heads &hs = bt.hs;
  SharedStage sKs = sharedStage(k, s.headDim), sVs = sharedStage(k, s.headDim);
  SmallVector<Frag> qa = loadRowsA(w, qkv, hs.q, bt.row0, s.headDim);
  RowStats rs = rowStatistics(w, a[5], dy, a[4], stats, hs, bt.row0, s);

  // dq_i = scale sum_j p_ij (dy_i . v_j - D_i) k_j.
  SmallVector<Frag> dya = loadRowsA(w, dy, hs.out, bt.row0, s.headDim);
  SmallVector<Value> init(dTiles * 4, k.f(0, w.f32));
  auto dq = keyValueStages(k, bt, qkv, sKs, sVs, s, init,
                           [&](Value sb, Value key0, const Smem &sK, const Smem &sV,
                               ValueRange cur, bool masked) {
    SmallVector<Value> vals(cur);
    for (int64_t j = 0; j < kSubTiles; ++j) {
      auto visible = [&]() -> Value {
        Value kt = k.add(k.mul(sb, k.idx(kSubTiles)), k.idx(j));
        return arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, kt, bt.tile);
      };
      vals = maybeWhen(k, masked, visible, vals, [&] {
        std::array<Frag, 2> p = scoresShared(w, qa, sK, kTile * j);
        std::array<Frag, 2> dp = scoresShared(w, dya, sV, kTile * j);
        SmallVector<Frag> kc = columnsShared(w, sK, kTile * j, s.headDim);
        return queryGradStep(w, vals, p, dp, k.add(key0, k.idx(kTile * j)), bt.row0, rs, s,
                             masked, [&](int64_t dt) { return kc[dt]; });
      });
    }
    return vals;
  });
  storeTiles(w, tilesOf(dq, 0, dTiles), dqkv, hs.q, bt.row0, {});
}

void backwardKeyValueKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2], dqkv = a[3];
  int64_t dTiles = s.headDim / 8;
  BlockTile bt = blockTile(k, idx, s, /*queries=*/false);
  const Heads &hs = bt.hs;
  Value k0 = bt.row0;
  SharedStage sQs = sharedStage(k, s.headDim), sDys = sharedStage(k, s.headDim);
  Value sStats = sharedBuffer(k, 2 * 2 * kStage, w.f32); // (lse, D) of a stage's rows, twice
  Value sStatsPtr = sharedPointer(k, sStats);
  SmallVector<Frag> ka = loadRowsA(w, qkv, hs.key, k0, s.headDim);
  SmallVector<Frag> va = loadRowsA(w, qkv, hs.val, k0, s.headDim);
  Value statsBase = k.mul(k.mul(hs.bh, k.idx(s.seq)), k.idx(2));

  // Query stages from the block's first key on (earlier queries see none):
  // the two of the block's own rows are masked, later ones are whole.
  Value first = k.udiv(bt.first, k.idx(kStage));
  Value whole = k.udiv(k.add(bt.first, k.idx(kBlockRows)), k.idx(kStage));
  SmallVector<Value> init(2 * dTiles * 4, k.f(0, w.f32));
  Value qkvPtr = globalPointer(k, qkv), dyPtr = globalPointer(k, dy);
  Value statsPtr = globalPointer(k, stats);
  auto issue = [&](Value sb, Value parity) {
    Value q0s = k.mul(sb, k.idx(kStage));
    copyRowsAsync(k, bt.tid, qkvPtr, hs.q, q0s, s.headDim, sQs.tile(k, parity));
    copyRowsAsync(k, bt.tid, dyPtr, hs.out, q0s, s.headDim, sDys.tile(k, parity));
    auto copy = scf::IfOp::create(k.b, k.loc, k.cmpUlt(bt.tid, k.idx(2 * kStage)),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(&copy.getThenRegion().front());
    Value from = k.add(k.add(statsBase, k.mul(q0s, k.idx(2))), bt.tid);
    Value to = k.add(k.mul(parity, k.idx(2 * kStage)), bt.tid);
    copyAsync(k, elementPtr(k, sStatsPtr, w.f32, to), elementPtr(k, statsPtr, w.f32, from), 4);
  };
  auto acc = pipelinedStages(k, first, whole, k.idx(s.seq / kStage), /*maskedFirst=*/true, init,
                             issue, [&](Value sb, Value parity, ValueRange cur, bool masked) {
    Value q0s = k.mul(sb, k.idx(kStage));
    Smem sQ = sQs.tile(k, parity), sDy = sDys.tile(k, parity);
    Value statsAt = k.mul(parity, k.idx(2 * kStage));
    SmallVector<Value> vals(cur);
    for (int64_t j = 0; j < kSubTiles; ++j) {
      auto visible = [&]() -> Value {
        Value qt = k.add(k.mul(sb, k.idx(kSubTiles)), k.idx(j));
        return arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::uge, qt, bt.tile);
      };
      vals = maybeWhen(k, masked, visible, vals, [&] {
        auto statsOf = [&](Value, int64_t n, int64_t e) {
          Value at = k.add(statsAt, k.mul(k.add(k.idx(kTile * j), columnOf(w, n, e)), k.idx(2)));
          Value lse = memref::LoadOp::create(k.b, k.loc, sStats, ValueRange{at});
          Value dsum = memref::LoadOp::create(k.b, k.loc, sStats, ValueRange{k.add(at, k.idx(1))});
          return std::make_pair(lse, dsum);
        };
        std::array<Frag, 2> p = scoresShared(w, ka, sQ, kTile * j);
        std::array<Frag, 2> ds = scoresShared(w, va, sDy, kTile * j);
        SmallVector<Frag> dyc = columnsShared(w, sDy, kTile * j, s.headDim);
        SmallVector<Frag> qc = columnsShared(w, sQ, kTile * j, s.headDim);
        return keyValueGradStep(w, vals, p, ds, k.add(q0s, k.idx(kTile * j)), k0, s, masked,
                                statsOf, [&](int64_t dt) { return dyc[dt]; },
                                [&](int64_t dt) { return qc[dt]; });
      });
    }
    return vals;
  });
  storeTiles(w, tilesOf(acc, dTiles, dTiles), dqkv, hs.key, k0, {});
  storeTiles(w, tilesOf(acc, 0, dTiles), dqkv, hs.val, k0, {});
}

} // namespace

bool flashAttentionApplies(const AttentionShape &s, Type element) {
  return element.isBF16() && s.headDim % kTile == 0 && s.seq % kTile == 0;
}

int64_t flashAttentionMinBlocks(const AttentionShape &s, FlashKernel kernel) {
  if (!flashAttentionBlocked(s) || kernel == FlashKernel::BackwardKeyValue)
    return 0;
  return kMinBlocks;
}

int64_t flashAttentionThreads(const AttentionShape &s) {
  return s.batch * s.heads * (s.seq / kTile) * 32;
}

bool flashAttentionBlocked(const AttentionShape &s) {
  return s.blockThreads == kBlockThreads && s.seq % kBlockRows == 0 && s.headDim % 32 == 0 &&
         s.headDim <= 64;
}

void buildFlashAttentionForward(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionBlocked(s))
    return forwardKernelBlocked(k, idx, a, s);
  Warp w(k, idx);
  WarpTile wt = warpTile(k, idx, s, /*queries=*/true);
  Value tile = wt.tile, q0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> qa = loadRowsA(w, a[0], hs.q, q0, s.headDim);
  Online on = forwardTile(w, qa, a[0], hs, q0, tile, s);
  Value inv[2] = {k.div(k.f(1, w.f32), on.l[0]), k.div(k.f(1, w.f32), on.l[1])};
  storeTiles(w, on.o, a[1], hs.out, q0, inv);
  storeLogSumExp(w, on, a[2], hs, q0, s);
}

void buildFlashAttentionBackwardQuery(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                      const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionBlocked(s))
    return backwardQueryKernelBlocked(k, idx, a, s);
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2], dqkv = a[3];
  int64_t dTiles = s.headDim / 8;
  WarpTile wt = warpTile(k, idx, s, /*queries=*/true);
  Value tile = wt.tile, q0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> qa = loadRowsA(w, qkv, hs.q, q0, s.headDim);
  RowStats rs = rowStatistics(w, a[5], dy, a[4], stats, hs, q0, s);

  // dq_i = scale sum_j p_ij (dy_i . v_j - D_i) k_j.
  SmallVector<Frag> dya = loadRowsA(w, dy, hs.out, q0, s.headDim);
  SmallVector<Value> init(dTiles * 4, k.f(0, w.f32));
  auto dq = k.loop(k.idx(0), k.add(tile, k.idx(1)), init, [&](Value kt, ValueRange cur) {
    Value key0 = k.mul(kt, k.idx(kTile));
    return queryGradStep(w, cur, scores(w, qa, qkv, hs.key, key0),
                         scores(w, dya, qkv, hs.val, key0), key0, q0, rs, s, /*masked=*/true,
                         [&](int64_t dt) { return w.loadBCols(qkv, hs.key, key0, 8 * dt); });
  });
  storeTiles(w, tilesOf(dq, 0, dTiles), dqkv, hs.q, q0, {});
}

void buildFlashAttentionBackwardKeyValue(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                         const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionBlocked(s))
    return backwardKeyValueKernelBlocked(k, idx, a, s);
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
    auto statsOf = [&](Value query, int64_t, int64_t) {
      Value row = k.mul(k.add(rowBase, query), k.idx(2));
      return std::make_pair(k.ld(stats, row), k.ld(stats, k.add(row, k.idx(1))));
    };
    return keyValueGradStep(
        w, cur, scores(w, ka, qkv, hs.q, q0), scores(w, va, dy, hs.out, q0), q0, k0, s,
        /*masked=*/true, statsOf,
        [&](int64_t dt) { return w.loadBCols(dy, hs.out, q0, 8 * dt); },
        [&](int64_t dt) { return w.loadBCols(qkv, hs.q, q0, 8 * dt); });
  });
  storeTiles(w, tilesOf(acc, dTiles, dTiles), dqkv, hs.key, k0, {});
  storeTiles(w, tilesOf(acc, 0, dTiles), dqkv, hs.val, k0, {});
}

} // namespace gptc::codegen
