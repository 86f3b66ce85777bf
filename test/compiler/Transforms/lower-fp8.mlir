// RUN: gpt-opt %s --split-input-file --gpt-lower-fp8=pair-layouts=false | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-lower-fp8=pair-layouts=false --cse | FileCheck %s --check-prefix=CSE
// RUN: gpt-opt %s --split-input-file --gpt-lower-fp8 --cse | FileCheck %s --check-prefix=PAIR
// RUN: gpt-opt %s --split-input-file --gpt-lower-fp8=fold-gelu=false --cse | FileCheck %s --check-prefix=NOFOLD

// Tests that a forward product X W^T (already TN) quantizes both operands
// as they are, each with its own scale, multiplies by the inverses, and
// uses fast accumulation (e4m3 x e4m3).
// CHECK-LABEL: func.func @forward_product
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xbf16>, %[[W:.*]]: tensor<48x16xbf16>
// CHECK: %[[SX:.*]], %[[IX:.*]] = gpt.fp8_scale e4m3 %[[X]] : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
// CHECK: %[[QX:.*]] = gpt.fp8_quantize e4m3 %[[X]], %[[SX]] : (tensor<2x8x16xbf16>, tensor<f32>) -> tensor<2x8x16xf8E4M3FN>
// CHECK: %[[SW:.*]], %[[IW:.*]] = gpt.fp8_scale e4m3 %[[W]]
// CHECK: %[[QW:.*]] = gpt.fp8_quantize e4m3 %[[W]], %[[SW]] : (tensor<48x16xbf16>, tensor<f32>) -> tensor<48x16xf8E4M3FN>
// CHECK: gpt.scaled_matmul %[[QX]], %[[IX]], %[[QW]], %[[IW]] {fast_accum, transpose_rhs} : (tensor<2x8x16xf8E4M3FN>, tensor<f32>, tensor<48x16xf8E4M3FN>, tensor<f32>) -> tensor<2x8x48xbf16>
// CHECK-NOT: gpt.fp8_matmul
func.func @forward_product(%x: tensor<2x8x16xbf16>, %w: tensor<48x16xbf16>) -> tensor<2x8x48xbf16> {
  %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
  return %y : tensor<2x8x48xbf16>
}

// -----

// Tests that dX = dY W quantizes W as its transpose, and that a product
// with an e5m2 operand accumulates exactly (no fast_accum).
// CHECK-LABEL: func.func @input_gradient
// CHECK-SAME:    %[[DY:.*]]: tensor<16x48xbf16>, %[[W:.*]]: tensor<48x16xbf16>
// CHECK: %[[QDY:.*]] = gpt.fp8_quantize e5m2 %[[DY]], %{{.*}} : (tensor<16x48xbf16>, tensor<f32>) -> tensor<16x48xf8E5M2>
// CHECK: %[[QW:.*]] = gpt.fp8_quantize e4m3 %[[W]], %{{.*}} {transpose} : (tensor<48x16xbf16>, tensor<f32>) -> tensor<16x48xf8E4M3FN>
// CHECK: gpt.scaled_matmul %[[QDY]], %{{.*}}, %[[QW]], %{{.*}} {transpose_rhs} : (tensor<16x48xf8E5M2>, tensor<f32>, tensor<16x48xf8E4M3FN>, tensor<f32>) -> tensor<16x16xbf16>
func.func @input_gradient(%dy: tensor<16x48xbf16>, %w: tensor<48x16xbf16>) -> tensor<16x16xbf16> {
  %dx = gpt.fp8_matmul e5m2 %dy, e4m3 %w : (tensor<16x48xbf16>, tensor<48x16xbf16>) -> tensor<16x16xbf16>
  return %dx : tensor<16x16xbf16>
}

// -----

// Tests that dW = dY^T X quantizes both operands as their transposes.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME:    %[[DY:.*]]: tensor<16x48xbf16>, %[[X:.*]]: tensor<16x16xbf16>
// CHECK: %[[QDY:.*]] = gpt.fp8_quantize e5m2 %[[DY]], %{{.*}} {transpose} : (tensor<16x48xbf16>, tensor<f32>) -> tensor<48x16xf8E5M2>
// CHECK: %[[QX:.*]] = gpt.fp8_quantize e4m3 %[[X]], %{{.*}} {transpose} : (tensor<16x16xbf16>, tensor<f32>) -> tensor<16x16xf8E4M3FN>
// CHECK: gpt.scaled_matmul %[[QDY]], %{{.*}}, %[[QX]], %{{.*}} {transpose_rhs} : {{.*}} -> tensor<48x16xbf16>
func.func @weight_gradient(%dy: tensor<16x48xbf16>, %x: tensor<16x16xbf16>) -> tensor<48x16xbf16> {
  %dw = gpt.fp8_matmul e5m2 %dy, e4m3 %x {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x16xbf16>) -> tensor<48x16xbf16>
  return %dw : tensor<48x16xbf16>
}

// -----

// Tests that the scale is taken of a reshape's input, so that after CSE
// the forward X and the flattened X of the weight gradient share one
// gpt.fp8_scale while each layout keeps its own quantization.
// CSE-LABEL: func.func @shared_scale
// CSE-SAME:    %[[X:.*]]: tensor<2x8x16xbf16>
// CSE: %[[SX:.*]], %{{.*}} = gpt.fp8_scale e4m3 %[[X]]
// CSE: gpt.fp8_quantize e4m3 %[[X]], %[[SX]] :
// CSE: %[[X2:.*]] = gpt.reshape %[[X]]
// CSE-NOT: gpt.fp8_scale e4m3 %[[X]]
// CSE: gpt.fp8_quantize e4m3 %[[X2]], %[[SX]] {transpose}
func.func @shared_scale(%x: tensor<2x8x16xbf16>, %w: tensor<48x16xbf16>, %dy: tensor<16x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48x16xbf16>) {
  %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
  %x2 = gpt.reshape %x : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  %dw = gpt.fp8_matmul e5m2 %dy, e4m3 %x2 {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x16xbf16>) -> tensor<48x16xbf16>
  return %y, %dw : tensor<2x8x48xbf16>, tensor<48x16xbf16>
}

// -----

// Tests that an operand quantized both ways (X for the forward, X^T for
// dW; dY for dX, dY^T for dW) gets one gpt.fp8_cast_transpose of the
// unflattened tensor, at the first use, whose results replace both.
// PAIR-LABEL: func.func @paired_layouts
// PAIR-SAME:    %[[X:.*]]: tensor<2x8x16xbf16>, %[[W:.*]]: tensor<48x16xbf16>, %[[DY:.*]]: tensor<2x8x48xbf16>
// PAIR: %[[SX:.*]], %[[IX:.*]] = gpt.fp8_scale e4m3 %[[X]]
// PAIR: %[[QX:.*]], %[[QXT:.*]] = gpt.fp8_cast_transpose e4m3 %[[X]], %[[SX]] : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
// PAIR: gpt.scaled_matmul %[[QX]], %[[IX]]
// PAIR: %[[QDY:.*]], %[[QDYT:.*]] = gpt.fp8_cast_transpose e5m2 %[[DY]], %{{.*}} : (tensor<2x8x48xbf16>, tensor<f32>) -> (tensor<2x8x48xf8E5M2>, tensor<48x16xf8E5M2>)
// PAIR-NOT: gpt.fp8_quantize e4m3 %{{.*}} {transpose}
// PAIR: gpt.scaled_matmul %[[QDYT]], %{{.*}}, %[[QXT]], %[[IX]] {transpose_rhs} : {{.*}} -> tensor<48x16xbf16>
func.func @paired_layouts(%x: tensor<2x8x16xbf16>, %w: tensor<48x16xbf16>, %dy: tensor<2x8x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<48x16xbf16>) {
  %y = gpt.fp8_matmul e4m3 %x, e4m3 %w {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
  %dx = gpt.fp8_matmul e5m2 %dy, e4m3 %w : (tensor<2x8x48xbf16>, tensor<48x16xbf16>) -> tensor<2x8x16xbf16>
  %dy2 = gpt.reshape %dy : tensor<2x8x48xbf16> to tensor<16x48xbf16>
  %x2 = gpt.reshape %x : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  %dw = gpt.fp8_matmul e5m2 %dy2, e4m3 %x2 {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x16xbf16>) -> tensor<48x16xbf16>
  return %y, %dx, %dw : tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<48x16xbf16>
}

// -----

// Tests that a weight quantized in two micro-batches, each both ways (W
// for the forward, W^T for dX), gets one gpt.fp8_cast_transpose whose
// codes all four products read: no later quantization of W.
// PAIR-LABEL: func.func @reused_layouts
// PAIR-SAME:    %[[X0:[^:]*]]: tensor<16x16xbf16>, %[[X1:[^:]*]]: tensor<16x16xbf16>, %[[W:[^:]*]]: tensor<48x16xbf16>
// PAIR: %[[SW:.*]], %[[IW:.*]] = gpt.fp8_scale e4m3 %[[W]]
// PAIR: %[[QW:.*]], %[[QWT:.*]] = gpt.fp8_cast_transpose e4m3 %[[W]], %[[SW]]
// PAIR-NOT: gpt.fp8_quantize e4m3 %[[W]]
// PAIR: gpt.scaled_matmul %{{.*}}, %{{.*}}, %[[QW]], %[[IW]] {fast_accum, transpose_rhs}
// PAIR: gpt.scaled_matmul %{{.*}}, %{{.*}}, %[[QWT]], %[[IW]] {transpose_rhs}
// PAIR: gpt.scaled_matmul %{{.*}}, %{{.*}}, %[[QW]], %[[IW]] {fast_accum, transpose_rhs}
// PAIR: gpt.scaled_matmul %{{.*}}, %{{.*}}, %[[QWT]], %[[IW]] {transpose_rhs}
func.func @reused_layouts(%x0: tensor<16x16xbf16>, %x1: tensor<16x16xbf16>, %w: tensor<48x16xbf16>, %dy0: tensor<16x48xbf16>, %dy1: tensor<16x48xbf16>) -> (tensor<16x48xbf16>, tensor<16x16xbf16>, tensor<16x48xbf16>, tensor<16x16xbf16>) {
  %y0 = gpt.fp8_matmul e4m3 %x0, e4m3 %w {transpose_rhs} : (tensor<16x16xbf16>, tensor<48x16xbf16>) -> tensor<16x48xbf16>
  %dx0 = gpt.fp8_matmul e5m2 %dy0, e4m3 %w : (tensor<16x48xbf16>, tensor<48x16xbf16>) -> tensor<16x16xbf16>
  %y1 = gpt.fp8_matmul e4m3 %x1, e4m3 %w {transpose_rhs} : (tensor<16x16xbf16>, tensor<48x16xbf16>) -> tensor<16x48xbf16>
  %dx1 = gpt.fp8_matmul e5m2 %dy1, e4m3 %w : (tensor<16x48xbf16>, tensor<48x16xbf16>) -> tensor<16x16xbf16>
  return %y0, %dx0, %y1, %dx1 : tensor<16x48xbf16>, tensor<16x16xbf16>, tensor<16x48xbf16>, tensor<16x16xbf16>
}

// -----

// Tests that a GELU only FP8 ops read (the forward product and, through a
// reshape, the weight gradient) is not stored: its scale and its
// cast-transpose read the pre-activation with {gelu}.
// PAIR-LABEL: func.func @gelu_folded
// PAIR-SAME:    %[[PRE:[^:]*]]: tensor<2x8x16xbf16>
// PAIR-NOT: gpt.gelu
// PAIR: %[[S:.*]], %[[I:.*]] = gpt.fp8_scale e4m3 %[[PRE]] {gelu} : (tensor<2x8x16xbf16>) -> (tensor<f32>, tensor<f32>)
// PAIR: %[[Q:.*]], %[[QT:.*]] = gpt.fp8_cast_transpose e4m3 %[[PRE]], %[[S]] {gelu} : (tensor<2x8x16xbf16>, tensor<f32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>)
// PAIR-NOT: gpt.gelu
// PAIR: gpt.scaled_matmul %{{.*}}, %{{.*}}, %[[QT]], %[[I]] {transpose_rhs}
// NOFOLD-LABEL: func.func @gelu_folded
// NOFOLD: %[[H:.*]] = gpt.gelu
// NOFOLD-NOT: {gelu}
// NOFOLD: gpt.fp8_cast_transpose e4m3 %[[H]]
func.func @gelu_folded(%pre: tensor<2x8x16xbf16>, %w: tensor<48x16xbf16>, %dy: tensor<16x48xbf16>) -> (tensor<2x8x48xbf16>, tensor<48x16xbf16>) {
  %h = gpt.gelu %pre : tensor<2x8x16xbf16>
  %y = gpt.fp8_matmul e4m3 %h, e4m3 %w {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
  %h2 = gpt.reshape %h : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  %dw = gpt.fp8_matmul e5m2 %dy, e4m3 %h2 {transpose_lhs} : (tensor<16x48xbf16>, tensor<16x16xbf16>) -> tensor<48x16xbf16>
  return %y, %dw : tensor<2x8x48xbf16>, tensor<48x16xbf16>
}

// -----

// Tests that a GELU something else reads too stays, and the FP8 ops read
// its result.
// PAIR-LABEL: func.func @gelu_kept
// PAIR: %[[H:.*]] = gpt.gelu
// PAIR: gpt.fp8_scale e4m3 %[[H]] :
// PAIR-NOT: {gelu}
// PAIR: return
func.func @gelu_kept(%pre: tensor<2x8x16xbf16>, %w: tensor<48x16xbf16>) -> (tensor<2x8x48xbf16>, tensor<2x8x16xbf16>) {
  %h = gpt.gelu %pre : tensor<2x8x16xbf16>
  %y = gpt.fp8_matmul e4m3 %h, e4m3 %w {transpose_rhs} : (tensor<2x8x16xbf16>, tensor<48x16xbf16>) -> tensor<2x8x48xbf16>
  return %y, %h : tensor<2x8x48xbf16>, tensor<2x8x16xbf16>
}
