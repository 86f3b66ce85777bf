// A missing ':' before the operand types.

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = gpt.gelu %x : tensor<4xf32>
  %z = gpt.exp %y  tensor<4xf32> tensor<4xf32>
  return %z : tensor<4xf32>
}
