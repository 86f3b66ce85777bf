// RUN: gpt-opt %s --split-input-file --gpt-plan-memory | FileCheck %s

// Tests that a buffer whose value is dead is reused by a later one of the
// same size, while buffers live at once get disjoint offsets.

// CHECK-LABEL: func.func @f
// CHECK-SAME: %{{.*}}: tensor<64xf32> {gpt.input = "x", gpt.offset = 0 : i64, gpt.pool = "inputs"}
// CHECK-SAME: gpt.memory_plan = {activations = 512 : i64, inputs = 256 : i64}
// CHECK: gpt.exp {{.*}} {gpt.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: gpt.tanh {{.*}} {gpt.offsets = array<i64: [[B:[0-9]+]]>}
// CHECK: gpt.neg {{.*}} {gpt.offsets = array<i64: [[A]]>}
func.func @f(%x: tensor<64xf32> {gpt.input = "x"}) -> tensor<64xf32> {
  %a = gpt.exp %x : tensor<64xf32>
  %b = gpt.tanh %a : tensor<64xf32>
  %c = gpt.neg %b : tensor<64xf32>
  return %c : tensor<64xf32>
}

// -----

// Tests that a reshape is a view sharing its operand's buffer, which stays
// live as long as the view is read.

// CHECK-LABEL: func.func @f
// CHECK-SAME: gpt.memory_plan = {activations = 768
// CHECK: gpt.exp {{.*}} {gpt.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: gpt.reshape {{.*}} {gpt.offsets = array<i64: [[A]]>}
// CHECK: gpt.tanh {{.*}} {gpt.offsets = array<i64: [[B:[0-9]+]]>}
// CHECK-NOT: array<i64: [[A]]>
// CHECK: return
func.func @f(%x: tensor<64xf32> {gpt.input = "x"}) -> tensor<8x8xf32> {
  %a = gpt.exp %x : tensor<64xf32>
  %r = gpt.reshape %a : tensor<64xf32> to tensor<8x8xf32>
  %b = gpt.tanh %r : tensor<8x8xf32>
  %c = gpt.add %b, %r : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Tests that AdamW updates a parameter and its moments in place when it
// reads them last (offset -1: the result lives in the argument).

// CHECK-LABEL: func.func @f
// CHECK-SAME: gpt.pool = "params"
// CHECK-SAME: gpt.pool = "state"
// CHECK: gpt.adamw {{.*}} {{{.*}}gpt.offsets = array<i64: -1, -1, -1>
func.func @f(%p: tensor<4xf32> {gpt.param = "w"}, %g: tensor<4xf32> {gpt.input = "g"},
             %m: tensor<4xf32> {gpt.state = "w.adam_m"}, %v: tensor<4xf32> {gpt.state = "w.adam_v"},
             %lr: tensor<f32> {gpt.input = "lr"}, %step: tensor<i32> {gpt.input = "step"},
             %s: tensor<f32> {gpt.input = "s"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p1, %m1, %v1 = gpt.adamw %p, %g, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>
  return %p1, %m1, %v1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that gpt.adamw_multi updates each parameter and its moments in place
// like gpt.adamw, and gives a parameter read after it a buffer of its own,
// while that parameter's moments, read by nothing else, stay in place (each
// array decides alone: under ZeRO-1 the parameter is a slice, the moments
// arguments). Results: new params, new ms, new vs.

// CHECK-LABEL: func.func @f
// CHECK: gpt.adamw_multi {{.*}} {{{.*}}gpt.offsets = array<i64: -1, 0, -1, -1, -1, -1>
func.func @f(%p: tensor<4xf32> {gpt.param = "w"}, %q: tensor<4xf32> {gpt.param = "b"},
             %g: tensor<4xf32> {gpt.input = "g"},
             %m: tensor<4xf32> {gpt.state = "w.adam_m"}, %v: tensor<4xf32> {gpt.state = "w.adam_v"},
             %mq: tensor<4xf32> {gpt.state = "b.adam_m"}, %vq: tensor<4xf32> {gpt.state = "b.adam_v"},
             %lr: tensor<f32> {gpt.input = "lr"}, %step: tensor<i32> {gpt.input = "step"},
             %s: tensor<f32> {gpt.input = "s"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %np:2, %nm:2, %nv:2 = gpt.adamw_multi (%p, %q), (%g, %g), (%m, %mq), (%v, %vq), %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decays = array<f64: 0.1, 0.0>}
      : (tensor<4xf32>, tensor<4xf32>), tensor<f32>, tensor<i32>, tensor<f32>
  %later = gpt.neg %q : tensor<4xf32>
  return %np#0, %np#1, %later : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that an all_reduce reduces an operand only it reads in place (same
// offset), and gives an operand read elsewhere a buffer of its own.

// CHECK-LABEL: func.func @f
// CHECK: gpt.exp {{.*}} {gpt.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: gpt.tanh {{.*}} {gpt.offsets = array<i64: [[B:[0-9]+]]>}
// CHECK: gpt.all_reduce {{.*}} gpt.offsets = array<i64: [[A]], [[C:[0-9]+]]>
// CHECK: return
func.func @f(%x: tensor<64xf32> {gpt.input = "x"}) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %a = gpt.exp %x : tensor<64xf32>
  %b = gpt.tanh %x : tensor<64xf32>
  %r:2 = gpt.all_reduce mean %a, %b {bucket = 0 : i64, bytes = 512 : i64, world_size = 2 : i64}
      : tensor<64xf32>, tensor<64xf32>
  %c = gpt.neg %b : tensor<64xf32>
  return %r#0, %r#1, %c : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Tests that a cross_entropy_grad writes its gradient over logits nothing
// reads after it (same offset).

// CHECK-LABEL: func.func @f
// CHECK: gpt.matmul {{.*}} {gpt.offsets = array<i64: [[L:[0-9]+]]>,
// CHECK: gpt.cross_entropy_grad {{.*}} {gpt.offsets = array<i64: [[L]]>
// CHECK: return
func.func @f(%x: tensor<2x4x8xbf16> {gpt.input = "x"}, %w: tensor<16x8xbf16> {gpt.param = "w"},
             %t: tensor<2x4xi32> {gpt.input = "t"}) -> (tensor<f32>, tensor<2x4x16xbf16>) {
  %logits = gpt.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 13 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %d = gpt.cross_entropy_grad %loss, %logits, %t {vocab_size = 13 : i64} : (tensor<f32>, tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
  return %loss, %d : tensor<f32>, tensor<2x4x16xbf16>
}

// -----

// Tests that logits read after their cross_entropy_grad keep their own
// buffer: the gradient gets another.

// CHECK-LABEL: func.func @f
// CHECK: gpt.matmul {{.*}} {gpt.offsets = array<i64: 0>,
// CHECK: gpt.cross_entropy_grad {{.*}} {gpt.offsets = array<i64: 512>
// CHECK: gpt.neg {{.*}} {gpt.offsets = array<i64: 256>}
// CHECK: return
func.func @f(%x: tensor<2x4x8xbf16> {gpt.input = "x"}, %w: tensor<16x8xbf16> {gpt.param = "w"},
             %t: tensor<2x4xi32> {gpt.input = "t"}) -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) {
  %logits = gpt.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 13 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %d = gpt.cross_entropy_grad %loss, %logits, %t {vocab_size = 13 : i64} : (tensor<f32>, tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
  %n = gpt.neg %logits : tensor<2x4x16xbf16>
  return %d, %n : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>
}

// -----

// Tests that a cross_entropy_grad never writes over logits that are an
// argument: the gradient gets an activation buffer.

// CHECK-LABEL: func.func @f
// CHECK: gpt.cross_entropy_grad {{.*}} {gpt.offsets = array<i64: 256>
// CHECK: return
func.func @f(%logits: tensor<2x4x16xbf16> {gpt.input = "logits"},
             %t: tensor<2x4xi32> {gpt.input = "t"}) -> (tensor<f32>, tensor<2x4x16xbf16>) {
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 13 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %d = gpt.cross_entropy_grad %loss, %logits, %t {vocab_size = 13 : i64} : (tensor<f32>, tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
  return %loss, %d : tensor<f32>, tensor<2x4x16xbf16>
}

// -----

// Tests that logits read after their cross_entropy_grad through a view
// (made before it) keep their own buffer.

// CHECK-LABEL: func.func @f
// CHECK: gpt.matmul {{.*}} {gpt.offsets = array<i64: 0>,
// CHECK: gpt.cross_entropy_grad {{.*}} {gpt.offsets = array<i64: 512>
// CHECK: return
func.func @f(%x: tensor<2x4x8xbf16> {gpt.input = "x"}, %w: tensor<16x8xbf16> {gpt.param = "w"},
             %t: tensor<2x4xi32> {gpt.input = "t"}) -> (tensor<2x4x16xbf16>, tensor<8x16xbf16>) {
  %logits = gpt.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss = gpt.cross_entropy %logits, %t {vocab_size = 13 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %v = gpt.reshape %logits : tensor<2x4x16xbf16> to tensor<8x16xbf16>
  %d = gpt.cross_entropy_grad %loss, %logits, %t {vocab_size = 13 : i64} : (tensor<f32>, tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
  %n = gpt.neg %v : tensor<8x16xbf16>
  return %d, %n : tensor<2x4x16xbf16>, tensor<8x16xbf16>
}

// -----

// Tests that an FP8 amax history is shifted and recorded in the state
// argument's bytes when nothing reads it later (delayed scaling: offset
// -1 for both).

// CHECK-LABEL: func.func @f
// CHECK: gpt.fp8_scale {{.*}} {gpt.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, -1>}
// CHECK: gpt.fp8_cast_transpose {{.*}} {gpt.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, -1>}
func.func @f(%h: tensor<4xf32> {gpt.state = "fp8.amax_history.0"},
             %x: tensor<8x16xbf16> {gpt.input = "x"}) -> (tensor<4xf32>, tensor<f32>, tensor<8x16xf8E4M3FN>) {
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  return %h2, %inv, %q : tensor<4xf32>, tensor<f32>, tensor<8x16xf8E4M3FN>
}

// -----

// Tests that a history read again after its scale (a recomputed scale) is
// not overwritten there: the shifted history gets its own buffer, which
// the cast-transpose then records in; the recomputed scale, the last
// reader, may shift it in place.

// CHECK-LABEL: func.func @f
// CHECK: gpt.fp8_scale {{.*}} {gpt.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, [[H1:[0-9]+]]>}
// CHECK: gpt.fp8_cast_transpose {{.*}} {gpt.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, [[H1]]>}
// CHECK: gpt.fp8_scale {{.*}} {gpt.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, -1>, gpt.remat}
func.func @f(%h: tensor<4xf32> {gpt.state = "fp8.amax_history.0"},
             %x: tensor<8x16xbf16> {gpt.input = "x"}) -> (tensor<4xf32>, tensor<f32>, tensor<8x16xf8E4M3FN>) {
  %s, %inv, %h1 = gpt.fp8_scale e4m3 %x history %h : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  %q, %qt, %h2 = gpt.fp8_cast_transpose e4m3 %x, %s history %h1 : (tensor<8x16xbf16>, tensor<f32>, tensor<4xf32>) -> (tensor<8x16xf8E4M3FN>, tensor<16x8xf8E4M3FN>, tensor<4xf32>)
  %s2, %inv2, %h3 = gpt.fp8_scale e4m3 %x history %h {gpt.remat} : (tensor<8x16xbf16>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<4xf32>)
  return %h2, %inv2, %q : tensor<4xf32>, tensor<f32>, tensor<8x16xf8E4M3FN>
}

// -----

// Tests that the plan names what its activations hold where they peak: by
// the op kind and element type of each buffer's producer, largest first.
// At the add, %a, %b (f32, 256 B each), %h (f16, 256 B) and the sum are
// live; equal sizes go by name.

// CHECK-LABEL: func.func @f
// CHECK-SAME: gpt.live_at_peak = "exp f32 512 B x2, add f32 256 B x1, tanh f16 256 B x1"
func.func @f(%x: tensor<64xf32> {gpt.input = "x"}, %y: tensor<128xf16> {gpt.input = "y"}) -> (tensor<64xf32>, tensor<128xf16>) {
  %a = gpt.exp %x : tensor<64xf32>
  %b = gpt.exp %a : tensor<64xf32>
  %h = gpt.tanh %y : tensor<128xf16>
  %c = gpt.add %a, %b : tensor<64xf32>
  return %c, %h : tensor<64xf32>, tensor<128xf16>
}

// -----

// Tests that every function with a body is planned, each alone (the
// programs run one after another: @a's buffer and @b's share offset 0),
// and that a declaration is left alone.

// CHECK:       func.func private @decl(tensor<64xf32>) -> tensor<64xf32>{{$}}
// CHECK-LABEL: func.func @a
// CHECK-SAME:  gpt.memory_plan = {activations = 256 : i64, inputs = 256 : i64}
// CHECK:       gpt.exp {{.*}} {gpt.offsets = array<i64: 0>}
// CHECK-LABEL: func.func @b
// CHECK-SAME:  gpt.memory_plan = {activations = 256 : i64, inputs = 256 : i64}
// CHECK:       gpt.tanh {{.*}} {gpt.offsets = array<i64: 0>}
func.func private @decl(tensor<64xf32>) -> tensor<64xf32>
func.func @a(%x: tensor<64xf32> {gpt.input = "x"}) -> tensor<64xf32> {
  %y = gpt.exp %x : tensor<64xf32>
  return %y : tensor<64xf32>
}
func.func @b(%x: tensor<64xf32> {gpt.input = "x"}) -> tensor<64xf32> {
  %y = gpt.tanh %x : tensor<64xf32>
  return %y : tensor<64xf32>
}
