// gpt-fuse-fp8's labels: which patterns run by default, and what
// enable-patterns and disable-patterns change. Each pattern's own cases are
// in fuse-fp8-<label>.mlir.
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8 | FileCheck %s --check-prefix=DEFAULT
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="disable-patterns=fp8-layernorm-codes" | FileCheck %s --check-prefix=NOLN
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-gelu-matmul-codes" | FileCheck %s --check-prefix=ONLYGELU
// RUN: gpt-opt %s --split-input-file --gpt-fuse-fp8="enable-patterns=fp8-layernorm-codes,fp8-gelu-matmul-codes disable-patterns=fp8-gelu-matmul-codes" | FileCheck %s --check-prefix=DISABLEWINS
// RUN: not gpt-opt %s --split-input-file --gpt-fuse-fp8="disable-patterns=fp8-layernorm" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// A steady step's layernorm and MLP product, each read by a cast whose
// scale exists before it: both patterns could rewrite this function.
// Tests that by default the layernorm writes its codes and the product
// keeps its cast (fp8-gelu-matmul-codes is off by default).
// DEFAULT-LABEL: func.func @layernorm_and_gelu_product
// DEFAULT: gpt.add_layernorm_fp8
// DEFAULT: gpt.scaled_matmul {{.*}}:
// DEFAULT: gpt.fp8_cast_transpose e4m3 {{.*}} {gelu}
// DEFAULT-NOT: gpt.scaled_matmul_gelu_fp8

// Tests that a disabled label leaves its rewrite out and the others on.
// NOLN-LABEL: func.func @layernorm_and_gelu_product
// NOLN: gpt.fusion
// NOLN: gpt.fp8_cast_transpose e4m3 {{.*}} history
// NOLN-NOT: gpt.add_layernorm_fp8
// NOLN-NOT: gpt.scaled_matmul_gelu_fp8

// Tests that enable-patterns runs only what it names (here the pattern off
// by default).
// ONLYGELU-LABEL: func.func @layernorm_and_gelu_product
// ONLYGELU: gpt.fusion
// ONLYGELU-NOT: gpt.add_layernorm_fp8
// ONLYGELU: gpt.scaled_matmul_gelu_fp8
// ONLYGELU: gpt.fp8_transpose

// Tests that a label in both lists is off.
// DISABLEWINS-LABEL: func.func @layernorm_and_gelu_product
// DISABLEWINS: gpt.add_layernorm_fp8
// DISABLEWINS-NOT: gpt.scaled_matmul_gelu_fp8

// Tests that a label no pattern has is an error that lists the labels.
// UNKNOWN: error: gpt-fuse-fp8: no pattern 'fp8-layernorm' (the patterns: fp8-cross-entropy-grad, fp8-cast-gelu-grad, fp8-cast-column-sum, fp8-fold-input-cast, fp8-layernorm-codes, fp8-gelu-matmul-codes)
func.func @layernorm_and_gelu_product(%h: tensor<4xf32>, %g: tensor<4xf32>, %a: tensor<8x16xf32>, %x: tensor<8x16xbf16>, %lw: tensor<16xf32>, %lb: tensor<16xf32>, %sx: tensor<f32>, %w: tensor<64x16xf8E4M3FN>, %sw: tensor<f32>, %b: tensor<64xbf16>)
    -> (tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<4xf32>, tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>) {
  %r:6 = gpt.fp8_delayed_scales (e4m3 %h, e4m3 %g) : tensor<4xf32>, tensor<4xf32>
  %sum, %y = gpt.fusion (%a, %x, %lw, %lb) : (tensor<8x16xf32>, tensor<8x16xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>) {
  ^bb0(%la: tensor<8x16xf32>, %ra: tensor<8x16xbf16>, %wa: tensor<16xf32>, %ba: tensor<16xf32>):
    %rw = gpt.cast %ra : tensor<8x16xbf16> to tensor<8x16xf32>
    %s0 = gpt.add %la, %rw : tensor<8x16xf32>
    %y0 = gpt.layernorm %s0, %wa, %ba : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xbf16>
    gpt.yield %s0, %y0 : tensor<8x16xf32>, tensor<8x16xbf16>
  }
  %q, %qt, %rec = gpt.fp8_cast_transpose e4m3 %y, %r#0 history %r#4 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %pre = gpt.scaled_matmul %q, %sx, %w, %sw bias %b {fast_accum, transpose_rhs} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>, tensor<64xbf16>) -> tensor<8x64xbf16>
  %gq, %gqt, %grec = gpt.fp8_cast_transpose e4m3 %pre, %r#1 history %r#5 {gelu} : (tensor<8x64xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>)
  return %sum, %q, %rec, %pre, %gq, %gqt, %grec : tensor<8x16xf32>, tensor<8x16xf8E4M3FN>, tensor<4xf32>, tensor<8x64xbf16>, tensor<8x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4xf32>
}
