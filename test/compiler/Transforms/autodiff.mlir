// RUN: gpt-opt %s --split-input-file --gpt-autodiff | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-autodiff=loss-scale=256 | FileCheck %s --check-prefix=SCALE

// Tests that the embedding rule scatters the incoming gradient into wte and
// wpe with gpt.embed_grad, sized by the two tables' rows.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[WTE:.*]]: tensor<8x4xf32> {gpt.param = "wte"}, %[[WPE:.*]]: tensor<6x4xf32> {gpt.param = "wpe"}, %[[IDS:.*]]: tensor<2x3xi32> {gpt.input = "tokens"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<8x4xf32> {gpt.grad_of = "wte"}, tensor<6x4xf32> {gpt.grad_of = "wpe"})
// CHECK: %[[X:.*]] = gpt.embed %[[WTE]], %[[WPE]], %[[IDS]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[X]], %[[T]]
// CHECK: %[[DX:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[X]], %[[T]]
// CHECK-NEXT: %[[DWTE:.*]], %[[DWPE:.*]] = gpt.embed_grad %[[DX]], %[[IDS]] {position_rows = 6 : i64, vocab_rows = 8 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> (tensor<8x4xf32>, tensor<6x4xf32>)
// CHECK-NEXT: return %[[LOSS]], %[[DWTE]], %[[DWPE]] : tensor<f32>, tensor<8x4xf32>, tensor<6x4xf32>
// With loss-scale, the backward starts from the scale instead of 1.
// SCALE-LABEL: func.func @forward_grad
// SCALE: %[[SEED:.*]] = gpt.constant 2.560000e+02 : tensor<f32>
// SCALE-NEXT: gpt.cross_entropy_grad %[[SEED]],
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %wpe: tensor<6x4xf32> {gpt.param = "wpe"},
                   %ids: tensor<2x3xi32> {gpt.input = "tokens"}, %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %ids : (tensor<8x4xf32>, tensor<6x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %loss = gpt.cross_entropy %x, %t {vocab_size = 4 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that an embedding with a bf16 result (fp32 tables) gets fp32 table
// gradients from its bf16 incoming gradient.

// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[DX:.*]] = gpt.cross_entropy_grad
// CHECK-NEXT: gpt.embed_grad %[[DX]], %{{.*}} {position_rows = 6 : i64, vocab_rows = 8 : i64} : (tensor<2x3x4xbf16>, tensor<2x3xi32>) -> (tensor<8x4xf32>, tensor<6x4xf32>)
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %wpe: tensor<6x4xf32> {gpt.param = "wpe"},
                   %ids: tensor<2x3xi32> {gpt.input = "tokens"}, %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %ids : (tensor<8x4xf32>, tensor<6x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xbf16>
  %loss = gpt.cross_entropy %x, %t {vocab_size = 4 : i64} : (tensor<2x3x4xbf16>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the layernorm rule is one gpt.layernorm_grad from the saved
// input and weight, keeping epsilon, whose weight and bias results are the
// parameter gradients.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.input = "x"}, %[[W:.*]]: tensor<4xf32> {gpt.param = "w"}, %[[B:.*]]: tensor<4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<4xf32> {gpt.grad_of = "w"}, tensor<4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.layernorm %[[X]], %[[W]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = gpt.layernorm_grad %[[DY]], %[[X]], %[[W]] {epsilon = 1.000000e-03 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: return %[[LOSS]], %[[DW]], %[[DB]] : tensor<f32>, tensor<4xf32>, tensor<4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.input = "x"}, %w: tensor<4xf32> {gpt.param = "w"},
                   %b: tensor<4xf32> {gpt.param = "b"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.layernorm %x, %w, %b {epsilon = 1.0e-03 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the linear rule with a bias flattens the batch into rows:
// dx = dy W (reshaped back), dW = dy^T x over all rows, db = sum of dy over
// the leading dimensions.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {gpt.param = "x"}, %[[W:.*]]: tensor<5x4xf32> {gpt.param = "w"}, %[[B:.*]]: tensor<5xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "x"}, tensor<5x4xf32> {gpt.grad_of = "w"}, tensor<5xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DY2:.*]] = gpt.reshape %[[DY]] : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK-NEXT: %[[X2:.*]] = gpt.reshape %[[X]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[DX2:.*]] = gpt.matmul %[[DY2]], %[[W]] : (tensor<6x5xf32>, tensor<5x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[DX:.*]] = gpt.reshape %[[DX2]] : tensor<6x4xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DW:.*]] = gpt.matmul %[[DY2]], %[[X2]] {transpose_lhs} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.reduce sum %[[DY]] dims [0, 1] : (tensor<2x3x5xf32>) -> tensor<5xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]], %[[DW]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>
func.func @forward(%x: tensor<2x3x4xf32> {gpt.param = "x"}, %w: tensor<5x4xf32> {gpt.param = "w"},
                   %b: tensor<5xf32> {gpt.param = "b"}, %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the linear rule without a bias on rank-2 input needs no
// reshapes and emits no bias reduction.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32> {gpt.param = "x"}, %[[W:.*]]: tensor<5x4xf32> {gpt.param = "w"}, %[[T:.*]]: tensor<3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<3x4xf32> {gpt.grad_of = "x"}, tensor<5x4xf32> {gpt.grad_of = "w"})
// CHECK: %[[Y:.*]] = gpt.linear %[[X]], %[[W]] :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.matmul %[[DY]], %[[W]] : (tensor<3x5xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[DW:.*]] = gpt.matmul %[[DY]], %[[X]] {transpose_lhs} : (tensor<3x5xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]], %[[DW]] : tensor<f32>, tensor<3x4xf32>, tensor<5x4xf32>
func.func @forward(%x: tensor<3x4xf32> {gpt.param = "x"}, %w: tensor<5x4xf32> {gpt.param = "w"},
                   %t: tensor<3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.linear %x, %w : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 5 : i64} : (tensor<3x5xf32>, tensor<3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the matmul rule for C = A B (batched, same rank) gives
// dA = dC B^T and dB = A^T dC.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4x5xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "a"}, tensor<2x4x5xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[DC]], %[[B]] {transpose_rhs} : (tensor<2x3x5xf32>, tensor<2x4x5xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.matmul %[[A]], %[[DC]] {transpose_lhs} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<2x4x5xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpt.param = "a"}, %b: tensor<2x4x5xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the matmul rule for C = A B^T (batched, same rank) gives
// dA = dC B and dB = dC^T A.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x5x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "a"}, tensor<2x5x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] {transpose_rhs} :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[DC]], %[[B]] : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.matmul %[[DC]], %[[A]] {transpose_lhs} : (tensor<2x3x5xf32>, tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<2x5x4xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpt.param = "a"}, %b: tensor<2x5x4xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the matmul rule for C = A^T B (batched, same rank) gives
// dA = B dC^T and dB = A dC.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x3xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4x5xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4x3xf32> {gpt.grad_of = "a"}, tensor<2x4x5xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] {transpose_lhs} :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[B]], %[[DC]] {transpose_rhs} : (tensor<2x4x5xf32>, tensor<2x3x5xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.matmul %[[A]], %[[DC]] : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x4x3xf32>, tensor<2x4x5xf32>
func.func @forward(%a: tensor<2x4x3xf32> {gpt.param = "a"}, %b: tensor<2x4x5xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b {transpose_lhs} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the matmul rule for C = A^T B^T (batched, same rank) gives
// dA = B^T dC^T and dB = dC^T A^T.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x3xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x5x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4x3xf32> {gpt.grad_of = "a"}, tensor<2x5x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] {transpose_lhs, transpose_rhs} :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[B]], %[[DC]] {transpose_lhs, transpose_rhs} : (tensor<2x5x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.matmul %[[DC]], %[[A]] {transpose_lhs, transpose_rhs} : (tensor<2x3x5xf32>, tensor<2x4x3xf32>) -> tensor<2x5x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x4x3xf32>, tensor<2x5x4xf32>
func.func @forward(%a: tensor<2x4x3xf32> {gpt.param = "a"}, %b: tensor<2x5x4xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<2x4x3xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that with a shared rank-2 rhs, C = A B, dA = dC B^T stays batched
// while dB = A^T dC sums over the batch by contracting the flattened rows.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<4x5xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "a"}, tensor<4x5xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[DC]], %[[B]] {transpose_rhs} : (tensor<2x3x5xf32>, tensor<4x5xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG: %[[A2:.*]] = gpt.reshape %[[A]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-DAG: %[[DC2:.*]] = gpt.reshape %[[DC]] : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK: %[[DB:.*]] = gpt.matmul %[[A2]], %[[DC2]] {transpose_lhs} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<4x5xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpt.param = "a"}, %b: tensor<4x5xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that with a shared rank-2 rhs, C = A B^T, dA = dC B stays batched
// while dB = dC^T A sums over the batch by contracting the flattened rows.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x3x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<5x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "a"}, tensor<5x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[C:.*]] = gpt.matmul %[[A]], %[[B]] {transpose_rhs} :
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[C]], %[[T]]
// CHECK: %[[DC:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[C]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.matmul %[[DC]], %[[B]] : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG: %[[DC2:.*]] = gpt.reshape %[[DC]] : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK-DAG: %[[A2:.*]] = gpt.reshape %[[A]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK: %[[DB:.*]] = gpt.matmul %[[DC2]], %[[A2]] {transpose_lhs} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<5x4xf32>
func.func @forward(%a: tensor<2x3x4xf32> {gpt.param = "a"}, %b: tensor<5x4xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.matmul %a, %b {transpose_rhs} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the bias_add rule passes the gradient through to the input and
// sums it over the leading dimensions for the bias.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {gpt.param = "x"}, %[[B:.*]]: tensor<4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "x"}, tensor<4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.bias_add %[[X]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DB:.*]] = gpt.reduce sum %[[DY]] dims [0, 1] : (tensor<2x3x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DY]], %[[DB]] : tensor<f32>, tensor<2x3x4xf32>, tensor<4xf32>
func.func @forward(%x: tensor<2x3x4xf32> {gpt.param = "x"}, %b: tensor<4xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.bias_add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the causal_attention rule is one gpt.causal_attention_grad from
// the saved packed qkv, output and log-sum-exp, keeping num_heads.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[QKV:.*]]: tensor<1x4x12xf32> {gpt.param = "qkv"}, %[[T:.*]]: tensor<1x4xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<1x4x12xf32> {gpt.grad_of = "qkv"})
// CHECK: %[[Y:.*]], %[[LSE:.*]] = gpt.causal_attention %[[QKV]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DQKV:.*]] = gpt.causal_attention_grad %[[DY]], %[[QKV]], %[[Y]], %[[LSE]] {num_heads = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x4x12xf32>, tensor<1x4x4xf32>, tensor<1x2x4xf32>) -> tensor<1x4x12xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DQKV]] : tensor<f32>, tensor<1x4x12xf32>
func.func @forward(%qkv: tensor<1x4x12xf32> {gpt.param = "qkv"}, %t: tensor<1x4xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y, %lse = gpt.causal_attention %qkv {num_heads = 2 : i64} : (tensor<1x4x12xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the loss gradient is seeded with 1 and that the cross_entropy
// rule is one gpt.cross_entropy_grad keeping vocab_size (here below the
// padded logit width).

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[L:.*]]: tensor<2x4xf32> {gpt.param = "logits"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "logits"})
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[L]], %[[T]] {vocab_size = 3 : i64}
// CHECK-NEXT: %[[SEED:.*]] = gpt.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DL:.*]] = gpt.cross_entropy_grad %[[SEED]], %[[L]], %[[T]] {vocab_size = 3 : i64} : (tensor<f32>, tensor<2x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DL]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%logits: tensor<2x4xf32> {gpt.param = "logits"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 3 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the add rule hands the incoming gradient unchanged to both
// operands.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "a"}, tensor<2x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.add %[[A]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: return %[[LOSS]], %[[DY]], %[[DY]] : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
func.func @forward(%a: tensor<2x4xf32> {gpt.param = "a"}, %b: tensor<2x4xf32> {gpt.param = "b"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.add %a, %b : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the sub rule passes the gradient to the lhs and its negation to
// the rhs.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "a"}, tensor<2x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.sub %[[A]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DB:.*]] = gpt.neg %[[DY]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DY]], %[[DB]] : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
func.func @forward(%a: tensor<2x4xf32> {gpt.param = "a"}, %b: tensor<2x4xf32> {gpt.param = "b"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.sub %a, %b : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the mul rule multiplies the gradient by the other operand:
// da = dy b, db = dy a.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "a"}, tensor<2x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.mul %[[A]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.mul %[[DY]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.mul %[[DY]], %[[A]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
func.func @forward(%a: tensor<2x4xf32> {gpt.param = "a"}, %b: tensor<2x4xf32> {gpt.param = "b"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.mul %a, %b : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the div rule for y = a / b gives da = dy / b and
// db = -(dy y) / b, reusing the saved quotient.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[A:.*]]: tensor<2x4xf32> {gpt.param = "a"}, %[[B:.*]]: tensor<2x4xf32> {gpt.param = "b"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "a"}, tensor<2x4xf32> {gpt.grad_of = "b"})
// CHECK: %[[Y:.*]] = gpt.div %[[A]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DA:.*]] = gpt.div %[[DY]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DYY:.*]] = gpt.mul %[[DY]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: %[[Q:.*]] = gpt.div %[[DYY]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DB:.*]] = gpt.neg %[[Q]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DA]], %[[DB]] : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
func.func @forward(%a: tensor<2x4xf32> {gpt.param = "a"}, %b: tensor<2x4xf32> {gpt.param = "b"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.div %a, %b : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the neg rule negates the gradient.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.neg %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.neg %[[DY]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.neg %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the exp rule multiplies the gradient by the saved output.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.exp %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.mul %[[DY]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.exp %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the log rule divides the gradient by the saved input.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.log %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.div %[[DY]], %[[X]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.log %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the tanh rule computes dy (1 - y^2) as dy - dy y^2 from the
// saved output.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.tanh %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[Y2:.*]] = gpt.mul %[[Y]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DYY2:.*]] = gpt.mul %[[DY]], %[[Y2]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = gpt.sub %[[DY]], %[[DYY2]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.tanh %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the sqrt rule computes dy / (2 y) as (0.5 dy) / y from the
// saved output.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.sqrt %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[HALF:.*]] = gpt.scale %[[DY]] {factor = 5.000000e-01 : f64} : tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = gpt.div %[[HALF]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.sqrt %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the rsqrt rule computes -dy y^3 / 2 as (-0.5 dy) (y (y y))
// from the saved output.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.rsqrt %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[Y2:.*]] = gpt.mul %[[Y]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: %[[Y3:.*]] = gpt.mul %[[Y]], %[[Y2]] : tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.scale %[[DY]] {factor = -5.000000e-01 : f64} : tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = gpt.mul %[[S]], %[[Y3]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.rsqrt %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the gelu rule is one gpt.gelu_grad from the saved input.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.gelu %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.gelu_grad %[[DY]], %[[X]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.gelu %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the softmax rule is one gpt.softmax_grad from the saved output.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.softmax %[[X]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.softmax_grad %[[DY]], %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.softmax %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the scale rule scales the gradient by the same factor.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.scale %[[X]] {factor = 1.250000e-01 : f64}
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.scale %[[DY]] {factor = 1.250000e-01 : f64} : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.scale %x {factor = 0.125 : f64} : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the cast rule casts the gradient back to the input's element
// type, so a bf16 parameter gets a bf16 gradient.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xbf16> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xbf16> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.cast %[[X]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.cast %[[DY]] : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x4xbf16>
func.func @forward(%x: tensor<2x4xbf16> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.cast %x : tensor<2x4xbf16> to tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the reshape rule reshapes the gradient back to the input shape.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<8xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.reshape %[[X]] : tensor<8xf32> to tensor<2x4xf32>
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.reshape %[[DY]] : tensor<2x4xf32> to tensor<8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<8xf32>
func.func @forward(%x: tensor<8xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.reshape %x : tensor<8xf32> to tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the transpose rule applies the inverse permutation (here of a
// 3-cycle, which is not its own inverse).

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<3x4xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x3x4xf32> {gpt.grad_of = "x"})
// CHECK: %[[Y:.*]] = gpt.transpose %[[X]] [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DX:.*]] = gpt.transpose %[[DY]] [2, 0, 1] : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DX]] : tensor<f32>, tensor<2x3x4xf32>
func.func @forward(%x: tensor<2x3x4xf32> {gpt.param = "x"}, %t: tensor<3x4xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.transpose %x [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 2 : i64} : (tensor<3x4x2xf32>, tensor<3x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a tied parameter (wte as both the token embedding and the LM
// head) gets the sum of its two contributions: the head's, reached first in
// reverse order, plus the embedding's.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[WTE:.*]]: tensor<8x4xf32> {gpt.param = "wte"}, %[[WPE:.*]]: tensor<3x4xf32> {gpt.input = "wpe"}, %[[IDS:.*]]: tensor<1x3xi32> {gpt.input = "tokens"}, %[[T:.*]]: tensor<1x3xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<8x4xf32> {gpt.grad_of = "wte"})
// CHECK: %[[X:.*]] = gpt.embed %[[WTE]], %[[WPE]], %[[IDS]]
// CHECK: %[[LOGITS:.*]] = gpt.matmul %[[X]], %[[WTE]] {transpose_rhs}
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[LOGITS]], %[[T]]
// CHECK: %[[DLOGITS:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[LOGITS]], %[[T]]
// CHECK: %[[DX:.*]] = gpt.matmul %[[DLOGITS]], %[[WTE]] : (tensor<1x3x8xf32>, tensor<8x4xf32>) -> tensor<1x3x4xf32>
// CHECK: %[[DHEAD:.*]] = gpt.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<3x8xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[DEMB:.*]], %{{.*}} = gpt.embed_grad %[[DX]], %[[IDS]]
// CHECK-NEXT: %[[DWTE:.*]] = gpt.add %[[DHEAD]], %[[DEMB]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DWTE]] : tensor<f32>, tensor<8x4xf32>
func.func @forward(%wte: tensor<8x4xf32> {gpt.param = "wte"}, %wpe: tensor<3x4xf32> {gpt.input = "wpe"},
                   %ids: tensor<1x3xi32> {gpt.input = "tokens"}, %t: tensor<1x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %x = gpt.embed %wte, %wpe, %ids : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<1x3xi32>) -> tensor<1x3x4xf32>
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<1x3x4xf32>, tensor<8x4xf32>) -> tensor<1x3x8xf32>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 8 : i64} : (tensor<1x3x8xf32>, tensor<1x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a value used twice by one op (w * w) sums both operand
// gradients.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[W:.*]]: tensor<2x4xf32> {gpt.param = "w"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK: %[[Y:.*]] = gpt.mul %[[W]], %[[W]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[G0:.*]] = gpt.mul %[[DY]], %[[W]] : tensor<2x4xf32>
// CHECK-NEXT: %[[G1:.*]] = gpt.mul %[[DY]], %[[W]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DW:.*]] = gpt.add %[[G0]], %[[G1]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%w: tensor<2x4xf32> {gpt.param = "w"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.mul %w, %w : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a parameter that does not reach the loss gets a zero gradient
// of its own type, and that an op off the path to the loss (gpt.max, which
// has no gradient rule) is kept without being differentiated.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[W:.*]]: tensor<2x4xf32> {gpt.param = "w"}, %[[U:.*]]: tensor<3xf32> {gpt.param = "unused"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<2x4xf32> {gpt.grad_of = "w"}, tensor<3xf32> {gpt.grad_of = "unused"})
// CHECK: gpt.max %[[U]], %[[U]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[W]], %[[T]]
// CHECK: %[[DW:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[W]], %[[T]]
// CHECK-NEXT: %[[ZERO:.*]] = gpt.constant 0.000000e+00 : tensor<3xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW]], %[[ZERO]] : tensor<f32>, tensor<2x4xf32>, tensor<3xf32>
func.func @forward(%w: tensor<2x4xf32> {gpt.param = "w"}, %unused: tensor<3xf32> {gpt.param = "unused"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %dead = gpt.max %unused, %unused : tensor<3xf32>
  %loss = gpt.cross_entropy %w, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that constants on the path to the loss need no gradient rule:
// nothing flows through an op without float-tensor operands.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[W:.*]]: tensor<2x4xf32> {gpt.param = "w"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK: %[[C:.*]] = gpt.constant 2.000000e+00 : tensor<2x4xf32>
// CHECK: %[[Y:.*]] = gpt.mul %[[W]], %[[C]]
// CHECK: %[[CE:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[K:.*]] = gpt.constant 1.500000e+00 : tensor<f32>
// CHECK: %[[LOSS:.*]] = gpt.add %[[CE]], %[[K]] : tensor<f32>
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad %{{.*}}, %[[Y]], %[[T]]
// CHECK-NEXT: %[[DW:.*]] = gpt.mul %[[DY]], %[[C]] : tensor<2x4xf32>
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%w: tensor<2x4xf32> {gpt.param = "w"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %c = gpt.constant 2.0 : tensor<2x4xf32>
  %y = gpt.mul %w, %c : tensor<2x4xf32>
  %ce = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  %k = gpt.constant 1.5 : tensor<f32>
  %loss = gpt.add %ce, %k : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that @forward_grad keeps @forward's argument attributes and returns
// the loss first (named gpt.output = "loss") and then one gradient per
// gpt.param argument in argument order, skipping gpt.input arguments.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[B:.*]]: tensor<4xf32> {gpt.param = "b"}, %[[X:.*]]: tensor<2x4xf32> {gpt.input = "x"}, %[[A:.*]]: tensor<2x4xf32> {gpt.param = "a"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {gpt.output = "loss"}, tensor<4xf32> {gpt.grad_of = "b"}, tensor<2x4xf32> {gpt.grad_of = "a"})
// CHECK: %[[XA:.*]] = gpt.add %[[X]], %[[A]]
// CHECK: %[[Y:.*]] = gpt.bias_add %[[XA]], %[[B]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]]
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad
// CHECK-NEXT: %[[DB:.*]] = gpt.reduce sum %[[DY]]
// CHECK-NEXT: return %[[LOSS]], %[[DB]], %[[DY]] : tensor<f32>, tensor<4xf32>, tensor<2x4xf32>
func.func @forward(%b: tensor<4xf32> {gpt.param = "b"}, %x: tensor<2x4xf32> {gpt.input = "x"},
                   %a: tensor<2x4xf32> {gpt.param = "a"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %xa = gpt.add %x, %a : tensor<2x4xf32>
  %y = gpt.bias_add %xa, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the original @forward is kept unchanged and @forward_grad is
// added right after it.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32> {gpt.param = "x"}, %[[T:.*]]: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
// CHECK-NEXT: %[[Y:.*]] = gpt.exp %[[X]] : tensor<2x4xf32>
// CHECK-NEXT: %[[LOSS:.*]] = gpt.cross_entropy %[[Y]], %[[T]] {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward_grad(
// CHECK-LABEL: func.func @after
func.func @forward(%x: tensor<2x4xf32> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.exp %x : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @after() {
  return
}

// -----

// Tests that an FP8 product's gradients are FP8 products with the incoming
// gradient as e5m2 and the forward operand it meets in its own format:
// dX = dY W (e5m2 x e4m3) and dW = dY^T X (e5m2 x e4m3).

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xbf16> {gpt.param = "x"}, %[[W:.*]]: tensor<5x4xbf16> {gpt.param = "w"}
// CHECK: %[[DY:.*]] = gpt.cross_entropy_grad
// CHECK-DAG: %[[DX:.*]] = gpt.fp8_matmul e5m2 %[[DY]], e4m3 %[[W]] : (tensor<3x5xbf16>, tensor<5x4xbf16>) -> tensor<3x4xbf16>
// CHECK-DAG: %[[DW:.*]] = gpt.fp8_matmul e5m2 %[[DY]], e4m3 %[[X]] {transpose_lhs} : (tensor<3x5xbf16>, tensor<3x4xbf16>) -> tensor<5x4xbf16>
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @forward(%x: tensor<3x4xbf16> {gpt.param = "x"}, %w: tensor<5x4xbf16> {gpt.param = "w"},
                   %t: tensor<3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs} : (tensor<3x4xbf16>, tensor<5x4xbf16>) -> tensor<3x5xbf16>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 5 : i64} : (tensor<3x5xbf16>, tensor<3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
