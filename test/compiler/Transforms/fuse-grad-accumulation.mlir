// RUN: gpt-opt %s --split-input-file --gpt-fuse-grad-accumulation | FileCheck %s

// Tests that two micro-batches' weight gradients are summed in the second
// GEMM: the first writes f32 (its cast folds away) and the second adds its
// product to it (accumulate).
// CHECK-LABEL: func.func @two_micro_batches
// CHECK-SAME:    %[[A0:[^:]*]]: tensor<48x16xf8E5M2>, %[[A1:[^:]*]]: tensor<48x16xf8E5M2>, %[[B:[^:]*]]: tensor<16x16xf8E4M3FN>, %[[S:[^:]*]]: tensor<f32>
// CHECK:         %[[G0:.*]] = gpt.scaled_matmul %[[A0]], %[[S]], %[[B]], %[[S]] {transpose_rhs} : {{.*}} -> tensor<48x16xf32>
// CHECK-NEXT:    %[[SUM:.*]] = gpt.scaled_matmul %[[A1]], %[[S]], %[[B]], %[[S]] accumulate %[[G0]] {transpose_rhs} : {{.*}}, tensor<48x16xf32>) -> tensor<48x16xf32>
// CHECK-NOT:     gpt.cast
// CHECK-NOT:     gpt.add
// CHECK:         return %[[SUM]]
func.func @two_micro_batches(%a0: tensor<48x16xf8E5M2>, %a1: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> tensor<48x16xf32> {
  %p0 = gpt.scaled_matmul %a0, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %sum = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
  return %sum : tensor<48x16xf32>
}

// -----

// Tests that a third micro-batch accumulates into the second's sum.
// CHECK-LABEL: func.func @three_micro_batches
// CHECK:         %[[G0:.*]] = gpt.scaled_matmul %arg0, {{.*}} -> tensor<48x16xf32>
// CHECK-NEXT:    %[[S1:.*]] = gpt.scaled_matmul %arg1, {{.*}} accumulate %[[G0]]
// CHECK-NEXT:    %[[S2:.*]] = gpt.scaled_matmul %arg2, {{.*}} accumulate %[[S1]]
// CHECK-NOT:     gpt.add
// CHECK:         return %[[S2]]
func.func @three_micro_batches(%a0: tensor<48x16xf8E5M2>, %a1: tensor<48x16xf8E5M2>, %a2: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> tensor<48x16xf32> {
  %p0 = gpt.scaled_matmul %a0, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p2 = gpt.scaled_matmul %a2, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %s1 = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
  %g2 = gpt.cast %p2 : tensor<48x16xbf16> to tensor<48x16xf32>
  %s2 = gpt.add %s1, %g2 {gpt.micro_batch = 2 : i64} : tensor<48x16xf32>
  return %s2 : tensor<48x16xf32>
}

// -----

// Tests that a sum gpt-insert-optimizer did not mark stays an add (and its
// casts stay).
// CHECK-LABEL: func.func @unmarked_add
// CHECK:         gpt.cast
// CHECK:         gpt.cast
// CHECK:         gpt.add
// CHECK-NOT:     accumulate
func.func @unmarked_add(%a0: tensor<48x16xf8E5M2>, %a1: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> tensor<48x16xf32> {
  %p0 = gpt.scaled_matmul %a0, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %sum = gpt.add %g0, %g1 : tensor<48x16xf32>
  return %sum : tensor<48x16xf32>
}

// -----

// Tests that a product something else reads keeps its bf16 result and its
// sum stays an add.
// CHECK-LABEL: func.func @product_read_elsewhere
// CHECK:         %[[P1:.*]] = gpt.scaled_matmul %arg1, {{.*}} -> tensor<48x16xbf16>
// CHECK:         gpt.add
// CHECK:         return {{.*}}, %[[P1]]
func.func @product_read_elsewhere(%a0: tensor<48x16xf8E5M2>, %a1: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> (tensor<48x16xf32>, tensor<48x16xbf16>) {
  %p0 = gpt.scaled_matmul %a0, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %sum = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
  return %sum, %p1 : tensor<48x16xf32>, tensor<48x16xbf16>
}

// -----

// Tests that a running sum computed after the next product stays an add:
// the GEMM would read it before it exists.
// CHECK-LABEL: func.func @sum_after_product
// CHECK:         %[[P1:.*]] = gpt.scaled_matmul %arg1, {{.*}} -> tensor<48x16xbf16>
// CHECK:         gpt.add
// CHECK-NOT:     accumulate
func.func @sum_after_product(%acc0: tensor<48x16xf32>, %a1: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> tensor<48x16xf32> {
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %acc = gpt.scale %acc0 {factor = 2.0 : f64} : tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %sum = gpt.add %acc, %g1 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
  return %sum : tensor<48x16xf32>
}

// -----

// Tests that the running sum may be the add's second operand: the earlier
// product is still the one widened and the later one accumulates into it.
// CHECK-LABEL: func.func @running_sum_second
// CHECK:         %[[G0:.*]] = gpt.scaled_matmul %arg0, {{.*}} -> tensor<48x16xf32>
// CHECK-NEXT:    %[[SUM:.*]] = gpt.scaled_matmul %arg1, {{.*}} accumulate %[[G0]]
// CHECK-NOT:     gpt.add
// CHECK:         return %[[SUM]]
func.func @running_sum_second(%a0: tensor<48x16xf8E5M2>, %a1: tensor<48x16xf8E5M2>, %b: tensor<16x16xf8E4M3FN>, %s: tensor<f32>) -> tensor<48x16xf32> {
  %p0 = gpt.scaled_matmul %a0, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %p1 = gpt.scaled_matmul %a1, %s, %b, %s {transpose_rhs} : (tensor<48x16xf8E5M2>, tensor<f32>, tensor<16x16xf8E4M3FN>, tensor<f32>) -> tensor<48x16xbf16>
  %g0 = gpt.cast %p0 : tensor<48x16xbf16> to tensor<48x16xf32>
  %g1 = gpt.cast %p1 : tensor<48x16xbf16> to tensor<48x16xf32>
  %sum = gpt.add %g1, %g0 {gpt.micro_batch = 1 : i64} : tensor<48x16xf32>
  return %sum : tensor<48x16xf32>
}
