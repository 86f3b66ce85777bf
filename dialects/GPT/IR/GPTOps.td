//===- GPTOps.td - gpt dialect operations --------------------------------===//
//
// Shapes in descriptions use llm.c's letters: B batch, T sequence, C
// channels, H heads, D = C / H, V vocabulary (padded: Vp), maxT block size.
//
//===----------------------------------------------------------------------===//

#ifndef GPT_OPS_TD
#define GPT_OPS_TD

include "dialects/GPT/IR/GPTBase.td"
include "dialects/GPT/IR/GPTAttrs.td"
include "dialects/GPT/IR/GPTInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// An op whose result types follow from its operands and attributes through
/// `inferReturnTypes`; the same rule verifies parsed IR and re-derives types
/// when `gpt-instantiate-model` makes shapes static.
class GPT_InferredOp<string mnemonic, list<Trait> traits = []>
    : GPT_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)>;

/// The op has a gradient rule (buildGradients, in GPTGradients.cpp).
def GPT_Differentiable : DeclareOpInterfaceMethods<GPT_DifferentiableOpInterface>;

//===----------------------------------------------------------------------===//
// Model-level ops
//===----------------------------------------------------------------------===//

def GPT_EmbedOp : GPT_Op<"embed",
    [Pure, InferTypeOpAdaptorWithIsCompatible, GPT_Differentiable]> {
  let summary = "Token embedding plus position embedding";
  let description = [{
    `out[b, t, :] = wte[ids[b, t], :] + wpe[t, :]`. `wte` is (V, C), `wpe` is
    (maxT, C) with T <= maxT, `ids` is (B, T) and the result is (B, T, C).
    An id outside [0, V) is a run-time error.

    The result has the tables' element type, or a narrower float type: the
    sum is taken in the tables' type and rounded once when stored (what
    `gpt-fuse-elementwise` makes of an embedding whose only reader is a
    narrowing `gpt.cast`, as in a bf16 residual stream).

    ```mlir
    %x = gpt.embed %wte, %wpe, %ids
        : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
    %h = gpt.embed %wte, %wpe, %ids
        : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xbf16>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$wte, GPT_FloatTensor:$wpe,
                       GPT_IndexTensor:$ids);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $wte `,` $wpe `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_LayerNormOp : GPT_Op<"layernorm",
    [Pure, InferTypeOpAdaptorWithIsCompatible, GPT_Differentiable]> {
  let summary = "Layer normalisation over the last dimension";
  let description = [{
    `y = (x - mean(x)) / sqrt(var(x) + epsilon) * weight + bias`, with the
    biased variance taken over the last dimension (C), as in PyTorch.

    `weight` and `bias` have one element type; the input has it too, or is
    narrower (a bf16 residual stream normalised with fp32 parameters): the
    statistics and the affine map are computed in the parameters' type,
    widening the input as it is read.

    The result has the input's type, or the same shape in a narrower float
    type: computed in the input's type and rounded once when stored (what
    `gpt-fuse-elementwise` makes of a layernorm whose only reader is a
    narrowing `gpt.cast`).

    ```mlir
    %y = gpt.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %z = gpt.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
    %n = gpt.layernorm %h, %w, %b {epsilon = 1.0e-05 : f64}
        : (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, GPT_FloatTensor:$weight,
                       GPT_FloatTensor:$bias,
                       DefaultValuedAttr<GPT_EpsilonAttr, "1.0e-5">:$epsilon);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_LinearOp : GPT_InferredOp<"linear", [GPT_Differentiable]> {
  let summary = "Affine map with a PyTorch-layout weight: x W^T + b";
  let description = [{
    `x` is (..., K), `weight` is (N, K) as in `torch.nn.Linear` and the
    optional `bias` is (N). The result is (..., N).

    ```mlir
    %qkv = gpt.linear %x, %w, %b
        : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, GPT_FloatTensor:$weight,
                       Optional<GPT_FloatTensor>:$bias);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_MatmulOp : GPT_InferredOp<"matmul", [GPT_Differentiable]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `lhs` is (..., M, K) (or (..., K, M) with `transpose_lhs`), `rhs` is
    (K, N) or (..., K, N) (or the transposes with `transpose_rhs`); a rank-2
    `rhs` is shared by every batch. The result is (..., M, N).

    ```mlir
    // Tied LM head: logits = x wte^T.
    %logits = gpt.matmul %x, %wte {transpose_rhs}
        : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$lhs, GPT_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

include "dialects/GPT/IR/GPTFp8Ops.td"

def GPT_BiasAddOp : GPT_InferredOp<"bias_add", [GPT_Differentiable]> {
  let summary = "Adds a vector along the last dimension";
  let description = [{
    `out[..., n] = x[..., n] + bias[n]`.

    ```mlir
    %y = gpt.bias_add %x, %b : (tensor<2x8x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, GPT_FloatTensor:$bias);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_CausalAttentionOp : GPT_InferredOp<"causal_attention", [GPT_Differentiable]> {
  let summary = "Multi-head causal self-attention on packed q, k, v";
  let description = [{
    `qkv` is (B, T, 3C): q, k and v side by side, each split into
    `num_heads` heads of D = C / H channels. Per head,
    `softmax(mask(q k^T / sqrt(D))) v` with a causal mask; the heads are
    concatenated back to (B, T, C). One op so that fusion can pick a flash
    kernel; `gpt-decompose-attention` rewrites it into matmul, softmax and
    layout ops.

    `lse` (B, H, T), always f32, is each query row's log-sum-exp of its
    scaled scores, `m + log(sum_j exp(s_j - m))`. The forward has it for
    free; `gpt.causal_attention_grad` reads it instead of running the
    forward again.

    ```mlir
    %y, %lse = gpt.causal_attention %qkv {num_heads = 4 : i64}
        : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$qkv, GPT_IntOrConfigAttr:$num_heads);
  let results = (outs GPT_FloatTensor:$result, GPT_FloatTensor:$lse);
  let assemblyFormat = "$qkv attr-dict `:` functional-type(operands, results)";
}

def GPT_CrossEntropyOp : GPT_InferredOp<"cross_entropy", [GPT_Differentiable]> {
  let summary = "Mean softmax cross-entropy over the first vocab_size logits";
  let description = [{
    `logits` is (..., Vp) and `targets` is (...). Columns at or past
    `vocab_size` are padding: they take no part in the softmax. The result is
    the mean over all positions of `logsumexp(logits[:V]) - logits[target]`.
    A target outside [0, vocab_size) is a run-time error. Logits may be
    stored in bf16 or f16: the arithmetic is fp32 and so is the result.

    ```mlir
    %loss = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
        : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$logits, GPT_IndexTensor:$targets,
                       GPT_IntOrConfigAttr:$vocab_size);
  let results = (outs GPT_Scalar:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_RepeatOp : GPT_Op<"repeat", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Applies a block function `count` times, each with its own parameters";
  let description = [{
    Stacks `count` copies of `callee` (for GPT-2, the transformer block).
    The callee's first argument is the activation; every other argument is
    a parameter with a `gpt.param` name. `gpt-instantiate-model` unrolls the
    op and gives copy `i` its own parameters named `<prefix>.<i>.<name>`.

    ```mlir
    %h = gpt.repeat @block(%x) {count = #gpt.cfg<"n_layer">, prefix = "h"}
        : tensor<?x?x?xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, GPT_FloatTensor:$input,
                       GPT_IntOrConfigAttr:$count, StrAttr:$prefix);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$callee `(` $input `)` attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class GPT_UnaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : GPT_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                    InferTypeOpInterface], traits)> {
  let summary = "Elementwise " # desc;
  let description = "Elementwise " # desc # [{.

    ```mlir
    %y = gpt.}] # mnemonic # [{ %x : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class GPT_BinaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : GPT_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                    InferTypeOpInterface], traits)> {
  let summary = "Elementwise " # desc # " of two tensors of one type";
  let description = "Elementwise " # desc # [{; both operands and the result
    have the same type (no implicit broadcasting).

    ```mlir
    %z = gpt.}] # mnemonic # [{ %x, %y : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$lhs, GPT_FloatTensor:$rhs);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def GPT_AddOp : GPT_BinaryOp<"add", "sum", [Commutative, GPT_Differentiable]>;
def GPT_SubOp : GPT_BinaryOp<"sub", "difference", [GPT_Differentiable]>;
def GPT_MulOp : GPT_BinaryOp<"mul", "product", [Commutative, GPT_Differentiable]>;
def GPT_DivOp : GPT_BinaryOp<"div", "quotient", [GPT_Differentiable]>;
def GPT_MaxOp : GPT_BinaryOp<"max", "maximum", [Commutative]>;

def GPT_NegOp : GPT_UnaryOp<"neg", "negation", [GPT_Differentiable]>;
def GPT_ExpOp : GPT_UnaryOp<"exp", "natural exponential", [GPT_Differentiable]>;
def GPT_LogOp : GPT_UnaryOp<"log", "natural logarithm", [GPT_Differentiable]>;
def GPT_TanhOp : GPT_UnaryOp<"tanh", "hyperbolic tangent", [GPT_Differentiable]>;
def GPT_SqrtOp : GPT_UnaryOp<"sqrt", "square root", [GPT_Differentiable]>;
def GPT_RsqrtOp : GPT_UnaryOp<"rsqrt", "reciprocal square root", [GPT_Differentiable]>;
def GPT_GeluOp : GPT_UnaryOp<"gelu",
    "GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", [GPT_Differentiable]>;
def GPT_SoftmaxOp : GPT_UnaryOp<"softmax", "softmax over the last dimension", [GPT_Differentiable]>;

def GPT_ScaleOp : GPT_Op<"scale", [Pure, SameOperandsAndResultType,
                                   InferTypeOpInterface, GPT_Differentiable]> {
  let summary = "Multiplies every element by a constant";
  let description = [{
    ```mlir
    %y = gpt.scale %x {factor = 0.125 : f64} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, F64Attr:$factor);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def GPT_CausalMaskOp : GPT_Op<"causal_mask", [Pure, SameOperandsAndResultType,
                                              InferTypeOpInterface]> {
  let summary = "Sets scores above the diagonal to -inf";
  let description = [{
    For (..., T, T) attention scores, `out[..., i, j] = -inf` where j > i and
    `x[..., i, j]` elsewhere.

    ```mlir
    %m = gpt.causal_mask %s : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def GPT_ConstantOp : GPT_Op<"constant", [Pure, ConstantLike]> {
  let summary = "A tensor with every element equal to one value";
  let description = [{
    ```mlir
    %one = gpt.constant 1.0 : tensor<16xf32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
  // ConstantLike ops must fold to their value: pattern drivers deduplicate
  // constants by (folded value, type).
  let hasFolder = 1;
}

def GPT_CastOp : GPT_Op<"cast", [Pure, SameOperandsAndResultShape,
                                 GPT_Differentiable]> {
  let summary = "Converts the element type (f32, bf16, f16, f64)";
  let description = [{
    Rounds to nearest even when narrowing.

    ```mlir
    %h = gpt.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Reductions and layout ops
//===----------------------------------------------------------------------===//

def GPT_ReduceOp : GPT_InferredOp<"reduce"> {
  let summary = "Sum, mean or max over a set of dimensions";
  let description = [{
    Reduces `input` over `dims` (sorted, unique). With `keep_dims` the
    reduced dimensions stay as size 1.

    ```mlir
    // Bias gradient: sum over (B, T).
    %db = gpt.reduce sum %dy dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
    ```
  }];
  let arguments = (ins GPT_ReduceKind:$kind, GPT_FloatTensor:$input,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `dims` $dims (`keep_dims` $keep_dims^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GPT_ReshapeOp : GPT_Op<"reshape", [Pure, GPT_Differentiable]> {
  let summary = "Reinterprets a row-major tensor with another static shape";
  let description = [{
    The element count must not change.

    ```mlir
    %q4 = gpt.reshape %q : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
    ```
  }];
  let arguments = (ins GPT_AnyTensor:$input);
  let results = (outs GPT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def GPT_TransposeOp : GPT_InferredOp<"transpose", [GPT_Differentiable]> {
  let summary = "Permutes dimensions";
  let description = [{
    `out` dimension i is `input` dimension `permutation[i]`.

    ```mlir
    %t = gpt.transpose %q4 [0, 2, 1, 3] : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_SliceOp : GPT_InferredOp<"slice"> {
  let summary = "Takes `size` consecutive entries of one dimension";
  let description = [{
    ```mlir
    // k out of packed qkv (B, T, 3C).
    %k = gpt.slice %qkv {dim = 2 : i64, start = 16 : i64, size = 16 : i64}
        : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins GPT_AnyTensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$size);
  let results = (outs GPT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradient ops (produced by gpt-autodiff)
//===----------------------------------------------------------------------===//

def GPT_EmbedGradOp : GPT_Op<"embed_grad", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Gradients of gpt.embed: scatter-add into wte rows, sum into wpe rows";
  let description = [{
    `dwte[ids[b, t]] += dy[b, t]` and `dwpe[t] += dy[b, t]`; rows that no
    token reaches stay zero. `dy` is (B, T, C), `ids` (B, T); `dwte` is
    (vocab_rows, C) and `dwpe` (position_rows, C).

    The gradients have dy's element type, or one wider float type for both:
    a narrow dy is then widened as it is read, exactly (what
    `gpt-fuse-elementwise` makes of a widening `gpt.cast` feeding dy, the
    gradient of a narrow residual stream reaching fp32 tables).

    ```mlir
    %dwte, %dwpe = gpt.embed_grad %dy, %ids {vocab_rows = 64 : i64, position_rows = 16 : i64}
        : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> (tensor<64x16xf32>, tensor<16x16xf32>)
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$grad, GPT_IndexTensor:$ids,
                       I64Attr:$vocab_rows, I64Attr:$position_rows);
  let results = (outs GPT_FloatTensor:$wte_grad, GPT_FloatTensor:$wpe_grad);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_LayerNormGradOp : GPT_InferredOp<"layernorm_grad"> {
  let summary = "Gradients of gpt.layernorm with respect to input, weight and bias";
  let description = [{
    Recomputes the row statistics from the saved input `x`, then
    `dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat))`,
    `dweight = sum(dy xhat)`, `dbias = sum(dy)` over all rows. `dy` has
    x's shape, in x's element type or a narrower float type that is read
    widened (what `gpt-fuse-elementwise` makes of a widening `gpt.cast`
    feeding it); the results have x's and weight's types.

    ```mlir
    %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w {epsilon = 1.0e-05 : f64}
        : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$grad, GPT_FloatTensor:$input,
                       GPT_FloatTensor:$weight,
                       DefaultValuedAttr<GPT_EpsilonAttr, "1.0e-5">:$epsilon);
  let results = (outs GPT_FloatTensor:$input_grad, GPT_FloatTensor:$weight_grad,
                      GPT_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_GeluGradOp : GPT_Op<"gelu_grad", [Pure, SameOperandsAndResultType,
                                          InferTypeOpInterface]> {
  let summary = "Gradient of the tanh-approximate GELU: dy * gelu'(x)";
  let description = [{
    ```mlir
    %dx = gpt.gelu_grad %dy, %x : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$grad, GPT_FloatTensor:$input);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def GPT_SoftmaxGradOp : GPT_Op<"softmax_grad", [Pure, SameOperandsAndResultType,
                                                InferTypeOpInterface]> {
  let summary = "Gradient of a last-dimension softmax from its output";
  let description = [{
    `dx = y (dy - sum(dy y))`, the sum over the last dimension.

    ```mlir
    %dx = gpt.softmax_grad %dy, %y : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$grad, GPT_FloatTensor:$output);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($result)";
}

def GPT_CausalAttentionGradOp : GPT_InferredOp<"causal_attention_grad"> {
  let summary = "Gradient of gpt.causal_attention with respect to packed qkv";
  let description = [{
    Recomputes the attention probabilities from the saved `qkv` and the
    forward's row log-sum-exp `lse` (B, H, T), as a flash backward does, and
    returns d qkv, (B, T, 3C), for `dy` (B, T, C). `output` is the forward's
    result y: D_i = dy_i . y_i is the softmax-backward row term. One op so
    that fusion can replace it with a flash-attention backward kernel.

    ```mlir
    %dqkv = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 2 : i64}
        : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>,
           tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$grad, GPT_FloatTensor:$qkv,
                       GPT_FloatTensor:$output, GPT_FloatTensor:$lse,
                       GPT_IntOrConfigAttr:$num_heads);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $qkv `,` $output `,` $lse attr-dict `:` functional-type(operands, results)
  }];
}

def GPT_CrossEntropyGradOp : GPT_InferredOp<"cross_entropy_grad"> {
  let summary = "Gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `dlogits[p, i] = dloss (softmax(logits[p, :V])[i] - [i == target]) / P`
    for the P positions; padded columns (i >= vocab_size) get zero.

    ```mlir
    %dl = gpt.cross_entropy_grad %dloss, %logits, %targets {vocab_size = 60 : i64}
        : (tensor<f32>, tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins GPT_Scalar:$grad, GPT_FloatTensor:$logits,
                       GPT_IndexTensor:$targets, GPT_IntOrConfigAttr:$vocab_size);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer ops (produced by gpt-insert-optimizer)
//===----------------------------------------------------------------------===//

def GPT_ScheduleKind : I32EnumAttr<"ScheduleKind", "learning-rate schedule", [
    I32EnumAttrCase<"Constant", 0, "constant">,
    I32EnumAttrCase<"Cosine", 1, "cosine">,
    I32EnumAttrCase<"Linear", 2, "linear">]> {
  let cppNamespace = "::mlir::gpt";
}

def GPT_LRScheduleOp : GPT_Op<"lr_schedule", [Pure]> {
  let summary = "Learning rate at a step: linear warm-up, then cosine/linear decay";
  let description = [{
    As llm.c: for 0-based `step` < `warmup_steps`,
    `lr = max_lr (step + 1) / warmup_steps`; after it, with
    `r = (step - warmup_steps) / (total_steps - warmup_steps)` clamped to
    [0, 1], cosine gives `min_lr + 0.5 (1 + cos(pi r)) (max_lr - min_lr)`,
    linear `max_lr - r (max_lr - min_lr)`; constant is always `max_lr`.

    ```mlir
    %lr = gpt.lr_schedule cosine %step {max_lr = 6.0e-04 : f64, min_lr = 6.0e-05 : f64,
                                        warmup_steps = 700 : i64, total_steps = 5000 : i64}
        : (tensor<i32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins GPT_ScheduleKind:$kind, 0DTensorOf<[I32]>:$step,
                       F64Attr:$max_lr, F64Attr:$min_lr, I64Attr:$warmup_steps,
                       I64Attr:$total_steps);
  let results = (outs GPT_Scalar:$result);
  let assemblyFormat = "$kind $step attr-dict `:` functional-type(operands, results)";
}

def GPT_GlobalNormOp : GPT_Op<"global_norm", [Pure]> {
  let summary = "The L2 norm of all given tensors taken together";
  let description = [{
    `sqrt(sum over every tensor of sum(x^2))`, accumulated in the result's
    precision: the gradient norm for clipping.

    ```mlir
    %norm = gpt.global_norm %g0, %g1 : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<GPT_FloatTensor>:$inputs);
  let results = (outs GPT_Scalar:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def GPT_AdamWOp : GPT_Op<"adamw", [Pure, AllTypesMatch<["param", "grad", "m", "v",
                                                         "new_param", "new_m", "new_v"]>]> {
  let summary = "One AdamW update of a parameter and its moments";
  let description = [{
    With `g = grad * grad_scale` and `t = step + 1` (`step` is 0-based):
    `m' = b1 m + (1 - b1) g`, `v' = b2 v + (1 - b2) g^2`,
    `p' = p - lr (m' / (1 - b1^t) / (sqrt(v' / (1 - b2^t)) + eps) + wd p)`,
    as torch.optim.AdamW. `grad_scale` carries gradient clipping and the
    1/micro-steps factor of gradient accumulation.

    ```mlir
    %p1, %m1, %v1 = gpt.adamw %p, %g, %m, %v, %lr, %step, %scale
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
        : tensor<16x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$param, GPT_FloatTensor:$grad,
                       GPT_FloatTensor:$m, GPT_FloatTensor:$v, GPT_Scalar:$lr,
                       0DTensorOf<[I32]>:$step, GPT_Scalar:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay);
  let results = (outs GPT_FloatTensor:$new_param, GPT_FloatTensor:$new_m,
                      GPT_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_scale attr-dict `:`
    type($param) `,` type($lr) `,` type($step) `,` type($grad_scale)
  }];
}

def GPT_AdamWMultiOp : GPT_Op<"adamw_multi", [Pure, AttrSizedOperandSegments,
                                                AttrSizedResultSegments]> {
  let summary = "AdamW updates of many parameters in one op (gpt-fuse-adamw)";
  let description = [{
    `gpt.adamw` applied to every (`params[i]`, `grads[i]`, `ms[i]`, `vs[i]`)
    with weight decay `weight_decays[i]`; the step, learning rate, gradient
    scale, betas and epsilon are shared. Result `new_params[i]` (and
    `new_ms[i]`, `new_vs[i]`) is bit for bit the `new_param` of the
    `gpt.adamw` it replaces. Codegen updates all parameters in one kernel
    launch per gradient element type instead of one per parameter.

    A gradient may be narrower than its parameter (bf16 for an f32
    parameter, from gpt-fuse-adamw's `narrow-grads`): it is widened as it
    is loaded, which is exact, so the update is that of the widened f32
    gradient. The types then list the gradients' after `grads`:
    `: (tensor<16x16xf32>) grads (tensor<16x16xbf16>), tensor<f32>, ...`.

    ```mlir
    %p:2, %m:2, %v:2 = gpt.adamw_multi (%p0, %p1), (%g0, %g1), (%m0, %m1), (%v0, %v1),
        %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64,
                            weight_decays = array<f64: 0.1, 0.0>}
        : (tensor<16x16xf32>, tensor<16xf32>), tensor<f32>, tensor<i32>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<GPT_FloatTensor>:$params, Variadic<GPT_FloatTensor>:$grads,
                       Variadic<GPT_FloatTensor>:$ms, Variadic<GPT_FloatTensor>:$vs,
                       GPT_Scalar:$lr, 0DTensorOf<[I32]>:$step, GPT_Scalar:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       DenseF64ArrayAttr:$weight_decays);
  let results = (outs Variadic<GPT_FloatTensor>:$new_params,
                      Variadic<GPT_FloatTensor>:$new_ms, Variadic<GPT_FloatTensor>:$new_vs);
  let assemblyFormat = [{
    ` ` `(` $params `)` `,` `(` $grads `)` `,` `(` $ms `)` `,` `(` $vs `)` `,` $lr `,` $step `,`
    $grad_scale attr-dict `:` custom<AdamWMultiTypes>(type($params), type($grads), type($ms),
    type($vs), type($new_params), type($new_ms), type($new_vs)) `,` type($lr) `,` type($step)
    `,` type($grad_scale)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Initialisation ops (produced by gpt-insert-init)
//===----------------------------------------------------------------------===//

def GPT_RandomNormalOp : GPT_Op<"random_normal", [Pure]> {
  let summary = "Counter-based N(0, std^2) samples, identical on every target";
  let description = [{
    Element `i` is `std * z` where z comes from Box-Muller on two uniforms
    drawn from SplitMix64 of (seed, stream, i). Being a pure function of the
    index, any device produces the same tensor in any order.

    ```mlir
    %w = gpt.random_normal %seed {stream = 3 : i64, std = 2.0e-02 : f64}
        : (tensor<i32>) -> tensor<48x16xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I32]>:$seed, I64Attr:$stream, F64Attr:$std);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$seed attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data-parallel collectives (produced by gpt-insert-all-reduce)
//===----------------------------------------------------------------------===//

def GPT_AllReduceOp : GPT_Op<"all_reduce", [InferTypeOpAdaptor]> {
  let summary = "Sum, mean or maximum of tensors across the ranks of a data-parallel step";
  let description = [{
    Every rank passes the same list of tensors; result `i` is, on every rank,
    the sum (`sum`), the mean (`mean`) or the elementwise maximum (`max`) of
    input `i` over the ranks: exactly `world_size` of them, or, where
    `world_size` is 0, as many as run the executable (the runtime divides
    by its rank count; on one rank it skips the op, whose results are then
    its inputs). One op is one bucket: the runtime issues it as one collective on
    the communication stream as soon as its inputs are computed, so it
    overlaps the compute that follows it. `bucket` numbers the buckets in
    issue order; `bytes` is the bucket's payload.

    The op synchronises ranks, so it has side effects: CSE must not merge
    it and DCE must not drop it.

    ```mlir
    %g0r, %g1r = gpt.all_reduce mean %g0, %g1 {bucket = 0 : i64, bytes = 4160 : i64,
                                               world_size = 4 : i64}
        : tensor<64x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins GPT_ReduceKind:$kind, Variadic<GPT_FloatTensor>:$inputs,
                       I64Attr:$bucket, I64Attr:$bytes, I64Attr:$world_size);
  let results = (outs Variadic<GPT_FloatTensor>:$results);
  let assemblyFormat = "$kind $inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def GPT_ReduceScatterOp : GPT_Op<"reduce_scatter", [InferTypeOpAdaptor]> {
  let summary = "ZeRO-1: this rank's slice of the sum, mean or maximum over the ranks";
  let description = [{
    Result `i` is a 1-D tensor of `numel(input i) / world_size` elements:
    elements `[rank * n, (rank + 1) * n)` of the flattened input `i`
    reduced over the `world_size` ranks (`world_size` >= 2, each input's
    element count a multiple of it), the rank known only at run time.
    The sharded half of `gpt.all_reduce` (gpt-shard-optimizer): a rank
    keeps only the gradients of the parameters it updates. One op is one
    bucket, issued on the communication stream as soon as its inputs are
    computed; `bucket` numbers the step's collectives in issue order and
    `bytes` is the inputs' payload.

    ```mlir
    %s0, %s1 = gpt.reduce_scatter mean %g0, %g1 {bucket = 0 : i64, bytes = 4160 : i64,
                                                 world_size = 2 : i64}
        : tensor<64x16xf32>, tensor<16xf32>
    // %s0: tensor<512xf32>, %s1: tensor<8xf32>
    ```
  }];
  let arguments = (ins GPT_ReduceKind:$kind, Variadic<GPT_FloatTensor>:$inputs,
                       I64Attr:$bucket, I64Attr:$bytes, I64Attr:$world_size);
  let results = (outs Variadic<GPT_FloatTensor>:$results);
  let assemblyFormat = "$kind $inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def GPT_AllGatherOp : GPT_Op<"all_gather", [AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "ZeRO-1: every rank's slice, concatenated in rank order";
  let description = [{
    The inverse of `gpt.reduce_scatter`'s slicing: result `i`, of `inits`
    `i`'s type (`world_size` times input `i`'s element count), holds,
    flattened, the 1-D input `i` of rank 0, then of rank 1, ... Each rank
    updates its slice of a parameter; the gather gives every rank the whole
    updated parameter. Result `i` may take the bytes of `inits` `i` (the
    parameter it replaces; its value is not read), as a destination. Issued
    on the communication stream like the other collectives; it synchronises
    ranks, so it has side effects.

    ```mlir
    %w, %b = gpt.all_gather %s0, %s1 into %w0, %b0 {bucket = 2 : i64, bytes = 2080 : i64,
                                                    world_size = 2 : i64}
        : tensor<512xf32>, tensor<8xf32> into tensor<64x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Variadic<GPT_FloatTensor>:$inputs, Variadic<GPT_FloatTensor>:$inits,
                       I64Attr:$bucket, I64Attr:$bytes, I64Attr:$world_size);
  let results = (outs Variadic<GPT_FloatTensor>:$results);
  let assemblyFormat =
      "$inputs `into` $inits attr-dict `:` type($inputs) `into` type($inits)";
  let hasVerifier = 1;
}

def GPT_RankSliceOp : GPT_Op<"rank_slice", [Pure]> {
  let summary = "ZeRO-1: this rank's slice of a replicated tensor";
  let description = [{
    A 1-D copy of elements `[rank * n, (rank + 1) * n)` of the flattened
    input, `n = numel(input) / world_size`, the rank known at run time: the
    slice of a parameter whose update this rank owns. The same slicing as
    `gpt.reduce_scatter`, without the reduction.

    ```mlir
    %p = gpt.rank_slice %w {world_size = 2 : i64} : (tensor<64x16xf32>) -> tensor<512xf32>
    ```
  }];
  let arguments = (ins GPT_FloatTensor:$input, I64Attr:$world_size);
  let results = (outs GPT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion (produced by gpt-fuse-elementwise and gpt-fuse-matmul-epilogue)
//===----------------------------------------------------------------------===//

def GPT_FusionOp : GPT_Op<"fusion", [Pure, IsolatedFromAbove, SingleBlock]> {
  let summary = "Ops computed together: one kernel, intermediates in registers";
  let description = [{
    The body is a block of elementwise gpt ops (cast, add, sub, mul, div,
    max, neg, exp, log, tanh, sqrt, rsqrt, gelu, gelu_grad, scale,
    bias_add, constant) on the block arguments, which are the operands,
    ending in `gpt.yield` of the results. Its meaning is the body's, op by
    op, bf16/f16 values rounded as if stored: a fused step computes the same
    bits as the unfused one. Codegen makes one kernel: result `k` is
    computed for each of its own indices `i` (the bias of a `gpt.bias_add`
    at `i` modulo its length), so independent results of different sizes
    (the weight casts of mixed precision) share one launch too.

    A row fusion adds one `gpt.layernorm` (its row op) to the body: the
    elementwise ops compute its input, which the fusion yields (stores),
    its weight and bias are operands, and its result is yielded and read by
    no body op. Every result has the row op's shape. Codegen makes one row
    kernel: each row's elementwise values are computed and stored, then
    normalised without reading them back (a residual add and the
    layernorm of the sum, say, where two kernels would read the sum again).

    A column-sum fusion adds one `gpt.reduce sum` over all but the last
    dimension of a value the body computes (its epilogue), yielded
    directly or through casts; every other result has that value's shape.
    The sum reads the value as computed, before any cast rounds it. Codegen
    makes one column reduction whose first stage computes and stores the
    elementwise results as it reads each element (the GELU gradient and
    the bias gradient of the layer before it, say). The summed value may
    instead be a `gpt.causal_attention_grad` of the operands (widened or
    not), yielded with its sum and nothing else: the flash backward kernels
    add up the rows of each tile they store (the qkv projection's bias
    gradient), and the scalar kernels (Host, or no flash) sum the gradient
    as stored, within its rounding.

    A row-gradient fusion adds one `gpt.layernorm_grad` (its row op), whose
    gradient, input and weight are operands (or widening casts of them) and
    whose weight and bias gradients are yielded and read by no body op; the
    elementwise ops after it read its input gradient (its epilogue), and
    every other result has the input's shape. Codegen makes layernorm_grad's
    row kernels, each row's input gradient passed through the epilogue in
    registers and only the epilogue's results stored (the residual
    gradient joining dx, and its bf16 copy for the next GEMMs, say).

    A GEMM fusion holds one `gpt.linear` or `gpt.matmul` of the operands
    (widened or not: its result is the GEMM's f32 accumulator) and an
    epilogue that reads the accumulator before it is rounded: its `gelu`,
    yielded with the accumulator (the pre-activation); a `gelu_grad` of it
    at an operand, and maybe that gradient's column sum (the bias gradient
    of the layer before the GELU); or, for a `gpt.matmul {transpose_lhs}`,
    the column sums of its lhs (dW and db of a linear layer from dY). Each
    epilogue value is yielded once, narrowed by at most one cast. Codegen
    makes one cuBLASLt GEMM with the GELU_AUX(_BIAS), DGELU, DGELU_BGRAD or
    BGRADB epilogue. Unlike the other kinds, it is not the unfused ops'
    bits: where they rounded the GEMM's result before the epilogue read it,
    the body says it reads the accumulator.

    ```mlir
    %y, %yh = gpt.fusion (%x, %b) : (tensor<8x48xf32>, tensor<48xf32>)
        -> (tensor<8x48xf32>, tensor<8x48xbf16>) {
    ^bb0(%xa: tensor<8x48xf32>, %ba: tensor<48xf32>):
      %0 = gpt.bias_add %xa, %ba : (tensor<8x48xf32>, tensor<48xf32>) -> tensor<8x48xf32>
      %1 = gpt.gelu %0 : tensor<8x48xf32>
      %2 = gpt.cast %1 : tensor<8x48xf32> to tensor<8x48xbf16>
      gpt.yield %1, %2 : tensor<8x48xf32>, tensor<8x48xbf16>
    }
    // A row fusion: the residual sum and its layernorm.
    %sum, %ln = gpt.fusion (%h, %x, %w, %c)
        : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>) {
    ^bb0(%ha: tensor<2x8x16xbf16>, %xa: tensor<2x8x16xf32>, %wa: tensor<16xf32>, %ca: tensor<16xf32>):
      %0 = gpt.cast %ha : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
      %1 = gpt.add %0, %xa : tensor<2x8x16xf32>
      %2 = gpt.layernorm %1, %wa, %ca {epsilon = 1.0e-05 : f64}
          : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
      gpt.yield %1, %2 : tensor<2x8x16xf32>, tensor<2x8x16xbf16>
    }
    // A row-gradient fusion: dx joins the residual gradient, stored in f32
    // and bf16; dx itself is never stored.
    %g, %gh, %dw, %db = gpt.fusion (%dy, %x, %w, %acc)
        : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>)
        -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) {
    ^bb0(%dya: tensor<2x8x16xbf16>, %xa: tensor<2x8x16xf32>, %wa: tensor<16xf32>, %acca: tensor<2x8x16xf32>):
      %dx, %dwa, %dba = gpt.layernorm_grad %dya, %xa, %wa
          : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>)
          -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
      %0 = gpt.add %acca, %dx : tensor<2x8x16xf32>
      %1 = gpt.cast %0 : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
      gpt.yield %0, %1, %dwa, %dba : tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>
    }
    // A GEMM fusion: the MLP's fc layer and its GELU, which reads the f32
    // accumulator; the pre-activation is stored for the backward.
    %h, %pre = gpt.fusion (%x, %w, %c)
        : (tensor<16x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>)
        -> (tensor<16x64xbf16>, tensor<16x64xbf16>) {
    ^bb0(%xa: tensor<16x16xbf16>, %wa: tensor<64x16xbf16>, %ca: tensor<64xbf16>):
      %0 = gpt.cast %xa : tensor<16x16xbf16> to tensor<16x16xf32>
      %1 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
      %2 = gpt.cast %ca : tensor<64xbf16> to tensor<64xf32>
      %3 = gpt.linear %0, %1, %2 : (tensor<16x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<16x64xf32>
      %4 = gpt.gelu %3 : tensor<16x64xf32>
      %5 = gpt.cast %4 : tensor<16x64xf32> to tensor<16x64xbf16>
      %6 = gpt.cast %3 : tensor<16x64xf32> to tensor<16x64xbf16>
      gpt.yield %5, %6 : tensor<16x64xbf16>, tensor<16x64xbf16>
    }
    ```
  }];
  let arguments = (ins Variadic<GPT_FloatTensor>:$inputs);
  let results = (outs Variadic<GPT_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let extraClassDeclaration = [{
    /// The row op of a row fusion; null for another kind.
    LayerNormOp getRowOp();
    /// The column sum of a column-sum fusion; null for another kind.
    ReduceOp getColumnSum();
    /// The row op of a row-gradient fusion; null for another kind.
    LayerNormGradOp getRowGradOp();
  }];
  let hasVerifier = 1;
}

def GPT_YieldOp : GPT_Op<"yield", [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "The results of a gpt.fusion body";
  let description = [{
    ```mlir
    gpt.yield %1, %2 : tensor<8x48xf32>, tensor<8x48xbf16>
    ```
  }];
  let arguments = (ins Variadic<GPT_FloatTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // GPT_OPS_TD
