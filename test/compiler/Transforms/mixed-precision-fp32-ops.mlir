// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=bf16 fp32-ops=attention" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=bf16" | FileCheck %s --check-prefix=BF16
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp32-ops=attention" | FileCheck %s --check-prefix=FP8
// RUN: not gpt-opt %s --split-input-file --gpt-mixed-precision="policy=bf16 fp32-ops=softmax" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp32 fp32-ops=attention" 2>&1 | FileCheck %s --check-prefix=POLICY

// An attention block: qkv projection, attention, output projection.
// Tests that with fp32-ops=attention the attention reads the qkv GEMM's
// bf16 result widened to f32 and returns f32, and that the output
// projection's GEMM narrows its input again.
// CHECK-LABEL: func.func @forward
// CHECK: %[[QKV:.*]] = gpt.linear {{.*}} -> tensor<2x8x48xbf16>
// CHECK: %[[WIDE:.*]] = gpt.cast %[[QKV]] : tensor<2x8x48xbf16> to tensor<2x8x48xf32>
// CHECK: %[[Y:.*]], %{{.*}} = gpt.causal_attention %[[WIDE]] {num_heads = 4 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
// CHECK: %[[NARROW:.*]] = gpt.cast %[[Y]] : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
// CHECK: gpt.linear %[[NARROW]]
// Tests that without it the attention is bf16 (the policy's default).
// BF16-LABEL: func.func @forward
// BF16: gpt.causal_attention {{.*}} : (tensor<2x8x48xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x4x8xf32>)
// Tests that under fp8 the choice holds around the FP8 products.
// FP8-LABEL: func.func @forward
// FP8: gpt.causal_attention {{.*}} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
// FP8: gpt.fp8_matmul
// Tests that an unknown kind and the fp32 policy are errors naming the option.
// KIND: error: gpt-mixed-precision: fp32-ops: no kind 'softmax' (the kinds: attention)
// POLICY: error: gpt-mixed-precision: fp32-ops needs a narrow policy (bf16, fp16 or fp8), got fp32
func.func @forward(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32> {gpt.param = "h.0.attn.c_attn.weight"},
                   %b: tensor<48xf32> {gpt.param = "h.0.attn.c_attn.bias"},
                   %wo: tensor<16x16xf32> {gpt.param = "h.0.attn.c_proj.weight"})
    -> tensor<2x8x16xf32> {
  %qkv = gpt.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %y, %lse = gpt.causal_attention %qkv {num_heads = 4 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
  %o = gpt.linear %y, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  return %o : tensor<2x8x16xf32>
}
