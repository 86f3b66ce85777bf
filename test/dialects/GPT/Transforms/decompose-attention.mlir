// RUN: gpt-opt %s --split-input-file --gpt-decompose-attention | FileCheck %s

// Tests that causal attention becomes q/k/v slices, per-head layout, scaled
// scores, a causal mask, a softmax and the value product.

// CHECK-LABEL: func.func @decompose
// CHECK-SAME: (%[[QKV:.*]]: tensor<2x4x24xf32>)
// CHECK-DAG: %[[Q:.*]] = gpt.slice %[[QKV]] {dim = 2 : i64, size = 8 : i64, start = 0 : i64}
// CHECK-DAG: %[[K:.*]] = gpt.slice %[[QKV]] {dim = 2 : i64, size = 8 : i64, start = 8 : i64}
// CHECK-DAG: %[[V:.*]] = gpt.slice %[[QKV]] {dim = 2 : i64, size = 8 : i64, start = 16 : i64}
// CHECK-DAG: %[[Q4:.*]] = gpt.reshape %[[Q]] : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
// CHECK-DAG: %[[QH:.*]] = gpt.transpose %[[Q4]] [0, 2, 1, 3] : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: %[[S:.*]] = gpt.matmul %[[QH]], %{{.*}} {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: %[[SS:.*]] = gpt.scale %[[S]] {factor = 5.000000e-01 : f64}
// CHECK: %[[M:.*]] = gpt.causal_mask %[[SS]]
// CHECK: %[[P:.*]] = gpt.softmax %[[M]]
// CHECK: %[[Y:.*]] = gpt.matmul %[[P]], %{{.*}} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: %[[YT:.*]] = gpt.transpose %[[Y]] [0, 2, 1, 3]
// CHECK: %[[OUT:.*]] = gpt.reshape %[[YT]] : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
// CHECK: return %[[OUT]]
// CHECK-NOT: gpt.causal_attention
func.func @decompose(%qkv: tensor<2x4x24xf32>) -> tensor<2x4x8xf32> {
  %y, %lse = gpt.causal_attention %qkv {num_heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that attention with dynamic shapes is left alone (the head layout
// needs static sizes).

// CHECK-LABEL: func.func @dynamic_kept
// CHECK: gpt.causal_attention
// CHECK-NOT: gpt.softmax
func.func @dynamic_kept(%qkv: tensor<?x?x24xf32>) -> tensor<?x?x8xf32> {
  %y, %lse = gpt.causal_attention %qkv {num_heads = 2 : i64} : (tensor<?x?x24xf32>) -> (tensor<?x?x8xf32>, tensor<?x2x?xf32>)
  return %y : tensor<?x?x8xf32>
}

// -----

// Tests that a config reference for num_heads blocks the rewrite.

// CHECK-LABEL: func.func @config_ref_kept
// CHECK: gpt.causal_attention %{{.*}} {num_heads = #gpt.cfg<"n_head">}
func.func @config_ref_kept(%qkv: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  %y, %lse = gpt.causal_attention %qkv {num_heads = #gpt.cfg<"n_head">} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x?x4xf32>)
  return %y : tensor<1x4x8xf32>
}

// -----

// Tests that attention whose log-sum-exp is read (by a backward) is kept:
// the decomposition has no lse to give it.

// CHECK-LABEL: func.func @lse_used_kept
// CHECK: gpt.causal_attention
// CHECK-NOT: gpt.softmax
func.func @lse_used_kept(%qkv: tensor<2x4x24xf32>, %dy: tensor<2x4x8xf32>) -> tensor<2x4x24xf32> {
  %y, %lse = gpt.causal_attention %qkv {num_heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %d = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> tensor<2x4x24xf32>
  return %d : tensor<2x4x24xf32>
}
