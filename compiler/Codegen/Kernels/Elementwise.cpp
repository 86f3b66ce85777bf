//===- Kernels/Elementwise.cpp - the Elementwise kernel family --------------===//
//
// elementwise ops and gpt.fusion (one kernel per fused group), views and
// strided copies. Moved from Lowering.cpp (issue 44): its lowerings are
// LoweringContext members (LoweringContext.h), registered by
// registerElementwiseLowerings below.
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
/// Elements per thread of an elementwise kernel over tensors of `sizes`
/// elements (largest first): a u dividing every size, with at least 1024
/// threads. Strided, thread i takes i, i + n/u, ..., i + (u-1) n/u
/// (coalesced at each step), and loads all u before it stores any, so u
/// loads per input are in flight at once (a store could alias a later
/// load; loads first keep them independent); ElementChunk takes u
/// consecutive ones.
int64_t elementsPerThread(ArrayRef<int64_t> sizes) {
  for (int64_t u : {8, 4, 2})
    if (sizes.front() / u >= 1024 && llvm::all_of(sizes, [&](int64_t n) { return n % u == 0; }))
      return u;
  return 1;
}

/// Thread i of a vectorized elementwise kernel takes the u consecutive
/// elements [u i, u i + u) (a warp's loads and stores are then 16-byte
/// vectors covering 512 consecutive bytes, where the strided order issues
/// 2-byte accesses). An input of `size` elements read at one of those
/// indices comes in whole as vector loads on its first read; an output
/// written at all of them gets vector stores. The values, and so the bits,
/// are those of the strided order.
struct ElementChunk {
  KB &k;
  Value base;
  SmallVector<Value> at; // base + e
  int64_t size = 0;      // elements of the tensors read whole
  llvm::DenseMap<Value, SmallVector<Value>> loaded;

  ElementChunk(KB &k, Value i, int64_t u) : k(k), base(k.mul(i, k.idx(u))) {
    for (int64_t e = 0; e < u; ++e)
      at.push_back(e == 0 ? base : k.add(base, k.idx(e)));
  }
  /// mem[index]: from mem's vector loads when index is one of the chunk's
  /// and mem has `size` elements, else a scalar load.
  Value load(Value mem, Value index) {
    auto e = llvm::find(at, index);
    if (e == at.end() || llvm::cast<MemRefType>(mem.getType()).getNumElements() != size)
      return k.ld(mem, index);
    auto it = loaded.find(mem);
    if (it == loaded.end())
      it = loaded.try_emplace(mem, k.ldConsecutive(mem, base, static_cast<int64_t>(at.size())))
               .first;
    return it->second[e - at.begin()];
  }
  /// valueAt(at[e]) to mem[at[e]] for every e, as vector stores.
  void store(Value mem, function_ref<Value(Value)> valueAt) {
    SmallVector<Value> values;
    for (Value a : at)
      values.push_back(valueAt(a));
    k.stConsecutive(values, mem, base);
  }
};

/// Elementwise `op` at index `i`, in the compute type: the one definition
/// that single-op kernels and gpt.fusion kernels share. `operand(j, at)`
/// gives operand j at index `at` (a bias is read at i modulo its length).
Value elementAt(KB &k, Operation *op, Value i, function_ref<Value(unsigned, Value)> operand) {
  auto x = [&](unsigned j) { return operand(j, i); };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<AddOp>([&](auto) { return k.add(x(0), x(1)); })
      .Case<SubOp>([&](auto) { return k.sub(x(0), x(1)); })
      .Case<MulOp>([&](auto) { return k.mul(x(0), x(1)); })
      .Case<DivOp>([&](auto) { return k.div(x(0), x(1)); })
      .Case<MaxOp>([&](auto) { return k.fmax(x(0), x(1)); })
      .Case<NegOp>([&](auto) { return k.neg(x(0)); })
      .Case<ExpOp>([&](auto) { return k.exp(x(0)); })
      .Case<LogOp>([&](auto) { return k.log(x(0)); })
      .Case<TanhOp>([&](auto) { return k.tanh(x(0)); })
      .Case<SqrtOp>([&](auto) { return k.sqrt(x(0)); })
      .Case<RsqrtOp>([&](auto) { return k.rsqrt(x(0)); })
      .Case<GeluOp>([&](auto) { return geluOf(k, x(0)); })
      .Case<GeluGradOp>([&](auto) { return k.mul(x(0), geluGradOf(k, x(1))); })
      .Case<ScaleOp>([&](ScaleOp s) {
        Value v = x(0);
        return k.mul(v, k.f(s.getFactor().convertToDouble(), v.getType()));
      })
      .Case<CastOp>([&](CastOp c) {
        return k.convert(x(0), llvm::cast<RankedTensorType>(c.getType()).getElementType());
      })
      .Case<ConstantOp>([&](ConstantOp c) {
        Type et = llvm::cast<RankedTensorType>(c.getType()).getElementType();
        return k.f(c.getValue().convertToDouble(), computeOf(et));
      })
      .Case<BiasAddOp>([&](BiasAddOp ba) {
        int64_t nb = llvm::cast<RankedTensorType>(ba.getBias().getType()).getNumElements();
        return k.add(x(0), operand(1, k.urem(i, k.idx(nb))));
      })
      .Default([](Operation *) { return Value(); });
}

/// Kernel names of the single-op elementwise kernels.
const char *elementwiseName(Operation *op) {
  return llvm::TypeSwitch<Operation *, const char *>(op)
      .Case<AddOp>([](auto) { return "add"; })
      .Case<SubOp>([](auto) { return "sub"; })
      .Case<MulOp>([](auto) { return "mul"; })
      .Case<DivOp>([](auto) { return "div"; })
      .Case<MaxOp>([](auto) { return "max"; })
      .Case<NegOp>([](auto) { return "neg"; })
      .Case<ExpOp>([](auto) { return "exp"; })
      .Case<LogOp>([](auto) { return "log"; })
      .Case<TanhOp>([](auto) { return "tanh"; })
      .Case<SqrtOp>([](auto) { return "sqrt"; })
      .Case<RsqrtOp>([](auto) { return "rsqrt"; })
      .Case<GeluOp>([](auto) { return "gelu_forward"; })
      .Case<GeluGradOp>([](auto) { return "gelu_backward"; })
      .Case<ScaleOp>([](auto) { return "scale"; })
      .Case<CastOp>([](auto) { return "cast"; })
      .Case<ConstantOp>([](auto) { return "fill"; })
      .Case<BiasAddOp>([](auto) { return "bias_add"; })
      .Default([](Operation *) { return nullptr; });
}

} // namespace

Value FusionValues::operator()(Value v, Value at) {
  auto memoKey = std::make_pair(v.getAsOpaquePointer(), at.getAsOpaquePointer());
  if (auto it = memo.find(memoKey); it != memo.end())
    return it->second;
  Value y;
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    y = load(arg, at);
  } else {
    Operation *op = v.getDefiningOp();
    y = elementAt(k, op, at, [&](unsigned j, Value idx) { return (*this)(op->getOperand(j), idx); });
    Type elt = eltOf(v);
    y = elt.isBF16() || elt.isF16() ? k.ext(k.convert(y, elt), computeOf(elt))
                                    : k.convert(y, elt);
  }
  memo[memoKey] = y;
  return y;
}

std::string fusionKey(Operation *fusion) {
  Block &body = fusion->getRegion(0).front();
  std::string key = "gpt.fusion";
  llvm::raw_string_ostream os(key);
  llvm::DenseMap<Value, unsigned> number;
  for (BlockArgument arg : body.getArguments())
    number[arg] = number.size();
  for (Operation &op : body) {
    os << "{" << op.getName();
    for (Value v : op.getOperands())
      os << " %" << number.lookup(v);
    for (Type ty : op.getResultTypes())
      os << " " << ty;
    if (op.getPropertiesStorage())
      os << op.getPropertiesAsAttribute();
    os << "}";
    for (Value r : op.getResults())
      number[r] = number.size();
  }
  return key;
}

LogicalResult LoweringContext::lowerElementwise(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  if (op->getNumResults() != 1 || !llvm::isa<RankedTensorType>(op->getResult(0).getType()))
    return op->emitOpError("codegen: no lowering for this op");
  Value res = op->getResult(0);
  std::vector<Type> types;
  std::vector<Operand> args;
  appendArgs(op->getOperands(), types, args);
  appendArgs(res, types, args);
  int64_t n = numel(res);
  if (const char *name = elementwiseName(op)) {
    int64_t u = elementsPerThread({n}), threads = n / u;
    SmallVector<Value> tensors(op->getOperands());
    tensors.push_back(res);
    bool chunk = vectorChunks(tensors, u);
    launch(op, key + (chunk ? ",chunk" : ""), name, types, args, threads,
           [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
             KB k{b, loc};
             if (!chunk) {
               k.storeStrided(i, u, threads, [&](Value at) {
                 Value y =
                     elementAt(k, op, at, [&](unsigned j, Value x) { return k.ld(a[j], x); });
                 return SmallVector<KB::Store>{{y, a.back(), at}};
               });
               return;
             }
             ElementChunk c(k, i, u);
             c.size = n;
             c.store(a.back(), [&](Value at) {
               return elementAt(k, op, at, [&](unsigned j, Value x) { return c.load(a[j], x); });
             });
           });
    return success();
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<TransposeOp>([&](TransposeOp tr) {
        auto xs = rtt(tr.getInput()).getShape(), ys = rtt(tr.getResult()).getShape();
        std::vector<int64_t> perm(tr.getPermutation().begin(), tr.getPermutation().end());
        std::vector<int64_t> inStride(xs.size(), 1);
        for (int64_t d = static_cast<int64_t>(xs.size()) - 2; d >= 0; --d)
          inStride[d] = inStride[d + 1] * xs[d + 1];
        std::vector<int64_t> yshape(ys.begin(), ys.end());
        launch(op, key, "transpose", types, args, n,
               [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
                 KB k{b, loc};
                 Value rest = i, src = k.idx(0);
                 for (int64_t d = static_cast<int64_t>(yshape.size()) - 1; d >= 0; --d) {
                   Value coord = k.urem(rest, k.idx(yshape[d]));
                   rest = k.udiv(rest, k.idx(yshape[d]));
                   src = k.add(src, k.mul(coord, k.idx(inStride[perm[d]])));
                 }
                 k.st(k.ld(a[0], src), a[1], i);
               });
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp sm) {
        int64_t c = lastDim(sm.getInput());
        Type et = computeOf(eltOf(sm.getInput()));
        launch(op, key, "softmax_forward", types, args, n / c * lanes,
               [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                 KB k{b, loc};
                 RowLanes rl(k, idx, lanes);
                 Value base = k.mul(rl.row, k.idx(c));
                 auto [mx, sum] = maxAndSumExp(rl, a[0], base, c, et);
                 rl.each(c, [&](Value i) -> SmallVector<KB::Store> {
                   Value e = k.exp(k.sub(k.ld(a[0], k.add(base, i)), mx));
                   return {{k.div(e, sum), a[1], k.add(base, i)}};
                 });
               });
        return success();
      })
      .Case<CausalMaskOp>([&](CausalMaskOp cm) {
        int64_t tl = lastDim(cm.getInput());
        Type et = computeOf(eltOf(cm.getInput()));
        launch(op, key, "causal_mask", types, args, n,
               [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
                 KB k{b, loc};
                 Value col = k.urem(i, k.idx(tl)), row = k.urem(k.udiv(i, k.idx(tl)), k.idx(tl));
                 Value masked = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, col, row);
                 k.st(k.select(masked, k.f(-INFINITY, et), k.ld(a[0], i)), a[1], i);
               });
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitOpError("codegen: no lowering for this op yet");
      });
}

/// One kernel for a gpt.fusion: each thread computes, for every result k
/// with index i < numel(k), the body ops it depends on, in registers. Bodies
/// are wired by value numbers in the key, so equal bodies share a kernel.
/// Results are grouped by size, largest first, under nested guards: the
/// sibling casts of many weights cost one launch of the largest.
LogicalResult LoweringContext::lowerFusion(FusionOp fusion) {
  if (std::optional<GemmFusion> gemm = matchGemmFusion(fusion))
    return lowerGemmFusion(fusion, *gemm);
  if (LayerNormOp ln = fusion.getRowOp())
    return lowerRowFusion(fusion, ln);
  if (ReduceOp sum = fusion.getColumnSum()) {
    if (auto grad = sum.getInput().getDefiningOp<CausalAttentionGradOp>())
      return lowerAttentionGradSumFusion(fusion, grad, sum);
    return lowerColumnSumFusion(fusion, sum);
  }
  if (LayerNormGradOp ln = fusion.getRowGradOp())
    return lowerRowGradFusion(fusion, ln);
  Block &body = fusion.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  std::vector<Type> types;
  std::vector<Operand> args;
  appendArgs(fusion.getInputs(), types, args);
  appendArgs(fusion.getResults(), types, args);
  std::vector<int64_t> sizes;
  for (Value r : fusion.getResults())
    sizes.push_back(numel(r));
  llvm::sort(sizes, std::greater<int64_t>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

  std::string key = fusionKey(fusion);

  size_t numIn = fusion.getInputs().size();
  Operation *yieldOp = yield.getOperation();
  // Vector chunks where they apply; else several strided elements per
  // thread for results of one size.
  int64_t u = elementsPerThread(sizes);
  SmallVector<Value> tensors(fusion.getInputs());
  llvm::append_range(tensors, fusion.getResults());
  bool chunk = vectorChunks(tensors, u);
  if (!chunk && sizes.size() > 1)
    u = 1;
  int64_t threads = sizes.front() / u;
  if (chunk)
    key += ",chunk";
  launch(fusion, key, "fusion", types, args, threads,
         [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
           KB k{b, loc};
           OpBuilder::InsertionGuard g(b);
           std::optional<ElementChunk> c;
           if (chunk)
             c.emplace(k, i, u);
           FusionValues eval{k, [&](BlockArgument arg, Value at) {
                               Value mem = a[arg.getArgNumber()];
                               return c ? c->load(mem, at) : k.ld(mem, at);
                             }};
           auto storesAt = [&](Value at, int64_t size) {
             SmallVector<KB::Store> stores;
             for (auto [j, v] : llvm::enumerate(yieldOp->getOperands()))
               if (numel(v) == size)
                 stores.push_back({eval(v, at), a[numIn + j], at});
             return stores;
           };
           if (!c && sizes.size() == 1) {
             k.storeStrided(i, u, threads, [&](Value at) { return storesAt(at, sizes.front()); });
             return;
           }
           // Sizes largest first, each level guarded inside the previous.
           for (auto [level, size] : llvm::enumerate(sizes)) {
             Value first = c ? c->base : i;
             if (level > 0) {
               auto guard = scf::IfOp::create(b, loc, k.cmpUlt(first, k.idx(size)), false);
               b.setInsertionPointToStart(&guard.getThenRegion().front());
             }
             if (!c) {
               for (const KB::Store &st : storesAt(i, size))
                 k.st(st.value, st.mem, st.index);
               continue;
             }
             // Result by result: a cast of each of many weights keeps one
             // input's vectors in registers at a time.
             c->size = size;
             for (auto [j, v] : llvm::enumerate(yieldOp->getOperands())) {
               Value result = v; // a lambda may not capture a structured binding
               if (numel(result) == size)
                 c->store(a[numIn + j], [&](Value at) { return eval(result, at); });
             }
           }
         });
  return success();
}

LogicalResult LoweringContext::lowerReshapeOp(Operation *op) {
  auto lower = [&](auto) { return success(); };
  return lower(llvm::cast<ReshapeOp>(op));
}

LogicalResult LoweringContext::lowerSliceOp(Operation *op) {
  std::string key = keyOf(op);
  auto lower = [&](SliceOp s) -> LogicalResult {
    if (s.getDim() == 0)
      return success();
    // A strided copy: out[o, j, i] = in[o, start + j, i].
    auto xs = rtt(s.getInput()).getShape();
    int64_t inner = 1, outer = 1;
    for (size_t d = s.getDim() + 1; d < xs.size(); ++d)
      inner *= xs[d];
    for (int64_t d = 0; d < static_cast<int64_t>(s.getDim()); ++d)
      outer *= xs[d];
    int64_t extent = xs[s.getDim()], start = s.getStart(), size = s.getSize();
    launch(op, key, "slice", {flat(s.getInput()), flat(s.getResult())},
           {t(s.getInput()), t(s.getResult())}, numel(s.getResult()),
           [=](OpBuilder &b, Location loc, Value i, ValueRange args) {
             KB k{b, loc};
             Value in = k.urem(i, k.idx(inner));
             Value j = k.urem(k.udiv(i, k.idx(inner)), k.idx(size));
             Value o = k.udiv(i, k.idx(inner * size));
             Value src = k.add(k.mul(k.add(k.mul(o, k.idx(extent)), k.add(j, k.idx(start))),
                                     k.idx(inner)),
                               in);
             k.st(k.ld(args[0], src), args[1], i);
           });
    return success();
  };
  return lower(llvm::cast<SliceOp>(op));
}

LogicalResult LoweringContext::lowerFusionOp(Operation *op) {
  auto lower = [&](FusionOp f) { return lowerFusion(f); };
  return lower(llvm::cast<FusionOp>(op));
}

void registerElementwiseLowerings(LoweringRegistry &registry) {
  registry.add<ReshapeOp>(&LoweringContext::lowerReshapeOp);
  registry.add<SliceOp>(&LoweringContext::lowerSliceOp);
  registry.add<FusionOp>(&LoweringContext::lowerFusionOp);
}

} // namespace gptc::codegen
