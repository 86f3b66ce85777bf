// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-insert-logits

// Tests that a module without @forward is rejected.

// expected-error @+1 {{gpt-insert-logits: no function @forward}}
module {
  func.func @other() {
    return
  }
}

// -----

// Tests that an existing @logits is not overwritten.

// expected-error @+1 {{gpt-insert-logits: @logits already exists}}
module {
  func.func @forward(%x: tensor<2x16xf32> {gpt.input = "x"},
                     %targets: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
    %loss = gpt.cross_entropy %x, %targets {vocab_size = 12 : i64} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @logits() {
    return
  }
}

// -----

// Tests that a loss that is not a gpt.cross_entropy is rejected.

module {
  // expected-error @+1 {{gpt-insert-logits: the loss of @forward must be the only result and come from a single gpt.cross_entropy}}
  func.func @forward(%x: tensor<f32> {gpt.input = "x"}) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// Tests that a loss built from a cross-entropy (here scaled) is rejected:
// its logits would not be the model's output alone.

module {
  // expected-error @+1 {{gpt-insert-logits: the loss of @forward must be the only result and come from a single gpt.cross_entropy}}
  func.func @forward(%x: tensor<2x16xf32> {gpt.input = "x"},
                     %targets: tensor<2xi32> {gpt.input = "targets"}) -> tensor<f32> {
    %ce = gpt.cross_entropy %x, %targets {vocab_size = 12 : i64} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
    %loss = gpt.add %ce, %ce : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that a function returning more than the loss is rejected.

module {
  // expected-error @+1 {{gpt-insert-logits: the loss of @forward must be the only result and come from a single gpt.cross_entropy}}
  func.func @forward(%x: tensor<2x16xf32> {gpt.input = "x"},
                     %targets: tensor<2xi32> {gpt.input = "targets"}) -> (tensor<f32>, tensor<f32>) {
    %loss = gpt.cross_entropy %x, %targets {vocab_size = 12 : i64} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
    return %loss, %loss : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that targets computed inside @forward (not an argument) are rejected.

module {
  func.func @forward(%x: tensor<2x16xf32> {gpt.input = "x"},
                     %targets: tensor<1x2xi32> {gpt.input = "targets"}) -> tensor<f32> {
    %t = gpt.reshape %targets : tensor<1x2xi32> to tensor<2xi32>
    // expected-error @+1 {{gpt-insert-logits: the targets of the loss must be a gpt.input argument of @forward}}
    %loss = gpt.cross_entropy %x, %t {vocab_size = 12 : i64} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that targets read by anything but the loss are rejected (dropping
// the argument would change the logits).

module {
  func.func @forward(%x: tensor<1x2x16xf32> {gpt.input = "x"},
                     %targets: tensor<1x2xi32> {gpt.input = "targets"},
                     %wte: tensor<16x16xf32> {gpt.param = "wte"},
                     %wpe: tensor<2x16xf32> {gpt.param = "wpe"}) -> tensor<f32> {
    // expected-error @+1 {{gpt-insert-logits: the targets are used by more than the loss of @forward}}
    %e = gpt.embed %wte, %wpe, %targets : (tensor<16x16xf32>, tensor<2x16xf32>, tensor<1x2xi32>) -> tensor<1x2x16xf32>
    %y = gpt.add %x, %e : tensor<1x2x16xf32>
    %loss = gpt.cross_entropy %y, %targets {vocab_size = 12 : i64} : (tensor<1x2x16xf32>, tensor<1x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that a targets argument that is not a gpt.input is rejected.

module {
  func.func @forward(%x: tensor<2x16xf32> {gpt.input = "x"}, %t: tensor<2xi32>) -> tensor<f32> {
    // expected-error @+1 {{gpt-insert-logits: the targets of the loss must be a gpt.input argument of @forward}}
    %loss = gpt.cross_entropy %x, %t {vocab_size = 12 : i64} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
