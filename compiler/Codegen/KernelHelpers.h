//===- KernelHelpers.h - kernel-body helpers shared by the families ------===//
//
// Types and sizes of values, GELU, row softmax statistics, batched members
// (a kernel over many tensors of a few element types) and the FP8 amax
// record: the helpers more than one kernel family (Kernels/*.cpp) uses.
// A helper of one family stays in its file. Moved from Lowering.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_KERNELHELPERS_H
#define GPTC_COMPILER_CODEGEN_KERNELHELPERS_H

#include "compiler/Codegen/KernelBuilder.h"
#include "compiler/Codegen/RowLanes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"

#include <functional>
#include <map>
#include <string>

namespace gptc::codegen {

// The lowering code is written against MLIR's and the gpt dialect's names
// unqualified (as Lowering.cpp was); only gptc::codegen sees them.
using namespace mlir;

inline RankedTensorType rtt(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
inline int64_t numel(Value v) { return rtt(v).getNumElements(); }
inline int64_t lastDim(Value v) { return rtt(v).getShape().back(); }
inline Type eltOf(Value v) { return rtt(v).getElementType(); }
/// The type a kernel computes in for tensors of element type `t` (see KB::ld).
inline Type computeOf(Type t) {
  return t.isBF16() || t.isF16() ? Float32Type::get(t.getContext()) : t;
}
inline MemRefType flat(Value v) { return MemRefType::get({numel(v)}, eltOf(v)); }
inline MemRefType flatOf(int64_t n, Type t) { return MemRefType::get({n}, t); }

inline int64_t bytesOf(Type t) {
  auto s = llvm::cast<ShapedType>(t);
  return s.getNumElements() * std::max<int64_t>(s.getElementTypeBitWidth() / 8, 1);
}

/// The values of a gpt.fusion body at an index, in the compute type, each
/// rounded as if stored (the body's meaning): the one evaluator of the
/// elementwise and the row fusion kernels (Kernels/Elementwise.cpp).
/// `load(arg, at)` reads the operand of block argument `arg` at `at`.
struct FusionValues {
  KB &k;
  std::function<Value(BlockArgument, Value)> load;
  std::map<std::pair<void *, void *>, Value> memo; // (value, index) -> element

  Value operator()(Value v, Value at);
  /// `v` at `at` is `element`, computed by the kernel (a row op's result).
  void bind(Value v, Value at, Value element) {
    memo[{v.getAsOpaquePointer(), at.getAsOpaquePointer()}] = element;
  }
};

/// A gpt.fusion's kernel key: its body's ops, wired by value numbers, so
/// equal bodies share a kernel.
std::string fusionKey(Operation *fusion);

/// llm.c's tanh-approximate GELU and its derivative, in type `t`.
inline Value geluOf(KB &k, Value x) {
  Type t = x.getType();
  Value inner = k.mul(k.f(0.7978845608028654, t),
                      k.add(x, k.mul(k.f(0.044715, t), k.mul(x, k.mul(x, x)))));
  return k.mul(k.mul(k.f(0.5, t), x), k.add(k.f(1.0, t), k.tanh(inner)));
}

inline Value geluGradOf(KB &k, Value x) {
  Type t = x.getType();
  Value kk = k.f(0.7978845608028654, t), a = k.f(0.044715, t);
  Value u = k.mul(kk, k.add(x, k.mul(a, k.mul(x, k.mul(x, x)))));
  Value th = k.tanh(u);
  Value sech2 = k.sub(k.f(1.0, t), k.mul(th, th));
  Value poly = k.add(k.f(1.0, t), k.mul(k.f(3.0, t), k.mul(a, k.mul(x, x))));
  return k.add(k.mul(k.f(0.5, t), k.add(k.f(1.0, t), th)),
               k.mul(k.mul(k.f(0.5, t), x), k.mul(sech2, k.mul(kk, poly))));
}

/// max_i x[base + i] and sum_i exp(x[base + i] - max) over i < n: the
/// statistics of a stable softmax / log-sum-exp row.
inline std::pair<Value, Value> maxAndSumExp(RowLanes &rl, Value x, Value base, int64_t n, Type t) {
  KB &k = rl.k;
  Value mx = rl.max(rl.fold(n, {k.f(-INFINITY, t)}, [&](Value i, ValueRange s) {
    return SmallVector<Value>{k.fmax(s[0], k.ld(x, k.add(base, i)))};
  })[0]);
  Value sum = rl.sum(rl.fold(n, {k.f(0, t)}, [&](Value i, ValueRange s) {
    return SmallVector<Value>{k.add(s[0], k.exp(k.sub(k.ld(x, k.add(base, i)), mx)))};
  })[0]);
  return {mx, sum};
}

/// The index of `v` in `set`, appended first if it is not there: the class
/// of a batched kernel's member.
template <typename T>
inline int64_t classIndex(SmallVectorImpl<T> &set, const T &v) {
  auto *it = llvm::find(set, v);
  if (it != set.end())
    return it - set.begin();
  set.push_back(v);
  return static_cast<int64_t>(set.size()) - 1;
}

/// Batched kernels: threads [starts[i], starts[i + 1]) serve member i of
/// many tensors. Returns the member of thread p (the number of later
/// starts <= p).
inline Value memberOf(KB &k, Value p, ArrayRef<int64_t> starts) {
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
inline void dispatchMembers(KB &k, Value which, ValueRange mems, ArrayRef<Type> classes,
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

/// Members of a batched kernel (their pointers are its parameters: 128 x 8
/// bytes stays far below CUDA's 4 KiB).
constexpr int64_t kMembersPerKernel = 128;
/// Raises element 0 of the i32 view of an FP8 amax history to `amax`
/// (>= 0, so its bits order as unsigned integers do, NaN above all).
inline void recordAmax(KB &k, Value recorded, Value amax) {
  Value bits = arith::BitcastOp::create(k.b, k.loc, k.b.getI32Type(), amax);
  memref::AtomicRMWOp::create(k.b, k.loc, arith::AtomicRMWKind::maxu, bits, recorded,
                              ValueRange{k.idx(0)});
}

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_KERNELHELPERS_H
