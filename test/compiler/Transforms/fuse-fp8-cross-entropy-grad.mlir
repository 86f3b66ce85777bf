// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-cross-entropy-grad" | FileCheck %s

// Tests that the logits' gradient, scaled by its own amax and cast into
// both layouts, becomes the FP8 gradient op at the gradient and a byte
// transpose; the GEMMs read its codes and inverse, and the bf16 gradient,
// its scale and its cast are gone.
// CHECK-LABEL: func.func @head_gradient
// CHECK-SAME:    %[[D:[^:]*]]: tensor<f32>, %[[L:[^:]*]]: tensor<2x8x64xbf16>, %[[T:[^:]*]]: tensor<2x8xi32>
// CHECK-NEXT: %[[Q:.*]], %[[INV:.*]] = gpt.fp8_cross_entropy_grad %[[D]], %[[L]], %[[T]] {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<2x8x64xf8E5M2>, tensor<f32>)
// CHECK-NEXT: %[[QT:.*]] = gpt.fp8_transpose %[[Q]] : (tensor<2x8x64xf8E5M2>) -> tensor<64x16xf8E5M2>
// CHECK-NEXT: %[[DX:.*]] = gpt.scaled_matmul %[[Q]], %[[INV]], %{{.*}}, %{{.*}} {transpose_rhs}
// CHECK-NEXT: %[[DW:.*]] = gpt.scaled_matmul %[[QT]], %[[INV]], %{{.*}}, %{{.*}} {transpose_rhs}
// CHECK-NOT: gpt.cross_entropy_grad
// CHECK-NOT: gpt.fp8_scale
// CHECK-NOT: gpt.fp8_cast_transpose
func.func @head_gradient(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>,
                         %wt: tensor<16x64xf8E4M3FN>, %xt: tensor<16x16xf8E4M3FN>, %s: tensor<f32>)
    -> (tensor<2x8x16xbf16>, tensor<64x16xbf16>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %sg, %ig = gpt.fp8_scale e5m2 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %sg : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  %dx = gpt.scaled_matmul %q, %ig, %wt, %s {transpose_rhs} : (tensor<2x8x64xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<2x8x16xbf16>
  %dw = gpt.scaled_matmul %qt, %ig, %xt, %s {transpose_rhs} : (tensor<64x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<64x16xbf16>
  return %dx, %dw : tensor<2x8x16xbf16>, tensor<64x16xbf16>
}

// -----

// Tests that a cast of the flattened gradient (through a reshape) stays:
// the codes' op has the logits' shape, and FP8 codes have no reshape. The
// scale may still read through the reshape (it is the same values).
// CHECK-LABEL: func.func @flattened_gradient
// CHECK: gpt.cross_entropy_grad
// CHECK: gpt.fp8_cast_transpose e5m2
// CHECK-NOT: gpt.fp8_cross_entropy_grad
func.func @flattened_gradient(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>)
    -> (tensor<16x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %flat = gpt.reshape %g : tensor<2x8x64xbf16> to tensor<16x64xbf16>
  %sg, %ig = gpt.fp8_scale e5m2 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %flat, %sg : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %ig : tensor<16x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>
}

// -----

// Tests that a gradient whose scale reads it through a reshape is still
// rewritten (the scale is of the values, not the shape), and the reshape
// goes with the scale.
// CHECK-LABEL: func.func @scale_through_reshape
// CHECK-NEXT: gpt.fp8_cross_entropy_grad
// CHECK-NEXT: gpt.fp8_transpose
// CHECK-NEXT: return
func.func @scale_through_reshape(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %flat = gpt.reshape %g : tensor<2x8x64xbf16> to tensor<16x64xbf16>
  %sg, %ig = gpt.fp8_scale e5m2 %flat : (tensor<16x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %sg : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %ig : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>
}

// -----

// Tests that a gradient something else reads in bf16 stays as it is: the
// bf16 tensor is needed anyway.
// CHECK-LABEL: func.func @gradient_read_elsewhere
// CHECK: gpt.cross_entropy_grad
// CHECK: gpt.fp8_scale e5m2
// CHECK: gpt.fp8_cast_transpose e5m2
// CHECK-NOT: gpt.fp8_cross_entropy_grad
func.func @gradient_read_elsewhere(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>, tensor<2x8x64xbf16>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %sg, %ig = gpt.fp8_scale e5m2 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %sg : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %ig, %g : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>, tensor<2x8x64xbf16>
}

// -----

// Tests that a cast whose scale is not the gradient's own (another
// tensor's) stays: its codes are of that scale.
// CHECK-LABEL: func.func @foreign_scale
// CHECK: gpt.cross_entropy_grad
// CHECK: gpt.fp8_cast_transpose e5m2
// CHECK-NOT: gpt.fp8_cross_entropy_grad
func.func @foreign_scale(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>,
                         %other: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %so, %io = gpt.fp8_scale e5m2 %other : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %so : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %io : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>
}

// -----

// Tests that an e4m3 cast of the gradient (not the gradient format the
// op writes) stays.
// CHECK-LABEL: func.func @e4m3_cast
// CHECK: gpt.fp8_cast_transpose e4m3
// CHECK-NOT: gpt.fp8_cross_entropy_grad
func.func @e4m3_cast(%dloss: tensor<f32>, %logits: tensor<2x8x64xbf16>, %t: tensor<2x8xi32>)
    -> (tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<f32>) {
  %g = gpt.cross_entropy_grad %dloss, %logits, %t {vocab_size = 60 : i64} : (tensor<f32>, tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %sg, %ig = gpt.fp8_scale e4m3 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %g, %sg : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>)
  return %q, %qt, %ig : tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<f32>
}
