// RUN: gpt-opt %s --split-input-file --gpt-fp8-delayed-scaling=history=4 | FileCheck %s

// Tests that a scale gets a history argument and result, named as state,
// after the parameters and state and before the inputs and outputs; the
// scale reads it, the cast-transpose with that scale records into the
// shifted history, and the recorded history is returned.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    %[[W:[^:]*]]: tensor<4x16xbf16> {gpt.param = "w"}
// CHECK-SAME:    %[[M:[^:]*]]: tensor<4x16xbf16> {gpt.state = "w.adam_m"}
// CHECK-SAME:    %[[H:[^:]*]]: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}
// CHECK-SAME:    %[[X:[^:]*]]: tensor<8x16xbf16> {gpt.input = "tokens"}
// CHECK-SAME:    -> (tensor<4x16xbf16> {gpt.param = "w"}, tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, tensor<f32> {gpt.output = "loss"})
// CHECK: %[[S:.*]], %[[I:.*]], %[[H1:.*]] = gpt.fp8_scale e4m3 %[[X]] history %[[H]] : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
// CHECK: %[[Q:.*]], %[[QT:.*]], %[[H2:.*]] = gpt.fp8_cast_transpose e4m3 %[[X]], %[[S]] history %[[H1]]
// CHECK: return %{{.*}}, %[[H2]], %{{.*}} :
func.func @train_step(%w: tensor<4x16xbf16> {gpt.param = "w"},
                      %m: tensor<4x16xbf16> {gpt.state = "w.adam_m"},
                      %x: tensor<8x16xbf16> {gpt.input = "tokens"})
    -> (tensor<4x16xbf16> {gpt.param = "w"}, tensor<f32> {gpt.output = "loss"}) {
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %q, %qt = gpt.fp8_cast_transpose e4m3 %x, %s : (tensor<8x16xbf16>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>)
  %loss = gpt.constant 0.0 : tensor<f32>
  return %w, %loss : tensor<4x16xbf16>, tensor<f32>
}

// -----

// Tests that of two quantizations with one scale (the layouts, unpaired)
// the first records, through a reshape of the measured tensor, and keeps
// {gelu} and {transpose}; the second quantizes without a history. With no
// parameters or state the history is the first argument.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    %[[H:[^:]*]]: tensor<4xf32> {gpt.state = "fp8.amax_history.0"}, %[[X:[^:]*]]: tensor<2x4x16xbf16>
// CHECK: %[[S:.*]], %{{.*}}, %[[H1:.*]] = gpt.fp8_scale e4m3 %[[X]] history %[[H]] {gelu}
// CHECK: %[[X2:.*]] = gpt.reshape %[[X]]
// CHECK: %{{.*}}, %[[H2:.*]] = gpt.fp8_quantize e4m3 %[[X2]], %[[S]] history %[[H1]] {gelu, transpose} : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<16x8xf8E4M3FN>, tensor<4xf32>)
// CHECK: gpt.fp8_quantize e4m3 %[[X]], %[[S]] {gelu} : (tensor<2x4x16xbf16>, tensor<f32>) -> tensor<2x4x16xf8E4M3FN>
// CHECK: return %[[H2]]
func.func @train_step(%x: tensor<2x4x16xbf16>) -> () {
  %s, %inv = gpt.fp8_scale e4m3 %x {gelu} : (tensor<2x4x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %x2 = gpt.reshape %x : tensor<2x4x16xbf16> to tensor<8x16xbf16>
  %qt = gpt.fp8_quantize e4m3 %x2, %s {gelu, transpose} : (tensor<8x16xbf16>, tensor<f32>) -> tensor<16x8xf8E4M3FN>
  %q = gpt.fp8_quantize e4m3 %x, %s {gelu} : (tensor<2x4x16xbf16>, tensor<f32>) -> tensor<2x4x16xf8E4M3FN>
  return
}

// -----

// Tests that a scale no quantization of the same values uses (here one
// of a GELU of them, without {gelu}) keeps current scaling: no history.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%{{[^:]*}}: tensor<8x16xbf16>) {
// CHECK: gpt.fp8_scale e4m3 %{{.*}} : (tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
// CHECK-NOT: history
func.func @train_step(%x: tensor<8x16xbf16>) -> () {
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %q = gpt.fp8_quantize e4m3 %x, %s {gelu} : (tensor<8x16xbf16>, tensor<f32>) -> tensor<8x16xf8E4M3FN>
  return
}

// -----

// Tests that other functions keep current scaling.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: history
// CHECK-LABEL: func.func @train_step
func.func @forward(%x: tensor<8x16xbf16>) -> () {
  %s, %inv = gpt.fp8_scale e4m3 %x : (tensor<8x16xbf16>) -> (tensor<f32>, tensor<f32>)
  %q = gpt.fp8_quantize e4m3 %x, %s : (tensor<8x16xbf16>, tensor<f32>) -> tensor<8x16xf8E4M3FN>
  return
}
func.func @train_step() -> () {
  return
}
