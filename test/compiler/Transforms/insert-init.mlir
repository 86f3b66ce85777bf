// RUN: gpt-opt %s --split-input-file --gpt-insert-init | FileCheck %s

// Tests that @init takes the seed and returns one value per gpt.param
// argument of @forward, in argument order and under the same names,
// skipping gpt.input arguments.

// CHECK-LABEL: func.func @init
// CHECK-SAME: (%{{[^:]*}}: tensor<i32> {gpt.input = "seed"})
// CHECK-SAME: -> (tensor<8x4xf32> {gpt.param = "wte"}, tensor<4xf32> {gpt.param = "h.0.ln_1.weight"}, tensor<4xf32> {gpt.param = "h.0.ln_1.bias"},
// CHECK-SAME: tensor<4x4xf32> {gpt.param = "h.0.attn.c_proj.weight"}, tensor<16x4xf32> {gpt.param = "h.0.mlp.c_fc.weight"})
// CHECK: %[[WTE:.*]] = gpt.random_normal
// CHECK-NEXT: %[[LNW:.*]] = gpt.constant
// CHECK-NEXT: %[[LNB:.*]] = gpt.constant
// CHECK-NEXT: %[[PROJ:.*]] = gpt.random_normal
// CHECK-NEXT: %[[FC:.*]] = gpt.random_normal
// CHECK-NEXT: return %[[WTE]], %[[LNW]], %[[LNB]], %[[PROJ]], %[[FC]] : tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<16x4xf32>
module attributes {gpt.config = {n_layer = 2 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                     %wte: tensor<8x4xf32> {gpt.param = "wte"},
                     %ln_w: tensor<4xf32> {gpt.param = "h.0.ln_1.weight"},
                     %ln_b: tensor<4xf32> {gpt.param = "h.0.ln_1.bias"},
                     %targets: tensor<1x2xi32> {gpt.input = "targets"},
                     %proj: tensor<4x4xf32> {gpt.param = "h.0.attn.c_proj.weight"},
                     %fc: tensor<16x4xf32> {gpt.param = "h.0.mlp.c_fc.weight"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that LayerNorm weights (including ln_f) start at ones and every
// bias (LayerNorm or linear) at zeros, with no random draws.

// CHECK-LABEL: func.func @init
// CHECK-NOT: gpt.random_normal
// CHECK: %[[W1:.*]] = gpt.constant 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[B1:.*]] = gpt.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[B2:.*]] = gpt.constant 0.000000e+00 : tensor<12xf32>
// CHECK-NEXT: %[[WF:.*]] = gpt.constant 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[BF:.*]] = gpt.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: return %[[W1]], %[[B1]], %[[B2]], %[[WF]], %[[BF]] :
module attributes {gpt.config = {n_layer = 2 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%ln_w: tensor<4xf32> {gpt.param = "h.0.ln_1.weight"},
                     %ln_b: tensor<4xf32> {gpt.param = "h.0.ln_1.bias"},
                     %attn_b: tensor<12xf32> {gpt.param = "h.0.attn.c_attn.bias"},
                     %lnf_w: tensor<4xf32> {gpt.param = "ln_f.weight"},
                     %lnf_b: tensor<4xf32> {gpt.param = "ln_f.bias"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that other weights are N(0, 0.02^2) from gpt.random_normal of the
// seed, with the @forward argument index (inputs included) as the stream.

// CHECK-LABEL: func.func @init
// CHECK-SAME: (%[[SEED:[^:]*]]: tensor<i32> {gpt.input = "seed"})
// CHECK: %[[WTE:.*]] = gpt.random_normal %[[SEED]] {std = 2.000000e-02 : f64, stream = 1 : i64} : (tensor<i32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[WPE:.*]] = gpt.random_normal %[[SEED]] {std = 2.000000e-02 : f64, stream = 2 : i64} : (tensor<i32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[FC:.*]] = gpt.random_normal %[[SEED]] {std = 2.000000e-02 : f64, stream = 4 : i64} : (tensor<i32>) -> tensor<16x4xf32>
// CHECK-NEXT: return %[[WTE]], %[[WPE]], %[[FC]] :
module attributes {gpt.config = {n_layer = 2 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                     %wte: tensor<8x4xf32> {gpt.param = "wte"},
                     %wpe: tensor<6x4xf32> {gpt.param = "wpe"},
                     %targets: tensor<1x2xi32> {gpt.input = "targets"},
                     %fc: tensor<16x4xf32> {gpt.param = "h.0.mlp.c_fc.weight"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that residual projections (attn and mlp c_proj weights) use
// std 0.02 / sqrt(2 n_layer), 0.01 for two layers, while c_attn keeps 0.02.

// CHECK-LABEL: func.func @init
// CHECK-SAME: (%[[SEED:[^:]*]]: tensor<i32> {gpt.input = "seed"})
// CHECK: gpt.random_normal %[[SEED]] {std = 2.000000e-02 : f64, stream = 0 : i64} : (tensor<i32>) -> tensor<12x4xf32>
// CHECK-NEXT: gpt.random_normal %[[SEED]] {std = 1.000000e-02 : f64, stream = 1 : i64} : (tensor<i32>) -> tensor<4x4xf32>
// CHECK-NEXT: gpt.random_normal %[[SEED]] {std = 1.000000e-02 : f64, stream = 2 : i64} : (tensor<i32>) -> tensor<4x16xf32>
module attributes {gpt.config = {n_layer = 2 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%attn: tensor<12x4xf32> {gpt.param = "h.1.attn.c_attn.weight"},
                     %attn_proj: tensor<4x4xf32> {gpt.param = "h.1.attn.c_proj.weight"},
                     %mlp_proj: tensor<4x16xf32> {gpt.param = "h.1.mlp.c_proj.weight"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that the residual std follows n_layer: 0.02 / sqrt(16) = 0.005 for
// eight layers.

// CHECK-LABEL: func.func @init
// CHECK: gpt.random_normal %{{.*}} {std = 5.000000e-03 : f64, stream = 0 : i64} : (tensor<i32>) -> tensor<4x4xf32>
module attributes {gpt.config = {n_layer = 8 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%proj: tensor<4x4xf32> {gpt.param = "h.7.attn.c_proj.weight"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that @forward is left unchanged and @init is appended to the module.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x4xf32> {gpt.param = "w"}) -> tensor<f32> {
// CHECK-NEXT: %[[ZERO:.*]] = gpt.constant 0.000000e+00 : tensor<f32>
// CHECK-NEXT: return %[[ZERO]] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NEXT: func.func @other()
// CHECK: func.func @init
module attributes {gpt.config = {n_layer = 2 : i64, n_head = 1 : i64, n_embd = 4 : i64}} {
  func.func @forward(%w: tensor<4x4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
  func.func @other() {
    return
  }
}
