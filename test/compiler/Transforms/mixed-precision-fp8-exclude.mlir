// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp8-exclude=h.0." | FileCheck %s --check-prefix=FIRST
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp8-exclude=last" | FileCheck %s --check-prefix=LAST
// RUN: gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp8-exclude=first,last" | FileCheck %s --check-prefix=BOTH
// RUN: not gpt-opt %s --split-input-file --gpt-mixed-precision="policy=fp8 fp8-exclude=h.7." 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not gpt-opt %s --split-input-file --gpt-mixed-precision="policy=bf16 fp8-exclude=first" 2>&1 | FileCheck %s --check-prefix=POLICY

// Tests gpt-mixed-precision's per-layer FP8 policy (fp8-exclude): the
// linear layers whose weight's parameter name starts with a prefix stay
// bf16 gpt.linear ops, the others become FP8 products; first and last name
// the first and the last block (gpt.config's n_layer = 2: h.0. and h.1.).

// FIRST-LABEL: func.func @forward
// FIRST: gpt.linear %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// FIRST: gpt.fp8_matmul e4m3 %{{.*}}, e4m3 %{{.*}} {transpose_rhs}
// FIRST-NOT: gpt.linear

// LAST-LABEL: func.func @forward
// LAST-NOT: gpt.linear
// LAST: gpt.fp8_matmul e4m3 %{{.*}}, e4m3 %{{.*}} {transpose_rhs}
// LAST: gpt.linear %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>

// BOTH-LABEL: func.func @forward
// BOTH-NOT: gpt.fp8_matmul
// BOTH: gpt.linear
// BOTH: gpt.linear
// BOTH-NOT: gpt.fp8_matmul

// A prefix that names no linear weight is an error, not an all-FP8 model.
// NONE: error: gpt-mixed-precision: fp8-exclude=h.7. names no linear layer's weight

// The exclusions are part of the FP8 policy only.
// POLICY: error: gpt-mixed-precision: fp8-exclude needs policy fp8, got bf16

module attributes {gpt.config = {n_layer = 2 : i64}} {
  func.func @forward(%x: tensor<4x8xf32> {gpt.input = "x"},
                     %w0: tensor<8x8xf32> {gpt.param = "h.0.mlp.c_fc.weight"},
                     %b0: tensor<8xf32> {gpt.param = "h.0.mlp.c_fc.bias"},
                     %w1: tensor<8x8xf32> {gpt.param = "h.1.mlp.c_fc.weight"},
                     %b1: tensor<8xf32> {gpt.param = "h.1.mlp.c_fc.bias"}) -> tensor<4x8xf32> {
    %h = gpt.linear %x, %w0, %b0 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %y = gpt.linear %h, %w1, %b1 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
