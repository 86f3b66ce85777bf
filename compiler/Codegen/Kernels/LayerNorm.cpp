//===- Kernels/LayerNorm.cpp - the LayerNorm kernel family ------------------===//
//
// gpt.layernorm, gpt.add_layernorm(_fp8) and their gradients (rows kernels,
// dweight/dbias partials). Moved from Lowering.cpp (issue 44): its lowerings
// are LoweringContext members (LoweringContext.h), registered by
// registerLayerNormLowerings below.
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
/// A row's values mem[base + i] as a row kernel's passes read them: loaded
/// by each pass, or, when the row is resident (RowLanes::keepResident),
/// loaded once up front (all in flight) and found by column.
struct RowVals {
  KB &k;
  Value mem, base;
  llvm::DenseMap<Value, Value> regs;

  RowVals(RowLanes &rl, Value mem, Value base, bool preload = true)
      : k(rl.k), mem(mem), base(base) {
    if (preload)
      for (Value i : rl.residentCols)
        regs[i] = k.ld(mem, k.add(base, i));
  }
  Value operator()(Value i) {
    auto it = regs.find(i);
    return it != regs.end() ? it->second : k.ld(mem, k.add(base, i));
  }
  /// Records v as column i's value once stored: what a load of it would
  /// give (rounded to the storage type). Only a resident row keeps it.
  void stored(RowLanes &rl, Value i, Value v) {
    if (rl.residentCols.empty())
      return;
    regs[i] = k.asStored(v, llvm::cast<MemRefType>(mem.getType()).getElementType());
  }
};

/// Mean and 1 / sqrt(biased variance + eps) of a row's n values x: the
/// statistics of a layernorm row.
std::pair<Value, Value> meanAndRstd(RowLanes &rl, RowVals &x, int64_t n, double eps, Type t) {
  KB &k = rl.k;
  Value sum = rl.sum(rl.fold(n, {k.f(0, t)}, [&](Value i, ValueRange s) {
    return SmallVector<Value>{k.add(s[0], x(i))};
  })[0]);
  Value mean = k.div(sum, k.f(n, t));
  Value var = rl.sum(rl.fold(n, {k.f(0, t)}, [&](Value i, ValueRange s) {
    Value d = k.sub(x(i), mean);
    return SmallVector<Value>{k.add(s[0], k.mul(d, d))};
  })[0]);
  return {mean, k.rsqrt(k.add(k.div(var, k.f(n, t)), k.f(eps, t)))};
}

/// The layernorm of a row's n values x, computed in `t`: its statistics,
/// then y[base + i] = (x_i - mean) rstd w[i] + b[i] for this lane's
/// columns (gpt.layernorm and gpt.add_layernorm).
void layernormRow(RowLanes &rl, RowVals &x, Value w, Value b, Value y, Value base, int64_t n,
                  double eps, Type t) {
  KB &k = rl.k;
  auto [mean, rstd] = meanAndRstd(rl, x, n, eps, t);
  rl.each(n, [&](Value i) -> SmallVector<KB::Store> {
    Value xh = k.mul(k.sub(x(i), mean), rstd);
    return {{k.add(k.mul(xh, k.ld(w, i)), k.ld(b, i)), y, k.add(base, i)}};
  });
}

/// The residual sum lhs + rhs of the row at `base` (n columns), stored into
/// `sum` and kept for the layernorm that reads it: each lane reads back only
/// the columns it stored, so no barrier (a resident row keeps them instead).
RowVals storeRowSum(RowLanes &rl, Value lhs, Value rhs, Value sum, Value base, int64_t n) {
  KB &k = rl.k;
  RowVals vals(rl, sum, base, /*preload=*/false);
  rl.each(n, [&](Value i) -> SmallVector<KB::Store> {
    Value at = k.add(base, i);
    Value s = k.add(k.ld(lhs, at), k.ld(rhs, at));
    vals.stored(rl, i, s);
    return {{s, sum, at}};
  });
  return vals;
}

/// Rows a warp of the one-launch layernorm gradient folds into a partial,
/// for a (rows, c) input: about one wave of warps. Wider rows take more
/// registers, so fewer warps fit an SM: a warp takes a row per 2^21
/// elements of the input (4 to 64), which was fastest on an H100 (124M
/// B=64: 32 rows, 0.7% faster than 16; 350M B=32: 16, 1.4% faster than 32
/// and 0.6% than 8; 1.5B B=16: 16, 0.5% faster than 8).
int64_t autoLayerNormGradChunkRows(int64_t rows, int64_t c) {
  int64_t perWarp = llvm::divideCeil(rows * c, int64_t(1) << 21);
  return std::clamp<int64_t>(static_cast<int64_t>(llvm::PowerOf2Ceil(perWarp)), 4, 64);
}

/// The most shared memory a block of CUDA chip `arch` (compute capability
/// x 10) can have: 227 KiB on sm_90, sm_100 and sm_103, 163 KiB on sm_80
/// and sm_87, 99 KiB on the others gptc targets (sm_86, sm_89, sm_120,
/// sm_121).
int64_t maxSharedBytes(int64_t arch) {
  if (arch == 90 || arch == 100 || arch == 103)
    return 227 * 1024;
  return arch == 80 || arch == 87 ? 163 * 1024 : 99 * 1024;
}
/// Static shared memory of every kernel that has dynamic: the lowering
/// declares the dynamic buffer as a static byte (16 with its alignment).
constexpr int64_t kStaticSharedBytes = 16;

/// layernormRow's y for the row of `x`, rounded to `rounded` (the type the
/// unfused layernorm stored), times the scale *scale, stored as FP8 codes
/// into `q`: the arithmetic of the layernorm's store and the cast kernel's
/// load, scaling and conversion, so the same codes. onCode(column, code)
/// stores each code's other copy. With `recorded`, the row's amax of the
/// rounded y raises its first element.
void layernormRowFp8(RowLanes &rl, RowVals &x, Value w, Value b, Value q, Value scale,
                     Value recorded, Value base, int64_t n, double eps, Type t, Type rounded,
                     Fp8Format format, bool cvt, function_ref<void(Value, Value)> onCode) {
  KB &k = rl.k;
  auto [mean, rstd] = meanAndRstd(rl, x, n, eps, t);
  Value s = k.ld(scale, k.idx(0));
  Value m = rl.foldChunks(n, {k.f(0, t)}, [&](ArrayRef<Value> cols, ValueRange acc) {
    Value mx = acc[0];
    SmallVector<Value> ys;
    for (Value i : cols) {
      Value xh = k.mul(k.sub(x(i), mean), rstd);
      Value y = k.convert(k.convert(k.add(k.mul(xh, k.ld(w, i)), k.ld(b, i)), rounded), t);
      mx = k.fmax(mx, math::AbsFOp::create(k.b, k.loc, y));
      ys.push_back(k.mul(y, s));
    }
    SmallVector<Value> codes = fp8Codes(k, ys, format, cvt && ys.size() % 2 == 0);
    for (auto [i, code] : llvm::zip(cols, codes)) {
      k.st(code, q, k.add(base, i));
      onCode(i, code);
    }
    return SmallVector<Value>{mx};
  })[0];
  if (recorded) {
    m = rl.max(m);
    rl.once([&] { recordAmax(k, recorded, m); });
  }
}

} // namespace

/// gpt.layernorm_grad: dx row by row (statistics, then dx, which the
/// epilogue stores or passes on), dweight and dbias over all rows.
///
/// The column sums fold chunks of rows into partials, then
/// foldColumnPartials adds each column's partials. With
/// layerNormGradOneLaunch (where a lane's columns fit in registers and the
/// warps' sums in shared memory) a warp of the rows kernel takes a chunk
/// and adds each row to its columns' sums in shared memory, so dy and x
/// are read once; otherwise the rows kernel stores the statistics and a
/// column kernel reads dy and x again. For the same chunk each partial
/// adds the same products in row order either way: the same bits.
LogicalResult LoweringContext::lowerLayerNormGrad(Operation *op, const std::string &key, Value dyV,
                                                 Value xV, Value wV, Value dwV, Value dbV,
                                                 double eps, const RowGradEpilogue &epilogue) {
  int64_t lanes = options.rowLanes;
  int64_t c = lastDim(xV), rows = numel(xV) / c;
  // One launch: a warp's sums live in shared memory (in registers they
  // doubled the kernel's and cut its resident warps by two thirds).
  int64_t warps = options.blockThreads / 32;
  int64_t sharedBytes = warps * 2 * c * 4;
  bool oneLaunch = options.layerNormGradOneLaunch && lanes == 32 && c % lanes == 0 &&
                   c / lanes <= RowLanes::kMaxResident &&
                   sharedBytes + kStaticSharedBytes <= maxSharedBytes(options.cudaArch);
  int64_t chunkRows = options.layerNormGradChunkRows > 0 ? options.layerNormGradChunkRows
                      : oneLaunch ? autoLayerNormGradChunkRows(rows, c)
                                  : kColumnChunkRows;
  int64_t parts = (rows + chunkRows - 1) / chunkRows;
  Type ft = Float32Type::get(ctx);
  // a[3]: each row's mean and rstd for the column kernel, or (one launch)
  // the partials, dweight's parts x c then dbias'; set below.
  std::vector<Type> types = {flat(dyV), flat(xV), flat(wV), Type()};
  std::vector<Operand> args = {t(dyV), t(xV), t(wV), {}};
  appendArgs(epilogue.tensors, types, args);
  auto stores = epilogue.stores;
  // Row rl.row's dx; with `sums` (shared memory: this warp's dweight sums,
  // then its dbias sums, from `sumsAt`) adds the row to its lane's
  // resident columns' sums, else stores the row's statistics.
  auto gradRow = [=](KB &k, RowLanes &rl, ValueRange a, Value sums, Value sumsAt) {
    Value row = rl.row;
    Value base = k.mul(row, k.idx(c));
    RowVals x(rl, a[1], base), dy(rl, a[0], base);
    auto [mean, rstd] = meanAndRstd(rl, x, c, eps, ft);
    if (!sums)
      rl.once([&] {
        k.st(mean, a[3], k.mul(row, k.idx(2)));
        k.st(rstd, a[3], k.add(k.mul(row, k.idx(2)), k.idx(1)));
      });
    auto rowSums = rl.fold(c, {k.f(0, ft), k.f(0, ft)}, [&](Value i, ValueRange s) {
      Value xh = k.mul(k.sub(x(i), mean), rstd);
      Value dn = k.mul(dy(i), k.ld(a[2], i));
      return SmallVector<Value>{k.add(s[0], dn), k.add(s[1], k.mul(dn, xh))};
    });
    Value m1 = k.div(rl.sum(rowSums[0]), k.f(c, ft));
    Value m2 = k.div(rl.sum(rowSums[1]), k.f(c, ft));
    rl.each(c, [&](Value i) -> SmallVector<KB::Store> {
      Value xh = k.mul(k.sub(x(i), mean), rstd);
      Value dn = k.mul(dy(i), k.ld(a[2], i));
      Value dx = k.mul(k.sub(k.sub(dn, m1), k.mul(xh, m2)), rstd);
      return stores(k, a, dx, k.add(base, i));
    });
    if (!sums)
      return;
    for (Value i : rl.residentCols) {
      Value g = dy(i);
      Value dwAt = k.add(sumsAt, i), dbAt = k.add(dwAt, k.idx(c));
      k.st(k.add(k.ld(sums, dwAt), k.mul(g, k.mul(k.sub(x(i), mean), rstd))), sums, dwAt);
      k.st(k.add(k.ld(sums, dbAt), g), sums, dbAt);
    }
  };
  std::string name = "layernorm_backward_rows" + epilogue.suffix;
  if (oneLaunch) {
    Operand partials = scratch(2 * parts * c * 4);
    auto partialsType = flatOf(2 * parts * c, ft);
    types[3] = partialsType;
    args[3] = partials;
    launch(op, key + "rows", name + "_cols", types, args, parts * lanes,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             RowLanes rl(k, idx, lanes);
             rl.keepResident(c);
             Value chunk = rl.row;
             Value sums = sharedView(k, dynamicSharedMemory(k), 0, warps * 2 * c, ft);
             Value sumsAt = k.mul(k.urem(chunk, k.idx(warps)), k.idx(2 * c));
             for (Value i : rl.residentCols) {
               k.st(k.f(0, ft), sums, k.add(sumsAt, i));
               k.st(k.f(0, ft), sums, k.add(k.add(sumsAt, i), k.idx(c)));
             }
             Value lo = k.mul(chunk, k.idx(chunkRows));
             Value hi = arith::MinUIOp::create(b, loc, k.add(lo, k.idx(chunkRows)), k.idx(rows));
             k.loop(lo, hi, [&](Value r) {
               RowLanes at = rl;
               at.row = r;
               gradRow(k, at, a, sums, sumsAt);
             });
             for (Value i : rl.residentCols) {
               Value col = k.add(k.mul(chunk, k.idx(c)), i);
               k.st(k.ld(sums, k.add(sumsAt, i)), a[3], col);
               k.st(k.ld(sums, k.add(k.add(sumsAt, i), k.idx(c))), a[3],
                    k.add(col, k.idx(parts * c)));
             }
           },
           /*minBlocksPerSM=*/0, sharedBytes);
    foldColumnPartials(op, key + "cols", "layernorm_backward_cols", partials, partialsType,
                       {flat(dwV), flat(dbV)}, {t(dwV), t(dbV)}, parts, rows, c, ft,
                       ReduceKind::Sum);
    return success();
  }
  Operand stats = scratch(rows * 2 * 4); // mean, rstd per row
  auto statsType = flatOf(rows * 2, ft);
  types[3] = statsType;
  args[3] = stats;
  launch(op, key + "rows", name, types, args, rows * lanes,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           RowLanes rl(k, idx, lanes);
           rl.keepResident(c);
           gradRow(k, rl, a, Value(), Value());
         });
  reduceColumns(op, key + "cols", "layernorm_backward_cols",
                {flat(dyV), flat(xV), statsType}, {t(dyV), t(xV), stats}, {flat(dwV), flat(dbV)},
                {t(dwV), t(dbV)}, rows, c, ft, ReduceKind::Sum,
                [=](KB &k, ValueRange a, Value r, Value col, int64_t, SmallVector<KB::Store> &) {
                  Value at = k.add(k.mul(r, k.idx(c)), col);
                  Value mean = k.ld(a[2], k.mul(r, k.idx(2)));
                  Value rstd = k.ld(a[2], k.add(k.mul(r, k.idx(2)), k.idx(1)));
                  Value xh = k.mul(k.sub(k.ld(a[1], at), mean), rstd);
                  Value g = k.ld(a[0], at);
                  return SmallVector<Value>{k.mul(g, xh), g};
                },
                /*pairs=*/false, chunkRows);
  return success();
}

LogicalResult LoweringContext::lowerLayerNormOp(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  auto lower = [&](LayerNormOp ln) {
    int64_t c = lastDim(ln.getInput()), rows = numel(ln.getInput()) / c;
    double eps = ln.getEpsilon().convertToDouble();
    launch(op, key, "layernorm_forward",
           {flat(ln.getInput()), flat(ln.getWeight()), flat(ln.getBias()), flat(ln.getResult())},
           {t(ln.getInput()), t(ln.getWeight()), t(ln.getBias()), t(ln.getResult())},
           rows * lanes, [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             RowLanes rl(k, idx, lanes);
             rl.keepResident(c);
             Value base = k.mul(rl.row, k.idx(c));
             RowVals x(rl, a[0], base);
             layernormRow(rl, x, a[1], a[2], a[3], base, c, eps, b.getF32Type());
           });
    return success();
  };
  return lower(llvm::cast<LayerNormOp>(op));
}

LogicalResult LoweringContext::lowerRowFusion(FusionOp fusion, LayerNormOp ln) {
  int64_t lanes = options.rowLanes;
  Block &body = fusion.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  int64_t c = lastDim(ln.getInput()), rows = numel(ln.getInput()) / c;
  double eps = ln.getEpsilon().convertToDouble();
  std::vector<Type> types;
  std::vector<Operand> args;
  appendArgs(fusion.getInputs(), types, args);
  appendArgs(fusion.getResults(), types, args);
  // Where the kernel finds the row op's input (stored), weight, bias and
  // result among its arguments.
  size_t numIn = fusion.getInputs().size();
  auto resultOf = [&](Value v) {
    return numIn + (llvm::find(yield.getValues(), v) - yield.getValues().begin());
  };
  size_t xArg = resultOf(ln.getInput()), yArg = resultOf(ln.getResult());
  size_t wArg = llvm::cast<BlockArgument>(ln.getWeight()).getArgNumber();
  size_t bArg = llvm::cast<BlockArgument>(ln.getBias()).getArgNumber();
  Value rowInput = ln.getInput();
  SmallVector<std::pair<Value, size_t>> stored; // the body's results, each at its argument
  for (auto [j, v] : llvm::enumerate(yield.getValues()))
    if (v != ln.getResult())
      stored.push_back({v, numIn + j});
  // The kernel's name says what it fuses: add_layernorm_forward, ...
  launch(fusion, fusionKey(fusion), opKindName(fusion) + "_forward", types, args, rows * lanes,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           RowLanes rl(k, idx, lanes);
           rl.keepResident(c);
           Value base = k.mul(rl.row, k.idx(c));
           // Each column's values, stored; the layernorm reads back only the
           // columns its lane stored, so no barrier (a resident row keeps
           // them instead).
           RowVals x(rl, a[xArg], base, /*preload=*/false);
           rl.each(c, [&](Value i) -> SmallVector<KB::Store> {
             Value at = k.add(base, i);
             FusionValues eval{k, [&](BlockArgument arg, Value index) {
                                 return k.ld(a[arg.getArgNumber()], index);
                               }};
             SmallVector<KB::Store> stores;
             for (auto [v, arg] : stored)
               stores.push_back({eval(v, at), a[arg], at});
             x.stored(rl, i, eval(rowInput, at));
             return stores;
           });
           layernormRow(rl, x, a[wArg], a[bArg], a[yArg], base, c, eps, b.getF32Type());
         });
  return success();
}

LogicalResult LoweringContext::lowerAddLayerNormFp8Op(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  auto lower = [&](AddLayerNormFp8Op ln) {
    // add_layernorm_forward's row work, storing both layouts of the
    // result's FP8 codes.
    int64_t c = lastDim(ln.getSum()), rows = numel(ln.getSum()) / c;
    double eps = ln.getEpsilon().convertToDouble();
    Type ft = Float32Type::get(ctx), i8 = IntegerType::get(ctx, 8),
         rounded = ln.getRoundedTo();
    std::vector<Type> types = {flat(ln.getLhs()),   flat(ln.getRhs()),  flat(ln.getWeight()),
                               flat(ln.getBias()),  flat(ln.getSum()),  flatOf(rows * c, i8),
                               flatOf(rows * c, i8), flatOf(1, ft)};
    std::vector<Operand> args = {t(ln.getLhs()),    t(ln.getRhs()),  t(ln.getWeight()),
                                 t(ln.getBias()),   t(ln.getSum()),  t(ln.getResult()),
                                 t(ln.getTransposed()), t(ln.getScale())};
    bool records = static_cast<bool>(ln.getRecorded());
    if (records) { // a[8]: the row maxima raise its first element
      auto [type, arg] = recordedArg(op, ln.getHistory(), ln.getRecorded());
      types.push_back(type);
      args.push_back(arg);
    }
    Fp8Format format = ln.getFormat();
    bool cvt = options.cudaArch >= 89;
    // One row's work, the transposed codes by onCode.
    auto rowBody = [=](KB &k, Value row, Value lane, ValueRange a,
                       function_ref<void(Value, Value)> onCode) {
      RowLanes rl(k, k.add(k.mul(row, k.idx(lanes)), lane), lanes);
      rl.keepResident(c);
      Value base = k.mul(rl.row, k.idx(c));
      RowVals sum = storeRowSum(rl, a[0], a[1], a[4], base, c);
      layernormRowFp8(rl, sum, a[2], a[3], a[5], a[7], records ? a[8] : Value(), base, c, eps,
                      k.b.getF32Type(), rounded, format, cvt, onCode);
    };
    // CUDA: a block of 8 warps takes kTileRows rows (each warp
    // kTileRows / 8 in turn), keeps their codes in shared memory, and
    // after a barrier stores the tile's columns as 16-byte runs of the
    // transposed rows (kTileRows bytes each: whole 32-byte sectors).
    constexpr int64_t kTileRows = 32, kBlock = 256;
    int64_t pitch = c + 4; // a row's codes, shifted one bank per row
    if (lanes == 32 && options.vectorAccess && options.blockThreads == kBlock &&
        rows % kTileRows == 0 && c % 32 == 0 && vectorChunks(ln.getTransposed(), 16) &&
        kTileRows * pitch + kStaticSharedBytes <= maxSharedBytes(options.cudaArch)) {
      int64_t runs = c * (kTileRows / 16), perThread = (runs + kBlock - 1) / kBlock;
      launch(op, key + "tiled", "add_layernorm_fp8", types, args, rows / kTileRows * kBlock,
             [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
               KB k{b, loc};
               Value tid = k.urem(idx, k.idx(kBlock)), block = k.udiv(idx, k.idx(kBlock));
               Value warp = k.udiv(tid, k.idx(32)), lane = k.urem(tid, k.idx(32));
               Value r0 = k.mul(block, k.idx(kTileRows));
               Value tile = sharedView(k, dynamicSharedMemory(k), 0, kTileRows * pitch,
                                       b.getI8Type());
               k.loop(k.idx(0), k.idx(kTileRows / 8), [&](Value j) {
                 Value local = k.add(k.mul(warp, k.idx(kTileRows / 8)), j);
                 Value at = k.mul(local, k.idx(pitch));
                 rowBody(k, k.add(r0, local), lane, a,
                         [&](Value col, Value code) { k.st(code, tile, k.add(at, col)); });
               });
               gpu::BarrierOp::create(b, loc);
               // Run v: column v / (kTileRows / 16), rows (v % 2) * 16 on.
               for (int64_t p = 0; p < perThread; ++p) {
                 Value v = k.add(tid, k.idx(p * kBlock));
                 auto store = [&] {
                   Value col = k.udiv(v, k.idx(kTileRows / 16));
                   Value first = k.mul(k.urem(v, k.idx(kTileRows / 16)), k.idx(16));
                   SmallVector<Value> down;
                   for (int64_t i = 0; i < 16; ++i)
                     down.push_back(
                         k.ld(tile, k.add(k.mul(k.add(first, k.idx(i)), k.idx(pitch)), col)));
                   k.stVector(down, a[6], k.add(k.mul(col, k.idx(rows)), k.add(r0, first)));
                 };
                 if ((p + 1) * kBlock <= runs)
                   store();
                 else
                   buildIf(k, k.cmpUlt(v, k.idx(runs)), store);
               }
             },
             /*minBlocksPerSM=*/0, kTileRows * pitch);
      return success();
    }
    // Elsewhere (the Host target, or a tile past the chip's shared memory):
    // each code also to its transposed index.
    launch(op, key, "add_layernorm_fp8", types, args, rows * lanes,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Value row = k.udiv(idx, k.idx(lanes)), lane = k.urem(idx, k.idx(lanes));
             rowBody(k, row, lane, a, [&](Value col, Value code) {
               k.st(code, a[6], k.add(k.mul(col, k.idx(rows)), row));
             });
           });
    return success();
  };
  return lower(llvm::cast<AddLayerNormFp8Op>(op));
}

LogicalResult LoweringContext::lowerLayerNormGradOp(Operation *op) {
  auto lower = [&](LayerNormGradOp ln) {
    RowGradEpilogue storeDx{"", {ln.getInputGrad()}, [](KB &k, ValueRange a, Value dx, Value at) {
                              return SmallVector<KB::Store>{{dx, a[kRowGradEpilogueArg], at}};
                            }};
    return lowerLayerNormGrad(op, keyOf(op), ln.getGrad(), ln.getInput(), ln.getWeight(),
                              ln.getWeightGrad(), ln.getBiasGrad(),
                              ln.getEpsilon().convertToDouble(), storeDx);
  };
  return lower(llvm::cast<LayerNormGradOp>(op));
}

LogicalResult LoweringContext::lowerRowGradFusion(FusionOp fusion, LayerNormGradOp ln) {
  Block &body = fusion.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  // The block argument a row op operand is (widened in the body or not).
  auto argOf = [](Value v) { return llvm::cast<BlockArgument>(stripCasts(v)); };
  BlockArgument dyArg = argOf(ln.getGrad()), xArg = argOf(ln.getInput()),
                wArg = argOf(ln.getWeight());
  // The kernel's arguments: the row op's operands at a[0..2]; from a[4] the
  // fusion's other operands, then the body's stored values.
  RowGradEpilogue epilogue;
  std::vector<size_t> argAt(body.getNumArguments());
  argAt[dyArg.getArgNumber()] = 0;
  argAt[xArg.getArgNumber()] = 1;
  argAt[wArg.getArgNumber()] = 2;
  for (BlockArgument arg : body.getArguments())
    if (arg != dyArg && arg != xArg && arg != wArg) {
      argAt[arg.getArgNumber()] = kRowGradEpilogueArg + epilogue.tensors.size();
      epilogue.tensors.push_back(fusion.getInputs()[arg.getArgNumber()]);
    }
  SmallVector<std::pair<Value, size_t>> stored; // each body value, at its argument
  Value dw, db;
  for (auto [v, r] : llvm::zip(yield.getValues(), fusion.getResults())) {
    if (v == ln.getWeightGrad()) {
      dw = r;
    } else if (v == ln.getBiasGrad()) {
      db = r;
    } else {
      stored.push_back({v, kRowGradEpilogueArg + epilogue.tensors.size()});
      epilogue.tensors.push_back(r);
    }
  }
  // The kernel's name says what follows dx: layernorm_backward_rows_add.
  for (Operation *o = ln->getNextNode(); o != yield; o = o->getNextNode())
    if (!llvm::isa<CastOp>(o))
      epilogue.suffix += "_" + o->getName().stripDialect().str();
  Value dxV = ln.getInputGrad();
  epilogue.stores = [=](KB &k, ValueRange a, Value dx, Value at) {
    FusionValues eval{k, [&](BlockArgument arg, Value index) {
                        return k.ld(a[argAt[arg.getArgNumber()]], index);
                      }};
    eval.bind(dxV, at, dx);
    SmallVector<KB::Store> stores;
    for (auto [v, arg] : stored)
      stores.push_back({eval(v, at), a[arg], at});
    return stores;
  };
  return lowerLayerNormGrad(fusion, fusionKey(fusion), fusion.getInputs()[dyArg.getArgNumber()],
                            fusion.getInputs()[xArg.getArgNumber()],
                            fusion.getInputs()[wArg.getArgNumber()], dw, db,
                            ln.getEpsilon().convertToDouble(), epilogue);
}

void registerLayerNormLowerings(LoweringRegistry &registry) {
  registry.add<LayerNormOp>(&LoweringContext::lowerLayerNormOp);
  registry.add<AddLayerNormFp8Op>(&LoweringContext::lowerAddLayerNormFp8Op);
  registry.add<LayerNormGradOp>(&LoweringContext::lowerLayerNormGradOp);
}

} // namespace gptc::codegen
