// RUN: gpt-opt %s --split-input-file --gpt-shard-optimizer | FileCheck %s

// A data-parallel train step of two ranks, reduced to what the pass reads:
// one gradient bucket, the global norm, AdamW and the moments returned.
module attributes {gpt.config = {n_layer = 2 : i64, world_size = 2 : i64}} {
func.func @train_step(%w: tensor<64x16xf32> {gpt.param = "w"}, %b: tensor<16xf32> {gpt.param = "b"},
                      %mw: tensor<64x16xf32> {gpt.state = "w.adam_m"}, %vw: tensor<64x16xf32> {gpt.state = "w.adam_v"},
                      %mb: tensor<16xf32> {gpt.state = "b.adam_m"}, %vb: tensor<16xf32> {gpt.state = "b.adam_v"},
                      %x: tensor<64x16xf32> {gpt.input = "tokens"}, %step: tensor<i32> {gpt.input = "step"},
                      %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<64x16xf32> {gpt.param = "w"}, tensor<16xf32> {gpt.param = "b"},
        tensor<64x16xf32> {gpt.state = "w.adam_m"}, tensor<64x16xf32> {gpt.state = "w.adam_v"},
        tensor<16xf32> {gpt.state = "b.adam_m"}, tensor<16xf32> {gpt.state = "b.adam_v"},
        tensor<f32> {gpt.output = "grad_norm"}) {
  %gb = gpt.reduce sum %x dims [0] : (tensor<64x16xf32>) -> tensor<16xf32>
  %gw = gpt.exp %x : tensor<64x16xf32>
  %r:2 = gpt.all_reduce mean %gb, %gw {bucket = 0 : i64, bytes = 4160 : i64, world_size = 2 : i64}
      : tensor<16xf32>, tensor<64x16xf32>
  %norm = gpt.global_norm %r#1, %r#0 : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<f32>
  %w1, %mw1, %vw1 = gpt.adamw %w, %r#1, %mw, %vw, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<64x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb1, %vb1 = gpt.adamw %b, %r#0, %mb, %vb, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1, %mw1, %vw1, %mb1, %vb1, %norm : tensor<64x16xf32>, tensor<16xf32>, tensor<64x16xf32>,
      tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>
}
}

// Tests that a bucket whose tensors the world size divides becomes one
// reduce-scatter where the all-reduce was; each update reads its rank's
// slice of the parameter and its gradient's shard with the moments (now
// 1-D shards marked with their full shape, arguments and results alike);
// one all-gather after the last update writes the new parameters into the
// old ones; the norm is the square root of the ranks' summed squares; the
// module records zero = 1.
// CHECK: module attributes {gpt.config = {n_layer = 2 : i64, world_size = 2 : i64, zero = 1 : i64}}
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x16xf32> {gpt.param = "w"}, %[[B:[^:]*]]: tensor<16xf32> {gpt.param = "b"},
// CHECK-SAME: %[[MW:[^:]*]]: tensor<512xf32> {gpt.shard_of = array<i64: 64, 16>, gpt.state = "w.adam_m"}
// CHECK-SAME: %{{[^:]*}}: tensor<8xf32> {gpt.shard_of = array<i64: 16>, gpt.state = "b.adam_v"}
// CHECK-SAME: -> (tensor<64x16xf32> {gpt.param = "w"}, tensor<16xf32> {gpt.param = "b"}, tensor<512xf32> {gpt.shard_of = array<i64: 64, 16>, gpt.state = "w.adam_m"}
// CHECK: %[[GB:.*]] = gpt.reduce sum
// CHECK-NEXT: %[[GW:.*]] = gpt.exp
// CHECK-NEXT: %[[S:.*]]:2 = gpt.reduce_scatter mean %[[GW]], %[[GB]] {bucket = 0 : i64, bytes = 4160 : i64, world_size = 2 : i64}
// CHECK-NOT: gpt.all_reduce mean
// CHECK: %[[LOCAL:.*]] = gpt.global_norm %[[S]]#0, %[[S]]#1 : (tensor<512xf32>, tensor<8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[SQ:.*]] = gpt.mul %[[LOCAL]], %[[LOCAL]]
// CHECK-NEXT: %[[SUM:.*]] = gpt.all_reduce sum %[[SQ]] {bucket = 1 : i64, bytes = 4 : i64, world_size = 2 : i64}
// CHECK-NEXT: %[[NORM:.*]] = gpt.sqrt %[[SUM]]
// CHECK-NEXT: %[[PW:.*]] = gpt.rank_slice %[[W]] {world_size = 2 : i64} : (tensor<64x16xf32>) -> tensor<512xf32>
// CHECK-NEXT: %[[NW:[^,]*]], %[[NMW:[^,]*]], %{{.*}} = gpt.adamw %[[PW]], %[[S]]#0, %[[MW]], %{{.*}}, %{{.*}}, %{{.*}}, %[[NORM]] {{.*}} : tensor<512xf32>,
// CHECK-NEXT: %[[PB:.*]] = gpt.rank_slice %[[B]] {world_size = 2 : i64} : (tensor<16xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[NB:[^,]*]], {{.*}} = gpt.adamw %[[PB]], %[[S]]#1,
// CHECK-NEXT: %[[G:.*]]:2 = gpt.all_gather %[[NW]], %[[NB]] into %[[W]], %[[B]] {bucket = 2 : i64, bytes = 2080 : i64, world_size = 2 : i64} : tensor<512xf32>, tensor<8xf32> into tensor<64x16xf32>, tensor<16xf32>
// CHECK-NEXT: return %[[G]]#0, %[[G]]#1, %[[NMW]], {{.*}}, %[[NORM]]

// -----

// Three ranks divide the weight's 768 elements, not the bias's 16.
module attributes {gpt.config = {world_size = 3 : i64}} {
func.func @train_step(%w: tensor<48x16xf32> {gpt.param = "w"}, %b: tensor<16xf32> {gpt.param = "b"},
                      %mw: tensor<48x16xf32> {gpt.state = "w.adam_m"}, %vw: tensor<48x16xf32> {gpt.state = "w.adam_v"},
                      %mb: tensor<16xf32> {gpt.state = "b.adam_m"}, %vb: tensor<16xf32> {gpt.state = "b.adam_v"},
                      %x: tensor<48x16xf32> {gpt.input = "tokens"}, %step: tensor<i32> {gpt.input = "step"},
                      %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<48x16xf32> {gpt.param = "w"}, tensor<16xf32> {gpt.param = "b"},
        tensor<48x16xf32> {gpt.state = "w.adam_m"}, tensor<48x16xf32> {gpt.state = "w.adam_v"},
        tensor<16xf32> {gpt.state = "b.adam_m"}, tensor<16xf32> {gpt.state = "b.adam_v"},
        tensor<f32> {gpt.output = "grad_norm"}) {
  %gb = gpt.reduce sum %x dims [0] : (tensor<48x16xf32>) -> tensor<16xf32>
  %gw = gpt.exp %x : tensor<48x16xf32>
  %r:2 = gpt.all_reduce mean %gb, %gw {bucket = 0 : i64, bytes = 3136 : i64, world_size = 3 : i64}
      : tensor<16xf32>, tensor<48x16xf32>
  %norm = gpt.global_norm %r#1, %r#0 : (tensor<48x16xf32>, tensor<16xf32>) -> tensor<f32>
  %w1, %mw1, %vw1 = gpt.adamw %w, %r#1, %mw, %vw, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<48x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  %b1, %mb1, %vb1 = gpt.adamw %b, %r#0, %mb, %vb, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %b1, %mw1, %vw1, %mb1, %vb1, %norm : tensor<48x16xf32>, tensor<16xf32>, tensor<48x16xf32>,
      tensor<48x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>
}
}

// Tests that a tensor the world size does not divide stays replicated: its
// gradient in an all-reduce of its own, its update whole on every rank,
// its squared norm added once to the ranks' summed shard squares.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<256xf32> {gpt.shard_of = array<i64: 48, 16>, gpt.state = "w.adam_m"}
// CHECK-SAME: %[[MB:[^:]*]]: tensor<16xf32> {gpt.state = "b.adam_m"}
// CHECK: %[[GB:.*]] = gpt.reduce sum
// CHECK-NEXT: %[[GW:.*]] = gpt.exp
// CHECK-NEXT: %[[S:.*]] = gpt.reduce_scatter mean %[[GW]] {bucket = 0 : i64, bytes = 3072 : i64, world_size = 3 : i64} : tensor<48x16xf32>
// CHECK-NEXT: %[[RB:.*]] = gpt.all_reduce mean %[[GB]] {bucket = 1 : i64, bytes = 64 : i64, world_size = 3 : i64} : tensor<16xf32>
// CHECK-NEXT: %[[LOCAL:.*]] = gpt.global_norm %[[S]] : (tensor<256xf32>) -> tensor<f32>
// CHECK-NEXT: %[[SQ:.*]] = gpt.mul %[[LOCAL]], %[[LOCAL]]
// CHECK-NEXT: %[[SUM:.*]] = gpt.all_reduce sum %[[SQ]] {bucket = 2 : i64
// CHECK-NEXT: %[[REST:.*]] = gpt.global_norm %[[RB]] : (tensor<16xf32>) -> tensor<f32>
// CHECK-NEXT: %[[RSQ:.*]] = gpt.mul %[[REST]], %[[REST]]
// CHECK-NEXT: %[[TOTAL:.*]] = gpt.add %[[SUM]], %[[RSQ]]
// CHECK-NEXT: %[[NORM:.*]] = gpt.sqrt %[[TOTAL]]
// CHECK: gpt.adamw %{{.*}}, %[[S]],
// CHECK: gpt.adamw %{{.*}}, %[[RB]], %[[MB]], {{.*}} : tensor<16xf32>,
// CHECK-NEXT: gpt.all_gather %{{.*}} into %{{.*}} {bucket = 3 : i64, bytes = 1024 : i64, world_size = 3 : i64} : tensor<256xf32> into tensor<48x16xf32>

// -----

// A bf16 policy's bucket: the backward's narrow gradient is reduced and
// widened afterwards for the update and the norm.
module attributes {gpt.config = {world_size = 2 : i64}} {
func.func @train_step(%w: tensor<64x16xf32> {gpt.param = "w"}, %mw: tensor<64x16xf32> {gpt.state = "w.adam_m"},
                      %vw: tensor<64x16xf32> {gpt.state = "w.adam_v"}, %x: tensor<64x16xbf16> {gpt.input = "tokens"},
                      %step: tensor<i32> {gpt.input = "step"}, %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<64x16xf32> {gpt.param = "w"}, tensor<64x16xf32> {gpt.state = "w.adam_m"},
        tensor<64x16xf32> {gpt.state = "w.adam_v"}) {
  %gw = gpt.exp %x : tensor<64x16xbf16>
  %r = gpt.all_reduce mean %gw {bucket = 0 : i64, bytes = 2048 : i64, world_size = 2 : i64} : tensor<64x16xbf16>
  %g = gpt.cast %r : tensor<64x16xbf16> to tensor<64x16xf32>
  %more = gpt.exp %lr : tensor<f32>
  %norm = gpt.global_norm %g : (tensor<64x16xf32>) -> tensor<f32>
  %w1, %mw1, %vw1 = gpt.adamw %w, %g, %mw, %vw, %lr, %step, %norm
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : tensor<64x16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1, %mw1, %vw1 : tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>
}
}

// Tests that the narrow gradient is scattered as the backward wrote it
// (half the bytes) and the widening cast moves to its shard, placed at its
// first reader (the norm) so the compute stream waits for the scatter no
// earlier; the update reads the same cast.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[S:.*]] = gpt.reduce_scatter mean %{{.*}} {bucket = 0 : i64, bytes = 2048 : i64, world_size = 2 : i64} : tensor<64x16xbf16>
// CHECK-NOT: gpt.cast
// CHECK: %[[G:.*]] = gpt.cast %[[S]] : tensor<512xbf16> to tensor<512xf32>
// CHECK-NEXT: gpt.global_norm %[[G]] : (tensor<512xf32>) -> tensor<f32>
// CHECK-NOT: gpt.cast
// CHECK: gpt.adamw %{{.*}}, %[[G]],
