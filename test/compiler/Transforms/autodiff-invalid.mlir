// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-autodiff
// RUN: not gpt-opt %s --split-input-file --gpt-autodiff=loss-scale=0 2>&1 | FileCheck %s --check-prefix=SCALE
// SCALE: error: gpt-autodiff: loss-scale must be a number in (0, 3.4e38] (fp32's range), got 0
// RUN: not gpt-opt %s --split-input-file --gpt-autodiff=loss-scale=1e39 2>&1 | FileCheck %s --check-prefix=SCALEBIG
// SCALEBIG: error: gpt-autodiff: loss-scale must be a number in (0, 3.4e38] (fp32's range), got 1.000000e+39

// Tests that a module without @forward is rejected.

// expected-error @+1 {{gpt-autodiff: no function @forward to differentiate}}
module {
  func.func @other(%w: tensor<f32> {gpt.param = "w"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
}

// -----

// Tests that a declaration of @forward, without a body, is rejected.

// expected-error @+1 {{gpt-autodiff: no function @forward to differentiate}}
module {
  func.func private @forward(tensor<f32>) -> tensor<f32>
}

// -----

// Tests that @forward must have a single block.

// expected-error @+1 {{gpt-autodiff: @forward must have a single block}}
func.func @forward(%w: tensor<f32> {gpt.param = "w"}) -> tensor<f32> {
  return %w : tensor<f32>
^bb1:
  return %w : tensor<f32>
}

// -----

// Tests that a loss that is not a scalar is rejected.

// expected-error @+1 {{gpt-autodiff: @forward must return one scalar float loss}}
func.func @forward(%w: tensor<2x4xf32> {gpt.param = "w"}) -> tensor<2x4xf32> {
  %y = gpt.exp %w : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a loss that is not a tensor is rejected rather than crashing
// the pass.

// expected-error @+1 {{gpt-autodiff: @forward must return one scalar float loss}}
func.func @forward(%w: f32 {gpt.param = "w"}) -> f32 {
  return %w : f32
}

// -----

// Tests that an integer scalar loss is rejected.

// expected-error @+1 {{gpt-autodiff: @forward must return one scalar float loss}}
func.func @forward(%t: tensor<i32> {gpt.input = "t"}) -> tensor<i32> {
  return %t : tensor<i32>
}

// -----

// Tests that a function with two results is rejected.

// expected-error @+1 {{gpt-autodiff: @forward must return one scalar float loss}}
func.func @forward(%w: tensor<f32> {gpt.param = "w"}) -> (tensor<f32>, tensor<f32>) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// Tests that a parameter must be a float tensor.

// expected-error @+1 {{gpt-autodiff: parameter argument 0 of @forward must be a float tensor, got 'tensor<4xi32>'}}
func.func @forward(%w: tensor<4xi32> {gpt.param = "w"}, %x: tensor<f32> {gpt.input = "x"}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// Tests that a dynamic argument shape is rejected (the rules' reshapes and
// zero gradients need static shapes).

// expected-error @+1 {{gpt-autodiff: argument 0 of @forward has type 'tensor<?x4xf32>'; gpt-autodiff needs static shapes (run gpt-instantiate-model first)}}
func.func @forward(%x: tensor<?x4xf32> {gpt.input = "x"}, %w: tensor<5x4xf32> {gpt.param = "w"},
                   %t: tensor<?xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %y = gpt.linear %x, %w : (tensor<?x4xf32>, tensor<5x4xf32>) -> tensor<?x5xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 5 : i64} : (tensor<?x5xf32>, tensor<?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that an op with a dynamic result type is rejected.

func.func @forward(%x: tensor<2x4xbf16> {gpt.param = "x"}, %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  // expected-error @+1 {{'gpt.cast' op has result type 'tensor<2x?xf32>'; gpt-autodiff needs static shapes (run gpt-instantiate-model first)}}
  %y = gpt.cast %x : tensor<2x4xbf16> to tensor<2x?xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 2 : i64} : (tensor<2x?xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that an op without a gradient rule (gpt.max) on the path to the
// loss is reported at that op.

func.func @forward(%a: tensor<2x4xf32> {gpt.param = "a"}, %b: tensor<2x4xf32> {gpt.param = "b"},
                   %t: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  // expected-error @+1 {{'gpt.max' op has no gradient rule; gpt-autodiff cannot differentiate through it}}
  %y = gpt.max %a, %b : tensor<2x4xf32>
  %loss = gpt.cross_entropy %y, %t {vocab_size = 4 : i64} : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that gpt.reduce, which has no gradient rule, cannot produce the loss.

func.func @forward(%w: tensor<2x4xf32> {gpt.param = "w"}) -> tensor<f32> {
  // expected-error @+1 {{'gpt.reduce' op has no gradient rule; gpt-autodiff cannot differentiate through it}}
  %loss = gpt.reduce sum %w dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that the matmul rule rejects a shared rank-2 rhs with a transposed
// (batched) lhs.

func.func @forward(%a: tensor<2x4x3xf32> {gpt.param = "a"}, %b: tensor<4x5xf32> {gpt.param = "b"},
                   %t: tensor<2x3xi32> {gpt.input = "targets"}) -> tensor<f32> {
  // expected-error @+1 {{'gpt.matmul' op gradient rule: a shared rank-2 rhs needs an untransposed lhs}}
  %c = gpt.matmul %a, %b {transpose_lhs} : (tensor<2x4x3xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %loss = gpt.cross_entropy %c, %t {vocab_size = 5 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that an existing @forward_grad is not overwritten.

// expected-error @+1 {{gpt-autodiff: @forward_grad already exists}}
module {
  func.func @forward(%w: tensor<f32> {gpt.param = "w"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
  func.func @forward_grad(%w: tensor<f32> {gpt.param = "w"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
}
