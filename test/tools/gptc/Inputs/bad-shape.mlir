// The weight is (N, K) = (8, 8) but the input has 16 features.
func.func @f(%x: tensor<2x16xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  // (2, 16) x (8, 8)^T
  %y = gpt.linear %x, %w : (tensor<2x16xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
