//===- Kernels/Random.cpp - the Random kernel family ------------------------===//
//
// batched gpt.random_normal runs (@init); the driver groups the runs. Moved
// from Lowering.cpp (issue 44): its lowerings are LoweringContext members
// (LoweringContext.h), registered by registerRandomLowerings below.
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
/// SplitMix64 on i64 (wrapping multiply, logical shifts).
Value splitmix(KB &k, Value x) {
  auto shr = [&](Value v, int64_t s) { return arith::ShRUIOp::create(k.b, k.loc, v, k.i64(s)); };
  auto xorv = [&](Value p, Value q) { return arith::XOrIOp::create(k.b, k.loc, p, q); };
  x = k.add(x, k.i64(static_cast<int64_t>(0x9E3779B97F4A7C15ull)));
  x = k.mul(xorv(x, shr(x, 30)), k.i64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  x = k.mul(xorv(x, shr(x, 27)), k.i64(static_cast<int64_t>(0x94D049BB133111EBull)));
  return xorv(x, shr(x, 31));
}

/// Elements one thread of the batched random-normal kernels draws.
constexpr int64_t kRandomChunk = 16;

} // namespace

/// A run of gpt.random_normal ops of one seed (@init's parameters) in
/// batched launches of up to kMembersPerKernel outputs: thread j of output
/// i draws its elements j, j + pieces_i, ... (coalesced, kRandomChunk of
/// them). Element e of stream s is Box-Muller of two SplitMix64 draws keyed
/// by (seed, s) at 2e and 2e + 1, so the values do not depend on the
/// batching. (A kernel per op made @init 194 kernels at 1.5B, 58% of the
/// PTX.)
void LoweringContext::lowerRandomNormals(ArrayRef<RandomNormalOp> ops) {
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

void registerRandomLowerings(LoweringRegistry &registry) {
  // gpt.random_normal has no entry: the driver (Lowering.cpp) gathers a
  // run of them and calls lowerRandomNormals at its end.
}

} // namespace gptc::codegen
