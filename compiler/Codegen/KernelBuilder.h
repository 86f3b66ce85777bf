//===- KernelBuilder.h - a small DSL for index-space kernel bodies -------===//
//
// KB wraps an OpBuilder with the arith/math/scf/memref ops kernel bodies
// are made of; the same bodies become gpu.funcs (CUDA) or host loops.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_COMPILER_CODEGEN_KERNELBUILDER_H
#define GPTC_COMPILER_CODEGEN_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace gptc::codegen {

using mlir::function_ref;
using mlir::OpBuilder;
using mlir::SmallVector;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;

/// Small arithmetic DSL over an OpBuilder, for kernel bodies.
struct KB {
  OpBuilder &b;
  mlir::Location loc;

  Value idx(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value f(double v, Type t) {
    return mlir::arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
  }
  Value i64(int64_t v) { return mlir::arith::ConstantIntOp::create(b, loc, b.getI64Type(), v); }
  /// Loads widen bf16/f16 to f32 and stores round back (to nearest even):
  /// kernels compute in f32 whatever the tensors' storage type.
  Value ld(Value mem, Value i) {
    Value v = mlir::memref::LoadOp::create(b, loc, mem, ValueRange{i});
    Type t = v.getType();
    return t.isBF16() || t.isF16() ? ext(v, b.getF32Type()) : v;
  }
  void st(Value v, Value mem, Value i) {
    Type elt = llvm::cast<mlir::MemRefType>(mem.getType()).getElementType();
    if (v.getType() != elt)
      v = convert(v, elt);
    mlir::memref::StoreOp::create(b, loc, v, mem, ValueRange{i});
  }
  Value add(Value x, Value y) {
    return llvm::isa<mlir::IndexType, mlir::IntegerType>(x.getType())
               ? mlir::arith::AddIOp::create(b, loc, x, y).getResult()
               : mlir::arith::AddFOp::create(b, loc, x, y).getResult();
  }
  Value sub(Value x, Value y) {
    return llvm::isa<mlir::IndexType, mlir::IntegerType>(x.getType())
               ? mlir::arith::SubIOp::create(b, loc, x, y).getResult()
               : mlir::arith::SubFOp::create(b, loc, x, y).getResult();
  }
  Value mul(Value x, Value y) {
    return llvm::isa<mlir::IndexType, mlir::IntegerType>(x.getType())
               ? mlir::arith::MulIOp::create(b, loc, x, y).getResult()
               : mlir::arith::MulFOp::create(b, loc, x, y).getResult();
  }
  Value div(Value x, Value y) { return mlir::arith::DivFOp::create(b, loc, x, y); }
  Value udiv(Value x, Value y) { return mlir::arith::DivUIOp::create(b, loc, x, y); }
  Value urem(Value x, Value y) { return mlir::arith::RemUIOp::create(b, loc, x, y); }
  Value fmax(Value x, Value y) { return mlir::arith::MaximumFOp::create(b, loc, x, y); }
  Value neg(Value x) { return mlir::arith::NegFOp::create(b, loc, x); }
  Value exp(Value x) { return mlir::math::ExpOp::create(b, loc, x); }
  /// exp with `afn`: on CUDA libdevice's __nv_fast_expf (ex2.approx after
  /// one multiply, a few ulp, 2 instructions instead of ~11); the Host
  /// target's libm ignores the flag.
  Value fastExp(Value x) {
    return mlir::math::ExpOp::create(b, loc, x, mlir::arith::FastMathFlags::afn);
  }
  Value log(Value x) { return mlir::math::LogOp::create(b, loc, x); }
  Value tanh(Value x) { return mlir::math::TanhOp::create(b, loc, x); }
  Value sqrt(Value x) { return mlir::math::SqrtOp::create(b, loc, x); }
  // 1 / sqrt(x): libm has no rsqrtf for the host target.
  Value rsqrt(Value x) { return div(f(1.0, x.getType()), sqrt(x)); }
  Value cos(Value x) { return mlir::math::CosOp::create(b, loc, x); }
  Value toIndex(Value i32) { return mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), i32); }
  Value toI32(Value index) { return mlir::arith::IndexCastOp::create(b, loc, b.getI32Type(), index); }
  Value cmpEq(Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, x, y);
  }
  Value cmpUlt(Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value c, Value x, Value y) { return mlir::arith::SelectOp::create(b, loc, c, x, y); }
  Value ext(Value x, Type t) { return mlir::arith::ExtFOp::create(b, loc, t, x); }
  Value trunc(Value x, Type t) { return mlir::arith::TruncFOp::create(b, loc, t, x); }
  Value convert(Value x, Type t) {
    unsigned from = x.getType().getIntOrFloatBitWidth(), to = t.getIntOrFloatBitWidth();
    return from == to ? x : from < to ? ext(x, t) : trunc(x, t);
  }

  /// for (i = lb; i < ub; ++i) body(i)
  void loop(Value lb, Value ub, function_ref<void(Value)> body) {
    auto op = mlir::scf::ForOp::create(b, loc, lb, ub, idx(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.getBody());
    body(op.getInductionVar());
  }
  /// A loop carrying values: body(i, carried) returns the next ones.
  SmallVector<Value> loop(Value lb, Value ub, ValueRange init,
                          function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return loop(lb, ub, idx(1), init, body);
  }
  /// The same with a step.
  SmallVector<Value> loop(Value lb, Value ub, Value step, ValueRange init,
                          function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    auto op = mlir::scf::ForOp::create(
        b, loc, lb, ub, step, init,
        [&](OpBuilder &nb, mlir::Location, Value iv, ValueRange carried) {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToEnd(nb.getInsertionBlock());
          mlir::scf::YieldOp::create(b, loc, body(iv, carried));
        });
    return SmallVector<Value>(op.getResults());
  }
  /// mem[at], ..., mem[at + n - 1] from one n-element vector load, widened
  /// as ld widens: `at` must be a multiple of n in a buffer aligned to n
  /// elements (the load assumes that alignment). CUDA kernels only: the
  /// Host lowering has no vector conversion.
  SmallVector<Value> ldVector(Value mem, Value at, int64_t n) {
    Type elt = llvm::cast<mlir::MemRefType>(mem.getType()).getElementType();
    Value vec = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({n}, elt), mem,
                                             ValueRange{at}, /*nontemporal=*/false,
                                             llvm::MaybeAlign(n * elt.getIntOrFloatBitWidth() / 8));
    SmallVector<Value> xs;
    for (int64_t e = 0; e < n; ++e) {
      Value x = mlir::vector::ExtractOp::create(b, loc, vec, e);
      xs.push_back(x.getType().isBF16() || x.getType().isF16() ? ext(x, b.getF32Type()) : x);
    }
    return xs;
  }
  /// mem[at .. at + n - 1] widened as ld widens: one ld for n = 1, else
  /// vector loads of up to 16 bytes (ldVector; `at` a multiple of their
  /// width in a buffer aligned to it).
  SmallVector<Value> ldConsecutive(Value mem, Value at, int64_t n) {
    if (n == 1)
      return {ld(mem, at)};
    int64_t w = vectorWidth(mem, n);
    SmallVector<Value> xs;
    for (int64_t e = 0; e < n; e += w)
      llvm::append_range(xs, ldVector(mem, e == 0 ? at : add(at, idx(e)), w));
    return xs;
  }
  /// vs stored as st stores them to mem[at ..]: one st for one value, else
  /// vector stores aligned as for ldConsecutive.
  void stConsecutive(llvm::ArrayRef<Value> vs, Value mem, Value at) {
    int64_t n = static_cast<int64_t>(vs.size());
    if (n == 1)
      return st(vs[0], mem, at);
    int64_t w = vectorWidth(mem, n);
    for (int64_t e = 0; e < n; e += w)
      stVector(vs.slice(e, w), mem, e == 0 ? at : add(at, idx(e)));
  }
  /// Elements of mem per 16-byte vector, at most n.
  static int64_t vectorWidth(Value mem, int64_t n) {
    Type elt = llvm::cast<mlir::MemRefType>(mem.getType()).getElementType();
    return std::min<int64_t>(n, 128 / elt.getIntOrFloatBitWidth());
  }
  /// What storing v to a tensor of element type `elt` and loading it back
  /// gives (st rounds, ld widens back to v's type).
  Value asStored(Value v, Type elt) {
    return v.getType() == elt ? v : ext(convert(v, elt), v.getType());
  }
  /// vs rounded as st rounds, to mem[at ..] with one vector store aligned
  /// as for ldVector.
  void stVector(llvm::ArrayRef<Value> vs, Value mem, Value at) {
    Type elt = llvm::cast<mlir::MemRefType>(mem.getType()).getElementType();
    SmallVector<Value> xs;
    for (Value v : vs)
      xs.push_back(v.getType() == elt ? v : convert(v, elt));
    auto type = mlir::VectorType::get({static_cast<int64_t>(vs.size())}, elt);
    Value vec = mlir::vector::FromElementsOp::create(b, loc, type, xs);
    mlir::vector::StoreOp::create(b, loc, vec, mem, ValueRange{at}, /*nontemporal=*/false,
                                  llvm::MaybeAlign(vs.size() * elt.getIntOrFloatBitWidth() / 8));
  }
  /// n consecutive elements from `mem` at `base`, as SSA values (registers).
  SmallVector<Value> loadVec(Value mem, Value base, int64_t n) {
    SmallVector<Value> v;
    for (int64_t e = 0; e < n; ++e)
      v.push_back(ld(mem, add(base, idx(e))));
    return v;
  }
  /// sum_e x[e] * mem[base + e], unrolled.
  Value dotVec(llvm::ArrayRef<Value> x, Value mem, Value base) {
    Value acc = mul(x[0], ld(mem, base));
    for (size_t e = 1; e < x.size(); ++e)
      acc = add(acc, mul(x[e], ld(mem, add(base, idx(e)))));
    return acc;
  }
  Value dotRegs(llvm::ArrayRef<Value> x, llvm::ArrayRef<Value> y) {
    Value acc = mul(x[0], y[0]);
    for (size_t e = 1; e < x.size(); ++e)
      acc = add(acc, mul(x[e], y[e]));
    return acc;
  }
  /// A value to store at mem[index].
  struct Store {
    Value value, mem, index;
  };
  /// Thread i's elements i, i + threads, ..., i + (u - 1) threads: every
  /// element's values (`storesAt(at)`, loads included) first, then all the
  /// stores, so the loads of all u are in flight together (a store could
  /// alias a later load and would order them).
  void storeStrided(Value i, int64_t u, int64_t threads,
                    function_ref<SmallVector<Store>(Value at)> storesAt) {
    SmallVector<Store> stores;
    for (int64_t e = 0; e < u; ++e)
      llvm::append_range(stores, storesAt(e == 0 ? i : add(i, idx(e * threads))));
    for (const Store &s : stores)
      st(s.value, s.mem, s.index);
  }
  /// Private per-thread scratch of `n` elements (registers or local memory).
  Value privateBuffer(int64_t n, Type t) {
    return mlir::memref::AllocaOp::create(b, loc, mlir::MemRefType::get({n}, t));
  }
};

/// Builds `body` where `cond` is true (an scf.if), or with `unless` where
/// it is false (its else).
inline void buildIf(KB &k, Value cond, function_ref<void()> body, bool unless = false) {
  auto branch = mlir::scf::IfOp::create(k.b, k.loc, cond, /*withElseRegion=*/unless);
  OpBuilder::InsertionGuard g(k.b);
  k.b.setInsertionPointToStart(unless ? &branch.getElseRegion().front()
                                      : &branch.getThenRegion().front());
  body();
}

} // namespace gptc::codegen

#endif // GPTC_COMPILER_CODEGEN_KERNELBUILDER_H
