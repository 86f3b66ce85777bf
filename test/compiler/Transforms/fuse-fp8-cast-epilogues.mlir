// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-cast-gelu-grad,fp8-cast-column-sum" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-cast-column-sum" | FileCheck %s --check-prefix=SUMS
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-cast-gelu-grad" | FileCheck %s --check-prefix=GELU

// Tests that the MLP's GELU gradient, its bias sum, its delayed scale and
// its cast become one cast-sum reading the GEMM output and the
// pre-activation: the scale reads them too, the histories carry over, and
// the GELU gradient and the reduction are gone.
// CHECK-LABEL: func.func @gelu_gradient
// CHECK-SAME:    %[[DH:[^:]*]]: tensor<2x8x64xbf16>, %[[PRE:[^:]*]]: tensor<2x8x64xbf16>, %[[H:[^:]*]]: tensor<16xf32>
// CHECK-NEXT: %[[S:.*]], %[[INV:.*]], %[[SH:.*]] = gpt.fp8_scale e5m2 %[[DH]] gelu_grad %[[PRE]] history %[[H]] : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
// CHECK-NEXT: %[[Q:.*]], %[[QT:.*]], %[[SUM:.*]], %[[REC:.*]] = gpt.fp8_cast_transpose_sum e5m2 %[[DH]] gelu_grad %[[PRE]], %[[S]] history %[[SH]] : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<f32>, tensor<16xf32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>, tensor<16xf32>)
// CHECK-NEXT: return %[[Q]], %[[QT]], %[[INV]], %[[SUM]], %[[REC]]
// CHECK-NOT: gpt.gelu_grad
// CHECK-NOT: gpt.reduce
// SUMS-LABEL: func.func @gelu_gradient
// SUMS: %[[G:.*]] = gpt.gelu_grad
// SUMS: gpt.fp8_scale e5m2 %[[G]] history
// SUMS: gpt.fp8_cast_transpose_sum e5m2 %[[G]], %{{.*}} history
// SUMS-NOT: gpt.reduce
// Without column sums the reduction still reads the GELU gradient, which
// then stays stored and cast as it is.
// GELU-LABEL: func.func @gelu_gradient
// GELU-NEXT: %[[G:.*]] = gpt.gelu_grad
// GELU-NEXT: gpt.reduce sum %[[G]]
// GELU-NEXT: gpt.fp8_scale e5m2 %[[G]] history
// GELU-NEXT: gpt.fp8_cast_transpose e5m2 %[[G]],
func.func @gelu_gradient(%dh: tensor<2x8x64xbf16>, %pre: tensor<2x8x64xbf16>, %h: tensor<16xf32>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>, tensor<64xbf16>, tensor<16xf32>) {
  %g = gpt.gelu_grad %dh, %pre : tensor<2x8x64xbf16>
  %db = gpt.reduce sum %g dims [0, 1] : (tensor<2x8x64xbf16>) -> tensor<64xbf16>
  %s, %inv, %sh = gpt.fp8_scale e5m2 %g history %h : (tensor<2x8x64xbf16>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>)
  %q, %qt, %rec = gpt.fp8_cast_transpose e5m2 %g, %s history %sh : (tensor<2x8x64xbf16>, tensor<f32>, tensor<16xf32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<16xf32>)
  return %q, %qt, %inv, %db, %rec : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<f32>, tensor<64xbf16>, tensor<16xf32>
}

// -----

// Tests that a residual gradient's bias sum joins its cast; the scale of a
// plain gradient is left as it is.
// CHECK-LABEL: func.func @bias_sum
// SUMS-LABEL: func.func @bias_sum
// CHECK-SAME:    %[[DY:[^:]*]]: tensor<2x8x64xbf16>
// CHECK-NEXT: %[[S:.*]], %[[INV:.*]] = gpt.fp8_scale e5m2 %[[DY]] :
// CHECK-NEXT: %[[Q:.*]], %[[QT:.*]], %[[SUM:.*]] = gpt.fp8_cast_transpose_sum e5m2 %[[DY]], %[[S]] : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>)
// CHECK-NEXT: return %[[Q]], %[[QT]], %[[SUM]]
func.func @bias_sum(%dy: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>) {
  %db = gpt.reduce sum %dy dims [0, 1] : (tensor<2x8x64xbf16>) -> tensor<64xbf16>
  %s, %inv = gpt.fp8_scale e5m2 %dy : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %dy, %s : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %db : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>
}

// -----

// Tests that a sum read before the cast stays a reduction: the cast's
// kernel runs too late for that reader.
// CHECK-LABEL: func.func @sum_read_early
// CHECK: gpt.reduce sum
// CHECK: gpt.fp8_cast_transpose e5m2
// CHECK-NOT: gpt.fp8_cast_transpose_sum
func.func @sum_read_early(%dy: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>) {
  %db = gpt.reduce sum %dy dims [0, 1] : (tensor<2x8x64xbf16>) -> tensor<64xbf16>
  %db2 = gpt.add %db, %db : tensor<64xbf16>
  %s, %inv = gpt.fp8_scale e5m2 %dy : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %dy, %s : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %db2 : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>
}

// -----

// Tests that a GELU gradient something else reads is kept and cast as it
// is; its sum still joins the cast.
// CHECK-LABEL: func.func @gelu_gradient_read_elsewhere
// CHECK: %[[G:.*]] = gpt.gelu_grad
// CHECK-NEXT: gpt.fp8_scale e5m2 %[[G]] :
// CHECK-NEXT: gpt.fp8_cast_transpose_sum e5m2 %[[G]], %{{.*}} :
func.func @gelu_gradient_read_elsewhere(%dh: tensor<2x8x64xbf16>, %pre: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>, tensor<2x8x64xbf16>) {
  %g = gpt.gelu_grad %dh, %pre : tensor<2x8x64xbf16>
  %db = gpt.reduce sum %g dims [0, 1] : (tensor<2x8x64xbf16>) -> tensor<64xbf16>
  %s, %inv = gpt.fp8_scale e5m2 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %s : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %db, %g : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>, tensor<64xbf16>, tensor<2x8x64xbf16>
}

// -----

// Tests that a GELU gradient with no bias sum still folds (its sum result
// goes unread).
// CHECK-LABEL: func.func @gelu_gradient_without_bias
// GELU-LABEL: func.func @gelu_gradient_without_bias
// GELU-NEXT: gpt.fp8_scale e5m2 %arg0 gelu_grad %arg1 :
// GELU-NEXT: gpt.fp8_cast_transpose_sum e5m2 %arg0 gelu_grad %arg1,
// CHECK-NEXT: gpt.fp8_scale e5m2 %arg0 gelu_grad %arg1 :
// CHECK-NEXT: %[[Q:.*]], %[[QT:.*]], %{{.*}} = gpt.fp8_cast_transpose_sum e5m2 %arg0 gelu_grad %arg1,
// CHECK-NEXT: return %[[Q]], %[[QT]]
func.func @gelu_gradient_without_bias(%dh: tensor<2x8x64xbf16>, %pre: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>) {
  %g = gpt.gelu_grad %dh, %pre : tensor<2x8x64xbf16>
  %s, %inv = gpt.fp8_scale e5m2 %g : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e5m2 %g, %s : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt : tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>
}

// -----

// Tests that a forward cast of a GELU (gpt-lower-fp8's fold) and a plain
// cast with no sum are left alone.
// CHECK-LABEL: func.func @nothing_to_fold
// CHECK-NEXT: gpt.fp8_scale e4m3 %arg0 {gelu}
// CHECK-NEXT: gpt.fp8_cast_transpose e4m3 %arg0, %{{.*}} {gelu}
// CHECK-NEXT: gpt.fp8_scale e5m2 %arg1 :
// CHECK-NEXT: gpt.fp8_cast_transpose e5m2 %arg1,
// CHECK-NOT: gpt.fp8_cast_transpose_sum
func.func @nothing_to_fold(%pre: tensor<2x8x64xbf16>, %dy: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>) {
  %s, %inv = gpt.fp8_scale e4m3 %pre {gelu} : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %pre, %s {gelu} : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>)
  %s2, %inv2 = gpt.fp8_scale e5m2 %dy : (tensor<2x8x64xbf16>) -> (tensor<f32>, tensor<f32>)
  %q2, %qt2 = gpt.fp8_cast_transpose e5m2 %dy, %s2 : (tensor<2x8x64xbf16>, tensor<f32>) -> (tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>)
  return %q, %qt, %q2, %qt2 : tensor<2x8x64xf8E4M3FN>, tensor<64x16xf8E4M3FN>, tensor<2x8x64xf8E5M2>, tensor<64x16xf8E5M2>
}
