// GPT-2: forward pass and mean cross-entropy loss, for the whole family.
//
// This file is generic over the configuration. Dimensions are `?`; each
// argument's `gpt.shape` says what it becomes, and `#gpt.cfg<"...">` stands
// for a config integer. `gptc compile models/gpt2.mlir --model=124M
// --batch=16 --seq=1024` (pass: gpt-instantiate-model) picks a preset below
// (124M when --model is not given), makes every shape static and unrolls
// the n_layer transformer blocks.
//
// A preset's `batch` is the default B. With `fit_batch = 1` (GPT-2's sizes),
// `gptc compile` for CUDA without --batch instead takes the largest
// power-of-two multiple of it whose memory plan fits --gpu-memory.
//
// Symbols in gpt.shape:
//   B batch        T sequence (<= maxT)   C n_embd      H n_head
//   V vocab_size   Vp padded vocab: V rounded up to vocab_multiple (128)
//   maxT block_size
//
// Weights use torch.nn.Linear layout (out, in), as llm.c does; the LM head
// is tied to the token embedding (wte), as in GPT-2. Padded vocabulary rows
// take no part in the loss (gpt.cross_entropy reads only the first V logits).

module attributes {gpt.models = {
  // name    layers        heads        width         vocabulary           context
  "124M"  = {n_layer = 12, n_head = 12, n_embd = 768,  vocab_size = 50257, block_size = 1024, batch = 4, seq = 1024, fit_batch = 1},
  "350M"  = {n_layer = 24, n_head = 16, n_embd = 1024, vocab_size = 50257, block_size = 1024, batch = 4, seq = 1024, fit_batch = 1},
  "774M"  = {n_layer = 36, n_head = 20, n_embd = 1280, vocab_size = 50257, block_size = 1024, batch = 4, seq = 1024, fit_batch = 1},
  "1558M" = {n_layer = 48, n_head = 25, n_embd = 1600, vocab_size = 50257, block_size = 1024, batch = 4, seq = 1024, fit_batch = 1},
  // Test configs. `tiny` has a toy vocabulary (60, padded to 64);
  // `mini` keeps GPT-2's tokenizer vocabulary for runs on real text.
  "tiny"  = {n_layer = 2,  n_head = 2,  n_embd = 16,   vocab_size = 60,    block_size = 16,   batch = 2, seq = 8, vocab_multiple = 16},
  "mini"  = {n_layer = 2,  n_head = 4,  n_embd = 64,   vocab_size = 50257, block_size = 128,  batch = 4, seq = 64}
}} {

  // One pre-LayerNorm transformer block: x + attn(ln_1(x)), then
  // x + mlp(ln_2(x)). gpt.repeat gives copy i the parameters "h.<i>.<name>".
  func.func private @block(
      %x:        tensor<?x?x?xf32>,                                                   // (B, T, C)
      %ln1_w:    tensor<?xf32>   {gpt.param = "ln_1.weight",        gpt.shape = "(C)"},
      %ln1_b:    tensor<?xf32>   {gpt.param = "ln_1.bias",          gpt.shape = "(C)"},
      %attn_w:   tensor<?x?xf32> {gpt.param = "attn.c_attn.weight", gpt.shape = "(3*C, C)"},
      %attn_b:   tensor<?xf32>   {gpt.param = "attn.c_attn.bias",   gpt.shape = "(3*C)"},
      %aproj_w:  tensor<?x?xf32> {gpt.param = "attn.c_proj.weight", gpt.shape = "(C, C)"},
      %aproj_b:  tensor<?xf32>   {gpt.param = "attn.c_proj.bias",   gpt.shape = "(C)"},
      %ln2_w:    tensor<?xf32>   {gpt.param = "ln_2.weight",        gpt.shape = "(C)"},
      %ln2_b:    tensor<?xf32>   {gpt.param = "ln_2.bias",          gpt.shape = "(C)"},
      %fc_w:     tensor<?x?xf32> {gpt.param = "mlp.c_fc.weight",    gpt.shape = "(4*C, C)"},
      %fc_b:     tensor<?xf32>   {gpt.param = "mlp.c_fc.bias",      gpt.shape = "(4*C)"},
      %mproj_w:  tensor<?x?xf32> {gpt.param = "mlp.c_proj.weight",  gpt.shape = "(C, 4*C)"},
      %mproj_b:  tensor<?xf32>   {gpt.param = "mlp.c_proj.bias",    gpt.shape = "(C)"}
  ) -> tensor<?x?x?xf32> {
    // Attention.
    %a0 = gpt.layernorm %x, %ln1_w, %ln1_b {epsilon = 1.0e-05 : f64}
        : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>    // (B, T, C)
    %qkv = gpt.linear %a0, %attn_w, %attn_b
        : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>  // (B, T, 3C)
    // %lse: each row's softmax log-sum-exp, kept for the backward.
    %att, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">}
        : (tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)             // (B, T, C), (B, H, T)
    %a1 = gpt.linear %att, %aproj_w, %aproj_b
        : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>  // (B, T, C)
    %x1 = gpt.add %x, %a1 : tensor<?x?x?xf32>                                         // residual

    // MLP.
    %m0 = gpt.layernorm %x1, %ln2_w, %ln2_b {epsilon = 1.0e-05 : f64}
        : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>    // (B, T, C)
    %h = gpt.linear %m0, %fc_w, %fc_b
        : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>  // (B, T, 4C)
    %g = gpt.gelu %h : tensor<?x?x?xf32>                                              // (B, T, 4C)
    %m1 = gpt.linear %g, %mproj_w, %mproj_b
        : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>  // (B, T, C)
    %x2 = gpt.add %x1, %m1 : tensor<?x?x?xf32>                                        // residual
    return %x2 : tensor<?x?x?xf32>
  }

  // Tokens (B, T) and next-token targets (B, T) -> mean loss over B*T.
  func.func @forward(
      %tokens:  tensor<?x?xi32> {gpt.input = "tokens",      gpt.shape = "(B, T)"},
      %targets: tensor<?x?xi32> {gpt.input = "targets",     gpt.shape = "(B, T)"},
      %wte:     tensor<?x?xf32> {gpt.param = "wte",         gpt.shape = "(Vp, C)"},
      %wpe:     tensor<?x?xf32> {gpt.param = "wpe",         gpt.shape = "(maxT, C)"},
      %lnf_w:   tensor<?xf32>   {gpt.param = "ln_f.weight", gpt.shape = "(C)"},
      %lnf_b:   tensor<?xf32>   {gpt.param = "ln_f.bias",   gpt.shape = "(C)"}
  ) -> (tensor<f32> {gpt.output = "loss"}) {
    %x0 = gpt.embed %wte, %wpe, %tokens
        : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi32>) -> tensor<?x?x?xf32>  // (B, T, C)
    %x = gpt.repeat @block(%x0) {count = #gpt.cfg<"n_layer">, prefix = "h"}
        : tensor<?x?x?xf32>                                                           // (B, T, C)
    %xf = gpt.layernorm %x, %lnf_w, %lnf_b {epsilon = 1.0e-05 : f64}
        : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>    // (B, T, C)
    // LM head tied to the token embedding: logits = xf wte^T.
    %logits = gpt.matmul %xf, %wte {transpose_rhs}
        : (tensor<?x?x?xf32>, tensor<?x?xf32>) -> tensor<?x?x?xf32>                  // (B, T, Vp)
    %loss = gpt.cross_entropy %logits, %targets {vocab_size = #gpt.cfg<"vocab_size">}
        : (tensor<?x?x?xf32>, tensor<?x?xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
