// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-gelu-matmul-codes" | FileCheck %s

// Tests that a product whose GELU a delayed-scaling cast reads, with the
// cast's scale and shifted history made before the product, becomes one
// GEMM that keeps the bf16 pre-activation and writes the GELU's codes and
// amax; a byte transpose gives the second layout, and every reader of the
// product, the codes and the history gets the fused op's.
// CHECK-LABEL: func.func @steady
// CHECK-SAME:    %[[H:[^:]*]]: tensor<4xf32>, %[[X:[^:]*]]: tensor<8x16xf8E4M3FN>, %[[SX:[^:]*]]: tensor<f32>, %[[W:[^:]*]]: tensor<64x16xf8E4M3FN>, %[[SW:[^:]*]]: tensor<f32>, %[[B:[^:]*]]: tensor<64xbf16>
// CHECK: %[[R:.*]]:3 = gpt.fp8_delayed_scales (e4m3 %[[H]])
// CHECK: %[[PRE:.*]], %[[Q:.*]], %[[REC:.*]] = gpt.scaled_matmul_gelu_fp8 e4m3 %[[X]], %[[SX]], %[[W]], %[[SW]], %[[R]]#0 history %[[R]]#2 bias %[[B]] {fast_accum} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<4xf32>)
// CHECK-NOT: gpt.scaled_matmul {{.*}}:
// CHECK-NOT: gpt.fp8_cast_transpose
// CHECK: %[[QT:.*]] = gpt.fp8_transpose %[[Q]] : (tensor<8x64xf8E4M3FN>) -> tensor<64x8xf8E4M3FN>
// CHECK: return %[[PRE]], %[[Q]], %[[QT]], %[[REC]]
func.func @steady(%h: tensor<4xf32>, %x: tensor<8x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>, %b: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>) {
  %r:3 = gpt.fp8_delayed_scales (e4m3 %h) : tensor<4xf32>
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw bias %b {fast_accum, transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %r#0 history %r#2 {gelu} : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %pre, %q, %qt, %rec : tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a product without a bias, over a batch of rows, fuses too
// and that unread transposed codes need no byte transpose.
// CHECK-LABEL: func.func @no_bias
// CHECK: gpt.scaled_matmul_gelu_fp8 e4m3 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}#0 history %{{.*}}#2 : (tensor<2x4x16xf8E4M3FN>, tensor<f32>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<2x4x32xbf16>, tensor<2x4x32xf8E4M3FN>, tensor<4xf32>)
// CHECK-NOT: gpt.fp8_transpose
func.func @no_bias(%h: tensor<4xf32>, %x: tensor<2x4x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<32x16xf8E4M3FN>, %sw: tensor<f32>)
    -> (tensor<2x4x32xf8E4M3FN>, tensor<4xf32>) {
  %r:3 = gpt.fp8_delayed_scales (e4m3 %h) : tensor<4xf32>
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw {transpose_rhs} : (tensor<2x4x16xf8E4M3FN>, tensor<f32>, tensor<32x16xf8E4M3FN>, tensor<f32>) -> tensor<2x4x32xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %r#0 history %r#2 {gelu} : (tensor<2x4x32xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<2x4x32xf8E4M3FN>, tensor<32x8xf8E4M3FN>, tensor<4xf32>)
  return %q, %rec : tensor<2x4x32xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a scale measured from the product itself (the first step's)
// keeps the product and its cast: the GEMM cannot use a scale it makes.
// CHECK-LABEL: func.func @scale_of_the_product
// CHECK: gpt.scaled_matmul %
// CHECK: gpt.fp8_scale e4m3
// CHECK: gpt.fp8_cast_transpose e4m3 {{.*}} {gelu}
// CHECK-NOT: gpt.scaled_matmul_gelu_fp8
func.func @scale_of_the_product(%h: tensor<4xf32>, %x: tensor<8x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>)
    -> (tensor<8x64xf8E4M3FN>, tensor<4xf32>) {
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<8x64xbf16>
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %pre history %h {gelu} : (tensor<8x64xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %s history %h1 {gelu} : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %q, %rec : tensor<8x64xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a history that is not a shifted one (its first element may be
// an amax already) is left to the cast, which raises it; the GEMM's amax_D
// would overwrite it.
// CHECK-LABEL: func.func @unshifted_history
// CHECK: gpt.fp8_cast_transpose e4m3 {{.*}} {gelu}
// CHECK-NOT: gpt.scaled_matmul_gelu_fp8
func.func @unshifted_history(%h: tensor<4xf32>, %s: tensor<f32>, %x: tensor<8x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>)
    -> (tensor<8x64xf8E4M3FN>, tensor<4xf32>) {
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<8x64xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %s history %h {gelu} : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %q, %rec : tensor<8x64xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a cast without gelu (a plain activation's) is not this
// pass's: the GEMM would apply a GELU the graph does not have.
// CHECK-LABEL: func.func @no_gelu
// CHECK: gpt.scaled_matmul %
// CHECK: gpt.fp8_cast_transpose e4m3 %{{.*}}, %{{.*}} history %{{.*}} :
// CHECK-NOT: gpt.scaled_matmul_gelu_fp8
func.func @no_gelu(%h: tensor<4xf32>, %x: tensor<8x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>)
    -> (tensor<8x64xf8E4M3FN>, tensor<4xf32>) {
  %r:3 = gpt.fp8_delayed_scales (e4m3 %h) : tensor<4xf32>
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<8x64xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %r#0 history %r#2 : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %q, %rec : tensor<8x64xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a product that accumulates into a tensor (a weight gradient
// summed over micro-batches) is left alone.
// CHECK-LABEL: func.func @accumulating
// CHECK: gpt.scaled_matmul {{.*}} accumulate
// CHECK-NOT: gpt.scaled_matmul_gelu_fp8
func.func @accumulating(%h: tensor<4xf32>, %x: tensor<8x16xf8E4M3FN>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>, %acc: tensor<8x64xbf16>)
    -> (tensor<8x64xf8E4M3FN>, tensor<4xf32>) {
  %r:3 = gpt.fp8_delayed_scales (e4m3 %h) : tensor<4xf32>
  %pre = gpt.scaled_matmul %x, %sx, %w, %sw accumulate %acc {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %pre, %r#0 history %r#2 {gelu} : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %q, %rec : tensor<8x64xf8E4M3FN>, tensor<4xf32>
}
