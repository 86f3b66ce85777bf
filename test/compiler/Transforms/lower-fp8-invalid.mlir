// RUN: gpt-opt %s --split-input-file --gpt-lower-fp8 --verify-diagnostics

// Tests that a batched product (rank-3 rhs) is reported: no FP8 GEMM
// takes it.
func.func @batched(%a: tensor<2x8x16xbf16>, %b: tensor<2x16x16xbf16>) -> tensor<2x8x16xbf16> {
  // expected-error @+1 {{gpt-lower-fp8: batched FP8 products have no GEMM}}
  %y = gpt.fp8_matmul e4m3 %a, e4m3 %b : (tensor<2x8x16xbf16>, tensor<2x16x16xbf16>) -> tensor<2x8x16xbf16>
  return %y : tensor<2x8x16xbf16>
}

// -----

// Tests that a transposed rank-3 lhs over a shared rhs is reported: its
// transpose is no rank-2 copy.
func.func @transposed_rank3_lhs(%a: tensor<2x16x8xbf16>, %b: tensor<16x16xbf16>) -> tensor<2x8x16xbf16> {
  // expected-error @+1 {{gpt-lower-fp8: batched FP8 products have no GEMM}}
  %y = gpt.fp8_matmul e4m3 %a, e4m3 %b {transpose_lhs} : (tensor<2x16x8xbf16>, tensor<16x16xbf16>) -> tensor<2x8x16xbf16>
  return %y : tensor<2x8x16xbf16>
}
