// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=fuse

// Tests that a program planned before the memory-plan phase fails the fuse
// gate: a pass after planning would invalidate the offsets.
// expected-error @+1 {{after phase fuse: @forward is planned before the memory-plan phase}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {gpt.memory_plan = {activations = 0 : i64}} {
  return %x : tensor<4xf32>
}
