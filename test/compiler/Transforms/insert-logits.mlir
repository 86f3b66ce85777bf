// RUN: gpt-opt %s --split-input-file --gpt-insert-logits | FileCheck %s

// Tests that @logits takes the tokens and the parameters (not the targets)
// and returns the logits the cross-entropy read, named "logits".

// CHECK-LABEL: func.func @logits
// CHECK-SAME: (%[[TOK:[^:]*]]: tensor<2x4xi32> {gpt.input = "tokens"}, %[[WTE:[^:]*]]: tensor<16x8xf32> {gpt.param = "wte"}, %[[WPE:[^:]*]]: tensor<4x8xf32> {gpt.param = "wpe"})
// CHECK-SAME: -> (tensor<2x4x16xf32> {gpt.output = "logits"})
// CHECK-NEXT: %[[X:.*]] = gpt.embed %[[WTE]], %[[WPE]], %[[TOK]]
// CHECK-NEXT: %[[L:.*]] = gpt.matmul %[[X]], %[[WTE]] {transpose_rhs}
// CHECK-NEXT: return %[[L]] : tensor<2x4x16xf32>
module {
  func.func @forward(%tokens: tensor<2x4xi32> {gpt.input = "tokens"},
                     %targets: tensor<2x4xi32> {gpt.input = "targets"},
                     %wte: tensor<16x8xf32> {gpt.param = "wte"},
                     %wpe: tensor<4x8xf32> {gpt.param = "wpe"}) -> (tensor<f32> {gpt.output = "loss"}) {
    %x = gpt.embed %wte, %wpe, %tokens : (tensor<16x8xf32>, tensor<4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %logits = gpt.matmul %x, %wte {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %loss = gpt.cross_entropy %logits, %targets {vocab_size = 12 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that @forward is left unchanged and @logits follows it.

// CHECK-LABEL: func.func @forward(%{{[^:]*}}: tensor<2x4x16xf32> {gpt.input = "x"}, %{{[^:]*}}: tensor<2x4xi32> {gpt.input = "targets"})
// CHECK-NEXT: gpt.cross_entropy
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @logits(
// CHECK-NOT: gpt.cross_entropy
// CHECK: func.func @other()
module {
  func.func @forward(%logits: tensor<2x4x16xf32> {gpt.input = "x"},
                     %targets: tensor<2x4xi32> {gpt.input = "targets"}) -> (tensor<f32> {gpt.output = "loss"}) {
    %loss = gpt.cross_entropy %logits, %targets {vocab_size = 12 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @other() {
    return
  }
}

// -----

// Tests that bf16 logits (a bf16 GEMM under --precision=bf16) are returned
// as the fp32 value the cross-entropy read, with no extra cast.

// CHECK-LABEL: func.func @logits(%{{[^:]*}}: tensor<2x4x8xbf16>
// CHECK-SAME: -> (tensor<2x4x16xf32> {gpt.output = "logits"})
// CHECK: %[[H:[^ ]*]] = gpt.matmul {{.*}} -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[F:.*]] = gpt.cast %[[H]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT: return %[[F]] : tensor<2x4x16xf32>
module {
  func.func @forward(%x: tensor<2x4x8xbf16> {gpt.input = "x"},
                     %w: tensor<16x8xbf16> {gpt.param = "w"},
                     %targets: tensor<2x4xi32> {gpt.input = "targets"}) -> (tensor<f32> {gpt.output = "loss"}) {
    %h = gpt.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
    %f = gpt.cast %h : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
    %loss = gpt.cross_entropy %f, %targets {vocab_size = 12 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that logits narrower than fp32 that reach the cross-entropy
// directly are cast to fp32 for the caller.

// CHECK-LABEL: func.func @logits(%{{[^:]*}}: tensor<2x4x8xbf16>
// CHECK-SAME: -> (tensor<2x4x16xf32> {gpt.output = "logits"})
// CHECK: %[[H:[^ ]*]] = gpt.matmul {{.*}} -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[F:.*]] = gpt.cast %[[H]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT: return %[[F]] : tensor<2x4x16xf32>
module {
  func.func @forward(%x: tensor<2x4x8xbf16> {gpt.input = "x"},
                     %w: tensor<16x8xbf16> {gpt.param = "w"},
                     %targets: tensor<2x4xi32> {gpt.input = "targets"}) -> (tensor<f32> {gpt.output = "loss"}) {
    %h = gpt.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
    %loss = gpt.cross_entropy %h, %targets {vocab_size = 12 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that ops only the loss needed are dropped.

// CHECK-LABEL: func.func @logits(%{{[^:]*}}: tensor<2x4x16xf32> {gpt.input = "x"}) -> (tensor<2x4x16xf32>
// CHECK-NOT: gpt.gelu
// CHECK-NEXT: return %{{.*}} : tensor<2x4x16xf32>
module {
  func.func @forward(%x: tensor<2x4x16xf32> {gpt.input = "x"},
                     %targets: tensor<2x4xi32> {gpt.input = "targets"}) -> (tensor<f32> {gpt.output = "loss"}) {
    %unused = gpt.gelu %x : tensor<2x4x16xf32>
    %loss = gpt.cross_entropy %x, %targets {vocab_size = 12 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
