//===- FlashAttention.cpp - tensor-core causal attention, sm_80+ / sm_90a -===//
//
// Over 800 lines: one kernel family's forward and backward at three levels
// (mma.sync warps, staged blocks, wgmma) sharing their fragment helpers.
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
#include "compiler/Codegen/NvvmKernel.h"

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

  /// 2^x on the SFU (exp2Approx): probabilities too small to be normal
  /// add nothing to a row sum of at least 1.
  Value exp2(Value x) { return exp2Approx(k, x); }
  /// x y + z in one rounding.
  Value fma(Value x, Value y, Value z) { return math::FmaOp::create(k.b, k.loc, x, y, z); }

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

/// The (batch, head) of a warp and the row offsets of its q, k, v, y/dy;
/// sums(part) maps a 16-row tile's first row to the offset of its column
/// sums of q, k or v (part 0, 1, 2) in the (B T / 16, 3C) matrix of
/// AttentionShape::columnSums.
struct Heads {
  RowFn q, key, val, out;
  Value bh; // batch * H + head
  std::function<RowFn(int64_t part)> sums;
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
  auto sums = [kp, batch, hd, c, seq = s.seq](int64_t part) -> RowFn {
    return [=](Value r0) {
      Value tileRow = kp->add(kp->mul(batch, kp->idx(seq / kTile)), kp->udiv(r0, kp->idx(kTile)));
      return kp->add(kp->add(kp->mul(tileRow, kp->idx(3 * c)), hd), kp->idx(part * c));
    };
  };
  return {rows(qkvBase, 0, 3 * c), rows(qkvBase, c, 3 * c), rows(qkvBase, 2 * c, 3 * c),
          rows(outBase, 0, c), bh, sums};
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

/// Tiles [first, first + count) of a loop's flat carried values, 4 each
/// (count -1: to the end).
SmallVector<Frag> tilesOf(ValueRange values, int64_t first = 0, int64_t count = -1) {
  if (count < 0)
    count = static_cast<int64_t>(values.size()) / 4 - first;
  SmallVector<Frag> tiles;
  for (int64_t i = first; i < first + count; ++i)
    tiles.push_back(Frag(values.begin() + 4 * i, values.begin() + 4 * i + 4));
  return tiles;
}

/// Exponentials are base 2 with the softmax scale folded into one FMA:
/// exp(scale s - x) = 2^(s log2scale - x log2 e), log2scale = scale log2 e
/// (kLog2e); ln 2 turns the base-2 row maxima back into a natural lse.
constexpr double kLn2 = 0.6931471805599453;

/// p = exp(scale * score - lse) where key <= query, else 0: a probability
/// recomputed from the row's log-sum-exp, as both backward kernels do;
/// negLse2 = -lse log2 e. Blocks wholly below the diagonal skip the mask
/// (`masked` false).
Value causalProbability(Warp &w, Value score, Value negLse2, Value key, Value query,
                        double scale, bool masked) {
  KB &k = w.k;
  Value p = w.exp2(w.fma(score, k.f(scale * kLog2e, w.f32), negLse2));
  if (!masked)
    return p;
  Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
  return k.select(visible, p, k.f(0, w.f32));
}

/// dS / scale = p (dP - D): the score gradient from dP = dy . v, less the
/// softmax scale, which multiplies dq and dk once when they are stored.
Value scoreGrad(KB &k, Value p, Value dp, Value dsum) { return k.mul(p, k.sub(dp, dsum)); }

/// The forward recurrence of one query tile: row maxima m (of the scores
/// times scale log2 e), lane-partial row sums l (rows g and g + 8) and the
/// unnormalised output O, d/8 tiles.
struct Online {
  Value m[2], l[2];
  SmallVector<Frag> o;
};

/// O += P V over the probabilities of one step: pa[j] is the A fragment of
/// keys 16 j.. of the step, o the rescaled O tiles, updated in place.
using ProductFn = function_ref<void(ArrayRef<Frag> pa, SmallVector<Frag> &o)>;

/// ProductFn on mma.sync: vFrags(j) gives the B fragments of block j's
/// values, one per 8 d-columns, loaded only when block j's product needs
/// them (registers: this decides the kernel's occupancy).
void mmaProduct(Warp &w, ArrayRef<Frag> pa, SmallVector<Frag> &o,
                function_ref<SmallVector<Frag>(int64_t)> vFrags) {
  for (size_t j = 0; j < pa.size(); ++j) {
    SmallVector<Frag> v = vFrags(j);
    for (size_t dt = 0; dt < o.size(); ++dt)
      o[dt] = w.mma(pa[j], v[dt], o[dt]);
  }
}

/// One step of the online softmax over J = sc.size() blocks of 16 keys:
/// one row maximum, one rescale of O and the p.v products (`product`).
/// `cur` is (m0, m1, l0, l1, O...) and sc[j] the raw scores of keys
/// key0 + 16 j.. (global indices, for the mask).
SmallVector<Value> onlineStep(Warp &w, ValueRange cur, SmallVector<std::array<Frag, 2>> sc,
                              Value key0, Value q0, const AttentionShape &s, bool masked,
                              ProductFn product) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  Value log2Scale = k.f(s.scale * kLog2e, w.f32);
  // Hide keys after the query (only the diagonal tile has any). Scores stay
  // unscaled: scaling commutes with the maximum, and the exponent's FMA
  // applies it.
  for (size_t j = 0; j < sc.size() && masked; ++j)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value &x = sc[j][n][e];
        Value key = k.add(k.add(key0, k.idx(kTile * j)), columnOf(w, n, e));
        Value query = k.add(q0, rowOf(w, e));
        Value visible = arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key, query);
        x = k.select(visible, x, k.f(-INFINITY, w.f32));
      }
  SmallVector<Value> next(4);
  Value mNew[2], corr[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value mx = k.f(-INFINITY, w.f32);
    for (auto &blk : sc)
      for (int64_t n = 0; n < 2; ++n)
        mx = k.fmax(mx, k.fmax(blk[n][2 * r], blk[n][2 * r + 1]));
    mNew[r] = k.fmax(cur[r], k.mul(w.groupMax(mx), log2Scale));
    corr[r] = w.exp2(k.sub(cur[r], mNew[r]));
    next[r] = mNew[r];
  }
  Value negM[2] = {k.neg(mNew[0]), k.neg(mNew[1])};
  Value rowSum[2] = {k.f(0, w.f32), k.f(0, w.f32)};
  for (auto &blk : sc)
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        blk[n][e] = w.exp2(w.fma(blk[n][e], log2Scale, negM[e / 2]));
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
  SmallVector<Frag> pa;
  for (auto &blk : sc)
    pa.push_back(w.toA(blk[0], blk[1]));
  product(pa, o);
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
                      [&](ArrayRef<Frag> pa, SmallVector<Frag> &o) {
                        mmaProduct(w, pa, o, [&](int64_t) {
                          SmallVector<Frag> v;
                          for (int64_t dt = 0; dt < s.headDim / 8; ++dt)
                            v.push_back(w.loadBCols(qkv, hs.val, key0, 8 * dt));
                          return v;
                        });
                      });
  });
  return onlineResult(w, st, s);
}

/// lse_i = m_i ln 2 + log l_i of the warp's 16 rows: lane t = 0 of each
/// group writes them to `lse` (B, H, T) for the backward.
void storeLogSumExp(Warp &w, const Online &on, Value lse, const Heads &hs, Value q0,
                    const AttentionShape &s) {
  KB &k = w.k;
  Value rowBase = k.add(k.mul(hs.bh, k.idx(s.seq)), q0);
  auto first = scf::IfOp::create(k.b, k.loc, k.cmpEq(w.t, k.idx(0)), /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPointToStart(&first.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r)
    k.st(k.add(k.mul(on.m[r], k.f(kLn2, w.f32)), k.log(on.l[r])), lse,
         k.add(rowBase, rowOf(w, 2 * r)));
}

/// -lse_i log2 e (from the forward's lse_i) and D_i = dy_i . y_i of the
/// warp's 16 rows; lane t = 0 of each group writes both to `stats` for the
/// key/value kernel.
struct RowStats {
  Value negLse2[2], dsum[2];
};

RowStats rowStatistics(Warp &w, Value lse, Value dy, Value y, Value stats, const Heads &hs,
                       Value q0, const AttentionShape &s) {
  KB &k = w.k;
  int64_t dTiles = s.headDim / 8;
  Value rowBase = k.add(k.mul(hs.bh, k.idx(s.seq)), q0);
  RowStats rs;
  for (int64_t r = 0; r < 2; ++r) {
    rs.negLse2[r] = k.mul(k.ld(lse, k.add(rowBase, rowOf(w, 2 * r))), k.f(-kLog2e, w.f32));
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
    k.st(rs.negLse2[r], stats, k.mul(row, k.idx(2)));
    k.st(rs.dsum[r], stats, k.add(k.mul(row, k.idx(2)), k.idx(1)));
  }
  return rs;
}

/// Stores C fragments (16 rows from r0, d/8 tiles) into a row-major matrix.
/// A C element's two columns (2t, 2t + 1) go out as one 4-byte bf16 pair
/// (rows and head offsets are even); other element types one by one.
void storeTiles(Warp &w, ArrayRef<Frag> tiles, Value mem, const RowFn &row, Value r0,
                ArrayRef<Value> rowScale) {
  KB &k = w.k;
  bool pairs = llvm::cast<MemRefType>(mem.getType()).getElementType().isBF16();
  for (size_t dt = 0; dt < tiles.size(); ++dt)
    for (int64_t e = 0; e < 4; e += pairs ? 2 : 1) {
      Value at = k.add(row(k.add(r0, rowOf(w, e))), columnOf(w, 0, e));
      at = k.add(at, k.idx(8 * dt));
      auto value = [&](int64_t i) {
        Value v = tiles[dt][i];
        return rowScale.empty() ? v : k.mul(v, rowScale[i / 2]);
      };
      if (!pairs) {
        k.st(value(e), mem, at);
        continue;
      }
      Value pair = vector::FromElementsOp::create(
          k.b, k.loc, w.pairType,
          ValueRange{k.trunc(value(e), w.bf16), k.trunc(value(e + 1), w.bf16)});
      vector::StoreOp::create(k.b, k.loc, pair, mem, ValueRange{at}, /*nontemporal=*/false,
                              llvm::MaybeAlign(4));
    }
}

/// y = O / l and the row log-sum-exps of a forward tile (rows q0..).
void storeForwardOutput(Warp &w, const Online &on, ValueRange a, const Heads &hs, Value q0,
                        const AttentionShape &s) {
  KB &k = w.k;
  Value inv[2] = {k.div(k.f(1, w.f32), on.l[0]), k.div(k.f(1, w.f32), on.l[1])};
  storeTiles(w, on.o, a[1], hs.out, q0, inv);
  storeLogSumExp(w, on, a[2], hs, q0, s);
}

/// The column sums of C tiles (16 rows from r0, d/8 tiles, times rowScale
/// as storeTiles stores them, before rounding) to `sums` at sumRow(r0).
/// Each lane first adds its two rows; then the 8 row groups (lane bits 2-4)
/// are folded. With `halve`, by recursive halving: at each level a lane
/// keeps half of its columns, sends the other half to its partner and adds
/// what it gets, so 2 d/8 columns take d/8 + d/16 + d/32 shuffles and end
/// spread over the groups, each lane storing its own few (a level with an
/// odd count adds every column on both sides instead, and only the lanes
/// with that bit clear store). Without, by a butterfly per column (3 d/4
/// shuffles, fewer live values), the lanes of group 0 storing column pairs.
/// At 124M B=64 the dK/dV kernel took 715 us per launch with the halving
/// and 740 with the butterfly; the dQ kernel, capped at 128 registers,
/// 559 and 544 (it spills more with the halving). A fixed order either
/// way: the sums are deterministic.
void storeColumnSums(Warp &w, ArrayRef<Frag> tiles, Value sums, const RowFn &sumRow, Value r0,
                     ArrayRef<Value> rowScale, bool halve) {
  KB &k = w.k;
  auto storeIf = [&](Value cond, function_ref<void()> body) {
    auto guard = scf::IfOp::create(k.b, k.loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard ig(k.b);
    k.b.setInsertionPointToStart(&guard.getThenRegion().front());
    body();
  };
  SmallVector<Value> x; // column i: tile i / 2, element i % 2
  for (const Frag &tile : tiles)
    for (int64_t e = 0; e < 2; ++e) {
      // Rows g and g + 8, each as storeTiles stores it (one scale: once).
      Value v = k.add(tile[e], tile[e + 2]);
      if (!rowScale.empty())
        v = rowScale[0] == rowScale[1]
                ? k.mul(v, rowScale[0])
                : k.add(k.mul(tile[e], rowScale[0]), k.mul(tile[e + 2], rowScale[1]));
      if (!halve)
        for (int32_t mask : {4, 8, 16})
          v = k.add(v, w.shuffle(v, mask));
      x.push_back(v);
    }

  if (!halve) { // group 0: columns 2dt, 2dt + 1 of tile dt in one 8-byte store
    return storeIf(k.cmpEq(w.g, k.idx(0)), [&] {
      Value row = sumRow(r0), t2 = k.mul(w.t, k.idx(2));
      auto pairT = VectorType::get({2}, w.f32);
      for (size_t dt = 0; dt < tiles.size(); ++dt) {
        Value pair = vector::FromElementsOp::create(k.b, k.loc, pairT,
                                                    ValueRange{x[2 * dt], x[2 * dt + 1]});
        vector::StoreOp::create(k.b, k.loc, pair, sums,
                                ValueRange{k.add(row, k.add(t2, k.idx(8 * dt)))},
                                /*nontemporal=*/false, llvm::MaybeAlign(8));
      }
    });
  }

  Value first = k.idx(0);  // this lane's first column (of x's original order)
  Value stores = nullptr;  // i1: whether this lane stores (null: every lane)
  for (int32_t mask : {16, 8, 4}) {
    Value bit = k.urem(k.udiv(w.lane, k.idx(mask)), k.idx(2));
    Value upper = k.cmpEq(bit, k.idx(1));
    size_t half = x.size() / 2;
    if (x.size() % 2 == 0) {
      SmallVector<Value> kept;
      for (size_t i = 0; i < half; ++i) {
        Value lo = x[i], hi = x[half + i];
        Value keep = k.select(upper, hi, lo), send = k.select(upper, lo, hi);
        kept.push_back(k.add(keep, w.shuffle(send, mask)));
      }
      x = kept;
      first = k.add(first, k.select(upper, k.idx(static_cast<int64_t>(half)), k.idx(0)));
    } else {
      for (Value &v : x)
        v = k.add(v, w.shuffle(v, mask));
      Value lower = k.cmpEq(bit, k.idx(0));
      stores = stores ? arith::AndIOp::create(k.b, k.loc, stores, lower).getResult() : lower;
    }
  }
  auto put = [&] {
    Value row = sumRow(r0), t2 = k.mul(w.t, k.idx(2));
    for (size_t i = 0; i < x.size(); ++i) {
      Value col = k.add(first, k.idx(static_cast<int64_t>(i)));
      Value at = k.add(k.mul(k.udiv(col, k.idx(2)), k.idx(8)), k.urem(col, k.idx(2)));
      k.st(x[i], sums, k.add(row, k.add(at, t2)));
    }
  };
  if (stores)
    return storeIf(stores, put);
  put();
}

/// The backward kernels accumulate dS / scale (scoreGrad): every dq and dk
/// store goes through these two, which apply the softmax scale once (and,
/// with s.columnSums, add up the tile's columns into args[6]).
void storeQueryGrad(Warp &w, ValueRange dq, ValueRange args, const Heads &hs, Value q0,
                    const AttentionShape &s) {
  Value scale = w.k.f(s.scale, w.f32);
  SmallVector<Frag> tiles = tilesOf(dq, 0, s.headDim / 8);
  storeTiles(w, tiles, args[3], hs.q, q0, {scale, scale});
  if (s.columnSums)
    storeColumnSums(w, tiles, args[6], hs.sums(0), q0, {scale, scale}, /*halve=*/false);
}
/// acc: dv's d / 8 tiles, then dk's.
void storeKeyValueGrads(Warp &w, ValueRange acc, ValueRange args, const Heads &hs, Value k0,
                        const AttentionShape &s) {
  int64_t dTiles = s.headDim / 8;
  Value scale = w.k.f(s.scale, w.f32);
  SmallVector<Frag> dk = tilesOf(acc, dTiles, dTiles), dv = tilesOf(acc, 0, dTiles);
  storeTiles(w, dk, args[3], hs.key, k0, {scale, scale});
  storeTiles(w, dv, args[3], hs.val, k0, {});
  if (s.columnSums) {
    storeColumnSums(w, dk, args[6], hs.sums(1), k0, {scale, scale}, /*halve=*/true);
    storeColumnSums(w, dv, args[6], hs.sums(2), k0, {}, /*halve=*/true);
  }
}

SmallVector<Frag> loadRowsA(Warp &w, Value mem, const RowFn &row, Value r0, int64_t d) {
  SmallVector<Frag> a;
  for (int64_t kk = 0; kk < d / kTile; ++kk)
    a.push_back(w.loadA(mem, row, r0, kTile * kk));
  return a;
}

/// dS / scale of one 16-key block as an A fragment: p and dp are the raw
/// scores q.k and dy.v of keys key0.. (global indices) against the warp's
/// queries q0...
Frag queryScoreGrad(Warp &w, std::array<Frag, 2> p, const std::array<Frag, 2> &dp, Value key0,
                    Value q0, const RowStats &rs, const AttentionShape &s, bool masked) {
  KB &k = w.k;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 4; ++e) {
      Value key = k.add(key0, columnOf(w, n, e)), query = k.add(q0, rowOf(w, e));
      Value pe = causalProbability(w, p[n][e], rs.negLse2[e / 2], key, query, s.scale, masked);
      p[n][e] = scoreGrad(k, pe, dp[n][e], rs.dsum[e / 2]);
    }
  return w.toA(p[0], p[1]);
}

/// dq += dS k over one 16-key block (queryScoreGrad's arguments), kFrag(dt)
/// the keys as B fragments.
SmallVector<Value> queryGradStep(Warp &w, ValueRange cur, std::array<Frag, 2> p,
                                 const std::array<Frag, 2> &dp, Value key0, Value q0,
                                 const RowStats &rs, const AttentionShape &s, bool masked,
                                 function_ref<Frag(int64_t)> kFrag) {
  Frag dsa = queryScoreGrad(w, p, dp, key0, q0, rs, s, masked);
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
/// gives (-lse log2 e, D) of a query; dyFrag/qFrag(dt) are B fragments.
using StatsFn = function_ref<std::pair<Value, Value>(Value query, int64_t n, int64_t e)>;

/// P^T and dS^T / scale of one transposed 16-query block as A fragments:
/// p and ds hold the raw scores k.q and v.dy of the warp's keys k0..
/// against queries q0...
std::pair<Frag, Frag> keyValueScoreGrads(Warp &w, std::array<Frag, 2> p, std::array<Frag, 2> ds,
                                         Value q0, Value k0, const AttentionShape &s,
                                         bool masked, StatsFn statsOf) {
  KB &k = w.k;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 4; ++e) {
      Value query = k.add(q0, columnOf(w, n, e)), key = k.add(k0, rowOf(w, e));
      auto [negLse2, dsum] = statsOf(query, n, e);
      p[n][e] = causalProbability(w, p[n][e], negLse2, key, query, s.scale, masked);
      ds[n][e] = scoreGrad(k, p[n][e], ds[n][e], dsum);
    }
  return {w.toA(p[0], p[1]), w.toA(ds[0], ds[1])};
}

SmallVector<Value> keyValueGradStep(Warp &w, ValueRange cur, std::array<Frag, 2> p,
                                    std::array<Frag, 2> ds, Value q0, Value k0,
                                    const AttentionShape &s, bool masked, StatsFn statsOf,
                                    function_ref<Frag(int64_t)> dyFrag,
                                    function_ref<Frag(int64_t)> qFrag) {
  int64_t dTiles = s.headDim / 8;
  auto [pa, dsa] = keyValueScoreGrads(w, p, ds, q0, k0, s, masked, statsOf);
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
// kBuffers buffers of dynamic shared memory: stages s + 1 .. s + 3 load
// while stage s computes, with one barrier per stage. Fragments come from
// shared memory with ldmatrix: plain for operands along the head dimension
// (k in q.k), and transposed for operands along the rows (v in p.v).
//===----------------------------------------------------------------------===//

constexpr int64_t kBlockWarps = 8, kBlockThreads = 32 * kBlockWarps;
constexpr int64_t kBlockRows = kBlockWarps * kTile;
constexpr int64_t kStage = 64;
/// Row padding of shared tiles: rows start 4 banks apart, so the 8 rows an
/// ldmatrix phase reads (16 bytes each) hit 32 different banks.
constexpr int64_t kPad = 8;

/// A bf16 matrix in shared memory, row-major with row stride ld; ptr is its
/// address (for ldmatrix, cp.async and wgmma descriptors). `swizzled`: the
/// rows (2 ld bytes, 64 or 128) are unpadded and their 16-byte chunks
/// permuted as wgmma's 64/128-byte swizzle reads them (swizzledOffset).
struct Smem {
  Value ptr;
  int64_t ld;
  bool swizzled = false;
};

/// Byte `offset` of a row-major tile with `pitch`-byte rows (64 or 128)
/// under wgmma's swizzle of that width: chunk bits [4, 4 + b) take the XOR
/// of bits [7, 7 + b), b = log2(pitch / 16). Tiles start 1024-byte aligned.
Value swizzledOffset(KB &k, Value offset, int64_t pitch) {
  Value mask = k.idx(pitch / 16 - 1);
  Value bits = k.mul(k.urem(k.udiv(offset, k.idx(128)), k.add(mask, k.idx(1))), k.idx(16));
  return arith::XOrIOp::create(k.b, k.loc, offset, bits);
}

/// Buffers per staged operand: stage s + kBuffers - 1 is copied while
/// stage s computes, so kBuffers - 1 stages of copies are in flight.
constexpr int64_t kBuffers = 4;

/// Alignment of the pieces of shared memory: the repeat of wgmma's widest
/// swizzle (8 rows of 128 bytes).
constexpr int64_t kSharedAlign = 1024;

/// The kernel's dynamic shared memory (gpu.dynamic_shared_memory), rounded
/// up to kSharedAlign at run time and handed out in kSharedAlign pieces;
/// the launch asks for flashAttentionSharedBytes, which sizes the same.
struct SharedArena {
  Value base; // shared pointer
  int64_t used = 0;
  explicit SharedArena(KB &k) {
    Value raw = sharedPointer(k, dynamicSharedMemory(k));
    Type i64 = k.b.getI64Type();
    Value at = LLVM::PtrToIntOp::create(k.b, k.loc, i64, raw);
    Value up = arith::AddIOp::create(k.b, k.loc, at,
                                     arith::ConstantIntOp::create(k.b, k.loc, i64, kSharedAlign - 1));
    up = arith::AndIOp::create(k.b, k.loc, up,
                               arith::ConstantIntOp::create(k.b, k.loc, i64, -kSharedAlign));
    base = LLVM::IntToPtrOp::create(k.b, k.loc, raw.getType(), up);
  }
  Value take(KB &k, int64_t bytes) {
    Value at = elementPtr(k, base, k.b.getI8Type(), k.idx(used));
    used += llvm::alignTo(bytes, kSharedAlign);
    return at;
  }
};

/// Bytes of one staged operand: kBuffers tiles of kStage rows.
int64_t stageBytes(int64_t cols, bool swizzled) {
  int64_t ld = swizzled ? cols : cols + kPad;
  return llvm::alignTo(kBuffers * kStage * ld * 2, kSharedAlign);
}
/// Bytes of the key/value kernel's (-lse log2 e, D) pairs of a stage.
constexpr int64_t kStatsBytes = kBuffers * 2 * kStage * 4;

/// A kStage x cols tile in kBuffers buffers; tile(k, i) is buffer i.
struct SharedStage {
  Value base;
  int64_t ld;
  bool swizzled = false;
  Smem tile(KB &k, Value buffer) const {
    Value at = elementPtr(k, base, k.b.getBF16Type(), k.mul(buffer, k.idx(kStage * ld)));
    return {at, ld, swizzled};
  }
};

/// Padded rows for ldmatrix, or (swizzled) wgmma's swizzled rows.
SharedStage sharedStage(KB &k, SharedArena &arena, int64_t cols, bool swizzled = false) {
  return {arena.take(k, stageBytes(cols, swizzled)), swizzled ? cols : cols + kPad, swizzled};
}

void barrier(KB &k) { gpu::BarrierOp::create(k.b, k.loc); }

/// PTX `text` as inline assembly with side effects (kept in order with
/// barriers and copies); one f32 result per `results` entry.
SmallVector<Value> inlinePtx(KB &k, TypeRange results, ValueRange operands, StringRef text,
                             StringRef constraints) {
  Type type = LLVM::LLVMVoidType::get(k.b.getContext());
  if (!results.empty())
    type = LLVM::LLVMStructType::getLiteral(k.b.getContext(), SmallVector<Type>(results));
  auto op = LLVM::InlineAsmOp::create(
      k.b, k.loc, type, operands, text, constraints, /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(k.b.getContext(), LLVM::AsmDialect::AD_ATT), ArrayAttr());
  SmallVector<Value> out;
  for (size_t i = 0; i < results.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, op.getRes(), i));
  return out;
}

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
    Value to = k.add(k.mul(r, k.idx(dst.ld)), c8);
    // A row's chunks are permuted within the row: still one bank each.
    if (dst.swizzled)
      to = k.udiv(swizzledOffset(k, k.mul(to, k.idx(2)), 2 * dst.ld), k.idx(2));
    copyAsync(k, elementPtr(k, dst.ptr, bf16, to),
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
/// (4, 2 and 1 timed alike on the H200; bench/results/2026-12.md, 92e974f).
constexpr int64_t kStepTiles = 4;
static_assert(kSubTiles % kStepTiles == 0, "steps tile a stage");
/// Resident blocks per SM asked of the forward and dQ kernels: 2 instead
/// of ptxas's free choice (1) took 124M from 44.1 to 42.4 ms/step.
constexpr int64_t kMinBlocks = 2;

/// Stages [lo, mid) then [mid, hi) of a blocked kernel's loop, carrying
/// `init`. Stage s lives in buffer s % kBuffers; the copies of stages
/// s + 1 .. s + kBuffers - 1 (issue(stage, buffer)) are in flight while
/// stage s computes (compute(s, buffer, carried, masked)). compute is
/// emitted twice: without the causal mask and its per-tile branches for
/// the stages that every warp of the block sees whole, and with them for
/// the stages that cross the diagonal.
SmallVector<Value>
pipelinedStages(KB &k, Value lo, Value mid, Value hi, bool maskedFirst, ValueRange init,
                function_ref<void(Value, Value)> issue,
                function_ref<SmallVector<Value>(Value, Value, ValueRange, bool)> compute,
                bool asyncProxy = false) {
  auto bufferOf = [&](Value sb) { return k.urem(sb, k.idx(kBuffers)); };
  // One commit group per stage, empty past the end, so that "all but the
  // newest kBuffers - 2 groups done" always means "this stage has landed".
  auto issueIfAny = [&](Value sb) {
    auto op = scf::IfOp::create(k.b, k.loc, k.cmpUlt(sb, hi), /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPointToStart(&op.getThenRegion().front());
      issue(sb, bufferOf(sb));
    }
    NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc);
  };
  auto step = [&](Value sb, ValueRange cur, bool masked) {
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, kBuffers - 2);
    if (asyncProxy) // wgmma reads shared memory through the async proxy
      inlinePtx(k, {}, {}, "fence.proxy.async.shared::cta;", "");
    // Every thread's copies of stage sb have landed, and every thread is
    // done with stage sb - 1, whose buffer the next copies overwrite.
    barrier(k);
    issueIfAny(k.add(sb, k.idx(kBuffers - 1)));
    return compute(sb, bufferOf(sb), cur, masked);
  };
  for (int64_t i = 0; i < kBuffers - 1; ++i)
    issueIfAny(k.add(lo, k.idx(i)));
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
  auto issue = [&](Value sb, Value buffer) {
    Value key0 = k.mul(sb, k.idx(kStage));
    copyRowsAsync(k, bt.tid, src, bt.hs.key, key0, s.headDim, sKs.tile(k, buffer));
    copyRowsAsync(k, bt.tid, src, bt.hs.val, key0, s.headDim, sVs.tile(k, buffer));
  };
  return pipelinedStages(
      k, k.idx(0), whole, stages, /*maskedFirst=*/false, init, issue,
      [&](Value sb, Value buffer, ValueRange cur, bool masked) {
        return stage(sb, k.mul(sb, k.idx(kStage)), sKs.tile(k, buffer), sVs.tile(k, buffer),
                     cur, masked);
      },
      /*asyncProxy=*/sKs.swizzled);
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
                          /*masked=*/false, [&](ArrayRef<Frag> pa, SmallVector<Frag> &o) {
                            mmaProduct(w, pa, o, [&](int64_t j) {
                              return columnsShared(w, sV, kTile * (j0 + j), s.headDim);
                            });
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
                          [&](ArrayRef<Frag> pa, SmallVector<Frag> &o) {
                            mmaProduct(w, pa, o, [&](int64_t) {
                              return columnsShared(w, sV, kTile * j, s.headDim);
                            });
                          });
      });
    }
    return vals;
  });
  return onlineResult(w, st, s);
}

//===----------------------------------------------------------------------===//
// Warpgroup kernels (sm_90a): the blocked kernels' staging and block shape,
// with the products on wgmma. Warps 4 j .. 4 j + 3 form warpgroup j, which
// owns 64 consecutive rows; each warp keeps its 16 rows as the same A
// fragments mma.sync takes. wgmma multiplies the group's 64 x 16 A by a
// 16 x N B that it reads from shared memory itself (no ldmatrix), into
// 64 x N f32 accumulators that each warp holds as N / 8 mma.sync C tiles.
// Staged tiles are unpadded rows of d bf16 (64 or 128 bytes) whose 16-byte
// chunks are swizzled as wgmma's 64/128-byte swizzle expects; the same
// tile is a K-major B where rows run along N (keys in q.k) and an MN-major
// B where they run along K (values in p.v).
//===----------------------------------------------------------------------===//

/// The 64-bit wgmma shared-memory descriptor of a B operand at `offset`
/// bytes into the swizzled tile `sm`: start address, the leading and the
/// stride byte offsets (16-byte units) and the swizzle (row pitch 128
/// bytes: mode 1, 64: mode 2).
Value matrixDescriptor(KB &k, const Smem &sm, int64_t offset, int64_t lbo, int64_t sbo) {
  Type i64 = k.b.getI64Type();
  Value addr = LLVM::PtrToIntOp::create(k.b, k.loc, i64, sm.ptr);
  auto c = [&](int64_t v) { return arith::ConstantIntOp::create(k.b, k.loc, i64, v); };
  Value start = arith::AndIOp::create(
      k.b, k.loc,
      arith::ShRUIOp::create(k.b, k.loc, arith::AddIOp::create(k.b, k.loc, addr, c(offset)),
                             c(4)),
      c(0x3FFF));
  int64_t mode = 2 * sm.ld == 128 ? 1 : 2;
  return arith::OrIOp::create(
      k.b, k.loc, start, c(((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)));
}

/// B[kk][n] = sm[row0 + n][16 step + kk]: rows along N (keys of q.k),
/// K-major; row0 a multiple of 8. Groups of 8 rows are 8 pitches apart;
/// a k-step moves 32 bytes along the (swizzled) rows.
Value rowsDescriptor(KB &k, const Smem &sm, int64_t step, int64_t row0 = 0) {
  int64_t pitch = 2 * sm.ld;
  return matrixDescriptor(k, sm, 32 * step + row0 * pitch, /*lbo=*/16, /*sbo=*/8 * pitch);
}
/// B[kk][n] = sm[16 step + kk][n]: rows along K (values of p.v),
/// MN-major: groups of 8 rows are 8 pitches apart (SBO); a row is exactly
/// one swizzle atom wide (n = d), so the stride between atoms along N
/// (LBO) is never used.
Value columnsDescriptor(KB &k, const Smem &sm, int64_t step) {
  int64_t pitch = 2 * sm.ld;
  return matrixDescriptor(k, sm, 16 * step * pitch, /*lbo=*/8 * pitch, /*sbo=*/8 * pitch);
}

/// One product of a wgmma group: acc + sum_i a[i] B_i (acc empty: from
/// zero), B_i a 16 x n operand given by descriptor descs[i] (mnMajor:
/// transposed).
struct WarpgroupProduct {
  ArrayRef<Frag> a;
  SmallVector<Value> descs;
  SmallVector<Value> acc;
  int64_t n;
  bool mnMajor;
};

/// The products as one group of wgmma.mma_async that it waits for: the
/// results are ready when this returns, and independent products overlap
/// on the tensor cores. Each warp passes its own A fragments and gets its
/// rows of each 64 x n result as n / 8 C tiles.
SmallVector<SmallVector<Value>> warpgroupMmas(Warp &w, ArrayRef<WarpgroupProduct> products) {
  SmallVector<Value> tied, inputs;
  std::string outs, ties, ins;
  int64_t results = 0;
  for (const WarpgroupProduct &p : products)
    results += p.n / 2;
  // Operand numbers: results, then the accumulators they are tied to,
  // then A fragments and descriptors, then one i32 for the predicates.
  int64_t next = results, first = 0;
  SmallVector<int64_t> firstOut, firstA, firstDesc;
  for (const WarpgroupProduct &p : products) {
    firstOut.push_back(first);
    for (int64_t i = 0; i < p.n / 2; ++i)
      outs += "=f,";
    if (!p.acc.empty()) {
      for (int64_t i = 0; i < p.n / 2; ++i)
        ties += std::to_string(first + i) + ",";
      tied.append(p.acc.begin(), p.acc.end());
      next += p.n / 2;
    }
    first += p.n / 2;
  }
  for (const WarpgroupProduct &p : products) {
    firstA.push_back(next);
    for (const Frag &f : p.a) {
      inputs.append(f.begin(), f.end());
      ins += "r,r,r,r,";
      next += 4;
    }
  }
  for (const WarpgroupProduct &p : products) {
    firstDesc.push_back(next);
    inputs.append(p.descs.begin(), p.descs.end());
    for (size_t i = 0; i < p.descs.size(); ++i)
      ins += "l,";
    next += static_cast<int64_t>(p.descs.size());
  }
  inputs.push_back(arith::ConstantIntOp::create(w.k.b, w.k.loc, w.i32, 0));
  ins += "r";
  auto num = [](int64_t i) { return "$" + std::to_string(i); };
  // fromZero: false (D = A B on the first k-step); accumulate: true.
  std::string text = "{\n.reg .pred fromZero, accumulate;\nsetp.ne.b32 fromZero, " +
                     num(next) + ", " + num(next) + ";\nsetp.eq.b32 accumulate, " + num(next) +
                     ", " + num(next) + ";\nwgmma.fence.sync.aligned;\n";
  for (size_t j = 0; j < products.size(); ++j) {
    const WarpgroupProduct &p = products[j];
    std::string d;
    for (int64_t i = 0; i < p.n / 2; ++i)
      d += (i ? ", " : "") + num(firstOut[j] + i);
    for (size_t i = 0; i < p.a.size(); ++i) {
      int64_t r = firstA[j] + 4 * static_cast<int64_t>(i);
      text += "wgmma.mma_async.sync.aligned.m64n" + std::to_string(p.n) +
              "k16.f32.bf16.bf16 {" + d + "}, {" + num(r) + ", " + num(r + 1) + ", " +
              num(r + 2) + ", " + num(r + 3) + "}, " + num(firstDesc[j] + i) + ", " +
              (i == 0 && p.acc.empty() ? "fromZero" : "accumulate") + ", 1, 1, " +
              (p.mnMajor ? "1" : "0") + ";\n";
    }
  }
  text += "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}";
  SmallVector<Value> operands(tied);
  operands.append(inputs.begin(), inputs.end());
  std::string constraints = outs + ties + ins;
  SmallVector<Value> flat =
      inlinePtx(w.k, SmallVector<Type>(results, w.f32), operands, text, constraints);
  SmallVector<SmallVector<Value>> out;
  for (size_t j = 0; j < products.size(); ++j)
    out.push_back(SmallVector<Value>(flat.begin() + firstOut[j],
                                     flat.begin() + firstOut[j] + products[j].n / 2));
  return out;
}

/// One product (warpgroupMmas).
SmallVector<Value> warpgroupMma(Warp &w, ArrayRef<Frag> a, ArrayRef<Value> descs,
                                ArrayRef<Value> acc, int64_t n, bool mnMajor) {
  WarpgroupProduct p{a, SmallVector<Value>(descs), SmallVector<Value>(acc), n, mnMajor};
  return warpgroupMmas(w, {p})[0];
}

/// C tiles as flat accumulators (tilesOf's inverse).
SmallVector<Value> flatOfTiles(ArrayRef<Frag> tiles) {
  SmallVector<Value> flat;
  for (const Frag &t : tiles)
    flat.append(t.begin(), t.end());
  return flat;
}

/// The first row of the warpgroup of thread `tid` of a block whose rows
/// start at `first`.
Value groupFirstRow(KB &k, Value tid, Value first) {
  Value group = k.udiv(tid, k.idx(4 * 32));
  return k.add(first, k.mul(group, k.idx(kBlockRows / 2)));
}

void forwardKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  BlockTile bt = blockTile(k, idx, s, /*queries=*/true);
  SharedArena arena(k);
  SharedStage sK = sharedStage(k, arena, s.headDim), sV = sharedStage(k, arena, s.headDim);
  SmallVector<Frag> qa = loadRowsA(w, a[0], bt.hs.q, bt.row0, s.headDim);
  Online on = forwardBlocked(w, qa, a[0], bt, sK, sV, s);
  storeForwardOutput(w, on, a, bt.hs, bt.row0, s);
}

/// Columns of one warpgroup product in the backward kernels: half a
/// stage, which keeps scores and their gradients at 16 registers each.
constexpr int64_t kHalf = kStage / 2;

void backwardQueryKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2];
  int64_t d = s.headDim, dTiles = d / 8;
  bool warpgroup = flashAttentionWarpgroup(s);
  BlockTile bt = blockTile(k, idx, s, /*queries=*/true);
  const Heads &hs = bt.hs;
  SharedArena arena(k);
  SharedStage sKs = sharedStage(k, arena, d, warpgroup), sVs = sharedStage(k, arena, d, warpgroup);
  Value group0 = groupFirstRow(k, bt.tid, bt.first);
  SmallVector<Frag> qa = loadRowsA(w, qkv, hs.q, bt.row0, s.headDim);
  RowStats rs = rowStatistics(w, a[5], dy, a[4], stats, hs, bt.row0, s);

  // dq_i = scale sum_j p_ij (dy_i . v_j - D_i) k_j.
  SmallVector<Frag> dya = loadRowsA(w, dy, hs.out, bt.row0, s.headDim);
  SmallVector<Value> init(dTiles * 4, k.f(0, w.f32));
  auto dq = keyValueStages(k, bt, qkv, sKs, sVs, s, init,
                           [&](Value sb, Value key0, const Smem &sK, const Smem &sV,
                               ValueRange cur, bool masked) {
    if (warpgroup) {
      // Per half stage: scores and dP on wgmma, dS in registers, then
      // dq += dS k with the keys as an MN-major B.
      auto step = [&]() -> SmallVector<Value> {
        SmallVector<Value> acc(cur);
        for (int64_t h = 0; h < kStage / kHalf; ++h) {
          SmallVector<Value> kd, vd, kc;
          for (int64_t i = 0; i < d / kTile; ++i) {
            kd.push_back(rowsDescriptor(k, sK, i, kHalf * h));
            vd.push_back(rowsDescriptor(k, sV, i, kHalf * h));
          }
          auto sp = warpgroupMmas(w, {{qa, kd, {}, kHalf, false}, {dya, vd, {}, kHalf, false}});
          SmallVector<Frag> p = tilesOf(sp[0]), dp = tilesOf(sp[1]);
          SmallVector<Frag> dsa;
          for (int64_t j = 0; j < kHalf / kTile; ++j) {
            int64_t key = kHalf * h + kTile * j;
            dsa.push_back(queryScoreGrad(w, {p[2 * j], p[2 * j + 1]}, {dp[2 * j], dp[2 * j + 1]},
                                         k.add(key0, k.idx(key)), bt.row0, rs, s, masked));
            kc.push_back(columnsDescriptor(k, sK, key / kTile));
          }
          acc = warpgroupMma(w, dsa, kc, acc, d, true);
        }
        return acc;
      };
      if (!masked)
        return step();
      return when(k, arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key0, group0),
                  cur, step);
    }
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
  storeQueryGrad(w, dq, a, hs, bt.row0, s);
}

void backwardKeyValueKernelBlocked(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2];
  int64_t d = s.headDim, dTiles = d / 8;
  bool warpgroup = flashAttentionWarpgroup(s);
  BlockTile bt = blockTile(k, idx, s, /*queries=*/false);
  const Heads &hs = bt.hs;
  Value k0 = bt.row0, group0 = groupFirstRow(k, bt.tid, bt.first);
  SharedArena arena(k);
  SharedStage sQs = sharedStage(k, arena, d, warpgroup), sDys = sharedStage(k, arena, d, warpgroup);
  Value sStatsPtr = arena.take(k, kStatsBytes); // (-lse log2 e, D) of a stage's rows
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
  auto issue = [&](Value sb, Value buffer) {
    Value q0s = k.mul(sb, k.idx(kStage));
    copyRowsAsync(k, bt.tid, qkvPtr, hs.q, q0s, s.headDim, sQs.tile(k, buffer));
    copyRowsAsync(k, bt.tid, dyPtr, hs.out, q0s, s.headDim, sDys.tile(k, buffer));
    auto copy = scf::IfOp::create(k.b, k.loc, k.cmpUlt(bt.tid, k.idx(2 * kStage)),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(&copy.getThenRegion().front());
    Value from = k.add(k.add(statsBase, k.mul(q0s, k.idx(2))), bt.tid);
    Value to = k.add(k.mul(buffer, k.idx(2 * kStage)), bt.tid);
    copyAsync(k, elementPtr(k, sStatsPtr, w.f32, to), elementPtr(k, statsPtr, w.f32, from), 4);
  };
  auto acc = pipelinedStages(k, first, whole, k.idx(s.seq / kStage), /*maskedFirst=*/true, init,
                             issue, [&](Value sb, Value buffer, ValueRange cur, bool masked) {
    Value q0s = k.mul(sb, k.idx(kStage));
    Smem sQ = sQs.tile(k, buffer), sDy = sDys.tile(k, buffer);
    Value statsAt = k.mul(buffer, k.idx(2 * kStage));
    // (-lse log2 e, D) of query q0s + q + the column of C element (n, e).
    auto statsAtQuery = [&](int64_t q, int64_t n, int64_t e) {
      Value at = k.add(statsAt, k.mul(k.add(k.idx(q), columnOf(w, n, e)), k.idx(2)));
      auto ld = [&](Value i) {
        return LLVM::LoadOp::create(k.b, k.loc, w.f32, elementPtr(k, sStatsPtr, w.f32, i));
      };
      Value negLse2 = ld(at), dsum = ld(k.add(at, k.idx(1)));
      return std::make_pair(negLse2, dsum);
    };
    if (warpgroup) {
      // Per half stage: k.q and v.dy on wgmma (queries as the N of a
      // K-major B), P and dS in registers, then dv += P^T dy and
      // dk += dS^T q with the queries as an MN-major B.
      // The scores of half h + 1 go in one wgmma group with the gradient
      // products of half h: independent, they overlap on the tensor cores.
      auto step = [&]() -> SmallVector<Value> {
        SmallVector<Value> dv(cur.begin(), cur.begin() + 4 * dTiles);
        SmallVector<Value> dk(cur.begin() + 4 * dTiles, cur.end());
        auto scoreProducts = [&](int64_t h) {
          SmallVector<Value> qd, dyd;
          for (int64_t i = 0; i < d / kTile; ++i) {
            qd.push_back(rowsDescriptor(k, sQ, i, kHalf * h));
            dyd.push_back(rowsDescriptor(k, sDy, i, kHalf * h));
          }
          return SmallVector<WarpgroupProduct>{{ka, qd, {}, kHalf, false},
                                               {va, dyd, {}, kHalf, false}};
        };
        auto sp = warpgroupMmas(w, scoreProducts(0));
        for (int64_t h = 0; h < kStage / kHalf; ++h) {
          SmallVector<Value> qc, dyc;
          SmallVector<Frag> p = tilesOf(sp[0]), ds = tilesOf(sp[1]);
          SmallVector<Frag> pa, dsa;
          for (int64_t j = 0; j < kHalf / kTile; ++j) {
            int64_t q = kHalf * h + kTile * j;
            auto [pj, dsj] = keyValueScoreGrads(
                w, {p[2 * j], p[2 * j + 1]}, {ds[2 * j], ds[2 * j + 1]}, k.add(q0s, k.idx(q)), k0,
                s, masked, [&](Value, int64_t n, int64_t e) { return statsAtQuery(q, n, e); });
            pa.push_back(pj);
            dsa.push_back(dsj);
            dyc.push_back(columnsDescriptor(k, sDy, q / kTile));
            qc.push_back(columnsDescriptor(k, sQ, q / kTile));
          }
          SmallVector<WarpgroupProduct> group = {{pa, dyc, dv, d, true}, {dsa, qc, dk, d, true}};
          if (h + 1 < kStage / kHalf)
            llvm::append_range(group, scoreProducts(h + 1));
          auto out = warpgroupMmas(w, group);
          dv = out[0];
          dk = out[1];
          if (h + 1 < kStage / kHalf)
            sp = {out[2], out[3]};
        }
        dv.append(dk.begin(), dk.end());
        return dv;
      };
      if (!masked)
        return step();
      // The group's keys see no query before its first key.
      return when(k, arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::uge, q0s, group0),
                  cur, step);
    }
    SmallVector<Value> vals(cur);
    for (int64_t j = 0; j < kSubTiles; ++j) {
      auto visible = [&]() -> Value {
        Value qt = k.add(k.mul(sb, k.idx(kSubTiles)), k.idx(j));
        return arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::uge, qt, bt.tile);
      };
      vals = maybeWhen(k, masked, visible, vals, [&] {
        auto statsOf = [&](Value, int64_t n, int64_t e) { return statsAtQuery(kTile * j, n, e); };
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
  }, /*asyncProxy=*/warpgroup);
  storeKeyValueGrads(w, acc, a, hs, k0, s);
}

void forwardKernelWarpgroup(KB &k, Value idx, ValueRange a, const AttentionShape &s) {
  Warp w(k, idx);
  int64_t d = s.headDim;
  BlockTile bt = blockTile(k, idx, s, /*queries=*/true);
  SharedArena arena(k);
  SharedStage sKs = sharedStage(k, arena, d, /*swizzled=*/true);
  SharedStage sVs = sharedStage(k, arena, d, /*swizzled=*/true);
  SmallVector<Frag> qa = loadRowsA(w, a[0], bt.hs.q, bt.row0, d);
  Value group0 = groupFirstRow(k, bt.tid, bt.first);
  auto st = keyValueStages(k, bt, a[0], sKs, sVs, s, onlineInit(w, s),
                           [&](Value, Value key0, const Smem &sK, const Smem &sV,
                               ValueRange cur, bool masked) {
    auto step = [&]() -> SmallVector<Value> {
      SmallVector<Value> descs;
      for (int64_t i = 0; i < d / kTile; ++i)
        descs.push_back(rowsDescriptor(k, sK, i));
      SmallVector<Frag> scores = tilesOf(warpgroupMma(w, qa, descs, {}, kStage, false));
      SmallVector<std::array<Frag, 2>> sc;
      for (int64_t j = 0; j < kSubTiles; ++j)
        sc.push_back({scores[2 * j], scores[2 * j + 1]});
      return onlineStep(w, cur, sc, key0, bt.row0, s, masked,
                        [&](ArrayRef<Frag> pa, SmallVector<Frag> &o) {
                          SmallVector<Value> vd;
                          for (int64_t j = 0; j < kSubTiles; ++j)
                            vd.push_back(columnsDescriptor(k, sV, j));
                          o = tilesOf(warpgroupMma(w, pa, vd, flatOfTiles(o), d, true));
                        });
    };
    if (!masked)
      return step();
    // The block's own stages: a warpgroup sees none of the keys after its
    // last query (a branch uniform over the group, as wgmma needs).
    return when(k, arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::ule, key0, group0),
                cur, step);
  });
  Online on = onlineResult(w, st, s);
  storeForwardOutput(w, on, a, bt.hs, bt.row0, s);
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

int64_t flashAttentionSharedBytes(const AttentionShape &s, FlashKernel kernel) {
  if (!flashAttentionBlocked(s))
    return 0;
  int64_t bytes = 2 * stageBytes(s.headDim, flashAttentionWarpgroup(s));
  if (kernel == FlashKernel::BackwardKeyValue)
    bytes += llvm::alignTo(kStatsBytes, kSharedAlign);
  // The arena rounds the dynamic buffer's start up to kSharedAlign.
  return bytes + kSharedAlign;
}

int64_t flashAttentionThreads(const AttentionShape &s) {
  return s.batch * s.heads * (s.seq / kTile) * 32;
}

bool flashAttentionWarpgroup(const AttentionShape &s) {
  return s.warpgroupMma && flashAttentionBlocked(s);
}

bool flashAttentionBlocked(const AttentionShape &s) {
  return s.blockThreads == kBlockThreads && s.seq % kBlockRows == 0 && s.headDim % 32 == 0 &&
         s.headDim <= 64;
}

void buildFlashAttentionForward(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionWarpgroup(s))
    return forwardKernelWarpgroup(k, idx, a, s);
  if (flashAttentionBlocked(s))
    return forwardKernelBlocked(k, idx, a, s);
  Warp w(k, idx);
  WarpTile wt = warpTile(k, idx, s, /*queries=*/true);
  Value tile = wt.tile, q0 = wt.row0;
  const Heads &hs = wt.hs;
  SmallVector<Frag> qa = loadRowsA(w, a[0], hs.q, q0, s.headDim);
  Online on = forwardTile(w, qa, a[0], hs, q0, tile, s);
  storeForwardOutput(w, on, a, hs, q0, s);
}

void buildFlashAttentionBackwardQuery(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                      const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionBlocked(s))
    return backwardQueryKernelBlocked(k, idx, a, s);
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2];
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
  storeQueryGrad(w, dq, a, hs, q0, s);
}

void buildFlashAttentionBackwardKeyValue(OpBuilder &b, Location loc, Value idx, ValueRange a,
                                         const AttentionShape &s) {
  KB k{b, loc};
  if (flashAttentionBlocked(s))
    return backwardKeyValueKernelBlocked(k, idx, a, s);
  Warp w(k, idx);
  Value dy = a[0], qkv = a[1], stats = a[2];
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
  storeKeyValueGrads(w, acc, a, hs, k0, s);
}

} // namespace gptc::codegen
