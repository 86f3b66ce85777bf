// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-insert-init

// Tests that a module without gpt.config is rejected.

// expected-error @+1 {{gpt-insert-init: needs gpt.config with n_layer (run gpt-instantiate-model first)}}
module {
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that a gpt.config without n_layer is rejected.

// expected-error @+1 {{gpt-insert-init: needs gpt.config with n_layer (run gpt-instantiate-model first)}}
module attributes {gpt.config = {n_head = 1 : i64}} {
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that n_layer must be positive.

// expected-error @+1 {{gpt-insert-init: needs gpt.config with n_layer (run gpt-instantiate-model first)}}
module attributes {gpt.config = {n_layer = 0 : i64}} {
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that a module without @forward is rejected.

// expected-error @+1 {{gpt-insert-init: no function @forward}}
module attributes {gpt.config = {n_layer = 2 : i64}} {
  func.func @other(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that an existing @init is not overwritten.

// expected-error @+1 {{gpt-insert-init: @init already exists}}
module attributes {gpt.config = {n_layer = 2 : i64}} {
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
  func.func @init() {
    return
  }
}

// -----

// Tests that a parameter that is not a tensor is rejected.

module attributes {gpt.config = {n_layer = 2 : i64}} {
  // expected-error @+1 {{gpt-insert-init: parameter argument 1 of @forward must be a static float tensor, got 'f32'}}
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}, %s: f32 {gpt.param = "s"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that a parameter with a dynamic shape is rejected (the initial
// values need static shapes).

module attributes {gpt.config = {n_layer = 2 : i64}} {
  // expected-error @+1 {{gpt-insert-init: parameter argument 0 of @forward must be a static float tensor, got 'tensor<?x4xf32>'}}
  func.func @forward(%w: tensor<?x4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}
