// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision=policy=fp32 | FileCheck %s --check-prefix=FP32
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision=policy=fp16 | FileCheck %s --check-prefix=FP16
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision=policy=fp8 | FileCheck %s --check-prefix=FP8
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision=narrow-residual | FileCheck %s --check-prefix=NARROW
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision=narrow-residual --gpt-mixed-precision=narrow-residual | FileCheck %s --check-prefix=NARROW

// Tests that a linear layer gets bf16 operands (casts of the fp32 input,
// weight and bias) and a bf16 result, while the parameters stay fp32
// arguments: the master weights.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {gpt.input = "x"}
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x8xf32> {gpt.param = "w"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<16xf32> {gpt.param = "b"}
// CHECK-DAG: %[[XH:.*]] = gpt.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-DAG: %[[WH:.*]] = gpt.cast %[[W]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK-DAG: %[[BH:.*]] = gpt.cast %[[B]] : tensor<16xf32> to tensor<16xbf16>
// CHECK: gpt.linear %[[XH]], %[[WH]], %[[BH]] : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>

// Tests that the fp16 policy does the same in fp16.
// FP16-LABEL: func.func @forward
// FP16: gpt.linear %{{.*}} : (tensor<4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<4x16xf16>

// Tests that the fp8 policy makes the linear layer an e4m3 x e4m3 product
// of the bf16 operands, with the bias added after it.
// FP8-LABEL: func.func @forward
// FP8-NOT: gpt.linear
// FP8: %[[Y:.*]] = gpt.fp8_matmul e4m3 %{{.*}}, e4m3 %{{.*}} {transpose_rhs} : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
// FP8: gpt.bias_add %[[Y]], %{{.*}} : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>

// Tests that the fp32 policy leaves the function as written.
// FP32-LABEL: func.func @forward
// FP32-NOT: gpt.cast
// FP32: gpt.linear %{{.*}} -> tensor<4x16xf32>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<16x8xf32> {gpt.param = "w"},
                   %b: tensor<16xf32> {gpt.param = "b"}) -> tensor<f32> {
  %y = gpt.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %s = gpt.reduce sum %y dims [0, 1] : (tensor<4x16xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that a layernorm of a bf16 value runs in fp32: its input is cast
// up, and the statistics, weight and result are fp32.

// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = gpt.matmul
// CHECK-SAME: -> tensor<4x8xbf16>
// CHECK: %[[HF:.*]] = gpt.cast %[[H]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: gpt.layernorm %[[HF]], %{{.*}}, %{{.*}}{{.*}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// A gpt.matmul (the tied LM head is one) stays a bf16 product under fp8.
// FP8-LABEL: func.func @forward
// FP8-NOT: gpt.fp8_matmul
// FP8: gpt.matmul %{{.*}} -> tensor<4x8xbf16>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"},
                   %g: tensor<8xf32> {gpt.param = "ln.weight"},
                   %b: tensor<8xf32> {gpt.param = "ln.bias"}) -> tensor<4x8xf32> {
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = gpt.layernorm %h, %g, %b {epsilon = 1.0e-05 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that gpt.cross_entropy reads the bf16 logits without a cast (no
// fp32 copy of the logits) and that the loss is still tensor<f32>.

// CHECK-LABEL: func.func @forward
// CHECK: %[[L:.*]] = gpt.matmul {{.*}} -> tensor<2x4x16xbf16>
// CHECK-NOT: gpt.cast %[[L]]
// CHECK: %[[LOSS:.*]] = gpt.cross_entropy %[[L]], %{{.*}} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
// CHECK: return %[[LOSS]] : tensor<f32>
func.func @forward(%x: tensor<2x4x8xf32> {gpt.input = "x"},
                   %t: tensor<2x4xi32> {gpt.input = "targets"},
                   %wte: tensor<16x8xf32> {gpt.param = "wte"}) -> tensor<f32> {
  %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 12 : i64}
      : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that softmax and reductions of bf16 values run in fp32.

// CHECK-LABEL: func.func @forward
// CHECK: %[[S:.*]] = gpt.matmul {{.*}} -> tensor<4x4xbf16>
// CHECK: %[[SF:.*]] = gpt.cast %[[S]] : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK: %[[P:.*]] = gpt.softmax %[[SF]] : tensor<4x4xf32>
// CHECK: gpt.reduce sum %[[SF]] dims [0] : (tensor<4x4xf32>) -> tensor<4xf32>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"}) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %s = gpt.matmul %x, %x {transpose_rhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  %p = gpt.softmax %s : tensor<4x4xf32>
  %r = gpt.reduce sum %s dims [0] : (tensor<4x4xf32>) -> tensor<4xf32>
  return %p, %r : tensor<4x4xf32>, tensor<4xf32>
}

// -----

// Tests that a value used by several GEMMs (a tied weight) is cast once,
// and that one bf16 value read by two fp32 ops is cast up once.

// CHECK-LABEL: func.func @forward
// CHECK-COUNT-1: gpt.cast %arg1 : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NOT: gpt.cast %arg1
// CHECK: %[[H:.*]] = gpt.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK-COUNT-1: gpt.cast %[[H]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NOT: gpt.cast %[[H]]
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"}) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) {
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = gpt.matmul %h, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = gpt.reduce sum %h dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  %m = gpt.reduce mean %h dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %y, %r, %m : tensor<4x8xf32>, tensor<8xf32>, tensor<f32>
}

// -----

// Tests that an elementwise op on bf16 values stays bf16 (GELU between two
// GEMMs), and that mixed operands are promoted to the widest type: the
// residual stream x + f(x) stays fp32.

// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = gpt.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[G:.*]] = gpt.gelu %[[H]] : tensor<4x8xbf16>
// CHECK: %[[M:.*]] = gpt.matmul %[[G]], {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[MF:.*]] = gpt.cast %[[M]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: gpt.add %arg0, %[[MF]] : tensor<4x8xf32>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"}) -> tensor<4x8xf32> {
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g = gpt.gelu %h : tensor<4x8xf32>
  %m = gpt.matmul %g, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = gpt.add %x, %m : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that layout ops follow their operand's type (reshape re-derives
// its element type) and a returned bf16 value is cast back to the
// declared result type.

// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = gpt.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[R:.*]] = gpt.reshape %[[H]] : tensor<4x8xbf16> to tensor<32xbf16>
// CHECK: %[[RF:.*]] = gpt.cast %[[R]] : tensor<32xbf16> to tensor<32xf32>
// CHECK: return %[[RF]] : tensor<32xf32>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"}) -> tensor<32xf32> {
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = gpt.reshape %h : tensor<4x8xf32> to tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// Tests that a cast already in the function is reused, not duplicated.

// CHECK-LABEL: func.func @forward
// CHECK: %[[WH:.*]] = gpt.cast %arg1 : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NOT: gpt.cast %arg1
// CHECK: gpt.matmul %{{.*}}, %[[WH]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"}) -> (tensor<8x8xbf16>, tensor<4x8xf32>) {
  %wh = gpt.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %wh, %h : tensor<8x8xbf16>, tensor<4x8xf32>
}

// -----

// Tests that running the pass twice adds nothing the second time.

// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: gpt.cast
// CHECK-NOT: gpt.cast
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"}) -> tensor<4x8xbf16> {
  %xh = gpt.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %wh = gpt.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %h = gpt.matmul %xh, %wh : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %h : tensor<4x8xbf16>
}

// -----

// Tests the residual stream: by default the embedding's fp32 sum and the
// residual add stay fp32 (the block's bf16 output is cast up) and the
// layernorm runs on fp32; with narrow-residual the embedding's sum is cast
// to bf16 once, the add runs in bf16, and the layernorm reads the bf16 sum
// with its fp32 weight and bias, giving the bf16 the next GEMM reads.

// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.*]] = gpt.embed {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[H:.*]] = gpt.matmul {{.*}} -> tensor<2x4x8xbf16>
// CHECK: %[[HF:.*]] = gpt.cast %[[H]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = gpt.add %[[E]], %[[HF]] : tensor<2x4x8xf32>
// CHECK: gpt.layernorm %[[S]], {{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>

// NARROW-LABEL: func.func @forward(%{{[^:]*}}: tensor<2x4xi32> {gpt.input = "tokens"}
// NARROW-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {gpt.param = "wte"}
// NARROW: %[[E:.*]] = gpt.embed %[[WTE]], {{.*}} -> tensor<2x4x8xf32>
// NARROW-NEXT: %[[EH:.*]] = gpt.cast %[[E]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// NARROW-NOT: gpt.cast %[[E]]
// NARROW: %[[H:.*]] = gpt.matmul %[[EH]], {{.*}} -> tensor<2x4x8xbf16>
// NARROW-NEXT: %[[S:.*]] = gpt.add %[[EH]], %[[H]] : tensor<2x4x8xbf16>
// NARROW-NEXT: %[[Y:.*]] = gpt.layernorm %[[S]], %{{.*}}, %{{.*}} : (tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xbf16>
// NARROW-NEXT: %[[YF:.*]] = gpt.cast %[[Y]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// NARROW-NEXT: return %[[YF]] : tensor<2x4x8xf32>
func.func @forward(%ids: tensor<2x4xi32> {gpt.input = "tokens"},
                   %wte: tensor<16x8xf32> {gpt.param = "wte"},
                   %wpe: tensor<4x8xf32> {gpt.param = "wpe"},
                   %w: tensor<8x8xf32> {gpt.param = "w"},
                   %g: tensor<8xf32> {gpt.param = "ln.weight"},
                   %b: tensor<8xf32> {gpt.param = "ln.bias"}) -> tensor<2x4x8xf32> {
  %e = gpt.embed %wte, %wpe, %ids : (tensor<16x8xf32>, tensor<4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h = gpt.matmul %e, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s = gpt.add %e, %h : tensor<2x4x8xf32>
  %y = gpt.layernorm %s, %g, %b {epsilon = 1.0e-05 : f64}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that fp8-lm-head makes the product whose result is a
// gpt.cross_entropy's logits (the tied LM head) an e4m3 x e4m3
// gpt.fp8_matmul with the same transposes, and leaves another gpt.matmul
// (one the loss does not read as logits) a bf16 product.
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp8-lm-head" | FileCheck %s --check-prefix=HEAD
// HEAD-LABEL: func.func @forward
// HEAD: %[[H:.*]] = gpt.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// HEAD: %[[L:.*]] = gpt.fp8_matmul e4m3 %{{.*}}, e4m3 %{{.*}} {transpose_rhs} : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
// HEAD: gpt.cross_entropy %[[L]], %{{.*}}
func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                   %w: tensor<8x8xf32> {gpt.param = "w"},
                   %wte: tensor<16x8xf32> {gpt.param = "wte"},
                   %t: tensor<4xi32> {gpt.input = "targets"}) -> tensor<f32> {
  %h = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = gpt.matmul %h, %wte {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 13 : i64} : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
