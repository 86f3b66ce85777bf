// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=lower
// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=distribute
// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=fuse

// Tests that a lowered, distributed, unplanned module passes the gates
// before memory-plan: one graph per program, its collectives in the train
// step over the module's world size.
module attributes {gpt.config = {world_size = 2 : i64}} {
func.func @train_step(%g: tensor<16xf32> {gpt.input = "g"}) -> (tensor<16xf32> {gpt.output = "loss"}) attributes {gpt.train_step} {
  %r = gpt.all_reduce mean %g {bucket = 0 : i64, bytes = 64 : i64, world_size = 2 : i64} : tensor<16xf32>
  return %r : tensor<16xf32>
}
}

// -----

// Tests that a call left in a program fails the gate (every gate checks the
// phases before it).
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{a call is left (programs are one graph each)}}
  %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
