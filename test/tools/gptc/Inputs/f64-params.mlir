// A bigram model whose final layernorm keeps f64 parameters over an f32
// input: the dialect and the reference interpreter accept it, codegen does not.
module attributes {gpt.models = {
  "toy" = {n_layer = 1, n_head = 1, n_embd = 16, vocab_size = 60, block_size = 16, batch = 2, seq = 8, vocab_multiple = 16}
}} {
  func.func @forward(
      %tokens:  tensor<?x?xi32> {gpt.input = "tokens",      gpt.shape = "(B, T)"},
      %targets: tensor<?x?xi32> {gpt.input = "targets",     gpt.shape = "(B, T)"},
      %wte:     tensor<?x?xf32> {gpt.param = "wte",         gpt.shape = "(Vp, C)"},
      %wpe:     tensor<?x?xf32> {gpt.param = "wpe",         gpt.shape = "(maxT, C)"},
      %lnf_w:   tensor<?xf64>   {gpt.param = "ln_f.weight", gpt.shape = "(C)"},
      %lnf_b:   tensor<?xf64>   {gpt.param = "ln_f.bias",   gpt.shape = "(C)"}
  ) -> (tensor<f32> {gpt.output = "loss"}) {
    %x = gpt.embed %wte, %wpe, %tokens
        : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi32>) -> tensor<?x?x?xf32>
    %xf = gpt.layernorm %x, %lnf_w, %lnf_b {epsilon = 1.0e-05 : f64}
        : (tensor<?x?x?xf32>, tensor<?xf64>, tensor<?xf64>) -> tensor<?x?x?xf32>
    %logits = gpt.matmul %xf, %wte {transpose_rhs}
        : (tensor<?x?x?xf32>, tensor<?x?xf32>) -> tensor<?x?x?xf32>
    %loss = gpt.cross_entropy %logits, %targets {vocab_size = #gpt.cfg<"vocab_size">}
        : (tensor<?x?x?xf32>, tensor<?x?xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
