// RUN: gpt-opt %s --split-input-file --gpt-fuse-adamw | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-fuse-adamw=narrow-grads=false | FileCheck %s --check-prefix=WIDE

// Tests that every gpt.adamw of a step becomes one gpt.adamw_multi that
// keeps the shared lr, step and clipping scale operands, the betas and
// epsilon, each parameter's weight decay, and where each result goes.

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[W:[^:]*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[E:[^:]*]]: tensor<8x4xf32>, %[[G0:[^:]*]]: tensor<4x4xf32>, %[[G1:[^:]*]]: tensor<4xf32>, %[[G2:[^:]*]]: tensor<8x4xf32>, %[[M0:[^:]*]]: tensor<4x4xf32>, %[[M1:[^:]*]]: tensor<4xf32>, %[[M2:[^:]*]]: tensor<8x4xf32>, %[[V0:[^:]*]]: tensor<4x4xf32>, %[[V1:[^:]*]]: tensor<4xf32>, %[[V2:[^:]*]]: tensor<8x4xf32>, %[[STEP:[^:]*]]: tensor<i32>, %[[NORM:[^:]*]]: tensor<f32>)
// CHECK: %[[LR:.*]] = gpt.lr_schedule
// CHECK: %[[SCALE:.*]] = gpt.div
// CHECK-NOT: gpt.adamw {{.*}}
// CHECK: %[[NP:[^:]*]]:3, %[[NM:[^:]*]]:3, %[[NV:[^:]*]]:3 = gpt.adamw_multi (%[[W]], %[[B]], %[[E]]), (%[[G0]], %[[G1]], %[[G2]]), (%[[M0]], %[[M1]], %[[M2]]), (%[[V0]], %[[V1]], %[[V2]]), %[[LR]], %[[STEP]], %[[SCALE]] {beta1 = {{.*}} : f64, beta2 = {{.*}} : f64, epsilon = {{.*}} : f64, weight_decays = array<f64: 1.000000e-01, 0.000000e+00, 1.000000e-01>} : (tensor<4x4xf32>, tensor<4xf32>, tensor<8x4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
// CHECK-NOT: gpt.adamw {{.*}}
// CHECK: return %[[NP]]#0, %[[NP]]#1, %[[NP]]#2, %[[NM]]#0, %[[NM]]#1, %[[NM]]#2, %[[NV]]#0, %[[NV]]#1, %[[NV]]#2
func.func @f(%w: tensor<4x4xf32>, %b: tensor<4xf32>, %e: tensor<8x4xf32>,
             %g0: tensor<4x4xf32>, %g1: tensor<4xf32>, %g2: tensor<8x4xf32>,
             %m0: tensor<4x4xf32>, %m1: tensor<4xf32>, %m2: tensor<8x4xf32>,
             %v0: tensor<4x4xf32>, %v1: tensor<4xf32>, %v2: tensor<8x4xf32>,
             %step: tensor<i32>, %norm: tensor<f32>)
    -> (tensor<4x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>,
        tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<8x4xf32>) {
  %lr = gpt.lr_schedule cosine %step {max_lr = 6.0e-04 : f64, min_lr = 6.0e-05 : f64,
                                      warmup_steps = 10 : i64, total_steps = 100 : i64}
      : (tensor<i32>) -> tensor<f32>
  %clip = gpt.constant 1.0 : tensor<f32>
  %mx = gpt.max %norm, %clip : tensor<f32>
  %scale = gpt.div %clip, %mx : tensor<f32>
  %w1, %mw, %vw = gpt.adamw %w, %g0, %m0, %v0, %lr, %step, %scale
      {beta1 = 0.8 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-06 : f64, weight_decay = 0.1 : f64}
      : tensor<4x4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb, %vb = gpt.adamw %b, %g1, %m1, %v1, %lr, %step, %scale
      {beta1 = 0.8 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-06 : f64, weight_decay = 0.0 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %e1, %me, %ve = gpt.adamw %e, %g2, %m2, %v2, %lr, %step, %scale
      {beta1 = 0.8 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-06 : f64, weight_decay = 0.1 : f64}
      : tensor<8x4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1, %e1, %mw, %mb, %me, %vw, %vb, %ve
      : tensor<4x4xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>,
        tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<8x4xf32>
}

// -----

// Tests that a function with one gpt.adamw keeps it: there is nothing to merge.

// CHECK-LABEL: func.func @f
// CHECK: gpt.adamw %{{.*}} {{{.*}}weight_decay = 1.000000e-01 : f64}
// CHECK-NOT: gpt.adamw_multi
func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>,
             %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p1, %m1, %v1 = gpt.adamw %p, %g, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %p1, %m1, %v1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that updates with different learning rates are not merged with
// each other: each group of equal lr, step and scale becomes its own op.

// CHECK-LABEL: func.func @f
// CHECK: gpt.adamw_multi (%[[P0:[^,]*]], %[[P2:[^)]*]]), {{.*}}, %[[LR0:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} {
// CHECK: gpt.adamw_multi (%[[P1:[^,]*]], %[[P3:[^)]*]]), {{.*}}, %[[LR1:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} {
func.func @f(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %p2: tensor<4xf32>, %p3: tensor<4xf32>,
             %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>,
             %lr0: tensor<f32>, %lr1: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a0, %a1, %a2 = gpt.adamw %p0, %g, %m, %v, %lr0, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b0, %b1, %b2 = gpt.adamw %p1, %g, %m, %v, %lr1, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %c0, %c1, %c2 = gpt.adamw %p2, %g, %m, %v, %lr0, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %d0, %d1, %d2 = gpt.adamw %p3, %g, %m, %v, %lr1, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %a0, %b0, %c0, %d0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a gpt.adamw whose result an op between the updates reads is
// not moved past that reader.

// CHECK-LABEL: func.func @f
// CHECK: gpt.adamw %
// CHECK: gpt.neg
// CHECK: gpt.adamw %
// CHECK-NOT: gpt.adamw_multi
func.func @f(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>,
             %v: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %a0, %a1, %a2 = gpt.adamw %p0, %g, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %n = gpt.neg %a0 : tensor<4xf32>
  %b0, %b1, %b2 = gpt.adamw %p1, %n, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %a0, %b0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that gradients reaching their updates through widening casts are
// read narrow (narrow-grads): the update and the gradient norm read the
// bf16 tensors and the casts are gone. With narrow-grads=false they stay.

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[W:[^:]*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[G0:[^:]*]]: tensor<4x4xbf16>, %[[G1:[^:]*]]: tensor<4xbf16>
// CHECK-NOT: gpt.cast
// CHECK: %[[NORM:.*]] = gpt.global_norm %[[G0]], %[[G1]] : (tensor<4x4xbf16>, tensor<4xbf16>) -> tensor<f32>
// CHECK-NOT: gpt.cast
// CHECK: gpt.adamw_multi (%[[W]], %[[B]]), (%[[G0]], %[[G1]]), {{.*}} : (tensor<4x4xf32>, tensor<4xf32>) grads (tensor<4x4xbf16>, tensor<4xbf16>), tensor<f32>, tensor<i32>, tensor<f32>
// Anchored on this split's signature: every split's function is @f.
// WIDE: func.func @f(%{{[^:]*}}: tensor<4x4xf32>, %{{[^:]*}}: tensor<4xf32>, %{{[^:]*}}: tensor<4x4xbf16>
// WIDE: %[[C0:.*]] = gpt.cast
// WIDE: %[[C1:.*]] = gpt.cast
// WIDE: gpt.global_norm %[[C0]], %[[C1]] : (tensor<4x4xf32>, tensor<4xf32>)
// WIDE: gpt.adamw_multi (%{{[^,]*}}, %{{[^)]*}}), (%[[C0]], %[[C1]]), {{.*}} : (tensor<4x4xf32>, tensor<4xf32>), tensor<f32>
func.func @f(%w: tensor<4x4xf32>, %b: tensor<4xf32>, %g0: tensor<4x4xbf16>, %g1: tensor<4xbf16>,
             %m0: tensor<4x4xf32>, %m1: tensor<4xf32>, %v0: tensor<4x4xf32>, %v1: tensor<4xf32>,
             %lr: tensor<f32>, %step: tensor<i32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %c0 = gpt.cast %g0 : tensor<4x4xbf16> to tensor<4x4xf32>
  %c1 = gpt.cast %g1 : tensor<4xbf16> to tensor<4xf32>
  %norm = gpt.global_norm %c0, %c1 : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %clip = gpt.constant 1.0 : tensor<f32>
  %mx = gpt.max %norm, %clip : tensor<f32>
  %scale = gpt.div %clip, %mx : tensor<f32>
  %w1, %mw, %vw = gpt.adamw %w, %c0, %m0, %v0, %lr, %step, %scale
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4x4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb, %vb = gpt.adamw %b, %c1, %m1, %v1, %lr, %step, %scale
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1 : tensor<4x4xf32>, tensor<4xf32>
}

// -----

// Tests that a widening cast with another reader than the update and the
// gradient norm stays, and its update reads it; an f32 gradient with no
// cast is read as it is.

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[W:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[G0:[^:]*]]: tensor<4xbf16>, %[[G1:[^:]*]]: tensor<4xf32>
// CHECK: %[[C0:.*]] = gpt.cast %[[G0]]
// CHECK: gpt.adamw_multi (%[[W]], %[[B]]), (%[[C0]], %[[G1]]), {{.*}} : (tensor<4xf32>, tensor<4xf32>), tensor<f32>
// CHECK: return {{.*}}, %[[C0]]
func.func @f(%w: tensor<4xf32>, %b: tensor<4xf32>, %g0: tensor<4xbf16>, %g1: tensor<4xf32>,
             %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>,
             %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c0 = gpt.cast %g0 : tensor<4xbf16> to tensor<4xf32>
  %w1, %mw, %vw = gpt.adamw %w, %c0, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb, %vb = gpt.adamw %b, %g1, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1, %c0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
