// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-layernorm-codes" | FileCheck %s

// Tests that a residual layernorm read only by an FP8 cast whose scale
// and history exist before it writes both layouts of the codes itself,
// rounded to the bf16 it stored, and records the amax; the sum and both
// layouts reach their readers.
// CHECK-LABEL: func.func @steady
// CHECK-SAME:    %[[H:[^:]*]]: tensor<4xf32>, %[[A:[^:]*]]: tensor<8x16xf32>, %[[X:[^:]*]]: tensor<8x16xbf16>, %[[W:[^:]*]]: tensor<16xf32>, %[[B:[^:]*]]: tensor<16xf32>
// CHECK: %[[R:.*]]:3 = gpt.fp8_delayed_scales (e4m3 %[[H]])
// CHECK: %[[SUM:.*]], %[[Q:.*]], %[[QT:.*]], %[[REC:.*]] = gpt.add_layernorm_fp8 e4m3 %[[A]], %[[X]], %[[W]], %[[B]], %[[R]]#0 history %[[R]]#2 {rounded_to = bf16} : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
// CHECK-NOT: gpt.fusion
// CHECK-NOT: gpt.fp8_cast_transpose
// CHECK-NOT: gpt.fp8_transpose
// CHECK: return %[[SUM]], %[[Q]], %[[QT]], %[[REC]]
func.func @steady(%h: tensor<4xf32>, %a: tensor<8x16xf32>, %x: tensor<8x16xbf16>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>) {
  %r:3 = gpt.fp8_delayed_scales (e4m3 %h) : tensor<4xf32>
  %sum, %y = gpt.fusion (%a, %x, %w, %b) : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%la: tensor<8x16xf32>, %ra: tensor<8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %rw = gpt.cast %ra : tensor<8x16xbf16> to tensor<8x16xf32>
    %s0 = gpt.add %la, %rw : tensor<8x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %s0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %y, %r#0 history %r#2 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  return %sum, %q, %qt, %rec : tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a cast without a history (current scaling elsewhere) with a
// scale given before the layernorm fuses too, and records nothing.
// CHECK-LABEL: func.func @no_history
// CHECK: gpt.add_layernorm_fp8 e5m2 %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {rounded_to = bf16} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf8E5M2>, tensor<16x8xf8E5M2>)
func.func @no_history(%s: tensor<f32>, %a: tensor<2x4x16xf32>, %x: tensor<2x4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<2x4x16xf32>, tensor<2x4x16xf8E5M2>, tensor<16x8xf8E5M2>) {
  %sum, %y = gpt.fusion (%a, %x, %w, %b) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xbf16>) {
  ^bb0(%la: tensor<2x4x16xf32>, %ra: tensor<2x4x16xf32>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %s0 = gpt.add %la, %ra : tensor<2x4x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xbf16>
    gpt.yield %s0, %y0 : tensor<2x4x16xf32>, tensor<2x4x16xbf16>
  }
  %q, %qt = gpt.fp8_cast_transpose e5m2 %y, %s : (tensor<2x4x16xbf16>, tensor<f32>) -> (tensor<2x4x16xf8E5M2>, tensor<16x8xf8E5M2>)
  return %sum, %q, %qt : tensor<2x4x16xf32>, tensor<2x4x16xf8E5M2>, tensor<16x8xf8E5M2>
}

// -----

// Tests that a scale of the layernorm's own result (the first step's, and
// current scaling's) keeps the layernorm and its cast as they are.
// CHECK-LABEL: func.func @scale_of_the_result
// CHECK-NOT: gpt.add_layernorm_fp8
// CHECK: gpt.fusion(
// CHECK: gpt.fp8_scale e4m3
// CHECK: gpt.fp8_cast_transpose e4m3
func.func @scale_of_the_result(%h: tensor<4xf32>, %a: tensor<8x16xf32>, %x: tensor<8x16xbf16>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<4xf32>) {
  %sum, %y = gpt.fusion (%a, %x, %w, %b) : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%la: tensor<8x16xf32>, %ra: tensor<8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %rw = gpt.cast %ra : tensor<8x16xbf16> to tensor<8x16xf32>
    %s0 = gpt.add %la, %rw : tensor<8x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %s0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %y history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %y, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  return %sum, %q, %rec : tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<4xf32>
}

// -----

// Tests that a layernorm result something else reads too stays stored.
// CHECK-LABEL: func.func @other_reader
// CHECK-NOT: gpt.add_layernorm_fp8
// CHECK: gpt.fp8_cast_transpose
func.func @other_reader(%s: tensor<f32>, %a: tensor<8x16xf32>, %x: tensor<8x16xbf16>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xbf16>, tensor<8x16xf8E4M3FN>) {
  %sum, %y = gpt.fusion (%a, %x, %w, %b) : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%la: tensor<8x16xf32>, %ra: tensor<8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %rw = gpt.cast %ra : tensor<8x16xbf16> to tensor<8x16xf32>
    %s0 = gpt.add %la, %rw : tensor<8x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %s0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %q, %qt = gpt.fp8_cast_transpose e4m3 %y, %s : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %y, %q : tensor<8x16xbf16>, tensor<8x16xf8E4M3FN>
}

// -----

// Tests that a GELU cast (of gelu(y), not y) is not a layernorm's codes.
// CHECK-LABEL: func.func @gelu_cast
// CHECK-NOT: gpt.add_layernorm_fp8
// CHECK: gpt.fp8_cast_transpose e4m3 %{{.*}}, %{{.*}} {gelu}
func.func @gelu_cast(%s: tensor<f32>, %a: tensor<8x16xf32>, %x: tensor<8x16xbf16>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xf8E4M3FN>) {
  %sum, %y = gpt.fusion (%a, %x, %w, %b) : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%la: tensor<8x16xf32>, %ra: tensor<8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %rw = gpt.cast %ra : tensor<8x16xbf16> to tensor<8x16xf32>
    %s0 = gpt.add %la, %rw : tensor<8x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %s0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %q, %qt = gpt.fp8_cast_transpose e4m3 %y, %s {gelu} : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %q : tensor<8x16xf8E4M3FN>
}

// -----

// Tests that a row fusion other than a residual add and its layernorm
// (here the layernorm of a negation) keeps its FP8 cast.
// CHECK-LABEL: func.func @other_row_fusion
// CHECK-NOT: gpt.add_layernorm_fp8
// CHECK: gpt.fusion(
// CHECK: gpt.fp8_cast_transpose e4m3
func.func @other_row_fusion(%s: tensor<f32>, %a: tensor<8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>) {
  %n, %y = gpt.fusion (%a, %w, %b) : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%aa: tensor<8x16xf32>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %n0 = gpt.neg %aa : tensor<8x16xf32>
    %y0 = gpt.layernorm %n0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %n0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %q, %qt = gpt.fp8_cast_transpose e4m3 %y, %s : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  return %n, %q : tensor<8x16xf32>, tensor<8x16xf8E4M3FN>
}
