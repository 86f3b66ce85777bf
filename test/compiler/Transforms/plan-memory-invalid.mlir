// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-plan-memory=function=f

// Tests that calls must be inlined before planning.

func.func private @g(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op gpt-plan-memory: inline calls first}}
  %y = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that the planned function must exist.

// expected-error @+1 {{gpt-plan-memory: no single-block function @f}}
module {
}
