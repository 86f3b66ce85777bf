// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=memory-plan

// Tests that a program without a memory plan fails the memory-plan gate.
// expected-error @+1 {{after phase memory-plan: @forward has no memory plan}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that an op without an offset for its result fails it too.
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {gpt.memory_plan = {activations = 256 : i64}} {
  // expected-error @+1 {{@forward has an op without an offset per result}}
  %y = gpt.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a planned program passes.
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {gpt.memory_plan = {activations = 256 : i64}} {
  %y = gpt.exp %x {gpt.offsets = array<i64: 0>} : tensor<4xf32>
  return %y : tensor<4xf32>
}
