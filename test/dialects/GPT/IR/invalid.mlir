// RUN: gpt-opt %s --split-input-file --verify-diagnostics

// Tests that gpt.embed rejects ids that are not rank 2.
func.func @embed_ids_rank(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>, %ids: tensor<8xi32>) {
  // expected-error @+2 {{expects wte (V, C), wpe (maxT, C) and ids (B, T), got ranks 2, 2, 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects a rank-1 position table.
func.func @embed_wpe_rank(%wte: tensor<64x16xf32>, %wpe: tensor<16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{got ranks 2, 1, 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects tables of different element types.
func.func @embed_elt(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xbf16>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{wte and wpe must have one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xbf16>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects tables with different channel counts.
func.func @embed_channels(%wte: tensor<64x16xf32>, %wpe: tensor<16x8xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{wte has 16 channels but wpe has 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects a sequence longer than the position table.
func.func @embed_seq(%wte: tensor<64x16xf32>, %wpe: tensor<8x16xf32>, %ids: tensor<2x9xi32>) {
  // expected-error @+2 {{sequence length 9 exceeds the 8 rows of wpe}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<8x16xf32>, tensor<2x9xi32>) -> tensor<2x9x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects ids that are not i32.
func.func @embed_ids_type(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<2x8xi64>'}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects float ids.
func.func @embed_ids_float(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>,
                           %ids: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed rejects integer tables.
func.func @embed_int_table(%wte: tensor<64x16xi32>, %wpe: tensor<16x16xi32>,
                           %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<64x16xi32>'}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xi32>, tensor<16x16xi32>, tensor<2x8xi32>) -> tensor<2x8x16xi32>
  return
}

// -----

// Tests that gpt.embed rejects a declared result type other than the inferred one.
func.func @embed_result(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x16xf32>' are incompatible with return type(s) of operation 'tensor<2x8x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return
}

// -----

// Tests that gpt.embed rejects a result wider than its tables.
func.func @embed_wide_result(%wte: tensor<64x16xbf16>, %wpe: tensor<16x16xbf16>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x16xbf16>' are incompatible with return type(s) of operation 'tensor<2x8x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xbf16>, tensor<16x16xbf16>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.embed_grad rejects tables narrower than its gradient.
func.func @embed_grad_narrow_tables(%dy: tensor<2x8x16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{are incompatible with return type(s) of operation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = gpt.embed_grad %dy, %ids {vocab_rows = 64 : i64, position_rows = 16 : i64}
      : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> (tensor<64x16xbf16>, tensor<16x16xbf16>)
  return
}

// -----

// Tests that gpt.embed_grad rejects tables of two element types.
func.func @embed_grad_mixed_tables(%dy: tensor<2x8x16xbf16>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{are incompatible with return type(s) of operation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = gpt.embed_grad %dy, %ids {vocab_rows = 64 : i64, position_rows = 16 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8xi32>) -> (tensor<64x16xf32>, tensor<16x16xbf16>)
  return
}

// -----

// Tests that gpt.layernorm rejects a rank-2 weight.
func.func @layernorm_weight_rank(%x: tensor<2x8x16xf32>, %w: tensor<1x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+2 {{expects input (..., C), weight (C) and bias (C)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<1x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects a rank-0 input.
func.func @layernorm_input_rank(%x: tensor<f32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+2 {{expects input (..., C), weight (C) and bias (C)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b : (tensor<f32>, tensor<16xf32>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.layernorm rejects a weight of the wrong size.
func.func @layernorm_weight_size(%x: tensor<2x8x16xf32>, %w: tensor<8xf32>, %b: tensor<16xf32>) {
  // expected-error @+2 {{normalises 16 channels but weight has 8 and bias 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects a bias of the wrong size.
func.func @layernorm_bias_size(%x: tensor<2x8x16xf32>, %w: tensor<?xf32>, %b: tensor<32xf32>) {
  // expected-error @+2 {{normalises 16 channels but weight has ? and bias 32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<?xf32>, tensor<32xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects a weight and a bias of different types.
func.func @layernorm_elt(%x: tensor<2x8x16xf32>, %w: tensor<16xbf16>, %b: tensor<16xf32>) {
  // expected-error @+2 {{weight and bias must have one float type, the input it or a narrower one}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<16xbf16>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects an input wider than its weight and bias.
func.func @layernorm_wide_input(%x: tensor<2x8x16xf32>, %w: tensor<16xbf16>, %b: tensor<16xbf16>) {
  // expected-error @+2 {{weight and bias must have one float type, the input it or a narrower one}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<16xbf16>, tensor<16xbf16>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects an epsilon that is not f64.
func.func @layernorm_eps_type(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute}}
  %0 = gpt.layernorm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects a negative epsilon (a NaN loss that
// run-reference reported with exit 0).
func.func @layernorm_eps_negative(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is a finite number > 0}}
  %0 = gpt.layernorm %x, %w, %b {epsilon = -1.0 : f64}
      : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.layernorm_grad rejects a zero epsilon.
func.func @layernorm_grad_eps_zero(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is a finite number > 0}}
  %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w {epsilon = 0.0 : f64}
      : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// Tests that gpt.linear rejects a rank-1 weight.
func.func @linear_weight_rank(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+2 {{expects input (..., K) and weight (N, K)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.linear rejects a rank-0 input.
func.func @linear_input_rank(%x: tensor<f32>, %w: tensor<4x16xf32>) {
  // expected-error @+2 {{expects input (..., K) and weight (N, K)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<f32>, tensor<4x16xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that gpt.linear rejects a weight whose K differs from the input's.
func.func @linear_k(%x: tensor<2x8x16xf32>, %w: tensor<48x15xf32>) {
  // expected-error @+2 {{input has 16 features but weight (N, K) has K = 15}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<48x15xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a weight given as (K, N).
func.func @linear_k_transposed(%x: tensor<2x8x16xf32>, %w: tensor<16x48xf32>) {
  // expected-error @+2 {{input has 16 features but weight (N, K) has K = 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a weight of another element type.
func.func @linear_elt(%x: tensor<2x8x16xf32>, %w: tensor<48x16xbf16>) {
  // expected-error @+2 {{input and weight must have one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<48x16xbf16>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a bias of the wrong size.
func.func @linear_bias_size(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+2 {{bias must be (N) with N = 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<16xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a rank-2 bias.
func.func @linear_bias_rank(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>, %b: tensor<1x48xf32>) {
  // expected-error @+2 {{bias must be (N) with N = 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<1x48xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a bias of another element type.
func.func @linear_bias_elt(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>, %b: tensor<48xf16>) {
  // expected-error @+2 {{bias must have the input's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf16>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects a declared result type other than the inferred one.
func.func @linear_result(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x48xf32>' are incompatible with return type(s) of operation 'tensor<2x8x47xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x47xf32>
  return
}

// -----

// Tests that gpt.linear rejects a declared static result where the inferred one is dynamic.
func.func @linear_result_refined(%x: tensor<?x16xf32>, %w: tensor<48x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x48xf32>' are incompatible with return type(s) of operation 'tensor<4x48xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.linear %x, %w : (tensor<?x16xf32>, tensor<48x16xf32>) -> tensor<4x48xf32>
  return
}

// -----

// Tests that gpt.linear rejects integer operands.
func.func @linear_int(%x: tensor<2x16xi32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x16xi32>'}}
  %0 = gpt.linear %x, %w : (tensor<2x16xi32>, tensor<4x16xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that gpt.linear rejects an unranked input.
func.func @linear_unranked(%x: tensor<*xf32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<*xf32>'}}
  %0 = gpt.linear %x, %w : (tensor<*xf32>, tensor<4x16xf32>) -> tensor<*xf32>
  return
}

// -----

// Tests that gpt.matmul rejects a rank-1 lhs.
func.func @matmul_lhs_rank(%a: tensor<16xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+2 {{lhs must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<16xf32>, tensor<16x4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that gpt.matmul rejects an rhs that is neither rank 2 nor the lhs rank.
func.func @matmul_rhs_rank(%a: tensor<2x4x8x16xf32>, %b: tensor<4x16x8xf32>) {
  // expected-error @+2 {{rhs must have rank 2 or the lhs rank (4), got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<2x4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

// Tests that gpt.matmul rejects a batched rhs with a rank-2 lhs.
func.func @matmul_rhs_rank_higher(%a: tensor<8x16xf32>, %b: tensor<2x16x4xf32>) {
  // expected-error @+2 {{rhs must have rank 2 or the lhs rank (2), got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

// Tests that gpt.matmul rejects operands of different element types.
func.func @matmul_elt(%a: tensor<8x16xf32>, %b: tensor<16x4xbf16>) {
  // expected-error @+2 {{lhs and rhs must have one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xbf16>) -> tensor<8x4xf32>
  return
}

// -----

// Tests that gpt.matmul rejects different batch dimensions.
func.func @matmul_batch(%a: tensor<2x4x8x16xf32>, %b: tensor<2x2x16x8xf32>) {
  // expected-error @+2 {{batch dimension 1 differs: 4 vs 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<2x4x8x16xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

// Tests that gpt.matmul rejects different contraction sizes.
func.func @matmul_k(%a: tensor<8x16xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs K = 16, rhs K = 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

// Tests that gpt.matmul takes K from the last rhs dimension under transpose_rhs.
func.func @matmul_k_transpose_rhs(%x: tensor<2x8x16xf32>, %w: tensor<16x64xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs K = 16, rhs K = 64}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %x, %w {transpose_rhs}
      : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.matmul takes K from the second-last lhs dimension under transpose_lhs.
func.func @matmul_k_transpose_lhs(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs K = 8, rhs K = 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b {transpose_lhs} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return
}

// -----

// Tests that gpt.matmul rejects a declared result type other than the inferred one.
func.func @matmul_result(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Tests that gpt.bias_add rejects a rank-2 bias.
func.func @bias_add_rank(%x: tensor<2x8x48xf32>, %b: tensor<8x48xf32>) {
  // expected-error @+2 {{expects input (..., N) and bias (N)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.bias_add %x, %b : (tensor<2x8x48xf32>, tensor<8x48xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.bias_add rejects a bias of the wrong size.
func.func @bias_add_size(%x: tensor<2x8x48xf32>, %b: tensor<16xf32>) {
  // expected-error @+2 {{input has 48 columns but bias has 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.bias_add %x, %b : (tensor<2x8x48xf32>, tensor<16xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.bias_add rejects a bias of another element type.
func.func @bias_add_elt(%x: tensor<2x8x48xf32>, %b: tensor<48xf64>) {
  // expected-error @+2 {{input and bias must have one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.bias_add %x, %b : (tensor<2x8x48xf32>, tensor<48xf64>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.layernorm rejects a result wider than its input.
func.func @layernorm_wider_result(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8xbf16>' are incompatible with return type(s) of operation 'tensor<2x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.layernorm %x, %w, %b : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that gpt.causal_attention rejects qkv that is not rank 3.
func.func @attention_rank(%qkv: tensor<8x48xf32>) {
  // expected-error @+2 {{expects qkv (B, T, 3C), got rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 4 : i64} : (tensor<8x48xf32>) -> (tensor<8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects a last dimension that is not 3C.
func.func @attention_3c(%qkv: tensor<2x8x50xf32>) {
  // expected-error @+2 {{last dimension 50 is not 3C}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 2 : i64} : (tensor<2x8x50xf32>) -> (tensor<2x8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects a head count that does not divide C.
func.func @attention_heads(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+2 {{16 channels do not split into 3 heads}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 3 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects zero heads.
func.func @attention_zero_heads(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+2 {{num_heads must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 0 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects a negative head count, even with a dynamic C.
func.func @attention_negative_heads(%qkv: tensor<?x?x?xf32>) {
  // expected-error @+2 {{num_heads must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = -4 : i64} : (tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects a num_heads that is neither i64 nor #gpt.cfg.
func.func @attention_heads_type(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 4 : i32} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention requires num_heads.
func.func @attention_no_heads(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+1 {{requires attribute 'num_heads'}}
  %0, %1 = gpt.causal_attention %qkv : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention rejects a declared result type other than the inferred one.
func.func @attention_result(%qkv: tensor<2x8x48xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x16xf32>', 'tensor<2x4x8xf32>' are incompatible with return type(s) of operation 'tensor<2x8x48xf32>', 'tensor<?x?x?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = gpt.causal_attention %qkv {num_heads = 4 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x48xf32>, tensor<?x?x?xf32>)
  return
}

// -----

// Tests that gpt.causal_attention_grad rejects a log-sum-exp that is not (B, H, T).
func.func @attention_grad_lse_shape(%dy: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>,
                                    %y: tensor<2x8x16xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+2 {{lse 'tensor<2x8x4xf32>' is not (B, H, T) f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 4 : i64}
      : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.causal_attention_grad rejects a log-sum-exp that is not f32.
func.func @attention_grad_lse_type(%dy: tensor<2x8x16xbf16>, %qkv: tensor<2x8x48xbf16>,
                                   %y: tensor<2x8x16xbf16>, %lse: tensor<2x4x8xbf16>) {
  // expected-error @+2 {{lse 'tensor<2x4x8xbf16>' is not (B, H, T) f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 4 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x4x8xbf16>) -> tensor<2x8x48xbf16>
  return
}

// -----

// Tests that gpt.causal_attention_grad rejects an output whose shape is not the gradient's.
func.func @attention_grad_output(%dy: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>,
                                 %y: tensor<2x4x16xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+2 {{output 'tensor<2x4x16xf32>' and grad 'tensor<2x8x16xf32>' must have one shape}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 4 : i64}
      : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects targets of the logits' rank.
func.func @ce_rank(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8x1xi32>) {
  // expected-error @+2 {{expects logits (..., Vp) and targets (...), got ranks 3 and 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8x1xi32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects rank-0 logits.
func.func @ce_rank0(%logits: tensor<f32>, %targets: tensor<i32>) {
  // expected-error @+2 {{expects logits (..., Vp) and targets (...), got ranks 0 and 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects targets of another shape.
func.func @ce_shape(%logits: tensor<2x8x64xf32>, %targets: tensor<2x4xi32>) {
  // expected-error @+2 {{logits and targets differ in dimension 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects a vocab_size larger than Vp.
func.func @ce_vocab(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>) {
  // expected-error @+2 {{vocab_size 65 exceeds the 64 logits per position}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 65 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects a non-positive vocab_size.
func.func @ce_vocab_zero(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>) {
  // expected-error @+2 {{vocab_size must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 0 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects float targets.
func.func @ce_targets_type(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8xf32>) -> tensor<f32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects a result that is not rank 0.
func.func @ce_result_rank(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<1xf32>'}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<1xf32>
  return
}

// -----

// Tests that gpt.cross_entropy rejects a loss narrower than fp32 (bf16 logits
// give an fp32 loss).
func.func @ce_result_elt(%logits: tensor<2x8x64xbf16>, %targets: tensor<2x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<bf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<bf16>
  return
}

// -----

// Tests that gpt.repeat rejects an unknown callee.
func.func @repeat_unknown(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'nope' does not name a func.func}}
  %0 = gpt.repeat @nope(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee without arguments.
func.func private @block() -> tensor<2x8x16xf32>
func.func @repeat_no_args(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{callee @block must take the activation first and return one value}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee with two results.
func.func private @block(%x: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
func.func @repeat_two_results(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{callee @block must take the activation first and return one value}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee whose activation argument has another shape.
func.func private @block(%x: tensor<4x8x16xf32>) -> tensor<2x8x16xf32>
func.func @repeat_arg_shape(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{activation type 'tensor<2x8x16xf32>' does not match callee @block type 'tensor<4x8x16xf32>'}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee whose result has another shape.
func.func private @block(%x: tensor<?x?x?xf32>) -> tensor<?x?xf32>
func.func @repeat_result_shape(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{activation type 'tensor<2x8x16xf32>' does not match callee @block type 'tensor<?x?xf32>'}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee of another element type.
func.func private @block(%x: tensor<?x?x?xbf16>) -> tensor<?x?x?xbf16>
func.func @repeat_elt(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{activation type 'tensor<2x8x16xf32>' does not match callee @block type 'tensor<?x?x?xbf16>'}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee that takes a vector instead of a tensor.
func.func private @block(%x: vector<2x8x16xf32>) -> vector<2x8x16xf32>
func.func @repeat_vector(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{activation type 'tensor<2x8x16xf32>' does not match callee @block type 'vector<2x8x16xf32>'}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a callee parameter without a gpt.param name.
func.func private @block(%x: tensor<?x?x?xf32>, %w: tensor<?xf32> {gpt.param = "ln.weight"},
                         %b: tensor<?xf32>) -> tensor<?x?x?xf32>
func.func @repeat_param(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{callee @block argument 2 needs a 'gpt.param' name}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a gpt.param name that is not a string.
func.func private @block(%x: tensor<?x?x?xf32>, %w: tensor<?xf32> {gpt.param = 1 : i64})
    -> tensor<?x?x?xf32>
func.func @repeat_param_type(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{callee @block argument 1 needs a 'gpt.param' name}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a zero count.
func.func private @block(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
func.func @repeat_count_zero(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{count must be positive, got 0}}
  %0 = gpt.repeat @block(%x) {count = 0 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a negative count.
func.func private @block(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
func.func @repeat_count_negative(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{count must be positive, got -1}}
  %0 = gpt.repeat @block(%x) {count = -1 : i64, prefix = "h"} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat requires a prefix.
func.func private @block(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
func.func @repeat_no_prefix(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{requires attribute 'prefix'}}
  %0 = gpt.repeat @block(%x) {count = 2 : i64} : tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.repeat rejects a result type other than the input type.
func.func private @block(%x: tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
func.func @repeat_result(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{failed to verify that all of {input, result} have same type}}
  %0 = "gpt.repeat"(%x) <{callee = @block, count = 2 : i64, prefix = "h"}>
      : (tensor<2x8x16xf32>) -> tensor<?x?x?xf32>
  return
}

// -----

// Tests that the elementwise binary ops reject integer tensors.
func.func @add_int(%a: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x8xi32>'}}
  %0 = gpt.add %a, %a : tensor<2x8xi32>
  return
}

// -----

// Tests that the elementwise binary ops do not broadcast.
func.func @mul_broadcast(%a: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "gpt.mul"(%a, %b) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the elementwise binary ops reject mixed element types.
func.func @sub_elt(%a: tensor<2x8xf32>, %b: tensor<2x8xbf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "gpt.sub"(%a, %b) : (tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the elementwise unary ops reject integer tensors.
func.func @exp_int(%x: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x8xi32>'}}
  %0 = gpt.exp %x : tensor<2x8xi32>
  return
}

// -----

// Tests that the elementwise unary ops reject a result type other than the operand type.
func.func @gelu_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "gpt.gelu"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

// Tests that gpt.scale requires an f64 factor.
func.func @scale_factor(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{attribute 'factor' failed to satisfy constraint: 64-bit float attribute}}
  %0 = gpt.scale %x {factor = 2 : i64} : tensor<2x8xf32>
  return
}

// -----

// Tests that gpt.scale requires a factor.
func.func @scale_no_factor(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{requires attribute 'factor'}}
  %0 = gpt.scale %x : tensor<2x8xf32>
  return
}

// -----

// Tests that gpt.causal_mask rejects non-square scores.
func.func @causal_mask_square(%s: tensor<2x8x4xf32>) {
  // expected-error @+1 {{expects scores (..., T, T), got 'tensor<2x8x4xf32>'}}
  %0 = gpt.causal_mask %s : tensor<2x8x4xf32>
  return
}

// -----

// Tests that gpt.causal_mask rejects rank-1 scores.
func.func @causal_mask_rank(%s: tensor<8xf32>) {
  // expected-error @+1 {{expects scores (..., T, T), got 'tensor<8xf32>'}}
  %0 = gpt.causal_mask %s : tensor<8xf32>
  return
}

// -----

// Tests that gpt.constant rejects a dynamic result type.
func.func @constant_dynamic() {
  // expected-error @+1 {{result type must be static, got 'tensor<?x16xf32>'}}
  %0 = gpt.constant 1.0 : tensor<?x16xf32>
  return
}

// -----

// Tests that gpt.constant rejects an integer result type.
func.func @constant_int() {
  // expected-error @+1 {{result #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = "gpt.constant"() <{value = 1.0 : f64}> : () -> tensor<4xi32>
  return
}

// -----

// Tests that gpt.constant requires an f64 value.
func.func @constant_value_type() {
  // expected-error @+1 {{attribute 'value' failed to satisfy constraint: 64-bit float attribute}}
  %0 = "gpt.constant"() <{value = 1.0 : f32}> : () -> tensor<4xf32>
  return
}

// -----

// Tests that gpt.cast rejects a change of shape.
func.func @cast_shape(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = gpt.cast %x : tensor<2x8xf32> to tensor<8x2xbf16>
  return
}

// -----

// Tests that gpt.cast rejects integer element types.
func.func @cast_int(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x8xi32>'}}
  %0 = gpt.cast %x : tensor<2x8xf32> to tensor<2x8xi32>
  return
}

// -----

// Tests that gpt.reduce rejects an empty dims list.
func.func @reduce_empty(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{needs at least one dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce sum %x dims [] : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.reduce rejects a dimension past the rank.
func.func @reduce_range(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{dimension 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce sum %x dims [3] : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.reduce rejects a negative dimension.
func.func @reduce_negative(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{dimension -1 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce mean %x dims [-1] : (tensor<2x8x16xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that gpt.reduce rejects unsorted dims.
func.func @reduce_unsorted(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{dims must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce sum %x dims [1, 0] : (tensor<2x8x16xf32>) -> tensor<16xf32>
  return
}

// -----

// Tests that gpt.reduce rejects repeated dims.
func.func @reduce_repeated(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{dims must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce max %x dims [1, 1] : (tensor<2x8x16xf32>) -> tensor<2x16xf32>
  return
}

// -----

// Tests that gpt.reduce without keep_dims drops the reduced dimensions.
func.func @reduce_keep_dims_result(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8xf32>' are incompatible with return type(s) of operation 'tensor<2x8x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.reduce sum %x dims [2] : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  return
}

// -----

// Tests that gpt.reduce rejects an unknown kind.
func.func @reduce_kind(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [sum, mean, max]}}
  %0 = gpt.reduce min %x dims [2] : (tensor<2x8x16xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that gpt.reshape rejects a change of element count.
func.func @reshape_count(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{cannot reshape 256 elements into 255}}
  %0 = gpt.reshape %x : tensor<2x8x16xf32> to tensor<255xf32>
  return
}

// -----

// Tests that gpt.reshape rejects dynamic shapes.
func.func @reshape_dynamic(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{needs static shapes, got 'tensor<?x16xf32>' to 'tensor<32xf32>'}}
  %0 = gpt.reshape %x : tensor<?x16xf32> to tensor<32xf32>
  return
}

// -----

// Tests that gpt.reshape rejects a change of element type.
func.func @reshape_elt(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{must keep the element type}}
  %0 = gpt.reshape %x : tensor<2x8xf32> to tensor<16xbf16>
  return
}

// -----

// Tests that gpt.transpose rejects a permutation of the wrong length.
func.func @transpose_length(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{permutation has 2 entries for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.transpose %x [1, 0] : (tensor<2x8x16xf32>) -> tensor<8x2x16xf32>
  return
}

// -----

// Tests that gpt.transpose rejects a repeated entry.
func.func @transpose_repeated(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{permutation is not a permutation of [0, 3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.transpose %x [0, 1, 1] : (tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

// Tests that gpt.transpose rejects an entry out of range.
func.func @transpose_range(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{permutation is not a permutation of [0, 3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.transpose %x [0, 3, 1] : (tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

// Tests that gpt.transpose rejects a declared result type other than the inferred one.
func.func @transpose_result(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<16x2x8xf32>' are incompatible with return type(s) of operation 'tensor<8x16x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.transpose %x [2, 0, 1] : (tensor<2x8x16xf32>) -> tensor<8x16x2xf32>
  return
}

// -----

// Tests that gpt.slice rejects a dimension past the rank.
func.func @slice_dim(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{dimension 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 3 : i64, start = 0 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

// Tests that gpt.slice rejects a negative start.
func.func @slice_start(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{needs start >= 0 and size >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = -1 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.slice rejects an empty slice.
func.func @slice_size(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{needs start >= 0 and size >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = 0 : i64, size = 0 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x0xf32>
  return
}

// -----

// Tests that gpt.slice rejects a range past the end of the dimension.
func.func @slice_range(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{range [40, 56) exceeds dimension 2 of size 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = 40 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that gpt.slice rejects a start so large that start + size overflows.
func.func @slice_overflow(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{range start 9223372036854775807 plus size 1 overflows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = 9223372036854775807 : i64, size = 1 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x1xf32>
  return
}

// -----

// Tests that gpt.slice rejects a size larger than the dimension.
func.func @slice_size_too_large(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{range [0, 64) exceeds dimension 2 of size 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = 0 : i64, size = 64 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

// Tests that gpt.slice rejects a declared result type other than the inferred one.
func.func @slice_result(%x: tensor<2x8x48xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x16xf32>' are incompatible with return type(s) of operation 'tensor<2x8x48xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.slice %x {dim = 2 : i64, start = 0 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x48xf32>
  return
}

// -----


// Tests that gpt.all_reduce's world_size is a rank count, or 0 for any.

func.func @all_reduce_no_ranks(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{world_size must be >= 0 (0: any number of ranks), got -1}}
  %y = gpt.all_reduce max %x {bucket = 0 : i64, bytes = 16 : i64, world_size = -1 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a ZeRO-1 shard is 1/world_size of its tensor: 3 ranks cannot
// split 16 elements.

func.func @reduce_scatter_indivisible(%x: tensor<16xf32>) {
  // expected-error @+1 {{world_size 3 does not divide the 16 elements of 'tensor<16xf32>'}}
  %y = "gpt.reduce_scatter"(%x) {kind = 1 : i32, bucket = 0 : i64, bytes = 64 : i64, world_size = 3 : i64} : (tensor<16xf32>) -> tensor<5xf32>
  return
}

// -----

// Tests that sharding needs at least two ranks.

func.func @rank_slice_one_rank(%x: tensor<16xf32>) {
  // expected-error @+1 {{world_size must be >= 2 (a shard of one rank is the tensor), got 1}}
  %y = gpt.rank_slice %x {world_size = 1 : i64} : (tensor<16xf32>) -> tensor<16xf32>
  return
}

// -----

// Tests that gpt.rank_slice's result is the 1-D slice of one rank.

func.func @rank_slice_type(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{result must be 'tensor<8xf32>', got 'tensor<2x4xf32>'}}
  %y = gpt.rank_slice %x {world_size = 2 : i64} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that gpt.all_gather gathers each rank's shard of its destination.

func.func @all_gather_shard(%s: tensor<4xf32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{gathers 'tensor<4xf32>' from each of 2 ranks into 'tensor<4x4xf32>': expected the shard 'tensor<8xf32>'}}
  %g = gpt.all_gather %s into %w {bucket = 0 : i64, bytes = 16 : i64, world_size = 2 : i64}
      : tensor<4xf32> into tensor<4x4xf32>
  return
}

// -----

// Tests that gpt.adamw_multi needs one weight decay per parameter.

func.func @adamw_multi_decays(%p: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{needs one weight decay per parameter (1), got 2}}
  %np, %nm, %nv = gpt.adamw_multi (%p), (%p), (%p), (%p), %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1, 0.0>}
      : (tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  return
}

// -----

// Tests that gpt.adamw_multi needs a gradient and moments per parameter.

func.func @adamw_multi_counts(%p: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{needs as many gradients and moments as parameters (1), got 2, 1 and 1}}
  %r:3 = "gpt.adamw_multi"(%p, %p, %p, %p, %p, %lr, %step, %s)
      <{beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1>,
        operandSegmentSizes = array<i32: 1, 2, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>}>
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.adamw_multi needs each gradient and moment to match its parameter's type.

func.func @adamw_multi_types(%p: tensor<4xf32>, %g: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{parameter 0 has type 'tensor<4xf32>' but its gradient has 'tensor<8xf32>' (the parameter's type, or its shape in a narrower float type)}}
  %r:3 = "gpt.adamw_multi"(%p, %g, %p, %p, %lr, %step, %s)
      <{beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1>,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>}>
      : (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.layernorm_grad rejects a gradient wider than its input.
func.func @layernorm_grad_wide_grad(%dy: tensor<4x8xf32>, %x: tensor<4x8xbf16>, %w: tensor<8xbf16>) {
  // expected-error @+2 {{grad 'tensor<4x8xf32>' must have input 'tensor<4x8xbf16>''s shape, in its element type or a narrower float type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = gpt.layernorm_grad %dy, %x, %w : (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  return
}

// -----

// Tests that gpt.adamw_multi rejects a moment of another type than its parameter.

func.func @adamw_multi_moment(%p: tensor<4xf32>, %m: tensor<4xbf16>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{parameter 0 has type 'tensor<4xf32>' but its moment has 'tensor<4xbf16>'}}
  %r:3 = "gpt.adamw_multi"(%p, %p, %m, %p, %lr, %step, %s)
      <{beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1>,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>}>
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.adamw_multi rejects a gradient wider than its parameter.

func.func @adamw_multi_wide_grad(%p: tensor<4xbf16>, %g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{parameter 0 has type 'tensor<4xbf16>' but its gradient has 'tensor<4xf32>' (the parameter's type, or its shape in a narrower float type)}}
  %r:3 = "gpt.adamw_multi"(%p, %g, %p, %p, %lr, %step, %s)
      <{beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1>,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>}>
      : (tensor<4xbf16>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<f32>, tensor<i32>, tensor<f32>)
      -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  return
}

// -----

// Tests that gpt.adamw_multi rejects an f16 gradient for a bf16 parameter:
// same width, and the widening would not be exact.

func.func @adamw_multi_f16_grad(%p: tensor<4xbf16>, %g: tensor<4xf16>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error @+1 {{parameter 0 has type 'tensor<4xbf16>' but its gradient has 'tensor<4xf16>' (the parameter's type, or its shape in a narrower float type)}}
  %r:3 = "gpt.adamw_multi"(%p, %g, %p, %p, %lr, %step, %s)
      <{beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1>,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 1>}>
      : (tensor<4xbf16>, tensor<4xf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<f32>, tensor<i32>, tensor<f32>)
      -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  return
}

// -----

// Tests that gpt.fp8_matmul rejects two e5m2 operands (no tensor core
// takes them).
func.func @fp8_matmul_two_e5m2(%a: tensor<8x16xbf16>, %b: tensor<16x4xbf16>) {
  // expected-error @+1 {{at most one operand may be e5m2}}
  %0 = gpt.fp8_matmul e5m2 %a, e5m2 %b : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.fp8_matmul checks shapes as gpt.matmul does.
func.func @fp8_matmul_shapes(%a: tensor<8x16xbf16>, %b: tensor<8x4xbf16>) {
  // expected-error @+2 {{contraction}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = gpt.fp8_matmul e4m3 %a, e4m3 %b : (tensor<8x16xbf16>, tensor<8x4xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.fp8_quantize transposes rank-2 inputs only.
func.func @fp8_quantize_transpose_rank(%x: tensor<2x8x16xbf16>, %s: tensor<f32>) {
  // expected-error @+2 {{transpose takes a rank-2 input, got rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %q = gpt.fp8_quantize e4m3 %x, %s {transpose} : (tensor<2x8x16xbf16>, tensor<f32>) -> tensor<16x16xf8E4M3FN>
  return
}

// -----

// Tests that gpt.fp8_quantize's result has the format's element type.
func.func @fp8_quantize_format(%x: tensor<8x16xbf16>, %s: tensor<f32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x16xf8E4M3FN>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %q = gpt.fp8_quantize e4m3 %x, %s : (tensor<8x16xbf16>, tensor<f32>) -> tensor<8x16xf8E5M2>
  return
}

// -----

// Tests that gpt.fp8_cast_transpose needs a matrix (rank >= 2) to transpose.
func.func @fp8_cast_transpose_rank(%x: tensor<16xbf16>, %s: tensor<f32>) {
  // expected-error @+2 {{input must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s : (tensor<16xbf16>, tensor<f32>) -> (tensor<16xf8E4M3FN>, tensor<16xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.fp8_cast_transpose's rounded_to must be narrower than its
// input (rounding f32 to f32 is no cast to fold).
func.func @fp8_cast_transpose_rounded_to_width(%x: tensor<8x16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{rounded_to must be bf16 or f16, narrower than the input's 'f32', got 'f32'}}
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s {rounded_to = f32} : (tensor<8x16xf32>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.fp8_cast_transpose's rounded_to must be a type gpt.cast
// narrows to (bf16 or f16).
func.func @fp8_cast_transpose_rounded_to_float(%x: tensor<8x16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{rounded_to must be bf16 or f16, narrower than the input's 'f32', got 'i16'}}
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s {rounded_to = i16} : (tensor<8x16xf32>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.fp8_cast_transpose cannot round and take the GELU: a
// GELU cast rounds gelu(x), not x.
func.func @fp8_cast_transpose_rounded_to_gelu(%x: tensor<8x16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{rounded_to and gelu cannot be combined}}
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s {gelu, rounded_to = bf16} : (tensor<8x16xf32>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.scaled_matmul rejects two e5m2 operands.
func.func @scaled_matmul_two_e5m2(%a: tensor<8x16xf8E5M2>, %s: tensor<f32>, %b: tensor<4x16xf8E5M2>) {
  // expected-error @+1 {{at most one operand may be e5m2}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s {transpose_rhs} : (tensor<8x16xf8E5M2>, tensor<f32>, tensor<4x16xf8E5M2>, tensor<f32>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.scaled_matmul's accumulator has the result's type.
func.func @scaled_matmul_accumulate_type(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %b: tensor<4x16xf8E4M3FN>, %acc: tensor<8x4xbf16>) {
  // expected-error @+1 {{accumulate 'tensor<8x4xbf16>' must have the result's type 'tensor<8x4xf32>'}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s accumulate %acc {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<4x16xf8E4M3FN>, tensor<f32>, tensor<8x4xbf16>) -> tensor<8x4xf32>
  return
}

// -----

// Tests that gpt.scaled_matmul takes a bias or an accumulator, not both.
func.func @scaled_matmul_bias_and_accumulate(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %b: tensor<4x16xf8E4M3FN>, %bias: tensor<4xbf16>, %acc: tensor<8x4xbf16>) {
  // expected-error @+1 {{takes a bias or an accumulator, not both}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s bias %bias accumulate %acc {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<4x16xf8E4M3FN>, tensor<f32>, tensor<4xbf16>, tensor<8x4xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.scaled_matmul's result has the product's shape.
func.func @scaled_matmul_shape(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %b: tensor<4x16xf8E4M3FN>) {
  // expected-error @+1 {{does not have the product's shape 8x4}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<4x16xf8E4M3FN>, tensor<f32>) -> tensor<8x8xbf16>
  return
}

// -----

// Tests that gpt.scaled_matmul's bias has one value per result column.
func.func @scaled_matmul_bias_length(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %b: tensor<4x16xf8E4M3FN>, %bias: tensor<8xbf16>) {
  // expected-error @+1 {{bias 'tensor<8xbf16>' is not one value per column of the result 'tensor<8x4xbf16>'}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s bias %bias {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<4x16xf8E4M3FN>, tensor<f32>, tensor<8xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.scaled_matmul's bias has the result's element type.
func.func @scaled_matmul_bias_type(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %b: tensor<4x16xf8E4M3FN>, %bias: tensor<4xf32>) {
  // expected-error @+1 {{bias 'tensor<4xf32>' must have the result's element type 'bf16'}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s bias %bias {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<4x16xf8E4M3FN>, tensor<f32>, tensor<4xf32>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that gpt.scaled_matmul takes FP8 operands only.
func.func @scaled_matmul_bf16(%a: tensor<8x16xbf16>, %s: tensor<f32>, %b: tensor<4x16xbf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of f8E4M3FN type or f8E5M2 type values}}
  %0 = gpt.scaled_matmul %a, %s, %b, %s {transpose_rhs} : (tensor<8x16xbf16>, tensor<f32>, tensor<4x16xbf16>, tensor<f32>) -> tensor<8x4xbf16>
  return
}

// -----

// Tests that an FP8 amax history holds at least one amax.
func.func @fp8_scale_empty_history(%x: tensor<8x16xbf16>, %h: tensor<0xf32>) {
  // expected-error @+1 {{history must hold at least one amax, got 'tensor<0xf32>'}}
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<0xf32>) -> (tensor<f32>, tensor<f32>, tensor<0xf32>)
  return
}

// -----

// Tests that gpt.fp8_transpose needs a matrix (rank >= 2).
func.func @fp8_transpose_rank(%q: tensor<16xf8E5M2>) {
  // expected-error @+2 {{input must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %qt = gpt.fp8_transpose %q : (tensor<16xf8E5M2>) -> tensor<16xf8E5M2>
  return
}

// -----

// Tests that gpt.fp8_cross_entropy_grad checks its targets against the
// logits as gpt.cross_entropy_grad does.
func.func @fp8_cross_entropy_grad_targets(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x4xi32>) {
  // expected-error @+2 {{logits and targets differ in dimension 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %q, %inv = gpt.fp8_cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x4xi32>) -> (tensor<2x8x64xf8E5M2>, tensor<f32>)
  return
}

// -----

// Tests that gpt.fp8_transpose takes FP8 codes only.
func.func @fp8_transpose_type(%x: tensor<16x64xbf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of f8E4M3FN type or f8E5M2 type values}}
  %qt = gpt.fp8_transpose %x : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
  return
}

// -----

// Tests that a folded GELU gradient's pre-activation has the gradient's type.
func.func @fp8_cast_transpose_sum_pre(%dh: tensor<2x8x16xbf16>, %pre: tensor<2x8x16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{gelu_grad's pre-activation must have the input's type 'tensor<2x8x16xbf16>', got 'tensor<2x8x16xf32>'}}
  %q, %qt, %db = gpt.fp8_cast_transpose_sum e5m2 %dh gelu_grad %pre, %s : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>)
  return
}

// -----

// Tests that gpt.fp8_cast_transpose_sum needs a matrix (rank >= 2).
func.func @fp8_cast_transpose_sum_rank(%x: tensor<16xbf16>, %s: tensor<f32>) {
  // expected-error @+2 {{input must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %q, %qt, %db = gpt.fp8_cast_transpose_sum e5m2 %x, %s : (tensor<16xbf16>, tensor<f32>) -> (tensor<16xf8E5M2>, tensor<16xf8E5M2>, tensor<16xbf16>)
  return
}

// -----

// Tests that gpt.add_layernorm_fp8's codes are of its format.
func.func @add_layernorm_fp8_format(%a: tensor<8x16xf32>, %w: tensor<16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{result must hold e5m2 codes, got 'tensor<8x16xf8E4M3FN>'}}
  %sum, %q, %qt = gpt.add_layernorm_fp8 e5m2 %a, %a, %w, %w, %s {rounded_to = bf16} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.add_layernorm_fp8 records exactly when given a history.
func.func @add_layernorm_fp8_record(%a: tensor<8x16xf32>, %w: tensor<16xf32>, %s: tensor<f32>, %h: tensor<4xf32>) {
  // expected-error @+1 {{records a history exactly when it takes one}}
  %sum, %q, %qt = gpt.add_layernorm_fp8 e4m3 %a, %a, %w, %w, %s history %h {rounded_to = bf16} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.add_layernorm_fp8 rounds to a float no wider than the sum.
func.func @add_layernorm_fp8_rounding(%a: tensor<8x16xf32>, %w: tensor<16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{rounded_to must be a float type of 16 bits up to the sum's, got 'f64'}}
  %sum, %q, %qt = gpt.add_layernorm_fp8 e4m3 %a, %a, %w, %w, %s {rounded_to = f64} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.add_layernorm_fp8's transposed codes are (C, rows).
func.func @add_layernorm_fp8_transposed(%a: tensor<8x16xf32>, %w: tensor<16xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{transposed must be the result's codes as (C, rows), got 'tensor<8x16xf8E4M3FN>'}}
  %sum, %q, %qt = gpt.add_layernorm_fp8 e4m3 %a, %a, %w, %w, %s {rounded_to = bf16} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<8x16xf8E4M3FN>)
  return
}

// -----

// Tests that gpt.fp8_delayed_scales takes each history once: each
// shifted history may be stored over its own.
func.func @fp8_delayed_scales_repeated(%h: tensor<4xf32>) {
  // expected-error @+1 {{history 1 repeats history 0}}
  %r:6 = gpt.fp8_delayed_scales (e4m3 %h, e4m3 %h) : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that gpt.fp8_delayed_scales needs a history (the generic form:
// the custom one cannot spell none).
func.func @fp8_delayed_scales_none() {
  // expected-error @+1 {{needs at least one history}}
  "gpt.fp8_delayed_scales"() <{formats = array<i32>}> : () -> ()
  return
}

// -----

// Tests that a format gpt.fp8_delayed_scales does not know is named.
func.func @fp8_delayed_scales_format(%h: tensor<4xf32>) {
  // expected-error @+1 {{expected an FP8 format (e4m3 or e5m2), got 'e3m4'}}
  %r:3 = gpt.fp8_delayed_scales (e3m4 %h) : tensor<4xf32>
  return
}

// -----

// Tests that gpt.fp8_delayed_scales' histories hold an amax.
func.func @fp8_delayed_scales_empty(%h: tensor<0xf32>) {
  // expected-error @+1 {{history 0 must hold at least one amax, got 'tensor<0xf32>'}}
  %r:3 = gpt.fp8_delayed_scales (e5m2 %h) : tensor<0xf32>
  return
}

// -----

// Tests that gpt.fp8_scale folds a GELU or a GELU gradient, not both.
func.func @fp8_scale_gelu_and_gelu_grad(%dh: tensor<8x16xbf16>, %pre: tensor<8x16xbf16>) {
  // expected-error @+1 {{takes gelu or gelu_grad, not both}}
  %s, %inv = gpt.fp8_scale e5m2 %dh gelu_grad %pre {gelu} : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that gpt.scaled_matmul_gelu_fp8's codes are of its format.
func.func @scaled_matmul_gelu_fp8_format(%x: tensor<8x16xf8E4M3FN>, %w: tensor<64x16xf8E4M3FN>, %s: tensor<f32>, %h: tensor<4xf32>) {
  // expected-error @+1 {{result must hold e5m2 codes, got 'tensor<8x64xf8E4M3FN>'}}
  %pre, %q, %rec = gpt.scaled_matmul_gelu_fp8 e5m2 %x, %s, %w, %s, %s history %h : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.scaled_matmul_gelu_fp8's pre-activation and codes have
// the product's shape (rhs transposed).
func.func @scaled_matmul_gelu_fp8_shape(%x: tensor<8x16xf8E4M3FN>, %w: tensor<64x16xf8E4M3FN>, %s: tensor<f32>, %h: tensor<4xf32>) {
  // expected-error @+1 {{pre 'tensor<8x32xbf16>' and result 'tensor<8x64xf8E4M3FN>' must have the product's shape 8x64}}
  %pre, %q, %rec = gpt.scaled_matmul_gelu_fp8 e4m3 %x, %s, %w, %s, %s history %h : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<8x32xbf16>, tensor<8x64xf8E4M3FN>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.scaled_matmul_gelu_fp8's bias is of the pre-activation's type.
func.func @scaled_matmul_gelu_fp8_bias(%x: tensor<8x16xf8E4M3FN>, %w: tensor<64x16xf8E4M3FN>, %s: tensor<f32>, %h: tensor<4xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{bias 'tensor<64xf32>' must be one value per column of pre 'tensor<8x64xbf16>', of its element type}}
  %pre, %q, %rec = gpt.scaled_matmul_gelu_fp8 e4m3 %x, %s, %w, %s, %s history %h bias %b : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<4xf32>)
  return
}

// -----

// Tests that gpt.scaled_matmul_gelu_fp8 records into a history of its own type.
func.func @scaled_matmul_gelu_fp8_recorded(%x: tensor<8x16xf8E4M3FN>, %w: tensor<64x16xf8E4M3FN>, %s: tensor<f32>, %h: tensor<4xf32>) {
  // expected-error @+1 {{recorded must have the history's type 'tensor<4xf32>'}}
  %pre, %q, %rec = gpt.scaled_matmul_gelu_fp8 e4m3 %x, %s, %w, %s, %s history %h : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<8xf32>)
  return
}
