// RUN: gpt-opt %s --split-input-file --gpt-insert-all-reduce="world-size=4 bucket-mb=0" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-insert-all-reduce="world-size=2 bucket-mb=0.0001" | FileCheck %s --check-prefix=BUCKET
// RUN: not gpt-opt %s --split-input-file --gpt-insert-all-reduce="world-size=2 bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=BADBUCKET
// BADBUCKET: error: gpt-insert-all-reduce: bucket-mb must be in [0, 2^40] MiB, got -1

// A train step reduced to what the pass reads: two gradients finalised in
// backward order (%gb before %gw), the global norm, AdamW, and the loss.
func.func @train_step(%w: tensor<64x16xf32> {gpt.param = "w"}, %b: tensor<16xf32> {gpt.param = "b"},
                      %mw: tensor<64x16xf32> {gpt.state = "w.adam_m"}, %vw: tensor<64x16xf32> {gpt.state = "w.adam_v"},
                      %mb: tensor<16xf32> {gpt.state = "b.adam_m"}, %vb: tensor<16xf32> {gpt.state = "b.adam_v"},
                      %x: tensor<64x16xf32> {gpt.input = "tokens"}, %step: tensor<i32> {gpt.input = "step"},
                      %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<64x16xf32> {gpt.param = "w"}, tensor<16xf32> {gpt.param = "b"}, tensor<f32> {gpt.output = "loss"},
        tensor<f32> {gpt.output = "grad_norm"}) {
  %loss = gpt.global_norm %x : (tensor<64x16xf32>) -> tensor<f32>
  %gb = gpt.reduce sum %x dims [0] : (tensor<64x16xf32>) -> tensor<16xf32>
  %gw = gpt.exp %x : tensor<64x16xf32>
  %norm = gpt.global_norm %gw, %gb : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<f32>
  %w1, %mw1, %vw1 = gpt.adamw %w, %gw, %mw, %vw, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<64x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb1, %vb1 = gpt.adamw %b, %gb, %mb, %vb, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1, %loss, %norm : tensor<64x16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>
}

// Tests that with bucket-mb=0 every gradient gets its own all_reduce mean,
// issued right after the op that finalises it, in backward order, and
// that the norm and AdamW read the reduced gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[GB:.*]] = gpt.reduce
// CHECK-NEXT: %[[RB:.*]] = gpt.all_reduce mean %[[GB]] {bucket = 1 : i64, bytes = 64 : i64, world_size = 4 : i64}
// CHECK-NEXT: %[[GW:.*]] = gpt.exp
// CHECK-NEXT: %[[RW:.*]] = gpt.all_reduce mean %[[GW]] {bucket = 2 : i64, bytes = 4096 : i64, world_size = 4 : i64}
// CHECK-NEXT: %[[NORM:.*]] = gpt.global_norm %[[RW]], %[[RB]]
// CHECK: gpt.adamw %{{.*}}, %[[RW]],
// CHECK: gpt.adamw %{{.*}}, %[[RB]],

// Tests that with a bucket of ~105 bytes the 64-byte bias gradient waits
// for the weight gradient: one all_reduce of both after the later one.
// BUCKET-LABEL: func.func @train_step
// BUCKET: gpt.reduce
// BUCKET-NEXT: %[[GW:.*]] = gpt.exp
// BUCKET-NEXT: %[[R:.*]]:2 = gpt.all_reduce mean %{{.*}}, %[[GW]] {bucket = 1 : i64, bytes = 4160 : i64, world_size = 2 : i64}
// BUCKET-NEXT: gpt.global_norm %[[R]]#1, %[[R]]#0

// -----

// Tests that the returned loss becomes the mean over the ranks and that
// the module records the world size.
// CHECK: module attributes {gpt.config = {n_layer = 2 : i64, world_size = 4 : i64}}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[L:.*]] = gpt.exp
// CHECK-NEXT: %[[RL:.*]] = gpt.all_reduce mean %[[L]] {bucket = 0 : i64, bytes = 4 : i64
// CHECK: return %{{.*}}, %[[RL]]
module attributes {gpt.config = {n_layer = 2 : i64}} {
func.func @train_step(%b: tensor<16xf32> {gpt.param = "b"}, %mb: tensor<16xf32> {gpt.state = "b.adam_m"},
                      %vb: tensor<16xf32> {gpt.state = "b.adam_v"}, %x: tensor<f32> {gpt.input = "x"},
                      %step: tensor<i32> {gpt.input = "step"})
    -> (tensor<16xf32> {gpt.param = "b"}, tensor<f32> {gpt.output = "loss"}) {
  %loss = gpt.exp %x : tensor<f32>
  %gb = gpt.neg %b : tensor<16xf32>
  %b1, %mb1, %vb1 = gpt.adamw %b, %gb, %mb, %vb, %x, %step, %x
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %b1, %loss : tensor<16xf32>, tensor<f32>
}
}

// -----

// Tests that the FP8 amax histories two quantizations record become one
// all_reduce max after the later recording, returned as the state; the
// shifted history the scale returns is not reduced (no rank changed it).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[S0:.*]], %{{.*}}, %[[SH0:.*]] = gpt.fp8_scale e4m3 %{{.*}} history %[[H0:[^ ]*]]
// CHECK: %{{.*}}, %{{.*}}, %[[R0:.*]] = gpt.fp8_cast_transpose e4m3 %{{.*}}, %[[S0]] history %[[SH0]]
// CHECK-NOT: gpt.all_reduce max
// CHECK: %[[S1:.*]], %{{.*}}, %[[SH1:.*]] = gpt.fp8_scale e5m2
// CHECK: %{{.*}}, %[[R1:.*]] = gpt.fp8_quantize e5m2 %{{.*}}, %[[S1]] history %[[SH1]]
// CHECK-NEXT: %[[M:.*]]:2 = gpt.all_reduce max %[[R0]], %[[R1]] {bucket = 1 : i64, bytes = 32 : i64, world_size = 4 : i64} : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %[[SH2:.*]] = gpt.fp8_scale e4m3
// CHECK: return %{{.*}}, %[[M]]#0, %[[M]]#1, %[[SH2]], %{{.*}} :
func.func @train_step(%b: tensor<16xf32> {gpt.param = "b"}, %mb: tensor<16xf32> {gpt.state = "b.adam_m"},
                      %vb: tensor<16xf32> {gpt.state = "b.adam_v"},
                      %h0: tensor<4xf32> {gpt.state = "fp8.amax_history.0"},
                      %h1: tensor<4xf32> {gpt.state = "fp8.amax_history.1"},
                      %h2: tensor<4xf32> {gpt.state = "fp8.amax_history.2"},
                      %x: tensor<8x16xbf16> {gpt.input = "x"}, %step: tensor<i32> {gpt.input = "step"})
    -> (tensor<16xf32> {gpt.param = "b"}, tensor<4xf32> {gpt.state = "fp8.amax_history.0"},
        tensor<4xf32> {gpt.state = "fp8.amax_history.1"}, tensor<4xf32> {gpt.state = "fp8.amax_history.2"},
        tensor<f32> {gpt.output = "loss"}) {
  %s0, %i0, %sh0 = gpt.fp8_scale e4m3 %x history %h0 : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q0, %qt0, %r0 = gpt.fp8_cast_transpose e4m3 %x, %s0 history %sh0
      : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %loss = gpt.global_norm %b : (tensor<16xf32>) -> tensor<f32>
  %s1, %i1, %sh1 = gpt.fp8_scale e5m2 %x history %h1 : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q1, %r1 = gpt.fp8_quantize e5m2 %x, %s1 history %sh1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E5M2>, tensor<4xf32>)
  %s2, %i2, %sh2 = gpt.fp8_scale e4m3 %b history %h2 : (tensor<16xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %gb = gpt.neg %b : tensor<16xf32>
  %b1, %mb1, %vb1 = gpt.adamw %b, %gb, %mb, %vb, %loss, %step, %loss
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %b1, %r0, %r1, %sh2, %loss : tensor<16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// Tests that a gradient the backward wrote narrow (bf16) and widened after
// the whole backward is reduced before its cast: the bucket is issued
// right after the product that made it, not after the cast, and the cast
// (which gpt-fuse-adamw's narrow-grads may drop) reads the reduced value.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.*]] = gpt.exp %{{.*}} : tensor<64x16xbf16>
// CHECK-NEXT: %[[R:.*]] = gpt.all_reduce mean %[[P]] {bucket = 0 : i64, bytes = 2048 : i64
// CHECK-NEXT: gpt.neg
// CHECK-NEXT: %[[W:.*]] = gpt.cast %[[R]] : tensor<64x16xbf16> to tensor<64x16xf32>
// CHECK-NEXT: gpt.global_norm %[[W]]
func.func @train_step(%w: tensor<64x16xf32> {gpt.param = "w"},
                      %mw: tensor<64x16xf32> {gpt.state = "w.adam_m"},
                           %vw: tensor<64x16xf32> {gpt.state = "w.adam_v"},
                           %x: tensor<64x16xbf16> {gpt.input = "tokens"}, %step: tensor<i32> {gpt.input = "step"},
                           %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<64x16xf32> {gpt.param = "w"}) {
  %p = gpt.exp %x : tensor<64x16xbf16>
  %later = gpt.neg %x : tensor<64x16xbf16>
  %gw = gpt.cast %p : tensor<64x16xbf16> to tensor<64x16xf32>
  %norm = gpt.global_norm %gw : (tensor<64x16xf32>) -> tensor<f32>
  %w1, %mw1, %vw1 = gpt.adamw %w, %gw, %mw, %vw, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<64x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1 : tensor<64x16xf32>
}
