//===- Kernels/Reduction.cpp - the Reduction kernel family ------------------===//
//
// column reductions (reduceColumns), gpt.reduce, gpt.gelu_grad_sum,
// gpt.global_norm. Moved from Lowering.cpp (issue 44): its lowerings are
// LoweringContext members (LoweringContext.h), registered by
// registerReductionLowerings below.
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
/// Rows whose loads a first-stage thread issues together before folding
/// them in order: one load in flight per thread left the stage at about
/// half the copy bandwidth.
constexpr int64_t kColumnUnroll = 8;

/// Column reductions of a (rows, cols) matrix (layernorm's dgamma/dbeta,
/// bias gradients) in two deterministic stages: thread (chunk, col) folds
/// kColumnChunkRows rows into a partial (consecutive threads read
/// consecutive columns, so loads coalesce), then the lanes of a row kernel
/// (a warp per column) fold its partials. No atomics: the sum order is
/// fixed.
void LoweringContext::reduceColumns(Operation *op, const std::string &key, const std::string &base,
                            std::vector<Type> inTypes, std::vector<Operand> ins,
                            std::vector<Type> outTypes, std::vector<Operand> outs, int64_t rows,
                            int64_t cols, Type ft, ReduceKind kind, RowValuesFn values,
                            bool pairs, int64_t chunkRows) {
  int64_t n = static_cast<int64_t>(outs.size());
  int64_t parts = (rows + chunkRows - 1) / chunkRows;
  int64_t eltBytes = ft.getIntOrFloatBitWidth() / 8;
  Operand partials = scratch(n * parts * cols * eltBytes);
  auto partialsType = flatOf(n * parts * cols, ft);
  auto fold = [kind](KB &k, Value acc, Value x) {
    return kind == ReduceKind::Max ? k.fmax(acc, x) : k.add(acc, x);
  };
  double init = kind == ReduceKind::Max ? -INFINITY : 0.0;
  size_t nIns = ins.size();
  inTypes.push_back(partialsType);
  ins.push_back(partials);
  // With `pairs` (CUDA, even columns) a thread folds two adjacent columns
  // from one 2-element load: half the load instructions, a whole 128-byte
  // line per warp for bf16.
  int64_t vec = pairs && cols % 2 == 0 && options.vectorAccess ? 2 : 1;
  int64_t groups = cols / vec;
  launch(op, key + "partials", base, inTypes, ins, parts * groups,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           Value chunk = k.udiv(idx, k.idx(groups));
           Value col = k.mul(k.urem(idx, k.idx(groups)), k.idx(vec));
           Value lo = k.mul(chunk, k.idx(chunkRows));
           Value hi = arith::MinUIOp::create(b, loc, k.add(lo, k.idx(chunkRows)),
                                             k.idx(rows));
           // Accumulator e * vec + c: output e, column col + c.
           SmallVector<Value> inits(n * vec, k.f(init, ft));
           auto foldRows = [&](Value r, int64_t count, ValueRange cur) {
             SmallVector<SmallVector<Value>> rowsXs;
             SmallVector<KB::Store> stores;
             for (int64_t u = 0; u < count; ++u) {
               Value row = u ? k.add(r, k.idx(u)) : r;
               rowsXs.push_back(values(k, a.take_front(nIns), row, col, vec, stores));
             }
             for (const KB::Store &st : stores)
               k.st(st.value, st.mem, st.index);
             SmallVector<Value> next(cur);
             for (const SmallVector<Value> &xs : rowsXs)
               for (int64_t e = 0; e < n * vec; ++e)
                 next[e] = fold(k, next[e], xs[e]);
             return next;
           };
           Value full = k.add(lo, k.mul(k.udiv(k.sub(hi, lo), k.idx(kColumnUnroll)),
                                        k.idx(kColumnUnroll)));
           auto acc = k.loop(lo, full, k.idx(kColumnUnroll), inits, [&](Value r, ValueRange cur) {
             return foldRows(r, kColumnUnroll, cur);
           });
           acc = k.loop(full, hi, acc, [&](Value r, ValueRange cur) { return foldRows(r, 1, cur); });
           Value at = k.add(k.mul(chunk, k.idx(cols)), col);
           for (int64_t e = 0; e < n; ++e)
             for (int64_t c = 0; c < vec; ++c)
               k.st(acc[e * vec + c], a[nIns], k.add(at, k.idx(e * parts * cols + c)));
         });
  foldColumnPartials(op, key, base, partials, partialsType, std::move(outTypes), std::move(outs),
                     parts, rows, cols, ft, kind);
}

/// The second stage of reduceColumns: outs[e][col] from the `parts`
/// partials of each column (outs.size() runs of parts x cols).
void LoweringContext::foldColumnPartials(Operation *op, const std::string &key, const std::string &base,
                                 Operand partials, Type partialsType, std::vector<Type> outTypes,
                                 std::vector<Operand> outs, int64_t parts, int64_t rows,
                                 int64_t cols, Type ft, ReduceKind kind) {
  int64_t n = static_cast<int64_t>(outs.size());
  auto fold = [kind](KB &k, Value acc, Value x) {
    return kind == ReduceKind::Max ? k.fmax(acc, x) : k.add(acc, x);
  };
  double init = kind == ReduceKind::Max ? -INFINITY : 0.0;
  std::vector<Type> sumTypes = {partialsType};
  sumTypes.insert(sumTypes.end(), outTypes.begin(), outTypes.end());
  std::vector<Operand> sumArgs = {partials};
  sumArgs.insert(sumArgs.end(), outs.begin(), outs.end());
  // A warp per column: lane l folds partials l, l + 32, ... in order, then
  // the lanes combine in a fixed butterfly. One thread per column left a
  // few hundred serial loads on a few SMs.
  int64_t lanes = options.rowLanes;
  launch(op, key + "sum", base + "_sum", sumTypes, sumArgs, cols * lanes,
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           KB k{b, loc};
           RowLanes rl(k, idx, lanes);
           Value col = rl.row;
           SmallVector<Value> inits(n, k.f(init, ft));
           SmallVector<Value> acc = rl.fold(parts, inits, [&](Value p, ValueRange cur) {
             SmallVector<Value> next;
             for (int64_t e = 0; e < n; ++e)
               next.push_back(fold(
                   k, cur[e], k.ld(a[0], k.add(k.mul(k.add(k.idx(e * parts), p), k.idx(cols)), col))));
             return next;
           });
           SmallVector<Value> vs;
           for (int64_t e = 0; e < n; ++e) {
             Value v = kind == ReduceKind::Max ? rl.max(acc[e]) : rl.sum(acc[e]);
             vs.push_back(kind == ReduceKind::Mean ? k.div(v, k.f(rows, ft)) : v);
           }
           rl.once([&] {
             for (int64_t e = 0; e < n; ++e)
               k.st(vs[e], a[1 + e], col);
           });
         });
}

namespace {
/// Elements one thread squares and sums in the first stage of a global
/// norm, elements per load group and groups it loads at once, partials each
/// folding thread sums, and the most the last thread sums.
constexpr int64_t kNormChunk = 1024, kNormGroup = 8, kNormUnroll = 4, kNormFoldWidth = 64,
                  kNormFolders = 256;

} // namespace

/// Sums `count` f32 values at `values` down to at most kNormFolders, in a
/// fixed order: kernels `name` whose threads each sum kNormFoldWidth of
/// them, strided (coalesced); returns what is left and how many.
std::pair<Operand, int64_t> LoweringContext::foldPartials(Operation *op, Operand values, int64_t count,
                                                  const std::string &name) {
  Type ft = Float32Type::get(ctx);
  while (count > kNormFolders) {
    int64_t folders =
        std::max(kNormFolders, (count + kNormFoldWidth - 1) / kNormFoldWidth);
    Operand folded = scratch(folders * 4);
    launch(op, name + std::to_string(count), name, {flatOf(count, ft), flatOf(folders, ft)},
           {values, folded}, folders, [=](OpBuilder &b, Location loc, Value f, ValueRange a) {
             KB k{b, loc};
             Value s = k.loop(f, k.idx(count), k.idx(folders), {k.f(0, ft)},
                              [&](Value i, ValueRange acc) {
                                return SmallVector<Value>{k.add(acc[0], k.ld(a[0], i))};
                              })[0];
             k.st(s, a[1], f);
           });
    values = folded;
    count = folders;
  }
  return {values, count};
}

/// sqrt(sum of squares) over many tensors in few launches: batched kernels
/// where thread p of input i sums groups p, p + pieces_i, ... of it
/// (coalesced; kNormUnroll groups in flight) into partial p; a group is
/// kNormGroup elements in 16-byte vectors where LoweringOptions::
/// vectorAccess and the tensor allow (a multiple of 8 elements at a 16-byte
/// aligned offset), whatever the element type, so that an f32 copy of a
/// bf16 tensor gives the same bits when both are so placed (the planner's
/// 256-byte alignment), else one element; then
/// folding kernels whose threads each sum kNormFoldWidth partials strided,
/// until at most kNormFolders are left, and one thread folds those and
/// takes the root. Fixed order: the same bits every run.
void LoweringContext::lowerGlobalNorm(GlobalNormOp gn) {
  Operation *op = gn.getOperation();
  Type ft = Float32Type::get(ctx);
  SmallVector<Value> inputs(gn.getInputs());
  // Per input: elements per load and loads; then partials (one per thread).
  SmallVector<int64_t> widths, vectors, pieces;
  int64_t total = 0;
  for (Value in : inputs) {
    const TensorInfo &info = result.tensors[tensorOf.lookup(in)];
    int64_t w = kNormGroup;
    if (!options.vectorAccess || numel(in) % w || info.offset % 16)
      w = 1;
    widths.push_back(w);
    vectors.push_back(numel(in) / w);
    pieces.push_back((vectors.back() + kNormChunk / w - 1) / (kNormChunk / w));
    total += pieces.back();
  }
  Operand partials = scratch(total * 4);
  int64_t done = 0;
  for (size_t g0 = 0; g0 < inputs.size(); g0 += kMembersPerKernel) {
    size_t g1 = std::min(inputs.size(), g0 + kMembersPerKernel);
    std::vector<Type> types;
    std::vector<Operand> args;
    std::vector<int64_t> starts;
    std::string key = "sumsq";
    int64_t threads = 0;
    for (size_t i = g0; i < g1; ++i) {
      types.push_back(flat(inputs[i]));
      args.push_back(t(inputs[i]));
      starts.push_back(threads);
      threads += pieces[i];
      key += "," + std::to_string(numel(inputs[i])) + "x" + std::to_string(widths[i]);
    }
    Operand slice = partials;
    slice.scratch += done * 4;
    slice.bytes = threads * 4;
    types.push_back(flatOf(threads, ft));
    args.push_back(slice);
    int64_t count = static_cast<int64_t>(g1 - g0);
    SmallVector<int64_t> nv(vectors.begin() + g0, vectors.begin() + g1);
    SmallVector<int64_t> np(pieces.begin() + g0, pieces.begin() + g1);
    // Inputs of one (element type, group width) share one loop.
    SmallVector<std::pair<Type, int64_t>> classes;
    SmallVector<int64_t> classOf;
    for (size_t i = g0; i < g1; ++i)
      classOf.push_back(classIndex(
          classes, std::make_pair(getElementTypeOrSelf(inputs[i].getType()), widths[i])));
    SmallVector<Type> classTypes = llvm::map_to_vector(classes, [](auto c) { return c.first; });
    launch(op, key, "sum_of_squares", types, args, threads,
           [=](OpBuilder &b, Location loc, Value p, ValueRange a) {
             KB k{b, loc};
             Value which = memberOf(k, p, starts);
             // Per input: its first partial, vectors and pieces.
             Type index = b.getIndexType();
             dispatchMembers(
                 k, which, a.take_front(count), classTypes, classOf, {index, index, index},
                 [&](int64_t i) {
                   return SmallVector<Value>{k.idx(starts[i]), k.idx(nv[i]), k.idx(np[i])};
                 },
                 [&](int64_t c, Value mem, ValueRange v) {
                   Value j = k.sub(p, v[0]), vectors = v[1], stride = v[2];
                   Value last = k.sub(vectors, k.idx(1));
                   int64_t w = classes[c].second;
                   // kNormUnroll loads per iteration, all issued before the
                   // sums; one past the end reads the last vector and
                   // counts zero.
                   Value s = k.loop(j, vectors, k.mul(stride, k.idx(kNormUnroll)), {k.f(0, ft)},
                                    [&](Value at0, ValueRange acc) {
                     SmallVector<SmallVector<Value>> xs;
                     SmallVector<Value> in;
                     for (int64_t u = 0; u < kNormUnroll; ++u) {
                       Value at = u == 0 ? at0 : k.add(at0, k.mul(stride, k.idx(u)));
                       Value ok = k.cmpUlt(at, vectors);
                       in.push_back(ok);
                       at = k.select(ok, at, last);
                       xs.push_back(k.ldConsecutive(mem, k.mul(at, k.idx(w)), w));
                     }
                     Value sum = acc[0];
                     for (int64_t u = 0; u < kNormUnroll; ++u)
                       for (Value x : xs[u])
                         sum = k.add(sum, k.select(in[u], k.mul(x, x), k.f(0, ft)));
                     return SmallVector<Value>{sum};
                   })[0];
                   k.st(s, a[count], p);
                 });
           });
    done += threads;
  }
  auto [cur, count] = foldPartials(op, partials, total, "global_norm_fold");
  launch(op, "norm" + std::to_string(count), "global_norm",
         {flatOf(count, ft), flat(gn.getResult())}, {cur, t(gn.getResult())}, 1,
         [=](OpBuilder &b, Location loc, Value, ValueRange a) {
           KB k{b, loc};
           Value s = k.loop(k.idx(0), k.idx(count), {k.f(0, ft)}, [&](Value i, ValueRange acc) {
             return SmallVector<Value>{k.add(acc[0], k.ld(a[0], i))};
           })[0];
           k.st(k.sqrt(s), a[1], k.idx(0));
         });
}

LogicalResult LoweringContext::lowerReduceOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](ReduceOp red) -> LogicalResult {
    ArrayRef<int64_t> dims = red.getDims();
    for (auto [i, d] : llvm::enumerate(dims))
      if (d != static_cast<int64_t>(i))
        return op->emitOpError("codegen: only reductions over leading dimensions");
    int64_t cols = numel(red.getResult()), rows = numel(red.getInput()) / cols;
    ReduceKind kind = red.getKind();
    Type ft = computeOf(eltOf(red.getInput()));
    reduceMatrix(op, key, "reduce_leading", flat(red.getInput()), t(red.getInput()),
                 flat(red.getResult()), t(red.getResult()), rows, cols, ft, kind);
    return success();
  };
  return lower(llvm::cast<ReduceOp>(op));
}

LogicalResult LoweringContext::lowerColumnSumFusion(FusionOp fusion, ReduceOp sum) {
  Block &body = fusion.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  Value summed = sum.getInput();
  int64_t cols = lastDim(summed), rows = numel(summed) / cols;
  // The column reduction's first stage computes and stores the elementwise
  // results as it reads each element: one pass over (rows, cols). Its
  // inputs are the fusion's operands, then those results; its output the
  // sums (the yield of the reduce, through its casts).
  size_t numIn = fusion.getInputs().size();
  std::vector<Type> inTypes, outTypes;
  std::vector<Operand> ins, outs;
  appendArgs(fusion.getInputs(), inTypes, ins);
  SmallVector<Value> stored; // yielded elementwise values, in order
  for (auto [r, v] : llvm::zip(fusion.getResults(), yield.getValues())) {
    if (stripCasts(v) == sum.getResult()) {
      outTypes.push_back(flat(r));
      outs.push_back(t(r));
      continue;
    }
    inTypes.push_back(flat(r));
    ins.push_back(t(r));
    stored.push_back(v);
  }
  if (outs.size() != 1)
    return fusion.emitOpError("codegen: a column-sum fusion yields its sum once");
  Type ft = computeOf(eltOf(fusion.getInputs().front()));
  reduceColumns(
      fusion, fusionKey(fusion), opKindName(fusion),
      inTypes, ins, outTypes, outs, rows, cols, ft, ReduceKind::Sum,
      [=](KB &k, ValueRange a, Value r, Value col, int64_t width,
          SmallVector<KB::Store> &stores) {
        Value at = k.add(k.mul(r, k.idx(cols)), col);
        // Every operand's columns of this trip, loaded together first.
        SmallVector<SmallVector<Value>> loaded;
        for (size_t j = 0; j < numIn; ++j)
          loaded.push_back(k.ldConsecutive(a[j], at, width));
        SmallVector<Value> sums;
        for (int64_t c = 0; c < width; ++c) {
          FusionValues eval{k, [&](BlockArgument arg, Value) {
                              return loaded[arg.getArgNumber()][c];
                            }};
          sums.push_back(eval(summed, at));
          // A narrowing cast of a yielded value is the store's own rounding.
          SmallVector<Value> values;
          for (Value v : stored) {
            auto cast = v.getDefiningOp<CastOp>();
            values.push_back(cast && eltOf(v) != computeOf(eltOf(v)) ? eval(cast.getInput(), at)
                                                                     : eval(v, at));
          }
          Value index = c ? k.add(at, k.idx(c)) : at;
          for (auto [j, value] : llvm::enumerate(values))
            stores.push_back({value, a[numIn + j], index});
        }
        return sums;
      },
      /*pairs=*/true);
  return success();
}

LogicalResult LoweringContext::lowerGlobalNormOp(Operation *op) {
  auto lower = [&](GlobalNormOp gn) {
    lowerGlobalNorm(gn);
    return success();
  };
  return lower(llvm::cast<GlobalNormOp>(op));
}

void registerReductionLowerings(LoweringRegistry &registry) {
  registry.add<ReduceOp>(&LoweringContext::lowerReduceOp);
  registry.add<GlobalNormOp>(&LoweringContext::lowerGlobalNormOp);
}

} // namespace gptc::codegen
