// RUN: gpt-opt %s --split-input-file --gpt-autodiff --gpt-insert-optimizer="accum-steps=2 grad-clip=2.0 schedule=cosine lr=6.0e-4 min-lr=6.0e-5 warmup-steps=10 total-steps=100 beta1=0.875 beta2=0.9375 epsilon=0.001953125 weight-decay=0.0625 no-decay=wpe" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-autodiff --gpt-insert-optimizer="accum-steps=2 grad-clip=0" | FileCheck %s --check-prefix=NOCLIP
// RUN: gpt-opt %s --split-input-file --gpt-autodiff --gpt-insert-optimizer | FileCheck %s --check-prefix=DEFAULT
// RUN: gpt-opt %s --split-input-file --gpt-autodiff --gpt-insert-optimizer="schedule=linear lr=1.0e-3 min-lr=1.0e-4 warmup-steps=5 total-steps=50" | FileCheck %s --check-prefix=LINEAR
// RUN: gpt-opt %s --split-input-file --gpt-autodiff=loss-scale=256 --gpt-insert-optimizer="loss-scale=256" | FileCheck %s --check-prefix=LS

// Every case differentiates the same tiny model (token + position
// embedding, tied LM head, output bias). Every RUN line sees every case, so
// the cases checked by the NOCLIP, DEFAULT and LINEAR runs name their
// parameters uniquely and their labels match on those names.

// Tests that @train_step takes the parameters, their AdamW moments (m for
// every parameter, then v), (accum_steps, B, T) tokens and targets and the
// step, and returns new parameters and moments under the same names followed
// by the loss, the gradient norm and the learning rate.

// The gradient function is the step's callee now, private, so the
// inliner drops it; the step is marked a train step.
// LS: func.func private @forward_grad(
// With a loss scale the norm and the update factor divide it out.
// LS-LABEL: func.func @train_step
// LS: %[[N:.*]] = gpt.global_norm
// LS-NEXT: %[[NS:.*]] = gpt.scale %[[N]] {factor = 3.906250e-03 : f64}
// LS: %[[F:.*]] = gpt.div
// LS-NEXT: gpt.scale %[[F]] {factor = 3.906250e-03 : f64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{[^:]*}}: tensor<8x4xf32> {gpt.param = "wte"}, %{{[^:]*}}: tensor<3x4xf32> {gpt.param = "wpe"}, %{{[^:]*}}: tensor<8xf32> {gpt.param = "b"},
// CHECK-SAME: %{{[^:]*}}: tensor<8x4xf32> {gpt.state = "wte.adam_m"}, %{{[^:]*}}: tensor<3x4xf32> {gpt.state = "wpe.adam_m"}, %{{[^:]*}}: tensor<8xf32> {gpt.state = "b.adam_m"},
// CHECK-SAME: %{{[^:]*}}: tensor<8x4xf32> {gpt.state = "wte.adam_v"}, %{{[^:]*}}: tensor<3x4xf32> {gpt.state = "wpe.adam_v"}, %{{[^:]*}}: tensor<8xf32> {gpt.state = "b.adam_v"},
// CHECK-SAME: %{{[^:]*}}: tensor<2x2x3xi32> {gpt.input = "tokens"}, %{{[^:]*}}: tensor<2x2x3xi32> {gpt.input = "targets"}, %{{[^:]*}}: tensor<i32> {gpt.input = "step"}, %{{[^:]*}}: tensor<f32> {gpt.input = "lr_scale"})
// CHECK-SAME: -> (tensor<8x4xf32> {gpt.param = "wte"}, tensor<3x4xf32> {gpt.param = "wpe"}, tensor<8xf32> {gpt.param = "b"},
// CHECK-SAME: tensor<8x4xf32> {gpt.state = "wte.adam_m"}, tensor<3x4xf32> {gpt.state = "wpe.adam_m"}, tensor<8xf32> {gpt.state = "b.adam_m"},
// CHECK-SAME: tensor<8x4xf32> {gpt.state = "wte.adam_v"}, tensor<3x4xf32> {gpt.state = "wpe.adam_v"}, tensor<8xf32> {gpt.state = "b.adam_v"},
// CHECK-SAME: tensor<f32> {gpt.output = "loss"}, tensor<f32> {gpt.output = "grad_norm"}, tensor<f32> {gpt.output = "lr"})
// CHECK-SAME: attributes {gpt.train_step}
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that with accum-steps=2 each micro-batch's tokens and targets are
// sliced out of dimension 0 and reshaped to (B, T), @forward_grad is called
// once per micro-batch with its arguments in @forward's order, and losses
// and gradients are summed (each add marked with its micro-batch), the loss
// being divided by the step count.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[WTE:[^:]*]]: tensor<8x4xf32> {gpt.param = "wte"}, %[[WPE:[^:]*]]: tensor<3x4xf32> {gpt.param = "wpe"}, %[[B:[^:]*]]: tensor<8xf32> {gpt.param = "b"},
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<2x2x3xi32> {gpt.input = "tokens"}, %[[TGT:[^:]*]]: tensor<2x2x3xi32> {gpt.input = "targets"}
// CHECK: %[[TOK0:.*]] = gpt.slice %[[TOK]] {dim = 0 : i64, size = 1 : i64, start = 0 : i64} : (tensor<2x2x3xi32>) -> tensor<1x2x3xi32>
// CHECK-NEXT: %[[TOK0R:.*]] = gpt.reshape %[[TOK0]] : tensor<1x2x3xi32> to tensor<2x3xi32>
// CHECK-NEXT: %[[TGT0:.*]] = gpt.slice %[[TGT]] {dim = 0 : i64, size = 1 : i64, start = 0 : i64}
// CHECK-NEXT: %[[TGT0R:.*]] = gpt.reshape %[[TGT0]] : tensor<1x2x3xi32> to tensor<2x3xi32>
// CHECK-NEXT: %[[G0:.*]]:4 = call @forward_grad(%[[WTE]], %[[TOK0R]], %[[WPE]], %[[B]], %[[TGT0R]])
// CHECK-NEXT: %[[TOK1:.*]] = gpt.slice %[[TOK]] {dim = 0 : i64, size = 1 : i64, start = 1 : i64}
// CHECK-NEXT: %[[TOK1R:.*]] = gpt.reshape %[[TOK1]]
// CHECK-NEXT: %[[TGT1:.*]] = gpt.slice %[[TGT]] {dim = 0 : i64, size = 1 : i64, start = 1 : i64}
// CHECK-NEXT: %[[TGT1R:.*]] = gpt.reshape %[[TGT1]]
// CHECK-NEXT: %[[G1:.*]]:4 = call @forward_grad(%[[WTE]], %[[TOK1R]], %[[WPE]], %[[B]], %[[TGT1R]])
// CHECK-NEXT: %[[LSUM:.*]] = gpt.add %[[G0]]#0, %[[G1]]#0 {gpt.micro_batch = 1 : i64} : tensor<f32>
// CHECK-NEXT: gpt.add %[[G0]]#1, %[[G1]]#1 {gpt.micro_batch = 1 : i64} : tensor<8x4xf32>
// CHECK-NEXT: gpt.add %[[G0]]#2, %[[G1]]#2 {gpt.micro_batch = 1 : i64} : tensor<3x4xf32>
// CHECK-NEXT: gpt.add %[[G0]]#3, %[[G1]]#3 {gpt.micro_batch = 1 : i64} : tensor<8xf32>
// CHECK-NEXT: %[[LOSS:.*]] = gpt.scale %[[LSUM]] {factor = 5.000000e-01 : f64} : tensor<f32>
// CHECK-NOT: call @forward_grad
// CHECK: return {{.*}}, %[[LOSS]], %{{[^,]*}}, %{{[^,]*}} : tensor<8x4xf32>
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that grad_norm is the global norm of the summed gradients divided by
// the number of micro-batches, i.e. the norm of the mean gradient.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[GW:.*]] = gpt.add %{{.*}}#1, %{{.*}}#1 {gpt.micro_batch = 1 : i64} : tensor<8x4xf32>
// CHECK-NEXT: %[[GP:.*]] = gpt.add %{{.*}}#2, %{{.*}}#2 {gpt.micro_batch = 1 : i64} : tensor<3x4xf32>
// CHECK-NEXT: %[[GB:.*]] = gpt.add %{{.*}}#3, %{{.*}}#3 {gpt.micro_batch = 1 : i64} : tensor<8xf32>
// CHECK: %[[SUMNORM:.*]] = gpt.global_norm %[[GW]], %[[GP]], %[[GB]] : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = gpt.scale %[[SUMNORM]] {factor = 5.000000e-01 : f64} : tensor<f32>
// CHECK: return {{.*}}, %[[NORM]], %{{[^,]*}} : tensor<8x4xf32>
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that with grad-clip > 0 the gradient scale handed to every AdamW
// update is clip / max(norm, clip) divided by the number of micro-batches.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[SUMNORM:.*]] = gpt.global_norm
// CHECK-NEXT: %[[NORM:.*]] = gpt.scale %[[SUMNORM]] {factor = 5.000000e-01 : f64} : tensor<f32>
// CHECK-NEXT: %[[CLIP:.*]] = gpt.constant 2.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = gpt.max %[[NORM]], %[[CLIP]] : tensor<f32>
// CHECK-NEXT: %[[F:.*]] = gpt.div %[[CLIP]], %[[M]] : tensor<f32>
// CHECK-NEXT: %[[SCALE:.*]] = gpt.scale %[[F]] {factor = 5.000000e-01 : f64} : tensor<f32>
// CHECK: gpt.adamw {{.*}}, %[[SCALE]] {
// CHECK-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {
// CHECK-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the learning rate is one gpt.lr_schedule of the step with the
// chosen kind and attributes, scaled by the lr_scale input, shared by every
// AdamW update and returned last.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i32> {gpt.input = "step"}, %[[LRSCALE:[^:]*]]: tensor<f32> {gpt.input = "lr_scale"})
// CHECK: %[[SCHED:.*]] = gpt.lr_schedule cosine %[[STEP]] {max_lr = 6.000000e-04 : f64, min_lr = 6.000000e-05 : f64, total_steps = 100 : i64, warmup_steps = 10 : i64} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT: %[[LR:.*]] = gpt.mul %[[SCHED]], %[[LRSCALE]] : tensor<f32>
// CHECK-NEXT: gpt.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]], %{{[^ ]*}} {
// CHECK-NEXT: gpt.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]], %{{[^ ]*}} {
// CHECK-NEXT: gpt.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]], %{{[^ ]*}} {
// CHECK-NOT: gpt.lr_schedule
// CHECK: return {{.*}}, %[[LR]] : tensor<8x4xf32>
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that each parameter gets one gpt.adamw of its summed gradient and
// moments with the chosen hyperparameters; weight decay applies to the
// rank-2 wte only, not to wpe (listed in no-decay) nor to the rank-1 bias;
// the updates are returned as parameters, then m, then v.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[WTE:[^:]*]]: tensor<8x4xf32> {gpt.param = "wte"}, %[[WPE:[^:]*]]: tensor<3x4xf32> {gpt.param = "wpe"}, %[[B:[^:]*]]: tensor<8xf32> {gpt.param = "b"},
// CHECK-SAME: %[[MW:[^:]*]]: tensor<8x4xf32> {gpt.state = "wte.adam_m"}, %[[MP:[^:]*]]: tensor<3x4xf32> {gpt.state = "wpe.adam_m"}, %[[MB:[^:]*]]: tensor<8xf32> {gpt.state = "b.adam_m"},
// CHECK-SAME: %[[VW:[^:]*]]: tensor<8x4xf32> {gpt.state = "wte.adam_v"}, %[[VP:[^:]*]]: tensor<3x4xf32> {gpt.state = "wpe.adam_v"}, %[[VB:[^:]*]]: tensor<8xf32> {gpt.state = "b.adam_v"},
// CHECK: %[[GW:.*]] = gpt.add %{{.*}}#1, %{{.*}}#1 {gpt.micro_batch = 1 : i64} : tensor<8x4xf32>
// CHECK-NEXT: %[[GP:.*]] = gpt.add %{{.*}}#2, %{{.*}}#2 {gpt.micro_batch = 1 : i64} : tensor<3x4xf32>
// CHECK-NEXT: %[[GB:.*]] = gpt.add %{{.*}}#3, %{{.*}}#3 {gpt.micro_batch = 1 : i64} : tensor<8xf32>
// CHECK: %[[PW:.*]], %[[MW1:.*]], %[[VW1:.*]] = gpt.adamw %[[WTE]], %[[GW]], %[[MW]], %[[VW]], %{{.*}} {beta1 = 8.750000e-01 : f64, beta2 = 9.375000e-01 : f64, epsilon = 0.001953125 : f64, weight_decay = 6.250000e-02 : f64} : tensor<8x4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
// CHECK-NEXT: %[[PP:.*]], %[[MP1:.*]], %[[VP1:.*]] = gpt.adamw %[[WPE]], %[[GP]], %[[MP]], %[[VP]], %{{.*}} {beta1 = 8.750000e-01 : f64, beta2 = 9.375000e-01 : f64, epsilon = 0.001953125 : f64, weight_decay = 0.000000e+00 : f64} : tensor<3x4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
// CHECK-NEXT: %[[PB:.*]], %[[MB1:.*]], %[[VB1:.*]] = gpt.adamw %[[B]], %[[GB]], %[[MB]], %[[VB]], %{{.*}} {beta1 = 8.750000e-01 : f64, beta2 = 9.375000e-01 : f64, epsilon = 0.001953125 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8xf32>, tensor<f32>, tensor<i32>, tensor<f32>
// CHECK-NEXT: return %[[PW]], %[[PP]], %[[PB]], %[[MW1]], %[[MP1]], %[[MB1]], %[[VW1]], %[[VP1]], %[[VB1]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} :
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %tokens: tensor<2x3xi32> {gpt.input = "tokens"},
                   %wpe: tensor<3x4xf32> {gpt.param = "wpe"}, %b: tensor<8xf32> {gpt.param = "b"},
                   %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %h = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %logits = gpt.bias_add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that with grad-clip=0 there is no clipping: the gradient scale is
// just the constant 1 / accum_steps.

// NOCLIP-LABEL: func.func @train_step(%{{[^:]*}}: tensor<8x4xf32> {gpt.param = "noclip.wte"}
// NOCLIP-NOT: gpt.max
// NOCLIP: %[[SUMNORM:.*]] = gpt.global_norm
// NOCLIP-NEXT: %[[NORM:.*]] = gpt.scale %[[SUMNORM]] {factor = 5.000000e-01 : f64} : tensor<f32>
// NOCLIP-NEXT: %[[SCALE:.*]] = gpt.constant 5.000000e-01 : tensor<f32>
// NOCLIP-NEXT: gpt.lr_schedule
// NOCLIP-NEXT: %[[LR:.*]] = gpt.mul
// NOCLIP-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {
// NOCLIP-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {
// NOCLIP-NEXT: return {{.*}}, %[[NORM]], %[[LR]] :
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "noclip.wte"}, %wpe: tensor<3x4xf32> {gpt.param = "noclip.wpe"},
                   %tokens: tensor<2x3xi32> {gpt.input = "tokens"}, %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that by default (accum-steps=1) there is a single micro-batch whose
// loss is returned as is, and the gradient norm is not rescaled.

// DEFAULT-LABEL: func.func @train_step(%{{[^:]*}}: tensor<8x4xf32> {gpt.param = "single.wte"}
// DEFAULT-SAME: %{{[^:]*}}: tensor<1x2x3xi32> {gpt.input = "tokens"}, %{{[^:]*}}: tensor<1x2x3xi32> {gpt.input = "targets"}
// DEFAULT: %[[G:.*]]:3 = call @forward_grad
// DEFAULT-NEXT: %[[NORM:.*]] = gpt.global_norm %[[G]]#1, %[[G]]#2 : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<f32>
// DEFAULT-NOT: call @forward_grad
// DEFAULT: return {{.*}}, %[[G]]#0, %[[NORM]], %{{[^,]*}} :
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "single.wte"}, %wpe: tensor<3x4xf32> {gpt.param = "single.wpe"},
                   %tokens: tensor<2x3xi32> {gpt.input = "tokens"}, %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the default hyperparameters are clipping at 1, a constant
// 3e-4 schedule and AdamW with betas (0.9, 0.95), epsilon 1e-8 and weight
// decay 0.1 for every rank-2 parameter.

// DEFAULT-LABEL: func.func @train_step(%{{[^:]*}}: tensor<8x4xf32> {gpt.param = "defaults.wte"}
// DEFAULT: %[[NORM:.*]] = gpt.global_norm
// DEFAULT-NEXT: %[[CLIP:.*]] = gpt.constant 1.000000e+00 : tensor<f32>
// DEFAULT-NEXT: %[[M:.*]] = gpt.max %[[NORM]], %[[CLIP]]
// DEFAULT-NEXT: %[[F:.*]] = gpt.div %[[CLIP]], %[[M]]
// DEFAULT-NEXT: %[[SCALE:.*]] = gpt.scale %[[F]] {factor = 1.000000e+00 : f64}
// DEFAULT-NEXT: gpt.lr_schedule constant %{{.*}} {max_lr = 3.000000e-04 : f64, min_lr = 0.000000e+00 : f64, total_steps = 0 : i64, warmup_steps = 0 : i64}
// DEFAULT-NEXT: gpt.mul
// DEFAULT-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<8x4xf32>,
// DEFAULT-NEXT: gpt.adamw {{.*}}, %[[SCALE]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3x4xf32>,
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "defaults.wte"}, %wpe: tensor<3x4xf32> {gpt.param = "defaults.wpe"},
                   %tokens: tensor<2x3xi32> {gpt.input = "tokens"}, %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that schedule=linear gives a linear gpt.lr_schedule with the chosen
// peak, final rate and step counts.

// LINEAR-LABEL: func.func @train_step(%{{[^:]*}}: tensor<8x4xf32> {gpt.param = "linear.wte"}
// LINEAR-SAME: %[[STEP:[^:]*]]: tensor<i32> {gpt.input = "step"}, %{{[^:]*}}: tensor<f32> {gpt.input = "lr_scale"})
// LINEAR: gpt.lr_schedule linear %[[STEP]] {max_lr = 1.000000e-03 : f64, min_lr = 1.000000e-04 : f64, total_steps = 50 : i64, warmup_steps = 5 : i64} : (tensor<i32>) -> tensor<f32>
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "linear.wte"}, %wpe: tensor<3x4xf32> {gpt.param = "linear.wpe"},
                   %tokens: tensor<2x3xi32> {gpt.input = "tokens"}, %targets: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %tokens : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %loss = gpt.cross_entropy %logits, %targets {vocab_size = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
