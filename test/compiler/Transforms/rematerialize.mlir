// RUN: gpt-opt %s --split-input-file --verify-diagnostics --gpt-rematerialize="memory-budget=0.021484375" | FileCheck %s

// Budget 0.021484375 GiB = 22 MiB. Every tensor is 4 MiB; the argument
// takes 4 MiB and the peak (at %s) holds %h, %g, %p, %q and %s: 24 MiB.

// Tests that the cheapest value live across the peak (%g: one gelu of %h,
// which the last add reads anyway) is rebuilt right before its late read,
// while the costly matmul result %h is kept.

// CHECK-LABEL: func.func @f
// CHECK-SAME: gpt.remat_plan = {budget = 23068672 : i64, extra_flops = 1048576 : i64, ops = 1 : i64, peak_after = 20971520 : i64, peak_before = 25165824 : i64
// CHECK-SAME: values = 1 : i64
// CHECK:      %[[H:.*]] = gpt.matmul %arg0, %arg0
// CHECK:      gpt.gelu %[[H]] : tensor
// CHECK:      %[[S:.*]] = gpt.add
// CHECK-NEXT: %[[G2:.*]] = gpt.gelu %[[H]] {gpt.remat}
// CHECK-NEXT: gpt.mul %[[S]], %[[G2]]
// CHECK-NOT:  gpt.remat
// expected-remark @+1 {{gpt-rematerialize: @f planned peak 24.00 MiB -> 20.00 MiB (budget 22.00 MiB, fitted to 21.89 MiB): recomputes 1 values (1 ops: gelu x1), 4.00 MiB saved}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %h = gpt.matmul %x, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %g = gpt.gelu %h : tensor<1024x1024xf32>
  %p = gpt.exp %g : tensor<1024x1024xf32>
  %q = gpt.neg %p : tensor<1024x1024xf32>
  %s = gpt.add %p, %q : tensor<1024x1024xf32>
  %t = gpt.mul %s, %g : tensor<1024x1024xf32>
  %u = gpt.add %t, %h : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that a step already within the budget is left alone.

// CHECK-LABEL: func.func @f
// CHECK-SAME: values = 0 : i64
// CHECK-NOT:  gpt.remat}
// CHECK:      return
// expected-remark @+1 {{planned peak 16.00 MiB -> 16.00 MiB (budget 22.00 MiB, fitted to 21.89 MiB): nothing recomputed}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %h = gpt.tanh %x : tensor<1024x1024xf32>
  %g = gpt.gelu %h : tensor<1024x1024xf32>
  %u = gpt.add %g, %h : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that a function not marked gpt.train_step (init, forward, logits:
// no backward keeps activations) is left alone over the budget: no plan,
// no remark, nothing recomputed.

// CHECK-LABEL: func.func @forward
// CHECK-NOT:  gpt.remat
// CHECK:      return
func.func @forward(%x: tensor<1024x1024xf32> {gpt.input = "x"}) -> tensor<1024x1024xf32> {
  %h = gpt.tanh %x : tensor<1024x1024xf32>
  %g = gpt.gelu %h : tensor<1024x1024xf32>
  %a = gpt.exp %h : tensor<1024x1024xf32>
  %c = gpt.neg %h : tensor<1024x1024xf32>
  // The peak, 24 MiB with %x: %h, %g, %a, %c and %b.
  %b = gpt.add %a, %g : tensor<1024x1024xf32>
  %u = gpt.add %b, %c : tensor<1024x1024xf32>
  %v = gpt.mul %u, %h : tensor<1024x1024xf32>
  return %v : tensor<1024x1024xf32>
}

// -----

// Tests that random samples are never recomputed: the cheaper
// gpt.random_normal result %r stays, the costlier matmul %h is rebuilt
// (from the argument) instead.

// CHECK-LABEL: func.func @f
// CHECK:      %[[R:.*]] = gpt.random_normal
// CHECK-NOT:  gpt.random_normal
// CHECK:      %[[H2:.*]] = gpt.matmul %arg0, %arg0 {gpt.remat}
// CHECK-NEXT: gpt.mul %{{.*}}, %[[H2]]
// CHECK:      gpt.add %{{.*}}, %[[R]]
// expected-remark @+1 {{recomputes 1 values (1 ops: matmul x1)}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}, %seed: tensor<i32> {gpt.input = "seed"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %h = gpt.matmul %x, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %r = gpt.random_normal %seed {stream = 0 : i64, std = 1.0 : f64} : (tensor<i32>) -> tensor<1024x1024xf32>
  %p = gpt.exp %x : tensor<1024x1024xf32>
  %q = gpt.neg %p : tensor<1024x1024xf32>
  %s = gpt.add %p, %q : tensor<1024x1024xf32>
  %t = gpt.mul %s, %h : tensor<1024x1024xf32>
  %u = gpt.add %t, %r : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that a view read after the peak is rebuilt on top of the rebuilt
// value it views.

// CHECK-LABEL: func.func @f
// CHECK:      %[[S:.*]] = gpt.add
// CHECK-NEXT: %[[G2:.*]] = gpt.gelu %{{.*}} {gpt.remat}
// CHECK-NEXT: %[[V2:.*]] = gpt.reshape %[[G2]] {gpt.remat}
// CHECK-NEXT: gpt.mul %[[S]], %[[V2]]
// expected-remark @+1 {{recomputes 1 values (2 ops: gelu x1)}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %h = gpt.matmul %x, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %g0 = gpt.gelu %h : tensor<1024x1024xf32>
  %g = gpt.reshape %g0 : tensor<1024x1024xf32> to tensor<1024x1024xf32>
  %p = gpt.exp %g : tensor<1024x1024xf32>
  %q = gpt.neg %p : tensor<1024x1024xf32>
  %s = gpt.add %p, %q : tensor<1024x1024xf32>
  %t = gpt.mul %s, %g : tensor<1024x1024xf32>
  %u = gpt.add %t, %h : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that a budget no plan reaches is an error naming the budget and
// the best peak found: at %d, the random %h and %c cannot be recomputed
// and %a and %b are read there.

// expected-error @+1 {{gpt-rematerialize: @f does not fit the memory budget of 22.00 MiB: the best plan found peaks at 24.00 MiB (from 24.00 MiB; arguments alone take 4.00 MiB) after recomputing 0 values}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}, %seed: tensor<i32> {gpt.input = "seed"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %h = gpt.random_normal %seed {stream = 0 : i64, std = 1.0 : f64} : (tensor<i32>) -> tensor<1024x1024xf32>
  %c = gpt.random_normal %seed {stream = 1 : i64, std = 1.0 : f64} : (tensor<i32>) -> tensor<1024x1024xf32>
  %a = gpt.exp %x : tensor<1024x1024xf32>
  %b = gpt.neg %x : tensor<1024x1024xf32>
  %d = gpt.add %a, %b : tensor<1024x1024xf32>
  %e = gpt.add %d, %c : tensor<1024x1024xf32>
  %f = gpt.add %e, %h : tensor<1024x1024xf32>
  return %f : tensor<1024x1024xf32>
}

// -----

// Tests that two values rebuilt from the same ops share them: %a (cheap)
// is rebuilt first, before its read in %u; then %b, read earlier in %t,
// is rebuilt from %a's ops again. The later copies of tanh and neg merge
// into the earlier ones, which %u then reads (the peak stays 20 MiB).

// CHECK-LABEL: func.func @f
// CHECK-SAME: ops = 3 : i64
// CHECK:      %[[S2:.*]] = gpt.add %{{.*}}, %0 :
// CHECK-NEXT: %[[N2:.*]] = gpt.tanh %arg0 {gpt.remat}
// CHECK-NEXT: %[[A2:.*]] = gpt.neg %[[N2]] {gpt.remat}
// CHECK-NEXT: %[[B2:.*]] = gpt.matmul %[[A2]], %arg0 {gpt.remat}
// CHECK-NEXT: %[[T:.*]] = gpt.mul %[[S2]], %[[B2]]
// CHECK-NEXT: gpt.add %[[T]], %[[A2]]
// CHECK-NOT:  gpt.remat
// expected-remark @+1 {{recomputes 2 values (3 ops: matmul x1, neg x1)}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}, %seed: tensor<i32> {gpt.input = "seed"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %r = gpt.random_normal %seed {stream = 0 : i64, std = 1.0 : f64} : (tensor<i32>) -> tensor<1024x1024xf32>
  %n = gpt.tanh %x : tensor<1024x1024xf32>
  %a = gpt.neg %n : tensor<1024x1024xf32>
  %b = gpt.matmul %a, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %p = gpt.exp %x : tensor<1024x1024xf32>
  %q = gpt.neg %p : tensor<1024x1024xf32>
  %s = gpt.add %p, %q : tensor<1024x1024xf32>
  %s2 = gpt.add %s, %r : tensor<1024x1024xf32>
  %t = gpt.mul %s2, %b : tensor<1024x1024xf32>
  %u = gpt.add %t, %a : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}

// -----

// Tests that clones of the same ops stay apart where sharing them would
// break the budget: %a's rebuild before %u and %b's before %t both compute
// tanh and neg, but one shared neg living from %t to %u would hold 24 MiB
// there (with %r, %s, %b's copy and %t).

// CHECK-LABEL: func.func @f
// CHECK:      %[[S:.*]] = gpt.add %{{.*}}, %{{.*}} :
// CHECK:      gpt.tanh %arg0 {gpt.remat}
// CHECK:      gpt.mul %[[S]]
// CHECK-NEXT: %[[N3:.*]] = gpt.tanh %arg0 {gpt.remat}
// CHECK-NEXT: %[[A3:.*]] = gpt.neg %[[N3]] {gpt.remat}
// CHECK-NEXT: gpt.add %{{.*}}, %[[A3]]
// expected-remark @+1 {{gpt-rematerialize: @f planned peak 28.00 MiB -> 20.00 MiB}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}, %seed: tensor<i32> {gpt.input = "seed"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %r = gpt.random_normal %seed {stream = 0 : i64, std = 1.0 : f64} : (tensor<i32>) -> tensor<1024x1024xf32>
  %n = gpt.tanh %x : tensor<1024x1024xf32>
  %a = gpt.neg %n : tensor<1024x1024xf32>
  %b = gpt.matmul %a, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %p = gpt.exp %x : tensor<1024x1024xf32>
  %q = gpt.neg %p : tensor<1024x1024xf32>
  %s = gpt.add %p, %q : tensor<1024x1024xf32>
  %t = gpt.mul %s, %b : tensor<1024x1024xf32>
  %u = gpt.add %t, %a : tensor<1024x1024xf32>
  %v = gpt.add %u, %r : tensor<1024x1024xf32>
  return %v : tensor<1024x1024xf32>
}

// -----

// Tests that the remark names what is live at the peak: the activations by
// op kind and element type, largest first (names in order at equal
// bytes), the five largest groups named and the rest summed.

// CHECK-LABEL: func.func @f
// expected-remark @+1 {{nothing recomputed, 0 B saved, +0.0% FLOPs (+0.0% by the cost model); live at the peak: 3.50 MiB of arguments, 9.50 MiB of activations (exp f32 2.50 MiB x2, neg f32 2.50 MiB x2, add f32 2.00 MiB x1, gelu f32 1.00 MiB x1, tanh f32 1.00 MiB x1, others 512.00 KiB x1)}}
func.func @f(%x1: tensor<128x1024xf32> {gpt.input = "x1"}, %x2: tensor<256x1024xf32> {gpt.input = "x2"},
             %x3: tensor<512x1024xf32> {gpt.input = "x3"})
    -> (tensor<512x1024xf32>, tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<128x1024xf32>,
        tensor<128x1024xf32>, tensor<128x1024xf32>) attributes {gpt.train_step} {
  %a = gpt.exp %x3 : tensor<512x1024xf32>
  %b = gpt.neg %x3 : tensor<512x1024xf32>
  %c = gpt.tanh %x2 : tensor<256x1024xf32>
  %d = gpt.gelu %x2 : tensor<256x1024xf32>
  %e = gpt.exp %x1 : tensor<128x1024xf32>
  %f = gpt.mul %x1, %x1 : tensor<128x1024xf32>
  %g = gpt.neg %x1 : tensor<128x1024xf32>
  %r = gpt.add %a, %b : tensor<512x1024xf32>
  return %r, %c, %d, %e, %f, %g : tensor<512x1024xf32>, tensor<256x1024xf32>, tensor<256x1024xf32>,
      tensor<128x1024xf32>, tensor<128x1024xf32>, tensor<128x1024xf32>
}

// -----

// Tests that a widening cast read once, late, moves to just before its
// reader: the bf16 value lives on instead of the f32 one.

// CHECK-LABEL: func.func @f
// CHECK:      %[[N:.*]] = gpt.cast %arg0 : tensor<1024x1024xf32> to tensor<1024x1024xbf16>
// CHECK:      %[[G:.*]] = gpt.gelu
// CHECK-NEXT: %[[W:.*]] = gpt.cast %[[N]] : tensor<1024x1024xbf16> to tensor<1024x1024xf32>
// CHECK-NEXT: gpt.add %[[G]], %[[W]]
// expected-remark @+1 {{nothing recomputed}}
func.func @f(%x: tensor<1024x1024xf32> {gpt.input = "x"}) -> tensor<1024x1024xf32> attributes {gpt.train_step} {
  %n = gpt.cast %x : tensor<1024x1024xf32> to tensor<1024x1024xbf16>
  %w = gpt.cast %n : tensor<1024x1024xbf16> to tensor<1024x1024xf32>
  %h = gpt.tanh %x : tensor<1024x1024xf32>
  %g = gpt.gelu %h : tensor<1024x1024xf32>
  %u = gpt.add %g, %w : tensor<1024x1024xf32>
  return %u : tensor<1024x1024xf32>
}
