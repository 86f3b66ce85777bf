// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-instantiate-model="model=small"

// Tests that an unknown preset lists the known ones.

// expected-error @+1 {{unknown model preset 'small'; known: big, other}}
module attributes {gpt.models = {big = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}, other = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
}

// -----

// Tests that a module without presets is rejected.

// expected-error @+1 {{module has no 'gpt.models' dictionary of model presets}}
module {
}

// -----

// Tests that a preset must give every required key.

// expected-error @+1 {{preset 'small' lacks 'block_size'}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4}}} {
}

// -----

// Tests that seq may not exceed the block size.

// expected-error @+1 {{seq 8 exceeds block_size 4 of 'small'}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4, seq = 8}}} {
}

// -----

// Tests that the heads must divide the width.

// expected-error @+1 {{n_embd 6 is not a multiple of n_head 4}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 4, n_embd = 6, vocab_size = 4, block_size = 4}}} {
}

// -----

// Tests that an unknown shape symbol is named.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  // expected-error @+1 {{unknown symbol 'D' in shape '(B, D)'}}
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, D)"}) {
    return
  }
}

// -----

// Tests that a dynamic argument needs a gpt.shape.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  // expected-error @+1 {{argument 0 of @f needs a 'gpt.shape' to become static}}
  func.func @f(%x: tensor<?xf32>) {
    return
  }
}

// -----

// Tests that gpt.shape must agree with the declared rank and static sizes.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  // expected-error @+1 {{argument 0 of @f has type 'tensor<?x3xf32>' but gpt.shape "(B, C)"}}
  func.func @f(%x: tensor<?x3xf32> {gpt.input = "x", gpt.shape = "(B, C)"}) {
    return
  }
}

// -----

// Tests that an unknown #gpt.cfg key is reported.

// expected-error @+1 {{unknown configuration key 'n_expert' in #gpt.cfg}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  func.func @f(%qkv: tensor<1x2x12xf32>) -> tensor<1x2x4xf32> {
    %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_expert">} : (tensor<1x2x12xf32>) -> (tensor<1x2x4xf32>, tensor<1x?x2xf32>)
    return %y : tensor<1x2x4xf32>
  }
}

// -----

// Tests that an empty #gpt.cfg key is reported as unknown, not as a shape
// left dynamic.

// expected-error @+1 {{unknown configuration key '' in #gpt.cfg}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  func.func @f(%qkv: tensor<1x2x12xf32>) -> tensor<1x2x4xf32> {
    %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"">} : (tensor<1x2x12xf32>) -> (tensor<1x2x4xf32>, tensor<1x?x2xf32>)
    return %y : tensor<1x2x4xf32>
  }
}

// -----

// Tests that a shape error exposed by instantiation points at the op.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, C)"},
               %b: tensor<?xf32> {gpt.param = "b", gpt.shape = "(2*V)"}) -> tensor<?x?xf32> {
    // expected-error @+1 {{'gpt.bias_add' op input has 4 columns but bias has 8}}
    %y = gpt.bias_add %x, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
    return %y : tensor<?x?xf32>
  }
}

// -----

// Tests that a non-tensor argument is an error naming it, not a crash.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  // expected-error @+1 {{argument 0 of @f must be a ranked tensor, got 'f32'}}
  func.func @f(%w: f32 {gpt.param = "w"}) -> f32 {
    return %w : f32
  }
}

// -----

// Tests that a preset value past 32 bits is refused (the padded vocabulary
// wrapped to 0 and autodiff aborted).

// expected-error @+1 {{'vocab_size' = 9223372036854775000 of 'small' exceeds 2^31-1}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 9223372036854775000, block_size = 4}}} {
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, C)"}) -> tensor<?x?xf32> {
    return %x : tensor<?x?xf32>
  }
}

// -----

// Tests that a non-positive vocab_multiple is refused, not read as the default.

// expected-error @+1 {{preset 'small' key 'vocab_multiple' must be positive}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4, vocab_multiple = -16}}} {
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, C)"}) -> tensor<?x?xf32> {
    return %x : tensor<?x?xf32>
  }
}

// -----

// Tests that activations past 2^40 elements are refused before any pass
// sizes them (launch grids wrapped, tensor sizes overflowed).

// expected-error @+1 {{batch 1000000 x seq 1024 x 2048 activations exceed 2^40 elements: lower --batch or --seq}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 2000, block_size = 1024, batch = 1000000}}} {
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, C)"}) -> tensor<?x?xf32> {
    return %x : tensor<?x?xf32>
  }
}

// -----

// Tests that a preset key no pass reads is refused (a typo would be ignored).

// expected-error @+1 {{preset 'small' has unknown key 'n_embed' (known: n_layer, n_head, n_embd, vocab_size, block_size, batch, seq, vocab_multiple, fit_batch)}}
module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, n_embed = 8, vocab_size = 4, block_size = 4}}} {
  func.func @f(%x: tensor<?x?xf32> {gpt.input = "x", gpt.shape = "(B, C)"}) -> tensor<?x?xf32> {
    return %x : tensor<?x?xf32>
  }
}

// -----

// Tests that two parameters of one name are refused: optimizer state and
// checkpoints bind them by name.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 1, n_embd = 4, vocab_size = 4, block_size = 4}}} {
  // expected-error @+1 {{arguments 0 and 1 of @f are both named 'w'}}
  func.func @f(%a: tensor<?xf32> {gpt.param = "w", gpt.shape = "(C)"},
               %b: tensor<?xf32> {gpt.param = "w", gpt.shape = "(C)"}) -> tensor<?xf32> {
    return %a : tensor<?xf32>
  }
}
