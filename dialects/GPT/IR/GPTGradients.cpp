//===- GPTGradients.cpp - reverse-mode gradient rules of gpt ops ---------===//
//
// Each rule builds the operand gradients of one op from its result
// gradients (DifferentiableOpInterface). Rules only emit gpt ops, read the
// forward values they need directly, and return gradients with exactly the
// operands' types so that gpt-autodiff can sum contributions with gpt.add.
//
//===----------------------------------------------------------------------===//

#include "dialects/GPT/IR/GPTOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::gpt;

namespace {

RankedTensorType rtt(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// (..., N) -> (rows, N): the leading dimensions folded into rows.
Value flatten(OpBuilder &b, Location loc, Value v) {
  auto t = rtt(v);
  int64_t last = t.getShape().back();
  auto flat = RankedTensorType::get({t.getNumElements() / last, last}, t.getElementType());
  if (flat == t)
    return v;
  return ReshapeOp::create(b, loc, flat, v);
}

Value reshapeTo(OpBuilder &b, Location loc, Value v, Type type) {
  return v.getType() == type ? v : ReshapeOp::create(b, loc, type, v).getResult();
}

/// Sums (..., N) over every leading dimension, giving (N).
Value sumLeading(OpBuilder &b, Location loc, Value v) {
  auto t = rtt(v);
  if (t.getRank() == 1)
    return v;
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i + 1 < t.getRank(); ++i)
    dims.push_back(i);
  return ReduceOp::create(b, loc, ReduceKind::Sum, v, dims, /*keep_dims=*/false);
}

Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs, bool ta, bool tb) {
  return MatmulOp::create(b, loc, lhs, rhs, ta, tb);
}

} // namespace

//===----------------------------------------------------------------------===//
// Model-level ops
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  // The tables' types: a narrower result (a bf16 residual stream) has a
  // narrower dy, widened as embed_grad reads it.
  auto op = EmbedGradOp::create(b, getLoc(), TypeRange{getWte().getType(), getWpe().getType()},
                                dys[0], getIds(), getWte().getType().getDimSize(0),
                                getWpe().getType().getDimSize(0));
  grads.assign({op.getWteGrad(), op.getWpeGrad(), Value()});
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  auto op = LayerNormGradOp::create(b, getLoc(), dys[0], getInput(), getWeight(),
                                    getEpsilonAttr());
  grads.assign({op.getInputGrad(), op.getWeightGrad(), op.getBiasGrad()});
  return success();
}

LogicalResult LinearOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &grads) {
  // y = x W^T + b  =>  dx = dy W, dW = dy^T x (over all rows), db = sum dy.
  Location loc = getLoc();
  Value dy2 = flatten(b, loc, dys[0]), x2 = flatten(b, loc, getInput());
  Value dx = reshapeTo(b, loc, matmul(b, loc, dy2, getWeight(), false, false),
                       getInput().getType());
  Value dw = matmul(b, loc, dy2, x2, /*ta=*/true, false);
  grads.assign({dx, dw});
  if (getBias())
    grads.push_back(sumLeading(b, loc, dys[0]));
  return success();
}

/// Which operand gradient a product of matmulGradients builds.
enum class GradOf { A, B };

/// The gradients of C = op(A) op(B) (a gpt.matmul or gpt.fp8_matmul):
/// dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, with the transposes folded
/// into the product's flags. `product(lhs, rhs, ta, tb, of, lhsIsGrad)`
/// builds one product: `of` says which gradient it is (so the other factor
/// is B for dA and A for dB), `lhsIsGrad` which operand is dC. A shared rhs
/// sums over the batch: its gradient contracts the flattened rows of A and
/// dC. The flattened operands are built in separate statements so that the
/// order of the emitted reshapes does not depend on the compiler's
/// (unspecified) order of evaluating function arguments.
template <typename Product>
static LogicalResult matmulGradients(Operation *op, OpBuilder &b, Value dc, Value a, Value bm,
                                     bool ta, bool tb, SmallVectorImpl<Value> &grads,
                                     Product product) {
  Location loc = op->getLoc();
  bool sharedRhs = rtt(bm).getRank() == 2 && rtt(a).getRank() > 2;
  if (sharedRhs && ta)
    return op->emitOpError("gradient rule: a shared rank-2 rhs needs an "
                           "untransposed lhs");
  constexpr GradOf dA = GradOf::A, dB = GradOf::B;
  Value da, db;
  if (!ta && !tb) {
    da = product(dc, bm, false, true, dA, true);
    if (sharedRhs) {
      Value a2 = flatten(b, loc, a);
      Value dc2 = flatten(b, loc, dc);
      db = product(a2, dc2, true, false, dB, false);
    } else {
      db = product(a, dc, true, false, dB, false);
    }
  } else if (!ta && tb) {
    da = product(dc, bm, false, false, dA, true);
    if (sharedRhs) {
      Value dc2 = flatten(b, loc, dc);
      Value a2 = flatten(b, loc, a);
      db = product(dc2, a2, true, false, dB, true);
    } else {
      db = product(dc, a, true, false, dB, true);
    }
  } else if (ta && !tb) {
    da = product(bm, dc, false, true, dA, false);
    db = product(a, dc, false, false, dB, false);
  } else {
    da = product(bm, dc, true, true, dA, false);
    db = product(dc, a, true, true, dB, true);
  }
  grads.assign({da, db});
  return success();
}

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &grads) {
  return matmulGradients(*this, b, dys[0], getLhs(), getRhs(), getTransposeLhs(),
                         getTransposeRhs(), grads,
                         [&](Value lhs, Value rhs, bool ta, bool tb, GradOf, bool) {
                           return matmul(b, getLoc(), lhs, rhs, ta, tb);
                         });
}

LogicalResult Fp8MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  // The gradient is quantized as e5m2 (range over precision); the forward
  // operand it meets keeps its own format: B's in dA, A's in dB.
  return matmulGradients(
      *this, b, dys[0], getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs(), grads,
      [&](Value lhs, Value rhs, bool ta, bool tb, GradOf of, bool lhsIsGrad) -> Value {
        Fp8Format other = of == GradOf::A ? getRhsFormat() : getLhsFormat();
        Fp8Format lf = lhsIsGrad ? Fp8Format::E5M2 : other;
        Fp8Format rf = lhsIsGrad ? other : Fp8Format::E5M2;
        return Fp8MatmulOp::create(b, getLoc(), lf, lhs, rf, rhs, ta, tb);
      });
}

LogicalResult BiasAddOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                        SmallVectorImpl<Value> &grads) {
  grads.assign({dys[0], sumLeading(b, getLoc(), dys[0])});
  return success();
}

LogicalResult CausalAttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                                SmallVectorImpl<Value> &grads) {
  // Only y has a gradient: lse is saved for the backward, not a model output.
  grads.push_back(CausalAttentionGradOp::create(b, getLoc(), dys[0], getQkv(), getResult(),
                                                getLse(), getNumHeadsAttr()));
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                             SmallVectorImpl<Value> &grads) {
  grads.assign({CrossEntropyGradOp::create(b, getLoc(), dys[0], getLogits(),
                                           getTargets(), getVocabSizeAttr()),
                Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign({dys[0], dys[0]});
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign({dys[0], NegOp::create(b, getLoc(), dys[0])});
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign({MulOp::create(b, getLoc(), dys[0], getRhs()),
                MulOp::create(b, getLoc(), dys[0], getLhs())});
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  // y = a / b: da = dy / b, db = -dy y / b.
  Location loc = getLoc();
  Value da = DivOp::create(b, loc, dys[0], getRhs());
  Value db = NegOp::create(b, loc, DivOp::create(b, loc, MulOp::create(b, loc, dys[0], getResult()),
                                                 getRhs()));
  grads.assign({da, db});
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(NegOp::create(b, getLoc(), dys[0]));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(MulOp::create(b, getLoc(), dys[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(DivOp::create(b, getLoc(), dys[0], getInput()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &grads) {
  // dy (1 - y^2)
  Location loc = getLoc();
  Value y2 = MulOp::create(b, loc, getResult(), getResult());
  grads.push_back(SubOp::create(b, loc, dys[0], MulOp::create(b, loc, dys[0], y2)));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &grads) {
  // dy / (2 y)
  Location loc = getLoc();
  grads.push_back(DivOp::create(b, loc, ScaleOp::create(b, loc, dys[0], b.getF64FloatAttr(0.5)),
                                getResult()));
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  // y = x^-1/2: dx = -dy y^3 / 2
  Location loc = getLoc();
  Value y3 = MulOp::create(b, loc, getResult(), MulOp::create(b, loc, getResult(), getResult()));
  grads.push_back(
      MulOp::create(b, loc, ScaleOp::create(b, loc, dys[0], b.getF64FloatAttr(-0.5)), y3));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(GeluGradOp::create(b, getLoc(), dys[0], getInput()));
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                        SmallVectorImpl<Value> &grads) {
  grads.push_back(SoftmaxGradOp::create(b, getLoc(), dys[0], getResult()));
  return success();
}

LogicalResult ScaleOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  grads.push_back(ScaleOp::create(b, getLoc(), dys[0], getFactorAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Type and layout ops
//===----------------------------------------------------------------------===//

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(CastOp::create(b, getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                        SmallVectorImpl<Value> &grads) {
  grads.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), dys[0]));
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  grads.push_back(TransposeOp::create(b, getLoc(), dys[0], inverse));
  return success();
}
