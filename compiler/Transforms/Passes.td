//===- Passes.td - gptc compiler passes ----------------------------------===//

#ifndef GPTC_COMPILER_TRANSFORMS_PASSES_TD
#define GPTC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Precision phase
//===----------------------------------------------------------------------===//

def MixedPrecisionPass : Pass<"gpt-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Mixed precision: bf16 matmuls with fp32 master weights, statistics and loss";
  let description = [{
    Rewrites `function` (default `forward`) for the precision `policy`:

      * `fp32`: the identity.
      * `bf16`: `gpt.linear` and `gpt.matmul` take bf16 operands (a
        `gpt.cast` of each fp32 operand, parameters included) and give a
        bf16 result; the GEMM still accumulates in fp32. `gpt.layernorm`,
        `gpt.softmax`, `gpt.reduce` and the other statistics ops (their
        gradients, `gpt.global_norm`, `gpt.adamw`) get fp32 operands.
        `gpt.cross_entropy` reads the bf16 logits as they are (its
        arithmetic and its loss are fp32), so its gradient is bf16 too. Every other op runs in its operands' type, and
        operands of mixed types are promoted to the widest (the residual
        stream `x + attn(x)` stays fp32). Values the function returns keep
        their declared types.
      * `fp16`: the same with fp16 in place of bf16. fp16 has 5 exponent
        bits, so gradients below about 6e-8 flush to zero: compile with
        `--loss-scale` (gpt-autodiff and gpt-insert-optimizer's
        `loss-scale`). The flash attention kernels are bf16 only, so fp16
        attention runs on the scalar kernels.
      * `fp8`: bf16, and then every `gpt.linear` (the blocks' four layers;
        the tied LM head is a `gpt.matmul` and stays bf16) becomes a
        `gpt.fp8_matmul e4m3 x e4m3` of its bf16 operands plus a
        `gpt.bias_add`. Each operand is quantized with a scale from its own
        amax (current scaling); gpt-autodiff then quantizes the incoming
        gradients as e5m2, so the backward's dX and dW products are FP8 too.
        With `fp8-lm-head` the LM head's `gpt.matmul` (whose result is a
        `gpt.cross_entropy`'s logits) becomes an e4m3 x e4m3
        `gpt.fp8_matmul` as well, and its backward quantizes the logits'
        gradient as e5m2: the largest GEMMs of the small models
        (docs/precision.md has what it buys and costs).
        The reference interpreter runs it (`gptc run-reference
        --precision=fp8`); gpt-lower-fp8 (memory-plan phase) turns each
        product into quantize kernels and an FP8 GEMM.

    Option `fp8-exclude` (with fp8) is the per-layer part of the policy: the
    linear layers whose weight's parameter name starts with one of its
    prefixes stay bf16 `gpt.linear`s (say the first and last blocks, which
    FP8 recipes often keep in bf16). A prefix that names no linear weight
    is an error, so a typo does not silently leave the model all FP8.

    Option `fp32-ops` (with bf16, fp16 or fp8) is the per-op part: the ops
    of the kinds it lists compute in fp32 whatever the policy. `attention`:
    each `gpt.causal_attention` takes fp32 q, k, v (casts of the GEMM's
    narrow result), so its scores, softmax and output are fp32, and the
    output projection's GEMM casts its input back; the backward follows
    through the casts' gradients. On CUDA fp32 attention runs on the scalar
    kernels (the flash kernels are bf16 only). An unknown kind is an error.

    Option `narrow-residual` (with bf16 or fp16): the residual stream is in the
    compute type too, as in llm.c, where by default it stays fp32 as
    under torch.autocast. The embedding's sum is cast to bf16 (the
    tables stay fp32, so their gradients are fp32 sums), every
    `gpt.layernorm` reads its bf16 input as it is with fp32 statistics
    and fp32 weight and bias, and the adds of the stream, like their
    gradients in the backward, run in bf16. It halves the bytes of the
    add + layernorm row kernels and of the activations saved for the
    backward; the stream loses 16 bits of mantissa.

    Each value is cast to a given type once, right after its definition, so
    repeated uses (the tied `wte`) share one cast. Parameters stay fp32
    arguments: they are the master weights that AdamW updates.

    Where it runs: on @forward, after import and before gpt-autodiff. The
    backward then inherits the policy through the rules of the rewritten
    ops: the gradient of a `gpt.cast` is a cast back, so a bf16 matmul gets
    a bf16 backward while every fp32 parameter gets an fp32 gradient, and
    the optimizer (built later from those gradients) is fp32 by
    construction. A phase after train-step would have to re-derive that
    split by pattern-matching the backward. Ops that autodiff adds read the
    types of their forward ops: the bias gradient of a bf16 linear is a
    bf16 `gpt.reduce` (its kernel accumulates in fp32 and rounds the (N)
    result once) cast back to fp32.

    ```mlir
    // Before:
    %y = gpt.linear %x, %w, %b : (tensor<8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<8x48xf32>
    // After (policy=bf16):
    %wh = gpt.cast %w : tensor<48x16xf32> to tensor<48x16xbf16>
    ...
    %y = gpt.linear %xh, %wh, %bh : (...bf16...) -> tensor<8x48xbf16>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "Function to rewrite">,
    Option<"policy", "policy", "std::string", /*default=*/"\"bf16\"",
           "Precision policy: fp32 (identity), bf16, fp16 or fp8">,
    Option<"narrowResidual", "narrow-residual", "bool", /*default=*/"false",
           "Keep the residual stream in the compute type as well (bf16, fp16 or fp8)">,
    Option<"fp8LmHead", "fp8-lm-head", "bool", /*default=*/"false",
           "With fp8: the LM head's product (the gpt.matmul whose result is a "
           "gpt.cross_entropy's logits) in FP8 too">,
    ListOption<"fp8Exclude", "fp8-exclude", "std::string",
               "With fp8: linear layers whose weight's gpt.param name starts with one of "
               "these stay bf16 (first and last name the first and the last block, h.0. "
               "and h.<n_layer-1>.); each must name a linear weight">,
    ListOption<"fp32Ops", "fp32-ops", "std::string",
               "With bf16, fp16 or fp8: kinds of ops that compute in fp32 all the same "
               "(attention)">,
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "gpt.cast ops inserted">,
    Statistic<"numFp8Products", "fp8-products", "gpt.linear ops made gpt.fp8_matmul (fp8)">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Autodiff phase
//===----------------------------------------------------------------------===//

def AutodiffPass : Pass<"gpt-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: adds @<fn>_grad returning loss and parameter gradients";
  let description = [{
    Differentiates the function `function` (default `forward`), whose single
    result is a scalar loss, with respect to every argument that carries a
    `gpt.param` name. The new function `@<function>_grad` takes the same
    arguments and returns the loss followed by one gradient per parameter,
    in argument order (result attribute `gpt.grad_of = "<name>"`).

    Algorithm: seed d loss = `loss-scale` (default 1; a larger seed keeps
    fp16 gradients above the format's smallest values, and
    gpt-insert-optimizer with the same `loss-scale` divides it out), visit
    the forward ops in reverse, and ask
    each op's `DifferentiableOpInterface` rule for its operand gradients;
    contributions to one value are summed with `gpt.add` (so the tied LM
    head and token embedding both reach `wte`). The backward reads forward
    values directly: those are the saved activations that rematerialization
    later decides to keep or recompute. An op on the path to the loss
    without a rule is an error, except one without float-tensor operands
    (a constant), through which nothing flows. Parameters must be float
    tensors and every shape static (run gpt-instantiate-model first).

    ```mlir
    // Before:
    func.func @forward(%x: tensor<4xf32> {gpt.input = "x"},
                       %w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32>
    // After, in addition:
    func.func @forward_grad(%x: ..., %w: ...)
        -> (tensor<f32> {gpt.output = "loss"}, tensor<4xf32> {gpt.grad_of = "w"})
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "Name of the function to differentiate">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"1.0",
           "The seed d loss: every gradient comes out multiplied by it">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Train-step phase
//===----------------------------------------------------------------------===//

def InsertOptimizerPass : Pass<"gpt-insert-optimizer", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step: gradient accumulation, clipping, LR schedule, AdamW";
  let description = [{
    From `@<function>_grad` (see gpt-autodiff) builds

      @train_step(params..., adam_m..., adam_v..., tokens, targets, step, lr_scale)
          -> (new params..., new adam_m..., new adam_v..., loss, grad_norm, lr)

    where tokens and targets are (accum_steps, B, T) micro-batches and
    `step` is the 0-based step (a tensor<i32>). The body calls the gradient
    function once per micro-batch and sums losses and gradients; the loss
    and gradient are means over micro-batches. `grad_norm` is the global L2
    norm of the mean gradient; with `grad-clip` > 0 the update uses the
    gradient scaled by `grad_clip / max(norm, grad_clip)` (llm.c's rule).
    The learning rate is `gpt.lr_schedule` of `step` times the input
    `lr_scale` (1.0: as compiled; the runtime's --lr); each parameter gets a
    `gpt.adamw` update, with weight decay only for parameters of rank >= 2
    that are not listed in `no-decay`.

    Arguments and results carry `gpt.param`, `gpt.state`
    (`<name>.adam_m` / `<name>.adam_v`), `gpt.input` and `gpt.output` names:
    result i of a parameter or state replaces the argument of that name.
    `@train_step` is marked `gpt.train_step` (the function gpt-rematerialize
    fits to the budget), and `@<function>_grad` becomes private: the step's
    callee, which the inliner drops, so the functions left are the programs.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "The differentiated function (its gradient is @<function>_grad)">,
    Option<"accumSteps", "accum-steps", "int64_t", /*default=*/"1",
           "Micro-batches per step (gradient accumulation)">,
    Option<"lr", "lr", "double", /*default=*/"3.0e-4", "Peak learning rate">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "Final learning rate of the decay">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warm-up">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "Steps over which the decay reaches min-lr">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"constant\"",
           "Learning-rate schedule: constant, cosine or linear">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1.0e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "Decoupled weight decay of rank >= 2 parameters">,
    ListOption<"noDecay", "no-decay", "std::string",
               "Parameters exempt from weight decay besides biases and LayerNorm">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"1.0",
           "The loss scale gpt-autodiff seeded the backward with: the gradient norm "
           "and the AdamW update divide it out">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"1.0",
           "Clip the global gradient norm to this (0: no clipping)">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def InsertInitPass : Pass<"gpt-insert-init", "::mlir::ModuleOp"> {
  let summary = "Adds @init(seed) producing GPT-2's initial parameters";
  let description = [{
    For each `gpt.param` argument of `function`, in order: LayerNorm weights
    (`*ln_*.weight`) are ones, biases zeros, residual projections
    (`*.c_proj.weight`) N(0, (0.02 / sqrt(2 n_layer))^2) and every other
    weight N(0, 0.02^2). Samples come from `gpt.random_normal` with the
    argument index as the stream, so they depend only on the seed and are
    the same on every target. n_layer is read from the module's gpt.config.

    ```mlir
    func.func @init(%seed: tensor<i32>) -> (tensor<64x16xf32> {gpt.param = "wte"}, ...)
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "Function whose parameters are initialised">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def InsertLogitsPass : Pass<"gpt-insert-logits", "::mlir::ModuleOp"> {
  let summary = "Adds @logits(tokens, params...) -> (B, T, Vp) fp32 logits, for sampling";
  let description = [{
    Clones `function` (the model in its precision policy, before or after
    gpt-autodiff: the clone is of the forward only) into `@logits`, which
    returns the logits operand of the `gpt.cross_entropy` that produces the
    loss instead of the loss. The cross-entropy, the `targets` argument and
    every op only it needed are dropped; a non-fp32 logits tensor is cast
    to fp32. The result is named `gpt.output = "logits"`.

    Pre: `function` returns one value, produced by a single
    `gpt.cross_entropy` whose targets are a `gpt.input` argument.

    ```mlir
    func.func @logits(%tokens: tensor<2x8xi32> {gpt.input = "tokens"}, %wte: ... {gpt.param = "wte"}, ...)
        -> (tensor<2x8x64xf32> {gpt.output = "logits"})
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "Function returning the loss whose logits are exposed">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Distribute phase (data parallelism)
//===----------------------------------------------------------------------===//

def InsertAllReducePass : Pass<"gpt-insert-all-reduce", "::mlir::ModuleOp"> {
  let summary = "Data parallelism: bucketed gradient all-reduces, global loss, grad norm and FP8 amaxes";
  let description = [{
    Makes `function` (default `train_step`, calls inlined) one rank of a
    data-parallel step over `world-size` ranks, each training on its own
    batch with the same parameters:

      1) The gradients (the `grad` operands of `gpt.adamw`) are ordered by
         the op that finalises them, i.e. the backward order. A gradient
         that is a widening `gpt.cast` read only by updates and norms (the
         bf16/fp16/fp8 policies widen each weight's gradient after the
         whole backward) is reduced before the cast, as the backward wrote
         it: its bucket is issued where the backward computed it, and
         gpt-fuse-adamw's narrow-grads can still drop the cast.
      2) They are packed, in that order, into buckets of at least
         `bucket-mb` MiB (the last may be smaller).
      3) Each bucket becomes one `gpt.all_reduce mean` placed right after
         its last gradient's op, so it can be issued while the rest of the
         backward pass runs; `gpt.global_norm` and `gpt.adamw` read its
         results, so the grad norm, clipping and the update are global.
      4) The returned `loss` is averaged the same way: the logged loss is
         the global batch's.
      5) The FP8 amax histories the step records (gpt-fp8-delayed-scaling,
         state results of `gpt.fp8_quantize` and `gpt.fp8_cast_transpose`)
         become one `gpt.all_reduce max` after the last of them: every
         rank then takes the next step's scales from the global batch's
         amaxes and checkpoints the same histories.

    With equal per-rank batches, the mean of the ranks' mean gradients is
    the gradient of the global batch's mean loss: N ranks of batch B train
    like one rank of batch N*B. The module's `gpt.config` records
    `world_size` for the runtime: with `world-size` 0 the executable runs
    on any number of ranks, the mean taken over those that run it (and a
    single rank skips the collectives).

    Pre: no `func.call` and no `gpt.all_reduce` in `function`.

    ```mlir
    %dw = gpt.matmul ...                       // last gradient of the bucket
    %r:2 = gpt.all_reduce mean %dw, %db {bucket = 1 : i64, bytes = 4160 : i64,
                                         world_size = 2 : i64}
        : tensor<64x16xf32>, tensor<16xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "Train step to distribute">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "Number of data-parallel ranks (0: any, decided at run time)">,
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "Gradient bytes per all-reduce bucket, in MiB (0: one bucket per gradient)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Gradient all-reduce buckets">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def ShardOptimizerPass : Pass<"gpt-shard-optimizer", "::mlir::ModuleOp"> {
  let summary = "ZeRO-1: each rank keeps and updates 1/N of the AdamW state";
  let description = [{
    Shards the optimizer of `function`, a data-parallel step of N >= 2
    ranks (gpt-insert-all-reduce with world-size N), as ZeRO stage 1: every
    rank still holds the whole parameters (fp32 masters) and computes the
    whole gradients, but keeps only its 1/N slice of each AdamW moment and
    updates only its 1/N slice of each parameter.

      1) An update is sharded when its gradient comes from a gradient
         `gpt.all_reduce mean` (or that result's widening cast), its
         parameter and moments are arguments, and N divides the
         parameter's element count (every GPT-2 tensor, for N a power of
         two up to 256); the rest stay replicated, as before.
      2) Each such bucket becomes a `gpt.reduce_scatter mean` of the
         sharded gradients where the all-reduce was (so it overlaps the
         rest of the backward as the all-reduce did) and a `gpt.all_reduce`
         of the others; a widening cast moves to the 1/N shard.
      3) Each sharded `gpt.adamw` reads `gpt.rank_slice` of its parameter,
         the shard of its gradient, and its moments, whose arguments and
         results become 1-D shards marked `gpt.shard_of` (the full shape:
         the runtime gathers them into checkpoints and slices them back).
         After the last update, one `gpt.all_gather` per bucket writes the
         new parameters into the old ones' buffers.
      4) A `gpt.global_norm` over sharded gradients becomes
         `sqrt(all_reduce sum(|shards|^2) + |replicated|^2)`: the norm of
         the whole gradient, as every rank clips with it.

    Per rank, the moments take 8/N bytes per parameter instead of 8; the
    update reads and writes 1/N of the weights. Records `zero = 1` in the
    module's `gpt.config`. Run it after gpt-insert-all-reduce and before
    gpt-fuse-adamw, which then fuses the sharded updates into one launch.

    ```mlir
    %s = gpt.reduce_scatter mean %dw {bucket = 1 : i64, bytes = 4096 : i64, world_size = 2 : i64}
        : tensor<64x16xf32>
    %p = gpt.rank_slice %w {world_size = 2 : i64} : (tensor<64x16xf32>) -> tensor<512xf32>
    %p1, %m1, %v1 = gpt.adamw %p, %s, %m, %v, %lr, %step, %scale {...} : tensor<512xf32>, ...
    %w1 = gpt.all_gather %p1 into %w {bucket = 3 : i64, bytes = 2048 : i64, world_size = 2 : i64}
        : tensor<512xf32> into tensor<64x16xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "Train step whose optimizer to shard">,
  ];
  let statistics = [
    Statistic<"numSharded", "sharded", "AdamW updates sharded across the ranks">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def VerifyPhasePass : Pass<"gpt-verify-phase", "::mlir::ModuleOp"> {
  let summary = "The gate at the end of a phase: checks what the next phases rely on";
  let description = [{
    Closes each phase after `train-step` (gptc's pipelines add it last in
    each), so a pass that breaks an invariant is caught where it ran, with
    the phase named, instead of in a later pass or in codegen. Each gate
    checks its phase and the ones before it:

      lower        no `func.call` left (one graph per program), single-block
                   functions, no `gpt.fp8_matmul` (split by gpt-lower-fp8)
      distribute   collectives only in train steps, each with the module's
                   `gpt.config` world_size; a `gpt.shard_of` argument is a
                   1-D 1/N slice of its full shape; `zero = 1` has shards
      schedule     `@train_step_first`, when there is one, has
                   `@train_step`'s signature
      fuse         no program is planned yet (planning must come last)
      memory-plan  every program has a plan and every op of it an offset
                   per result

    ```sh
    gptc compile models/gpt2.mlir --model=tiny --compile-to=distribute   # stops after the gate
    gpt-opt step.mlir --gpt-verify-phase=phase=distribute
    ```
  }];
  let options = [
    Option<"phase", "phase", "std::string", /*default=*/"\"memory-plan\"",
           "The phase just completed: lower, distribute, schedule, fuse or memory-plan">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def LowerFp8Pass : Pass<"gpt-lower-fp8", "::mlir::ModuleOp"> {
  let summary = "Splits each gpt.fp8_matmul into FP8 quantizations and a scaled GEMM";
  let description = [{
    Every `gpt.fp8_matmul` becomes, per operand, a `gpt.fp8_scale` (the
    amax-derived scale and its inverse) and a `gpt.fp8_quantize` (the FP8
    copy), and a `gpt.scaled_matmul` of the copies with the inverses. The tensor cores' FP8 GEMMs take one layout only,
    `op(lhs) op(rhs)` with an untransposed lhs and a transposed rhs (TN in
    cuBLASLt's column-major terms), so an operand whose product reads it
    the other way is quantized as its transpose: the forward `X W^T` needs
    no transposed copy, `dX = dY W` a transposed W, and
    `dW = dY^T X` transposed copies of dY and X. The forward products
    (e4m3 x e4m3) use fast accumulation; the gradient ones (with an e5m2
    operand) accumulate exactly, as Transformer Engine does.

    The scale is taken of a `gpt.reshape`'s input (values, not shape,
    decide it), so that CSE after this pass leaves one `gpt.fp8_scale` for
    X and the flattened X its weight gradient reads, and one for W and W^T:
    one amax reduction per tensor, not per layout. Quantizing is
    elementwise given the scale, so the result computes what
    `gpt.fp8_matmul` defines, up to the order of summation.

    With `pair-layouts` (the default), an operand quantized both ways (X
    for the forward and X^T for dW, W and W^T, dY and dY^T) gets one
    `gpt.fp8_cast_transpose` at the earlier of the two, which reads the
    tensor once and writes both copies. Where nothing else reads the
    forward's bf16 X (a layernorm's or GELU's output), it is dead once the
    forward has quantized it, and the backward keeps the FP8 X^T, half the
    bytes. Later quantizations of the same operand in either layout (a
    weight's, in each further micro-batch under `--accum-steps`) read the
    pair's codes instead: the weight's bf16 copy is read once a step, and
    the FP8 codes, not the bf16 copy, stay live across the micro-batches.

    With `fold-gelu` (the default), a `gpt.gelu` whose result only FP8
    scales and quantizations read (through reshapes: the MLP's hidden
    activation, for its down-projection and that one's weight gradient)
    is not stored: they read its input with `{gelu}` and apply it as they
    load, rounded as the stored GELU would be, so the codes are the same
    and one read and one write of the widest activation are gone.

    Batched
    products (a rhs of rank above 2) have no FP8 GEMM: they are an error.
    Runs on every function, at the start of the memory-plan phase (after
    inlining and CSE, so that the programs share nothing unlowered).

    ```mlir
    // Before:
    %y = gpt.fp8_matmul e5m2 %dy, e4m3 %w
        : (tensor<16x48xbf16>, tensor<48x16xbf16>) -> tensor<16x16xbf16>
    // After:
    %sdy, %idy = gpt.fp8_scale e5m2 %dy : (tensor<16x48xbf16>) -> (tensor<f32>, tensor<f32>)
    %qdy = gpt.fp8_quantize e5m2 %dy, %sdy
        : (tensor<16x48xbf16>, tensor<f32>) -> tensor<16x48xf8E5M2>
    %sw, %iw = gpt.fp8_scale e4m3 %w : (tensor<48x16xbf16>) -> (tensor<f32>, tensor<f32>)
    %qw = gpt.fp8_quantize e4m3 %w, %sw {transpose}
        : (tensor<48x16xbf16>, tensor<f32>) -> tensor<16x48xf8E4M3FN>
    %y = gpt.scaled_matmul %qdy, %idy, %qw, %iw {transpose_rhs}
        : (tensor<16x48xf8E5M2>, tensor<f32>, tensor<16x48xf8E4M3FN>, tensor<f32>)
          -> tensor<16x16xbf16>
    ```
  }];
  let options = [
    Option<"pairLayoutsOption", "pair-layouts", "bool", /*default=*/"true",
           "Quantize an operand's two layouts in one gpt.fp8_cast_transpose">,
    Option<"foldGeluOption", "fold-gelu", "bool", /*default=*/"true",
           "Apply a GELU that only FP8 ops read inside them instead of storing it">,
  ];
  let statistics = [
    Statistic<"numProducts", "products", "gpt.fp8_matmul ops lowered">,
    Statistic<"numGelus", "gelus", "GELUs applied inside FP8 scales and quantizations">,
    Statistic<"numTransposed", "transposed", "Operands quantized as their transpose">,
    Statistic<"numPaired", "paired", "Quantizations paired into gpt.fp8_cast_transpose">,
    Statistic<"numReused", "reused",
              "Later quantizations of a paired operand that read the pair's codes">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect"];
}

def Fp8DelayedScalingPass : Pass<"gpt-fp8-delayed-scaling", "::mlir::ModuleOp"> {
  let summary = "Takes each FP8 scale of the train step from the amaxes of the steps before";
  let description = [{
    A `gpt.fp8_scale` reads its whole tensor for the amax before the
    quantization can start: one more read of every FP8 operand per step.
    Delayed scaling (as Transformer Engine's) takes the scale from the
    amaxes the same tensor had in the last `history` steps instead, and
    records this step's amax while the tensor is cast, so that no pass
    reads it for its amax alone.

    In `function`, each `gpt.fp8_scale` gets a history: a new
    `tensor<history x f32>` argument and result named
    `gpt.state = "fp8.amax_history.N"` (N in program order), which the
    runtime keeps, zeroes at init and checkpoints as it does AdamW's
    moments. The scale reads it (`history`) and passes it on one place
    shifted; the first quantization with that scale (a
    `gpt.fp8_cast_transpose` or `gpt.fp8_quantize` of the same values)
    records the amax in it, and that is returned. While a history is all
    zeros (the first step) or holds a non-finite value, the scale is the
    current one, so the first step is the one without this pass.

    A tensor whose amax grows past the largest of its history in one step
    saturates at the format's largest value for that step. gptc's
    `--fp8-history` sets the length (16 by default); docs/precision.md has
    what delayed scaling was measured to cost. Other programs (@forward,
    @logits) keep current scaling: they run once, with no step before.

    ```mlir
    // Before (in @train_step):
    %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<16x16xbf16>) -> (tensor<f32>, tensor<f32>)
    %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s
        : (tensor<16x16xbf16>, tensor<f32>) -> (tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
    // After: %h is a new argument, %h2 a new result.
    %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h
        : (tensor<16x16xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
    %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1
        : (tensor<16x16xbf16>, tensor<f32>, tensor<16xf32>)
          -> (tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16xf32>)
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "The train step whose FP8 scales become delayed">,
    Option<"history", "history", "int64_t", /*default=*/"16",
           "Steps of amax each scale is taken from">,
  ];
  let statistics = [
    Statistic<"numScales", "scales", "FP8 scales given an amax history">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def FuseGradAccumulationPass : Pass<"gpt-fuse-grad-accumulation", "::mlir::ModuleOp"> {
  let summary = "Sums FP8 weight gradients over the micro-batches inside their GEMMs, in f32";
  let description = [{
    With `--accum-steps=N` the train step adds each parameter's gradients
    of the N micro-batches (`gpt.add {gpt.micro_batch}`, from
    gpt-insert-optimizer) after the last one. An FP8 weight gradient is a
    `gpt.scaled_matmul` with a bf16 result, which a `gpt.cast` widens to
    the parameter's f32: per micro-batch a bf16 and an f32 copy of every
    weight's gradient, and a pass over the parameters to add them: at
    GPT-2 1.5B about 31 GB of memory traffic per micro-batch, where the
    fused GEMM moves 12 GB (the sum read and written once).

    This pass gives the first micro-batch's GEMM an f32 result (no cast)
    and folds each later sum into the next micro-batch's GEMM as its
    `accumulate` operand: cuBLASLt adds the product to the running sum in
    f32 (`beta = 1`), in the sum's own bytes where nothing reads it later.
    The products are no longer rounded to bf16 before they are summed.

    A sum folds when its running operand is computed before the GEMM and
    the GEMM (with its cast) is read by nothing else. Other sums (biases,
    layernorms, the embedding) stay `gpt.add`s; bf16 GEMMs (`gpt.matmul`)
    are not changed. It runs only with `gptc --fuse-grad-accumulation`
    (off by default: the f32 sum kept across the micro-batches takes twice
    the bytes of the bf16 gradient it replaces).

    ```mlir
    // Before:
    %p0 = gpt.scaled_matmul %a0, %sa0, %b0, %sb0 {transpose_rhs} : (...) -> tensor<48x16xbf16>
    %p1 = gpt.scaled_matmul %a1, %sa1, %b1, %sb1 {transpose_rhs} : (...) -> tensor<48x16xbf16>
    %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
    %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
    %sum = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
    // After:
    %g0 = gpt.scaled_matmul %a0, %sa0, %b0, %sb0 {transpose_rhs} : (...) -> tensor<48x16xf32>
    %sum = gpt.scaled_matmul %a1, %sa1, %b1, %sb1 accumulate %g0 {transpose_rhs}
        : (...) -> tensor<48x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::gpt::GPTDialect"];
}

def Fp8SteadyStepPass : Pass<"gpt-fp8-steady-step", "::mlir::ModuleOp"> {
  let summary = "Splits off the first train step; the others take all FP8 scales in one op";
  let description = [{
    Under delayed scaling every `gpt.fp8_scale` of the train step first
    reads its history and, only while that is empty (the first step),
    the tensor: two kernel launches per FP8 operand (an amax pass that
    returns at once, and the scale), 580 a step at GPT-2 350M, for a
    decision that is the same on every step after the first.

    This pass copies `function` as `<function>_first`, unchanged: the
    runtime runs it for a run's first step (while the histories are all
    zeros), and `function` for every later one (the copy is made even
    where no scale has a history: the passes after it plan both). In `function` it replaces every
    `gpt.fp8_scale` with a history by one `gpt.fp8_delayed_scales` at the
    top of the function: scales from the histories alone, one kernel
    launch for all of them. Where two scales share a history (a
    rematerialized clone) the entry is shared. The steps compute the same
    values as before as long as the histories hold a usable amax, which
    the first step records; a history that holds none (a tensor that was
    all zeros) scales by 1, where the first step's op measures it.

    Runs after the collectives and before gpt-rematerialize, which plans
    each of the two steps for the memory budget; the fusions after it
    apply to both, and they share their kernels.

    ```mlir
    // Before (in @train_step):
    %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h0
        : (tensor<16x16xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
    // After: @train_step_first is the function above; @train_step starts with
    %r:3 = gpt.fp8_delayed_scales (e4m3 %h0) : tensor<16xf32>
    // and %s, %inv, %h1 are %r#0, %r#1, %r#2.
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The train step to split">,
  ];
  let statistics = [
    Statistic<"numScales", "scales", "FP8 scales the steady step takes from their histories">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

def FuseFp8Pass : Pass<"gpt-fuse-fp8", "::mlir::ModuleOp"> {
  let summary = "Moves FP8 casts into their neighbours: one labelled pattern set";
  let description = [{
    After gpt-lower-fp8 every FP8 operand is a `gpt.fp8_cast_transpose`
    kernel that reads a bf16 tensor another kernel wrote and writes the two
    layouts of its codes. Each pattern removes a round trip through memory
    in one of two ways: the producer writes the codes itself, or a
    neighbour's work moves into the cast's kernel. Each has a label that
    `enable-patterns` (the only ones to run; default: those on by default)
    and `disable-patterns` name (gptc's --enable-patterns and
    --disable-patterns); an unknown label is an error.

      - `fp8-cross-entropy-grad`: a plain e5m2 cast (no history) of a
        `gpt.cross_entropy_grad`, scaled by the gradient's own
        `gpt.fp8_scale`, nothing else reading the bf16 gradient (an FP8 LM
        head's) -> `gpt.fp8_cross_entropy_grad` at the gradient and a
        `gpt.fp8_transpose`. The scale needs no amax: every element
        `dloss (p - onehot) / P` is at most `|dloss| / P` in magnitude, so
        the loss kernel writes the codes at `57344 P / |dloss|`.
      - `fp8-cast-gelu-grad`: a backward cast of a `gpt.gelu_grad` that only
        the cast, its plain `gpt.fp8_scale`s and (with
        `fp8-cast-column-sum`) its column sum read ->
        `gpt.fp8_cast_transpose_sum ... gelu_grad %pre`: the cast computes
        the GELU gradient from the GEMM's output and the pre-activation as
        it loads them, the scales read the same two tensors, and the bf16
        GELU gradient is never stored.
      - `fp8-cast-column-sum`: a backward cast whose input's column sum
        (its bias gradient, a `gpt.reduce sum` over all but the last
        dimension) is read only after it -> `gpt.fp8_cast_transpose_sum`,
        which sums each tile's columns as it casts them.
      - `fp8-fold-input-cast`: a narrowing `gpt.cast` of a function argument
        (an f32 master weight) read only by plain casts' inputs -> those
        casts read the f32 tensor with `rounded_to = bf16`: the same codes
        without the bf16 copy. The cast of an activation stays: its wide
        value would then be stored.
      - `fp8-layernorm-codes`: a residual add and layernorm row
        `gpt.fusion` (gpt-fuse-elementwise's) whose normalised result only
        a cast (no `gelu`) reads, its scale and history existing before it (the steady
        step's) -> `gpt.add_layernorm_fp8`, whose kernel writes both
        layouts of the codes; the result is rounded to its type before it
        is scaled, so the codes are the cast's.
      - `fp8-gelu-matmul-codes` (off by default: no faster than the cast,
        and not its bits; docs/precision.md): a delayed-scaling cast
        `{gelu}` of a `gpt.scaled_matmul` (no accumulator, rhs transposed)
        whose scale and shifted history exist before the product ->
        `gpt.scaled_matmul_gelu_fp8` (cuBLASLt's GELU_AUX epilogue with an
        FP8 D) and a `gpt.fp8_transpose`. The GELU reads the product before
        it is rounded to bf16.

    Where each runs is a matter of order, so gptc runs this pass at four
    places, each enabling its own: `fp8-cross-entropy-grad` after
    gpt-lower-fp8 and CSE, before gpt-fp8-delayed-scaling (which then gives
    the gradient no history); the two cast epilogues after it (the fused
    casts keep the histories); `fp8-fold-input-cast` after
    gpt-fp8-steady-step (the steady step's weight casts) and before
    gpt-rematerialize (which then plans without the bf16 copies); the
    layernorm and GEMM codes after gpt-fuse-elementwise, which makes the
    residual layernorms. Rewrites only, no folding.

    ```mlir
    // fp8-cast-gelu-grad with fp8-cast-column-sum. Before:
    %dpre = gpt.gelu_grad %dh, %pre : tensor<2x8x64xbf16>
    %db = gpt.reduce sum %dpre dims [0, 1] : (tensor<2x8x64xbf16>) -> tensor<64xbf16>
    %s, %inv = gpt.fp8_scale e5m2 %dpre : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
    %q, %qt = gpt.fp8_cast_transpose e5m2 %dpre, %s
        : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
    // After:
    %s, %inv = gpt.fp8_scale e5m2 %dh gelu_grad %pre
        : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
    %q, %qt, %db = gpt.fp8_cast_transpose_sum e5m2 %dh gelu_grad %pre, %s
        : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<f32>)
          -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>)
    ```
  }];
  let options = [
    ListOption<"enablePatterns", "enable-patterns", "std::string",
               "Labels of the only patterns to run (default: every pattern on by default)">,
    ListOption<"disablePatterns", "disable-patterns", "std::string",
               "Labels of patterns not to run">,
  ];
  let statistics = [
    Statistic<"numCrossEntropyGrads", "cross-entropy-grads",
              "Logit gradients written as FP8 by the loss kernel">,
    Statistic<"numGeluGrads", "gelu-grads", "GELU gradients folded into FP8 casts">,
    Statistic<"numColumnSums", "column-sums", "Column sums folded into FP8 casts">,
    Statistic<"numFoldedCasts", "folded-casts", "FP8 casts that read a gpt.cast's input">,
    Statistic<"numLayerNorms", "layernorms", "Residual layernorm fusions that write FP8 codes">,
    Statistic<"numGeluMatmuls", "gelu-matmuls", "FP8 GELU casts folded into their GEMMs">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect"];
}

def FuseMatmulEpiloguePass : Pass<"gpt-fuse-matmul-epilogue", "::mlir::ModuleOp"> {
  let summary = "Folds GELU, GELU's gradient and bias gradients into the neighbouring GEMMs";
  let description = [{
    cuBLASLt applies elementwise epilogues to a GEMM's fp32 accumulator
    before it stores D, and can reduce an input over the contracted
    dimension while streaming it. Each rewrite below removes a kernel that
    reads and writes a whole activation. The first four make a GEMM
    `gpt.fusion`: the GEMM on its operands widened to f32 (its result is
    the accumulator) and the epilogue on that, each result narrowed once.

      1) `gelu(linear(x, w, b))` -> a fusion yielding the GELU and the
         pre-activation the backward needs (epilogue GELU_AUX_BIAS; `gelu`).
      2) `gelu_grad(matmul(dy, w), pre)` (through a reshape) -> a fusion
         yielding the GELU gradient (epilogue DGELU) on rank-2 operands,
         the matmul's product read by nothing else (`gelu-grad`).
      3) `reduce sum dims [all but last]` of 2's fusion (through a reshape)
         -> that fusion also yielding the column sums of the f32 gradient
         (epilogue DGELU_BGRAD): the GELU layer's bias gradient comes out
         of the GEMM that computes its pre-activation gradient
         (`gelu-bias-grad`). Off by default: cuBLASLt's DGELU_BGRAD GEMM is
         slower than its DGELU GEMM plus gptc's column reduction
         (docs/architecture.md, Fusion).
      4) `reduce sum dY dims [all but last]` next to the weight gradient
         `matmul dY2d, X2d {transpose_lhs}` -> a fusion yielding dW and
         dY2d's column sums (epilogue BGRADB): the bias gradient comes out
         of the dW GEMM (`bias-grad`). Off by default: cuBLASLt cannot split
         the dW GEMM's long K (the tokens) with this epilogue, so the plain
         dW GEMMs plus gptc's column reductions are faster
         (docs/architecture.md, Fusion).
      5) `bias_add(scaled_matmul(...), b)` -> `gpt.scaled_matmul ... bias
         %b` (epilogue BIAS) for a bf16 product that nothing else reads
         (`scaled-bias`): the FP8 linears' bias (--precision=fp8,
         after gpt-lower-fp8). cuBLASLt adds no bias to an FP8 GEMM's f32 D.

    1, 2 and 5 run first, then 3 before 4 where both match.

    The epilogues read the unrounded accumulator, so a fused bf16 step
    differs from an unfused one by bf16 rounding of intermediates; the
    fusion's body says where. Run after gpt-rematerialize and before
    gpt-fuse-elementwise, which would otherwise take the GELUs.

    ```mlir
    // Before:
    %pre = gpt.linear %x, %w, %b : (tensor<8x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
    %h = gpt.gelu %pre : tensor<8x64xbf16>
    // After:
    %h, %pre = gpt.fusion (%x, %w, %b)
        : (tensor<8x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
    ^bb0(%xa: tensor<8x16xbf16>, %wa: tensor<64x16xbf16>, %ba: tensor<64xbf16>):
      %0 = gpt.cast %xa : tensor<8x16xbf16> to tensor<8x16xf32>
      %1 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
      %2 = gpt.cast %ba : tensor<64xbf16> to tensor<64xf32>
      %3 = gpt.linear %0, %1, %2 : (tensor<8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<8x64xf32>
      %4 = gpt.gelu %3 : tensor<8x64xf32>
      %5 = gpt.cast %4 : tensor<8x64xf32> to tensor<8x64xbf16>
      %6 = gpt.cast %3 : tensor<8x64xf32> to tensor<8x64xbf16>
      gpt.yield %5, %6 : tensor<8x64xbf16>, tensor<8x64xbf16>
    }
    ```
  }];
  let options = [
    Option<"gelu", "gelu", "bool", /*default=*/"true",
           "Fold gpt.gelu into the gpt.linear that produces its input">,
    Option<"geluGrad", "gelu-grad", "bool", /*default=*/"true",
           "Fold gpt.gelu_grad into the gpt.matmul that produces its gradient">,
    Option<"geluBiasGrad", "gelu-bias-grad", "bool", /*default=*/"false",
           "Compute a GELU layer's bias gradient in its DGELU GEMM">,
    Option<"biasGrad", "bias-grad", "bool", /*default=*/"false",
           "Compute bias gradients in the weight-gradient GEMM">,
    Option<"scaledBias", "scaled-bias", "bool", /*default=*/"true",
           "Fold gpt.bias_add into the FP8 gpt.scaled_matmul that produces its input">,
  ];
  let statistics = [
    Statistic<"numGelu", "gelu", "GELUs folded into a linear">,
    Statistic<"numGeluGrad", "gelu-grad", "GELU gradients folded into a matmul">,
    Statistic<"numGeluBiasGrad", "gelu-bias-grad",
              "Bias gradients folded into a GELU-gradient matmul">,
    Statistic<"numBiasGrad", "bias-grad", "Bias gradients folded into a weight-gradient matmul">,
    Statistic<"numScaledBias", "scaled-bias", "Biases folded into an FP8 scaled_matmul">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect"];
}

def FuseElementwisePass : Pass<"gpt-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Groups elementwise ops into gpt.fusion regions: one kernel each";
  let description = [{
    In every single-block function (after inlining, before memory
    planning), groups elementwise gpt ops (cast, add, sub, mul, div, max,
    neg, exp, log, tanh, sqrt, rsqrt, gelu, gelu_grad, scale, bias_add) into
    `gpt.fusion` ops, which codegen turns into one kernel that keeps the
    intermediates in registers:

      1) Chains: each op joins the groups of its operands' producers that
         have its element count (a bias_add does not pull in its bias).
      2) Siblings (`siblings=true`): groups of the same structure (op names
         and element types) merge, e.g. all fp32 -> bf16 weight casts of
         mixed precision, or all bf16 -> fp32 gradient casts.
      3) A member's value becomes a fusion result only when an op outside
         the group reads it; constants are cloned into the bodies.

    Gradient accumulation's adds (marked `gpt.micro_batch` by
    gpt-insert-optimizer) join neither chains nor siblings of another
    micro-batch: a group runs at its last member, so one spanning
    micro-batches would keep every earlier micro-batch's gradients alive
    until the last one ends.

    A group's kernel takes a pointer per operand and result, and CUDA caps a
    kernel's parameters (4 KiB before PTX 8.1): a merge that would give a
    group more than `max-arguments` operands plus results is not made, and
    the next sibling starts a new group.

    Before grouping (`narrow-row-outputs`), a narrowing `gpt.cast` that is
    the only reader of a `gpt.layernorm` or a `gpt.embed` is folded into
    the op's result type: the kernel rounds once when it stores, as the
    cast did, and the wide tensor is never written (mixed precision casts
    every layernorm output to bf16 for the next GEMM, and with
    narrow-residual the embedding's sum). Likewise a widening cast
    that feeds a `gpt.layernorm_grad`'s or a `gpt.embed_grad`'s gradient
    is skipped: the kernels widen the bf16 gradient as they load it
    (exact), and the f32 copy is never written.

    Then (`add-layernorm`) a `gpt.layernorm` of a `gpt.add` (the residual
    stream: x + a block's output) becomes one row `gpt.fusion` of the add
    and the layernorm, whose row kernel stores the sum and normalises it
    without reading it back; a widening cast read only by the add moves
    into its body. In the backward, a
    `gpt.layernorm_grad` whose input gradient is added to the residual
    gradient becomes one row-gradient `gpt.fusion` of the layernorm_grad,
    the add and the cast, whose row kernel stores the sum and, when a
    narrowing cast of it feeds the GEMMs, its narrow copy: dx stays in
    registers.

    And (`gelu-grad-sum`) a `gpt.reduce sum` over all but the last
    dimension of a `gpt.gelu_grad` (the bias gradient of the linear layer
    before the MLP's GELU, when gpt-fuse-matmul-epilogue left the GELU
    gradient out of the GEMM) becomes one column-sum `gpt.fusion` with it
    (the gradient in f32, its narrowing cast, the sum of the f32 values):
    the kernel that writes the GELU gradient sums its columns as it goes,
    instead of a column reduction reading it back. Likewise (`attention-grad-sum`) the
    column sum of a `gpt.causal_attention_grad` (the qkv bias gradient)
    becomes one column-sum `gpt.fusion` with it, built the same way: the
    flash backward kernels
    add up each 16-row tile of dq, dk and dv as they store it. Both sum the
    unrounded values: with a bf16 gradient they are not the same bits as
    the unfused column reduction of the stored tensor (the flash qkv bias
    gradient's measured difference: docs/reliability.md); the
    scalar attention kernels sum dqkv as stored, the same bits.

    A group sits at its last member, which is legal when no outside op reads
    a member before that point (this also excludes cycles). A group that
    reads only function arguments sits at its first member. Ops keep their
    semantics exactly (bf16 values are rounded as if stored), so a fused
    step computes the same bits as an unfused one, except for the unrounded
    column sums of `gelu-grad-sum` and `attention-grad-sum` above.

    ```mlir
    // Before:
    %0 = gpt.gelu %x : tensor<8x64xf32>
    %1 = gpt.cast %0 : tensor<8x64xf32> to tensor<8x64xbf16>
    // After:
    %1 = gpt.fusion (%x) : (tensor<8x64xf32>) -> tensor<8x64xbf16> {
    ^bb0(%a: tensor<8x64xf32>):
      %2 = gpt.gelu %a : tensor<8x64xf32>
      %3 = gpt.cast %2 : tensor<8x64xf32> to tensor<8x64xbf16>
      gpt.yield %3 : tensor<8x64xbf16>
    }
    ```
  }];
  let options = [
    Option<"siblings", "siblings", "bool", /*default=*/"true",
           "Also merge independent groups of one structure into one fusion">,
    Option<"maxArguments", "max-arguments", "unsigned", /*default=*/"256",
           "Most operands plus results of one fusion (its kernel's pointer arguments)">,
    Option<"narrowRowOutputs", "narrow-row-outputs", "bool", /*default=*/"true",
           "Fold a narrowing cast that is a layernorm's or an embedding's only reader into "
           "its result type, "
           "and read a layernorm_grad's gradient before a widening cast">,
    Option<"addLayerNorm", "add-layernorm", "bool", /*default=*/"true",
           "Fuse the residual adds into the layernorms and their gradients">,
    Option<"geluGradSum", "gelu-grad-sum", "bool", /*default=*/"true",
           "Fuse a bias gradient's column sums into the GELU gradient that produces them">,
    Option<"attentionGradSum", "attention-grad-sum", "bool", /*default=*/"true",
           "Fuse the qkv bias gradient's column sums into the attention gradient">,
  ];
  let statistics = [
    Statistic<"numAddLayerNorms", "add-layernorms",
              "Residual add and layernorm (gradient) row fusions created">,
    Statistic<"numFusions", "fusions", "gpt.fusion ops created">,
    Statistic<"numGeluGradSums", "gelu-grad-sums", "GELU gradient column-sum fusions created">,
    Statistic<"numAttentionGradSums", "attention-grad-sums",
              "Attention gradient column-sum fusions created">,
    Statistic<"numFused", "fused-ops", "Elementwise ops moved into fusions">,
    Statistic<"numNarrowed", "narrowed-row-casts", "Casts folded into a layernorm or layernorm_grad">,
  ];
}

//===----------------------------------------------------------------------===//
// Optimizer fusion
//===----------------------------------------------------------------------===//

def FuseAdamWPass : Pass<"gpt-fuse-adamw", "::mlir::func::FuncOp"> {
  let summary = "Merges the per-parameter gpt.adamw updates into one gpt.adamw_multi";
  let description = [{
    In each function (a train step; the other programs have no
    `gpt.adamw`), the `gpt.adamw` ops that share
    their learning rate, step and gradient scale values (the LR schedule and
    the clipping factor) and their betas and epsilon become one
    `gpt.adamw_multi`, with each parameter's weight decay kept in
    `weight_decays`. The new op sits where the last of them was, so every
    gradient (and gradient all-reduce) it reads is already computed; each
    result replaces the matching `gpt.adamw` result. A group of one
    `gpt.adamw` is left alone. Codegen lowers the op to one kernel launch
    per gradient element type instead of one launch per parameter.

    With `narrow-grads` (the default), a gradient that reaches its update
    through a widening `gpt.cast` (mixed precision's bf16 -> f32 of a
    weight gradient) is read in its narrow type when the cast's only other
    readers are `gpt.global_norm` ops (gradient clipping), which read it
    narrow too: both widen it as they load, which is exact, so the results
    are the same, and the f32 copy of the gradients is never written
    (a kernel, and twice the bytes for the norm and the update to read).

    Where it runs: after gpt-insert-all-reduce (which finds the gradients
    through `gpt.adamw`), before gpt-fuse-elementwise (which would take the
    casts into a fusion) and before gpt-plan-memory, which updates each
    parameter and its moments in place as it does for `gpt.adamw`.

    ```mlir
    // Before:
    %p0n, %m0n, %v0n = gpt.adamw %p0, %g0, %m0, %v0, %lr, %step, %scale {... weight_decay = 0.1 : f64} : ...
    %p1n, %m1n, %v1n = gpt.adamw %p1, %g1, %m1, %v1, %lr, %step, %scale {... weight_decay = 0.0 : f64} : ...
    // After:
    %p:2, %m:2, %v:2 = gpt.adamw_multi (%p0, %p1), (%g0, %g1), (%m0, %m1), (%v0, %v1),
        %lr, %step, %scale {... weight_decays = array<f64: 0.1, 0.0>} : ...
    ```
  }];
  let options = [
    Option<"narrowGrads", "narrow-grads", "bool", /*default=*/"true",
           "Read gradients before a widening cast (in the update and the gradient norm)">,
  ];
  let statistics = [
    Statistic<"numMerged", "merged", "gpt.adamw ops merged into gpt.adamw_multi">,
    Statistic<"numNarrowed", "narrowed-grads",
              "Gradients read before their widening cast">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Memory planning phase
//===----------------------------------------------------------------------===//

def RematerializePass : Pass<"gpt-rematerialize", "::mlir::func::FuncOp"> {
  let summary = "Recomputes activations in the backward pass to fit a memory budget";
  let description = [{
    Makes each train step (a function marked `gpt.train_step`, calls
    inlined; other functions are left alone) fit in
    `memory-budget` GiB (0: off): its arguments (parameters, AdamW
    moments, inputs) plus the activation pool gpt-plan-memory will place.

    While the estimate (arguments plus the largest sum of activation
    buffers live at one program point) exceeds the budget:

      1) Candidates: the buffers live at that peak point p whose op comes
         before p and is pure and deterministic (not `gpt.random_normal`,
         not the optimizer: `gpt.adamw`, `gpt.global_norm`,
         `gpt.lr_schedule`; not `gpt.all_reduce`), read after p but not at
         p (typically forward activations the backward reads).
      2) For each, the chain of ops that rebuilds it right before its first
         read after p from values that are live there anyway (arguments,
         values read later still), recursing through operands up to
         `max-depth` ops deep; views are free, and so are FP8's scales
         and casts (`--precision=fp8`: a scaled GEMM counts as deep as the
         bf16 GEMM it replaces). A value of one `alignment` unit or less
         (an FP8 scale) is read late rather than rebuilt. A clone of a
         `gpt.fp8_cast_transpose` writes both layouts, and the reads after
         p of both move to it; it records no amax (delayed scaling).
      3) The chain with the lowest cost per byte freed is cloned there (the
         clones carry `gpt.remat`) and every read after p of the value (or
         of its views) reads the clone instead. Cost: FLOPs, plus 200 per
         byte read or written, plus 4e9 per launch (an H200's ratios).

    First, each widening `gpt.cast` read by one later op moves to just
    before it (the micro-batch sums' f32 casts of the gradients: the fusion
    after this pass reads the bf16 gradient there anyway). The plan fits
    the budget less `headroom` (0.5%), left for the fusion passes after
    this one, which may lengthen a lifetime.

    Liveness is recomputed after each choice. When the placed plan needs
    more than the estimate, the loop continues with that slack. The plan
    is recorded as `gpt.remat_plan` on the function (budget, values, ops,
    peak before/after in bytes, FLOPs of the step and extra FLOPs) and
    summarised in a remark; a budget no plan reaches is an error naming the
    budget and the best peak found. Recomputation runs the same ops on the
    same inputs, so training is bit-identical, with one exception: where
    gpt-fuse-matmul-epilogue later folds a GELU into its GEMM, the forward
    takes it from the unrounded accumulator and a recomputed copy from the
    stored bf16 pre-activation (they differ in the last bf16 bit at
    places; `--matmul-epilogues=gelu-grad` keeps the bits).

    A clone that computes what an earlier clone does (both rebuilt from
    the same values) reads the earlier one's result instead, where the
    peak estimate allows the longer life: one launch fewer.

    Where it runs: after gpt-insert-all-reduce and right before
    gpt-plan-memory (no CSE in between: it would merge the clones back).

    ```mlir
    // Before: %g is live from the forward to the backward.
    %g = gpt.gelu %h : tensor<16x4096xbf16>
    ...
    %dw = gpt.matmul %dy, %g {transpose_lhs} : ...
    // After: rebuilt from %h, which the backward reads anyway.
    %g2 = gpt.gelu %h {gpt.remat} : tensor<16x4096xbf16>
    %dw = gpt.matmul %dy, %g2 {transpose_lhs} : ...
    ```
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "double", /*default=*/"0.0",
           "Memory budget in GiB: arguments plus activations (0: off)">,
    Option<"maxDepth", "max-depth", "int64_t", /*default=*/"4",
           "Most ops (views and FP8 casts aside) on a path of one recompute chain">,
    Option<"headroom", "headroom", "double", /*default=*/"0.005",
           "Fraction of the budget the plan leaves free for the fusion passes after "
           "it, which may lengthen a lifetime (gpt-plan-memory checks the whole budget)">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Buffer alignment gpt-plan-memory will use, in bytes">,
  ];
  let statistics = [
    Statistic<"numValues", "values", "Values recomputed">,
    Statistic<"numOps", "ops", "Ops cloned">,
  ];
}

def PlanMemoryPass : Pass<"gpt-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Static memory plan: liveness-based offsets of every tensor in a few pools";
  let description = [{
    Plans the memory of each function with a body, alone (the programs run
    one after another; calls must have been inlined). Arguments go to their own pools by role: `params`,
    `state` (AdamW moments) and `inputs`. Every other tensor gets an offset
    in the `activations` pool:

      1) Each op result is a buffer live from its op to its last use (to the
         end for returned values). `gpt.reshape` and a `gpt.slice` of the
         outermost dimension are views: they share their operand's buffer.
         A `gpt.adamw` whose parameter and moments die there updates them in
         place: its results share the arguments' buffers. So do an
         `gpt.all_reduce` result and its input when nothing else reads the
         input, and a `gpt.cross_entropy_grad` and its logits when nothing
         reads them after it (at 1.5B, B=16 that is 1.6 GB less at the
         step's peak).
      2) Buffers are placed largest first at the lowest 256-byte-aligned
         offset that overlaps no placed buffer of overlapping lifetime.

    Results: per op, `gpt.offsets` (one activations offset per result, -1
    for a view into an argument), per argument `gpt.pool`/`gpt.offset`, and
    the function attribute `gpt.memory_plan` = pool sizes in bytes, with
    `activations` the peak. Reordering ops after this pass invalidates it:
    it runs last before serialization.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Alignment of every buffer in bytes">,
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Activation buffers placed">,
    Statistic<"peakBytes", "peak-bytes", "Activation pool sizes in bytes, summed over the functions">,
  ];
}

#endif // GPTC_COMPILER_TRANSFORMS_PASSES_TD
