// RUN: gpt-opt %s --split-input-file --verify-diagnostics

// Tests that gpt.fusion rejects a body op that is not elementwise.
func.func @not_elementwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{cannot be fused: gpt.fusion holds only elementwise ops}}
    %1 = gpt.softmax %a : tensor<4x8xf32>
    gpt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that gpt.fusion rejects yielded types that differ from its results.
func.func @yield_type(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{yields 'tensor<4x8xf32>' for results 'tensor<4x8xbf16>'}}
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = gpt.exp %a : tensor<4x8xf32>
    gpt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that gpt.fusion rejects body arguments that differ from its operands.
func.func @arg_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{body argument 0 has type 'tensor<4x8xbf16>', its operand 'tensor<4x8xf32>'}}
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xbf16>):
    %1 = gpt.cast %a : tensor<4x8xbf16> to tensor<4x8xf32>
    gpt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that gpt.fusion rejects a result that only forwards an argument.
func.func @forward_arg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{result 0 yields a body argument; use the operand}}
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    gpt.yield %a : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that gpt.fusion rejects dynamic shapes: its kernel is sized statically.
func.func @dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = gpt.fusion (%x) : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    // expected-error @+1 {{in gpt.fusion must have a static shape, got 'tensor<?x8xf32>'}}
    %1 = gpt.exp %a : tensor<?x8xf32>
    gpt.yield %1 : tensor<?x8xf32>
  }
  return %0 : tensor<?x8xf32>
}

// -----

// Tests that gpt.yield is accepted only inside gpt.fusion.
func.func @yield_outside(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{expects parent op 'gpt.fusion'}}
  gpt.yield %x : tensor<4x8xf32>
}

// -----

// Tests that a bias_add in a fusion keeps its own shape rule.
func.func @bias_shape(%x: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<4x8xf32> {
  %0 = gpt.fusion (%x, %b) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<4xf32>):
    // expected-error @+2 {{input has 8 columns but bias has 4}}
    // expected-error @+1 {{failed to infer returned types}}
    %1 = gpt.bias_add %a, %c : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
    gpt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
