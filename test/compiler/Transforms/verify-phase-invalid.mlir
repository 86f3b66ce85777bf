// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=distribute

// Tests that a collective outside the train steps fails the distribute gate.
module attributes {gpt.config = {world_size = 2 : i64}} {
func.func @forward(%g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{after phase distribute: a collective in @forward (only train steps have them)}}
  %r = gpt.all_reduce mean %g {bucket = 0 : i64, bytes = 64 : i64, world_size = 2 : i64} : tensor<16xf32>
  return %r : tensor<16xf32>
}
}

// -----

// Tests that a collective over another world size than the module's fails.
module attributes {gpt.config = {world_size = 4 : i64}} {
func.func @train_step(%g: tensor<16xf32>) -> tensor<16xf32> attributes {gpt.train_step} {
  // expected-error @+1 {{its world_size 2 is not the module's gpt.config world_size 4}}
  %r = gpt.all_reduce mean %g {bucket = 0 : i64, bytes = 64 : i64, world_size = 2 : i64} : tensor<16xf32>
  return %r : tensor<16xf32>
}
}

// -----

// Tests that a ZeRO-1 shard must be 1/N of the full shape it names.
module attributes {gpt.config = {world_size = 2 : i64, zero = 1 : i64}} {
// expected-error @+1 {{@train_step argument 0 ('tensor<16xf32>') is not a 1/2 shard of 16 elements}}
func.func @train_step(%m: tensor<16xf32> {gpt.shard_of = array<i64: 16>, gpt.state = "w.adam_m"}) -> tensor<16xf32> attributes {gpt.train_step} {
  return %m : tensor<16xf32>
}
}

// -----

// Tests that a module recording ZeRO-1 without a shard fails.
// expected-error @+1 {{ZeRO-1 recorded (zero = 1) but no argument is a shard}}
module attributes {gpt.config = {world_size = 2 : i64, zero = 1 : i64}} {
func.func @train_step(%m: tensor<16xf32>) -> tensor<16xf32> attributes {gpt.train_step} {
  return %m : tensor<16xf32>
}
}

// -----

// Tests that a function gptrun does not run fails (the per-program passes
// plan every function): here the gradient function, left uninlined.
// expected-error @+1 {{after phase distribute: @forward_grad is not a program gptrun runs (train_step, train_step_first, init, forward, logits)}}
func.func @forward_grad(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that a train step must be marked gpt.train_step (gpt-rematerialize
// fits the marked functions to the budget).
// expected-error @+1 {{after phase distribute: @train_step is not marked gpt.train_step}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that only a train step is marked gpt.train_step.
// expected-error @+1 {{after phase distribute: @forward is marked gpt.train_step}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {gpt.train_step} {
  return %x : tensor<4xf32>
}
