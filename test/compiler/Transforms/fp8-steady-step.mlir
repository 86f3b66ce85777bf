// RUN: gpt-opt %s --split-input-file --gpt-fp8-steady-step --verify-diagnostics | FileCheck %s

// Tests that @train_step is copied unchanged as @train_step_first, where
// the scale still measures %x while its history is empty.
// CHECK-LABEL: func.func @train_step(
// CHECK-LABEL: func.func @train_step_first(
// CHECK-SAME:    %[[H:[^:]*]]: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, %[[X:[^:]*]]: tensor<8x16xbf16>
// CHECK: %[[S:.*]], %{{.*}}, %[[H1:.*]] = gpt.fp8_scale e4m3 %[[X]] history %[[H]]
// CHECK: gpt.fp8_cast_transpose e4m3 %[[X]], %[[S]] history %[[H1]]
// CHECK-NOT: gpt.fp8_delayed_scales
func.func @train_step(%h: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, %x: tensor<8x16xbf16>)
    -> (tensor<4xf32> {gpt.state = "fp8.amax_history.0"}) {
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  return %h2 : tensor<4xf32>
}

// -----

// Tests that in @train_step the history scales become one op at the top,
// in program order, with their formats; the cast and the GEMM read its
// scale, inverse and shifted history, and no gpt.fp8_scale is left.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[H0:[^:]*]]: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, %[[H1:[^:]*]]: tensor<4xf32> {gpt.state = "fp8.amax_history.1"}, %[[X:[^:]*]]: tensor<8x16xbf16>, %[[D:[^:]*]]: tensor<8x16xbf16>
// CHECK-NEXT: %[[R:.*]]:6 = gpt.fp8_delayed_scales (e4m3 %[[H0]], e5m2 %[[H1]]) : tensor<4xf32>, tensor<4xf32>
// CHECK-NOT: gpt.fp8_scale
// CHECK: %[[QX:.*]], %{{.*}}, %[[RX:.*]] = gpt.fp8_cast_transpose e4m3 %[[X]], %[[R]]#0 history %[[R]]#4
// CHECK: %[[QD:.*]], %{{.*}}, %[[RD:.*]] = gpt.fp8_cast_transpose e5m2 %[[D]], %[[R]]#1 history %[[R]]#5
// CHECK: gpt.scaled_matmul %[[QX]], %[[R]]#2, %[[QD]], %[[R]]#3
// CHECK: return %[[RX]], %[[RD]], %{{.*}} :
func.func @train_step(%h0: tensor<4xf32> {gpt.state = "fp8.amax_history.0"},
                      %h1: tensor<4xf32> {gpt.state = "fp8.amax_history.1"},
                      %x: tensor<8x16xbf16>, %d: tensor<8x16xbf16>)
    -> (tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, tensor<4xf32> {gpt.state = "fp8.amax_history.1"}, tensor<8x8xbf16>) {
  %sx, %ix, %h0s = gpt.fp8_scale e4m3 %x history %h0 : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %qx, %qxt, %h0r = gpt.fp8_cast_transpose e4m3 %x, %sx history %h0s : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %sd, %id, %h1s = gpt.fp8_scale e5m2 %d history %h1 : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %qd, %qdt, %h1r = gpt.fp8_cast_transpose e5m2 %d, %sd history %h1s : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E5M2>, tensor<16x8xf8E5M2>, tensor<4xf32>)
  %y = gpt.scaled_matmul %qx, %ix, %qd, %id {transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<8x16xf8E5M2>, tensor<f32>) -> tensor<8x8xbf16>
  return %h0r, %h1r, %y : tensor<4xf32>, tensor<4xf32>, tensor<8x8xbf16>
}

// -----

// Tests that two scales of one history (a rematerialized clone) share its
// entry: one history, and both casts read its scale.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[R:.*]]:3 = gpt.fp8_delayed_scales (e4m3 %{{.*}}) : tensor<4xf32>
// CHECK: gpt.fp8_cast_transpose e4m3 %{{.*}}, %[[R]]#0 history %[[R]]#2
// CHECK: gpt.fp8_quantize e4m3 %{{.*}}, %[[R]]#0 :
func.func @train_step(%h: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, %x: tensor<8x16xbf16>)
    -> (tensor<4xf32> {gpt.state = "fp8.amax_history.0"}) {
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %s2, %inv2, %h3 = gpt.fp8_scale e4m3 %x history %h {gpt.remat} : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q2 = gpt.fp8_quantize e4m3 %x, %s2 : (tensor<8x16xbf16>, tensor<f32>) -> tensor<8x16xf8E4M3FN>
  return %h2 : tensor<4xf32>
}

// -----

// Tests that a step without history scales (current scaling) keeps its
// scales, and its copy @train_step_first is made all the same (the passes
// after this one plan both programs).
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: gpt.fp8_delayed_scales
// CHECK: gpt.fp8_scale e4m3
// CHECK-LABEL: func.func @train_step_first(
// CHECK: gpt.fp8_scale e4m3
// CHECK-NOT: gpt.fp8_delayed_scales
func.func @train_step(%x: tensor<8x16xbf16>) -> (tensor<f32>) {
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  return %inv : tensor<f32>
}

// -----

// Tests that a module without the function is an error naming it.
// expected-error @+1 {{gpt-fp8-steady-step: no single-block function @train_step}}
module {
  func.func @forward(%x: tensor<8x16xbf16>) -> (tensor<8x16xbf16>) {
    return %x : tensor<8x16xbf16>
  }
}
