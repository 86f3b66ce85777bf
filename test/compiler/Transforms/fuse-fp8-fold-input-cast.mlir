// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-fold-input-cast" | FileCheck %s

// Tests that an f32 master weight's bf16 copy read only by an FP8
// cast-transpose is folded into it: the cast reads the f32 weight with
// rounded_to = bf16, keeps its scale and history, and the copy is gone.
// CHECK-LABEL: func.func @weight
// CHECK-SAME:    %[[W:[^:]*]]: tensor<64x16xf32>, %[[S:[^:]*]]: tensor<f32>, %[[H:[^:]*]]: tensor<4xf32>
// CHECK-NOT: gpt.cast
// CHECK: %[[Q:.*]], %[[QT:.*]], %[[REC:.*]] = gpt.fp8_cast_transpose e4m3 %[[W]], %[[S]] history %[[H]] {rounded_to = bf16} : (tensor<64x16xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<4xf32>)
// CHECK: return %[[Q]], %[[QT]], %[[REC]]
func.func @weight(%w: tensor<64x16xf32>, %s: tensor<f32>, %h: tensor<4xf32>)
    -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<4xf32>) {
  %w16 = gpt.cast %w : tensor<64x16xf32> to tensor<64x16xbf16>
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %w16, %s history %h : (tensor<64x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<4xf32>)
  return %q, %qt, %rec : tensor<64x16xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that every FP8 cast of the copy reads the wide tensor (a copy
// gpt-rematerialize made for the backward, say), and the copy is gone.
// CHECK-LABEL: func.func @two_casts
// CHECK-NOT: gpt.cast
// CHECK: gpt.fp8_cast_transpose e4m3 %arg0, %arg1 {rounded_to = bf16}
// CHECK: gpt.fp8_cast_transpose e4m3 %arg0, %arg1 {rounded_to = bf16}
func.func @two_casts(%w: tensor<32x16xf32>, %s: tensor<f32>)
    -> (tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) {
  %w16 = gpt.cast %w : tensor<32x16xf32> to tensor<32x16xbf16>
  %q, %qt = gpt.fp8_cast_transpose e4m3 %w16, %s : (tensor<32x16xbf16>, tensor<f32>) -> (tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>)
  %q2, %qt2 = gpt.fp8_cast_transpose e4m3 %w16, %s : (tensor<32x16xbf16>, tensor<f32>) -> (tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>)
  return %q, %qt2 : tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>
}

// -----

// Tests that a copy something else reads too (the first step's amax of
// the bf16 weight) stays, and its cast reads it as before.
// CHECK-LABEL: func.func @other_reader
// CHECK: %[[C:.*]] = gpt.cast %arg0
// CHECK: gpt.fp8_scale e4m3 %[[C]]
// CHECK: gpt.fp8_cast_transpose e4m3 %[[C]], %{{[^ ]*}} :
// CHECK-NOT: rounded_to
func.func @other_reader(%w: tensor<32x16xf32>) -> (tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) {
  %w16 = gpt.cast %w : tensor<32x16xf32> to tensor<32x16xbf16>
  %s, %inv = gpt.fp8_scale e4m3 %w16 : (tensor<32x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %w16, %s : (tensor<32x16xbf16>, tensor<f32>) -> (tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>)
  return %q, %qt : tensor<32x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>
}

// -----

// Tests that the cast of an activation (a value an op computes, here a
// layernorm's f32 result) stays: folded, the f32 value would be stored.
// CHECK-LABEL: func.func @activation
// CHECK: %[[Y:.*]] = gpt.layernorm
// CHECK: %[[C:.*]] = gpt.cast %[[Y]]
// CHECK: gpt.fp8_cast_transpose e4m3 %[[C]], %arg3 :
// CHECK-NOT: rounded_to
func.func @activation(%x: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>, %s: tensor<f32>)
    -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>) {
  %y = gpt.layernorm %x, %w, %b : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y16 = gpt.cast %y : tensor<8x16xf32> to tensor<8x16xbf16>
  %q, %qt = gpt.fp8_cast_transpose e4m3 %y16, %s : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %q, %qt : tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>
}

// -----

// Tests that a GELU cast stays a cast of the copy: it rounds gelu(x16),
// not x.
// CHECK-LABEL: func.func @gelu
// CHECK: %[[C:.*]] = gpt.cast %arg0
// CHECK: gpt.fp8_cast_transpose e4m3 %[[C]], %arg1 {gelu}
func.func @gelu(%x: tensor<8x16xf32>, %s: tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>) {
  %x16 = gpt.cast %x : tensor<8x16xf32> to tensor<8x16xbf16>
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x16, %s {gelu} : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %q, %qt : tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>
}

// -----

// Tests that a widening cast stays: it rounds nothing, and the FP8 cast
// then reads the narrow tensor, not a wider one.
// CHECK-LABEL: func.func @widening
// CHECK: %[[C:.*]] = gpt.cast %arg0 : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK: gpt.fp8_cast_transpose e4m3 %[[C]], %arg1 :
func.func @widening(%x: tensor<8x16xbf16>, %s: tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>) {
  %x32 = gpt.cast %x : tensor<8x16xbf16> to tensor<8x16xf32>
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x32, %s : (tensor<8x16xf32>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %q, %qt : tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>
}
