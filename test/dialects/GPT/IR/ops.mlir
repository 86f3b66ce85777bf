// RUN: gpt-opt %s --split-input-file | gpt-opt --split-input-file | FileCheck %s
// RUN: gpt-opt %s --split-input-file --mlir-print-op-generic | gpt-opt --split-input-file | FileCheck %s

// Tests that gpt.embed round-trips with static shapes.
// CHECK-LABEL: func.func @embed
// CHECK-SAME:    %[[WTE:.*]]: tensor<64x16xf32>, %[[WPE:.*]]: tensor<16x16xf32>, %[[IDS:.*]]: tensor<2x8xi32>
func.func @embed(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>,
                 %ids: tensor<2x8xi32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[X:.*]] = gpt.embed %[[WTE]], %[[WPE]], %[[IDS]] : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %x = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  // CHECK: return %[[X]]
  return %x : tensor<2x8x16xf32>
}

// -----

// Tests that gpt.embed accepts a sequence as long as the position table.
// CHECK-LABEL: func.func @embed_full_block
func.func @embed_full_block(%wte: tensor<64x16xbf16>, %wpe: tensor<8x16xbf16>,
                            %ids: tensor<1x8xi32>) -> tensor<1x8x16xbf16> {
  // CHECK: gpt.embed %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64x16xbf16>, tensor<8x16xbf16>, tensor<1x8xi32>) -> tensor<1x8x16xbf16>
  %x = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xbf16>, tensor<8x16xbf16>, tensor<1x8xi32>) -> tensor<1x8x16xbf16>
  return %x : tensor<1x8x16xbf16>
}

// -----

// Tests that gpt.embed accepts dynamic dimensions everywhere.
// CHECK-LABEL: func.func @embed_dynamic
// CHECK-SAME:    %[[WTE:.*]]: tensor<?x?xf32>, %[[WPE:.*]]: tensor<?x?xf32>, %[[IDS:.*]]: tensor<?x?xi32>
func.func @embed_dynamic(%wte: tensor<?x?xf32>, %wpe: tensor<?x?xf32>,
                         %ids: tensor<?x?xi32>) -> tensor<?x?x?xf32> {
  // CHECK: gpt.embed %[[WTE]], %[[WPE]], %[[IDS]] : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi32>) -> tensor<?x?x?xf32>
  %x = gpt.embed %wte, %wpe, %ids
      : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi32>) -> tensor<?x?x?xf32>
  return %x : tensor<?x?x?xf32>
}

// -----

// Tests that gpt.embed takes the channel count from whichever table knows it.
// CHECK-LABEL: func.func @embed_partially_dynamic
func.func @embed_partially_dynamic(%wte: tensor<?x16xf32>, %wpe: tensor<?x?xf32>,
                                   %ids: tensor<2x?xi32>) -> tensor<2x?x16xf32> {
  // CHECK: gpt.embed %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<?x?xf32>, tensor<2x?xi32>) -> tensor<2x?x16xf32>
  %x = gpt.embed %wte, %wpe, %ids
      : (tensor<?x16xf32>, tensor<?x?xf32>, tensor<2x?xi32>) -> tensor<2x?x16xf32>
  return %x : tensor<2x?x16xf32>
}

// -----

// Tests that gpt.layernorm round-trips and that the default epsilon is elided.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>
func.func @layernorm(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: %[[Y0:.*]] = gpt.layernorm %[[X]], %[[W]], %[[B]] : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %0 = gpt.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: %[[Y1:.*]] = gpt.layernorm %[[X]], %[[W]], %[[B]] : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: return %[[Y0]], %[[Y1]]
  return %0, %1 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that gpt.layernorm accepts a result in a narrower float type.
// CHECK-LABEL: func.func @layernorm_narrow_result
func.func @layernorm_narrow_result(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> tensor<8x16xbf16> {
  // CHECK: gpt.layernorm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}

// -----

// Tests that gpt.layernorm keeps a non-default epsilon.
// CHECK-LABEL: func.func @layernorm_epsilon
func.func @layernorm_epsilon(%x: tensor<8x16xf64>, %w: tensor<16xf64>, %b: tensor<16xf64>)
    -> tensor<8x16xf64> {
  // CHECK: gpt.layernorm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.250000e-01 : f64} : (tensor<8x16xf64>, tensor<16xf64>, tensor<16xf64>) -> tensor<8x16xf64>
  %0 = gpt.layernorm %x, %w, %b {epsilon = 0.125 : f64}
      : (tensor<8x16xf64>, tensor<16xf64>, tensor<16xf64>) -> tensor<8x16xf64>
  return %0 : tensor<8x16xf64>
}

// -----

// Tests that gpt.layernorm accepts dynamic dimensions.
// CHECK-LABEL: func.func @layernorm_dynamic
func.func @layernorm_dynamic(%x: tensor<?x?x?xf32>, %w: tensor<?xf32>, %b: tensor<16xf32>)
    -> tensor<?x?x?xf32> {
  // CHECK: gpt.layernorm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<16xf32>) -> tensor<?x?x?xf32>
  %0 = gpt.layernorm %x, %w, %b
      : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<16xf32>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----

// Tests that gpt.linear round-trips with a bias.
// CHECK-LABEL: func.func @linear_bias
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<48x16xf32>, %[[B:.*]]: tensor<48xf32>
func.func @linear_bias(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>, %b: tensor<48xf32>)
    -> tensor<2x8x48xf32> {
  // CHECK: %[[Y:.*]] = gpt.linear %[[X]], %[[W]], %[[B]] : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %y = gpt.linear %x, %w, %b
      : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x48xf32>
}

// -----

// Tests that gpt.linear round-trips without a bias.
// CHECK-LABEL: func.func @linear_no_bias
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<64x16xf32>
func.func @linear_no_bias(%x: tensor<2x8x16xf32>, %w: tensor<64x16xf32>) -> tensor<2x8x64xf32> {
  // CHECK: %[[Y:.*]] = gpt.linear %[[X]], %[[W]] : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  %y = gpt.linear %x, %w : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x64xf32>
}

// -----

// Tests that gpt.linear accepts a rank-1 input.
// CHECK-LABEL: func.func @linear_vector
func.func @linear_vector(%x: tensor<16xf16>, %w: tensor<4x16xf16>) -> tensor<4xf16> {
  // CHECK: gpt.linear %{{.*}}, %{{.*}} : (tensor<16xf16>, tensor<4x16xf16>) -> tensor<4xf16>
  %y = gpt.linear %x, %w : (tensor<16xf16>, tensor<4x16xf16>) -> tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

// Tests that gpt.linear accepts dynamic dimensions and takes N from the bias
// when the weight does not know it.
// CHECK-LABEL: func.func @linear_dynamic
func.func @linear_dynamic(%x: tensor<?x?x?xf32>, %w: tensor<?x?xf32>, %b: tensor<48xf32>,
                          %w2: tensor<?x?xf32>) -> (tensor<?x?x48xf32>, tensor<?x?x?xf32>) {
  // CHECK: gpt.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<48xf32>) -> tensor<?x?x48xf32>
  %0 = gpt.linear %x, %w, %b
      : (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<48xf32>) -> tensor<?x?x48xf32>
  // CHECK: gpt.linear %{{.*}}, %{{.*}} : (tensor<?x?x?xf32>, tensor<?x?xf32>) -> tensor<?x?x?xf32>
  %1 = gpt.linear %x, %w2 : (tensor<?x?x?xf32>, tensor<?x?xf32>) -> tensor<?x?x?xf32>
  return %0, %1 : tensor<?x?x48xf32>, tensor<?x?x?xf32>
}

// -----

// Tests that gpt.matmul round-trips for plain rank-2 operands.
// CHECK-LABEL: func.func @matmul_2d
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16x4xf32>
func.func @matmul_2d(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8x4xf32> {
  // CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %c = gpt.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK: return %[[C]]
  return %c : tensor<8x4xf32>
}

// -----

// Tests that gpt.matmul round-trips with a batched rhs of the lhs rank.
// CHECK-LABEL: func.func @matmul_batched
// CHECK-SAME:    %[[Q:.*]]: tensor<2x4x8x4xf32>, %[[K:.*]]: tensor<2x4x4x8xf32>
func.func @matmul_batched(%q: tensor<2x4x8x4xf32>, %k: tensor<2x4x4x8xf32>)
    -> tensor<2x4x8x8xf32> {
  // CHECK: %[[S:.*]] = gpt.matmul %[[Q]], %[[K]] : (tensor<2x4x8x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x8x8xf32>
  %s = gpt.matmul %q, %k : (tensor<2x4x8x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: return %[[S]]
  return %s : tensor<2x4x8x8xf32>
}

// -----

// Tests that gpt.matmul round-trips with a rank-2 rhs shared by every batch.
// CHECK-LABEL: func.func @matmul_shared_rhs
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16x64xf32>
func.func @matmul_shared_rhs(%x: tensor<2x8x16xf32>, %w: tensor<16x64xf32>)
    -> tensor<2x8x64xf32> {
  // CHECK: %[[Y:.*]] = gpt.matmul %[[X]], %[[W]] : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %y = gpt.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x64xf32>
}

// -----

// Tests that gpt.matmul round-trips with transpose_rhs (the tied LM head).
// CHECK-LABEL: func.func @matmul_transpose_rhs
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[WTE:.*]]: tensor<64x16xf32>
func.func @matmul_transpose_rhs(%x: tensor<2x8x16xf32>, %wte: tensor<64x16xf32>)
    -> tensor<2x8x64xf32> {
  // CHECK: %[[L:.*]] = gpt.matmul %[[X]], %[[WTE]] {transpose_rhs} : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs}
      : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  // CHECK: return %[[L]]
  return %logits : tensor<2x8x64xf32>
}

// -----

// Tests that gpt.matmul round-trips with transpose_lhs.
// CHECK-LABEL: func.func @matmul_transpose_lhs
// CHECK-SAME:    %[[A:.*]]: tensor<2x4x8x4xf32>, %[[B:.*]]: tensor<2x4x8x4xf32>
func.func @matmul_transpose_lhs(%a: tensor<2x4x8x4xf32>, %b: tensor<2x4x8x4xf32>)
    -> tensor<2x4x4x4xf32> {
  // CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] {transpose_lhs} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  %c = gpt.matmul %a, %b {transpose_lhs}
      : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: return %[[C]]
  return %c : tensor<2x4x4x4xf32>
}

// -----

// Tests that gpt.matmul round-trips with both operands transposed.
// CHECK-LABEL: func.func @matmul_transpose_both
func.func @matmul_transpose_both(%a: tensor<16x8xbf16>, %b: tensor<4x16xbf16>)
    -> tensor<8x4xbf16> {
  // CHECK: gpt.matmul %{{.*}}, %{{.*}} {transpose_lhs, transpose_rhs} : (tensor<16x8xbf16>, tensor<4x16xbf16>) -> tensor<8x4xbf16>
  %c = gpt.matmul %a, %b {transpose_lhs, transpose_rhs}
      : (tensor<16x8xbf16>, tensor<4x16xbf16>) -> tensor<8x4xbf16>
  return %c : tensor<8x4xbf16>
}

// -----

// Tests that gpt.matmul accepts dynamic dimensions and merges batch
// dimensions known on only one side.
// CHECK-LABEL: func.func @matmul_dynamic
func.func @matmul_dynamic(%a: tensor<?x4x?x?xf32>, %b: tensor<2x?x?x8xf32>,
                          %w: tensor<?x?xf32>) -> (tensor<2x4x?x8xf32>, tensor<?x4x?x?xf32>) {
  // CHECK: gpt.matmul %{{.*}}, %{{.*}} : (tensor<?x4x?x?xf32>, tensor<2x?x?x8xf32>) -> tensor<2x4x?x8xf32>
  %0 = gpt.matmul %a, %b : (tensor<?x4x?x?xf32>, tensor<2x?x?x8xf32>) -> tensor<2x4x?x8xf32>
  // CHECK: gpt.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<?x4x?x?xf32>, tensor<?x?xf32>) -> tensor<?x4x?x?xf32>
  %1 = gpt.matmul %a, %w {transpose_rhs}
      : (tensor<?x4x?x?xf32>, tensor<?x?xf32>) -> tensor<?x4x?x?xf32>
  return %0, %1 : tensor<2x4x?x8xf32>, tensor<?x4x?x?xf32>
}

// -----

// Tests that gpt.bias_add round-trips.
// CHECK-LABEL: func.func @bias_add
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x48xf32>, %[[B:.*]]: tensor<48xf32>
func.func @bias_add(%x: tensor<2x8x48xf32>, %b: tensor<48xf32>) -> tensor<2x8x48xf32> {
  // CHECK: %[[Y:.*]] = gpt.bias_add %[[X]], %[[B]] : (tensor<2x8x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %y = gpt.bias_add %x, %b : (tensor<2x8x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x48xf32>
}

// -----

// Tests that gpt.bias_add accepts dynamic dimensions.
// CHECK-LABEL: func.func @bias_add_dynamic
func.func @bias_add_dynamic(%x: tensor<?x?xf32>, %b: tensor<48xf32>) -> tensor<?x?xf32> {
  // CHECK: gpt.bias_add %{{.*}}, %{{.*}} : (tensor<?x?xf32>, tensor<48xf32>) -> tensor<?x?xf32>
  %y = gpt.bias_add %x, %b : (tensor<?x?xf32>, tensor<48xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// Tests that gpt.causal_attention round-trips with an integer head count.
// CHECK-LABEL: func.func @causal_attention
// CHECK-SAME:    %[[QKV:.*]]: tensor<2x8x48xf32>
func.func @causal_attention(%qkv: tensor<2x8x48xf32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[Y:.*]], %{{.*}} = gpt.causal_attention %[[QKV]] {num_heads = 4 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
  %y, %lse = gpt.causal_attention %qkv {num_heads = 4 : i64}
      : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that gpt.causal_attention round-trips with a #gpt.cfg head count.
// CHECK-LABEL: func.func @causal_attention_cfg
// CHECK-SAME:    %[[QKV:.*]]: tensor<2x8x48xf32>
func.func @causal_attention_cfg(%qkv: tensor<2x8x48xf32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[Y:.*]], %{{.*}} = gpt.causal_attention %[[QKV]] {num_heads = #gpt.cfg<"n_head">} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x?x8xf32>)
  %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">}
      : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x?x8xf32>)
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that gpt.causal_attention accepts dynamic dimensions.
// CHECK-LABEL: func.func @causal_attention_dynamic
func.func @causal_attention_dynamic(%qkv: tensor<?x?x?xf32>, %qkv2: tensor<?x?x48xf16>)
    -> (tensor<?x?x?xf32>, tensor<?x?x16xf16>) {
  // CHECK: gpt.causal_attention %{{.*}} {num_heads = #gpt.cfg<"n_head">} : (tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  %0, %lse0 = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">}
      : (tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  // The log-sum-exp is f32 whatever the compute type.
  // CHECK: gpt.causal_attention %{{.*}} {num_heads = 2 : i64} : (tensor<?x?x48xf16>) -> (tensor<?x?x16xf16>, tensor<?x2x?xf32>)
  %1, %lse1 = gpt.causal_attention %qkv2 {num_heads = 2 : i64}
      : (tensor<?x?x48xf16>) -> (tensor<?x?x16xf16>, tensor<?x2x?xf32>)
  return %0, %1 : tensor<?x?x?xf32>, tensor<?x?x16xf16>
}

// -----

// Tests that gpt.causal_attention_grad round-trips with the forward's output and log-sum-exp.
// CHECK-LABEL: func.func @causal_attention_grad
// CHECK-SAME:    %[[DY:.*]]: tensor<2x8x16xbf16>, %[[QKV:.*]]: tensor<2x8x48xbf16>, %[[Y:.*]]: tensor<2x8x16xbf16>, %[[LSE:.*]]: tensor<2x4x8xf32>
func.func @causal_attention_grad(%dy: tensor<2x8x16xbf16>, %qkv: tensor<2x8x48xbf16>,
                                 %y: tensor<2x8x16xbf16>, %lse: tensor<2x4x8xf32>) -> tensor<2x8x48xbf16> {
  // CHECK: gpt.causal_attention_grad %[[DY]], %[[QKV]], %[[Y]], %[[LSE]] {num_heads = 4 : i64} : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x4x8xf32>) -> tensor<2x8x48xbf16>
  %d = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 4 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x4x8xf32>) -> tensor<2x8x48xbf16>
  return %d : tensor<2x8x48xbf16>
}

// -----

// Tests that gpt.cross_entropy round-trips with an integer vocab_size.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME:    %[[L:.*]]: tensor<2x8x64xf32>, %[[T:.*]]: tensor<2x8xi32>
func.func @cross_entropy(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>)
    -> tensor<f32> {
  // CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[L]], %[[T]] {vocab_size = 60 : i64} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 60 : i64}
      : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  // CHECK: return %[[LOSS]]
  return %loss : tensor<f32>
}

// -----

// Tests that gpt.cross_entropy round-trips with a #gpt.cfg vocab_size and
// dynamic dimensions.
// CHECK-LABEL: func.func @cross_entropy_cfg_dynamic
func.func @cross_entropy_cfg_dynamic(%logits: tensor<?x?x?xf32>, %targets: tensor<?x?xi32>)
    -> tensor<f32> {
  // CHECK: gpt.cross_entropy %{{.*}}, %{{.*}} {vocab_size = #gpt.cfg<"vocab_size">} : (tensor<?x?x?xf32>, tensor<?x?xi32>) -> tensor<f32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = #gpt.cfg<"vocab_size">}
      : (tensor<?x?x?xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that gpt.cross_entropy accepts rank-1 logits with rank-0 targets and
// vocab_size equal to Vp.
// CHECK-LABEL: func.func @cross_entropy_single
func.func @cross_entropy_single(%logits: tensor<64xbf16>, %target: tensor<i32>) -> tensor<f32> {
  // CHECK: gpt.cross_entropy %{{.*}}, %{{.*}} {vocab_size = 64 : i64} : (tensor<64xbf16>, tensor<i32>) -> tensor<f32>
  %loss = gpt.cross_entropy %logits, %target {vocab_size = 64 : i64}
      : (tensor<64xbf16>, tensor<i32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that gpt.repeat round-trips with a #gpt.cfg count.
// CHECK-LABEL: func.func private @block
// CHECK-SAME:    {gpt.param = "ln_1.weight"}
// CHECK-SAME:    {gpt.param = "ln_1.bias"}
func.func private @block(%x: tensor<?x?x?xf32>,
                         %w: tensor<?xf32> {gpt.param = "ln_1.weight"},
                         %b: tensor<?xf32> {gpt.param = "ln_1.bias"})
    -> tensor<?x?x?xf32> {
  %y = gpt.layernorm %x, %w, %b
      : (tensor<?x?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>
  return %y : tensor<?x?x?xf32>
}

// CHECK-LABEL: func.func @repeat_cfg
// CHECK-SAME:    %[[X:.*]]: tensor<?x?x?xf32>
func.func @repeat_cfg(%x: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
  // CHECK: %[[H:.*]] = gpt.repeat @block(%[[X]]) {count = #gpt.cfg<"n_layer">, prefix = "h"} : tensor<?x?x?xf32>
  %h = gpt.repeat @block(%x) {count = #gpt.cfg<"n_layer">, prefix = "h"} : tensor<?x?x?xf32>
  // CHECK: return %[[H]]
  return %h : tensor<?x?x?xf32>
}

// -----

// Tests that gpt.repeat round-trips with an integer count, a static
// activation and a callee with `?` dimensions.
// CHECK-LABEL: func.func private @block
func.func private @block(%x: tensor<?x?x?xf32>,
                         %w: tensor<?xf32> {gpt.param = "ln.weight"})
    -> tensor<?x?x?xf32>

// CHECK-LABEL: func.func @repeat_static
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>
func.func @repeat_static(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // CHECK: %[[H:.*]] = gpt.repeat @block(%[[X]]) {count = 3 : i64, prefix = "layers"} : tensor<2x8x16xf32>
  %h = gpt.repeat @block(%x) {count = 3 : i64, prefix = "layers"} : tensor<2x8x16xf32>
  // CHECK: return %[[H]]
  return %h : tensor<2x8x16xf32>
}

// -----

// Tests that gpt.repeat accepts a callee that takes only the activation.
// CHECK-LABEL: func.func private @act_only
func.func private @act_only(%x: tensor<4x16xf32>) -> tensor<4x16xf32>

// CHECK-LABEL: func.func @repeat_no_params
func.func @repeat_no_params(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK: gpt.repeat @act_only(%{{.*}}) {count = 1 : i64, prefix = "h"} : tensor<4x16xf32>
  %h = gpt.repeat @act_only(%x) {count = 1 : i64, prefix = "h"} : tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

// Tests that gpt.add round-trips.
// CHECK-LABEL: func.func @add
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<2x8xf32>
func.func @add(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: %[[C:.*]] = gpt.add %[[A]], %[[B]] : tensor<2x8xf32>
  %c = gpt.add %a, %b : tensor<2x8xf32>
  // CHECK: return %[[C]]
  return %c : tensor<2x8xf32>
}

// -----

// Tests that gpt.sub round-trips.
// CHECK-LABEL: func.func @sub
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<2x8xf32>
func.func @sub(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: %[[C:.*]] = gpt.sub %[[A]], %[[B]] : tensor<2x8xf32>
  %c = gpt.sub %a, %b : tensor<2x8xf32>
  // CHECK: return %[[C]]
  return %c : tensor<2x8xf32>
}

// -----

// Tests that gpt.mul round-trips.
// CHECK-LABEL: func.func @mul
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xbf16>, %[[B:.*]]: tensor<2x8xbf16>
func.func @mul(%a: tensor<2x8xbf16>, %b: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  // CHECK: %[[C:.*]] = gpt.mul %[[A]], %[[B]] : tensor<2x8xbf16>
  %c = gpt.mul %a, %b : tensor<2x8xbf16>
  // CHECK: return %[[C]]
  return %c : tensor<2x8xbf16>
}

// -----

// Tests that gpt.div round-trips.
// CHECK-LABEL: func.func @div
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf16>, %[[B:.*]]: tensor<2x8xf16>
func.func @div(%a: tensor<2x8xf16>, %b: tensor<2x8xf16>) -> tensor<2x8xf16> {
  // CHECK: %[[C:.*]] = gpt.div %[[A]], %[[B]] : tensor<2x8xf16>
  %c = gpt.div %a, %b : tensor<2x8xf16>
  // CHECK: return %[[C]]
  return %c : tensor<2x8xf16>
}

// -----

// Tests that gpt.max round-trips.
// CHECK-LABEL: func.func @max
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf64>, %[[B:.*]]: tensor<2x8xf64>
func.func @max(%a: tensor<2x8xf64>, %b: tensor<2x8xf64>) -> tensor<2x8xf64> {
  // CHECK: %[[C:.*]] = gpt.max %[[A]], %[[B]] : tensor<2x8xf64>
  %c = gpt.max %a, %b : tensor<2x8xf64>
  // CHECK: return %[[C]]
  return %c : tensor<2x8xf64>
}

// -----

// Tests that the elementwise binary ops accept dynamic and rank-0 tensors.
// CHECK-LABEL: func.func @binary_dynamic
// CHECK-SAME:    %[[A:.*]]: tensor<?x?xf32>, %[[B:.*]]: tensor<?x?xf32>, %[[S:.*]]: tensor<f32>
func.func @binary_dynamic(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %s: tensor<f32>)
    -> (tensor<?x?xf32>, tensor<f32>) {
  // CHECK: %[[ADD:.*]] = gpt.add %[[A]], %[[B]] : tensor<?x?xf32>
  %0 = gpt.add %a, %b : tensor<?x?xf32>
  // CHECK: %[[SUB:.*]] = gpt.sub %[[ADD]], %[[B]] : tensor<?x?xf32>
  %1 = gpt.sub %0, %b : tensor<?x?xf32>
  // CHECK: %[[MUL:.*]] = gpt.mul %[[SUB]], %[[A]] : tensor<?x?xf32>
  %2 = gpt.mul %1, %a : tensor<?x?xf32>
  // CHECK: %[[DIV:.*]] = gpt.div %[[MUL]], %[[B]] : tensor<?x?xf32>
  %3 = gpt.div %2, %b : tensor<?x?xf32>
  // CHECK: %[[MAX:.*]] = gpt.max %[[S]], %[[S]] : tensor<f32>
  %4 = gpt.max %s, %s : tensor<f32>
  // CHECK: return %[[DIV]], %[[MAX]]
  return %3, %4 : tensor<?x?xf32>, tensor<f32>
}

// -----

// Tests that gpt.neg round-trips.
// CHECK-LABEL: func.func @neg
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf32>
func.func @neg(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: %[[Y:.*]] = gpt.neg %[[X]] : tensor<2x8xf32>
  %y = gpt.neg %x : tensor<2x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8xf32>
}

// -----

// Tests that gpt.exp round-trips.
// CHECK-LABEL: func.func @exp
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf32>
func.func @exp(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: %[[Y:.*]] = gpt.exp %[[X]] : tensor<2x8xf32>
  %y = gpt.exp %x : tensor<2x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8xf32>
}

// -----

// Tests that gpt.log round-trips.
// CHECK-LABEL: func.func @log
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf64>
func.func @log(%x: tensor<2x8xf64>) -> tensor<2x8xf64> {
  // CHECK: %[[Y:.*]] = gpt.log %[[X]] : tensor<2x8xf64>
  %y = gpt.log %x : tensor<2x8xf64>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8xf64>
}

// -----

// Tests that gpt.tanh round-trips.
// CHECK-LABEL: func.func @tanh
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xbf16>
func.func @tanh(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  // CHECK: %[[Y:.*]] = gpt.tanh %[[X]] : tensor<2x8xbf16>
  %y = gpt.tanh %x : tensor<2x8xbf16>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8xbf16>
}

// -----

// Tests that gpt.sqrt round-trips.
// CHECK-LABEL: func.func @sqrt
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf16>
func.func @sqrt(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
  // CHECK: %[[Y:.*]] = gpt.sqrt %[[X]] : tensor<2x8xf16>
  %y = gpt.sqrt %x : tensor<2x8xf16>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8xf16>
}

// -----

// Tests that gpt.rsqrt round-trips.
// CHECK-LABEL: func.func @rsqrt
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x1xf32>
func.func @rsqrt(%x: tensor<2x8x1xf32>) -> tensor<2x8x1xf32> {
  // CHECK: %[[Y:.*]] = gpt.rsqrt %[[X]] : tensor<2x8x1xf32>
  %y = gpt.rsqrt %x : tensor<2x8x1xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x1xf32>
}

// -----

// Tests that gpt.gelu round-trips.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>
func.func @gelu(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: %[[Y:.*]] = gpt.gelu %[[X]] : tensor<2x8x64xf32>
  %y = gpt.gelu %x : tensor<2x8x64xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x8x64xf32>
}

// -----

// Tests that gpt.softmax round-trips.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    %[[X:.*]]: tensor<2x4x8x8xf32>
func.func @softmax(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK: %[[Y:.*]] = gpt.softmax %[[X]] : tensor<2x4x8x8xf32>
  %y = gpt.softmax %x : tensor<2x4x8x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Tests that the elementwise unary ops accept dynamic dimensions.
// CHECK-LABEL: func.func @unary_dynamic
// CHECK-SAME:    %[[X:.*]]: tensor<?x?xf32>
func.func @unary_dynamic(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // CHECK: %[[NEG:.*]] = gpt.neg %[[X]] : tensor<?x?xf32>
  %0 = gpt.neg %x : tensor<?x?xf32>
  // CHECK: %[[EXP:.*]] = gpt.exp %[[NEG]] : tensor<?x?xf32>
  %1 = gpt.exp %0 : tensor<?x?xf32>
  // CHECK: %[[LOG:.*]] = gpt.log %[[EXP]] : tensor<?x?xf32>
  %2 = gpt.log %1 : tensor<?x?xf32>
  // CHECK: %[[TANH:.*]] = gpt.tanh %[[LOG]] : tensor<?x?xf32>
  %3 = gpt.tanh %2 : tensor<?x?xf32>
  // CHECK: %[[SQRT:.*]] = gpt.sqrt %[[TANH]] : tensor<?x?xf32>
  %4 = gpt.sqrt %3 : tensor<?x?xf32>
  // CHECK: %[[RSQRT:.*]] = gpt.rsqrt %[[SQRT]] : tensor<?x?xf32>
  %5 = gpt.rsqrt %4 : tensor<?x?xf32>
  // CHECK: %[[GELU:.*]] = gpt.gelu %[[RSQRT]] : tensor<?x?xf32>
  %6 = gpt.gelu %5 : tensor<?x?xf32>
  // CHECK: %[[SM:.*]] = gpt.softmax %[[GELU]] : tensor<?x?xf32>
  %7 = gpt.softmax %6 : tensor<?x?xf32>
  // CHECK: %[[SC:.*]] = gpt.scale %[[SM]] {factor = 5.000000e-01 : f64} : tensor<?x?xf32>
  %8 = gpt.scale %7 {factor = 0.5 : f64} : tensor<?x?xf32>
  // CHECK: %[[CM:.*]] = gpt.causal_mask %[[SC]] : tensor<?x?xf32>
  %9 = gpt.causal_mask %8 : tensor<?x?xf32>
  // CHECK: return %[[CM]]
  return %9 : tensor<?x?xf32>
}

// -----

// Tests that gpt.scale round-trips.
// CHECK-LABEL: func.func @scale
// CHECK-SAME:    %[[X:.*]]: tensor<2x4x8x8xf32>
func.func @scale(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK: %[[Y:.*]] = gpt.scale %[[X]] {factor = 1.250000e-01 : f64} : tensor<2x4x8x8xf32>
  %y = gpt.scale %x {factor = 0.125 : f64} : tensor<2x4x8x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Tests that gpt.causal_mask round-trips.
// CHECK-LABEL: func.func @causal_mask
// CHECK-SAME:    %[[S:.*]]: tensor<2x4x8x8xf32>
func.func @causal_mask(%s: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK: %[[M:.*]] = gpt.causal_mask %[[S]] : tensor<2x4x8x8xf32>
  %m = gpt.causal_mask %s : tensor<2x4x8x8xf32>
  // CHECK: return %[[M]]
  return %m : tensor<2x4x8x8xf32>
}

// -----

// Tests that gpt.causal_mask accepts a square of one dynamic and one static
// dimension.
// CHECK-LABEL: func.func @causal_mask_partially_dynamic
func.func @causal_mask_partially_dynamic(%s: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // CHECK: gpt.causal_mask %{{.*}} : tensor<?x8xf32>
  %m = gpt.causal_mask %s : tensor<?x8xf32>
  return %m : tensor<?x8xf32>
}

// -----

// Tests that gpt.constant round-trips for every float element type and rank 0.
// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<16xf32>, tensor<f32>, tensor<2x3xbf16>, tensor<4xf16>,
                          tensor<4xf64>) {
  // CHECK: %[[C0:.*]] = gpt.constant 1.000000e+00 : tensor<16xf32>
  %0 = gpt.constant 1.0 : tensor<16xf32>
  // CHECK: %[[C1:.*]] = gpt.constant -2.500000e-01 : tensor<f32>
  %1 = gpt.constant -0.25 : tensor<f32>
  // CHECK: %[[C2:.*]] = gpt.constant 0.000000e+00 : tensor<2x3xbf16>
  %2 = gpt.constant 0.0 : tensor<2x3xbf16>
  // CHECK: %[[C3:.*]] = gpt.constant 3.000000e+00 : tensor<4xf16>
  %3 = gpt.constant 3.0 : tensor<4xf16>
  // CHECK: %[[C4:.*]] = gpt.constant 1.000000e-05 : tensor<4xf64>
  %4 = gpt.constant 1.0e-05 : tensor<4xf64>
  // CHECK: return %[[C0]], %[[C1]], %[[C2]], %[[C3]], %[[C4]]
  return %0, %1, %2, %3, %4 : tensor<16xf32>, tensor<f32>, tensor<2x3xbf16>, tensor<4xf16>,
                              tensor<4xf64>
}

// -----

// Tests that gpt.cast round-trips between the float element types.
// CHECK-LABEL: func.func @cast
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf32>
func.func @cast(%x: tensor<2x8xf32>) -> (tensor<2x8xbf16>, tensor<2x8xf16>, tensor<2x8xf32>,
                                         tensor<2x8xf64>) {
  // CHECK: %[[BF:.*]] = gpt.cast %[[X]] : tensor<2x8xf32> to tensor<2x8xbf16>
  %0 = gpt.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
  // CHECK: %[[H:.*]] = gpt.cast %[[X]] : tensor<2x8xf32> to tensor<2x8xf16>
  %1 = gpt.cast %x : tensor<2x8xf32> to tensor<2x8xf16>
  // CHECK: %[[F:.*]] = gpt.cast %[[BF]] : tensor<2x8xbf16> to tensor<2x8xf32>
  %2 = gpt.cast %0 : tensor<2x8xbf16> to tensor<2x8xf32>
  // CHECK: %[[D:.*]] = gpt.cast %[[H]] : tensor<2x8xf16> to tensor<2x8xf64>
  %3 = gpt.cast %1 : tensor<2x8xf16> to tensor<2x8xf64>
  // CHECK: return %[[BF]], %[[H]], %[[F]], %[[D]]
  return %0, %1, %2, %3 : tensor<2x8xbf16>, tensor<2x8xf16>, tensor<2x8xf32>, tensor<2x8xf64>
}

// -----

// Tests that gpt.cast accepts dynamic dimensions.
// CHECK-LABEL: func.func @cast_dynamic
func.func @cast_dynamic(%x: tensor<?x?xf32>) -> tensor<?x?xbf16> {
  // CHECK: gpt.cast %{{.*}} : tensor<?x?xf32> to tensor<?x?xbf16>
  %0 = gpt.cast %x : tensor<?x?xf32> to tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// Tests that gpt.reduce sum round-trips over several dimensions.
// CHECK-LABEL: func.func @reduce_sum
// CHECK-SAME:    %[[DY:.*]]: tensor<2x8x48xf32>
func.func @reduce_sum(%dy: tensor<2x8x48xf32>) -> tensor<48xf32> {
  // CHECK: %[[DB:.*]] = gpt.reduce sum %[[DY]] dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
  %db = gpt.reduce sum %dy dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
  // CHECK: return %[[DB]]
  return %db : tensor<48xf32>
}

// -----

// Tests that gpt.reduce mean round-trips with keep_dims.
// CHECK-LABEL: func.func @reduce_mean_keep_dims
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>
func.func @reduce_mean_keep_dims(%x: tensor<2x8x16xf32>) -> tensor<2x8x1xf32> {
  // CHECK: %[[M:.*]] = gpt.reduce mean %[[X]] dims [2] keep_dims : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %m = gpt.reduce mean %x dims [2] keep_dims : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  // CHECK: return %[[M]]
  return %m : tensor<2x8x1xf32>
}

// -----

// Tests that gpt.reduce max round-trips.
// CHECK-LABEL: func.func @reduce_max
// CHECK-SAME:    %[[S:.*]]: tensor<2x4x8x8xf32>
func.func @reduce_max(%s: tensor<2x4x8x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x1x8x1xf32>) {
  // CHECK: %[[M0:.*]] = gpt.reduce max %[[S]] dims [3] : (tensor<2x4x8x8xf32>) -> tensor<2x4x8xf32>
  %0 = gpt.reduce max %s dims [3] : (tensor<2x4x8x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[M1:.*]] = gpt.reduce max %[[S]] dims [1, 3] keep_dims : (tensor<2x4x8x8xf32>) -> tensor<2x1x8x1xf32>
  %1 = gpt.reduce max %s dims [1, 3] keep_dims : (tensor<2x4x8x8xf32>) -> tensor<2x1x8x1xf32>
  // CHECK: return %[[M0]], %[[M1]]
  return %0, %1 : tensor<2x4x8xf32>, tensor<2x1x8x1xf32>
}

// -----

// Tests that gpt.reduce over every dimension gives a rank-0 tensor.
// CHECK-LABEL: func.func @reduce_all
func.func @reduce_all(%x: tensor<2x8xf32>) -> tensor<f32> {
  // CHECK: gpt.reduce sum %{{.*}} dims [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
  %0 = gpt.reduce sum %x dims [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that gpt.reduce accepts dynamic dimensions, keeping them where they
// are not reduced.
// CHECK-LABEL: func.func @reduce_dynamic
func.func @reduce_dynamic(%x: tensor<?x?x16xf32>) -> (tensor<?x16xf32>, tensor<?x?x1xf32>) {
  // CHECK: gpt.reduce sum %{{.*}} dims [0] : (tensor<?x?x16xf32>) -> tensor<?x16xf32>
  %0 = gpt.reduce sum %x dims [0] : (tensor<?x?x16xf32>) -> tensor<?x16xf32>
  // CHECK: gpt.reduce mean %{{.*}} dims [2] keep_dims : (tensor<?x?x16xf32>) -> tensor<?x?x1xf32>
  %1 = gpt.reduce mean %x dims [2] keep_dims : (tensor<?x?x16xf32>) -> tensor<?x?x1xf32>
  return %0, %1 : tensor<?x16xf32>, tensor<?x?x1xf32>
}

// -----

// Tests that gpt.reshape round-trips, splitting and merging dimensions.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME:    %[[Q:.*]]: tensor<2x8x16xf32>
func.func @reshape(%q: tensor<2x8x16xf32>) -> (tensor<2x8x4x4xf32>, tensor<256xf32>) {
  // CHECK: %[[Q4:.*]] = gpt.reshape %[[Q]] : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %q4 = gpt.reshape %q : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  // CHECK: %[[FLAT:.*]] = gpt.reshape %[[Q4]] : tensor<2x8x4x4xf32> to tensor<256xf32>
  %flat = gpt.reshape %q4 : tensor<2x8x4x4xf32> to tensor<256xf32>
  // CHECK: return %[[Q4]], %[[FLAT]]
  return %q4, %flat : tensor<2x8x4x4xf32>, tensor<256xf32>
}

// -----

// Tests that gpt.transpose round-trips.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME:    %[[Q4:.*]]: tensor<2x8x4x4xf32>
func.func @transpose(%q4: tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32> {
  // CHECK: %[[T:.*]] = gpt.transpose %[[Q4]] [0, 2, 1, 3] : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  %t = gpt.transpose %q4 [0, 2, 1, 3] : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  // CHECK: return %[[T]]
  return %t : tensor<2x4x8x4xf32>
}

// -----

// Tests that gpt.transpose accepts dynamic dimensions and moves them.
// CHECK-LABEL: func.func @transpose_dynamic
func.func @transpose_dynamic(%x: tensor<?x8x?xf32>) -> tensor<?x?x8xf32> {
  // CHECK: gpt.transpose %{{.*}} [2, 0, 1] : (tensor<?x8x?xf32>) -> tensor<?x?x8xf32>
  %t = gpt.transpose %x [2, 0, 1] : (tensor<?x8x?xf32>) -> tensor<?x?x8xf32>
  return %t : tensor<?x?x8xf32>
}

// -----

// Tests that gpt.slice round-trips (k out of packed qkv).
// CHECK-LABEL: func.func @slice
// CHECK-SAME:    %[[QKV:.*]]: tensor<2x8x48xf32>
func.func @slice(%qkv: tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: %[[K:.*]] = gpt.slice %[[QKV]] {dim = 2 : i64, size = 16 : i64, start = 16 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %k = gpt.slice %qkv {dim = 2 : i64, start = 16 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  // CHECK: %[[V:.*]] = gpt.slice %[[QKV]] {dim = 2 : i64, size = 16 : i64, start = 32 : i64} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %v = gpt.slice %qkv {dim = 2 : i64, start = 32 : i64, size = 16 : i64}
      : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  // CHECK: return %[[K]], %[[V]]
  return %k, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that gpt.slice of a dynamic dimension gives a static one.
// CHECK-LABEL: func.func @slice_dynamic
func.func @slice_dynamic(%x: tensor<?x?xf32>) -> tensor<?x4xf32> {
  // CHECK: gpt.slice %{{.*}} {dim = 1 : i64, size = 4 : i64, start = 0 : i64} : (tensor<?x?xf32>) -> tensor<?x4xf32>
  %0 = gpt.slice %x {dim = 1 : i64, start = 0 : i64, size = 4 : i64}
      : (tensor<?x?xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Tests that gpt.all_reduce round-trips with several tensors.

// CHECK-LABEL: func.func @all_reduce
func.func @all_reduce(%a: tensor<64x16xf32>, %b: tensor<16xf32>) -> (tensor<64x16xf32>, tensor<16xf32>) {
  // CHECK: %{{.*}}:2 = gpt.all_reduce mean %{{.*}}, %{{.*}} {bucket = 0 : i64, bytes = 4160 : i64, world_size = 4 : i64} : tensor<64x16xf32>, tensor<16xf32>
  %r:2 = gpt.all_reduce mean %a, %b {bucket = 0 : i64, bytes = 4160 : i64, world_size = 4 : i64}
      : tensor<64x16xf32>, tensor<16xf32>
  return %r#0, %r#1 : tensor<64x16xf32>, tensor<16xf32>
}

// -----

// Tests that gpt.all_reduce takes a maximum (the FP8 amax histories).

// CHECK-LABEL: func.func @all_reduce_max
func.func @all_reduce_max(%h: tensor<16xf32>) -> tensor<16xf32> {
  // CHECK: gpt.all_reduce max %{{.*}} {bucket = 3 : i64, bytes = 64 : i64, world_size = 2 : i64} : tensor<16xf32>
  %r = gpt.all_reduce max %h {bucket = 3 : i64, bytes = 64 : i64, world_size = 2 : i64} : tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// Tests that ZeRO-1's reduce-scatter round-trips, its results the 1-D
// shards of its inputs.

// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%a: tensor<64x16xf32>, %b: tensor<16xbf16>) -> (tensor<512xf32>, tensor<8xbf16>) {
  // CHECK: %{{.*}}:2 = gpt.reduce_scatter mean %{{.*}}, %{{.*}} {bucket = 1 : i64, bytes = 4128 : i64, world_size = 2 : i64} : tensor<64x16xf32>, tensor<16xbf16>
  %r:2 = gpt.reduce_scatter mean %a, %b {bucket = 1 : i64, bytes = 4128 : i64, world_size = 2 : i64}
      : tensor<64x16xf32>, tensor<16xbf16>
  return %r#0, %r#1 : tensor<512xf32>, tensor<8xbf16>
}

// -----

// Tests that ZeRO-1's all-gather and rank slice round-trip.

// CHECK-LABEL: func.func @all_gather
func.func @all_gather(%w: tensor<64x16xf32>) -> tensor<64x16xf32> {
  // CHECK: %[[S:.*]] = gpt.rank_slice %{{.*}} {world_size = 4 : i64} : (tensor<64x16xf32>) -> tensor<256xf32>
  // CHECK: gpt.all_gather %[[S]] into %{{.*}} {bucket = 2 : i64, bytes = 1024 : i64, world_size = 4 : i64} : tensor<256xf32> into tensor<64x16xf32>
  %s = gpt.rank_slice %w {world_size = 4 : i64} : (tensor<64x16xf32>) -> tensor<256xf32>
  %g = gpt.all_gather %s into %w {bucket = 2 : i64, bytes = 1024 : i64, world_size = 4 : i64}
      : tensor<256xf32> into tensor<64x16xf32>
  return %g : tensor<64x16xf32>
}

// -----

// Tests that gpt.adamw_multi round-trips with one weight decay per parameter.

// CHECK-LABEL: func.func @adamw_multi
// CHECK-SAME: (%[[P0:[^:]*]]: tensor<4x4xf32>, %[[P1:[^:]*]]: tensor<4xf32>
func.func @adamw_multi(%p0: tensor<4x4xf32>, %p1: tensor<4xf32>, %g0: tensor<4x4xf32>,
                       %g1: tensor<4xf32>, %m0: tensor<4x4xf32>, %m1: tensor<4xf32>,
                       %v0: tensor<4x4xf32>, %v1: tensor<4xf32>, %lr: tensor<f32>,
                       %step: tensor<i32>, %s: tensor<f32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  // CHECK: %[[NP:[^:]*]]:2, %{{[^:]*}}:2, %{{[^:]*}}:2 = gpt.adamw_multi (%[[P0]], %[[P1]]), (%{{.*}}, %{{.*}}), (%{{.*}}, %{{.*}}), (%{{.*}}, %{{.*}}), %{{.*}}, %{{.*}}, %{{.*}} {beta1 = {{.*}} : f64, beta2 = {{.*}} : f64, epsilon = 1.000000e-08 : f64, weight_decays = array<f64: 1.000000e-01, 0.000000e+00>} : (tensor<4x4xf32>, tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  %np:2, %nm:2, %nv:2 = gpt.adamw_multi (%p0, %p1), (%g0, %g1), (%m0, %m1), (%v0, %v1), %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1, 0.0>}
      : (tensor<4x4xf32>, tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  // CHECK: return %[[NP]]#0, %[[NP]]#1
  return %np#0, %np#1 : tensor<4x4xf32>, tensor<4xf32>
}

// -----

// Tests that gpt.adamw_multi round-trips with gradients narrower than their
// parameters, whose types follow `grads`.

// CHECK-LABEL: func.func @adamw_multi_narrow
func.func @adamw_multi_narrow(%p0: tensor<4x4xf32>, %p1: tensor<4xf32>, %g0: tensor<4x4xbf16>,
                              %g1: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>,
                              %s: tensor<f32>) -> tensor<4x4xf32> {
  // CHECK: gpt.adamw_multi {{.*}} : (tensor<4x4xf32>, tensor<4xf32>) grads (tensor<4x4xbf16>, tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  %np:2, %nm:2, %nv:2 = gpt.adamw_multi (%p0, %p1), (%g0, %g1), (%p0, %p1), (%p0, %p1), %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1, 0.0>}
      : (tensor<4x4xf32>, tensor<4xf32>) grads (tensor<4x4xbf16>, tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  return %np#0 : tensor<4x4xf32>
}

// -----

// Tests that the GEMM fusions of gpt-fuse-matmul-epilogue round-trip: GELU
// of a linear, the GELU gradient of a matmul with and without its column
// sums, and a weight gradient with the column sums of its lhs.
// CHECK-LABEL: func.func @gemm_fusions
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>)
// CHECK: gpt.linear
// CHECK: gpt.gelu
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x16xbf16>, tensor<64x16xbf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16>
// CHECK: gpt.matmul %{{.*}}, %{{.*}} {transpose_rhs}
// CHECK: gpt.gelu_grad
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x16xbf16>, tensor<64x16xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<64xbf16>)
// CHECK: gpt.gelu_grad
// CHECK: gpt.reduce sum
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}) : (tensor<16x64xbf16>, tensor<16x16xbf16>) -> (tensor<64x16xbf16>, tensor<64xbf16>)
// CHECK: gpt.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK: gpt.reduce sum
func.func @gemm_fusions(%x: tensor<2x8x16xbf16>, %w: tensor<64x16xbf16>, %b: tensor<64xbf16>,
                        %dh: tensor<16x16xbf16>, %pre: tensor<16x64xbf16>)
    -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<16x64xbf16>, tensor<64xbf16>,
        tensor<64x16xbf16>, tensor<64xbf16>) {
  %h, %p = gpt.fusion (%x, %w, %b)
      : (tensor<2x8x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>)
      -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) {
  ^bb0(%xa: tensor<2x8x16xbf16>, %wa: tensor<64x16xbf16>, %ba: tensor<64xbf16>):
    %0 = gpt.cast %xa : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %1 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
    %2 = gpt.cast %ba : tensor<64xbf16> to tensor<64xf32>
    %3 = gpt.linear %0, %1, %2 : (tensor<2x8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %4 = gpt.gelu %3 : tensor<2x8x64xf32>
    %5 = gpt.cast %4 : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
    %6 = gpt.cast %3 : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
    gpt.yield %5, %6 : tensor<2x8x64xbf16>, tensor<2x8x64xbf16>
  }
  %d = gpt.fusion (%dh, %w, %pre)
      : (tensor<16x16xbf16>, tensor<64x16xbf16>, tensor<16x64xbf16>) -> tensor<16x64xbf16> {
  ^bb0(%da: tensor<16x16xbf16>, %wa: tensor<64x16xbf16>, %pa: tensor<16x64xbf16>):
    %0 = gpt.cast %da : tensor<16x16xbf16> to tensor<16x16xf32>
    %1 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
    %2 = gpt.cast %pa : tensor<16x64xbf16> to tensor<16x64xf32>
    %3 = gpt.matmul %0, %1 {transpose_rhs} : (tensor<16x16xf32>, tensor<64x16xf32>) -> tensor<16x64xf32>
    %4 = gpt.gelu_grad %3, %2 : tensor<16x64xf32>
    %5 = gpt.cast %4 : tensor<16x64xf32> to tensor<16x64xbf16>
    gpt.yield %5 : tensor<16x64xbf16>
  }
  %e, %eb = gpt.fusion (%dh, %w, %pre)
      : (tensor<16x16xbf16>, tensor<64x16xbf16>, tensor<16x64xbf16>)
      -> (tensor<16x64xbf16>, tensor<64xbf16>) {
  ^bb0(%da: tensor<16x16xbf16>, %wa: tensor<64x16xbf16>, %pa: tensor<16x64xbf16>):
    %0 = gpt.cast %da : tensor<16x16xbf16> to tensor<16x16xf32>
    %1 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
    %2 = gpt.cast %pa : tensor<16x64xbf16> to tensor<16x64xf32>
    %3 = gpt.matmul %0, %1 {transpose_rhs} : (tensor<16x16xf32>, tensor<64x16xf32>) -> tensor<16x64xf32>
    %4 = gpt.gelu_grad %3, %2 : tensor<16x64xf32>
    %5 = gpt.cast %4 : tensor<16x64xf32> to tensor<16x64xbf16>
    %6 = gpt.reduce sum %4 dims [0] : (tensor<16x64xf32>) -> tensor<64xf32>
    %7 = gpt.cast %6 : tensor<64xf32> to tensor<64xbf16>
    gpt.yield %5, %7 : tensor<16x64xbf16>, tensor<64xbf16>
  }
  %dw, %db = gpt.fusion (%d, %dh)
      : (tensor<16x64xbf16>, tensor<16x16xbf16>) -> (tensor<64x16xbf16>, tensor<64xbf16>) {
  ^bb0(%da: tensor<16x64xbf16>, %xa: tensor<16x16xbf16>):
    %0 = gpt.cast %da : tensor<16x64xbf16> to tensor<16x64xf32>
    %1 = gpt.cast %xa : tensor<16x16xbf16> to tensor<16x16xf32>
    %2 = gpt.matmul %0, %1 {transpose_lhs} : (tensor<16x64xf32>, tensor<16x16xf32>) -> tensor<64x16xf32>
    %3 = gpt.reduce sum %0 dims [0] : (tensor<16x64xf32>) -> tensor<64xf32>
    %4 = gpt.cast %2 : tensor<64x16xf32> to tensor<64x16xbf16>
    %5 = gpt.cast %3 : tensor<64xf32> to tensor<64xbf16>
    gpt.yield %4, %5 : tensor<64x16xbf16>, tensor<64xbf16>
  }
  return %h, %p, %e, %eb, %dw, %db : tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<16x64xbf16>,
      tensor<64xbf16>, tensor<64x16xbf16>, tensor<64xbf16>
}

// -----

// Tests that a column-sum fusion (a GELU gradient and its column sums)
// round-trips.
// CHECK-LABEL: func.func @gelu_grad_with_sums
func.func @gelu_grad_with_sums(%d: tensor<16x64xbf16>, %pre: tensor<16x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<64xbf16>) {
  // CHECK: gpt.fusion(%{{.*}}, %{{.*}}) : (tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<64xbf16>)
  // CHECK: gpt.reduce sum
  %e, %eb = gpt.fusion (%d, %pre) : (tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<16x64xbf16>, tensor<64xbf16>) {
  ^bb0(%da: tensor<16x64xbf16>, %pa: tensor<16x64xbf16>):
    %0 = gpt.cast %da : tensor<16x64xbf16> to tensor<16x64xf32>
    %1 = gpt.cast %pa : tensor<16x64xbf16> to tensor<16x64xf32>
    %2 = gpt.gelu_grad %0, %1 : tensor<16x64xf32>
    %3 = gpt.cast %2 : tensor<16x64xf32> to tensor<16x64xbf16>
    %4 = gpt.reduce sum %2 dims [0] : (tensor<16x64xf32>) -> tensor<64xf32>
    %5 = gpt.cast %4 : tensor<64xf32> to tensor<64xbf16>
    gpt.yield %3, %5 : tensor<16x64xbf16>, tensor<64xbf16>
  }
  return %e, %eb : tensor<16x64xbf16>, tensor<64xbf16>
}

// -----

// Tests that a row fusion (a residual add and the layernorm of its sum)
// round-trips.
// CHECK-LABEL: func.func @row_fusion
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>)
// CHECK: gpt.layernorm
// CHECK: gpt.yield
func.func @row_fusion(%h: tensor<2x8x16xbf16>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>,
                      %b: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>) {
  %s, %y = gpt.fusion (%h, %x, %w, %b)
      : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
      -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>) {
  ^bb0(%ha: tensor<2x8x16xbf16>, %xa: tensor<2x8x16xf32>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %0 = gpt.cast %ha : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %1 = gpt.add %0, %xa : tensor<2x8x16xf32>
    %2 = gpt.layernorm %1, %wa, %ba {epsilon = 1.0e-05 : f64}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
    gpt.yield %1, %2 : tensor<2x8x16xf32>, tensor<2x8x16xbf16>
  }
  return %s, %y : tensor<2x8x16xf32>, tensor<2x8x16xbf16>
}

// -----

// Tests that a row-gradient fusion (dx joining the residual gradient, and
// its bf16 copy) round-trips.
// CHECK-LABEL: func.func @row_grad_fusion
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK: gpt.layernorm_grad
// CHECK: gpt.yield
func.func @row_grad_fusion(%dy: tensor<2x8x16xbf16>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>,
                           %acc: tensor<2x8x16xf32>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) {
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
  return %g, %gh, %dw, %db : tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that an attention-gradient column-sum fusion (the qkv bias
// gradient) round-trips.
// CHECK-LABEL: func.func @attention_grad_sum_fusion
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>)
// CHECK: gpt.causal_attention_grad
// CHECK: gpt.reduce sum
func.func @attention_grad_sum_fusion(%dy: tensor<2x8x16xbf16>, %qkv: tensor<2x8x48xbf16>,
                                     %y: tensor<2x8x16xbf16>, %lse: tensor<2x2x8xf32>)
    -> (tensor<2x8x48xbf16>, tensor<48xbf16>) {
  %d, %db = gpt.fusion (%dy, %qkv, %y, %lse)
      : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>)
      -> (tensor<2x8x48xbf16>, tensor<48xbf16>) {
  ^bb0(%dya: tensor<2x8x16xbf16>, %qa: tensor<2x8x48xbf16>, %ya: tensor<2x8x16xbf16>, %la: tensor<2x2x8xf32>):
    %0 = gpt.cast %dya : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %1 = gpt.cast %qa : tensor<2x8x48xbf16> to tensor<2x8x48xf32>
    %2 = gpt.cast %ya : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %3 = gpt.causal_attention_grad %0, %1, %2, %la {num_heads = 2 : i64}
        : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
    %4 = gpt.reduce sum %3 dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
    %5 = gpt.cast %3 : tensor<2x8x48xf32> to tensor<2x8x48xbf16>
    %6 = gpt.cast %4 : tensor<48xf32> to tensor<48xbf16>
    gpt.yield %5, %6 : tensor<2x8x48xbf16>, tensor<48xbf16>
  }
  return %d, %db : tensor<2x8x48xbf16>, tensor<48xbf16>
}

// -----

// Tests that gpt.embed round-trips with a result narrower than its tables.
// CHECK-LABEL: func.func @embed_narrow_result
func.func @embed_narrow_result(%wte: tensor<64x16xf32>, %wpe: tensor<16x16xf32>,
                               %ids: tensor<2x8xi32>) -> tensor<2x8x16xbf16> {
  // CHECK: gpt.embed %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xbf16>
  %x = gpt.embed %wte, %wpe, %ids
      : (tensor<64x16xf32>, tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xbf16>
  return %x : tensor<2x8x16xbf16>
}

// -----

// Tests that gpt.embed_grad round-trips with tables wider than its gradient.
// CHECK-LABEL: func.func @embed_grad_wide_tables
func.func @embed_grad_wide_tables(%dy: tensor<2x8x16xbf16>, %ids: tensor<2x8xi32>)
    -> (tensor<64x16xf32>, tensor<16x16xf32>) {
  // CHECK: gpt.embed_grad %{{.*}}, %{{.*}} {position_rows = 16 : i64, vocab_rows = 64 : i64} : (tensor<2x8x16xbf16>, tensor<2x8xi32>) -> (tensor<64x16xf32>, tensor<16x16xf32>)
  %dwte, %dwpe = gpt.embed_grad %dy, %ids {vocab_rows = 64 : i64, position_rows = 16 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8xi32>) -> (tensor<64x16xf32>, tensor<16x16xf32>)
  return %dwte, %dwpe : tensor<64x16xf32>, tensor<16x16xf32>
}

// -----

// Tests that gpt.layernorm round-trips with an input narrower than its parameters.
// CHECK-LABEL: func.func @layernorm_narrow_input
func.func @layernorm_narrow_input(%x: tensor<2x8x16xbf16>, %w: tensor<16xf32>,
                                  %b: tensor<16xf32>) -> tensor<2x8x16xbf16> {
  // CHECK: gpt.layernorm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
  %y = gpt.layernorm %x, %w, %b
      : (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
  return %y : tensor<2x8x16xbf16>
}

// -----

// Tests that a row fusion round-trips with a narrow sum and f32 parameters.
// CHECK-LABEL: func.func @row_fusion_narrow_sum
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>)
func.func @row_fusion_narrow_sum(%h: tensor<2x8x16xbf16>, %x: tensor<2x8x16xbf16>,
                                 %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  %s, %y = gpt.fusion (%h, %x, %w, %b)
      : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
      -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  ^bb0(%ha: tensor<2x8x16xbf16>, %xa: tensor<2x8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %0 = gpt.add %ha, %xa : tensor<2x8x16xbf16>
    %1 = gpt.layernorm %0, %wa, %ba : (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xbf16>
    gpt.yield %0, %1 : tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
  }
  return %s, %y : tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
}

// -----

// Tests that a row-gradient fusion round-trips with a bf16 input widened in
// the body (dx joins the bf16 residual gradient unrounded).
// CHECK-LABEL: func.func @row_grad_fusion_narrow_stream
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>)
func.func @row_grad_fusion_narrow_stream(%dy: tensor<2x8x16xbf16>, %x: tensor<2x8x16xbf16>,
                                         %w: tensor<16xf32>, %acc: tensor<2x8x16xbf16>)
    -> (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) {
  %g, %dw, %db = gpt.fusion (%dy, %x, %w, %acc)
      : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<2x8x16xbf16>)
      -> (tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%dya: tensor<2x8x16xbf16>, %xa: tensor<2x8x16xbf16>, %wa: tensor<16xf32>, %acca: tensor<2x8x16xbf16>):
    %0 = gpt.cast %xa : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %dx, %dwa, %dba = gpt.layernorm_grad %dya, %0, %wa
        : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    %1 = gpt.cast %acca : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
    %2 = gpt.add %1, %dx : tensor<2x8x16xf32>
    %3 = gpt.cast %2 : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
    gpt.yield %3, %dwa, %dba : tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>
  }
  return %g, %dw, %db : tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that gpt.fp8_matmul round-trips with each operand's format and the
// matmul flags.
// CHECK-LABEL: func.func @fp8_matmul
// CHECK-SAME:    %[[X:.*]]: tensor<8x16xbf16>, %[[W:.*]]: tensor<48x16xbf16>, %[[DY:.*]]: tensor<8x48xbf16>
func.func @fp8_matmul(%x: tensor<8x16xbf16>, %w: tensor<48x16xbf16>, %dy: tensor<8x48xbf16>) -> (tensor<8x48xbf16>, tensor<48x16xbf16>) {
  // CHECK: gpt.fp8_matmul e4m3 %[[X]], e4m3 %[[W]] {transpose_rhs} : (tensor<8x16xbf16>, tensor<48x16xbf16>) -> tensor<8x48xbf16>
  %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs} : (tensor<8x16xbf16>, tensor<48x16xbf16>) -> tensor<8x48xbf16>
  // CHECK: gpt.fp8_matmul e5m2 %[[DY]], e4m3 %[[X]] {transpose_lhs} : (tensor<8x48xbf16>, tensor<8x16xbf16>) -> tensor<48x16xbf16>
  %dw = gpt.fp8_matmul e5m2 %dy, e4m3 %x {transpose_lhs} : (tensor<8x48xbf16>, tensor<8x16xbf16>) -> tensor<48x16xbf16>
  return %y, %dw : tensor<8x48xbf16>, tensor<48x16xbf16>
}

// -----

// Tests that gpt.fp8_scale round-trips with its scale and inverse.
// CHECK-LABEL: func.func @fp8_scale
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xbf16>
func.func @fp8_scale(%x: tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: gpt.fp8_scale e4m3 %[[X]] : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  return %s, %inv : tensor<f32>, tensor<f32>
}

// -----

// Tests that gpt.fp8_delayed_scales round-trips each history with its
// format, giving the scales, the inverses and the shifted histories.
// CHECK-LABEL: func.func @fp8_delayed_scales
// CHECK-SAME:    %[[H0:.*]]: tensor<16xf32>, %[[H1:.*]]: tensor<4xf32>
func.func @fp8_delayed_scales(%h0: tensor<16xf32>, %h1: tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>) {
  // CHECK: %[[R:.*]]:6 = gpt.fp8_delayed_scales (e4m3 %[[H0]], e5m2 %[[H1]]) : tensor<16xf32>, tensor<4xf32>
  %r:6 = gpt.fp8_delayed_scales (e4m3 %h0, e5m2 %h1) : tensor<16xf32>, tensor<4xf32>
  // CHECK: return %[[R]]#1, %[[R]]#2, %[[R]]#5 : tensor<f32>, tensor<f32>, tensor<4xf32>
  return %r#1, %r#2, %r#5 : tensor<f32>, tensor<f32>, tensor<4xf32>
}

// -----

// Tests that gpt.add_layernorm_fp8 round-trips with and without a history.
// CHECK-LABEL: func.func @add_layernorm_fp8
func.func @add_layernorm_fp8(%a: tensor<2x8x16xf32>, %x: tensor<2x8x16xbf16>, %w: tensor<16xf32>, %b: tensor<16xf32>, %s: tensor<f32>, %h: tensor<4xf32>)
    -> (tensor<16x16xf8E4M3FN>, tensor<4xf32>, tensor<2x8x16xf8E5M2>) {
  // CHECK: gpt.add_layernorm_fp8 e4m3 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} history %{{.*}} {rounded_to = bf16} : (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<4xf32>)
  %sum, %q, %qt, %rec = gpt.add_layernorm_fp8 e4m3 %a, %x, %w, %b, %s history %h {rounded_to = bf16} : (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<4xf32>)
  // CHECK: gpt.add_layernorm_fp8 e5m2 %{{.*}} {rounded_to = f32} : (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>)
  %sum2, %q2, %qt2 = gpt.add_layernorm_fp8 e5m2 %a, %x, %w, %b, %s {rounded_to = f32} : (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>)
  return %qt, %rec, %q2 : tensor<16x16xf8E4M3FN>, tensor<4xf32>, tensor<2x8x16xf8E5M2>
}

// -----

// Tests that gpt.fp8_quantize round-trips, with and without transpose,
// giving the format's element type.
// CHECK-LABEL: func.func @fp8_quantize
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xbf16>, %[[DY:.*]]: tensor<16x48xbf16>, %[[S:.*]]: tensor<f32>
func.func @fp8_quantize(%x: tensor<2x8x16xbf16>, %dy: tensor<16x48xbf16>, %s: tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<48x16xf8E5M2>) {
  // CHECK: gpt.fp8_quantize e4m3 %[[X]], %[[S]] : (tensor<2x8x16xbf16>, tensor<f32>) -> tensor<2x8x16xf8E4M3FN>
  %q = gpt.fp8_quantize e4m3 %x, %s : (tensor<2x8x16xbf16>, tensor<f32>) -> tensor<2x8x16xf8E4M3FN>
  // CHECK: gpt.fp8_quantize e5m2 %[[DY]], %[[S]] {transpose} : (tensor<16x48xbf16>, tensor<f32>) -> tensor<48x16xf8E5M2>
  %qt = gpt.fp8_quantize e5m2 %dy, %s {transpose} : (tensor<16x48xbf16>, tensor<f32>) -> tensor<48x16xf8E5M2>
  return %q, %qt : tensor<2x8x16xf8E4M3FN>, tensor<48x16xf8E5M2>
}

// -----

// Tests that gpt.fp8_cast_transpose round-trips, its transposed result the
// (columns, rows) of the input with leading dimensions flattened.
// CHECK-LABEL: func.func @fp8_cast_transpose
func.func @fp8_cast_transpose(%x: tensor<2x8x16xbf16>, %s: tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>) {
  // CHECK: gpt.fp8_cast_transpose e5m2 %{{.*}}, %{{.*}} : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %x, %s : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>)
  return %q, %qt : tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>
}

// -----

// Tests that gpt.fp8_cast_transpose round-trips rounded_to (an f32 input
// rounded to bf16 before it is scaled).
// CHECK-LABEL: func.func @fp8_cast_transpose_rounded_to
func.func @fp8_cast_transpose_rounded_to(%w: tensor<64x16xf32>, %s: tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>) {
  // CHECK: gpt.fp8_cast_transpose e4m3 %{{.*}}, %{{.*}} {rounded_to = bf16} : (tensor<64x16xf32>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %w, %s {rounded_to = bf16} : (tensor<64x16xf32>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>)
  return %q, %qt : tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>
}

// -----

// Tests that the FP8 ops round-trip an amax history (delayed scaling):
// the scale shifts it, the quantizations return it recorded.
// CHECK-LABEL: func.func @fp8_history
// CHECK-SAME:    %[[X:.*]]: tensor<8x16xbf16>, %[[H:.*]]: tensor<4xf32>
func.func @fp8_history(%x: tensor<8x16xbf16>, %h: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: %[[S:.*]], %{{.*}}, %[[H1:.*]] = gpt.fp8_scale e4m3 %[[X]] history %[[H]] : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  // CHECK: gpt.fp8_cast_transpose e4m3 %[[X]], %[[S]] history %[[H1]] : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  // CHECK: gpt.fp8_quantize e4m3 %[[X]], %[[S]] history %[[H1]] {transpose} : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %q2, %h3 = gpt.fp8_quantize e4m3 %x, %s history %h1 {transpose} : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  return %h2, %h3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that gpt.scaled_matmul round-trips with mixed formats, a shared rhs
// and fast accumulation.
// CHECK-LABEL: func.func @scaled_matmul
func.func @scaled_matmul(%a: tensor<2x8x16xf8E5M2>, %sa: tensor<f32>, %b: tensor<48x16xf8E4M3FN>, %sb: tensor<f32>) -> tensor<2x8x48xbf16> {
  // CHECK: gpt.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {fast_accum, transpose_rhs} : (tensor<2x8x16xf8E5M2>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<2x8x48xbf16>
  %y = gpt.scaled_matmul %a, %sa, %b, %sb {transpose_rhs, fast_accum} : (tensor<2x8x16xf8E5M2>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<2x8x48xbf16>
  return %y : tensor<2x8x48xbf16>
}

// -----

// Tests that gpt.scaled_matmul round-trips with a bias.
// CHECK-LABEL: func.func @scaled_matmul_bias
func.func @scaled_matmul_bias(%a: tensor<8x16xf8E4M3FN>, %sa: tensor<f32>, %b: tensor<48x16xf8E4M3FN>, %sb: tensor<f32>, %bias: tensor<48xbf16>) -> tensor<8x48xbf16> {
  // CHECK: gpt.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>, tensor<48xbf16>) -> tensor<8x48xbf16>
  %y = gpt.scaled_matmul %a, %sa, %b, %sb bias %bias {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>, tensor<48xbf16>) -> tensor<8x48xbf16>
  return %y : tensor<8x48xbf16>
}

// -----

// Tests that gpt.scaled_matmul round-trips with an f32 accumulator.
// CHECK-LABEL: func.func @scaled_matmul_accumulate
func.func @scaled_matmul_accumulate(%a: tensor<48x16xf8E5M2>, %sa: tensor<f32>, %b: tensor<16x16xf8E4M3FN>, %sb: tensor<f32>, %acc: tensor<48x16xf32>) -> tensor<48x16xf32> {
  // CHECK: gpt.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} accumulate %{{.*}} {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf32>) -> tensor<48x16xf32>
  %y = gpt.scaled_matmul %a, %sa, %b, %sb accumulate %acc {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf32>) -> tensor<48x16xf32>
  return %y : tensor<48x16xf32>
}

// -----

// Tests that the FP8 ops round-trip {gelu} (they quantize the GELU of
// their input).
// CHECK-LABEL: func.func @fp8_gelu
func.func @fp8_gelu(%x: tensor<2x8x16xbf16>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>) {
  // CHECK: gpt.fp8_scale e4m3 %{{.*}} {gelu} : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %s, %inv = gpt.fp8_scale e4m3 %x {gelu} : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  // CHECK: gpt.fp8_cast_transpose e4m3 %{{.*}}, %{{.*}} {gelu} : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s {gelu} : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
  %x2 = gpt.reshape %x : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  // CHECK: gpt.fp8_quantize e4m3 %{{.*}}, %{{.*}} {gelu, transpose} : (tensor<16x16xbf16>, tensor<f32>) -> tensor<16x16xf8E4M3FN>
  %t = gpt.fp8_quantize e4m3 %x2, %s {gelu, transpose} : (tensor<16x16xbf16>, tensor<f32>) -> tensor<16x16xf8E4M3FN>
  return %q, %qt, %t : tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>
}

// -----

// Tests that gpt.fp8_cross_entropy_grad round-trips: e5m2 codes of the
// logits' shape and an f32 inverse scale.
// CHECK-LABEL: func.func @fp8_cross_entropy_grad
// CHECK-SAME:    %[[D:[^:]*]]: tensor<f32>, %[[L:[^:]*]]: tensor<2x8x64xbf16>, %[[T:[^:]*]]: tensor<2x8xi32>
func.func @fp8_cross_entropy_grad(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>) -> (tensor<2x8x64xf8E5M2>, tensor<f32>) {
  // CHECK: gpt.fp8_cross_entropy_grad %[[D]], %[[L]], %[[T]] {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<2x8x64xf8E5M2>, tensor<f32>)
  %q, %inv = gpt.fp8_cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<2x8x64xf8E5M2>, tensor<f32>)
  return %q, %inv : tensor<2x8x64xf8E5M2>, tensor<f32>
}

// -----

// Tests that gpt.fp8_transpose round-trips, flattening the leading
// dimensions into rows and keeping the element type.
// CHECK-LABEL: func.func @fp8_transpose
// CHECK-SAME:    %[[Q:.*]]: tensor<2x8x64xf8E5M2>
func.func @fp8_transpose(%q: tensor<2x8x64xf8E5M2>) -> tensor<64x16xf8E5M2> {
  // CHECK: gpt.fp8_transpose %[[Q]] : (tensor<2x8x64xf8E5M2>) -> tensor<64x16xf8E5M2>
  %qt = gpt.fp8_transpose %q : (tensor<2x8x64xf8E5M2>) -> tensor<64x16xf8E5M2>
  return %qt : tensor<64x16xf8E5M2>
}

// -----

// Tests that gpt.fp8_cast_transpose_sum round-trips with a folded GELU
// gradient and a history, its sum one entry per column in the input's
// type, and that gpt.fp8_scale takes the same GELU gradient.
// CHECK-LABEL: func.func @fp8_cast_transpose_sum
// CHECK-SAME:    %[[DH:[^:]*]]: tensor<2x8x16xbf16>, %[[PRE:[^:]*]]: tensor<2x8x16xbf16>, %[[H:[^:]*]]: tensor<4xf32>
func.func @fp8_cast_transpose_sum(%dh: tensor<2x8x16xbf16>, %pre: tensor<2x8x16xbf16>, %h: tensor<4xf32>)
    -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>, tensor<4xf32>, tensor<16xbf16>) {
  // CHECK: %[[S:.*]], %{{.*}}, %[[H1:.*]] = gpt.fp8_scale e5m2 %[[DH]] gelu_grad %[[PRE]] history %[[H]] : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %s, %inv, %h1 = gpt.fp8_scale e5m2 %dh gelu_grad %pre history %h : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  // CHECK: gpt.fp8_cast_transpose_sum e5m2 %[[DH]] gelu_grad %[[PRE]], %[[S]] history %[[H1]] : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>, tensor<4xf32>)
  %q, %qt, %db, %h2 = gpt.fp8_cast_transpose_sum e5m2 %dh gelu_grad %pre, %s history %h1 : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>, tensor<4xf32>)
  // CHECK: gpt.fp8_cast_transpose_sum e5m2 %[[DH]], %[[S]] : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>)
  %q2, %qt2, %db2 = gpt.fp8_cast_transpose_sum e5m2 %dh, %s : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>)
  return %q, %qt, %db, %h2, %db2 : tensor<2x8x16xf8E5M2>, tensor<16x16xf8E5M2>, tensor<16xbf16>, tensor<4xf32>, tensor<16xbf16>
}

// -----

// Tests that gpt.scaled_matmul_gelu_fp8 round-trips with and without a bias.
// CHECK-LABEL: func.func @scaled_matmul_gelu_fp8
func.func @scaled_matmul_gelu_fp8(%x: tensor<2x8x16xf8E4M3FN>, %w: tensor<64x16xf8E4M3FN>, %s: tensor<f32>, %h: tensor<4xf32>, %b: tensor<64xbf16>)
    -> (tensor<2x8x64xbf16>, tensor<2x8x64xf8E4M3FN>, tensor<4xf32>, tensor<2x8x64xf8E5M2>) {
  // CHECK: gpt.scaled_matmul_gelu_fp8 e4m3 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} history %{{.*}} bias %{{.*}} {fast_accum} : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<64xbf16>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xf8E4M3FN>, tensor<4xf32>)
  %pre, %q, %rec = gpt.scaled_matmul_gelu_fp8 e4m3 %x, %s, %w, %s, %s history %h bias %b {fast_accum} : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<64xbf16>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xf8E4M3FN>, tensor<4xf32>)
  // CHECK: gpt.scaled_matmul_gelu_fp8 e5m2 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} history %{{.*}} : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xf8E5M2>, tensor<4xf32>)
  %pre2, %q2, %rec2 = gpt.scaled_matmul_gelu_fp8 e5m2 %x, %s, %w, %s, %s history %h : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xf8E5M2>, tensor<4xf32>)
  return %pre, %q, %rec, %q2 : tensor<2x8x64xbf16>, tensor<2x8x64xf8E4M3FN>, tensor<4xf32>, tensor<2x8x64xf8E5M2>
}
