// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-plan-memory

// Tests that calls must be inlined before planning.

func.func private @g(%x: tensor<4xf32>) -> tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op gpt-plan-memory: inline calls first}}
  %y = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}


// -----

// Tests that a plan above the budget gpt-rematerialize fitted the function
// to is an error: a pass after it kept a value alive longer. Three
// 256-byte-aligned buffers here (two arguments, the sum), 100 B of budget.

// expected-error @+1 {{gpt-plan-memory: @f plans 768 B, above the memory budget of 100 B that gpt-rematerialize fitted it to (a later pass kept a value alive longer)}}
func.func @f(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32>
    attributes {gpt.remat_plan = {budget = 100 : i64}} {
  %z = gpt.add %x, %y : tensor<16xf32>
  return %z : tensor<16xf32>
}
