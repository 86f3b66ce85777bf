//===- Passes.td - gpt dialect passes ------------------------------------===//

#ifndef GPT_TRANSFORMS_PASSES_TD
#define GPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Import
//===----------------------------------------------------------------------===//

def InstantiateModelPass : Pass<"gpt-instantiate-model", "::mlir::ModuleOp"> {
  let summary = "Instantiates a generic model file for one configuration and batch shape";
  let description = [{
    A model file (models/gpt2.mlir) is generic: it lists configuration
    presets in the module attribute `gpt.models`, its public functions take
    `?`-shaped arguments annotated with symbolic shapes (`gpt.shape =
    "(3*C, C)"`), config integers are `#gpt.cfg<"n_head">` references and
    layers are `gpt.repeat` ops over a block function.

    For the preset named by `model` (with `batch`/`seq` overriding the
    preset's B and T) this pass:
      1. resolves the configuration (the padded vocabulary is vocab_size
         rounded up to `vocab_multiple`, 128 unless the preset says);
      2. gives every argument of every public function its static shape;
      3. unrolls each `gpt.repeat`, adding one set of parameter arguments per
         copy, named `<prefix>.<i>.<name>`, and erases the block functions;
      4. replaces every `#gpt.cfg` reference by its integer;
      5. re-infers every result type, so shape errors surface here, with the
         op's location.
    The module gets `gpt.config` (the resolved integers) and
    `gpt.num_parameters`. Symbols: B batch, T seq, C n_embd, H n_head,
    L n_layer, V vocab_size, Vp padded_vocab_size, maxT block_size.

    Before:
    ```mlir
    %h = gpt.repeat @block(%x) {count = #gpt.cfg<"n_layer">, prefix = "h"}
        : tensor<?x?x?xf32>
    ```
    After (n_layer = 2): the block's ops twice, on `h.0.*` and `h.1.*`
    parameters, with static shapes.
  }];
  let options = [
    Option<"model", "model", "std::string", /*default=*/"\"\"",
           "Preset in the module's gpt.models (e.g. tiny, 124M); empty when "
           "the module holds a single preset">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Batch size B (0: the preset's)">,
    Option<"seq", "seq", "int64_t", /*default=*/"0",
           "Sequence length T (0: the preset's, at most block_size)">,
  ];
  let dependentDialects = ["::mlir::gpt::GPTDialect", "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Decompositions
//===----------------------------------------------------------------------===//

def DecomposeAttentionPass : Pass<"gpt-decompose-attention", "::mlir::func::FuncOp"> {
  let summary = "Rewrites gpt.causal_attention into matmul, softmax and layout ops";
  let description = [{
    Expands each statically shaped `gpt.causal_attention` (B, T, 3C) into:
    slice q/k/v, reshape to (B, T, H, D), transpose to (B, H, T, D),
    `q k^T` scaled by 1/sqrt(D), `gpt.causal_mask`, `gpt.softmax`, `· v`,
    and back to (B, T, C). This is the unfused reference form; it
    materialises the (B, H, T, T) scores that a flash kernel avoids. An op
    whose `lse` result is read (by a `gpt.causal_attention_grad`) stays:
    run this pass before `gpt-autodiff`.

    ```mlir
    %y, %lse = gpt.causal_attention %qkv {num_heads = 2 : i64}
        : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
    ```
    becomes a chain of `gpt.slice`, `gpt.reshape`, `gpt.transpose`,
    `gpt.matmul`, `gpt.scale`, `gpt.causal_mask` and `gpt.softmax`.
  }];
  let dependentDialects = ["::mlir::gpt::GPTDialect"];
}

#endif // GPT_TRANSFORMS_PASSES_TD
