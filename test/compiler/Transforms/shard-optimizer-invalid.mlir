// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-shard-optimizer

// Tests that a step without a world size of at least two (no
// gpt-insert-all-reduce, or world-size 0: any number of ranks) is refused:
// a shard is 1/N of a tensor, N fixed at compile time.

// expected-error @+1 {{gpt-shard-optimizer: @train_step is not a step of N >= 2 ranks (run gpt-insert-all-reduce with world-size=N: the shards are 1/N of each tensor)}}
func.func @train_step(%w: tensor<16xf32> {gpt.param = "w"}, %m: tensor<16xf32> {gpt.state = "w.adam_m"},
                      %v: tensor<16xf32> {gpt.state = "w.adam_v"}, %step: tensor<i32> {gpt.input = "step"},
                      %lr: tensor<f32> {gpt.input = "lr_scale"})
    -> (tensor<16xf32> {gpt.param = "w"}) {
  %g = gpt.exp %w : tensor<16xf32>
  %r = gpt.all_reduce mean %g {bucket = 0 : i64, bytes = 64 : i64, world_size = 0 : i64} : tensor<16xf32>
  %w1, %m1, %v1 = gpt.adamw %w, %r, %m, %v, %lr, %step, %lr
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %w1 : tensor<16xf32>
}

// -----

// Tests that a function name that is not in the module is an error.

// expected-error @+1 {{gpt-shard-optimizer: no function @train_step}}
module {
  func.func @other() {
    return
  }
}
