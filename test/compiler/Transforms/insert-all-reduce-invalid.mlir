// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-insert-all-reduce

// Tests that a train step without an optimizer has no gradients to reduce.

// expected-error @+1 {{gpt-insert-all-reduce: @train_step has no gpt.adamw}}
func.func @train_step(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> {
  %y = gpt.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that calls must be inlined first.

func.func private @g(tensor<4xf32>) -> tensor<4xf32>
func.func @train_step(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> {
  // expected-error @+1 {{gpt-insert-all-reduce: inline calls first}}
  %y = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a step is not distributed twice.

func.func @train_step(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> {
  // expected-error @+1 {{gpt-insert-all-reduce: @train_step is already distributed}}
  %y = gpt.all_reduce mean %x {bucket = 0 : i64, bytes = 16 : i64, world_size = 2 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}
