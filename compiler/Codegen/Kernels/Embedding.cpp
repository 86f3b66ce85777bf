//===- Kernels/Embedding.cpp - the Embedding kernel family ------------------===//
//
// gpt.embed and gpt.embed_grad (the token-gradient scatter by counting
// sort). Moved from Lowering.cpp (issue 44): its lowerings are
// LoweringContext members (LoweringContext.h), registered by
// registerEmbeddingLowerings below.
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
/// Buckets (id % kEmbedBuckets) of the embedding's token-gradient scatter:
/// its threads are buckets x channels.
constexpr int64_t kEmbedBuckets = 1024;
/// Listed rows whose loads the token-gradient scatter issues together: a
/// frequent token's bucket is one long chain of them (thousands of rows at
/// 124M, B=64), so they are issued many at a time.
constexpr int64_t kEmbedUnroll = 32;
/// Rows a thread (chunk, bucket) of the scatter's counting sort scans: the
/// sort's threads are chunks x buckets, not one per bucket walking every
/// row (a few SMs busy for a millisecond at 124M, B=16).
constexpr int64_t kEmbedChunkRows = 256;

} // namespace

LogicalResult LoweringContext::lowerEmbedOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](EmbedOp e) {
    int64_t c = lastDim(e.getResult()), tlen = rtt(e.getIds()).getDimSize(1);
    launch(op, key, "embed_forward",
           {flat(e.getWte()), flat(e.getWpe()), flat(e.getIds()), flat(e.getResult())},
           {t(e.getWte()), t(e.getWpe()), t(e.getIds()), t(e.getResult())},
           numel(e.getResult()), [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
             KB k{b, loc};
             Value row = k.udiv(i, k.idx(c)), col = k.urem(i, k.idx(c));
             Value id = k.toIndex(k.ld(a[2], row));
             Value pos = k.urem(row, k.idx(tlen));
             Value w = k.ld(a[0], k.add(k.mul(id, k.idx(c)), col));
             Value p = k.ld(a[1], k.add(k.mul(pos, k.idx(c)), col));
             k.st(k.add(w, p), a[3], i);
           });
    return success();
  };
  return lower(llvm::cast<EmbedOp>(op));
}

LogicalResult LoweringContext::lowerEmbedGradOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](EmbedGradOp e) {
    int64_t c = lastDim(e.getGrad()), rows = numel(e.getIds());
    int64_t tlen = rtt(e.getIds()).getDimSize(1);
    program->commands.push_back({Command::Zero, 0, 0, 0, {t(e.getWteGrad())}, "embed_grad"});
    program->commands.back().source = e;
    // Token rows: a deterministic scatter-add without atomics. The rows
    // are first grouped by bucket (id % buckets), in order, by a
    // counting sort over chunks of kEmbedChunkRows rows: thread (chunk,
    // bucket) counts its chunk's rows of its bucket, a thread per
    // bucket turns the counts into each chunk's start within the
    // bucket, one thread places the buckets, and thread (chunk, bucket)
    // lists its rows. Then thread (bucket, channel) adds its listed
    // rows' gradients in that order, so each (token, channel) sum has
    // one owner and a fixed order (the same as walking all rows).
    // More buckets than rows or tokens would only add idle threads and
    // workspace.
    int64_t vocab = rtt(e.getWteGrad()).getDimSize(0);
    int64_t buckets = std::min({kEmbedBuckets, rows, vocab});
    int64_t chunks = (rows + kEmbedChunkRows - 1) / kEmbedChunkRows;
    Type i32 = IntegerType::get(ctx, 32);
    // list: the bucket-sorted rows; listIds: their tokens, so the scatter
    // need not look a listed row's token up before adding it.
    Operand counts = scratch(chunks * buckets * 4), offsets = scratch((buckets + 1) * 4),
            list = scratch(rows * 4), listIds = scratch(rows * 4);
    Type countsT = flatOf(chunks * buckets, i32), offsetsT = flatOf(buckets + 1, i32),
         listT = flatOf(rows, i32);
    auto bucketOf = [=](KB &k, Value id) { return k.urem(id, k.idx(buckets)); };
    // mem[at(0)], .., mem[at(n - 1)] (i32) replaced by their exclusive
    // prefix sums, in place; returns the total.
    auto scanInPlace = [](KB &k, Value mem, int64_t n, function_ref<Value(Value)> at) {
      return k.loop(k.idx(0), k.idx(n), {k.idx(0)}, [&](Value i, ValueRange cur) {
        Value count = k.toIndex(k.ld(mem, at(i)));
        k.st(k.toI32(cur[0]), mem, at(i));
        return SmallVector<Value>{k.add(cur[0], count)};
      })[0];
    };
    // Rows [first, end) of thread (chunk, bucket) = idx.
    auto chunkRows = [=](KB &k, Value idx) {
      Value first = k.mul(k.udiv(idx, k.idx(buckets)), k.idx(kEmbedChunkRows));
      Value end = k.add(first, k.idx(kEmbedChunkRows));
      end = k.select(k.cmpUlt(end, k.idx(rows)), end, k.idx(rows));
      return std::make_pair(first, end);
    };
    launch(op, key + "count", "embed_backward_count", {flat(e.getIds()), countsT},
           {t(e.getIds()), counts}, chunks * buckets,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Value bucket = k.urem(idx, k.idx(buckets));
             auto [first, end] = chunkRows(k, idx);
             Value n = k.loop(first, end, {k.idx(0)}, [&](Value r, ValueRange cur) {
               Value id = k.toIndex(k.ld(a[0], r));
               Value one = k.select(k.cmpEq(bucketOf(k, id), bucket), k.idx(1), k.idx(0));
               return SmallVector<Value>{k.add(cur[0], one)};
             })[0];
             k.st(k.toI32(n), a[1], idx);
           });
    // counts[chunk][bucket] becomes the chunk's first slot within the
    // bucket; offsets[bucket] the bucket's size, for now.
    launch(op, key + "starts", "embed_backward_starts", {countsT, offsetsT},
           {counts, offsets}, buckets,
           [=](OpBuilder &b, Location loc, Value bucket, ValueRange a) {
             KB k{b, loc};
             Value total = scanInPlace(k, a[0], chunks, [&](Value chunk) {
               return k.add(k.mul(chunk, k.idx(buckets)), bucket);
             });
             k.st(k.toI32(total), a[1], bucket);
           });
    launch(op, key + "offsets", "embed_backward_offsets", {offsetsT},
           {offsets}, 1, [=](OpBuilder &b, Location loc, Value, ValueRange a) {
             KB k{b, loc};
             Value total = scanInPlace(k, a[0], buckets, [](Value bucket) { return bucket; });
             k.st(k.toI32(total), a[0], k.idx(buckets));
           });
    launch(op, key + "list", "embed_backward_list",
           {flat(e.getIds()), countsT, offsetsT, listT, listT},
           {t(e.getIds()), counts, offsets, list, listIds}, chunks * buckets,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Value bucket = k.urem(idx, k.idx(buckets));
             auto [first, end] = chunkRows(k, idx);
             Value slot = k.add(k.toIndex(k.ld(a[2], bucket)), k.toIndex(k.ld(a[1], idx)));
             k.loop(first, end, {slot}, [&](Value r, ValueRange cur) {
               Value id = k.toIndex(k.ld(a[0], r));
               Value mine = k.cmpEq(bucketOf(k, id), bucket);
               auto put = scf::IfOp::create(b, loc, mine, /*withElseRegion=*/false);
               {
                 OpBuilder::InsertionGuard g(b);
                 b.setInsertionPointToStart(&put.getThenRegion().front());
                 k.st(k.toI32(r), a[3], cur[0]);
                 k.st(k.toI32(id), a[4], cur[0]);
               }
               return SmallVector<Value>{
                   k.add(cur[0], k.select(mine, k.idx(1), k.idx(0)))};
             });
           });
    launch(op, key + "wte", "embed_backward_wte",
           {flat(e.getGrad()), listT, offsetsT, listT, flat(e.getWteGrad())},
           {t(e.getGrad()), listIds, offsets, list, t(e.getWteGrad())}, buckets * c,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Type ft = b.getF32Type();
             Type wt = llvm::cast<MemRefType>(a[4].getType()).getElementType();
             Value col = k.urem(idx, k.idx(c)), bucket = k.udiv(idx, k.idx(c));
             Value from = k.toIndex(k.ld(a[2], bucket));
             Value to = k.toIndex(k.ld(a[2], k.add(bucket, k.idx(1))));
             // The running sum of the current token stays in a register
             // while the next listed rows have the same token (a frequent
             // token's rows are most of its bucket), and goes to memory
             // when the token changes: the same additions in the same
             // order as adding each row into memory, without a store and
             // a dependent load per row. kEmbedUnroll rows' loads are
             // issued together.
             Value none = k.idx(-1);
             auto res = k.loop(from, to, k.idx(kEmbedUnroll), {none, k.f(0, ft)},
                               [&](Value n0, ValueRange cur) {
               SmallVector<Value> valid, wis, grads;
               for (int64_t u = 0; u < kEmbedUnroll; ++u) {
                 Value n = k.add(n0, k.idx(u));
                 Value ok = k.cmpUlt(n, to);
                 valid.push_back(ok);
                 Value slot = k.select(ok, n, from);
                 Value r = k.toIndex(k.ld(a[3], slot));
                 Value id = k.toIndex(k.ld(a[1], slot));
                 wis.push_back(k.add(k.mul(id, k.idx(c)), col));
                 grads.push_back(k.ld(a[0], k.add(k.mul(r, k.idx(c)), col)));
               }
               Value at = cur[0], acc = cur[1];
               for (int64_t u = 0; u < kEmbedUnroll; ++u) {
                 Value moves = arith::AndIOp::create(
                     b, loc, valid[u],
                     arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, wis[u], at));
                 auto change = scf::IfOp::create(b, loc, TypeRange{ft}, moves,
                                                 /*withElseRegion=*/true);
                 {
                   OpBuilder::InsertionGuard g(b);
                   b.setInsertionPointToStart(&change.getThenRegion().front());
                   auto flush = scf::IfOp::create(
                       b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, at, none),
                       /*withElseRegion=*/false);
                   b.setInsertionPointToStart(&flush.getThenRegion().front());
                   k.st(acc, a[4], at);
                   b.setInsertionPointAfter(flush);
                   scf::YieldOp::create(b, loc, ValueRange{k.ld(a[4], wis[u])});
                   b.setInsertionPointToStart(&change.getElseRegion().front());
                   scf::YieldOp::create(b, loc, ValueRange{acc});
                 }
                 Value sum = k.asStored(k.add(change.getResult(0), grads[u]), wt);
                 acc = k.select(valid[u], sum, acc);
                 at = k.select(valid[u], wis[u], at);
               }
               return SmallVector<Value>{at, acc};
             });
             auto last = scf::IfOp::create(
                 b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, res[0], none),
                 /*withElseRegion=*/false);
             OpBuilder::InsertionGuard g(b);
             b.setInsertionPointToStart(&last.getThenRegion().front());
             k.st(res[1], a[4], res[0]);
           });
    // Positions: thread (position, channel) sums over the batch; rows
    // past T stay zero.
    program->commands.push_back({Command::Zero, 0, 0, 0, {t(e.getWpeGrad())}, "embed_grad"});
    program->commands.back().source = e;
    int64_t batch = rows / tlen;
    launch(op, key + "wpe", "embed_backward_wpe", {flat(e.getGrad()), flat(e.getWpeGrad())},
           {t(e.getGrad()), t(e.getWpeGrad())}, tlen * c,
           [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             KB k{b, loc};
             Type ft = b.getF32Type();
             Value sum = k.loop(k.idx(0), k.idx(batch), {k.f(0, ft)}, [&](Value bi, ValueRange s) {
               Value at = k.add(k.mul(bi, k.idx(tlen * c)), idx);
               return SmallVector<Value>{k.add(s[0], k.ld(a[0], at))};
             })[0];
             k.st(sum, a[1], idx);
           });
    return success();
  };
  return lower(llvm::cast<EmbedGradOp>(op));
}

void registerEmbeddingLowerings(LoweringRegistry &registry) {
  registry.add<EmbedOp>(&LoweringContext::lowerEmbedOp);
  registry.add<EmbedGradOp>(&LoweringContext::lowerEmbedGradOp);
}

} // namespace gptc::codegen
