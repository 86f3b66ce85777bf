//===- GPTFp8Ops.td - the gpt dialect's FP8 ops --------------------------===//
//
// Every op of FP8 training in one place, included by GPTOps.td:
// - the policy's op (gpt.fp8_matmul, from gpt-mixed-precision) and its
//   lowering (gpt-lower-fp8): scales, quantizations, the scaled GEMM;
// - delayed scaling's histories (gpt-fp8-delayed-scaling,
//   gpt-fp8-steady-step);
// - the producers that store FP8 codes themselves and the casts that do a
//   neighbour's work (gpt-fuse-fp8), and the byte transpose they use.
// An op that writes FP8 codes or takes a scale implements
// Fp8ScalingOpInterface (format, scale, history, rounding): passes and
// codegen ask it, not a list of these ops.
//
//===----------------------------------------------------------------------===//

#ifndef GPT_FP8_OPS_TD
#define GPT_FP8_OPS_TD

def GPT_Fp8Scaling : DeclareOpInterfaceMethods<GPT_Fp8ScalingOpInterface>;

//===----------------------------------------------------------------------===//
// The policy and its lowering
//===----------------------------------------------------------------------===//

def GPT_Fp8Format : I32EnumAttr<"Fp8Format", "FP8 operand format", [
    I32EnumAttrCase<"E4M3", 0, "e4m3">,
    I32EnumAttrCase<"E5M2", 1, "e5m2">]> {
  let cppNamespace = "::mlir::gpt";
}

def GPT_Fp8MatmulOp : GPT_InferredOp<"fp8_matmul", [GPT_Differentiable]> {
  let summary = "gpt.matmul with FP8 operands, each scaled by its own amax";
  let description = [{
    The product of `gpt.matmul` (same shapes, transposes and types) with
    each operand quantized first: per tensor, `s = max_finite / amax`
    (1 for an all-zero tensor), `q = round_to_format(s x)` (nearest even,
    saturating at the largest finite value), and the product of the
    quantized operands multiplied by `1 / (s_lhs s_rhs)`, accumulated in
    fp32 and rounded once to the result type. Formats: `e4m3` (3 mantissa
    bits, max 448) for values, `e5m2` (2 bits, max 57344) for gradients;
    not both `e5m2`, as on the tensor cores.

    `--precision=fp8` makes the blocks' `gpt.linear`s FP8 forward
    products (`e4m3` x `e4m3`); the gradient rule quantizes the incoming
    gradient as `e5m2`, so the backward's two products are FP8 as well.

    ```mlir
    %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs}
        : (tensor<8x16xbf16>, tensor<48x16xbf16>) -> tensor<8x48xbf16>
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$lhs_format, GPT_FloatTensor:$lhs,
                       GPT_Fp8Format:$rhs_format, GPT_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs_format $lhs `,` $rhs_format $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_Fp8ScaleOp : GPT_InferredOp<"fp8_scale", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<GPT_Fp8ScalingOpInterface, ["getRecordedHistory"]>]> {
  let summary = "The per-tensor FP8 scale of a tensor and its inverse";
  let description = [{
    With `amax = max |x|`: `scale = max_finite / amax` (1 for an all-zero
    or non-finite amax), the factor `gpt.fp8_quantize` multiplies by, and
    `inverse = 1 / scale`, the dequantization factor a `gpt.scaled_matmul`
    applies. e4m3's max_finite is 448, e5m2's 57344. Depends on the values
    only, not the shape: `gpt-lower-fp8` takes the scale of a reshape's
    input, so that after CSE both layouts of an operand (X, and the X^T
    of its weight gradient) share one. With `gelu` the scale is that of
    `gelu(input)` rounded to the input's type, as a `gpt.gelu` would store
    it (`gpt-lower-fp8` reads a GELU's input where only FP8 ops read its
    output: the GELU is never stored). With `gelu_grad %pre` it is that of
    `gpt.gelu_grad(input, pre)` rounded likewise (`gpt-fuse-fp8`'s cast epilogues).

    With a `history` (delayed scaling, `gpt-fp8-delayed-scaling`): the
    amax is the largest element of the history, the amaxes of the steps
    before, and the input is not read; where that is 0 or not finite (the
    first step) the amax is the input's, as without. `shifted` is the
    history moved one place on, its first element 0, for the
    quantization with this scale to record the input's amax in.

    ```mlir
    %s, %inv = gpt.fp8_scale e5m2 %dy : (tensor<16x48xbf16>) -> (tensor<f32>, tensor<f32>)
    %s2, %inv2, %h1 = gpt.fp8_scale e4m3 %x history %h0
        : (tensor<16x16xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
    %s3, %inv3 = gpt.fp8_scale e5m2 %dh gelu_grad %pre
        : (tensor<16x48xbf16>, tensor<16x48xbf16>) -> (tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$format, GPT_FloatTensor:$input,
                       Optional<GPT_FloatTensor>:$pre, Optional<1DTensorOf<[F32]>>:$history,
                       UnitAttr:$gelu);
  let results = (outs 0DTensorOf<[F32]>:$scale, 0DTensorOf<[F32]>:$inverse,
                      Optional<1DTensorOf<[F32]>>:$shifted);
  let assemblyFormat = [{
    $format $input (`gelu_grad` $pre^)? (`history` $history^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_Fp8QuantizeOp : GPT_InferredOp<"fp8_quantize", [GPT_Fp8Scaling]> {
  let summary = "An FP8 copy of a tensor, scaled";
  let description = [{
    `result = round_to_format(scale * input)`: nearest even, saturating at
    the format's largest finite value (e4m3 448, e5m2 57344), with the
    `scale` of a `gpt.fp8_scale`. With `transpose` the copy is of the
    (M, K) input's transpose, (K, M): the FP8 tensor-core GEMMs read A
    transposed and B not (`gpt-lower-fp8` quantizes each operand in the
    layout its GEMM needs). With `gelu` the copy is of `gelu(input)`,
    rounded to the input's type first (see `gpt.fp8_scale`). With a
    `history` (a `gpt.fp8_scale`'s `shifted`), `recorded` is that history
    with its first element raised to the amax of the values quantized
    (before scaling): the amax delayed scaling takes the next step's scale
    from.

    ```mlir
    %q = gpt.fp8_quantize e5m2 %dy, %s {transpose}
        : (tensor<16x48xbf16>, tensor<f32>) -> tensor<48x16xf8E5M2>
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$format, GPT_FloatTensor:$input, 0DTensorOf<[F32]>:$scale,
                       Optional<1DTensorOf<[F32]>>:$history, UnitAttr:$transpose,
                       UnitAttr:$gelu);
  let results = (outs RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result,
                      Optional<1DTensorOf<[F32]>>:$recorded);
  let assemblyFormat = [{
    $format $input `,` $scale (`history` $history^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GPT_Fp8CastTransposeOp : GPT_InferredOp<"fp8_cast_transpose", [
    DeclareOpInterfaceMethods<GPT_Fp8ScalingOpInterface, ["getRoundedType"]>]> {
  let summary = "Both FP8 layouts of a tensor in one pass";
  let description = [{
    `result` is `gpt.fp8_quantize %input, %scale` and `transposed` is the
    same codes for the input seen as a (rows, columns) matrix (its last
    dimension the columns, the others flattened into rows), transposed:
    (columns, rows). The input is read once for both. `gpt-lower-fp8` pairs
    an operand's two quantizations into one: X for the forward product and
    X^T for the weight gradient, W and W^T, dY and dY^T. The forward's
    bf16 X is then no longer needed by the backward. With `gelu` both are
    copies of `gelu(input)` (see `gpt.fp8_scale`). With a `history`,
    `recorded` is as `gpt.fp8_quantize`'s: the amax taken as the input is
    cast, with no pass of its own. With `rounded_to` (bf16 or f16, narrower
    than the input's type, not with `gelu`) each element is first rounded to
    that type: the codes and amax of `gpt.cast`ing the input to it, without
    storing the cast (`gpt-fuse-fp8`'s `fp8-fold-input-cast`: an f32 master weight read
    as it is, not through a bf16 copy).

    ```mlir
    %q, %qt = gpt.fp8_cast_transpose e4m3 %pre, %s {gelu}
        : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
    %q2, %qt2, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s2 history %h1
        : (tensor<16x16xbf16>, tensor<f32>, tensor<16xf32>)
          -> (tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16xf32>)
    %q3, %qt3 = gpt.fp8_cast_transpose e4m3 %w, %s3 {rounded_to = bf16}
        : (tensor<64x16xf32>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>)
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$format, GPT_FloatTensor:$input, 0DTensorOf<[F32]>:$scale,
                       Optional<1DTensorOf<[F32]>>:$history, UnitAttr:$gelu,
                       OptionalAttr<TypeAttr>:$rounded_to);
  let results = (outs RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result,
                      RankedTensorOf<[F8E4M3FN, F8E5M2]>:$transposed,
                      Optional<1DTensorOf<[F32]>>:$recorded);
  let assemblyFormat = [{
    $format $input `,` $scale (`history` $history^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_ScaledMatmulOp : GPT_Op<"scaled_matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "A GEMM of FP8 tensors, each times its f32 dequantization scale";
  let description = [{
    `result = (lhs_scale * op(lhs)) (rhs_scale * op(rhs))`, accumulated in
    fp32 and rounded once to the result's (wider) type: the lowered
    `gpt.fp8_matmul`, as the tensor cores run it (the scales are the
    `inverse`s of the operands' `gpt.fp8_scale`). Shapes and
    transposes are those of `gpt.matmul`; at most one operand is e5m2.
    `fast_accum` lets the tensor cores fold partial sums less often (faster,
    slightly less accurate; the forward products use it). An optional
    `bias` (N), of the result's element type, is added to every row before
    the one rounding (cuBLASLt's bias epilogue; gpt-fuse-matmul-epilogue
    folds a `gpt.bias_add` of the product into it).

    An optional `accumulate` tensor, of the result's type, is added to the
    f32 product before the rounding: `result = accumulate + product`, as
    cuBLASLt's `beta = 1` computes it into C (the accumulator's bytes when
    nothing reads it later, else a copy). `gpt-fuse-grad-accumulation` sums
    a weight's gradient over the micro-batches this way, in f32.

    ```mlir
    %y = gpt.scaled_matmul %qx, %sx, %qw, %sw bias %b {transpose_rhs}
        : (tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>,
           tensor<48xbf16>) -> tensor<16x48xbf16>
    // dW += dY^T X, in f32 (dY e5m2, X e4m3, both transposed for the TN GEMM).
    %dw1 = gpt.scaled_matmul %qdyt, %sdy, %qxt, %sx accumulate %dw0 {transpose_rhs}
        : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>,
           tensor<48x16xf32>) -> tensor<48x16xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F8E4M3FN, F8E5M2]>:$lhs, 0DTensorOf<[F32]>:$lhs_scale,
                       RankedTensorOf<[F8E4M3FN, F8E5M2]>:$rhs, 0DTensorOf<[F32]>:$rhs_scale,
                       Optional<GPT_FloatTensor>:$bias,
                       Optional<GPT_FloatTensor>:$accumulate,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$fast_accum);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $lhs_scale `,` $rhs `,` $rhs_scale (`bias` $bias^)?
    (`accumulate` $accumulate^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Delayed scaling
//===----------------------------------------------------------------------===//

def GPT_Fp8DelayedScalesOp : GPT_InferredOp<"fp8_delayed_scales"> {
  let summary = "Many FP8 scales from their amax histories alone, in one op";
  let description = [{
    For each `histories[i]` (with `formats[i]`), what a `gpt.fp8_scale`
    with that history computes when its history is usable, without the
    tensor: `amax` is the largest element of the history, `scale =
    max_finite / amax`, `inverse = 1 / scale`, and `shifted` the history
    moved one place on (its first element 0). Where the history holds no
    usable amax (all zeros, or not finite) the scale is 1: unlike
    `gpt.fp8_scale`, there is no tensor to measure.

    Results come in three runs of n: the n scales, the n inverses, the n
    shifted histories. `gpt-fp8-steady-step` makes it from a steady train
    step's history scales, which then read no tensor: one op at the top of
    the step, one kernel launch for all of them.

    ```mlir
    %r:6 = gpt.fp8_delayed_scales (e4m3 %h0, e5m2 %h1) : tensor<16xf32>, tensor<16xf32>
    // %r#0, %r#1: the scales; %r#2, %r#3: the inverses; %r#4, %r#5: shifted
    ```
  }];
  let arguments = (ins Variadic<1DTensorOf<[F32]>>:$histories, DenseI32ArrayAttr:$formats);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    custom<Fp8Histories>($histories, $formats) attr-dict `:` type($histories)
  }];
  let extraClassDeclaration = [{
    /// Entry i's format, scale, inverse and shifted history.
    Fp8Format getFormat(unsigned i) { return static_cast<Fp8Format>(getFormats()[i]); }
    Value getScale(unsigned i) { return getResults()[i]; }
    Value getInverse(unsigned i) { return getResults()[getHistories().size() + i]; }
    Value getShifted(unsigned i) { return getResults()[2 * getHistories().size() + i]; }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FP8 stores (gpt-fuse-fp8)
//===----------------------------------------------------------------------===//

def GPT_Fp8CastTransposeSumOp
    : GPT_InferredOp<"fp8_cast_transpose_sum", [AttrSizedOperandSegments, GPT_Fp8Scaling]> {
  let summary = "gpt.fp8_cast_transpose that also sums the tensor's columns";
  let description = [{
    With `x = input`, or with `gelu_grad %pre` `x = gpt.gelu_grad(input,
    pre)` (rounded to the input's type): `result` and `transposed` are
    `gpt.fp8_cast_transpose`'s codes of `x` (and `recorded` its history),
    and `sum[c]` is the sum of `x[..., c]` over every leading index
    (accumulated in f32, from the GELU gradient before it is rounded, as
    the GELU gradient's column-sum `gpt.fusion` sums it), in the input's type. `gpt-fuse-fp8`'s cast epilogues makes
    it from a backward's FP8 cast of a gradient and the bias gradient's
    column sum: the kernel that reads the gradient's tiles for the codes
    adds up their columns, and with `gelu_grad` the GELU gradient is never
    stored in bf16.

    ```mlir
    %q, %qt, %db = gpt.fp8_cast_transpose_sum e5m2 %dh gelu_grad %pre, %s
        : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<f32>)
          -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>)
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$format, GPT_FloatTensor:$input,
                       Optional<GPT_FloatTensor>:$pre, 0DTensorOf<[F32]>:$scale,
                       Optional<1DTensorOf<[F32]>>:$history);
  let results = (outs RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result,
                      RankedTensorOf<[F8E4M3FN, F8E5M2]>:$transposed,
                      GPT_FloatTensor:$sum,
                      Optional<1DTensorOf<[F32]>>:$recorded);
  let assemblyFormat = [{
    $format $input (`gelu_grad` $pre^)? `,` $scale (`history` $history^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_Fp8CrossEntropyGradOp : GPT_InferredOp<"fp8_cross_entropy_grad", [
    DeclareOpInterfaceMethods<GPT_Fp8ScalingOpInterface,
        ["getFp8Format", "getFp8Scale", "getAmaxHistory", "getRecordedHistory"]>]> {
  let summary = "The logits' gradient as e5m2 codes, with a scale fixed by its bound";
  let description = [{
    `gpt.cross_entropy_grad` quantized as e5m2 with a scale known before
    the gradient exists: every element `dloss (p - onehot) / P` is at most
    `|dloss| / P` in magnitude (`|p_i - [i == target]| <= 1`), so
    `s = 57344 P / |dloss|` (1 where `dloss` is 0 or not finite, or `s`
    overflows f32) never
    saturates. `result = round_e5m2(s dlogits)` (nearest even, as
    `gpt.fp8_quantize`), of the logits' shape; `inverse = 1 / s`, the
    dequantization factor a `gpt.scaled_matmul` takes. The loss kernel
    writes the codes directly: the bf16 gradient is never stored, read for
    an amax or cast. `gpt-fuse-fp8`'s `fp8-cross-entropy-grad` makes it from an FP8 LM
    head's gradient.

    ```mlir
    %q, %inv = gpt.fp8_cross_entropy_grad %dloss, %logits, %targets {vocab_size = 60 : i64}
        : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>)
          -> (tensor<2x8x64xf8E5M2>, tensor<f32>)
    ```
  }];
  let arguments = (ins GPT_Scalar:$grad, GPT_FloatTensor:$logits,
                       GPT_IndexTensor:$targets, GPT_IntOrConfigAttr:$vocab_size);
  let results = (outs RankedTensorOf<[F8E5M2]>:$result, 0DTensorOf<[F32]>:$inverse);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_AddLayerNormFp8Op : GPT_Op<"add_layernorm_fp8", [
    Pure, DeclareOpInterfaceMethods<GPT_Fp8ScalingOpInterface, ["getRoundedType"]>]> {
  let summary = "A residual add and its layernorm, the normalized result stored as FP8 codes, both layouts";
  let description = [{
    `sum = lhs + rhs` (in sum's type; narrower operands widened exactly),
    and `result` and `transposed` the codes
    `gpt.fp8_cast_transpose(y, scale)` gives, where `y` is
    `gpt.layernorm(sum, weight, bias)` rounded to `rounded_to` (the type
    the unfused layernorm stored): the same codes as the layernorm followed by its
    FP8 cast, without storing `y` and reading it back. `transposed` is
    (C, rows), the leading dimensions of `sum` flattened. With a
    `history`, `recorded` is as `gpt.fp8_quantize`'s: the history with its
    first element raised to the amax of `y`. `gpt-fuse-fp8`'s `fp8-layernorm-codes`
    makes it where the scale is known before the layernorm runs (delayed
    scaling's steady step).

    ```mlir
    %sum, %q, %qt, %h1 = gpt.add_layernorm_fp8 e4m3 %h, %x, %w, %b, %s history %h0
        {rounded_to = bf16}
        : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>,
           tensor<f32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins GPT_Fp8Format:$format, GPT_FloatTensor:$lhs, GPT_FloatTensor:$rhs,
                       GPT_FloatTensor:$weight, GPT_FloatTensor:$bias, 0DTensorOf<[F32]>:$scale,
                       Optional<1DTensorOf<[F32]>>:$history, TypeAttr:$rounded_to,
                       DefaultValuedAttr<GPT_EpsilonAttr, "1.0e-5">:$epsilon);
  let results = (outs GPT_FloatTensor:$sum, RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result,
                      RankedTensorOf<[F8E4M3FN, F8E5M2]>:$transposed,
                      Optional<1DTensorOf<[F32]>>:$recorded);
  let assemblyFormat = [{
    $format $lhs `,` $rhs `,` $weight `,` $bias `,` $scale (`history` $history^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_ScaledMatmulGeluFp8Op : GPT_Op<"scaled_matmul_gelu_fp8", [Pure, GPT_Fp8Scaling]> {
  let summary = "gpt.scaled_matmul whose GELU is stored as FP8 codes by the GEMM itself";
  let description = [{
    With `acc = gpt.scaled_matmul(lhs, lhs_scale, rhs, rhs_scale)` in f32
    (plus the optional `bias`): `pre` is `acc` rounded to its element type
    (the pre-activation the backward's GELU gradient reads), `result` the
    codes `round_to_format(scale * gelu(acc))` (tanh approximation,
    saturating) and `recorded` the `history` with its first element set to
    max |gelu(acc)|, the amax delayed scaling takes the next step's scale
    from. One cuBLASLt GEMM computes all three: GELU_AUX(_BIAS) with an FP8
    D, a D scale and amax_D.

    `gpt-fuse-fp8`'s `fp8-gelu-matmul-codes` makes it from a product and the
    `gpt.fp8_cast_transpose {gelu}` of it whose scale exists before the
    product (delayed scaling's steady step); the cast's `history` is a
    shifted one (first element 0), so setting the first element is the
    cast's raising of it. Unlike the cast, the GELU reads `acc` before it
    is rounded to `pre`'s type. The transposed codes the weight gradient
    needs come from a `gpt.fp8_transpose` of `result`.

    ```mlir
    %pre, %q, %h1 = gpt.scaled_matmul_gelu_fp8 e4m3 %qx, %sx, %qw, %sw, %s history %h0
        bias %b {fast_accum}
        : (tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>,
           tensor<f32>, tensor<16xf32>, tensor<64xbf16>)
        -> (tensor<16x64xbf16>, tensor<16x64xf8E4M3FN>, tensor<16xf32>)
    ```

    The rhs is transposed (the forward product's `transpose_rhs`): the
    layout of cuBLASLt's FP8 kernels.
  }];
  let arguments = (ins GPT_Fp8Format:$format,
                       RankedTensorOf<[F8E4M3FN, F8E5M2]>:$lhs, 0DTensorOf<[F32]>:$lhs_scale,
                       RankedTensorOf<[F8E4M3FN, F8E5M2]>:$rhs, 0DTensorOf<[F32]>:$rhs_scale,
                       0DTensorOf<[F32]>:$scale, 1DTensorOf<[F32]>:$history,
                       Optional<GPT_FloatTensor>:$bias, UnitAttr:$fast_accum);
  let results = (outs GPT_FloatTensor:$pre, RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result,
                      1DTensorOf<[F32]>:$recorded);
  let assemblyFormat = [{
    $format $lhs `,` $lhs_scale `,` $rhs `,` $rhs_scale `,` $scale `history` $history
    (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def GPT_Fp8TransposeOp : GPT_InferredOp<"fp8_transpose"> {
  let summary = "FP8 codes seen as a (rows, columns) matrix, transposed";
  let description = [{
    The input's last dimension is the columns and the others flatten into
    rows; the result is (columns, rows), the same codes moved, as
    `gpt.fp8_cast_transpose`'s `transposed`. It copies bytes: for FP8 codes
    that already exist in one layout (`gpt.fp8_cross_entropy_grad`'s), the
    other layout an FP8 GEMM needs costs a read and a write of one byte
    per element.

    ```mlir
    %qt = gpt.fp8_transpose %q : (tensor<2x8x64xf8E5M2>) -> tensor<64x16xf8E5M2>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F8E4M3FN, F8E5M2]>:$input);
  let results = (outs RankedTensorOf<[F8E4M3FN, F8E5M2]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

#endif // GPT_FP8_OPS_TD
