// Tests that models/gpt2.mlir instantiates for every preset, with GPT-2's
// parameter counts (vocabulary padded to 50304) and every layer named.

// RUN: gpt-opt %models/gpt2.mlir --gpt-instantiate-model=model=124M | FileCheck %s --check-prefix=G124
// G124: gpt.num_parameters = 124475904
// G124: gpt.causal_attention %{{.*}} {num_heads = 12 : i64} : (tensor<4x1024x2304xf32>) -> (tensor<4x1024x768xf32>, tensor<4x12x1024xf32>)
// G124: gpt.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<4x1024x768xf32>, tensor<50304x768xf32>) -> tensor<4x1024x50304xf32>
// G124: gpt.cross_entropy %{{.*}}, %{{.*}} {vocab_size = 50257 : i64}

// RUN: gpt-opt %models/gpt2.mlir --gpt-instantiate-model=model=350M | FileCheck %s --check-prefix=G350
// G350: gpt.param = "h.23.mlp.c_proj.bias"
// G350: gpt.num_parameters = 354871296

// RUN: gpt-opt %models/gpt2.mlir --gpt-instantiate-model=model=774M | FileCheck %s --check-prefix=G774
// G774: gpt.param = "h.35.mlp.c_proj.bias"
// G774: gpt.num_parameters = 774090240

// RUN: gpt-opt %models/gpt2.mlir --gpt-instantiate-model=model=1558M | FileCheck %s --check-prefix=G1558
// G1558: gpt.param = "h.47.mlp.c_proj.bias"
// G1558: gpt.num_parameters = 1557686400
// G1558: gpt.causal_attention %{{.*}} {num_heads = 25 : i64} : (tensor<4x1024x4800xf32>) -> (tensor<4x1024x1600xf32>, tensor<4x25x1024xf32>)

// The LM head reuses wte: it is one argument, read by embed and the head.
// RUN: gpt-opt %models/gpt2.mlir --gpt-instantiate-model=model=tiny | FileCheck %s --check-prefix=TIED
// TIED: %[[WTE:[^:]*]]: tensor<64x16xf32> {gpt.param = "wte"
// TIED: gpt.embed %[[WTE]],
// TIED: gpt.matmul %{{.*}}, %[[WTE]] {transpose_rhs}
