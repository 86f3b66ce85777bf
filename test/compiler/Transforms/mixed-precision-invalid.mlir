// Tests that an unknown policy is an error naming the pass and the policies.
// RUN: not gpt-opt %s --gpt-mixed-precision=policy=fp4 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: error: gpt-mixed-precision: unknown policy 'fp4' (expected fp32, bf16, fp16 or fp8)

// Tests that narrow-residual under the fp32 policy is an error naming both.
// RUN: not gpt-opt %s --gpt-mixed-precision="policy=fp32 narrow-residual" 2>&1 | FileCheck %s --check-prefix=NARROW
// NARROW: error: gpt-mixed-precision: narrow-residual needs a narrow policy (bf16 or fp16), got fp32

// Tests that a missing function is an error naming it.
// RUN: not gpt-opt %s --gpt-mixed-precision=function=nope 2>&1 | FileCheck %s --check-prefix=NOFN
// NOFN: error: gpt-mixed-precision: no function @nope

func.func @forward(%x: tensor<4xf32> {gpt.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// Tests that a scalar (non-tensor) argument is refused, not dereferenced.
// RUN: not gpt-opt %s --gpt-mixed-precision="policy=bf16 function=scalar" 2>&1 | FileCheck %s --check-prefix=SCALAR
// SCALAR: error: gpt-mixed-precision: @scalar takes and returns ranked tensors only, got 'f32'

func.func @scalar(%w: f32 {gpt.param = "w"}) -> f32 {
  return %w : f32
}

// Tests that fp8-lm-head without the fp8 policy is an error naming both.
// RUN: not gpt-opt %s --gpt-mixed-precision="policy=bf16 fp8-lm-head" 2>&1 | FileCheck %s --check-prefix=HEAD
// HEAD: error: gpt-mixed-precision: fp8-lm-head needs policy fp8, got bf16

// Tests that fp8-lm-head under the fp32 policy (which rewrites nothing) is
// an error too, not silently ignored.
// RUN: not gpt-opt %s --gpt-mixed-precision="policy=fp32 fp8-lm-head" 2>&1 | FileCheck %s --check-prefix=HEAD32
// HEAD32: error: gpt-mixed-precision: fp8-lm-head needs policy fp8, got fp32
