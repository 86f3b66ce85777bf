// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-verify-phase=phase=schedule

// Tests that the FP8 first step must take what the steady step takes.
func.func @train_step(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> attributes {gpt.train_step} {
  return %x : tensor<4xf32>
}
// expected-error @+1 {{after phase schedule: @train_step_first's signature is not @train_step's}}
func.func @train_step_first(%x: tensor<8xf32> {gpt.input = "x"}) -> tensor<8xf32> attributes {gpt.train_step} {
  return %x : tensor<8xf32>
}
