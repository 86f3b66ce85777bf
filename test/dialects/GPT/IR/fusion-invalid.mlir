// RUN: gpt-opt %s --split-input-file --verify-diagnostics

// Tests that gpt.fusion rejects a body op that is not elementwise.
func.func @not_elementwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{cannot be fused: gpt.fusion holds elementwise ops and at most one gpt.layernorm, gpt.layernorm_grad or column sum}}
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

// -----

// Tests that a row fusion's layernorm is verified as a layernorm: its
// weight may not be narrower than the sum.
func.func @row_fusion_narrow_weight(%h: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) {
  %0:2 = gpt.fusion (%h, %x, %w, %b) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  ^bb0(%ha: tensor<4x8xf32>, %xa: tensor<4x8xf32>, %wa: tensor<8xbf16>, %ba: tensor<8xbf16>):
    %1 = gpt.add %ha, %xa : tensor<4x8xf32>
    // expected-error @+1 {{'gpt.layernorm' op}}
    %2 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
    gpt.yield %1, %2 : tensor<4x8xf32>, tensor<4x8xbf16>
  }
  return
}

// -----

// Tests that a row fusion holds one layernorm.
func.func @row_fusion_two_rows(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  %0:3 = gpt.fusion (%x, %w, %b) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %wa: tensor<8xf32>, %ba: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    %2 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    // expected-error @+1 {{is a second row op or column sum: a fusion holds one gpt.layernorm, gpt.layernorm_grad or gpt.reduce}}
    %3 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    gpt.yield %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
  return
}

// -----

// Tests that a row fusion's layernorm normalises a value the body stores
// (the kernel reads back what it stored).
func.func @row_fusion_input_not_yielded(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  %0 = gpt.fusion (%x, %w, %b) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>, %wa: tensor<8xf32>, %ba: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    // expected-error @+1 {{in gpt.fusion must normalise a value the body computes and yields}}
    %2 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    gpt.yield %2 : tensor<4x8xf32>
  }
  return
}

// -----

// Tests that a row fusion's layernorm takes its weight and bias from the
// operands.
func.func @row_fusion_computed_weight(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  %0:2 = gpt.fusion (%x, %w, %b) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %wa: tensor<8xf32>, %ba: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    %w2 = gpt.neg %wa : tensor<8xf32>
    // expected-error @+1 {{in gpt.fusion must take its weight and bias from the operands}}
    %2 = gpt.layernorm %1, %w2, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    gpt.yield %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  return
}

// -----

// Tests that a row fusion's layernorm result is read only by gpt.yield.
func.func @row_fusion_epilogue(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  %0:3 = gpt.fusion (%x, %w, %b) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %wa: tensor<8xf32>, %ba: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    // expected-error @+1 {{in gpt.fusion must be read only by gpt.yield}}
    %2 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %3 = gpt.neg %2 : tensor<4x8xf32>
    gpt.yield %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
  return
}

// -----

// Tests that every result of a row fusion has the row op's shape.
func.func @row_fusion_other_shape(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{result 2 of a row fusion has type 'tensor<8xf32>', not the shape of its gpt.layernorm's input}}
  %0:3 = gpt.fusion (%x, %w, %b) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %wa: tensor<8xf32>, %ba: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    %2 = gpt.layernorm %1, %wa, %ba : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %3 = gpt.neg %wa : tensor<8xf32>
    gpt.yield %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that a column sum sums all but the last dimension.
func.func @column_sum_dims(%x: tensor<4x8xf32>) {
  %0:2 = gpt.fusion (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    // expected-error @+1 {{in gpt.fusion must sum all but the last dimension}}
    %2 = gpt.reduce sum %1 dims [1] : (tensor<4x8xf32>) -> tensor<4xf32>
    gpt.yield %1, %2 : tensor<4x8xf32>, tensor<4xf32>
  }
  return
}

// -----

// Tests that a column sum's result is only yielded (through casts).
func.func @column_sum_read(%x: tensor<4x8xf32>) {
  %0:2 = gpt.fusion (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    // expected-error @+1 {{in gpt.fusion must be read only by gpt.yield (through casts)}}
    %2 = gpt.reduce sum %1 dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    %3 = gpt.neg %2 : tensor<8xf32>
    gpt.yield %1, %3 : tensor<4x8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that a column sum sums a value the body computes.
func.func @column_sum_of_operand(%x: tensor<4x8xf32>) {
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    // expected-error @+1 {{in gpt.fusion must sum a value the body computes}}
    %1 = gpt.reduce sum %xa dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    gpt.yield %1 : tensor<8xf32>
  }
  return
}

// -----

// Tests that a fusion holds one column sum and no row op with it.
func.func @column_sum_twice(%x: tensor<4x8xf32>) {
  %0:3 = gpt.fusion (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    %2 = gpt.reduce sum %1 dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{is a second row op or column sum: a fusion holds one gpt.layernorm, gpt.layernorm_grad or gpt.reduce}}
    %3 = gpt.reduce sum %1 dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    gpt.yield %1, %2, %3 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that every other result of a column-sum fusion has the summed
// value's shape.
func.func @column_sum_other_shape(%x: tensor<4x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+1 {{result 1 of a column-sum fusion has type 'tensor<8xf32>', not the shape of the summed value}}
  %0:3 = gpt.fusion (%x, %v) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %va: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    %2 = gpt.neg %va : tensor<8xf32>
    %3 = gpt.reduce sum %1 dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    gpt.yield %1, %2, %3 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that a row-gradient fusion's layernorm_grad takes its operands from
// the fusion's: the kernel loads them, so no body op may compute them.
func.func @row_grad_computed_operand(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %0:3 = gpt.fusion (%dy, %x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%dya: tensor<4x8xf32>, %xa: tensor<4x8xf32>, %wa: tensor<8xf32>):
    %1 = gpt.neg %xa : tensor<4x8xf32>
    // expected-error @+1 {{in gpt.fusion must take its operands from the fusion's, widened or not}}
    %dx, %dw, %db = gpt.layernorm_grad %dya, %1, %wa : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %2 = gpt.neg %dx : tensor<4x8xf32>
    gpt.yield %2, %dw, %db : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that a row-gradient fusion's layernorm_grad operand may be widened
// in the body but not narrowed (a narrowing cast rounds: a computed value).
func.func @row_grad_narrowed_operand(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %0:3 = gpt.fusion (%dy, %x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%dya: tensor<4x8xf32>, %xa: tensor<4x8xf32>, %wa: tensor<8xf32>):
    %1 = gpt.cast %dya : tensor<4x8xf32> to tensor<4x8xbf16>
    %2 = gpt.cast %xa : tensor<4x8xf32> to tensor<4x8xbf16>
    // expected-error @+1 {{in gpt.fusion must take its operands from the fusion's, widened or not}}
    %dx, %dw, %db = gpt.layernorm_grad %1, %2, %wa : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
    %3 = gpt.neg %dx : tensor<4x8xbf16>
    gpt.yield %3, %dw, %db : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that a row-gradient fusion yields its weight and bias gradients and
// no body op reads them (the kernel sums them in a second stage).
func.func @row_grad_weight_grad_read(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %0:3 = gpt.fusion (%dy, %x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%dya: tensor<4x8xf32>, %xa: tensor<4x8xf32>, %wa: tensor<8xf32>):
    // expected-error @+1 {{in gpt.fusion must have its weight and bias gradients yielded once and read by no body op}}
    %dx, %dw, %db = gpt.layernorm_grad %dya, %xa, %wa : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %1 = gpt.neg %dx : tensor<4x8xf32>
    %2 = gpt.neg %db : tensor<8xf32>
    gpt.yield %1, %dw, %2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that every other result of a row-gradient fusion has the input's
// shape.
func.func @row_grad_other_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{result 3 of a row-gradient fusion has type 'tensor<8xf32>', not the shape of its gpt.layernorm_grad's input}}
  %0:4 = gpt.fusion (%dy, %x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%dya: tensor<4x8xf32>, %xa: tensor<4x8xf32>, %wa: tensor<8xf32>):
    %dx, %dw, %db = gpt.layernorm_grad %dya, %xa, %wa : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %1 = gpt.neg %dx : tensor<4x8xf32>
    %2 = gpt.neg %wa : tensor<8xf32>
    gpt.yield %1, %dw, %db, %2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// Tests that an attention gradient in a fusion is the column sum's input:
// its kernels sum their tiles, nothing else reads the gradient in the body.
func.func @attention_grad_without_sum(%dy: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>, %y: tensor<2x8x16xf32>, %lse: tensor<2x2x8xf32>) {
  %0 = gpt.fusion (%dy, %qkv, %y, %lse) : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32> {
  ^bb0(%dya: tensor<2x8x16xf32>, %qa: tensor<2x8x48xf32>, %ya: tensor<2x8x16xf32>, %la: tensor<2x2x8xf32>):
    // expected-error @+1 {{in gpt.fusion must be summed by its column sum}}
    %d = gpt.causal_attention_grad %dya, %qa, %ya, %la {num_heads = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
    %1 = gpt.neg %d : tensor<2x8x48xf32>
    gpt.yield %1 : tensor<2x8x48xf32>
  }
  return
}

// -----

// Tests that an attention-gradient fusion yields the gradient and its sum
// and nothing else (the kernels store those two).
func.func @attention_grad_sum_extra_result(%dy: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>, %y: tensor<2x8x16xf32>, %lse: tensor<2x2x8xf32>) {
  // expected-error @+1 {{with an attention gradient yields it and its column sum (through casts), nothing else}}
  %0:3 = gpt.fusion (%dy, %qkv, %y, %lse) : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> (tensor<2x8x48xf32>, tensor<48xf32>, tensor<2x8x48xf32>) {
  ^bb0(%dya: tensor<2x8x16xf32>, %qa: tensor<2x8x48xf32>, %ya: tensor<2x8x16xf32>, %la: tensor<2x2x8xf32>):
    %d = gpt.causal_attention_grad %dya, %qa, %ya, %la {num_heads = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
    %s = gpt.reduce sum %d dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
    %1 = gpt.neg %d : tensor<2x8x48xf32>
    gpt.yield %d, %s, %1 : tensor<2x8x48xf32>, tensor<48xf32>, tensor<2x8x48xf32>
  }
  return
}

// -----

// Tests that an attention gradient in a fusion takes its operands from the
// fusion's (its kernels load them).
func.func @attention_grad_computed_operand(%dy: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>, %y: tensor<2x8x16xf32>, %lse: tensor<2x2x8xf32>) {
  %0:2 = gpt.fusion (%dy, %qkv, %y, %lse) : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> (tensor<2x8x48xf32>, tensor<48xf32>) {
  ^bb0(%dya: tensor<2x8x16xf32>, %qa: tensor<2x8x48xf32>, %ya: tensor<2x8x16xf32>, %la: tensor<2x2x8xf32>):
    %g = gpt.neg %dya : tensor<2x8x16xf32>
    // expected-error @+1 {{in gpt.fusion must take its operands from the fusion's, widened or not}}
    %d = gpt.causal_attention_grad %g, %qa, %ya, %la {num_heads = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
    %s = gpt.reduce sum %d dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
    gpt.yield %d, %s : tensor<2x8x48xf32>, tensor<48xf32>
  }
  return
}
