// GELU of integers.
func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = gpt.gelu %x : tensor<4xi32>
  return %y : tensor<4xi32>
}
