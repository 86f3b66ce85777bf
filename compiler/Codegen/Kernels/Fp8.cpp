//===- Kernels/Fp8.cpp - the Fp8 kernel family ------------------------------===//
//
// FP8 scales (current and delayed), quantize, cast-transpose (+ column
// sums), byte transpose. Moved from Lowering.cpp (issue 44): its lowerings
// are LoweringContext members (LoweringContext.h), registered by
// registerFp8Lowerings below.
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
/// Values one thread of an amax stage folds (strided, so coalesced), and
/// the most the last stage's single row takes.
constexpr int64_t kAmaxFold = 64, kAmaxLast = 2048;
/// CUDA's first amax stage: at most this many blocks (partials for the
/// scale kernel), each thread folding 8-element vectors kAmaxUnroll at a
/// time.
constexpr int64_t kAmaxBlocks = 1024, kAmaxUnroll = 8;
/// Consecutive input columns one thread of a transposing quantize takes
/// (the scalar kernel).
constexpr int64_t kTransposeRun = 16;
/// CUDA's cast-transpose: a block takes a kCastTile x kCastTile tile,
/// staged as codes in shared memory rows of kCastTilePitch bytes (the
/// padding spreads the column reads over the banks).
constexpr int64_t kCastTile = 64, kCastTilePitch = 68;
// A cast-transpose's column sums are reduceColumns' first stage, a tile per
// chunk: the same partials, in the same order, for one fold kernel.
static_assert(kCastTile == kColumnChunkRows, "a tile's rows are a column chunk");
/// Threads of a tile's block: each moves 16 codes of the transposed rows.
constexpr int64_t kCastTileThreads = kCastTile * kCastTile / 16;

/// A tiled transpose's block (kCastTileThreads per 64 x 64 tile, tiles
/// row by row over `cols` columns): the thread, its tile's first row and
/// column, and the tile in dynamic shared memory.
struct CastTile {
  Value tid, r0, c0, codes;
};
CastTile castTile(KB &k, Value idx, int64_t cols) {
  Value tid = k.urem(idx, k.idx(kCastTileThreads)), block = k.udiv(idx, k.idx(kCastTileThreads));
  int64_t tilesPerRow = cols / kCastTile;
  return {tid, k.mul(k.udiv(block, k.idx(tilesPerRow)), k.idx(kCastTile)),
          k.mul(k.urem(block, k.idx(tilesPerRow)), k.idx(kCastTile)),
          sharedView(k, dynamicSharedMemory(k), 0, kCastTile * kCastTilePitch, k.b.getI8Type())};
}

/// After the tile is in shared memory (and a barrier): each thread gathers
/// 16 codes down column tid / 4, rows (tid % 4) * 16 on, and stores them as
/// one 16-byte vector of that transposed row of `out` ((cols, rows)).
void storeTileColumns(KB &k, const CastTile &t, Value out, int64_t rows) {
  Value c = k.udiv(t.tid, k.idx(4)), q = k.mul(k.urem(t.tid, k.idx(4)), k.idx(16));
  SmallVector<Value> down;
  for (int64_t i = 0; i < 16; ++i)
    down.push_back(k.ld(t.codes, k.add(k.mul(k.add(q, k.idx(i)), k.idx(kCastTilePitch)), c)));
  k.stVector(down, out, k.add(k.mul(k.add(t.c0, c), k.idx(rows)), k.add(t.r0, q)));
}

/// What an FP8 kernel quantizes of a loaded (widened) value v of a tensor
/// of `elt`: v, or with `gelu` GELU(v) rounded as a stored gpt.gelu result
/// (gpt-lower-fp8's fold-gelu), so that the codes are the unfused ones.
Value fp8Source(KB &k, Value v, Type elt, bool gelu) {
  return gelu ? k.asStored(geluOf(k, v), elt) : v;
}

/// An FP8 source of a loaded v with its GELU gradient folded in
/// (gpt-fuse-fp8's cast epilogues): with `pre` (loaded, widened) the values are
/// v gelu'(pre) (`exact`, the column sums' terms) rounded as a stored
/// gpt.gelu_grad result; without, v itself (and `exact` v too).
Value fp8Source(KB &k, Value v, Value pre, Type elt, bool gelu, Value *exact = nullptr) {
  if (!pre) {
    v = fp8Source(k, v, elt, gelu);
    if (exact)
      *exact = v;
    return v;
  }
  Value g = k.mul(v, geluGradOf(k, pre));
  if (exact)
    *exact = g;
  return k.asStored(g, elt);
}

/// Elements [0, n) of `mem`, loaded.
SmallVector<Value> loadFirst(KB &k, Value mem, int64_t n) {
  SmallVector<Value> xs;
  for (int64_t i = 0; i < n; ++i)
    xs.push_back(k.ld(mem, k.idx(i)));
  return xs;
}

/// The largest of xs, folded left (NaN if one is).
Value maxOf(KB &k, ArrayRef<Value> xs) {
  Value m = xs.front();
  for (Value x : xs.drop_front())
    m = k.fmax(m, x);
  return m;
}

/// The loaded history `h` moved one place on into `shifted` from `first`:
/// 0, h[0], ..., h[n - 2]. Every element is loaded before any is stored, so
/// in place the shifted history may overwrite the one it is read from.
void storeShifted(KB &k, ArrayRef<Value> h, Value shifted, Value first) {
  k.st(k.f(0, k.b.getF32Type()), shifted, first);
  for (size_t i = 1; i < h.size(); ++i)
    k.st(h[i - 1], shifted, k.add(first, k.idx(i)));
}

/// An FP8 scale from its amax: s = maxFinite / amax (1 where the amax is
/// 0 or not finite, NaN included) into scale[scaleAt], 1 / s into
/// inverse[inverseAt].
void storeScale(KB &k, Value amax, Value maxFinite, Value scale, Value scaleAt, Value inverse,
                Value inverseAt) {
  Type ft = k.b.getF32Type();
  Value s = k.select(usableAmax(k, amax), k.div(maxFinite, amax), k.f(1, ft));
  k.st(s, scale, scaleAt);
  k.st(k.div(k.f(1, ft), s), inverse, inverseAt);
}

} // namespace

/// gpt.fp8_scale: stages of maxima of |x| until at most kAmaxLast partials
/// are left; one row folds those into amax and stores s = max_finite / amax
/// (1 if amax is 0 or not finite) and 1 / s. Maxima are exact, so the
/// order of folding does not change the bits. On CUDA the first stage
/// reads 16-byte vectors and folds each block's maxima with shuffles;
/// otherwise each stage's threads fold kAmaxFold strided values. With a
/// history, every kernel reads it first: where its largest amax is usable
/// the stages do nothing and the scale is taken from it, and the scale
/// kernel also stores the history shifted on.
LogicalResult LoweringContext::lowerFp8Scale(Fp8ScaleOp op) {
  std::string key = keyOf(op);
  Type ft = Float32Type::get(ctx);
  Value x = op.getInput();
  Type elt = eltOf(x);
  bool gelu = op.getGelu();
  int64_t n = numel(x);
  Operand values = t(x);
  Type valuesType = flat(x);
  int64_t count = n;
  Value history = op.getHistory();
  int64_t past = history ? numel(history) : 0;
  // With a folded GELU gradient every pass over the input reads `pre` too,
  // as its last argument: its position, or -1 where a kernel reads none.
  Value pre = op.getPre();
  auto readPre = [&](std::vector<Type> &types, std::vector<Operand> &args, bool readsInput) {
    if (!pre || !readsInput)
      return int64_t{-1};
    types.push_back(flat(pre));
    args.push_back(t(pre));
    return static_cast<int64_t>(types.size()) - 1;
  };
  // The stages' arguments after their input and partials: the history.
  std::vector<Type> historyTypes;
  std::vector<Operand> historyArgs;
  if (history) {
    historyTypes.push_back(flatOf(past, ft));
    historyArgs.push_back(t(history));
  }
  auto withHistory = [&](std::vector<Type> types, std::vector<Operand> args) {
    llvm::append_range(types, historyTypes);
    llvm::append_range(args, historyArgs);
    return std::pair(types, args);
  };
  // The amax stages run only without a usable history.
  auto unlessDelayed = [past](KB &k, ValueRange a, size_t at, function_ref<void()> body) {
    if (!past)
      return body();
    buildIf(k, usableAmax(k, maxOf(k, loadFirst(k, a[at], past))), body, /*unless=*/true);
  };
  int64_t threads = options.blockThreads, warps = threads / 32;
  int64_t width = 16 * 8 / elt.getIntOrFloatBitWidth();
  if (vectorChunks(x, width) && (!pre || vectorChunks(pre, width)) && n % width == 0 &&
      threads % 32 == 0 && n > kAmaxLast) {
    int64_t vectors = n / width;
    int64_t per = (vectors + kAmaxBlocks * threads - 1) / (kAmaxBlocks * threads);
    per = (per + kAmaxUnroll - 1) / kAmaxUnroll * kAmaxUnroll;
    int64_t blocks = (vectors + per * threads - 1) / (per * threads);
    Operand partial = scratch(blocks * 4);
    auto [types, args] = withHistory({valuesType, flatOf(blocks, ft)}, {values, partial});
    int64_t preAt = readPre(types, args, /*readsInput=*/true);
    launch(op, key + "amaxv", "fp8_amax", types, args, blocks * threads,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             unlessDelayed(k, a, 2, [&] {
             Value tid = k.urem(idx, k.idx(threads)), block = k.udiv(idx, k.idx(threads));
             Value first = k.add(k.mul(block, k.idx(per * threads)), tid);
             // Past the end a thread reads the last vector again: a
             // maximum does not change, and no branch is needed.
             Value m = k.loop(k.idx(0), k.idx(per), k.idx(kAmaxUnroll), {k.f(0, ft)},
                              [&](Value j, ValueRange acc) {
               Value cur = acc[0];
               SmallVector<Value> xs, ps;
               for (int64_t u = 0; u < kAmaxUnroll; ++u) {
                 Value v = k.add(first, k.mul(k.add(j, k.idx(u)), k.idx(threads)));
                 v = arith::MinUIOp::create(b, loc, v, k.idx(vectors - 1));
                 llvm::append_range(xs, k.ldVector(a[0], k.mul(v, k.idx(width)), width));
                 if (preAt >= 0)
                   llvm::append_range(ps, k.ldVector(a[preAt], k.mul(v, k.idx(width)), width));
               }
               for (auto [i, v] : llvm::enumerate(xs))
                 cur = k.fmax(cur, math::AbsFOp::create(
                                       b, loc, fp8Source(k, v, preAt >= 0 ? ps[i] : Value(), elt, gelu)));
               return SmallVector<Value>{cur};
             })[0];
             // The warp's maximum, then one per warp in shared memory.
             RowLanes warp(k, tid, 32);
             m = warp.max(m);
             Value perWarp = sharedView(k, dynamicSharedMemory(k), 0, warps, ft);
             warp.once([&] { k.st(m, perWarp, warp.row); });
             gpu::BarrierOp::create(b, loc);
             buildIf(k, k.cmpEq(tid, k.idx(0)),
                     [&] { k.st(maxOf(k, loadFirst(k, perWarp, warps)), a[1], block); });
             });
           },
           /*minBlocksPerSM=*/0, /*sharedBytes=*/warps * 4);
    values = partial;
    valuesType = flatOf(blocks, ft);
    count = blocks;
  }
  while (count > kAmaxLast) {
    int64_t threads = (count + kAmaxFold - 1) / kAmaxFold;
    Operand partial = scratch(threads * 4);
    bool first = count == n; // the input itself, not partial maxima
    auto [types, args] = withHistory({valuesType, flatOf(threads, ft)}, {values, partial});
    int64_t preAt = readPre(types, args, first);
    launch(op, key + "amax" + std::to_string(count), "fp8_amax", types, args, threads,
           [=](OpBuilder &b, Location loc, Value p, ValueRange a) {
             KB k{b, loc};
             unlessDelayed(k, a, 2, [&] {
               Value m = k.loop(p, k.idx(count), k.idx(threads), {k.f(0, ft)},
                                [&](Value i, ValueRange acc) {
                                  Value v = math::AbsFOp::create(
                                      b, loc,
                                      fp8Source(k, k.ld(a[0], i),
                                                preAt >= 0 ? k.ld(a[preAt], i) : Value(), elt,
                                                gelu && first));
                                  return SmallVector<Value>{k.fmax(acc[0], v)};
                                })[0];
               k.st(m, a[1], p);
             });
           });
    values = partial;
    valuesType = flatOf(threads, ft);
    count = threads;
  }
  double maxFinite = fp8MaxFinite(op.getFormat());
  int64_t lanes = options.rowLanes;
  bool direct = count == n; // a small input, read by the scale kernel itself
  std::vector<Type> types = {valuesType, flatOf(1, ft), flatOf(1, ft)};
  std::vector<Operand> args = {values, t(op.getScale()), t(op.getInverse())};
  if (history) { // a[3] the history, a[4] its shifted copy (maybe the same bytes)
    types.insert(types.end(), {flatOf(past, ft), flatOf(past, ft)});
    args.insert(args.end(), {t(history), t(op.getShifted())});
  }
  int64_t preAt = readPre(types, args, direct);
  launch(op, key + "scale" + std::to_string(count), "fp8_scale", types, args, lanes,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           RowLanes rl(k, idx, lanes);
           Value m = rl.fold(count, {k.f(0, ft)}, [&](Value i, ValueRange acc) {
             Value v = math::AbsFOp::create(
                 b, loc,
                 fp8Source(k, k.ld(a[0], i), preAt >= 0 ? k.ld(a[preAt], i) : Value(), elt,
                           gelu && direct));
             return SmallVector<Value>{k.fmax(acc[0], v)};
           })[0];
           Value amax = rl.max(m);
           rl.once([&] {
             if (past) {
               SmallVector<Value> h = loadFirst(k, a[3], past);
               Value delayed = maxOf(k, h);
               amax = k.select(usableAmax(k, delayed), delayed, amax);
               storeShifted(k, h, a[4], k.idx(0));
             }
             storeScale(k, amax, k.f(maxFinite, ft), a[1], k.idx(0), a[2], k.idx(0));
           });
         });
  return success();
}

/// gpt.fp8_delayed_scales: thread i takes entry i, with the arithmetic of
/// gpt.fp8_scale's kernel where the history is usable (the same bits): the
/// largest amax of the history, s = max_finite / amax (1 where not
/// usable), 1 / s, and the history shifted on. One launch per history
/// length, over all its entries where each of the four arrays lies in one
/// pool (spanOf; the entries' offsets and max_finite from constant tables);
/// otherwise one launch per entry.
LogicalResult LoweringContext::lowerFp8DelayedScales(Fp8DelayedScalesOp op) {
  Type ft = Float32Type::get(ctx);
  enum { kHistory, kShifted, kScale, kInverse, kArrays };
  static const char *names[] = {"histories", "shifted", "scales", "inverses"};
  auto membersOf = [&](unsigned i) {
    return std::array<int64_t, kArrays>{tensorOf.lookup(op.getHistories()[i]),
                                        tensorOf.lookup(op.getShifted(i)),
                                        tensorOf.lookup(op.getScale(i)),
                                        tensorOf.lookup(op.getInverse(i))};
  };
  // Launches `entries` over `arrays` (flat f32 tensors), entry j's
  // elements at offsets[a][j] of array a.
  auto emit = [&](int64_t past, ArrayRef<unsigned> entries, std::vector<Operand> arrays,
                  std::vector<std::vector<int64_t>> offsets) {
    std::vector<Type> types;
    for (const Operand &o : arrays)
      types.push_back(flatOf(std::max<int64_t>(result.tensors[o.tensor].bytes / 4, 1), ft));
    std::vector<double> maxFinite;
    std::string key = "fp8_delayed_scales[" + std::to_string(past) + "]";
    for (auto [j, i] : llvm::enumerate(entries)) {
      maxFinite.push_back(fp8MaxFinite(op.getFormat(i)));
      key += "(" + std::to_string(static_cast<int>(op.getFormat(i)));
      for (const std::vector<int64_t> &o : offsets)
        key += "," + std::to_string(o[j]);
      key += ")";
    }
    size_t n = entries.size();
    launch(op, key, "fp8_delayed_scales", types, std::move(arrays), static_cast<int64_t>(n),
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             SmallVector<Type> tableTypes(kArrays, b.getIndexType());
             tableTypes.push_back(ft);
             SmallVector<Value> e = tableAt(k, idx, n, tableTypes, [&](size_t j) {
               SmallVector<Value> row;
               for (const std::vector<int64_t> &o : offsets)
                 row.push_back(k.idx(o[j]));
               row.push_back(k.f(maxFinite[j], ft));
               return row;
             });
             SmallVector<Value> h;
             for (int64_t i = 0; i < past; ++i)
               h.push_back(k.ld(a[kHistory], k.add(e[kHistory], k.idx(i))));
             Value amax = maxOf(k, h);
             storeShifted(k, h, a[kShifted], e[kShifted]);
             storeScale(k, amax, e[kArrays], a[kScale], e[kScale], a[kInverse], e[kInverse]);
           });
  };
  llvm::MapVector<int64_t, SmallVector<unsigned>> byLength;
  for (auto [i, h] : llvm::enumerate(op.getHistories()))
    byLength[numel(h)].push_back(static_cast<unsigned>(i));
  for (auto &[past, which] : byLength) {
    std::vector<TensorInfo> spans;
    std::vector<std::vector<int64_t>> offsets(kArrays);
    for (int a = 0; a < kArrays; ++a) {
      SmallVector<int64_t> members;
      for (unsigned i : which)
        members.push_back(membersOf(i)[a]);
      auto span = spanOf(result.tensors, members, std::string("fp8.") + names[a], offsets[a]);
      if (!span)
        break;
      spans.push_back(*span);
    }
    if (spans.size() == kArrays) {
      std::vector<Operand> arrays;
      for (TensorInfo &span : spans)
        arrays.push_back(Operand{Operand::Tensor, addTensor(std::move(span))});
      emit(past, which, std::move(arrays), std::move(offsets));
      continue;
    }
    for (unsigned i : which) {
      std::vector<Operand> own;
      for (int64_t m : membersOf(i))
        own.push_back(Operand{Operand::Tensor, m});
      emit(past, {i}, std::move(own), std::vector<std::vector<int64_t>>(kArrays, {0}));
    }
  }
  return success();
}

/// gpt.fp8_quantize: the codes of s x (at the transposed index with
/// `transpose`).
LogicalResult LoweringContext::lowerFp8Quantize(Fp8QuantizeOp op) {
  if (op.getTranspose())
    castTranspose(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(), Value(),
                  op.getResult(), op.getFormat(), op.getGelu());
  else
    quantize(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(), op.getResult(),
             op.getFormat(), op.getGelu());
  return success();
}

/// A kernel storing the code of s x for every element as it lies into
/// `result`; on CUDA 8 elements per thread, loaded and stored as vectors.
void LoweringContext::quantize(Operation *op, Value x, Value scale, Value history, Value recorded,
                       Value result, Fp8Format format, bool gelu, Type roundedTo) {
  Type elt = eltOf(x);
  Type ft = Float32Type::get(ctx), i8 = IntegerType::get(ctx, 8);
  int64_t n = numel(x);
  int64_t u = n % 8 == 0 && vectorChunks({x, result}, 8) ? 8 : 1;
  bool cvt = options.cudaArch >= 89;
  std::vector<Type> types = {flat(x), flatOf(1, ft), flatOf(n, i8)};
  std::vector<Operand> args = {t(x), t(scale), t(result)};
  bool records = static_cast<bool>(recorded);
  if (records) { // a[3]: each thread records the amax of its elements
    auto [type, arg] = recordedArg(op, history, recorded);
    types.push_back(type);
    args.push_back(arg);
  }
  // A cast-transpose's row-major half shares the op's key: keep it apart.
  launch(op, keyOf(op) + "[row-major]", "fp8_quantize", types, args, n / u,
         [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
           KB k{b, loc};
           Value s = k.ld(a[1], k.idx(0));
           Value at = k.mul(i, k.idx(u));
           SmallVector<Value> ys = k.ldConsecutive(a[0], at, u);
           Value m = k.f(0, ft);
           for (Value &y : ys) {
             y = fp8Source(k, y, elt, gelu);
             if (roundedTo)
               y = k.asStored(y, roundedTo);
             if (records)
               m = k.fmax(m, math::AbsFOp::create(b, loc, y));
             y = k.mul(y, s);
           }
           k.stConsecutive(fp8Codes(k, ys, format, cvt && u > 1), a[2], at);
           if (records)
             recordAmax(k, a[3], m);
         });
}

void LoweringContext::copyUnlessInPlace(Operation *op, Value from, Value to) {
  if (tensorOf.lookup(from) != tensorOf.lookup(to)) {
    program->commands.push_back({Command::Copy, 0, 0, 0, {t(from), t(to)},
                                 op->getName().getStringRef().str()});
    program->commands.back().source = op;
  }
}

std::pair<Type, Operand> LoweringContext::recordedArg(Operation *op, Value history, Value recorded) {
  copyUnlessInPlace(op, history, recorded);
  return {flatOf(numel(recorded), IntegerType::get(ctx, 32)), t(recorded)};
}

/// Codes of s x for x seen as (rows, cols) (its last dimension the
/// columns): into `transposed` as (cols, rows), and with `rowMajor` also
/// as they lie. With `pre`, x is the GELU gradient of the input and `pre`
/// (fp8Source); with `sum`, also the sums of x's columns (unrounded), in
/// reduceColumns' order: each 64-row chunk in row order, then its fold.
///
/// On CUDA, for whole tiles: a block of 256 threads takes a 64 x 64 tile,
/// each thread two 8-element vectors of its rows; the row-major codes go
/// out as 8-byte vectors and into shared memory, and after a barrier each
/// thread gathers 16 codes down one column and stores them as one 16-byte
/// vector of the transposed row (4 threads per 64-byte run). With `sum`
/// the f32 values go to shared memory too, and 64 threads each add up a
/// column of the tile into the chunk's partial.
///
/// Otherwise thread (g, r) (r fastest) reads kTransposeRun consecutive
/// columns of row r and writes them down transposed rows g * run + j,
/// where the warp's consecutive r give consecutive bytes; the sums are a
/// reduceColumns launch of their own.
void LoweringContext::castTranspose(Operation *op, Value x, Value scale, Value history, Value recorded,
                            Value rowMajor, Value transposed, Fp8Format format, bool gelu,
                            Value pre, Value sum, Type roundedTo) {
  Type ft = Float32Type::get(ctx), i8 = IntegerType::get(ctx, 8), elt = eltOf(x);
  int64_t n = numel(x), cols = lastDim(x), rows = n / cols;
  std::vector<Type> types = {flat(x), flatOf(1, ft), flatOf(n, i8)};
  std::vector<Operand> args = {t(x), t(scale), t(transposed)};
  SmallVector<Value> tensors = {x, transposed};
  // Argument positions: a[rowAt] the row-major codes, a[recAt] the
  // recorded history, a[preAt] the pre-activation, a[sumAt] the sums'
  // partials (-1: none).
  int64_t rowAt = -1, recAt = -1, preAt = -1, sumAt = -1;
  auto add = [&](int64_t &at, Type type, Operand arg) {
    at = static_cast<int64_t>(args.size());
    types.push_back(type);
    args.push_back(arg);
  };
  if (rowMajor) {
    add(rowAt, flatOf(n, i8), t(rowMajor));
    tensors.push_back(rowMajor);
  }
  if (recorded) {
    auto [type, arg] = recordedArg(op, history, recorded);
    add(recAt, type, arg);
  }
  if (pre) {
    add(preAt, flat(pre), t(pre));
    tensors.push_back(pre);
  }
  bool sums = static_cast<bool>(sum);
  // With sums on the generic path the cast is a kernel of its own.
  std::string castName = rowMajor ? "fp8_cast_transpose" : "fp8_quantize_transpose";
  std::string name = sums ? "fp8_cast_transpose_sum" : castName;
  std::string key = keyOf(op) + (rowMajor ? "[both]" : "[transposed]");
  constexpr int64_t kThreads = kCastTileThreads;
  // 16-byte vectors of the input (one or two per 8 elements) and of the
  // transposed rows.
  int64_t eltBits = elt.getIntOrFloatBitWidth();
  if (vectorChunks(tensors, 16) && rows % kCastTile == 0 && cols % kCastTile == 0 &&
      options.blockThreads == kThreads && (eltBits == 16 || eltBits == 32)) {
    bool cvt = options.cudaArch >= 89;
    int64_t parts = rows / kCastTile;
    auto partialsType = flatOf(parts * cols, ft);
    Operand partials;
    if (sums) {
      partials = scratch(parts * cols * 4);
      add(sumAt, partialsType, partials);
    }
    // Shared memory: the codes, 8 warps' amaxes, the f32 tile (sums).
    constexpr int64_t kAmaxAt = kCastTile * kCastTilePitch, kSumAt = kAmaxAt + 32;
    int64_t sharedBytes = sums ? kSumAt + kCastTile * kCastTile * 4
                          : recAt >= 0 ? kAmaxAt + kThreads / 32 * 4
                                       : kAmaxAt;
    launch(op, key + "tiled", name, types, args, n / 16,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             CastTile ct = castTile(k, idx, cols);
             Value tid = ct.tid, r0 = ct.r0, c0 = ct.c0, tile = ct.codes;
             Value s = k.ld(a[1], k.idx(0));
             SmallVector<Value> rowOf, colOf;
             SmallVector<SmallVector<Value>> xs, ps;
             for (int64_t h = 0; h < 2; ++h) { // all loads in flight first
               Value v = k.add(tid, k.idx(h * kThreads));
               rowOf.push_back(k.udiv(v, k.idx(kCastTile / 8)));
               colOf.push_back(k.mul(k.urem(v, k.idx(kCastTile / 8)), k.idx(8)));
               Value at = k.add(k.mul(k.add(r0, rowOf[h]), k.idx(cols)), k.add(c0, colOf[h]));
               xs.push_back(k.ldConsecutive(a[0], at, 8));
               if (preAt >= 0)
                 ps.push_back(k.ldConsecutive(a[preAt], at, 8));
             }
             Value exactTile;
             if (sums)
               exactTile = sharedView(k, dynamicSharedMemory(k), kSumAt, kCastTile * kCastTile, ft);
             Value m = k.f(0, ft);
             for (int64_t h = 0; h < 2; ++h) {
               SmallVector<Value> exact(8);
               for (int64_t e = 0; e < 8; ++e) {
                 Value &v = xs[h][e];
                 v = fp8Source(k, v, preAt >= 0 ? ps[h][e] : Value(), elt, gelu, &exact[e]);
                 if (roundedTo)
                   v = k.asStored(v, roundedTo);
                 if (recAt >= 0)
                   m = k.fmax(m, math::AbsFOp::create(b, loc, v));
                 v = k.mul(v, s);
               }
               if (sums) {
                 Value at = k.add(k.mul(rowOf[h], k.idx(kCastTile)), colOf[h]);
                 k.stVector(ArrayRef<Value>(exact).take_front(4), exactTile, at);
                 k.stVector(ArrayRef<Value>(exact).drop_front(4), exactTile, k.add(at, k.idx(4)));
               }
               SmallVector<Value> codes = fp8Codes(k, xs[h], format, cvt);
               if (rowAt >= 0)
                 k.stVector(codes, a[rowAt],
                            k.add(k.mul(k.add(r0, rowOf[h]), k.idx(cols)), k.add(c0, colOf[h])));
               Value at = k.add(k.mul(rowOf[h], k.idx(kCastTilePitch)), colOf[h]);
               k.stVector(ArrayRef<Value>(codes).take_front(4), tile, at);
               k.stVector(ArrayRef<Value>(codes).drop_front(4), tile, k.add(at, k.idx(4)));
             }
             // The tile's amax: each warp's in shared memory past the tile,
             // after the barrier one atomic per block.
             Value perWarp;
             if (recAt >= 0) {
               RowLanes warp(k, tid, 32);
               m = warp.max(m);
               perWarp = sharedView(k, dynamicSharedMemory(k), kAmaxAt, kThreads / 32, ft);
               warp.once([&] { k.st(m, perWarp, warp.row); });
             }
             gpu::BarrierOp::create(b, loc);
             if (recAt >= 0)
               buildIf(k, k.cmpEq(tid, k.idx(0)), [&] {
                 recordAmax(k, a[recAt], maxOf(k, loadFirst(k, perWarp, kThreads / 32)));
               });
             if (sums)
               buildIf(k, k.cmpUlt(tid, k.idx(kCastTile)), [&] {
                 SmallVector<Value> down;
                 for (int64_t r = 0; r < kCastTile; ++r)
                   down.push_back(k.ld(exactTile, k.add(k.idx(r * kCastTile), tid)));
                 Value acc = k.f(0, ft);
                 for (Value v : down)
                   acc = k.add(acc, v);
                 Value chunk = k.udiv(r0, k.idx(kCastTile));
                 k.st(acc, a[sumAt], k.add(k.mul(chunk, k.idx(cols)), k.add(c0, tid)));
               });
             storeTileColumns(k, ct, a[2], rows);
           },
           /*minBlocksPerSM=*/0, sharedBytes);
    if (sums)
      foldColumnPartials(op, keyOf(op) + "cols", name, partials, partialsType, {flat(sum)},
                         {t(sum)}, parts, rows, cols, ft, ReduceKind::Sum);
    return;
  }
  if (sums) {
    std::vector<Type> inTypes = {flat(x)};
    std::vector<Operand> ins = {t(x)};
    if (pre) {
      inTypes.push_back(flat(pre));
      ins.push_back(t(pre));
    }
    reduceColumns(op, keyOf(op) + "cols", name, inTypes, ins, {flat(sum)}, {t(sum)}, rows, cols,
                  ft, ReduceKind::Sum,
                  [=](KB &k, ValueRange a, Value r, Value col, int64_t,
                      SmallVector<KB::Store> &) {
                    Value at = k.add(k.mul(r, k.idx(cols)), col);
                    Value exact;
                    fp8Source(k, k.ld(a[0], at), pre ? k.ld(a[1], at) : Value(), elt, gelu,
                              &exact);
                    return SmallVector<Value>{exact};
                  });
  }
  int64_t run = cols % kTransposeRun == 0 ? kTransposeRun : 1;
  launch(op, key, castName, types, args, n / run,
         [=](OpBuilder &b, Location loc, Value p, ValueRange a) {
           KB k{b, loc};
           Value r = k.urem(p, k.idx(rows)), g = k.udiv(p, k.idx(rows));
           Value s = k.ld(a[1], k.idx(0));
           Value from = k.add(k.mul(r, k.idx(cols)), k.mul(g, k.idx(run)));
           SmallVector<Value> codes;
           Value m = k.f(0, ft);
           for (int64_t j = 0; j < run; ++j) {
             Value at = k.add(from, k.idx(j));
             Value v = fp8Source(k, k.ld(a[0], at), preAt >= 0 ? k.ld(a[preAt], at) : Value(),
                                 elt, gelu);
             if (roundedTo)
               v = k.asStored(v, roundedTo);
             if (recAt >= 0)
               m = k.fmax(m, math::AbsFOp::create(b, loc, v));
             codes.push_back(k.mul(v, s));
           }
           for (Value &c : codes)
             c = fp8Bits(k, c, format);
           for (int64_t j = 0; j < run; ++j) {
             Value to = k.add(k.mul(k.add(k.mul(g, k.idx(run)), k.idx(j)), k.idx(rows)), r);
             k.st(codes[j], a[2], to);
             if (rowAt >= 0)
               k.st(codes[j], a[rowAt], k.add(from, k.idx(j)));
           }
           if (recAt >= 0)
             recordAmax(k, a[recAt], m);
         });
}

/// gpt.fp8_transpose: the codes of x as (rows, cols) into (cols, rows).
/// On CUDA, whole 64 x 64 tiles as the cast-transpose's: each of a block's
/// 256 threads loads 16 bytes of a row into shared memory, and after a
/// barrier stores 16 bytes gathered down a column. Otherwise thread
/// (g, r) moves kTransposeRun bytes of row r down the transposed rows.
LogicalResult LoweringContext::lowerFp8Transpose(Fp8TransposeOp op) {
  Type i8 = IntegerType::get(ctx, 8);
  Value x = op.getInput();
  int64_t n = numel(x), cols = lastDim(x), rows = n / cols;
  std::vector<Type> types = {flatOf(n, i8), flatOf(n, i8)};
  std::vector<Operand> args = {t(x), t(op.getResult())};
  std::string key = keyOf(op);
  if (vectorChunks({x, op.getResult()}, 16) && rows % kCastTile == 0 && cols % kCastTile == 0 &&
      options.blockThreads == kCastTileThreads) {
    launch(op, key + "tiled", "fp8_transpose", types, args, n / 16,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             CastTile ct = castTile(k, idx, cols);
             // Row tid / 4, bytes (tid % 4) * 16 on; the pitch keeps 4-byte
             // alignment only, so into the tile 4 bytes at a time.
             Value r = k.udiv(ct.tid, k.idx(4)), c = k.mul(k.urem(ct.tid, k.idx(4)), k.idx(16));
             SmallVector<Value> bytes = k.ldVector(
                 a[0], k.add(k.mul(k.add(ct.r0, r), k.idx(cols)), k.add(ct.c0, c)), 16);
             Value at = k.add(k.mul(r, k.idx(kCastTilePitch)), c);
             for (int64_t w = 0; w < 4; ++w)
               k.stVector(ArrayRef<Value>(bytes).slice(w * 4, 4), ct.codes,
                          k.add(at, k.idx(w * 4)));
             gpu::BarrierOp::create(b, loc);
             storeTileColumns(k, ct, a[1], rows);
           },
           /*minBlocksPerSM=*/0, /*sharedBytes=*/kCastTile * kCastTilePitch);
    return success();
  }
  int64_t run = cols % kTransposeRun == 0 ? kTransposeRun : 1;
  launch(op, key, "fp8_transpose", types, args, n / run,
         [=](OpBuilder &b, Location loc, Value p, ValueRange a) {
           KB k{b, loc};
           Value r = k.urem(p, k.idx(rows)), g = k.udiv(p, k.idx(rows));
           Value from = k.add(k.mul(r, k.idx(cols)), k.mul(g, k.idx(run)));
           SmallVector<Value> bytes;
           for (int64_t j = 0; j < run; ++j)
             bytes.push_back(k.ld(a[0], k.add(from, k.idx(j))));
           for (int64_t j = 0; j < run; ++j)
             k.st(bytes[j], a[1], k.add(k.mul(k.add(k.mul(g, k.idx(run)), k.idx(j)), k.idx(rows)), r));
         });
  return success();
}

/// gpt.fp8_cast_transpose: both layouts from one read of the input, or
/// only the one something reads (a recomputed copy, gpt-rematerialize).
LogicalResult LoweringContext::lowerFp8CastTranspose(Fp8CastTransposeOp op) {
  Type rounded = op.getRoundedToAttr() ? op.getRoundedToAttr().getValue() : Type();
  if (op.getTransposed().use_empty())
    quantize(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(), op.getResult(),
             op.getFormat(), op.getGelu(), rounded);
  else
    castTranspose(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(),
                  op.getResult().use_empty() ? Value() : op.getResult(), op.getTransposed(),
                  op.getFormat(), op.getGelu(), Value(), Value(), rounded);
  return success();
}

/// gpt.fp8_cast_transpose_sum: the cast-transpose's tiles also give their
/// columns' partial sums (castTranspose).
LogicalResult LoweringContext::lowerFp8CastTransposeSum(Fp8CastTransposeSumOp op) {
  castTranspose(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(),
                op.getResult().use_empty() ? Value() : op.getResult(), op.getTransposed(),
                op.getFormat(), /*gelu=*/false, op.getPre(),
                op.getSum().use_empty() ? Value() : op.getSum());
  return success();
}

LogicalResult LoweringContext::lowerFp8ScaleOp(Operation *op) {
  auto lower = [&](Fp8ScaleOp sc) { return lowerFp8Scale(sc); };
  return lower(llvm::cast<Fp8ScaleOp>(op));
}

LogicalResult LoweringContext::lowerFp8DelayedScalesOp(Operation *op) {
  auto lower = [&](Fp8DelayedScalesOp sc) { return lowerFp8DelayedScales(sc); };
  return lower(llvm::cast<Fp8DelayedScalesOp>(op));
}

LogicalResult LoweringContext::lowerFp8QuantizeOp(Operation *op) {
  auto lower = [&](Fp8QuantizeOp q) { return lowerFp8Quantize(q); };
  return lower(llvm::cast<Fp8QuantizeOp>(op));
}

LogicalResult LoweringContext::lowerFp8CastTransposeOp(Operation *op) {
  auto lower = [&](Fp8CastTransposeOp q) { return lowerFp8CastTranspose(q); };
  return lower(llvm::cast<Fp8CastTransposeOp>(op));
}

LogicalResult LoweringContext::lowerFp8CastTransposeSumOp(Operation *op) {
  auto lower = [&](Fp8CastTransposeSumOp q) { return lowerFp8CastTransposeSum(q); };
  return lower(llvm::cast<Fp8CastTransposeSumOp>(op));
}

LogicalResult LoweringContext::lowerFp8TransposeOp(Operation *op) {
  auto lower = [&](Fp8TransposeOp tr) { return lowerFp8Transpose(tr); };
  return lower(llvm::cast<Fp8TransposeOp>(op));
}

void registerFp8Lowerings(LoweringRegistry &registry) {
  registry.add<Fp8ScaleOp>(&LoweringContext::lowerFp8ScaleOp);
  registry.add<Fp8DelayedScalesOp>(&LoweringContext::lowerFp8DelayedScalesOp);
  registry.add<Fp8QuantizeOp>(&LoweringContext::lowerFp8QuantizeOp);
  registry.add<Fp8CastTransposeOp>(&LoweringContext::lowerFp8CastTransposeOp);
  registry.add<Fp8CastTransposeSumOp>(&LoweringContext::lowerFp8CastTransposeSumOp);
  registry.add<Fp8TransposeOp>(&LoweringContext::lowerFp8TransposeOp);
}

} // namespace gptc::codegen
