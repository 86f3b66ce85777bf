//===- Lowering.cpp - planned gpt programs -> kernels, GEMMs, commands ---===//
//
// One lowering per op kind. Kernels are "index-space" bodies: thread `idx`
// of `threads` computes one element, one row or one column, with loops for
// the rest. These are simple, deterministic kernels (no atomics): speed is
// the business of the fusion and Hopper-kernel passes that replace them.
//
//===----------------------------------------------------------------------===//

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
#include <cmath>

using namespace mlir;
using namespace mlir::gpt;

namespace gptc::codegen {
namespace {

//===----------------------------------------------------------------------===//
// Kernel-body helpers
//===----------------------------------------------------------------------===//

/// Index math of the attention kernels: thread idx = (b, h, row) and the
/// offsets of q/k/v (in qkv (B, T, 3C)) and of y/dy (in (B, T, C)).
struct AttentionIndex {
  KB &k;
  Value row, head, batch;
  int64_t t, c, d;
  AttentionIndex(KB &k, Value idx, int64_t t, int64_t h, int64_t c, int64_t d)
      : k(k), t(t), c(c), d(d) {
    row = k.urem(idx, k.idx(t));
    head = k.urem(k.udiv(idx, k.idx(t)), k.idx(h));
    batch = k.udiv(idx, k.idx(t * h));
  }
  Value qkv(Value r, int64_t part) {
    return k.add(k.mul(k.add(k.mul(batch, k.idx(t)), r), k.idx(3 * c)),
                 k.add(k.idx(part * c), k.mul(head, k.idx(d))));
  }
  Value out(Value r) {
    return k.add(k.mul(k.add(k.mul(batch, k.idx(t)), r), k.idx(c)), k.mul(head, k.idx(d)));
  }
};

RankedTensorType rtt(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
int64_t numel(Value v) { return rtt(v).getNumElements(); }
int64_t lastDim(Value v) { return rtt(v).getShape().back(); }
Type eltOf(Value v) { return rtt(v).getElementType(); }
/// The type a kernel computes in for tensors of element type `t` (see KB::ld).
Type computeOf(Type t) {
  return t.isBF16() || t.isF16() ? Float32Type::get(t.getContext()) : t;
}
MemRefType flat(Value v) { return MemRefType::get({numel(v)}, eltOf(v)); }
MemRefType flatOf(int64_t n, Type t) { return MemRefType::get({n}, t); }

int64_t bytesOf(Type t) {
  auto s = llvm::cast<ShapedType>(t);
  return s.getNumElements() * std::max<int64_t>(s.getElementTypeBitWidth() / 8, 1);
}

/// llm.c's tanh-approximate GELU and its derivative, in type `t`.
Value geluOf(KB &k, Value x) {
  Type t = x.getType();
  Value inner = k.mul(k.f(0.7978845608028654, t),
                      k.add(x, k.mul(k.f(0.044715, t), k.mul(x, k.mul(x, x)))));
  return k.mul(k.mul(k.f(0.5, t), x), k.add(k.f(1.0, t), k.tanh(inner)));
}

Value geluGradOf(KB &k, Value x) {
  Type t = x.getType();
  Value kk = k.f(0.7978845608028654, t), a = k.f(0.044715, t);
  Value u = k.mul(kk, k.add(x, k.mul(a, k.mul(x, k.mul(x, x)))));
  Value th = k.tanh(u);
  Value sech2 = k.sub(k.f(1.0, t), k.mul(th, th));
  Value poly = k.add(k.f(1.0, t), k.mul(k.f(3.0, t), k.mul(a, k.mul(x, x))));
  return k.add(k.mul(k.f(0.5, t), k.add(k.f(1.0, t), th)),
               k.mul(k.mul(k.f(0.5, t), x), k.mul(sech2, k.mul(kk, poly))));
}

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

/// max_i x[base + i] and sum_i exp(x[base + i] - max) over i < n: the
/// statistics of a stable softmax / log-sum-exp row.
std::pair<Value, Value> maxAndSumExp(RowLanes &rl, Value x, Value base, int64_t n, Type t) {
  KB &k = rl.k;
  Value mx = rl.max(rl.fold(n, {k.f(-INFINITY, t)}, [&](Value i, ValueRange s) {
    return SmallVector<Value>{k.fmax(s[0], k.ld(x, k.add(base, i)))};
  })[0]);
  Value sum = rl.sum(rl.fold(n, {k.f(0, t)}, [&](Value i, ValueRange s) {
    return SmallVector<Value>{k.add(s[0], k.exp(k.sub(k.ld(x, k.add(base, i)), mx)))};
  })[0]);
  return {mx, sum};
}

/// SplitMix64 on i64 (wrapping multiply, logical shifts).
Value splitmix(KB &k, Value x) {
  auto shr = [&](Value v, int64_t s) { return arith::ShRUIOp::create(k.b, k.loc, v, k.i64(s)); };
  auto xorv = [&](Value p, Value q) { return arith::XOrIOp::create(k.b, k.loc, p, q); };
  x = k.add(x, k.i64(static_cast<int64_t>(0x9E3779B97F4A7C15ull)));
  x = k.mul(xorv(x, shr(x, 30)), k.i64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  x = k.mul(xorv(x, shr(x, 27)), k.i64(static_cast<int64_t>(0x94D049BB133111EBull)));
  return xorv(x, shr(x, 31));
}

/// The index of `v` in `set`, appended first if it is not there: the class
/// of a batched kernel's member.
template <typename T>
int64_t classIndex(SmallVectorImpl<T> &set, const T &v) {
  auto *it = llvm::find(set, v);
  if (it != set.end())
    return it - set.begin();
  set.push_back(v);
  return static_cast<int64_t>(set.size()) - 1;
}

/// Batched kernels: threads [starts[i], starts[i + 1]) serve member i of
/// many tensors. Returns the member of thread p (the number of later
/// starts <= p).
Value memberOf(KB &k, Value p, ArrayRef<int64_t> starts) {
  Value which = k.idx(0);
  for (size_t i = 1; i < starts.size(); ++i) {
    Value past =
        arith::CmpIOp::create(k.b, k.loc, arith::CmpIPredicate::uge, p, k.idx(starts[i]));
    which = k.add(which, k.select(past, k.idx(1), k.idx(0)));
  }
  return which;
}

/// The dispatch of a batched kernel over members `mems` (kernel arguments)
/// of element types classes[classOf[i]]: one switch on `which` yields the
/// member's memref as memref<?xT> (a result per class; the other classes
/// get a stand-in) and values(i) (of types `valueTypes`, built in member
/// i's case); a second switch builds body(c, memref, values) once per
/// class c. So a kernel holds a copy of its loop per class, not per member:
/// a loop per member made a 128-member kernel ~22K lines of PTX.
void dispatchMembers(KB &k, Value which, ValueRange mems, ArrayRef<Type> classes,
                     ArrayRef<int64_t> classOf, TypeRange valueTypes,
                     function_ref<SmallVector<Value>(int64_t)> values,
                     function_ref<void(int64_t, Value, ValueRange)> body) {
  OpBuilder &b = k.b;
  int64_t n = static_cast<int64_t>(mems.size()), nc = static_cast<int64_t>(classes.size());
  SmallVector<Type> yields;
  for (Type elt : classes)
    yields.push_back(MemRefType::get({ShapedType::kDynamic}, elt));
  yields.push_back(b.getIndexType()); // the class
  llvm::append_range(yields, valueTypes);
  // The last member is the default: `which` is always a member, and a case
  // that repeated the default let LLVM's block placement differ from run
  // to run.
  auto cases = llvm::to_vector(llvm::seq<int64_t>(0, n - 1));
  auto pick = scf::IndexSwitchOp::create(b, k.loc, yields, which, cases, n - 1);
  auto yieldFor = [&](Block &block, int64_t i) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&block);
    SmallVector<Value> vs;
    for (int64_t c = 0; c < nc; ++c) {
      int64_t from = classOf[i] == c ? i : llvm::find(classOf, c) - classOf.begin();
      vs.push_back(memref::CastOp::create(b, k.loc, yields[c], mems[from]));
    }
    vs.push_back(k.idx(classOf[i]));
    llvm::append_range(vs, values(i));
    scf::YieldOp::create(b, k.loc, vs);
  };
  yieldFor(pick.getDefaultRegion().emplaceBlock(), n - 1);
  for (int64_t i = 0; i + 1 < n; ++i)
    yieldFor(pick.getCaseRegions()[i].emplaceBlock(), i);
  Value cls = pick.getResult(nc);
  ValueRange vals = pick.getResults().drop_front(nc + 1);
  auto classCases = llvm::to_vector(llvm::seq<int64_t>(0, nc));
  auto run = scf::IndexSwitchOp::create(b, k.loc, TypeRange{}, cls, classCases, nc);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&run.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(b, k.loc);
  }
  for (int64_t c = 0; c < nc; ++c) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&run.getCaseRegions()[c].emplaceBlock());
    body(c, pick.getResult(c), vals);
    scf::YieldOp::create(b, k.loc);
  }
}

//===----------------------------------------------------------------------===//
// The lowering
//===----------------------------------------------------------------------===//

/// Rows folded by one thread in the first stage of a column reduction: the
/// (chunk, column) threads fill the GPU while each column's partials stay
/// few enough for one thread to fold in the second.
constexpr int64_t kColumnChunkRows = 64;
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

class Lowerer {
public:
  Lowerer(ModuleOp module, const LoweringOptions &options)
      : module(module), ctx(module.getContext()), options(options) {}

  LogicalResult lowerProgram(func::FuncOp fn);
  Lowered result;

private:
  ModuleOp module;
  MLIRContext *ctx;
  LoweringOptions options;
  ProgramInfo *program = nullptr;
  llvm::DenseMap<Value, int64_t> tensorOf;     // SSA value -> tensor index
  std::map<std::string, int64_t> globals;      // param/state name -> tensor
  std::map<std::string, unsigned> kernelByKey; // dedupe
  std::map<std::string, int64_t> argOffsets;   // program-local input offsets
  int64_t scratchTop = 0;                      // per command
  int64_t scratchBase = 0;                     // above what later commands read (keep)
  llvm::DenseMap<Value, Operand> savedLse;     // cross-entropy logits -> row log-sum-exp
  llvm::DenseSet<Operation *> onePassGrads;    // gradients their forward's launch wrote
  llvm::DenseMap<Value, unsigned> pending;     // all_reduce result -> done event
  int kernelCounter = 0;

  int64_t addTensor(TensorInfo info) {
    result.tensors.push_back(std::move(info));
    return static_cast<int64_t>(result.tensors.size()) - 1;
  }

  Operand t(Value v) { return Operand{Operand::Tensor, tensorOf.lookup(v)}; }
  Operand scratch(int64_t bytes) {
    Operand o{Operand::Scratch};
    o.scratch = scratchTop;
    o.bytes = bytes;
    scratchTop += (bytes + 255) / 256 * 256;
    int64_t &ws = result.poolBytes["workspace"];
    ws = std::max(ws, scratchTop);
    return o;
  }

  /// Workspace that later commands of the program read: every later
  /// command's scratch lies above it.
  Operand keep(int64_t bytes) {
    scratchTop = scratchBase;
    Operand o = scratch(bytes);
    scratchBase = scratchTop;
    return o;
  }

  /// The gradient op (gpt.cross_entropy_grad or gpt.fp8_cross_entropy_grad)
  /// that `ce`'s launch can compute as well (one pass over the logits,
  /// buildCrossEntropyOnePass): the only other reader of the logits, of
  /// the same targets, whose dloss is computed before `ce`. Writing the
  /// gradient early must overwrite nothing that is still read: a bf16
  /// gradient is planned in place of the logits; FP8 codes (half their
  /// size, never in place) need the op right after `ce`, so that no
  /// tensor read in between can share their bytes.
  Operation *onePassGrad(CrossEntropyOp ce, const CrossEntropyShape &s) {
    if (!options.crossEntropyOnePass || !options.fusedCrossEntropy || !options.vectorAccess ||
        !crossEntropyOnePassApplies(s, eltOf(ce.getLogits()), options.blockThreads))
      return nullptr;
    Operation *grad = nullptr;
    for (Operation *user : ce.getLogits().getUsers()) {
      if (user == ce)
        continue;
      if (grad || !llvm::isa<CrossEntropyGradOp, Fp8CrossEntropyGradOp>(user) ||
          user->getOperand(2) != ce.getTargets() ||
          user->getAttr("vocab_size") != ce.getVocabSize() || user->getBlock() != ce->getBlock())
        return nullptr;
      grad = user;
    }
    if (!grad)
      return nullptr;
    if (Operation *def = grad->getOperand(0).getDefiningOp();
        def && (def->getBlock() != ce->getBlock() || !def->isBeforeInBlock(ce)))
      return nullptr;
    if (llvm::isa<Fp8CrossEntropyGradOp>(grad))
      return ce->getNextNode() == grad ? grad : nullptr;
    auto offsets = grad->getAttrOfType<DenseI64ArrayAttr>("gpt.offsets");
    const TensorInfo &logits = result.tensors[tensorOf.lookup(ce.getLogits())];
    if (eltOf(grad->getResult(0)) != eltOf(ce.getLogits()) || !offsets ||
        logits.pool != "activations" || offsets[0] != logits.offset)
      return nullptr;
    return grad;
  }

  /// Adds (or reuses) the kernel `key` and launches it over `threads`.
  void launch(Operation *op, const std::string &key, const std::string &base,
              std::vector<Type> argTypes, std::vector<Operand> args, int64_t threads,
              BodyFn body, int64_t minBlocksPerSM = 0, int64_t sharedBytes = 0) {
    std::string fullKey = key;
    llvm::raw_string_ostream os(fullKey);
    for (Type ty : argTypes)
      os << "|" << ty;
    os << "|t" << threads;
    auto [it, inserted] = kernelByKey.try_emplace(fullKey, result.kernels.size());
    if (inserted)
      result.kernels.push_back({base + "_" + std::to_string(kernelCounter++),
                                std::move(argTypes), std::move(body), minBlocksPerSM,
                                sharedBytes});
    Command c;
    c.kernel = it->second;
    c.threads = threads;
    c.args = std::move(args);
    c.op = op->getName().getStringRef().str();
    program->commands.push_back(std::move(c));
  }

  std::string keyOf(Operation *op) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << op->getName();
    // The plan's offsets are launch arguments, not code: every layer's op
    // shares one kernel, and so does a rematerialized clone.
    for (NamedAttribute attr : op->getDiscardableAttrs())
      if (attr.getName() != "gpt.offsets" && attr.getName() != "gpt.remat")
        os << attr.getName() << attr.getValue();
    for (Type ty : op->getOperandTypes())
      os << ty;
    for (Type ty : op->getResultTypes())
      os << ty;
    if (op->getPropertiesStorage())
      os << op->getPropertiesAsAttribute();
    return s;
  }

  /// Per-row values of a column reduction: for columns col .. col +
  /// width - 1 of `row`, n values each, output by output (width is 1, or 2
  /// with `pairs`: col is then even and a 2-element load aligned). A
  /// callback may also queue stores of its own (an elementwise result
  /// written in the same pass): they are made after the trip's loads.
  using RowValuesFn = std::function<SmallVector<Value>(
      KB &, ValueRange ins, Value row, Value col, int64_t width, SmallVector<KB::Store> &stores)>;
  void reduceColumns(Operation *op, const std::string &key, const std::string &base,
                     std::vector<Type> inTypes, std::vector<Operand> ins,
                     std::vector<Type> outTypes, std::vector<Operand> outs, int64_t rows,
                     int64_t cols, Type ft, ReduceKind kind, RowValuesFn values,
                     bool pairs = false, int64_t chunkRows = kColumnChunkRows);
  void foldColumnPartials(Operation *op, const std::string &key, const std::string &base,
                          Operand partials, Type partialsType, std::vector<Type> outTypes,
                          std::vector<Operand> outs, int64_t parts, int64_t rows, int64_t cols,
                          Type ft, ReduceKind kind);
  /// reduceColumns of a row-major (rows, cols) matrix `in` into `out`.
  void reduceMatrix(Operation *op, const std::string &key, const std::string &base, Type inType,
                    Operand in, Type outType, Operand out, int64_t rows, int64_t cols, Type ft,
                    ReduceKind kind) {
    reduceColumns(op, key, base, {inType}, {in}, {outType}, {out}, rows, cols, ft, kind,
                  [=](KB &k, ValueRange a, Value r, Value col, int64_t width,
                      SmallVector<KB::Store> &) {
                    return k.ldConsecutive(a[0], k.add(k.mul(r, k.idx(cols)), col), width);
                  },
                  /*pairs=*/true);
  }
  void lowerGlobalNorm(GlobalNormOp gn);
  void lowerRandomNormals(ArrayRef<RandomNormalOp> ops);
  void lowerAdamWMulti(AdamWMultiOp multi);
  std::pair<Operand, int64_t> foldPartials(Operation *op, Operand values, int64_t count,
                                           const std::string &name);
  void lowerAdamWGroup(AdamWMultiOp multi, ArrayRef<size_t> which);

  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerElementwise(Operation *op);
  /// Whether an elementwise kernel of u elements per thread over
  /// `tensors` takes them as consecutive chunks (ElementChunk): vector
  /// access, and every tensor aligned for its vectors.
  bool vectorChunks(ArrayRef<Value> tensors, int64_t u) {
    if (!options.vectorAccess || u == 1)
      return false;
    for (Value v : tensors) {
      const TensorInfo &info = result.tensors[tensorOf.lookup(v)];
      // Whole bytes only: a vector of i1 would load packed bits.
      int64_t bits = info.elementType.getIntOrFloatBitWidth();
      if (bits % 8)
        return false;
      int64_t bytes = std::min<int64_t>(16, u * bits / 8);
      if (info.offset % bytes)
        return false;
    }
    return true;
  }
  LogicalResult lowerFusion(FusionOp op);
  LogicalResult lowerLayerNormGrad(Operation *op, Value dy, Value x, Value w, Value dx, Value dw,
                                   Value db, Value residual, Value narrow, double eps);
  LogicalResult lowerMatmul(Operation *op, Value a, Value bm, bool ta, bool tb, Value bias,
                            GemmEpilogue epilogue = GemmEpilogue::None, Value aux = Value());
  LogicalResult lowerFp8Scale(Fp8ScaleOp op);
  LogicalResult lowerFp8DelayedScales(Fp8DelayedScalesOp op);
  LogicalResult lowerFp8Quantize(Fp8QuantizeOp op);
  LogicalResult lowerFp8CastTranspose(Fp8CastTransposeOp op);
  LogicalResult lowerFp8Transpose(Fp8TransposeOp op);
  /// A gpt.cross_entropy_grad or gpt.fp8_cross_entropy_grad as one rows
  /// launch (buildCrossEntropyBackwardRows): from the forward's saved
  /// log-sum-exp when it read these logits, else computing it first.
  void launchCrossEntropyBackwardRows(Operation *grad, const std::string &name);
  /// How `grad`'s kernel stores the logits' gradient (GradStore).
  GradStore gradStore(Operation *grad) const {
    return {llvm::isa<Fp8CrossEntropyGradOp>(grad), options.cudaArch >= 89};
  }
  /// With `roundedTo` the FP8 casts round each loaded element to it first
  /// (gpt.fp8_cast_transpose's rounded_to).
  void quantize(Operation *op, Value x, Value scale, Value history, Value recorded, Value result,
                Fp8Format format, bool gelu, Type roundedTo = Type());
  void castTranspose(Operation *op, Value x, Value scale, Value history, Value recorded,
                     Value rowMajor, Value transposed, Fp8Format format, bool gelu,
                     Value pre = Value(), Value sum = Value(), Type roundedTo = Type());
  LogicalResult lowerFp8CastTransposeSum(Fp8CastTransposeSumOp op);
  /// A copy of `from` into `to` (the op's result that updates it) unless the
  /// plan put them in one tensor.
  void copyUnlessInPlace(Operation *op, Value from, Value to);
  /// A recording quantization's kernel argument: `recorded` as i32 (for
  /// recordAmax), after a copy of `history` into it unless in place.
  std::pair<Type, Operand> recordedArg(Operation *op, Value history, Value recorded);
  LogicalResult mapResults(Operation *op);
  LogicalResult lowerAllReduce(AllReduceOp op);
  /// ZeRO-1's reduce-scatter and all-gather: like an all-reduce, on the
  /// communication stream between two events.
  void lowerShardCollective(Operation *op, Command::Kind kind, ValueRange inputs,
                            ValueRange results);
  void waitForAll();
  void waitFor(ValueRange operands);
};

/// The compute stream waits for the collectives whose results `operands`
/// read, once per event.
void Lowerer::waitFor(ValueRange operands) {
  for (Value v : operands) {
    auto it = pending.find(v);
    if (it == pending.end())
      continue;
    unsigned event = it->second;
    Command wait{Command::Wait, 0, 0, 0, {}, "gpt.all_reduce", kComputeStream, event};
    program->commands.push_back(wait);
    llvm::SmallVector<Value> done;
    for (auto &[value, e] : pending)
      if (e == event)
        done.push_back(value);
    for (Value d : done)
      pending.erase(d);
  }
}

/// The compute stream waits for every collective not yet waited for, in
/// the order their events were recorded (not the map's, which follows
/// pointer values and changed from one compile to the next).
void Lowerer::waitForAll() {
  llvm::SmallVector<std::pair<unsigned, Value>> events;
  for (auto &entry : pending)
    events.push_back({entry.second, entry.first});
  llvm::sort(events, [](const auto &a, const auto &b) { return a.first < b.first; });
  llvm::SmallVector<Value> values;
  for (auto &entry : events)
    values.push_back(entry.second);
  waitFor(values);
}

/// Copies operands that are not reduced in place into their results, then
/// record (compute) -> wait + all-reduce + record (comm).
LogicalResult Lowerer::lowerAllReduce(AllReduceOp op) {
  std::string name = op->getName().getStringRef().str();
  Command reduce{Command::AllReduce, 0, 0, 0, {}, name, kCommStream};
  switch (op.getKind()) {
  case ReduceKind::Sum:
    reduce.reduce = Command::Sum;
    break;
  case ReduceKind::Mean:
    reduce.reduce = Command::Mean;
    break;
  case ReduceKind::Max:
    reduce.reduce = Command::Max;
    break;
  }
  for (auto [in, r] : llvm::zip(op.getInputs(), op.getResults())) {
    copyUnlessInPlace(op, in, r);
    reduce.args.push_back(t(r));
  }
  unsigned ready = result.numEvents++, done = result.numEvents++;
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kComputeStream, ready});
  program->commands.push_back({Command::Wait, 0, 0, 0, {}, name, kCommStream, ready});
  program->commands.push_back(std::move(reduce));
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kCommStream, done});
  for (Value r : op.getResults())
    pending[r] = done;
  result.numStreams = 2;
  return success();
}

void Lowerer::lowerShardCollective(Operation *op, Command::Kind kind, ValueRange inputs,
                                   ValueRange results) {
  std::string name = op->getName().getStringRef().str();
  Command c{kind, 0, 0, 0, {}, name, kCommStream};
  c.reduce = Command::Mean;
  for (Value in : inputs)
    c.args.push_back(t(in));
  for (Value r : results)
    c.args.push_back(t(r));
  unsigned ready = result.numEvents++, done = result.numEvents++;
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kComputeStream, ready});
  program->commands.push_back({Command::Wait, 0, 0, 0, {}, name, kCommStream, ready});
  program->commands.push_back(std::move(c));
  program->commands.push_back({Command::Record, 0, 0, 0, {}, name, kCommStream, done});
  for (Value r : results)
    pending[r] = done;
  result.numStreams = 2;
}

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
void Lowerer::reduceColumns(Operation *op, const std::string &key, const std::string &base,
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
void Lowerer::foldColumnPartials(Operation *op, const std::string &key, const std::string &base,
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

/// Members of a batched kernel (their pointers are its parameters: 128 x 8
/// bytes stays far below CUDA's 4 KiB).
constexpr int64_t kMembersPerKernel = 128;
/// Elements one thread squares and sums in the first stage of a global
/// norm, elements per load group and groups it loads at once, partials each
/// folding thread sums, and the most the last thread sums.
constexpr int64_t kNormChunk = 1024, kNormGroup = 8, kNormUnroll = 4, kNormFoldWidth = 64,
                  kNormFolders = 256;
/// Elements one thread of the batched random-normal kernels draws.
constexpr int64_t kRandomChunk = 16;

/// Sums `count` f32 values at `values` down to at most kNormFolders, in a
/// fixed order: kernels `name` whose threads each sum kNormFoldWidth of
/// them, strided (coalesced); returns what is left and how many.
std::pair<Operand, int64_t> Lowerer::foldPartials(Operation *op, Operand values, int64_t count,
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
void Lowerer::lowerGlobalNorm(GlobalNormOp gn) {
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

/// A run of gpt.random_normal ops of one seed (@init's parameters) in
/// batched launches of up to kMembersPerKernel outputs: thread j of output
/// i draws its elements j, j + pieces_i, ... (coalesced, kRandomChunk of
/// them). Element e of stream s is Box-Muller of two SplitMix64 draws keyed
/// by (seed, s) at 2e and 2e + 1, so the values do not depend on the
/// batching. (A kernel per op made @init 194 kernels at 1.5B, 58% of the
/// PTX.)
void Lowerer::lowerRandomNormals(ArrayRef<RandomNormalOp> ops) {
  Type i64 = IntegerType::get(ctx, 64), dt = Float64Type::get(ctx), f32 = Float32Type::get(ctx);
  Value seedV = RandomNormalOp(ops.front()).getSeed();
  for (size_t g0 = 0; g0 < ops.size(); g0 += kMembersPerKernel) {
    size_t g1 = std::min(ops.size(), g0 + kMembersPerKernel);
    std::vector<Type> types = {flat(seedV)};
    std::vector<Operand> args = {t(seedV)};
    std::string key = "random_normal";
    SmallVector<int64_t> starts, sizes, pieces, keys;
    SmallVector<double> stds;
    SmallVector<Type> classes;
    SmallVector<int64_t> classOf;
    int64_t threads = 0;
    for (size_t i = g0; i < g1; ++i) {
      RandomNormalOp rn = ops[i];
      Value out = rn.getResult();
      types.push_back(flat(out));
      args.push_back(t(out));
      starts.push_back(threads);
      sizes.push_back(numel(out));
      pieces.push_back((numel(out) + kRandomChunk - 1) / kRandomChunk);
      threads += pieces.back();
      keys.push_back(static_cast<int64_t>(static_cast<uint64_t>(rn.getStream()) *
                                          0xD1B54A32D192ED03ull));
      stds.push_back(rn.getStd().convertToDouble());
      classOf.push_back(classIndex(classes, eltOf(out)));
      // The scale's bits: the kernel bakes in the exact double.
      llvm::raw_string_ostream(key) << "," << rn.getStream() << ":"
                                    << llvm::format_hex(llvm::bit_cast<uint64_t>(stds.back()), 18);
    }
    int64_t count = static_cast<int64_t>(g1 - g0);
    launch(RandomNormalOp(ops[g0]), key, "random_normal", types, args, threads,
           [=](OpBuilder &b, Location loc, Value p, ValueRange a) {
             KB k{b, loc};
             Value seed = arith::ExtSIOp::create(b, loc, i64, k.ld(a[0], k.idx(0)));
             Value seedKey = splitmix(k, seed);
             Type index = b.getIndexType();
             dispatchMembers(
                 k, memberOf(k, p, starts), a.drop_front().take_front(count), classes, classOf,
                 {index, index, index, i64, dt},
                 [&](int64_t i) {
                   return SmallVector<Value>{k.idx(starts[i]), k.idx(sizes[i]), k.idx(pieces[i]),
                                             k.i64(keys[i]), k.f(stds[i], dt)};
                 },
                 [&](int64_t c, Value mem, ValueRange v) {
                   Value key = arith::XOrIOp::create(b, loc, seedKey, splitmix(k, v[3]));
                   k.loop(k.sub(p, v[0]), v[1], v[2], {}, [&](Value e, ValueRange) {
                     Value ii = arith::IndexCastUIOp::create(b, loc, i64, e);
                     Value two = k.mul(ii, k.i64(2));
                     Value x = splitmix(k, k.add(key, two));
                     Value x2 = splitmix(k, k.add(key, k.add(two, k.i64(1))));
                     auto unit = [&](Value r) {
                       Value top = arith::ShRUIOp::create(b, loc, r, k.i64(11));
                       return arith::UIToFPOp::create(b, loc, dt, top).getResult();
                     };
                     Value u1 = k.mul(k.add(unit(x), k.f(1, dt)), k.f(0x1.0p-53, dt));
                     Value u2 = k.mul(unit(x2), k.f(0x1.0p-53, dt));
                     Value z = k.mul(k.sqrt(k.mul(k.f(-2, dt), k.log(u1))),
                                     k.cos(k.mul(k.f(2 * M_PI, dt), u2)));
                     // 16-bit outputs through f32: the Host target has no
                     // f64 -> bf16 conversion (LLVM calls a libgcc helper
                     // that is not there).
                     Value y = k.mul(z, v[4]);
                     if (classes[c].getIntOrFloatBitWidth() < 32)
                       y = k.convert(y, f32);
                     k.st(k.convert(y, classes[c]), mem, e);
                     return SmallVector<Value>{};
                   });
                 });
           });
  }
}

/// One launch per gradient element type (a span has one), over all its
/// parameters when each of param, grad, m, v and the results lies in one
/// pool (always, for a planned train step); otherwise one launch per
/// parameter with the same body.
void Lowerer::lowerAdamWMulti(AdamWMultiOp multi) {
  llvm::MapVector<Type, SmallVector<size_t>> byGradType;
  for (auto [i, g] : llvm::enumerate(multi.getGrads()))
    byGradType[getElementTypeOrSelf(g.getType())].push_back(i);
  for (auto &[type, which] : byGradType)
    lowerAdamWGroup(multi, which);
}

void Lowerer::lowerAdamWGroup(AdamWMultiOp multi, ArrayRef<size_t> which) {
  Operation *op = multi.getOperation();
  size_t n = which.size();
  std::array<SmallVector<int64_t>, kNumAdamWArrays> members;
  for (size_t i : which) {
    members[kParam].push_back(tensorOf.lookup(multi.getParams()[i]));
    members[kGrad].push_back(tensorOf.lookup(multi.getGrads()[i]));
    members[kM].push_back(tensorOf.lookup(multi.getMs()[i]));
    members[kV].push_back(tensorOf.lookup(multi.getVs()[i]));
    members[kNewParam].push_back(tensorOf.lookup(multi.getNewParams()[i]));
    members[kNewM].push_back(tensorOf.lookup(multi.getNewMs()[i]));
    members[kNewV].push_back(tensorOf.lookup(multi.getNewVs()[i]));
  }
  static const char *names[] = {"params", "grads", "m", "v", "new_params", "new_m", "new_v"};
  AdamWLaunch all{multi.getBeta1().convertToDouble(), multi.getBeta2().convertToDouble(),
                  multi.getEpsilon().convertToDouble(), {}, options.vectorAccess};
  for (int a = 0; a < kNumAdamWArrays; ++a)
    all.elementBytes[a] = result.tensors[members[a][0]].elementType.getIntOrFloatBitWidth() / 8;
  std::vector<TensorInfo> spans;
  std::array<std::vector<int64_t>, kNumAdamWArrays> offsets;
  for (int a = 0; a < kNumAdamWArrays; ++a)
    if (auto s = spanOf(result.tensors, members[a], std::string("adamw.") + names[a], offsets[a]))
      spans.push_back(*s);
  std::vector<Operand> scalars = {t(multi.getLr()), t(multi.getStep()), t(multi.getGradScale())};
  std::vector<Type> scalarTypes = {flat(multi.getLr()), flat(multi.getStep()),
                                   flat(multi.getGradScale())};
  auto emit = [&](const AdamWLaunch &l, std::vector<Type> types, std::vector<Operand> args) {
    types.insert(types.end(), scalarTypes.begin(), scalarTypes.end());
    args.insert(args.end(), scalars.begin(), scalars.end());
    launch(op, keyOf(op) + l.key(), "adamw_multi", types, args, l.threads(),
           [l](OpBuilder &b, Location loc, Value idx, ValueRange a) {
             buildAdamWMulti(b, loc, idx, a, l);
           });
  };
  auto segment = [&](size_t i) {
    AdamWSegment s;
    s.size = numel(multi.getParams()[i]);
    s.weightDecay = multi.getWeightDecays()[i];
    return s;
  };
  if (spans.size() == kNumAdamWArrays) {
    // A span covers the bytes between its members too, which may hold a
    // value a collective still writes (the loss, reduced for the log);
    // the kernel never touches them, but the schedule check cannot know.
    waitForAll();
    // The chunked layout's 16-byte vectors need 16-byte aligned spans
    // (gpt-plan-memory aligns to 256 bytes unless told otherwise).
    for (const TensorInfo &s : spans)
      all.vectorAccess &= s.offset % 16 == 0;
    std::vector<Type> types;
    std::vector<Operand> args;
    for (const TensorInfo &s : spans) {
      types.push_back(flatOf(s.shape[0], s.elementType));
      args.push_back(Operand{Operand::Tensor, addTensor(s)});
    }
    for (size_t j = 0; j < n; ++j) {
      AdamWSegment s = segment(which[j]);
      for (int a = 0; a < kNumAdamWArrays; ++a)
        s.offsets[a] = offsets[a][j];
      all.segments.push_back(s);
    }
    emit(all, types, args);
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    AdamWLaunch one = all;
    one.segments = {segment(which[j])};
    std::vector<Type> types;
    std::vector<Operand> args;
    for (int a = 0; a < kNumAdamWArrays; ++a) {
      const TensorInfo &info = result.tensors[members[a][j]];
      one.elementBytes[a] = info.elementType.getIntOrFloatBitWidth() / 8;
      one.vectorAccess &= info.offset % 16 == 0;
      types.push_back(flatOf(numel(multi.getParams()[which[j]]), info.elementType));
      args.push_back(Operand{Operand::Tensor, members[a][j]});
    }
    emit(one, types, args);
  }
}

LogicalResult Lowerer::mapResults(Operation *op) {
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("gpt.offsets");
  if (!offsets)
    return op->emitOpError("codegen: no gpt.offsets (run gpt-plan-memory)");
  // Views live in their source's bytes.
  if (llvm::isa<ReshapeOp>(op) ||
      (llvm::isa<SliceOp>(op) && llvm::cast<SliceOp>(op).getDim() == 0)) {
    Value src = op->getOperand(0);
    TensorInfo info = result.tensors[tensorOf.lookup(src)];
    if (auto s = llvm::dyn_cast<SliceOp>(op))
      info.offset += s.getStart() * bytesOf(src.getType()) / rtt(src).getDimSize(0);
    auto shape = rtt(op->getResult(0)).getShape();
    info.shape.assign(shape.begin(), shape.end());
    info.bytes = bytesOf(op->getResult(0).getType());
    info.name += ".view";
    tensorOf[op->getResult(0)] = addTensor(info);
    if (auto it = pending.find(src); it != pending.end())
      pending[op->getResult(0)] = it->second;
    return success();
  }
  // A result that gpt-plan-memory put in its operand's bytes (the same
  // offset, or -1 where the operand is an argument's) is that tensor.
  auto mapInPlace = [&](Value operand, Value r) {
    const TensorInfo &src = result.tensors[tensorOf.lookup(operand)];
    int64_t off = offsets[llvm::cast<OpResult>(r).getResultNumber()];
    if (off < 0 || (src.pool == "activations" && src.offset == off))
      tensorOf[r] = tensorOf.lookup(operand);
  };
  // An all-reduce's results, and an FP8 amax history's next value.
  if (auto ar = llvm::dyn_cast<AllReduceOp>(op))
    for (auto [in, r] : llvm::zip(ar.getInputs(), ar.getResults()))
      mapInPlace(in, r);
  if (auto gather = llvm::dyn_cast<AllGatherOp>(op))
    for (auto [init, r] : llvm::zip(gather.getInits(), gather.getResults()))
      mapInPlace(init, r);
  if (auto [history, next] = getFp8History(op); history)
    mapInPlace(history, next);
  if (auto scales = llvm::dyn_cast<Fp8DelayedScalesOp>(op))
    for (auto [i, h] : llvm::enumerate(scales.getHistories()))
      mapInPlace(h, scales.getShifted(i));
  if (auto mm = llvm::dyn_cast<ScaledMatmulOp>(op); mm && mm.getAccumulate())
    mapInPlace(mm.getAccumulate(), mm.getResult());
  if (auto adam = llvm::dyn_cast<AdamWOp>(op); adam && offsets[0] < 0) {
    // In place: the new parameter and moments are the arguments' tensors.
    // A named vector: a braced ValueRange in the loop header would dangle.
    SmallVector<Value, 3> sources = {adam.getParam(), adam.getM(), adam.getV()};
    for (auto [r, src] : llvm::zip(adam->getResults(), sources))
      tensorOf[r] = tensorOf.lookup(src);
    return success();
  }
  if (auto multi = llvm::dyn_cast<AdamWMultiOp>(op)) {
    // Results are new params, ms, vs; -1: in place in that argument.
    size_t n = multi.getParams().size();
    for (auto [j, r] : llvm::enumerate(op->getResults())) {
      if (offsets[j] >= 0)
        continue;
      OperandRange sources = j < n ? multi.getParams() : j < 2 * n ? multi.getMs() : multi.getVs();
      tensorOf[r] = tensorOf.lookup(sources[j % n]);
    }
  }
  for (auto [r, off] : llvm::zip(op->getResults(), offsets.asArrayRef())) {
    if (tensorOf.count(r))
      continue; // in place, mapped above
    if (off < 0)
      return op->emitOpError("codegen: result planned inside an argument");
    auto shape = rtt(r).getShape();
    tensorOf[r] = addTensor({"%" + std::to_string(result.tensors.size()), "activations",
                             "activations", eltOf(r),
                             std::vector<int64_t>(shape.begin(), shape.end()), off,
                             bytesOf(r.getType())});
  }
  return success();
}

/// The largest head dimension the attention kernels take (GPT-2's is 64).
constexpr int64_t kMaxHeadDim = 256;

/// The kernels load and store f32, bf16 and f16 (computing in f32) and i32
/// token ids, and unroll attention's head dimension (at most kMaxHeadDim).
/// The dialect accepts more (the reference interpreter runs any float, f64
/// parameters over an f32 input, any head dimension); refuse those here, at
/// the op that holds one, before they become ill-typed or unbounded kernel
/// code.
static LogicalResult checkCodegenSupports(func::FuncOp fn) {
  auto supported = [](Type t) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(t);
    if (!tensor)
      return true;
    Type e = tensor.getElementType();
    return e.isF32() || e.isBF16() || e.isF16() || e.isInteger(32);
  };
  auto refuse = [](Operation *at, Type t, llvm::StringRef what) {
    return at->emitError("codegen: ")
           << what << " is " << t
           << "; kernels take f32, bf16 and f16 tensors and i32 token ids";
  };
  // FP8 tensors pass from the ops that make them (the quantizations, the
  // loss gradient's codes) through views and byte transposes to a
  // gpt.scaled_matmul only.
  auto fp8Use = [](Operation *op, Value v) {
    if (!llvm::isa<Float8E4M3FNType, Float8E5M2Type>(rtt(v).getElementType()))
      return false;
    if (llvm::isa<ScaledMatmulOp, ScaledMatmulGeluFp8Op, Fp8TransposeOp, ReshapeOp>(op))
      return true;
    return llvm::isa<Fp8QuantizeOp, Fp8CastTransposeOp, Fp8CastTransposeSumOp,
                     Fp8CrossEntropyGradOp, AddLayerNormFp8Op>(op) &&
           v.getDefiningOp() == op;
  };
  // The signature first: it names the parameter (folded constants in @init
  // have lost their locations).
  auto named = [&](llvm::StringRef kind, unsigned i, DictionaryAttr attrs) {
    std::string what = ("@" + fn.getName() + " " + kind + " #" + llvm::Twine(i)).str();
    for (llvm::StringRef key : {llvm::StringRef(kParamAttrName), llvm::StringRef("gpt.state"),
                                llvm::StringRef(kInputAttrName), llvm::StringRef("gpt.output")})
      if (auto name = attrs ? attrs.getAs<StringAttr>(key) : StringAttr())
        return what + " ('" + name.str() + "')";
    return what;
  };
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes()))
    if (!supported(t))
      return refuse(fn, t, named("argument", i, fn.getArgAttrDict(i)));
  for (auto [i, t] : llvm::enumerate(fn.getResultTypes()))
    if (!supported(t))
      return refuse(fn, t, named("result", i, fn.getResultAttrDict(i)));
  WalkResult walk = fn.walk([&](Operation *op) {
    if (llvm::isa<Fp8MatmulOp>(op)) {
      op->emitError("codegen: gpt.fp8_matmul needs gpt-lower-fp8 first (gptc's memory-plan "
                    "phase runs it under --precision=fp8)");
      return WalkResult::interrupt();
    }
    // The attention kernels unroll the head dimension into registers.
    Value qkv;
    Attribute heads;
    if (auto a = llvm::dyn_cast<CausalAttentionOp>(op))
      qkv = a.getQkv(), heads = a.getNumHeads();
    else if (auto a = llvm::dyn_cast<CausalAttentionGradOp>(op))
      qkv = a.getQkv(), heads = a.getNumHeads();
    else if (auto a = llvm::dyn_cast<CausalAttentionGradSumOp>(op))
      qkv = a.getQkv(), heads = a.getNumHeads();
    if (qkv) {
      std::optional<int64_t> h = getConfigInt(heads);
      int64_t d = h && *h > 0 ? rtt(qkv).getShape().back() / 3 / *h : 0;
      if (d > kMaxHeadDim) {
        op->emitError("codegen: head dimension ")
            << d << " is over " << kMaxHeadDim
            << ", the most the attention kernels keep in registers";
        return WalkResult::interrupt();
      }
    }
    for (OpOperand &use : op->getOpOperands())
      if (!supported(use.get().getType()) && !fp8Use(op, use.get())) {
        (void)refuse(op, use.get().getType(),
                     ("'" + op->getName().getStringRef() + "' operand #" +
                      llvm::Twine(use.getOperandNumber())).str());
        return WalkResult::interrupt();
      }
    for (OpResult r : op->getResults())
      if (!supported(r.getType()) && !fp8Use(op, r)) {
        (void)refuse(op, r.getType(), ("'" + op->getName().getStringRef() + "' result #" +
                                       llvm::Twine(r.getResultNumber())).str());
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult Lowerer::lowerProgram(func::FuncOp fn) {
  result.programs.push_back(ProgramInfo{fn.getName().str(), {}, {}, {}, {}});
  program = &result.programs.back();
  if (auto live = fn->getAttrOfType<StringAttr>("gpt.live_at_peak"))
    program->liveAtPeak = live.str();
  pending.clear();
  scratchBase = 0;
  savedLse.clear();
  auto plan = fn->getAttrOfType<DictionaryAttr>("gpt.memory_plan");
  if (!plan)
    return fn.emitError("codegen: @") << fn.getName() << " has no memory plan";
  if (failed(checkCodegenSupports(fn)))
    return failure();
  for (NamedAttribute entry : plan) {
    int64_t &pool = result.poolBytes[entry.getName().str()];
    pool = std::max(pool, llvm::cast<IntegerAttr>(entry.getValue()).getInt());
  }
  // Arguments: parameters and state are shared by name across programs.
  for (BlockArgument arg : fn.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttrName);
    std::string role = "params";
    if (!name) {
      name = fn.getArgAttrOfType<StringAttr>(i, "gpt.state");
      role = "state";
    }
    if (!name) {
      name = fn.getArgAttrOfType<StringAttr>(i, kInputAttrName);
      role = "inputs";
    }
    auto pool = fn.getArgAttrOfType<StringAttr>(i, "gpt.pool");
    auto offset = fn.getArgAttrOfType<IntegerAttr>(i, "gpt.offset");
    if (!name || !pool || !offset)
      return fn.emitError("codegen: argument ") << i << " lacks a name or a planned offset";
    auto shape = rtt(arg).getShape();
    TensorInfo info{name.str(), role, pool.str(), eltOf(arg),
                    std::vector<int64_t>(shape.begin(), shape.end()), offset.getInt(),
                    bytesOf(arg.getType())};
    if (auto full = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, "gpt.shard_of")) {
      info.fullShape.assign(full.asArrayRef().begin(), full.asArrayRef().end());
      int64_t numel = 1;
      for (int64_t d : info.fullShape)
        numel *= d;
      info.shards = numel / rtt(arg).getNumElements();
    }
    int64_t index;
    if (role != "inputs") {
      auto [it, inserted] = globals.try_emplace(info.name, result.tensors.size());
      if (inserted)
        addTensor(info);
      else if (result.tensors[it->second].bytes != info.bytes)
        return fn.emitError("codegen: '") << info.name << "' has different sizes in programs";
      index = it->second;
    } else {
      index = addTensor(info);
    }
    tensorOf[arg] = index;
    program->inputs.push_back(index);
  }
  SmallVector<RandomNormalOp> normals;
  for (Operation &op : fn.getBody().front()) {
    scratchTop = scratchBase;
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      waitFor(ret.getOperands());
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        int64_t src = tensorOf.lookup(v);
        auto param = fn.getResultAttrOfType<StringAttr>(i, kParamAttrName);
        auto state = fn.getResultAttrOfType<StringAttr>(i, "gpt.state");
        auto out = fn.getResultAttrOfType<StringAttr>(i, "gpt.output");
        if (param || state) {
          std::string name = (param ? param : state).str();
          auto [it, inserted] = globals.try_emplace(name, result.tensors.size());
          if (inserted) {
            TensorInfo info = result.tensors[src];
            info.name = name;
            info.role = info.pool = param ? "params" : "state";
            info.offset = result.poolBytes[info.pool];
            result.poolBytes[info.pool] += (info.bytes + 255) / 256 * 256;
            addTensor(info);
          }
          if (it->second != src)
            program->commands.push_back({Command::Copy, 0, 0, 0,
                                         {Operand{Operand::Tensor, src},
                                          Operand{Operand::Tensor, it->second}},
                                         "func.return"});
          program->outputs.push_back(it->second);
        } else {
          if (out)
            result.tensors[src].name = out.str();
          result.tensors[src].role = "outputs";
          program->outputs.push_back(src);
        }
      }
      return success();
    }
    if (failed(mapResults(&op)))
      return failure();
    if (auto ar = llvm::dyn_cast<AllReduceOp>(op)) {
      if (failed(lowerAllReduce(ar)))
        return failure();
      continue;
    }
    if (auto rs = llvm::dyn_cast<ReduceScatterOp>(op)) {
      waitFor(rs.getInputs());
      lowerShardCollective(&op, Command::ReduceScatter, rs.getInputs(), rs.getResults());
      continue;
    }
    if (auto ag = llvm::dyn_cast<AllGatherOp>(op)) {
      waitFor(ag.getInputs());
      lowerShardCollective(&op, Command::AllGather, ag.getInputs(), ag.getResults());
      continue;
    }
    if (auto slice = llvm::dyn_cast<RankSliceOp>(op)) {
      waitFor(op.getOperands());
      program->commands.push_back({Command::RankSlice, 0, 0, 0,
                                   {t(slice.getInput()), t(slice.getResult())},
                                   op.getName().getStringRef().str()});
      continue;
    }
    // A run of random_normal ops of one seed: batched launches at its end.
    // One launch writes its outputs concurrently, so a result placed over
    // an earlier one of the run (possible for a draw nobody reads) starts
    // a new run, keeping the later draw last.
    if (auto rn = llvm::dyn_cast<RandomNormalOp>(op)) {
      waitFor(op.getOperands());
      auto flush = [&] {
        lowerRandomNormals(normals);
        normals.clear();
      };
      const TensorInfo &out = result.tensors[tensorOf.lookup(rn.getResult())];
      if (llvm::any_of(normals, [&](RandomNormalOp other) {
            const TensorInfo &o = result.tensors[tensorOf.lookup(other.getResult())];
            return o.pool == out.pool && o.offset < out.offset + out.bytes &&
                   out.offset < o.offset + o.bytes;
          }))
        flush();
      normals.push_back(rn);
      auto next = llvm::dyn_cast_or_null<RandomNormalOp>(op.getNextNode());
      if (!next || next.getSeed() != rn.getSeed())
        flush();
      continue;
    }
    // Views read nothing; the op that reads through them waits.
    if (!llvm::isa<ReshapeOp>(op) && !(llvm::isa<SliceOp>(op) && llvm::cast<SliceOp>(op).getDim() == 0))
      waitFor(op.getOperands());
    if (failed(lowerOp(&op)))
      return failure();
  }
  return success();
}

LogicalResult Lowerer::lowerMatmul(Operation *op, Value a, Value bm, bool ta, bool tb,
                                   Value bias, GemmEpilogue epilogue, Value aux) {
  // D: the product, or the GELU's codes of a gpt.scaled_matmul_gelu_fp8
  // (whose product, rounded, is the aux `pre`).
  auto geluFp8 = llvm::dyn_cast<ScaledMatmulGeluFp8Op>(op);
  Value d = geluFp8 ? Value(geluFp8.getResult()) : op->getResult(0);
  auto as = rtt(a).getShape(), bs = rtt(bm).getShape();
  auto ys = rtt(d).getShape();
  size_t r = ys.size();
  int64_t m = ys[r - 2], n = ys[r - 1], k = ta ? as[r - 2] : as[r - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i)
    batch *= ys[i];
  bool shared = bs.size() == 2 && as.size() > 2;
  // Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T: the
  // cuBLASLt "A" is our rhs and its "B" our lhs.
  GemmDesc g;
  g.transa = tb;
  g.transb = ta;
  g.lda = tb ? k : n;
  g.ldb = ta ? m : k;
  g.ldc = n;
  g.m = n;
  g.n = m;
  g.k = k;
  if (bias && epilogue == GemmEpilogue::None)
    epilogue = GemmEpilogue::Bias;
  g.epilogue = epilogue;
  if (shared && !ta) {
    g.n = batch * m; // the batch folds into the rows of the lhs
  } else if (batch > 1) {
    g.batch = batch;
    g.strideA = shared ? 0 : k * n;
    g.strideB = m * k;
    g.strideC = m * n;
  }
  Type in = eltOf(a), out = geluFp8 ? eltOf(aux) : eltOf(d);
  auto scaled = llvm::dyn_cast<ScaledMatmulOp>(op);
  if (scaled || geluFp8) {
    // cuBLASLt's FP8 kernels: TN only; M (its n) is free, N and K (its m
    // and k, and so the leading dimensions) multiples of 16.
    if (ta || !tb)
      return op->emitOpError("codegen: FP8 GEMMs take an untransposed lhs and a transposed "
                             "rhs (gpt-lower-fp8 quantizes operands in that layout)");
    if (options.cudaArch && options.cudaArch < 89)
      return op->emitOpError("codegen: FP8 GEMMs need sm_89 or later, the chip is sm_")
             << options.cudaArch;
    if (n % 16 || k % 16)
      return op->emitOpError("codegen: FP8 GEMMs need N and K multiples of 16 (cuBLASLt's FP8 "
                             "kernels), got M x N x K = ")
             << batch * m << " x " << n << " x " << k;
    if (!(out.isBF16() || out.isF32()))
      return op->emitOpError("codegen: FP8 GEMMs give bf16 or f32, not ") << out;
    if (bias && out.isF32())
      return op->emitOpError("codegen: cuBLASLt's FP8 GEMMs add no bias into an f32 result");
    if (geluFp8 && !out.isBF16())
      return op->emitOpError("codegen: an FP8 GEMM that writes FP8 codes keeps a bf16 "
                             "pre-activation, not ")
             << out;
    g.fastAccum = scaled ? scaled.getFastAccum() : geluFp8.getFastAccum();
  } else if (eltOf(bm) != in || !(in.isF32() || in.isBF16() || in.isF16()) ||
      !(out == in || out.isF32()))
    return op->emitOpError("codegen: GEMMs take f32, bf16 or f16 operands of one type and "
                           "give that type or f32, not ")
           << in << " x " << eltOf(bm) << " -> " << out;
  // The epilogues other than Bias act on one GEMM's D: no batches, and the
  // aux matrix and bias gradient in D's element type.
  if (epilogue != GemmEpilogue::None && epilogue != GemmEpilogue::Bias &&
      (g.batch != 1 || (aux && eltOf(aux) != out) || (bias && eltOf(bias) != out)))
    return op->emitOpError("codegen: a GEMM epilogue needs one unbatched GEMM whose aux and "
                           "bias tensors have the result's element type");
  g.aType = eltOf(bm);
  g.bType = in;
  g.cType = out;
  if (geluFp8) {
    g.dType = eltOf(d);
    // cuBLASLt sets amax_D (the history's first element, 0 in a shifted
    // history) in the recorded copy of the history.
    copyUnlessInPlace(op, geluFp8.getHistory(), geluFp8.getRecorded());
  }
  Value acc = scaled ? scaled.getAccumulate() : Value();
  if (acc) {
    // beta = 1 reads C, which is D: the accumulator's bytes, or a copy of
    // them where the plan could not hand them over.
    g.beta = 1;
    copyUnlessInPlace(op, acc, op->getResult(0));
  }
  result.gemms.push_back(g);
  Command c;
  c.kind = Command::Gemm;
  c.gemm = result.gemms.size() - 1;
  c.args = {t(bm), t(a), t(d)};
  if (bias)
    c.args.push_back(t(bias));
  if (aux)
    c.args.push_back(t(aux));
  if (scaled) { // cuBLASLt's A is our rhs
    c.args.push_back(t(scaled.getRhsScale()));
    c.args.push_back(t(scaled.getLhsScale()));
  }
  if (geluFp8) {
    c.args.push_back(t(geluFp8.getRhsScale()));
    c.args.push_back(t(geluFp8.getLhsScale()));
    c.args.push_back(t(geluFp8.getScale()));
    c.args.push_back(t(geluFp8.getRecorded()));
  }
  c.op = op->getName().getStringRef().str();
  program->commands.push_back(std::move(c));
  return success();
}

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
/// (gpt-fuse-fp8-cast): with `pre` (loaded, widened) the values are
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

/// Raises element 0 of the i32 view of an FP8 amax history to `amax`
/// (>= 0, so its bits order as unsigned integers do, NaN above all).
void recordAmax(KB &k, Value recorded, Value amax) {
  Value bits = arith::BitcastOp::create(k.b, k.loc, k.b.getI32Type(), amax);
  memref::AtomicRMWOp::create(k.b, k.loc, arith::AtomicRMWKind::maxu, bits, recorded,
                              ValueRange{k.idx(0)});
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

/// gpt.fp8_scale: stages of maxima of |x| until at most kAmaxLast partials
/// are left; one row folds those into amax and stores s = max_finite / amax
/// (1 if amax is 0 or not finite) and 1 / s. Maxima are exact, so the
/// order of folding does not change the bits. On CUDA the first stage
/// reads 16-byte vectors and folds each block's maxima with shuffles;
/// otherwise each stage's threads fold kAmaxFold strided values. With a
/// history, every kernel reads it first: where its largest amax is usable
/// the stages do nothing and the scale is taken from it, and the scale
/// kernel also stores the history shifted on.
LogicalResult Lowerer::lowerFp8Scale(Fp8ScaleOp op) {
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
LogicalResult Lowerer::lowerFp8DelayedScales(Fp8DelayedScalesOp op) {
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
LogicalResult Lowerer::lowerFp8Quantize(Fp8QuantizeOp op) {
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
void Lowerer::quantize(Operation *op, Value x, Value scale, Value history, Value recorded,
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

void Lowerer::copyUnlessInPlace(Operation *op, Value from, Value to) {
  if (tensorOf.lookup(from) != tensorOf.lookup(to))
    program->commands.push_back({Command::Copy, 0, 0, 0, {t(from), t(to)},
                                 op->getName().getStringRef().str()});
}

std::pair<Type, Operand> Lowerer::recordedArg(Operation *op, Value history, Value recorded) {
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
void Lowerer::castTranspose(Operation *op, Value x, Value scale, Value history, Value recorded,
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
LogicalResult Lowerer::lowerFp8Transpose(Fp8TransposeOp op) {
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

void Lowerer::launchCrossEntropyBackwardRows(Operation *grad, const std::string &name) {
  Value dloss = grad->getOperand(0), logits = grad->getOperand(1), targets = grad->getOperand(2);
  Value dlogits = grad->getResult(0);
  int64_t rows = numel(targets);
  CrossEntropyShape s{rows, *getConfigInt(grad->getAttr("vocab_size")), lastDim(logits),
                      options.rowLanes};
  Type ft = Float32Type::get(ctx);
  GradStore store = gradStore(grad);
  auto saved = savedLse.find(logits);
  bool haveLse = saved != savedLse.end();
  // FP8 codes are bytes to the kernel.
  std::vector<Type> types = {flat(dloss), flat(logits), flat(targets),
                             store.fp8 ? flatOf(numel(dlogits), IntegerType::get(ctx, 8))
                                       : Type(flat(dlogits))};
  std::vector<Operand> args = {t(dloss), t(logits), t(targets), t(dlogits)};
  if (haveLse) {
    types.push_back(flatOf(rows, ft));
    args.push_back(saved->second);
  }
  if (store.fp8) {
    types.push_back(flatOf(1, ft));
    args.push_back(t(grad->getResult(1)));
  }
  launch(grad, keyOf(grad) + (haveLse ? "saved" : "online"), name, types, args, s.threads(),
         [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
           buildCrossEntropyBackwardRows(b, loc, idx, a, s, haveLse, store);
         });
}

/// gpt.fp8_cast_transpose: both layouts from one read of the input, or
/// only the one something reads (a recomputed copy, gpt-rematerialize).
LogicalResult Lowerer::lowerFp8CastTranspose(Fp8CastTransposeOp op) {
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
LogicalResult Lowerer::lowerFp8CastTransposeSum(Fp8CastTransposeSumOp op) {
  castTranspose(op, op.getInput(), op.getScale(), op.getHistory(), op.getRecorded(),
                op.getResult().use_empty() ? Value() : op.getResult(), op.getTransposed(),
                op.getFormat(), /*gelu=*/false, op.getPre(),
                op.getSum().use_empty() ? Value() : op.getSum());
  return success();
}

/// gpt.layernorm_grad: dx row by row (statistics, then dx), dweight and
/// dbias over all rows; with `residual`, dx joins it and the rows kernel
/// also stores the sum's `narrow` copy (gpt.layernorm_grad_add).
///
/// The column sums fold chunks of rows into partials, then
/// foldColumnPartials adds each column's partials. With
/// layerNormGradOneLaunch (where a lane's columns fit in registers and the
/// warps' sums in shared memory) a warp of the rows kernel takes a chunk
/// and adds each row to its columns' sums in shared memory, so dy and x
/// are read once; otherwise the rows kernel stores the statistics and a
/// column kernel reads dy and x again. For the same chunk each partial
/// adds the same products in row order either way: the same bits.
LogicalResult Lowerer::lowerLayerNormGrad(Operation *op, Value dyV, Value xV, Value wV, Value dxV,
                                          Value dwV, Value dbV, Value residual, Value narrow,
                                          double eps) {
  std::string key = keyOf(op);
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
  bool joins = static_cast<bool>(residual);
  Type ft = Float32Type::get(ctx);
  // a[3]: each row's mean and rstd for the column kernel, or (one launch)
  // the partials, dweight's parts x c then dbias'; set below.
  std::vector<Type> types = {flat(dyV), flat(xV), flat(wV), Type(), flat(dxV)};
  std::vector<Operand> args = {t(dyV), t(xV), t(wV), {}, t(dxV)};
  if (joins) { // a[5] residual, a[6] the narrow copy (if any)
    types.push_back(flat(residual));
    args.push_back(t(residual));
  }
  if (narrow) {
    types.push_back(flat(narrow));
    args.push_back(t(narrow));
  }
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
      Value at = k.add(base, i);
      if (!joins)
        return {{dx, a[4], at}};
      // The residual joins in the input's type, as the add did.
      Value sum = k.asStored(k.add(k.ld(a[5], at), dx), getElementTypeOrSelf(dxV.getType()));
      if (!narrow)
        return {{sum, a[4], at}};
      return {{sum, a[4], at}, {sum, a[6], at}};
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
  std::string name = joins ? "layernorm_backward_rows_add" : "layernorm_backward_rows";
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

LogicalResult Lowerer::lowerOp(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ReshapeOp>([&](auto) { return success(); })
      .Case<SliceOp>([&](SliceOp s) -> LogicalResult {
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
      })
      .Case<LinearOp>([&](LinearOp l) {
        return lowerMatmul(op, l.getInput(), l.getWeight(), false, true, l.getBias());
      })
      .Case<MatmulOp>([&](MatmulOp mm) {
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                           mm.getTransposeRhs(), Value());
      })
      .Case<ScaledMatmulOp>([&](ScaledMatmulOp mm) {
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                           mm.getTransposeRhs(), mm.getBias());
      })
      .Case<ScaledMatmulGeluFp8Op>([&](ScaledMatmulGeluFp8Op mm) {
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), false, true, mm.getBias(),
                           mm.getBias() ? GemmEpilogue::BiasGeluAux : GemmEpilogue::GeluAux,
                           mm.getPre());
      })
      .Case<Fp8ScaleOp>([&](Fp8ScaleOp sc) { return lowerFp8Scale(sc); })
      .Case<Fp8DelayedScalesOp>([&](Fp8DelayedScalesOp sc) { return lowerFp8DelayedScales(sc); })
      .Case<Fp8QuantizeOp>([&](Fp8QuantizeOp q) { return lowerFp8Quantize(q); })
      .Case<Fp8CastTransposeOp>([&](Fp8CastTransposeOp q) { return lowerFp8CastTranspose(q); })
      .Case<Fp8CastTransposeSumOp>(
          [&](Fp8CastTransposeSumOp q) { return lowerFp8CastTransposeSum(q); })
      .Case<LinearGeluOp>([&](LinearGeluOp l) {
        return lowerMatmul(op, l.getInput(), l.getWeight(), false, true, l.getBias(),
                           l.getBias() ? GemmEpilogue::BiasGeluAux : GemmEpilogue::GeluAux,
                           l.getPreActivation());
      })
      .Case<MatmulGeluGradOp>([&](MatmulGeluGradOp mm) {
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                           mm.getTransposeRhs(), Value(), GemmEpilogue::DGelu, mm.getPre());
      })
      .Case<MatmulGeluBiasGradOp>([&](MatmulGeluBiasGradOp mm) {
        // DGELU_BGRAD sums D over its columns (our rows): the bias gradient.
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                           mm.getTransposeRhs(), mm.getBiasGrad(), GemmEpilogue::DGeluBGrad,
                           mm.getPre());
      })
      .Case<MatmulBiasGradOp>([&](MatmulBiasGradOp mm) {
        // cuBLASLt's B is our lhs (dY): BGRADB sums it over k, the rows.
        return lowerMatmul(op, mm.getLhs(), mm.getRhs(), true, false, mm.getBiasGrad(),
                           GemmEpilogue::BGradB);
      })
      .Case<EmbedOp>([&](EmbedOp e) {
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
      })
      .Case<EmbedGradOp>([&](EmbedGradOp e) {
        int64_t c = lastDim(e.getGrad()), rows = numel(e.getIds());
        int64_t tlen = rtt(e.getIds()).getDimSize(1);
        program->commands.push_back({Command::Zero, 0, 0, 0, {t(e.getWteGrad())}, "embed_grad"});
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
      })
      .Case<LayerNormOp>([&](LayerNormOp ln) {
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
      })
      .Case<AddLayerNormOp>([&](AddLayerNormOp ln) {
        int64_t c = lastDim(ln.getSum()), rows = numel(ln.getSum()) / c;
        double eps = ln.getEpsilon().convertToDouble();
        launch(op, key, "add_layernorm_forward",
               {flat(ln.getLhs()), flat(ln.getRhs()), flat(ln.getWeight()), flat(ln.getBias()),
                flat(ln.getSum()), flat(ln.getResult())},
               {t(ln.getLhs()), t(ln.getRhs()), t(ln.getWeight()), t(ln.getBias()), t(ln.getSum()),
                t(ln.getResult())},
               rows * lanes, [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                 KB k{b, loc};
                 RowLanes rl(k, idx, lanes);
                 rl.keepResident(c);
                 Value base = k.mul(rl.row, k.idx(c));
                 RowVals sum = storeRowSum(rl, a[0], a[1], a[4], base, c);
                 layernormRow(rl, sum, a[2], a[3], a[5], base, c, eps, b.getF32Type());
               });
        return success();
      })
      .Case<AddLayerNormFp8Op>([&](AddLayerNormFp8Op ln) {
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
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp ln) {
        return lowerLayerNormGrad(op, ln.getGrad(), ln.getInput(), ln.getWeight(),
                                  ln.getInputGrad(), ln.getWeightGrad(), ln.getBiasGrad(), Value(),
                                  Value(), ln.getEpsilon().convertToDouble());
      })
      .Case<LayerNormGradAddOp>([&](LayerNormGradAddOp ln) {
        return lowerLayerNormGrad(op, ln.getGrad(), ln.getInput(), ln.getWeight(),
                                  ln.getInputGrad(), ln.getWeightGrad(), ln.getBiasGrad(),
                                  ln.getResidual(), ln.getInputGradNarrow(),
                                  ln.getEpsilon().convertToDouble());
      })
      .Case<CausalAttentionOp>([&](CausalAttentionOp at) {
        auto s = rtt(at.getQkv()).getShape();
        int64_t bsz = s[0], tl = s[1], c = s[2] / 3, h = *getConfigInt(at.getNumHeads()),
                d = c / h;
        double scale = 1.0 / std::sqrt(static_cast<double>(d));
        AttentionShape shape{bsz, tl, h, d, scale, options.blockThreads, options.warpgroupMma};
        std::vector<Type> types = {flat(at.getQkv()), flat(at.getResult()), flat(at.getLse())};
        std::vector<Operand> args = {t(at.getQkv()), t(at.getResult()), t(at.getLse())};
        if (options.flashAttention && flashAttentionApplies(shape, eltOf(at.getQkv()))) {
          result.sm90a |= flashAttentionWarpgroup(shape);
          launch(op, key, "flash_attention_forward", types, args, flashAttentionThreads(shape),
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   buildFlashAttentionForward(b, loc, idx, a, shape);
                 }, flashAttentionMinBlocks(shape, FlashKernel::Forward),
                 flashAttentionSharedBytes(shape, FlashKernel::Forward));
          return success();
        }
        // One thread per (b, h, i) query row: q and the output accumulator
        // live in registers (the head dimension is unrolled); keys and values
        // are read in lockstep by a warp, so each load is a broadcast.
        launch(op, key, "attention_forward", types, args, bsz * h * tl,
               [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                 KB k{b, loc};
                 Type ft = b.getF32Type();
                 AttentionIndex ai{k, idx, tl, h, c, d};
                 SmallVector<Value> q = k.loadVec(a[0], ai.qkv(ai.row, 0), d);
                 SmallVector<Value> init = {k.f(-INFINITY, ft), k.f(0, ft)};
                 init.append(d, k.f(0, ft));
                 auto st = k.loop(k.idx(0), k.add(ai.row, k.idx(1)), init,
                                  [&](Value j, ValueRange cur) {
                   Value sc = k.mul(k.dotVec(q, a[0], ai.qkv(j, 1)), k.f(scale, ft));
                   Value mNew = k.fmax(cur[0], sc);
                   Value corr = k.exp(k.sub(cur[0], mNew));
                   Value p = k.exp(k.sub(sc, mNew));
                   SmallVector<Value> next = {mNew, k.add(k.mul(cur[1], corr), p)};
                   Value vb = ai.qkv(j, 2);
                   for (int64_t e = 0; e < d; ++e)
                     next.push_back(k.add(k.mul(cur[2 + e], corr),
                                          k.mul(p, k.ld(a[0], k.add(vb, k.idx(e))))));
                   return next;
                 });
                 Value yb = ai.out(ai.row);
                 for (int64_t e = 0; e < d; ++e)
                   k.st(k.div(st[2 + e], st[1]), a[1], k.add(yb, k.idx(e)));
                 k.st(k.add(st[0], k.log(st[1])), a[2], idx); // idx = (b, h, i)
               });
        return success();
      })
      .Case<CausalAttentionGradOp, CausalAttentionGradSumOp>([&](auto at) {
        // causal_attention_grad_sum: also the column sums of dqkv.
        Value sum;
        if constexpr (std::is_same_v<decltype(at), CausalAttentionGradSumOp>)
          sum = at.getSum();
        auto s = rtt(at.getQkv()).getShape();
        int64_t bsz = s[0], tl = s[1], c = s[2] / 3, h = *getConfigInt(at.getNumHeads()),
                d = c / h;
        double scale = 1.0 / std::sqrt(static_cast<double>(d));
        Type ft = Float32Type::get(ctx);
        int64_t rowsN = bsz * h * tl;
        // Per row a statistic of lse_i (the scalar kernels: lse_i; flash:
        // -lse_i log2 e) and D_i = sum_j p_ij dy_i.v_j.
        Operand stats = scratch(rowsN * 2 * 4);
        auto statsType = flatOf(rowsN * 2, ft);
        AttentionShape shape{bsz, tl, h, d, scale, options.blockThreads, options.warpgroupMma};
        // dy, qkv, (lse statistic, D) pairs, dqkv, y, lse: the q kernel fills the pairs
        // for the k and v kernels, which walk rows of other queries.
        std::vector<Type> types = {flat(at.getGrad()), flat(at.getQkv()), statsType,
                                   flat(at.getResult()), flat(at.getOutput()), flat(at.getLse())};
        std::vector<Operand> args = {t(at.getGrad()), t(at.getQkv()), stats, t(at.getResult()),
                                     t(at.getOutput()), t(at.getLse())};
        // sums[col] of a (rows, 3C) f32 or dqkv-typed matrix `in`.
        auto sumColumns = [&](Type inType, Operand in, int64_t rows, Type ft) {
          reduceMatrix(op, key + "sum", "attention_backward_sum", inType, in, flat(sum), t(sum),
                       rows, 3 * c, ft, ReduceKind::Sum);
        };
        if (options.flashAttention && flashAttentionApplies(shape, eltOf(at.getQkv())) &&
            eltOf(at.getGrad()).isBF16() && eltOf(at.getOutput()).isBF16()) {
          result.sm90a |= flashAttentionWarpgroup(shape);
          // The kernels store each 16-row tile's column sums (unrounded); a
          // column reduction folds the B T / 16 rows of them.
          int64_t tileRows = bsz * tl / 16;
          Operand partials;
          if (sum) {
            shape.columnSums = true;
            partials = scratch(tileRows * 3 * c * 4);
            types.push_back(flatOf(tileRows * 3 * c, ft));
            args.push_back(partials);
          }
          launch(op, key + "q", "flash_attention_backward_q", types, args,
                 flashAttentionThreads(shape),
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   buildFlashAttentionBackwardQuery(b, loc, idx, a, shape);
                 }, flashAttentionMinBlocks(shape, FlashKernel::BackwardQuery),
                 flashAttentionSharedBytes(shape, FlashKernel::BackwardQuery));
          launch(op, key + "kv", "flash_attention_backward_kv", types, args,
                 flashAttentionThreads(shape),
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   buildFlashAttentionBackwardKeyValue(b, loc, idx, a, shape);
                 }, flashAttentionMinBlocks(shape, FlashKernel::BackwardKeyValue),
                 flashAttentionSharedBytes(shape, FlashKernel::BackwardKeyValue));
          if (sum)
            sumColumns(types.back(), partials, tileRows, ft);
          return success();
        }
        // Rows i: lse_i, D_i and dq_i = scale sum_j p_ij (dy_i.v_j - D_i) k_j.
        launch(op, key + "q", "attention_backward_q", types, args, rowsN,
               [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                 KB k{b, loc};
                 AttentionIndex ai{k, idx, tl, h, c, d};
                 SmallVector<Value> q = k.loadVec(a[1], ai.qkv(ai.row, 0), d);
                 SmallVector<Value> dy = k.loadVec(a[0], ai.out(ai.row), d);
                 Value end = k.add(ai.row, k.idx(1));
                 auto score = [&](Value j) {
                   return k.mul(k.dotVec(q, a[1], ai.qkv(j, 1)), k.f(scale, ft));
                 };
                 // The forward's lse, and D_i = dy_i . y_i = sum_j p_ij dy_i . v_j.
                 Value lse = k.ld(a[5], idx);
                 Value dsum = k.dotVec(dy, a[4], ai.out(ai.row));
                 k.st(lse, a[2], k.mul(idx, k.idx(2)));
                 k.st(dsum, a[2], k.add(k.mul(idx, k.idx(2)), k.idx(1)));
                 SmallVector<Value> zeros(d, k.f(0, ft));
                 auto dq = k.loop(k.idx(0), end, zeros, [&](Value j, ValueRange cur) {
                   Value kb = ai.qkv(j, 1);
                   Value p = k.exp(k.sub(score(j), lse));
                   Value dp = k.dotVec(dy, a[1], ai.qkv(j, 2));
                   Value ds = k.mul(k.mul(p, k.sub(dp, dsum)), k.f(scale, ft));
                   SmallVector<Value> next;
                   for (int64_t e = 0; e < d; ++e)
                     next.push_back(k.add(cur[e], k.mul(ds, k.ld(a[1], k.add(kb, k.idx(e))))));
                   return next;
                 });
                 Value qb = ai.qkv(ai.row, 0);
                 for (int64_t e = 0; e < d; ++e)
                   k.st(dq[e], a[3], k.add(qb, k.idx(e)));
               });
        // Columns j: dk_j = scale sum_{i>=j} ds_ij q_i and dv_j = sum_{i>=j}
        // p_ij dy_i, one kernel each so that k_j (and v_j), the accumulator
        // and the row values fit in registers. Every thread of a warp walks
        // the rows i together (broadcast loads) and masks rows before its j.
        for (bool keys : {true, false}) {
          launch(op, key + (keys ? "k" : "v"), keys ? "attention_backward_k" : "attention_backward_v",
                 types, args, rowsN,
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   KB k{b, loc};
                   AttentionIndex ai{k, idx, tl, h, c, d};
                   Value j = ai.row;
                   SmallVector<Value> kj = k.loadVec(a[1], ai.qkv(j, 1), d);
                   SmallVector<Value> vj;
                   if (keys)
                     vj = k.loadVec(a[1], ai.qkv(j, 2), d);
                   Value rowBase = k.sub(idx, j); // the (b, h, 0) row of the stats
                   Value start = k.sub(j, k.urem(j, k.idx(32))); // the warp's first j
                   SmallVector<Value> zeros(d, k.f(0, ft));
                   auto acc = k.loop(start, k.idx(tl), zeros, [&](Value i, ValueRange cur) {
                     Value qb = ai.qkv(i, 0), dyb = ai.out(i);
                     Value srow = k.mul(k.add(rowBase, i), k.idx(2));
                     Value lse = k.ld(a[2], srow);
                     Value sc = k.mul(k.dotVec(kj, a[1], qb), k.f(scale, ft));
                     Value visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, i, j);
                     Value p = k.select(visible, k.exp(k.sub(sc, lse)), k.f(0, ft));
                     SmallVector<Value> next;
                     if (keys) {
                       Value dsum = k.ld(a[2], k.add(srow, k.idx(1)));
                       Value dp = k.dotVec(vj, a[0], dyb);
                       Value ds = k.mul(k.mul(p, k.sub(dp, dsum)), k.f(scale, ft));
                       for (int64_t e = 0; e < d; ++e)
                         next.push_back(k.add(cur[e], k.mul(ds, k.ld(a[1], k.add(qb, k.idx(e))))));
                     } else {
                       for (int64_t e = 0; e < d; ++e)
                         next.push_back(k.add(cur[e], k.mul(p, k.ld(a[0], k.add(dyb, k.idx(e))))));
                     }
                     return next;
                   });
                   Value outBase = ai.qkv(j, keys ? 1 : 2);
                   for (int64_t e = 0; e < d; ++e)
                     k.st(acc[e], a[3], k.add(outBase, k.idx(e)));
                 });
        }
        // The scalar kernels' sums are of dqkv as stored.
        if (sum)
          sumColumns(flat(at.getResult()), t(at.getResult()), bsz * tl,
                     computeOf(eltOf(at.getResult())));
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp ce) {
        int64_t vp = lastDim(ce.getLogits()), rows = numel(ce.getTargets());
        int64_t v = *getConfigInt(ce.getVocabSize());
        Type ft = Float32Type::get(ctx);
        CrossEntropyShape s{rows, v, vp, lanes};
        Operation *grad = onePassGrad(ce, s);
        // The online forward keeps each row's log-sum-exp for the gradient
        // (keep() first: it restarts the scratch above what stays).
        Operand lse;
        if (!grad && options.fusedCrossEntropy) {
          lse = keep(rows * 4);
          savedLse[ce.getLogits()] = lse;
        }
        Operand losses = scratch(rows * 4);
        if (grad) {
          // A bf16 gradient overwrites the logits (planned in place), so
          // the launch passes the logits' tensor for it too; FP8 codes go
          // to their own tensor, with the inverse scale.
          onePassGrads.insert(grad);
          Value dloss = grad->getOperand(0);
          waitFor(dloss); // read a launch earlier than its op
          int64_t threads = options.blockThreads;
          GradStore store = gradStore(grad);
          std::vector<Type> types = {flat(ce.getLogits()), flat(ce.getTargets()), flat(dloss),
                                     flatOf(rows, ft), flat(ce.getLogits())};
          std::vector<Operand> args = {t(ce.getLogits()), t(ce.getTargets()), t(dloss), losses,
                                       t(ce.getLogits())};
          if (store.fp8) {
            // The codes' tensors, placed before their op's turn (mapping
            // them again there keeps these).
            if (failed(mapResults(grad)))
              return failure();
            types[4] = flatOf(numel(ce.getLogits()), IntegerType::get(ctx, 8));
            args[4] = t(grad->getResult(0));
            types.push_back(flatOf(1, ft));
            args.push_back(t(grad->getResult(1)));
          }
          launch(op, key + "onepass" + (store.fp8 ? "[fp8]" : ""), "crossentropy_forward_backward",
                 types, args, rows * threads,
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   buildCrossEntropyOnePass(b, loc, idx, a, s, threads, store);
                 }, /*minBlocksPerSM=*/2, crossEntropyOnePassSharedBytes(s, threads));
        } else if (options.fusedCrossEntropy) {
          launch(op, key + "online", "crossentropy_forward_online",
                 {flat(ce.getLogits()), flat(ce.getTargets()), flatOf(rows, ft), flatOf(rows, ft)},
                 {t(ce.getLogits()), t(ce.getTargets()), losses, lse}, s.threads(),
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   buildCrossEntropyForwardRows(b, loc, idx, a, s);
                 });
        } else {
          launch(op, key + "rows", "crossentropy_forward_rows",
                 {flat(ce.getLogits()), flat(ce.getTargets()), flatOf(rows, ft)},
                 {t(ce.getLogits()), t(ce.getTargets()), losses}, rows * lanes,
                 [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                   KB k{b, loc};
                   RowLanes rl(k, idx, lanes);
                   Value r = rl.row;
                   Value base = k.mul(r, k.idx(vp));
                   auto [mx, sum] = maxAndSumExp(rl, a[0], base, v, ft);
                   rl.once([&] {
                     Value target = k.toIndex(k.ld(a[1], r));
                     Value lt = k.ld(a[0], k.add(base, target));
                     k.st(k.sub(k.add(k.log(sum), mx), lt), a[2], r);
                   });
                 });
        }
        // The rows' losses folded in parallel first: one thread summing
        // every row took 0.27 ms at B x T = 16384.
        auto [left, count] = foldPartials(op, losses, rows, "crossentropy_forward_fold");
        launch(op, key + "mean" + std::to_string(count), "crossentropy_forward_mean",
               {flatOf(count, ft), flat(ce.getResult())}, {left, t(ce.getResult())}, 1,
               [=](OpBuilder &b, Location loc, Value, ValueRange a) {
                 KB k{b, loc};
                 Value sum = k.loop(k.idx(0), k.idx(count), {k.f(0, ft)}, [&](Value i, ValueRange s) {
                   return SmallVector<Value>{k.add(s[0], k.ld(a[0], i))};
                 })[0];
                 k.st(k.div(sum, k.f(rows, ft)), a[1], k.idx(0));
               });
        return success();
      })
      .Case<Fp8CrossEntropyGradOp>([&](Fp8CrossEntropyGradOp ce) {
        // Computed by its forward's launch (onePassGrad), or by the rows
        // kernel (whatever --fuse-cross-entropy says: it has no other).
        if (!onePassGrads.contains(ce))
          launchCrossEntropyBackwardRows(ce, "crossentropy_backward_fp8");
        return success();
      })
      .Case<Fp8TransposeOp>([&](Fp8TransposeOp tr) { return lowerFp8Transpose(tr); })
      .Case<CrossEntropyGradOp>([&](CrossEntropyGradOp ce) {
        // Computed by its forward's launch (onePassGrad).
        if (onePassGrads.contains(ce))
          return success();
        int64_t vp = lastDim(ce.getLogits()), rows = numel(ce.getTargets());
        int64_t v = *getConfigInt(ce.getVocabSize());
        Type ft = Float32Type::get(ctx);
        if (options.fusedCrossEntropy) {
          launchCrossEntropyBackwardRows(ce, "crossentropy_backward_fused");
          return success();
        }
        Operand stats = scratch(rows * 2 * 4);
        launch(op, key + "rows", "crossentropy_backward_rows",
               {flat(ce.getLogits()), flatOf(rows * 2, ft)}, {t(ce.getLogits()), stats},
               rows * lanes, [=](OpBuilder &b, Location loc, Value idx, ValueRange a) {
                 KB k{b, loc};
                 RowLanes rl(k, idx, lanes);
                 Value r = rl.row;
                 Value base = k.mul(r, k.idx(vp));
                 auto [mx, sum] = maxAndSumExp(rl, a[0], base, v, ft);
                 rl.once([&] {
                   k.st(mx, a[1], k.mul(r, k.idx(2)));
                   k.st(sum, a[1], k.add(k.mul(r, k.idx(2)), k.idx(1)));
                 });
               });
        launch(op, key + "elems", "crossentropy_backward",
               {flat(ce.getGrad()), flat(ce.getLogits()), flat(ce.getTargets()),
                flatOf(rows * 2, ft), flat(ce.getResult())},
               {t(ce.getGrad()), t(ce.getLogits()), t(ce.getTargets()), stats, t(ce.getResult())},
               rows * vp, [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
                 KB k{b, loc};
                 Value r = k.udiv(i, k.idx(vp)), col = k.urem(i, k.idx(vp));
                 Value mx = k.ld(a[3], k.mul(r, k.idx(2)));
                 Value sum = k.ld(a[3], k.add(k.mul(r, k.idx(2)), k.idx(1)));
                 Value p = k.div(k.exp(k.sub(k.ld(a[1], i), mx)), sum);
                 Value hit = k.cmpEq(col, k.toIndex(k.ld(a[2], r)));
                 Value g = k.div(k.ld(a[0], k.idx(0)), k.f(rows, ft));
                 Value d = k.mul(g, k.sub(p, k.select(hit, k.f(1, ft), k.f(0, ft))));
                 k.st(k.select(k.cmpUlt(col, k.idx(v)), d, k.f(0, ft)), a[4], i);
               });
        return success();
      })
      .Case<AdamWMultiOp>([&](AdamWMultiOp multi) {
        lowerAdamWMulti(multi);
        return success();
      })
      .Case<ReduceOp>([&](ReduceOp red) -> LogicalResult {
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
      })
      .Case<GeluGradSumOp>([&](GeluGradSumOp gs) -> LogicalResult {
        // The column reduction's first stage computes and stores the GELU
        // gradient as it reads each element: one pass over (rows, cols).
        int64_t cols = numel(gs.getSum()), rows = numel(gs.getGrad()) / cols;
        Type ft = computeOf(eltOf(gs.getGrad()));
        reduceColumns(
            op, key, "gelu_backward_sum",
            {flat(gs.getGrad()), flat(gs.getInput()), flat(gs.getResult())},
            {t(gs.getGrad()), t(gs.getInput()), t(gs.getResult())}, {flat(gs.getSum())},
            {t(gs.getSum())}, rows, cols, ft, ReduceKind::Sum,
            [=](KB &k, ValueRange a, Value r, Value col, int64_t width,
                SmallVector<KB::Store> &stores) {
              Value at = k.add(k.mul(r, k.idx(cols)), col);
              SmallVector<Value> dy = k.ldConsecutive(a[0], at, width),
                                 x = k.ldConsecutive(a[1], at, width), ds;
              for (int64_t c = 0; c < width; ++c) {
                ds.push_back(k.mul(dy[c], geluGradOf(k, x[c])));
                stores.push_back({ds[c], a[2], c ? k.add(at, k.idx(c)) : at});
              }
              return ds;
            },
            /*pairs=*/true);
        return success();
      })
      .Case<GlobalNormOp>([&](GlobalNormOp gn) {
        lowerGlobalNorm(gn);
        return success();
      })
      .Case<LRScheduleOp>([&](LRScheduleOp lr) {
        double maxLr = lr.getMaxLr().convertToDouble(), minLr = lr.getMinLr().convertToDouble();
        double warmup = static_cast<double>(lr.getWarmupSteps());
        double total = static_cast<double>(lr.getTotalSteps());
        ScheduleKind kind = lr.getKind();
        Type outT = eltOf(lr.getResult());
        launch(op, key, "lr_schedule", {flat(lr.getStep()), flat(lr.getResult())},
               {t(lr.getStep()), t(lr.getResult())}, 1,
               [=](OpBuilder &b, Location loc, Value, ValueRange a) {
                 KB k{b, loc};
                 Type dt = b.getF64Type();
                 Value step = arith::SIToFPOp::create(b, loc, dt, k.ld(a[0], k.idx(0)));
                 Value out = k.f(maxLr, dt);
                 if (kind != ScheduleKind::Constant) {
                   Value warm = k.div(k.mul(k.f(maxLr, dt), k.add(step, k.f(1, dt))),
                                      k.f(std::max(warmup, 1.0), dt));
                   Value r = k.div(k.sub(step, k.f(warmup, dt)),
                                   k.f(total > warmup ? total - warmup : 1.0, dt));
                   r = arith::MinimumFOp::create(b, loc, k.fmax(r, k.f(0, dt)), k.f(1, dt));
                   Value decay =
                       kind == ScheduleKind::Cosine
                           ? k.add(k.f(minLr, dt),
                                   k.mul(k.mul(k.f(0.5, dt),
                                               k.add(k.f(1, dt), k.cos(k.mul(k.f(M_PI, dt), r)))),
                                         k.f(maxLr - minLr, dt)))
                           : k.sub(k.f(maxLr, dt), k.mul(r, k.f(maxLr - minLr, dt)));
                   Value inWarmup = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, step,
                                                          k.f(warmup, dt));
                   out = k.select(inWarmup, warm, decay);
                 }
                 k.st(k.convert(out, outT), a[1], k.idx(0));
               });
        return success();
      })
      .Case<AdamWOp>([&](AdamWOp adam) {
        double b1 = adam.getBeta1().convertToDouble(), b2 = adam.getBeta2().convertToDouble();
        double eps = adam.getEpsilon().convertToDouble();
        double wd = adam.getWeightDecay().convertToDouble();
        launch(op, key, "adamw",
               {flat(adam.getParam()), flat(adam.getGrad()), flat(adam.getM()), flat(adam.getV()),
                flat(adam.getLr()), flat(adam.getStep()), flat(adam.getGradScale()),
                flat(adam.getNewParam()), flat(adam.getNewM()), flat(adam.getNewV())},
               {t(adam.getParam()), t(adam.getGrad()), t(adam.getM()), t(adam.getV()),
                t(adam.getLr()), t(adam.getStep()), t(adam.getGradScale()),
                t(adam.getNewParam()), t(adam.getNewM()), t(adam.getNewV())},
               numel(adam.getParam()), [=](OpBuilder &b, Location loc, Value i, ValueRange a) {
                 KB k{b, loc};
                 Type ft = b.getF32Type(), dt = b.getF64Type();
                 Value tt = k.add(arith::SIToFPOp::create(b, loc, dt, k.ld(a[5], k.idx(0))),
                                  k.f(1, dt));
                 Value c1 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b1, dt), tt)), ft);
                 Value c2 = k.trunc(k.sub(k.f(1, dt), math::PowFOp::create(b, loc, k.f(b2, dt), tt)), ft);
                 Value lr = k.ld(a[4], k.idx(0));
                 Value g = k.mul(k.ld(a[1], i), k.ld(a[6], k.idx(0)));
                 Value p = k.ld(a[0], i);
                 Value m = k.add(k.mul(k.f(b1, ft), k.ld(a[2], i)), k.mul(k.f(1 - b1, ft), g));
                 Value v = k.add(k.mul(k.f(b2, ft), k.ld(a[3], i)), k.mul(k.f(1 - b2, ft), k.mul(g, g)));
                 Value upd = k.div(k.div(m, c1), k.add(k.sqrt(k.div(v, c2)), k.f(eps, ft)));
                 Value np = k.sub(p, k.mul(lr, k.add(upd, k.mul(k.f(wd, ft), p))));
                 k.st(np, a[7], i);
                 k.st(m, a[8], i);
                 k.st(v, a[9], i);
               });
        return success();
      })
      .Case<FusionOp>([&](FusionOp f) { return lowerFusion(f); })
      .Default([&](Operation *o) { return lowerElementwise(o); });
}

LogicalResult Lowerer::lowerElementwise(Operation *op) {
  std::string key = keyOf(op);
  int64_t lanes = options.rowLanes;
  if (op->getNumResults() != 1 || !llvm::isa<RankedTensorType>(op->getResult(0).getType()))
    return op->emitOpError("codegen: no lowering for this op");
  Value res = op->getResult(0);
  std::vector<Type> types;
  std::vector<Operand> args;
  for (Value v : op->getOperands()) {
    types.push_back(flat(v));
    args.push_back(t(v));
  }
  types.push_back(flat(res));
  args.push_back(t(res));
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
LogicalResult Lowerer::lowerFusion(FusionOp fusion) {
  Block &body = fusion.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  std::vector<Type> types;
  std::vector<Operand> args;
  for (Value v : fusion.getInputs()) {
    types.push_back(flat(v));
    args.push_back(t(v));
  }
  std::vector<int64_t> sizes;
  for (Value r : fusion.getResults()) {
    types.push_back(flat(r));
    args.push_back(t(r));
    sizes.push_back(numel(r));
  }
  llvm::sort(sizes, std::greater<int64_t>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

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
           // (value, index) -> its element, rounded as if stored.
           std::map<std::pair<void *, void *>, Value> memo;
           std::function<Value(Value, Value)> eval = [&](Value v, Value at) -> Value {
             auto memoKey = std::make_pair(v.getAsOpaquePointer(), at.getAsOpaquePointer());
             if (auto it = memo.find(memoKey); it != memo.end())
               return it->second;
             Value y;
             if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
               Value mem = a[arg.getArgNumber()];
               y = c ? c->load(mem, at) : k.ld(mem, at);
             } else {
               Operation *op = v.getDefiningOp();
               y = elementAt(k, op, at, [&](unsigned j, Value idx) {
                 return eval(op->getOperand(j), idx);
               });
               Type elt = eltOf(v);
               y = elt.isBF16() || elt.isF16() ? k.ext(k.convert(y, elt), computeOf(elt))
                                               : k.convert(y, elt);
             }
             memo[memoKey] = y;
             return y;
           };
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

} // namespace

FailureOr<Lowered> lowerPrograms(ModuleOp module, ArrayRef<std::string> programs,
                                 const LoweringOptions &options) {
  Lowerer lowerer(module, options);
  for (const std::string &name : programs) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn)
      return module.emitError("codegen: no program @") << name;
    if (failed(lowerer.lowerProgram(fn)))
      return failure();
  }
  return std::move(lowerer.result);
}

} // namespace gptc::codegen
