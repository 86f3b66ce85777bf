//===- GPTAttrs.td - gpt dialect attributes ------------------------------===//

#ifndef GPT_ATTRS_TD
#define GPT_ATTRS_TD

include "dialects/GPT/IR/GPTBase.td"

def GPT_ConfigRefAttr : GPT_Attr<"ConfigRef", "cfg"> {
  let summary = "A reference to an integer of the model configuration";
  let description = [{
    Stands for an integer that the model configuration decides, such as the
    number of heads or layers. `gpt-instantiate-model` replaces every such
    reference with the value of the chosen preset.

    ```mlir
    %y = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">} : ...
    ```

    Known names: `n_layer`, `n_head`, `n_embd`, `vocab_size`,
    `padded_vocab_size`, `block_size`, `batch`, `seq`.
  }];
  let parameters = (ins StringRefParameter<"configuration key">:$name);
  let assemblyFormat = "`<` $name `>`";
}

/// An integer attribute that may still be a `#gpt.cfg` reference.
def GPT_IntOrConfigAttr : AnyAttrOf<[I64Attr, GPT_ConfigRefAttr]>;

def GPT_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kind", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Mean", 1, "mean">,
    I32EnumAttrCase<"Max", 2, "max">]> {
  let cppNamespace = "::mlir::gpt";
}

#endif // GPT_ATTRS_TD
