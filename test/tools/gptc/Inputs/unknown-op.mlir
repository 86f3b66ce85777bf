// gpt.frobnicate does not exist.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "gpt.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
