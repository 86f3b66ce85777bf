//===- Kernels/Gemm.cpp - the Gemm kernel family ----------------------------===//
//
// gpt.matmul/linear/scaled_matmul and GEMM fusions (the epilogue folds)
// as cuBLASLt GEMM descriptors. Moved from Lowering.cpp (issue 44): its
// lowerings are LoweringContext members (LoweringContext.h), registered by
// registerGemmLowerings below.
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
LogicalResult LoweringContext::lowerMatmul(Operation *op, Value a, Value bm, bool ta, bool tb,
                                   Value bias, GemmEpilogue epilogue, Value aux, Value d) {
  // D: the product, or the GELU's codes of a gpt.scaled_matmul_gelu_fp8
  // (whose product, rounded, is the aux `pre`).
  auto geluFp8 = llvm::dyn_cast<ScaledMatmulGeluFp8Op>(op);
  if (!d)
    d = geluFp8 ? Value(geluFp8.getResult()) : op->getResult(0);
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
  c.source = op;
  program->commands.push_back(std::move(c));
  return success();
}

LogicalResult LoweringContext::lowerLinearOp(Operation *op) {
  auto lower = [&](LinearOp l) {
    return lowerMatmul(op, l.getInput(), l.getWeight(), false, true, l.getBias());
  };
  return lower(llvm::cast<LinearOp>(op));
}

LogicalResult LoweringContext::lowerMatmulOp(Operation *op) {
  auto lower = [&](MatmulOp mm) {
    return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                       mm.getTransposeRhs(), Value());
  };
  return lower(llvm::cast<MatmulOp>(op));
}

LogicalResult LoweringContext::lowerScaledMatmulOp(Operation *op) {
  auto lower = [&](ScaledMatmulOp mm) {
    return lowerMatmul(op, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                       mm.getTransposeRhs(), mm.getBias());
  };
  return lower(llvm::cast<ScaledMatmulOp>(op));
}

LogicalResult LoweringContext::lowerScaledMatmulGeluFp8Op(Operation *op) {
  auto lower = [&](ScaledMatmulGeluFp8Op mm) {
    return lowerMatmul(op, mm.getLhs(), mm.getRhs(), false, true, mm.getBias(),
                       mm.getBias() ? GemmEpilogue::BiasGeluAux : GemmEpilogue::GeluAux,
                       mm.getPre());
  };
  return lower(llvm::cast<ScaledMatmulGeluFp8Op>(op));
}

LogicalResult LoweringContext::lowerGemmFusion(FusionOp fusion, const GemmFusion &gemm) {
  using Epilogue = GemmFusion::Epilogue;
  switch (gemm.epilogue) {
  case Epilogue::Gelu:
    return lowerMatmul(fusion, gemm.lhs, gemm.rhs, gemm.transposeLhs, gemm.transposeRhs,
                       gemm.bias, gemm.bias ? GemmEpilogue::BiasGeluAux : GemmEpilogue::GeluAux,
                       gemm.aux, gemm.result);
  case Epilogue::GeluGrad:
    return lowerMatmul(fusion, gemm.lhs, gemm.rhs, gemm.transposeLhs, gemm.transposeRhs, Value(),
                       GemmEpilogue::DGelu, gemm.pre, gemm.result);
  case Epilogue::GeluGradSum:
    // DGELU_BGRAD sums D over its columns (our rows): the bias gradient.
    return lowerMatmul(fusion, gemm.lhs, gemm.rhs, gemm.transposeLhs, gemm.transposeRhs,
                       gemm.sum, GemmEpilogue::DGeluBGrad, gemm.pre, gemm.result);
  case Epilogue::LhsSum:
    // cuBLASLt's B is our lhs (dY): BGRADB sums it over k, the rows.
    return lowerMatmul(fusion, gemm.lhs, gemm.rhs, gemm.transposeLhs, gemm.transposeRhs,
                       gemm.sum, GemmEpilogue::BGradB, Value(), gemm.result);
  }
  llvm_unreachable("a GemmFusion::Epilogue");
}

void registerGemmLowerings(LoweringRegistry &registry) {
  registry.add<LinearOp>(&LoweringContext::lowerLinearOp);
  registry.add<MatmulOp>(&LoweringContext::lowerMatmulOp);
  registry.add<ScaledMatmulOp>(&LoweringContext::lowerScaledMatmulOp);
  registry.add<ScaledMatmulGeluFp8Op>(&LoweringContext::lowerScaledMatmulGeluFp8Op);
}

} // namespace gptc::codegen
