// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-fp8-delayed-scaling
// RUN: not gpt-opt %s --split-input-file --gpt-fp8-delayed-scaling=history=0 2>&1 | FileCheck %s --check-prefix=ZERO

// Tests that a module without the train step is reported.
// expected-error @+1 {{gpt-fp8-delayed-scaling: no single-block function @train_step}}
module {
  func.func @forward() -> () {
    return
  }
}

// -----

// Tests that a history of no steps is refused.
// ZERO: gpt-fp8-delayed-scaling: history must be at least 1 step, got 0
module {
  func.func @train_step() -> () {
    return
  }
}
