// Structural errors are split cases of one part; an option error does not
// depend on the module, so each gets its own part (split-file) and RUN line.
// RUN: split-file --leading-lines %s %t
// RUN: gpt-opt %t/structure.mlir --split-input-file --verify-diagnostics --gpt-insert-optimizer
// RUN: gpt-opt %t/schedule.mlir --verify-diagnostics --gpt-insert-optimizer="schedule=step"
// RUN: gpt-opt %t/cosine.mlir --verify-diagnostics --gpt-insert-optimizer="schedule=cosine warmup-steps=10 total-steps=10"
// RUN: gpt-opt %t/linear.mlir --verify-diagnostics --gpt-insert-optimizer="schedule=linear"
// RUN: gpt-opt %t/accum.mlir --verify-diagnostics --gpt-insert-optimizer="accum-steps=0"
// RUN: not gpt-opt %t/accum.mlir --gpt-insert-optimizer="accum-steps=1025" 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: gpt-insert-optimizer: accum-steps must be in 1..1024 (the step is unrolled per micro-batch), got 1025
// RUN: gpt-opt %t/lr.mlir --verify-diagnostics --gpt-insert-optimizer="lr=0"
// RUN: gpt-opt %t/beta.mlir --verify-diagnostics --gpt-insert-optimizer="beta1=1.0"
// RUN: gpt-opt %t/clip.mlir --verify-diagnostics --gpt-insert-optimizer="grad-clip=-1.0"
// RUN: gpt-opt %t/nan.mlir --verify-diagnostics --gpt-insert-optimizer="lr=nan"
// RUN: gpt-opt %t/min-lr.mlir --verify-diagnostics --gpt-insert-optimizer="schedule=cosine total-steps=10 lr=1.0e-4 min-lr=1.0e-3"
// RUN: gpt-opt %t/warmup.mlir --verify-diagnostics --gpt-insert-optimizer="warmup-steps=-1"

//--- structure.mlir

// Tests that a module without @forward_grad is rejected.

// expected-error @+1 {{gpt-insert-optimizer: no @forward_grad (run gpt-autodiff first)}}
module {
  func.func @forward(%w: tensor<4xf32> {gpt.param = "w"}) -> tensor<f32> {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// Tests that an existing @train_step is not overwritten.

// expected-error @+1 {{gpt-insert-optimizer: @train_step already exists}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
  func.func @train_step() {
    return
  }
}

// -----

// Tests that every gradient-function argument must be a parameter or the
// tokens or targets input.

// expected-error @+1 {{gpt-insert-optimizer: argument 1 is neither a parameter nor tokens/targets}}
func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %x: tensor<4xf32> {gpt.input = "x"},
                        %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                        %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
  %zero = gpt.constant 0.0 : tensor<f32>
  return %zero, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that the gradient function needs both a tokens and a targets input.

// expected-error @+1 {{gpt-insert-optimizer: @forward_grad needs 'tokens' and 'targets' inputs}}
func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"},
                        %tokens: tensor<1x2xi32> {gpt.input = "tokens"}) -> (tensor<f32>, tensor<4xf32>) {
  %zero = gpt.constant 0.0 : tensor<f32>
  return %zero, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that an argument that is not a ranked tensor is rejected rather
// than crashing the pass.

// expected-error @+1 {{gpt-insert-optimizer: argument 1 must be a ranked tensor, got 'f32'}}
func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %s: f32 {gpt.param = "s"},
                        %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                        %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
  %zero = gpt.constant 0.0 : tensor<f32>
  return %zero, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that the gradient function must return the loss and one gradient per
// parameter (here the gradient is missing) rather than crashing the pass.

// expected-error @+1 {{gpt-insert-optimizer: @forward_grad must return a tensor<f32> loss, then one gradient per parameter with the parameter's type}}
func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                        %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %zero = gpt.constant 0.0 : tensor<f32>
  return %zero : tensor<f32>
}

// -----

// Tests that a gradient whose type differs from its parameter's is rejected.

// expected-error @+1 {{gpt-insert-optimizer: @forward_grad must return a tensor<f32> loss, then one gradient per parameter with the parameter's type}}
func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                        %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xbf16>) {
  %zero = gpt.constant 0.0 : tensor<f32>
  %g = gpt.cast %w : tensor<4xf32> to tensor<4xbf16>
  return %zero, %g : tensor<f32>, tensor<4xbf16>
}

//--- schedule.mlir

// Tests that an unknown schedule name is rejected and named.

// expected-error @+1 {{gpt-insert-optimizer: schedule must be constant, cosine or linear, got 'step'}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- cosine.mlir

// Tests that a cosine schedule needs total-steps > warmup-steps (here equal).

// expected-error @+1 {{gpt-insert-optimizer: a cosine schedule needs total-steps > warmup-steps}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- linear.mlir

// Tests that a linear schedule with the default step counts (both 0) is
// rejected too.

// expected-error @+1 {{gpt-insert-optimizer: a linear schedule needs total-steps > warmup-steps}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- accum.mlir

// Tests that accum-steps must be at least 1 (and at most 1024, RUN above).

// expected-error @+1 {{gpt-insert-optimizer: accum-steps must be in 1..1024 (the step is unrolled per micro-batch), got 0}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- lr.mlir

// Tests that the learning rate must be positive.

// expected-error @+1 {{gpt-insert-optimizer: lr must be a finite number > 0, got 0}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- beta.mlir

// Tests that a beta of 1 is rejected.

// expected-error @+1 {{gpt-insert-optimizer: beta1 must be in [0, 1), got 1}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- clip.mlir

// Tests that a negative grad-clip is rejected.

// expected-error @+1 {{gpt-insert-optimizer: grad-clip must be a finite number >= 0 (0: off), got -1}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- nan.mlir

// Tests that a NaN learning rate is rejected (it fails no `<=` test).

// expected-error @+1 {{gpt-insert-optimizer: lr must be a finite number > 0, got nan}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- min-lr.mlir

// Tests that a decaying schedule's final learning rate may not exceed the
// peak.

// expected-error @+1 {{gpt-insert-optimizer: min-lr must be in [0, lr] for a decaying schedule, got 1.000000e-03}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- warmup.mlir

// Tests that negative warm-up steps are rejected.

// expected-error @+1 {{gpt-insert-optimizer: warmup-steps and total-steps must be >= 0, got -1 and 0}}
module {
  func.func @forward_grad(%w: tensor<4xf32> {gpt.param = "w"}, %tokens: tensor<1x2xi32> {gpt.input = "tokens"},
                          %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<4xf32>) {
    %zero = gpt.constant 0.0 : tensor<f32>
    return %zero, %w : tensor<f32>, tensor<4xf32>
  }
}
