//===- Fp8Codes.cpp - FP8 codes and scales in kernel bodies --------------===//

#include "compiler/Codegen/Fp8Codes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpt;

namespace gptc::codegen {

/// The FP8 code (an i8) of the f32 `y`: rounded to nearest even and
/// saturated to the largest finite value, as cvt.rn.satfinite does; NaN
/// gives the format's NaN 0x7F (with y's sign). In integer and f32
/// arithmetic, so that both targets run it: y is rounded on the grid of
/// its binade (that of the smallest normal for subnormals), and the
/// rounded value's f32 bits give the code.
Value fp8Bits(KB &k, Value y, Fp8Format format) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  bool e4m3 = format == Fp8Format::E4M3;
  int64_t mantissa = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, minExp = 1 - bias;
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto c = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i32, v).getResult(); };
  auto bits = [&](Value f) { return arith::BitcastOp::create(b, loc, i32, f).getResult(); };
  auto real = [&](Value i) { return arith::BitcastOp::create(b, loc, f32, i).getResult(); };
  auto shr = [&](Value x, int64_t n) { return arith::ShRUIOp::create(b, loc, x, c(n)).getResult(); };
  auto shl = [&](Value x, Value n) { return arith::ShLIOp::create(b, loc, x, n).getResult(); };
  // 2^e for an i32 exponent in the normal range.
  auto pow2 = [&](Value e) { return real(shl(arith::AddIOp::create(b, loc, e, c(127)), c(23))); };
  Value sign = shl(shr(bits(y), 31), c(7));
  Value a = math::AbsFOp::create(b, loc, y);
  Value exponent = arith::SubIOp::create(b, loc, shr(bits(a), 23), c(127));
  Value quantum = arith::SubIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, exponent, c(minExp)), c(mantissa));
  Value scaled = k.mul(a, pow2(arith::SubIOp::create(b, loc, c(0), quantum)));
  Value r = k.mul(math::RoundEvenOp::create(b, loc, scaled), pow2(quantum));
  Value maxFinite = k.f(fp8MaxFinite(format), f32);
  r = k.select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, r, maxFinite),
               maxFinite, r);
  Value rb = bits(r);
  Value rExp = shr(rb, 23);
  Value normal = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rExp, c(127 + minExp));
  Value normalCode = arith::OrIOp::create(
      b, loc, shl(arith::SubIOp::create(b, loc, rExp, c(127 - bias)), c(mantissa)),
      arith::AndIOp::create(b, loc, shr(rb, 23 - mantissa), c((1 << mantissa) - 1)));
  // Below the smallest normal the code is r in units of the quantum.
  Value subnormalCode = arith::FPToUIOp::create(
      b, loc, i32, k.mul(r, k.f(std::ldexp(1.0, mantissa - minExp), f32)));
  Value code = k.select(normal, normalCode, subnormalCode);
  Value nan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, y, y);
  code = k.select(nan, c(0x7F), code);
  code = arith::OrIOp::create(b, loc, code, sign);
  return arith::TruncIOp::create(b, loc, b.getI8Type(), code);
}

/// The FP8 codes of xs. With `cvt` (CUDA, sm_89+) two per cvt.rn.satfinite
/// instruction, which gives the codes fp8Bits computes but for NaN (its
/// canonical 0x7F whatever the sign; both decode to NaN); fp8Bits else.
SmallVector<Value> fp8Codes(KB &k, ArrayRef<Value> xs, Fp8Format format, bool cvt) {
  SmallVector<Value> codes;
  if (!cvt || xs.size() % 2) {
    for (Value x : xs)
      codes.push_back(fp8Bits(k, x, format));
    return codes;
  }
  MLIRContext *ctx = k.b.getContext();
  Type dst = format == Fp8Format::E4M3 ? Type(Float8E4M3FNType::get(ctx))
                                       : Type(Float8E5M2Type::get(ctx));
  auto pair = VectorType::get({2}, k.b.getI8Type());
  for (size_t i = 0; i < xs.size(); i += 2) {
    // The first operand's code is the high byte: element 1 of the pair.
    Value v = NVVM::ConvertF32x2ToF8x2Op::create(k.b, k.loc, pair, xs[i + 1], xs[i],
                                                 NVVM::FPRoundingMode::RN,
                                                 NVVM::SaturationMode::SATFINITE, false, dst);
    codes.push_back(vector::ExtractOp::create(k.b, k.loc, v, 0));
    codes.push_back(vector::ExtractOp::create(k.b, k.loc, v, 1));
  }
  return codes;
}

/// amax > 0 and finite (OGT and OLT are false for NaN): an amax a scale
/// can be taken from.
Value usableAmax(KB &k, Value amax) {
  Type ft = amax.getType();
  return arith::AndIOp::create(
      k.b, k.loc, arith::CmpFOp::create(k.b, k.loc, arith::CmpFPredicate::OGT, amax, k.f(0, ft)),
      arith::CmpFOp::create(k.b, k.loc, arith::CmpFPredicate::OLT, amax, k.f(INFINITY, ft)));
}

} // namespace gptc::codegen
