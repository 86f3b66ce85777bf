// RUN: gpt-opt %s --split-input-file --verify-diagnostics

// Tests that gpt.fusion rejects a body op that is not elementwise.
func.func @not_elementwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{cannot be fused: gpt.fusion holds elementwise ops and at most one gpt.layernorm, gpt.layernorm_grad, column sum or GEMM}}
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

// -----

// Tests that a GEMM fusion rejects a GEMM of a value the body computes (here
// rounds): cuBLASLt reads the fusion's operands, widened or not.
func.func @gemm_computed_operand(%x: tensor<8x16xf32>, %w: tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  // expected-error @+1 {{with a GEMM: the GEMM must read the fusion's operands, widened or not}}
  %0:2 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<64x16xbf16>):
    %1 = gpt.cast %xa : tensor<8x16xf32> to tensor<8x16xbf16>
    %2 = gpt.linear %1, %wa : (tensor<8x16xbf16>, tensor<64x16xbf16>) -> tensor<8x64xbf16>
    %3 = gpt.gelu %2 : tensor<8x64xbf16>
    gpt.yield %3, %2 : tensor<8x64xbf16>, tensor<8x64xbf16>
  }
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

// Tests that a GEMM fusion rejects a second GEMM.
func.func @gemm_second(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{with a GEMM: holds a second gpt.matmul}}
  %0 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<16x16xf32>):
    %1 = gpt.matmul %xa, %wa : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %2 = gpt.matmul %xa, %wa : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %3 = gpt.add %1, %2 : tensor<8x16xf32>
    gpt.yield %3 : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a GEMM fusion rejects an epilogue op no cuBLASLt epilogue
// computes.
func.func @gemm_other_epilogue(%x: tensor<8x16xf32>, %w: tensor<64x16xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{with a GEMM: holds gpt.exp, which no GEMM epilogue computes (gelu, gelu_grad, a column sum, casts)}}
  %0 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32> {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<64x16xf32>):
    %1 = gpt.linear %xa, %wa : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %2 = gpt.exp %1 : tensor<8x64xf32>
    gpt.yield %2 : tensor<8x64xf32>
  }
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion rejects a GEMM without an epilogue.
func.func @gemm_no_epilogue(%x: tensor<8x16xf32>, %w: tensor<64x16xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{with a GEMM: has no epilogue: a gelu, a gelu_grad or a column sum}}
  %0 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32> {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<64x16xf32>):
    %1 = gpt.linear %xa, %wa : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    gpt.yield %1 : tensor<8x64xf32>
  }
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion's GEMM gives f32: the epilogue reads cuBLASLt's
// f32 accumulator, so narrow operands are widened in the body.
func.func @gemm_bf16_accumulator(%x: tensor<8x16xbf16>, %w: tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  // expected-error @+1 {{with a GEMM: the GEMM must give f32, the accumulator its epilogue reads (widen narrow operands)}}
  %0:2 = gpt.fusion (%x, %w) : (tensor<8x16xbf16>, tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  ^bb0(%xa: tensor<8x16xbf16>, %wa: tensor<64x16xbf16>):
    %1 = gpt.linear %xa, %wa : (tensor<8x16xbf16>, tensor<64x16xbf16>) -> tensor<8x64xbf16>
    %2 = gpt.gelu %1 : tensor<8x64xbf16>
    gpt.yield %2, %1 : tensor<8x64xbf16>, tensor<8x64xbf16>
  }
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

// Tests that a GEMM fusion's operands share an element type (one cuBLASLt
// GEMM's A and B).
func.func @gemm_mixed_operands(%x: tensor<8x16xbf16>, %w: tensor<64x16xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  // expected-error @+1 {{with a GEMM: the GEMM's operands must have one element type}}
  %0:2 = gpt.fusion (%x, %w) : (tensor<8x16xbf16>, tensor<64x16xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  ^bb0(%xa: tensor<8x16xbf16>, %wa: tensor<64x16xf32>):
    %1 = gpt.cast %xa : tensor<8x16xbf16> to tensor<8x16xf32>
    %2 = gpt.linear %1, %wa : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %3 = gpt.gelu %2 : tensor<8x64xf32>
    gpt.yield %3, %2 : tensor<8x64xf32>, tensor<8x64xf32>
  }
  return %0#0, %0#1 : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion's matmul is one GEMM: batched operands are
// several, which no epilogue spans.
func.func @gemm_batched(%a: tensor<2x8x16xf32>, %w: tensor<2x16x64xf32>, %p: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{with a GEMM: its gpt.matmul must be one GEMM, of rank-2 operands}}
  %0 = gpt.fusion (%a, %w, %p) : (tensor<2x8x16xf32>, tensor<2x16x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  ^bb0(%aa: tensor<2x8x16xf32>, %wa: tensor<2x16x64xf32>, %pa: tensor<2x8x64xf32>):
    %1 = gpt.matmul %aa, %wa : (tensor<2x8x16xf32>, tensor<2x16x64xf32>) -> tensor<2x8x64xf32>
    %2 = gpt.gelu_grad %1, %pa : tensor<2x8x64xf32>
    gpt.yield %2 : tensor<2x8x64xf32>
  }
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that a GEMM fusion's GELU has no column sum beside it (cuBLASLt has
// no such epilogue).
func.func @gemm_gelu_and_sum(%x: tensor<8x16xf32>, %w: tensor<64x16xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) {
  // expected-error @+1 {{with a GEMM: its gelu must be of the GEMM's result, and alone}}
  %0:3 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<64x16xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<64x16xf32>):
    %1 = gpt.linear %xa, %wa : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %2 = gpt.gelu %1 : tensor<8x64xf32>
    %3 = gpt.reduce sum %2 dims [0] : (tensor<8x64xf32>) -> tensor<64xf32>
    gpt.yield %2, %1, %3 : tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>
  }
  return %0#0, %0#1, %0#2 : tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>
}

// -----

// Tests that a GEMM fusion's GELU must also yield the accumulator (the
// pre-activation GELU_AUX stores).
func.func @gemm_gelu_without_pre(%x: tensor<8x16xf32>, %w: tensor<64x16xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{with a GEMM: yields 1 values; its epilogue computes 2}}
  %0 = gpt.fusion (%x, %w) : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32> {
  ^bb0(%xa: tensor<8x16xf32>, %wa: tensor<64x16xf32>):
    %1 = gpt.linear %xa, %wa : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %2 = gpt.gelu %1 : tensor<8x64xf32>
    gpt.yield %2 : tensor<8x64xf32>
  }
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion computes nothing before its GEMM and epilogue
// but widening casts: DGELU reads its pre-activation as stored.
func.func @gemm_gelu_grad_computed_pre(%a: tensor<8x16xf32>, %w: tensor<16x64xf32>, %p: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{with a GEMM: holds gpt.neg, which no GEMM epilogue computes}}
  %0 = gpt.fusion (%a, %w, %p) : (tensor<8x16xf32>, tensor<16x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32> {
  ^bb0(%aa: tensor<8x16xf32>, %wa: tensor<16x64xf32>, %pa: tensor<8x64xf32>):
    %1 = gpt.neg %pa : tensor<8x64xf32>
    %2 = gpt.matmul %aa, %wa : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %3 = gpt.gelu_grad %2, %1 : tensor<8x64xf32>
    gpt.yield %3 : tensor<8x64xf32>
  }
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion's GELU gradient must scale the accumulator.
func.func @gemm_gelu_grad_of_operand(%a: tensor<8x16xf32>, %w: tensor<16x64xf32>, %p: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  // expected-error @+1 {{with a GEMM: its gelu_grad must scale the GEMM's result at an operand, widened or not}}
  %0:2 = gpt.fusion (%a, %w, %p) : (tensor<8x16xf32>, tensor<16x64xf32>, tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  ^bb0(%aa: tensor<8x16xf32>, %wa: tensor<16x64xf32>, %pa: tensor<8x64xf32>):
    %1 = gpt.matmul %aa, %wa : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %2 = gpt.gelu_grad %pa, %1 : tensor<8x64xf32>
    gpt.yield %1, %2 : tensor<8x64xf32>, tensor<8x64xf32>
  }
  return %0#0, %0#1 : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion's column sum of an operand must be of the lhs of
// a weight-gradient matmul (BGRADB): here the rhs.
func.func @gemm_sum_of_rhs(%dy: tensor<8x48xf32>, %x: tensor<8x16xf32>) -> (tensor<48x16xf32>, tensor<16xf32>) {
  // expected-error @+1 {{with a GEMM: its column sum must add up the columns of the lhs of a gpt.matmul {transpose_lhs}}}
  %0:2 = gpt.fusion (%dy, %x) : (tensor<8x48xf32>, tensor<8x16xf32>) -> (tensor<48x16xf32>, tensor<16xf32>) {
  ^bb0(%da: tensor<8x48xf32>, %xa: tensor<8x16xf32>):
    %1 = gpt.matmul %da, %xa {transpose_lhs} : (tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<48x16xf32>
    %2 = gpt.reduce sum %xa dims [0] : (tensor<8x16xf32>) -> tensor<16xf32>
    gpt.yield %1, %2 : tensor<48x16xf32>, tensor<16xf32>
  }
  return %0#0, %0#1 : tensor<48x16xf32>, tensor<16xf32>
}

// -----

// Tests that only a GELU epilogue follows a linear with a bias (cuBLASLt's
// GELU_AUX_BIAS; DGELU adds none).
func.func @gemm_bias_gelu_grad(%a: tensor<8x16xf32>, %w: tensor<64x16xf32>, %b: tensor<64xf32>, %p: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{with a GEMM: only a gelu epilogue follows a gpt.linear with a bias}}
  %0 = gpt.fusion (%a, %w, %b, %p) : (tensor<8x16xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32> {
  ^bb0(%aa: tensor<8x16xf32>, %wa: tensor<64x16xf32>, %ba: tensor<64xf32>, %pa: tensor<8x64xf32>):
    %1 = gpt.linear %aa, %wa, %ba : (tensor<8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    %2 = gpt.gelu_grad %1, %pa : tensor<8x64xf32>
    gpt.yield %2 : tensor<8x64xf32>
  }
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a GEMM fusion yields each epilogue value once.
func.func @gemm_yield_twice(%x: tensor<8x16xbf16>, %w: tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xf32>) {
  // expected-error @+1 {{with a GEMM: must yield each epilogue value once, through at most one cast}}
  %0:2 = gpt.fusion (%x, %w) : (tensor<8x16xbf16>, tensor<64x16xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xf32>) {
  ^bb0(%xa: tensor<8x16xbf16>, %wa: tensor<64x16xbf16>):
    %1 = gpt.cast %xa : tensor<8x16xbf16> to tensor<8x16xf32>
    %2 = gpt.cast %wa : tensor<64x16xbf16> to tensor<64x16xf32>
    %3 = gpt.linear %1, %2 : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %4 = gpt.gelu %3 : tensor<8x64xf32>
    %5 = gpt.cast %4 : tensor<8x64xf32> to tensor<8x64xbf16>
    gpt.yield %5, %4 : tensor<8x64xbf16>, tensor<8x64xf32>
  }
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<8x64xf32>
}
