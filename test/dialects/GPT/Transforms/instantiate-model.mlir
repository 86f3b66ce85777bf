// RUN: gpt-opt %s --split-input-file --gpt-instantiate-model="model=small" | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-instantiate-model="model=small batch=3 seq=5" | FileCheck %s --check-prefix=OVERRIDE

// Tests that arguments get static shapes from gpt.shape and results are re-inferred.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 2, n_embd = 8, vocab_size = 10, block_size = 6, batch = 2, seq = 4, vocab_multiple = 4}}} {
  // CHECK-LABEL: func.func @shapes
  // CHECK-SAME: tensor<2x4xi32> {gpt.input = "tokens"
  // CHECK-SAME: tensor<12x8xf32> {gpt.param = "wte"
  // CHECK-SAME: tensor<6x8xf32> {gpt.param = "wpe"
  // CHECK-SAME: -> tensor<2x4x8xf32>
  // CHECK: gpt.embed {{.*}} -> tensor<2x4x8xf32>
  // OVERRIDE-LABEL: func.func @shapes
  // OVERRIDE-SAME: tensor<3x5xi32>
  // OVERRIDE: gpt.embed {{.*}} -> tensor<3x5x8xf32>
  func.func @shapes(%ids: tensor<?x?xi32> {gpt.input = "tokens", gpt.shape = "(B, T)"},
                    %wte: tensor<?x?xf32> {gpt.param = "wte", gpt.shape = "(Vp, C)"},
                    %wpe: tensor<?x?xf32> {gpt.param = "wpe", gpt.shape = "(maxT, C)"}) -> tensor<?x?x?xf32> {
    %x = gpt.embed %wte, %wpe, %ids : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi32>) -> tensor<?x?x?xf32>
    return %x : tensor<?x?x?xf32>
  }
}

// -----

// Tests that #gpt.cfg references become the preset's integers.

module attributes {gpt.models = {small = {n_layer = 1, n_head = 2, n_embd = 8, vocab_size = 10, block_size = 6, batch = 2, seq = 4, vocab_multiple = 4}}} {
  // CHECK-LABEL: func.func @config_refs
  // CHECK: gpt.causal_attention %{{.*}} {num_heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  // CHECK: gpt.cross_entropy %{{.*}} {vocab_size = 8 : i64}
  // CHECK-NOT: #gpt.cfg
  func.func @config_refs(%qkv: tensor<?x?x?xf32> {gpt.input = "qkv", gpt.shape = "(B, T, 3*C)"},
                         %targets: tensor<?x?xi32> {gpt.input = "targets", gpt.shape = "(B, T)"}) -> tensor<f32> {
    %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">} : (tensor<?x?x?xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
    %loss = gpt.cross_entropy %y, %targets {vocab_size = #gpt.cfg<"n_embd">} : (tensor<?x?x?xf32>, tensor<?x?xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that gpt.repeat unrolls into one copy of the block per layer, each
// with its own named parameters, and that the block function is erased.

module attributes {gpt.models = {small = {n_layer = 2, n_head = 2, n_embd = 8, vocab_size = 10, block_size = 6, batch = 2, seq = 4}}} {
  // CHECK-NOT: func.func private @layer
  // CHECK-LABEL: func.func @unroll
  // CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
  // CHECK-SAME: %[[W0:[^:]*]]: tensor<8xf32> {gpt.param = "h.0.scale", gpt.shape = "(C)"}
  // CHECK-SAME: %[[W1:[^:]*]]: tensor<8xf32> {gpt.param = "h.1.scale", gpt.shape = "(C)"}
  // CHECK-SAME: gpt.num_parameters = 16 : i64
  // CHECK: %[[Y0:.*]] = gpt.bias_add %[[X]], %[[W0]]
  // CHECK: %[[Y1:.*]] = gpt.bias_add %[[Y0]], %[[W1]]
  // CHECK: return %[[Y1]]
  // CHECK-NOT: gpt.repeat
  func.func private @layer(%x: tensor<?x?x?xf32>,
                           %w: tensor<?xf32> {gpt.param = "scale", gpt.shape = "(C)"}) -> tensor<?x?x?xf32> {
    %y = gpt.bias_add %x, %w : (tensor<?x?x?xf32>, tensor<?xf32>) -> tensor<?x?x?xf32>
    return %y : tensor<?x?x?xf32>
  }
  func.func @unroll(%x: tensor<?x?x?xf32> {gpt.input = "x", gpt.shape = "(B, T, C)"}) -> tensor<?x?x?xf32> {
    %h = gpt.repeat @layer(%x) {count = #gpt.cfg<"n_layer">, prefix = "h"} : tensor<?x?x?xf32>
    return %h : tensor<?x?x?xf32>
  }
}

// -----

// Tests that the module records the resolved configuration, with the
// vocabulary padded to the default multiple of 128.

// CHECK-LABEL: module attributes
// CHECK-SAME: gpt.config = {batch = 2 : i64, block_size = 6 : i64, n_embd = 8 : i64, n_head = 2 : i64, n_layer = 1 : i64, name = "small", padded_vocab_size = 128 : i64, seq = 4 : i64, vocab_multiple = 128 : i64, vocab_size = 10 : i64}
// CHECK-NOT: gpt.models
module attributes {gpt.models = {small = {n_layer = 1, n_head = 2, n_embd = 8, vocab_size = 10, block_size = 6, batch = 2, seq = 4}}} {
  func.func @config(%wte: tensor<?x?xf32> {gpt.param = "wte", gpt.shape = "(Vp, C)"}) -> tensor<?x?xf32> {
    return %wte : tensor<?x?xf32>
  }
}
