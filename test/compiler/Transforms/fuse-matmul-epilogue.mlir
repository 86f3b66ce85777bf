// RUN: gpt-opt %s --split-input-file --gpt-fuse-matmul-epilogue="gelu-bias-grad=true bias-grad=true" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-fuse-matmul-epilogue | FileCheck %s --check-prefix=DEF
// RUN: gpt-opt %s --split-input-file --gpt-fuse-matmul-epilogue="gelu=false gelu-grad=false gelu-bias-grad=false bias-grad=false scaled-bias=false" | FileCheck %s --check-prefix=OFF

// Tests that a GELU of a linear becomes one GEMM fusion: the linear of the
// widened operands (the f32 accumulator), its GELU, both narrowed once; the
// second result replaces the linear's (the backward reads the
// pre-activation).

// CHECK-LABEL: func.func @gelu_of_linear
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4x16xbf16>, %[[W:[^:]*]]: tensor<64x16xbf16>, %[[B:[^:]*]]: tensor<64xbf16>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[X]], %[[W]], %[[B]]) : (tensor<2x4x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>) -> (tensor<2x4x64xbf16>, tensor<2x4x64xbf16>) {
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<2x4x16xbf16>, %[[WA:.*]]: tensor<64x16xbf16>, %[[BA:.*]]: tensor<64xbf16>):
// CHECK-NEXT: %[[XW:.*]] = gpt.cast %[[XA]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT: %[[WW:.*]] = gpt.cast %[[WA]] : tensor<64x16xbf16> to tensor<64x16xf32>
// CHECK-NEXT: %[[BW:.*]] = gpt.cast %[[BA]] : tensor<64xbf16> to tensor<64xf32>
// CHECK-NEXT: %[[ACC:.*]] = gpt.linear %[[XW]], %[[WW]], %[[BW]] : {{.*}} -> tensor<2x4x64xf32>
// CHECK-NEXT: %[[G:.*]] = gpt.gelu %[[ACC]] : tensor<2x4x64xf32>
// CHECK-NEXT: %[[GH:.*]] = gpt.cast %[[G]] : tensor<2x4x64xf32> to tensor<2x4x64xbf16>
// CHECK-NEXT: %[[PH:.*]] = gpt.cast %[[ACC]] : tensor<2x4x64xf32> to tensor<2x4x64xbf16>
// CHECK-NEXT: gpt.yield %[[GH]], %[[PH]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
// OFF-LABEL: func.func @gelu_of_linear
// OFF: gpt.linear
// OFF: gpt.gelu
func.func @gelu_of_linear(%x: tensor<2x4x16xbf16>, %w: tensor<64x16xbf16>, %b: tensor<64xbf16>)
    -> (tensor<2x4x64xbf16>, tensor<2x4x64xbf16>) {
  %pre = gpt.linear %x, %w, %b
      : (tensor<2x4x16xbf16>, tensor<64x16xbf16>, tensor<64xbf16>) -> tensor<2x4x64xbf16>
  %h = gpt.gelu %pre : tensor<2x4x64xbf16>
  return %h, %pre : tensor<2x4x64xbf16>, tensor<2x4x64xbf16>
}

// -----

// Tests that a second GELU of the same linear (a rematerialized clone)
// stays a GELU of the pre-activation: reading the fusion's GELU result
// would keep it alive into the backward. f32 operands need no casts; the
// fusion's own GELU is left alone.

// CHECK-LABEL: func.func @gelu_clone
// CHECK: %[[F:.*]]:2 = gpt.fusion
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<4x16xf32>, %[[WA:.*]]: tensor<64x16xf32>):
// CHECK-NEXT: %[[ACC:.*]] = gpt.linear %[[XA]], %[[WA]]
// CHECK-NEXT: %[[G:.*]] = gpt.gelu %[[ACC]]
// CHECK-NEXT: gpt.yield %[[G]], %[[ACC]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[H2:.*]] = gpt.gelu %[[F]]#1
// CHECK-NEXT: return %[[F]]#0, %[[H2]]
func.func @gelu_clone(%x: tensor<4x16xf32>, %w: tensor<64x16xf32>)
    -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %pre = gpt.linear %x, %w : (tensor<4x16xf32>, tensor<64x16xf32>) -> tensor<4x64xf32>
  %h = gpt.gelu %pre : tensor<4x64xf32>
  %h2 = gpt.gelu %pre : tensor<4x64xf32>
  return %h, %h2 : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// Tests that a GELU whose rows are not a multiple of 8 elements (cuBLASLt's
// rule for the aux matrix's leading dimension) stays unfused.

// CHECK-LABEL: func.func @gelu_unaligned
// CHECK-NOT: gpt.fusion
// CHECK: gpt.linear
// CHECK: gpt.gelu
func.func @gelu_unaligned(%x: tensor<4x16xf32>, %w: tensor<12x16xf32>) -> tensor<4x12xf32> {
  %pre = gpt.linear %x, %w : (tensor<4x16xf32>, tensor<12x16xf32>) -> tensor<4x12xf32>
  %h = gpt.gelu %pre : tensor<4x12xf32>
  return %h : tensor<4x12xf32>
}

// -----

// Tests that a GELU gradient of a reshaped matmul product becomes one GEMM
// fusion of the rank-2 operands: the gradient of the widened
// pre-activation scales the f32 product, narrowed once; the
// pre-activation and the result are reshaped around it.

// CHECK-LABEL: func.func @gelu_grad_of_matmul
// CHECK-SAME: (%[[DH:[^:]*]]: tensor<8x16xbf16>, %[[W:[^:]*]]: tensor<16x64xbf16>, %[[PRE:[^:]*]]: tensor<2x4x64xbf16>)
// CHECK-NEXT: %[[P2:.*]] = gpt.reshape %[[PRE]] : tensor<2x4x64xbf16> to tensor<8x64xbf16>
// CHECK-NEXT: %[[D:.*]] = gpt.fusion(%[[DH]], %[[W]], %[[P2]]) : (tensor<8x16xbf16>, tensor<16x64xbf16>, tensor<8x64xbf16>) -> tensor<8x64xbf16> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16x64xbf16>, %[[P:.*]]: tensor<8x64xbf16>):
// CHECK-NEXT: %[[AW:.*]] = gpt.cast %[[A]]
// CHECK-NEXT: %[[BW:.*]] = gpt.cast %[[B]]
// CHECK-NEXT: %[[PW:.*]] = gpt.cast %[[P]] : tensor<8x64xbf16> to tensor<8x64xf32>
// CHECK-NEXT: %[[ACC:.*]] = gpt.matmul %[[AW]], %[[BW]] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %[[G:.*]] = gpt.gelu_grad %[[ACC]], %[[PW]] : tensor<8x64xf32>
// CHECK-NEXT: %[[GH:.*]] = gpt.cast %[[G]] : tensor<8x64xf32> to tensor<8x64xbf16>
// CHECK-NEXT: gpt.yield %[[GH]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[D3:.*]] = gpt.reshape %[[D]] : tensor<8x64xbf16> to tensor<2x4x64xbf16>
// CHECK-NEXT: return %[[D3]]
// OFF-LABEL: func.func @gelu_grad_of_matmul
// OFF: gpt.matmul
// OFF: gpt.gelu_grad
func.func @gelu_grad_of_matmul(%dh: tensor<8x16xbf16>, %w: tensor<16x64xbf16>,
                               %pre: tensor<2x4x64xbf16>) -> tensor<2x4x64xbf16> {
  %p = gpt.matmul %dh, %w : (tensor<8x16xbf16>, tensor<16x64xbf16>) -> tensor<8x64xbf16>
  %p3 = gpt.reshape %p : tensor<8x64xbf16> to tensor<2x4x64xbf16>
  %d = gpt.gelu_grad %p3, %pre : tensor<2x4x64xbf16>
  return %d : tensor<2x4x64xbf16>
}

// -----

// Tests that the transposes of the matmul carry over to the fusion's.

// CHECK-LABEL: func.func @gelu_grad_transposed
// CHECK: gpt.fusion
// CHECK: gpt.matmul %{{.*}}, %{{.*}} {transpose_lhs, transpose_rhs}
// CHECK-NEXT: gpt.gelu_grad
func.func @gelu_grad_transposed(%a: tensor<16x8xf32>, %w: tensor<64x16xf32>,
                                %pre: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %p = gpt.matmul %a, %w {transpose_lhs, transpose_rhs}
      : (tensor<16x8xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
  %d = gpt.gelu_grad %p, %pre : tensor<8x64xf32>
  return %d : tensor<8x64xf32>
}

// -----

// Tests that a product with another reader stays a gpt.matmul: the fusion
// never stores it.

// CHECK-LABEL: func.func @gelu_grad_product_read
// CHECK-NOT: gpt.fusion
// CHECK: gpt.matmul
// CHECK: gpt.gelu_grad
func.func @gelu_grad_product_read(%dh: tensor<8x16xf32>, %w: tensor<16x64xf32>,
                                  %pre: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %p = gpt.matmul %dh, %w : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %d = gpt.gelu_grad %p, %pre : tensor<8x64xf32>
  return %d, %p : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that a batched product (rank-3 operands: several GEMMs) stays
// unfused.

// CHECK-LABEL: func.func @gelu_grad_batched
// CHECK-NOT: gpt.fusion
// CHECK: gpt.matmul
// CHECK: gpt.gelu_grad
func.func @gelu_grad_batched(%dh: tensor<2x4x16xf32>, %w: tensor<2x16x64xf32>,
                             %pre: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %p = gpt.matmul %dh, %w : (tensor<2x4x16xf32>, tensor<2x16x64xf32>) -> tensor<2x4x64xf32>
  %d = gpt.gelu_grad %p, %pre : tensor<2x4x64xf32>
  return %d : tensor<2x4x64xf32>
}

// -----

// Tests that a bias gradient over (B, T) and the weight gradient of the
// same output gradient become one GEMM fusion at the matmul: the product
// and the column sums of its widened lhs, each narrowed once.

// CHECK-LABEL: func.func @bias_grad
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4x48xbf16>, %[[X:[^:]*]]: tensor<8x16xbf16>)
// CHECK-NEXT: %[[DY2:.*]] = gpt.reshape %[[DY]]
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[DY2]], %[[X]]) : (tensor<8x48xbf16>, tensor<8x16xbf16>) -> (tensor<48x16xbf16>, tensor<48xbf16>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x48xbf16>, %[[B:.*]]: tensor<8x16xbf16>):
// CHECK-NEXT: %[[AW:.*]] = gpt.cast %[[A]] : tensor<8x48xbf16> to tensor<8x48xf32>
// CHECK-NEXT: %[[BW:.*]] = gpt.cast %[[B]]
// CHECK-NEXT: %[[ACC:.*]] = gpt.matmul %[[AW]], %[[BW]] {transpose_lhs} : (tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<48x16xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.reduce sum %[[AW]] dims [0] : (tensor<8x48xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[DW:.*]] = gpt.cast %[[ACC]] : tensor<48x16xf32> to tensor<48x16xbf16>
// CHECK-NEXT: %[[DB:.*]] = gpt.cast %[[S]] : tensor<48xf32> to tensor<48xbf16>
// CHECK-NEXT: gpt.yield %[[DW]], %[[DB]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
// DEF-LABEL: func.func @bias_grad
// DEF: gpt.matmul
// DEF: gpt.reduce
// OFF-LABEL: func.func @bias_grad
// OFF: gpt.matmul
// OFF: gpt.reduce
func.func @bias_grad(%dy: tensor<2x4x48xbf16>, %x: tensor<8x16xbf16>)
    -> (tensor<48x16xbf16>, tensor<48xbf16>) {
  %dy2 = gpt.reshape %dy : tensor<2x4x48xbf16> to tensor<8x48xbf16>
  %dw = gpt.matmul %dy2, %x {transpose_lhs}
      : (tensor<8x48xbf16>, tensor<8x16xbf16>) -> tensor<48x16xbf16>
  %db = gpt.reduce sum %dy dims [0, 1] : (tensor<2x4x48xbf16>) -> tensor<48xbf16>
  return %dw, %db : tensor<48x16xbf16>, tensor<48xbf16>
}

// -----

// Tests that a reduce before its weight-gradient matmul gets the fusion at
// the reduce, so the readers of both still follow their value.

// CHECK-LABEL: func.func @bias_grad_reduce_first
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<8x48xf32>, %[[X:[^:]*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[DY]], %[[X]])
// CHECK: gpt.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.*]] = gpt.scale %[[F]]#1
// CHECK-NEXT: return %[[F]]#0, %[[S]]
func.func @bias_grad_reduce_first(%dy: tensor<8x48xf32>, %x: tensor<8x16xf32>)
    -> (tensor<48x16xf32>, tensor<48xf32>) {
  %db = gpt.reduce sum %dy dims [0] : (tensor<8x48xf32>) -> tensor<48xf32>
  %s = gpt.scale %db {factor = 2.0 : f64} : tensor<48xf32>
  %dw = gpt.matmul %dy, %x {transpose_lhs}
      : (tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<48x16xf32>
  return %dw, %s : tensor<48x16xf32>, tensor<48xf32>
}

// -----

// Tests that a reduce over other dimensions (here only the batch) is not a
// bias gradient and stays.

// CHECK-LABEL: func.func @bias_grad_partial_reduce
// CHECK-NOT: gpt.fusion
// CHECK: gpt.matmul
// CHECK: gpt.reduce
func.func @bias_grad_partial_reduce(%dy: tensor<2x4x48xf32>, %x: tensor<8x16xf32>)
    -> (tensor<48x16xf32>, tensor<4x48xf32>) {
  %dy2 = gpt.reshape %dy : tensor<2x4x48xf32> to tensor<8x48xf32>
  %dw = gpt.matmul %dy2, %x {transpose_lhs}
      : (tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<48x16xf32>
  %db = gpt.reduce sum %dy dims [0] : (tensor<2x4x48xf32>) -> tensor<4x48xf32>
  return %dw, %db : tensor<48x16xf32>, tensor<4x48xf32>
}

// -----

// Tests that a matmul that does not contract over the rows of dY (no
// transpose_lhs: not a weight gradient) leaves the reduce alone.

// CHECK-LABEL: func.func @bias_grad_not_weight_grad
// CHECK-NOT: gpt.fusion
// CHECK: gpt.matmul
// CHECK: gpt.reduce
func.func @bias_grad_not_weight_grad(%dy: tensor<8x48xf32>, %w: tensor<48x16xf32>)
    -> (tensor<8x16xf32>, tensor<48xf32>) {
  %dx = gpt.matmul %dy, %w : (tensor<8x48xf32>, tensor<48x16xf32>) -> tensor<8x16xf32>
  %db = gpt.reduce sum %dy dims [0] : (tensor<8x48xf32>) -> tensor<48xf32>
  return %dx, %db : tensor<8x16xf32>, tensor<48xf32>
}

// -----

// Tests that the column sums of a GELU gradient come out of its GEMM
// (through the reshape back to (B, T, C)) with gelu-bias-grad on, even
// with bias-grad on and a weight-gradient matmul of the same gradient next
// to it: that dW stays a plain matmul. By default (both off) the reduce
// stays.

// CHECK-LABEL: func.func @gelu_bias_grad
// CHECK-SAME: (%[[DH:[^:]*]]: tensor<8x16xbf16>, %[[W:[^:]*]]: tensor<16x64xbf16>, %[[PRE:[^:]*]]: tensor<2x4x64xbf16>, %[[X:[^:]*]]: tensor<8x32xbf16>)
// CHECK: %[[F:.*]]:2 = gpt.fusion(%[[DH]], %[[W]], %{{.*}}) : (tensor<8x16xbf16>, tensor<16x64xbf16>, tensor<8x64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>)
// CHECK: %[[G:.*]] = gpt.gelu_grad %{{.*}}, %{{.*}} : tensor<8x64xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.reduce sum %[[G]] dims [0] : (tensor<8x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[GH:.*]] = gpt.cast %[[G]]
// CHECK-NEXT: %[[SH:.*]] = gpt.cast %[[S]] : tensor<64xf32> to tensor<64xbf16>
// CHECK-NEXT: gpt.yield %[[GH]], %[[SH]]
// CHECK-NEXT: }
// CHECK-NOT: gpt.reduce
// CHECK-NOT: gpt.fusion
// CHECK: %[[DW:.*]] = gpt.matmul %{{.*}}, %[[X]] {transpose_lhs}
// CHECK: return %[[DW]], %[[F]]#1
// DEF-LABEL: func.func @gelu_bias_grad
// DEF: gpt.fusion
// DEF: gpt.gelu_grad
// DEF-NOT: gpt.reduce
// DEF: gpt.yield
// DEF: gpt.reduce
// DEF-NOT: gpt.fusion
// OFF-LABEL: func.func @gelu_bias_grad
// OFF: gpt.gelu_grad
// OFF: gpt.reduce
func.func @gelu_bias_grad(%dh: tensor<8x16xbf16>, %w: tensor<16x64xbf16>,
                          %pre: tensor<2x4x64xbf16>, %x: tensor<8x32xbf16>)
    -> (tensor<64x32xbf16>, tensor<64xbf16>) {
  %p = gpt.matmul %dh, %w : (tensor<8x16xbf16>, tensor<16x64xbf16>) -> tensor<8x64xbf16>
  %p3 = gpt.reshape %p : tensor<8x64xbf16> to tensor<2x4x64xbf16>
  %d = gpt.gelu_grad %p3, %pre : tensor<2x4x64xbf16>
  %db = gpt.reduce sum %d dims [0, 1] : (tensor<2x4x64xbf16>) -> tensor<64xbf16>
  %d2 = gpt.reshape %d : tensor<2x4x64xbf16> to tensor<8x64xbf16>
  %dw = gpt.matmul %d2, %x {transpose_lhs}
      : (tensor<8x64xbf16>, tensor<8x32xbf16>) -> tensor<64x32xbf16>
  return %dw, %db : tensor<64x32xbf16>, tensor<64xbf16>
}

// -----

// Tests that a sum over only some rows of a GELU gradient is not its bias
// gradient: the reduce stays and the GEMM keeps the plain DGELU epilogue.

// CHECK-LABEL: func.func @gelu_bias_grad_partial_reduce
// CHECK: gpt.fusion
// CHECK: gpt.gelu_grad
// CHECK-NOT: gpt.reduce
// CHECK: gpt.yield
// CHECK: gpt.reduce sum %{{.*}} dims [0]
// DEF-LABEL: func.func @gelu_bias_grad_partial_reduce
func.func @gelu_bias_grad_partial_reduce(%dh: tensor<8x16xf32>, %w: tensor<16x64xf32>,
                                         %pre: tensor<2x4x64xf32>) -> tensor<4x64xf32> {
  %p = gpt.matmul %dh, %w : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %p3 = gpt.reshape %p : tensor<8x64xf32> to tensor<2x4x64xf32>
  %d = gpt.gelu_grad %p3, %pre : tensor<2x4x64xf32>
  %db = gpt.reduce sum %d dims [0] : (tensor<2x4x64xf32>) -> tensor<4x64xf32>
  return %db : tensor<4x64xf32>
}

// -----

// Tests that a bias_add of an FP8 product becomes the GEMM's bias
// epilogue, flags kept.

// CHECK-LABEL: func.func @scaled_bias
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x8x16xf8E4M3FN>, %[[SA:[^:]*]]: tensor<f32>, %[[W:[^:]*]]: tensor<48x16xf8E4M3FN>, %[[SW:[^:]*]]: tensor<f32>, %[[B:[^:]*]]: tensor<48xbf16>)
// CHECK-NEXT: %[[Y:.*]] = gpt.scaled_matmul %[[A]], %[[SA]], %[[W]], %[[SW]] bias %[[B]] {fast_accum, transpose_rhs}
// CHECK-NEXT: return %[[Y]]
// OFF-LABEL: func.func @scaled_bias
// OFF: gpt.scaled_matmul
// OFF-NOT: bias %
// OFF: gpt.bias_add
func.func @scaled_bias(%a: tensor<2x8x16xf8E4M3FN>, %sa: tensor<f32>, %w: tensor<48x16xf8E4M3FN>,
                       %sw: tensor<f32>, %b: tensor<48xbf16>) -> tensor<2x8x48xbf16> {
  %p = gpt.scaled_matmul %a, %sa, %w, %sw {fast_accum, transpose_rhs}
      : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<2x8x48xbf16>
  %y = gpt.bias_add %p, %b : (tensor<2x8x48xbf16>, tensor<48xbf16>) -> tensor<2x8x48xbf16>
  return %y : tensor<2x8x48xbf16>
}

// -----

// Tests that an FP8 product that something else reads keeps its bias_add.

// CHECK-LABEL: func.func @scaled_bias_shared
// CHECK: %[[P:.*]] = gpt.scaled_matmul
// CHECK-NOT: bias %
// CHECK: gpt.bias_add %[[P]]
func.func @scaled_bias_shared(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %w: tensor<48x16xf8E4M3FN>,
                              %b: tensor<48xbf16>) -> (tensor<8x48xbf16>, tensor<8x48xbf16>) {
  %p = gpt.scaled_matmul %a, %s, %w, %s {transpose_rhs}
      : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<8x48xbf16>
  %y = gpt.bias_add %p, %b : (tensor<8x48xbf16>, tensor<48xbf16>) -> tensor<8x48xbf16>
  return %y, %p : tensor<8x48xbf16>, tensor<8x48xbf16>
}

// -----

// Tests that an f32 FP8 product keeps its bias_add (cuBLASLt adds no bias
// into an FP8 GEMM's f32 D).

// CHECK-LABEL: func.func @scaled_bias_f32
// CHECK: gpt.scaled_matmul
// CHECK-NOT: bias %
// CHECK: gpt.bias_add
func.func @scaled_bias_f32(%a: tensor<8x16xf8E4M3FN>, %s: tensor<f32>, %w: tensor<48x16xf8E4M3FN>,
                           %b: tensor<48xf32>) -> tensor<8x48xf32> {
  %p = gpt.scaled_matmul %a, %s, %w, %s {transpose_rhs}
      : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<8x48xf32>
  %y = gpt.bias_add %p, %b : (tensor<8x48xf32>, tensor<48xf32>) -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}
