// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-rematerialize="memory-budget=0.01806640625" | FileCheck %s

// Budget 0.01806640625 GiB = 18.5 MiB. The arguments take 6 MiB; at %c the
// FP8 copies %q and %qt (1 MiB each) and %a, %b, %c (4 MiB each) are live:
// 20 MiB.

// Tests that an FP8 cast-transpose both of whose results are read after
// the peak is recomputed once, right before the product, and that the one
// clone serves both layouts.

// CHECK-LABEL: func.func @f
// CHECK-SAME: values = 1 : i64
// CHECK:      gpt.fp8_cast_transpose e4m3 %arg0, %arg1 :
// CHECK:      %[[C:.*]] = gpt.add
// CHECK-NEXT: %[[Q:.*]], %[[QT:.*]] = gpt.fp8_cast_transpose e4m3 %arg0, %arg1 {gpt.remat}
// CHECK-NEXT: gpt.scaled_matmul %[[QT]], %arg1, %[[Q]], %arg1
// CHECK-NOT:  gpt.remat
// expected-remark @+1 {{recomputes 1 values (1 ops: fp8_cast_transpose x1), 2.00 MiB saved}}
func.func @f(%x: tensor<1024x1024xbf16> {gpt.input = "x"}, %s: tensor<f32> {gpt.input = "s"},
             %y: tensor<1024x1024xf32> {gpt.input = "y"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s
      : (tensor<1024x1024xbf16>, tensor<f32>) -> (tensor<1024x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>)
  %a = gpt.exp %y : tensor<1024x1024xf32>
  %b = gpt.neg %a : tensor<1024x1024xf32>
  %c = gpt.add %a, %b : tensor<1024x1024xf32>
  %m = gpt.scaled_matmul %qt, %s, %q, %s {transpose_rhs}
      : (tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<1024x1024xf8E4M3FN>, tensor<f32>) -> tensor<1024x1024xf32>
  %u = gpt.add %m, %c : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that an FP8 product's chain (the scaled GEMM and its
// cast-transposes) counts as one op deep: with max-depth 4 (the default)
// the GEMM %p, read after the peak, is rebuilt from the arguments through
// its quantization. The scale and its inverse (4 bytes each) are not
// recomputed: the clones read them late.

// CHECK-LABEL: func.func @f
// CHECK:      %[[S:.*]], %[[I:.*]] = gpt.fp8_scale e4m3 %arg0 :
// CHECK:      %[[C:.*]] = gpt.add
// CHECK-NEXT: %[[Q:.*]], %[[QT:.*]] = gpt.fp8_cast_transpose e4m3 %arg0, %[[S]] {gpt.remat}
// CHECK-NEXT: %[[P:.*]] = gpt.scaled_matmul %[[Q]], %[[I]], %[[QT]], %[[I]] {gpt.remat, transpose_rhs}
// CHECK-NEXT: gpt.add %[[P]], %[[C]]
// CHECK-NOT:  gpt.fp8_scale
// expected-remark @+1 {{recomputes 1 values (2 ops: scaled_matmul x1)}}
func.func @f(%x: tensor<1024x1024xbf16> {gpt.input = "x"}, %y: tensor<1024x1024xf32> {gpt.input = "y"})
    -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<1024x1024xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s
      : (tensor<1024x1024xbf16>, tensor<f32>) -> (tensor<1024x1024xf8E4M3FN>, tensor<1024x1024xf8E4M3FN>)
  %p = gpt.scaled_matmul %q, %inv, %qt, %inv {transpose_rhs}
      : (tensor<1024x1024xf8E4M3FN>, tensor<f32>, tensor<1024x1024xf8E4M3FN>, tensor<f32>) -> tensor<1024x1024xf32>
  %a = gpt.exp %y : tensor<1024x1024xf32>
  %b = gpt.neg %a : tensor<1024x1024xf32>
  %c = gpt.add %a, %b : tensor<1024x1024xf32>
  %u = gpt.add %p, %c : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}
