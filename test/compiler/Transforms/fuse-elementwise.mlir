// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise | FileCheck %s
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=siblings=false | FileCheck %s --check-prefix=NOSIB
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=max-arguments=4 | FileCheck %s --check-prefix=CAP
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=narrow-row-outputs=false | FileCheck %s --check-prefix=WIDE
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=add-layernorm=false | FileCheck %s --check-prefix=NOADDLN
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=gelu-grad-sum=false | FileCheck %s --check-prefix=NOGGS
// RUN: gpt-opt %s --split-input-file --gpt-fuse-elementwise=attention-grad-sum=false | FileCheck %s --check-prefix=NOAGS

// Tests that a producer -> consumer chain becomes one fusion with one result.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = gpt.fusion(%[[X]], %[[Y]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xbf16> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:   %[[S:.*]] = gpt.add %[[A]], %[[B]]
// CHECK-NEXT:   %[[G:.*]] = gpt.gelu %[[S]]
// CHECK-NEXT:   %[[C:.*]] = gpt.cast %[[G]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT:   gpt.yield %[[C]] : tensor<4x8xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]
func.func @chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  %0 = gpt.add %x, %y : tensor<4x8xf32>
  %1 = gpt.gelu %0 : tensor<4x8xf32>
  %2 = gpt.cast %1 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %2 : tensor<4x8xbf16>
}

// -----

// Tests that a member read outside the group stays a result of the fusion.
// CHECK-LABEL: func.func @outside_use
// CHECK: %[[R:.*]]:2 = gpt.fusion(%{{.*}}) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>)
// CHECK:   %[[G:.*]] = gpt.gelu
// CHECK:   %[[C:.*]] = gpt.cast %[[G]]
// CHECK:   gpt.yield %[[G]], %[[C]] : tensor<4x8xf32>, tensor<4x8xbf16>
// CHECK: gpt.reduce sum %[[R]]#0
// CHECK: return %{{.*}}, %[[R]]#1
func.func @outside_use(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xbf16>) {
  %0 = gpt.gelu %x : tensor<4x8xf32>
  %1 = gpt.cast %0 : tensor<4x8xf32> to tensor<4x8xbf16>
  %2 = gpt.reduce sum %0 dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %2, %1 : tensor<f32>, tensor<4x8xbf16>
}

// -----

// Tests that independent casts of arguments (mixed precision's weight casts)
// share one fusion, placed before their first reader, whatever their sizes.
// CHECK-LABEL: func.func @sibling_casts
// CHECK: %[[R:.*]]:3 = gpt.fusion(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>)
// CHECK-COUNT-3: gpt.cast
// CHECK: gpt.yield
// CHECK: gpt.matmul %[[R]]#0, %[[R]]#1
// CHECK: gpt.bias_add %{{.*}}, %[[R]]#2
// NOSIB-LABEL: func.func @sibling_casts
// NOSIB-NOT: gpt.fusion
// NOSIB: return
func.func @sibling_casts(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %xh = gpt.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %wh = gpt.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = gpt.matmul %xh, %wh : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %bh = gpt.cast %b : tensor<8xf32> to tensor<8xbf16>
  %z = gpt.bias_add %y, %bh : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
}

// -----

// Tests that a non-elementwise op between two elementwise ops splits them:
// the softmax reads a whole row, so neither neighbour fuses with it.
// CHECK-LABEL: func.func @barrier
// CHECK-NOT: gpt.fusion
// CHECK: gpt.exp
// CHECK: gpt.softmax
// CHECK: gpt.neg
func.func @barrier(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.exp %x : tensor<4x8xf32>
  %1 = gpt.softmax %0 : tensor<4x8xf32>
  %2 = gpt.neg %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that ops over different index spaces do not chain: the (8) bias cast
// is not pulled into the (4, 8) bias_add -> gelu chain.
// CHECK-LABEL: func.func @shapes
// CHECK: %[[BH:.*]] = gpt.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CHECK: gpt.fusion(%{{.*}}, %[[BH]]) : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK:   gpt.bias_add
// CHECK:   gpt.gelu
// CHECK:   gpt.yield
func.func @shapes(%y: tensor<4x8xbf16>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = gpt.softmax %y : tensor<4x8xbf16>
  %bh = gpt.cast %b : tensor<8xf32> to tensor<8xbf16>
  %z = gpt.bias_add %s, %bh : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %g = gpt.gelu %z : tensor<4x8xbf16>
  return %g : tensor<4x8xbf16>
}

// -----

// Tests that a group is not formed when an outside op reads a member before
// the group's last member: fusing would need the value before it exists.
// CHECK-LABEL: func.func @no_cycle
// CHECK-NOT: gpt.fusion
// CHECK: %[[E:.*]] = gpt.exp
// CHECK: %[[S:.*]] = gpt.softmax %[[E]]
// CHECK: gpt.add %[[E]], %[[S]]
func.func @no_cycle(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gpt.exp %x : tensor<4x8xf32>
  %1 = gpt.softmax %0 : tensor<4x8xf32>
  %2 = gpt.add %0, %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that constants are cloned into the fusion body, not passed in.
// CHECK-LABEL: func.func @constant
// CHECK-NOT: gpt.constant
// CHECK: gpt.fusion(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK:   gpt.constant 2.0
// CHECK:   gpt.mul
// CHECK:   gpt.exp
func.func @constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = gpt.constant 2.0 : tensor<4xf32>
  %0 = gpt.mul %x, %c : tensor<4xf32>
  %1 = gpt.exp %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that independent gradient casts are delayed to the last one and
// share a fusion when nothing reads them before it.
// CHECK-LABEL: func.func @sibling_grad_casts
// CHECK: gpt.matmul
// CHECK: gpt.matmul
// CHECK: %[[R:.*]]:2 = gpt.fusion
// CHECK: gpt.global_norm %[[R]]#0, %[[R]]#1
func.func @sibling_grad_casts(%a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>) -> tensor<f32> {
  %0 = gpt.matmul %a, %b : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %1 = gpt.cast %0 : tensor<8x8xbf16> to tensor<8x8xf32>
  %2 = gpt.matmul %b, %a : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %3 = gpt.cast %2 : tensor<8x8xbf16> to tensor<8x8xf32>
  %n = gpt.global_norm %1, %3 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

// Tests that a sibling is not delayed past an op that reads it.
// CHECK-LABEL: func.func @sibling_read_early
// CHECK-NOT: gpt.fusion
func.func @sibling_read_early(%a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = gpt.matmul %a, %b : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %1 = gpt.cast %0 : tensor<8x8xbf16> to tensor<8x8xf32>
  %s = gpt.softmax %1 : tensor<8x8xf32>
  %sh = gpt.cast %s : tensor<8x8xf32> to tensor<8x8xbf16>
  %2 = gpt.matmul %sh, %a : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %3 = gpt.cast %2 : tensor<8x8xbf16> to tensor<8x8xf32>
  return %s, %3 : tensor<8x8xf32>, tensor<8x8xf32>
}

// The driver runs the pass by default before memory planning;
// --fuse-elementwise=false leaves every elementwise op on its own (and
// without GEMM epilogues, whose fusions gpt-fuse-matmul-epilogue makes, no
// gpt.fusion is left).
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=memory-plan | FileCheck %s --check-prefix=GPTC
// RUN: gptc compile %models/gpt2.mlir --model=tiny --precision=bf16 --compile-to=memory-plan --fuse-elementwise=false --fuse-matmul-epilogue=false | FileCheck %s --check-prefix=NOFUSE
// GPTC-LABEL: func.func @train_step
// GPTC: gpt.fusion
// GPTC: gpt.offsets
// NOFUSE-NOT: gpt.fusion

// -----

// Tests that no merge gives a fusion more than max-arguments operands plus
// results (its kernel's pointers): under 4, the third cast stays alone.
// CHECK-LABEL: func.func @argument_cap
// CHECK: gpt.fusion({{.*}}) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
// CAP-LABEL: func.func @argument_cap
// CAP: gpt.fusion({{.*}}) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>)
// CAP: gpt.yield
// CAP-NEXT: }
// CAP-NEXT: gpt.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CAP-NEXT: return
func.func @argument_cap(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %0 = gpt.cast %a : tensor<8xf32> to tensor<8xbf16>
  %1 = gpt.cast %b : tensor<8xf32> to tensor<8xbf16>
  %2 = gpt.cast %c : tensor<8xf32> to tensor<8xbf16>
  return %0, %1, %2 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// Tests that a narrowing cast that is a layernorm's only reader becomes the
// layernorm's result type (the f32 output is never written); without
// narrow-row-outputs the cast stays.
// CHECK-LABEL: func.func @layernorm_output_cast
// CHECK-NEXT: %[[Y:.*]] = gpt.layernorm %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: return %[[Y]] : tensor<4x8xbf16>
// WIDE-LABEL: func.func @layernorm_output_cast
// WIDE: gpt.layernorm %{{.*}} -> tensor<4x8xf32>
// WIDE-NEXT: gpt.cast
func.func @layernorm_output_cast(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %0 = gpt.layernorm %x, %w, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = gpt.cast %0 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %1 : tensor<4x8xbf16>
}

// -----

// Tests that a layernorm read by more than the cast keeps its f32 result.
// CHECK-LABEL: func.func @layernorm_output_shared
// CHECK: gpt.layernorm %{{.*}} -> tensor<4x8xf32>
// CHECK: gpt.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
func.func @layernorm_output_shared(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %0 = gpt.layernorm %x, %w, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = gpt.cast %0 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %1, %0 : tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// Tests that a layernorm_grad reads its bf16 gradient before a widening
// cast, which goes when nothing else reads it; without narrow-row-outputs
// the cast stays.
// CHECK-LABEL: func.func @layernorm_grad_input_cast
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<4x8xbf16>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = gpt.layernorm_grad %[[DY]], %[[X]], %[[W]] : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: gpt.cast
// WIDE-LABEL: func.func @layernorm_grad_input_cast
// WIDE: gpt.cast
// WIDE: gpt.layernorm_grad %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
func.func @layernorm_grad_input_cast(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = gpt.cast %dy : tensor<4x8xbf16> to tensor<4x8xf32>
  %dx, %dw, %db = gpt.layernorm_grad %0, %x, %w
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %dw, %db : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a widening cast with another reader stays for it while the
// layernorm_grad reads the bf16 gradient.
// CHECK-LABEL: func.func @layernorm_grad_input_cast_shared
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<4x8xbf16>
// CHECK: %[[CAST:.*]] = gpt.cast %[[DY]]
// CHECK: gpt.layernorm_grad %[[DY]]
// CHECK: return %{{.*}}, %[[CAST]]
func.func @layernorm_grad_input_cast_shared(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = gpt.cast %dy : tensor<4x8xbf16> to tensor<4x8xf32>
  %dx, %dw, %db = gpt.layernorm_grad %0, %x, %w
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %0 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a widening cast of a layernorm is left to the elementwise groups.
// CHECK-LABEL: func.func @layernorm_output_widened
// CHECK: gpt.layernorm %{{.*}} -> tensor<4x8xbf16>
// CHECK: gpt.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
func.func @layernorm_output_widened(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<4x8xf32> {
  %0 = gpt.layernorm %x, %w, %b : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %1 = gpt.cast %0 : tensor<4x8xbf16> to tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that the residual add of a bf16 block output (through its widening
// cast) and an f32 stream, normalised to bf16, becomes one row
// gpt.fusion of the cast, the add and the layernorm, whose sum continues
// the stream; without add-layernorm the add and the layernorm stay.
// CHECK-LABEL: func.func @residual_layernorm
// CHECK-SAME: (%[[H:[^:]*]]: tensor<4x8xbf16>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[X]], %[[H]], %[[W]], %[[B]]) : (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[XA:[^:]*]]: tensor<4x8xf32>, %[[HA:[^:]*]]: tensor<4x8xbf16>, %[[WA:[^:]*]]: tensor<8xf32>, %[[BA:[^:]*]]: tensor<8xf32>):
// CHECK-NEXT: %[[C:.*]] = gpt.cast %[[HA]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.add %[[XA]], %[[C]] : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]] = gpt.layernorm %[[S]], %[[WA]], %[[BA]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: gpt.yield %[[S]], %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
// NOADDLN-LABEL: func.func @residual_layernorm
// NOADDLN: gpt.fusion
// NOADDLN: gpt.layernorm
func.func @residual_layernorm(%h: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %0 = gpt.cast %h : tensor<4x8xbf16> to tensor<4x8xf32>
  %1 = gpt.add %x, %0 : tensor<4x8xf32>
  %2 = gpt.layernorm %1, %w, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = gpt.cast %2 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %1, %3 : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// Tests that a widening cast with another reader stays, and the row
// fusion reads its wide result.
// CHECK-LABEL: func.func @residual_layernorm_cast_shared
// CHECK: %[[C:.*]] = gpt.cast
// CHECK: gpt.fusion(%{{.*}}, %[[C]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>,
// CHECK-NOT: gpt.cast
// CHECK: gpt.add
// CHECK-NEXT: gpt.layernorm
func.func @residual_layernorm_cast_shared(%h: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = gpt.cast %h : tensor<4x8xbf16> to tensor<4x8xf32>
  %1 = gpt.add %x, %0 : tensor<4x8xf32>
  %2 = gpt.layernorm %1, %w, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %2, %0 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a layernorm whose weight is computed after the add (so not
// available where the add is) keeps its add.
// CHECK-LABEL: func.func @residual_layernorm_late_weight
// CHECK-NOT: gpt.fusion
// CHECK: gpt.layernorm
func.func @residual_layernorm_late_weight(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> tensor<4x8xf32> {
  %0 = gpt.add %x, %y : tensor<4x8xf32>
  %1 = gpt.scale %w {factor = 2.0 : f64} : tensor<8xf32>
  %2 = gpt.layernorm %0, %1, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that a layernorm_grad whose dx joins the residual gradient, with a
// bf16 copy of the sum for the next GEMMs, becomes one row-gradient
// gpt.fusion at the layernorm_grad: the ops it replaces, yielding the sum,
// its copy and the weight and bias gradients; without add-layernorm the
// add and cast stay (as a fusion).
// CHECK-LABEL: func.func @layernorm_grad_residual
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<4x8xbf16>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8xf32>, %[[ACC:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[F:.*]]:4 = gpt.fusion(%[[DY]], %[[X]], %[[W]], %[[ACC]]) : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[DYA:[^:]*]]: tensor<4x8xbf16>, %[[XA:[^:]*]]: tensor<4x8xf32>, %[[WA:[^:]*]]: tensor<8xf32>, %[[ACCA:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^,]*]], %[[DB:[^ ]*]] = gpt.layernorm_grad %[[DYA]], %[[XA]], %[[WA]] : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[S:.*]] = gpt.add %[[ACCA]], %[[DX]] : tensor<4x8xf32>
// CHECK-NEXT: %[[SH:.*]] = gpt.cast %[[S]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: gpt.yield %[[S]], %[[SH]], %[[DW]], %[[DB]]
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2, %[[F]]#3
// NOADDLN-LABEL: func.func @layernorm_grad_residual
// NOADDLN: gpt.layernorm_grad
// NOADDLN: gpt.fusion
func.func @layernorm_grad_residual(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %acc: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w
      : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %0 = gpt.add %acc, %dx : tensor<4x8xf32>
  %1 = gpt.cast %0 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %0, %1, %dw, %db : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that without a narrowing copy of the sum (fp32) the layernorm_grad
// and its add still become one row-gradient gpt.fusion, with no narrow
// result.
// CHECK-LABEL: func.func @layernorm_grad_residual_no_copy
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<4x8xf32>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8xf32>, %[[ACC:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[F:.*]]:3 = gpt.fusion(%[[DY]], %[[X]], %[[W]], %[[ACC]]) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: %[[DX:[^,]*]], %[[DW:[^,]*]], %[[DB:[^ ]*]] = gpt.layernorm_grad
// CHECK-NEXT: %[[S:.*]] = gpt.add %{{.*}}, %[[DX]] : tensor<4x8xf32>
// CHECK-NEXT: gpt.yield %[[S]], %[[DW]], %[[DB]]
// CHECK: return %[[F]]#0
// NOADDLN-LABEL: func.func @layernorm_grad_residual_no_copy
// NOADDLN: gpt.layernorm_grad
// NOADDLN: gpt.add
func.func @layernorm_grad_residual_no_copy(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %acc: tensor<4x8xf32>)
    -> tensor<4x8xf32> {
  %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %0 = gpt.add %acc, %dx : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that in a bf16 residual stream (bf16 input, f32 weight) the
// layernorm_grad and the bf16 add of its dx become one row-gradient
// gpt.fusion whose bf16 sum the GEMMs read directly: its body widens the
// input and the residual gradient, so dx joins in f32 and the sum is
// rounded once.
// CHECK-LABEL: func.func @layernorm_grad_residual_narrow_stream
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<4x8xbf16>, %[[X:[^:]*]]: tensor<4x8xbf16>, %[[W:[^:]*]]: tensor<8xf32>, %[[ACC:[^:]*]]: tensor<4x8xbf16>)
// CHECK-NEXT: %[[F:.*]]:3 = gpt.fusion(%[[DY]], %[[X]], %[[W]], %[[ACC]]) : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[DYA:[^:]*]]: tensor<4x8xbf16>, %[[XA:[^:]*]]: tensor<4x8xbf16>, %[[WA:[^:]*]]: tensor<8xf32>, %[[ACCA:[^:]*]]: tensor<4x8xbf16>):
// CHECK-NEXT: %[[XW:.*]] = gpt.cast %[[XA]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^,]*]], %[[DB:[^ ]*]] = gpt.layernorm_grad %[[DYA]], %[[XW]], %[[WA]] : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[ACCW:.*]] = gpt.cast %[[ACCA]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.add %[[ACCW]], %[[DX]] : tensor<4x8xf32>
// CHECK-NEXT: %[[SH:.*]] = gpt.cast %[[S]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: gpt.yield %[[SH]], %[[DW]], %[[DB]]
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @layernorm_grad_residual_narrow_stream(%dy: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %w: tensor<8xf32>, %acc: tensor<4x8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = gpt.layernorm_grad %dy, %x, %w
      : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %0 = gpt.add %acc, %dx : tensor<4x8xbf16>
  return %0, %dw, %db : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that in a bf16 residual stream the add of two bf16 values and the
// layernorm of the bf16 sum with f32 parameters become one row
// gpt.fusion with a bf16 sum.
// CHECK-LABEL: func.func @residual_layernorm_narrow_stream
// CHECK-SAME: (%[[H:[^:]*]]: tensor<4x8xbf16>, %[[X:[^:]*]]: tensor<4x8xbf16>, %[[W:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[X]], %[[H]], %[[W]], %[[B]]) : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[S:.*]] = gpt.add %{{.*}}, %{{.*}} : tensor<4x8xbf16>
// CHECK-NEXT: %[[N:.*]] = gpt.layernorm %[[S]], %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: gpt.yield %[[S]], %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
func.func @residual_layernorm_narrow_stream(%h: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %0 = gpt.add %x, %h : tensor<4x8xbf16>
  %1 = gpt.layernorm %0, %w, %b : (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
  return %0, %1 : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// Tests that a narrowing cast that is an embedding's only reader becomes
// the embedding's result type (the start of a bf16 residual stream); without
// narrow-row-outputs the cast stays.
// CHECK-LABEL: func.func @embed_output_cast
// CHECK-NEXT: %[[X:.*]] = gpt.embed %{{.*}} : (tensor<64x8xf32>, tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: return %[[X]] : tensor<2x4x8xbf16>
// WIDE-LABEL: func.func @embed_output_cast
// WIDE: gpt.embed %{{.*}} -> tensor<2x4x8xf32>
// WIDE-NEXT: gpt.cast
func.func @embed_output_cast(%wte: tensor<64x8xf32>, %wpe: tensor<16x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xbf16> {
  %0 = gpt.embed %wte, %wpe, %ids : (tensor<64x8xf32>, tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %1 = gpt.cast %0 : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  return %1 : tensor<2x4x8xbf16>
}

// -----

// Tests that an embed_grad reads its bf16 gradient before a widening cast
// and keeps its f32 tables; without narrow-row-outputs the cast stays.
// CHECK-LABEL: func.func @embed_grad_input_cast
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4x8xbf16>, %[[IDS:[^:]*]]: tensor<2x4xi32>)
// CHECK-NEXT: gpt.embed_grad %[[DY]], %[[IDS]] {{.*}} : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> (tensor<64x8xf32>, tensor<16x8xf32>)
// CHECK-NOT: gpt.cast
// WIDE-LABEL: func.func @embed_grad_input_cast
// WIDE: gpt.cast
// WIDE: gpt.embed_grad %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>)
func.func @embed_grad_input_cast(%dy: tensor<2x4x8xbf16>, %ids: tensor<2x4xi32>)
    -> (tensor<64x8xf32>, tensor<16x8xf32>) {
  %0 = gpt.cast %dy : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %dwte, %dwpe = gpt.embed_grad %0, %ids {vocab_rows = 64 : i64, position_rows = 16 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<64x8xf32>, tensor<16x8xf32>)
  return %dwte, %dwpe : tensor<64x8xf32>, tensor<16x8xf32>
}

// -----

// Tests that the bias gradient's sum over (B, T) of a GELU gradient becomes
// one column-sum gpt.fusion with it, computing in f32 and summing the
// gradient before it is rounded; the other readers of the gradient read
// its first result.
// CHECK-LABEL: func.func @gelu_grad_sum
// CHECK-SAME: (%[[DH:[^:]*]]: tensor<2x4x64xbf16>, %[[PRE:[^:]*]]: tensor<2x4x64xbf16>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[DH]], %[[PRE]]) : (tensor<2x4x64xbf16>, tensor<2x4x64xbf16>) -> (tensor<2x4x64xbf16>, tensor<64xbf16>) {
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<2x4x64xbf16>, %[[B:[^:]*]]: tensor<2x4x64xbf16>):
// CHECK-NEXT: %[[G:.*]] = gpt.cast %[[A]] : tensor<2x4x64xbf16> to tensor<2x4x64xf32>
// CHECK-NEXT: %[[X:.*]] = gpt.cast %[[B]] : tensor<2x4x64xbf16> to tensor<2x4x64xf32>
// CHECK-NEXT: %[[GG:.*]] = gpt.gelu_grad %[[G]], %[[X]] : tensor<2x4x64xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.reduce sum %[[GG]] dims [0, 1] : (tensor<2x4x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[GN:.*]] = gpt.cast %[[GG]] : tensor<2x4x64xf32> to tensor<2x4x64xbf16>
// CHECK-NEXT: %[[SN:.*]] = gpt.cast %[[S]] : tensor<64xf32> to tensor<64xbf16>
// CHECK-NEXT: gpt.yield %[[GN]], %[[SN]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[D2:.*]] = gpt.reshape %[[F]]#0
// CHECK-NEXT: return %[[D2]], %[[F]]#1
// NOGGS-LABEL: func.func @gelu_grad_sum
// NOGGS: gpt.gelu_grad
// NOGGS: gpt.reduce
func.func @gelu_grad_sum(%dh: tensor<2x4x64xbf16>, %pre: tensor<2x4x64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  %d = gpt.gelu_grad %dh, %pre : tensor<2x4x64xbf16>
  %d2 = gpt.reshape %d : tensor<2x4x64xbf16> to tensor<8x64xbf16>
  %db = gpt.reduce sum %d dims [0, 1] : (tensor<2x4x64xbf16>) -> tensor<64xbf16>
  return %d2, %db : tensor<8x64xbf16>, tensor<64xbf16>
}

// -----

// Tests that a sum over only the batch is not a bias gradient: the
// gelu_grad and the reduce stay apart.
// CHECK-LABEL: func.func @gelu_grad_partial_sum
// CHECK-NOT: gpt.fusion
// CHECK: gpt.reduce
func.func @gelu_grad_partial_sum(%dh: tensor<2x4x64xf32>, %pre: tensor<2x4x64xf32>) -> tensor<4x64xf32> {
  %d = gpt.gelu_grad %dh, %pre : tensor<2x4x64xf32>
  %db = gpt.reduce sum %d dims [0] : (tensor<2x4x64xf32>) -> tensor<4x64xf32>
  return %db : tensor<4x64xf32>
}

// -----

// Tests that the qkv bias gradient, the sum over (B, T) of an attention
// gradient, becomes one column-sum gpt.fusion with it: in f32 (widened
// operands), the gradient and the sum each narrowed once; the other
// readers of dqkv read its first result.
// CHECK-LABEL: func.func @attention_grad_sum
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x8x16xbf16>, %[[QKV:[^:]*]]: tensor<2x8x48xbf16>, %[[Y:[^:]*]]: tensor<2x8x16xbf16>, %[[LSE:[^:]*]]: tensor<2x2x8xf32>)
// CHECK-NEXT: %[[F:.*]]:2 = gpt.fusion(%[[DY]], %[[QKV]], %[[Y]], %[[LSE]]) : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>) -> (tensor<2x8x48xbf16>, tensor<48xbf16>)
// CHECK-NEXT: ^bb0(%[[DYA:[^:]*]]: tensor<2x8x16xbf16>, %[[QA:[^:]*]]: tensor<2x8x48xbf16>, %[[YA:[^:]*]]: tensor<2x8x16xbf16>, %[[LA:[^:]*]]: tensor<2x2x8xf32>):
// CHECK-NEXT: %[[DYW:.*]] = gpt.cast %[[DYA]] : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
// CHECK-NEXT: %[[QW:.*]] = gpt.cast %[[QA]] : tensor<2x8x48xbf16> to tensor<2x8x48xf32>
// CHECK-NEXT: %[[YW:.*]] = gpt.cast %[[YA]] : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
// CHECK-NEXT: %[[G:.*]] = gpt.causal_attention_grad %[[DYW]], %[[QW]], %[[YW]], %[[LA]] {num_heads = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
// CHECK-NEXT: %[[S:.*]] = gpt.reduce sum %[[G]] dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[GH:.*]] = gpt.cast %[[G]] : tensor<2x8x48xf32> to tensor<2x8x48xbf16>
// CHECK-NEXT: %[[SH:.*]] = gpt.cast %[[S]] : tensor<48xf32> to tensor<48xbf16>
// CHECK-NEXT: gpt.yield %[[GH]], %[[SH]]
// CHECK: %[[D2:.*]] = gpt.reshape %[[F]]#0
// CHECK-NEXT: return %[[D2]], %[[F]]#1
// NOAGS-LABEL: func.func @attention_grad_sum
// NOAGS: gpt.causal_attention_grad %
// NOAGS: gpt.reduce
func.func @attention_grad_sum(%dy: tensor<2x8x16xbf16>, %qkv: tensor<2x8x48xbf16>,
                              %y: tensor<2x8x16xbf16>, %lse: tensor<2x2x8xf32>)
    -> (tensor<16x48xbf16>, tensor<48xbf16>) {
  %d = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 2 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>)
      -> tensor<2x8x48xbf16>
  %d2 = gpt.reshape %d : tensor<2x8x48xbf16> to tensor<16x48xbf16>
  %db = gpt.reduce sum %d dims [0, 1] : (tensor<2x8x48xbf16>) -> tensor<48xbf16>
  return %d2, %db : tensor<16x48xbf16>, tensor<48xbf16>
}

// -----

// Tests that a sum into another element type (the f32 sum of a bf16
// gradient) is left to the column reduction.
// CHECK-LABEL: func.func @attention_grad_sum_other_type
// CHECK-NOT: gpt.fusion
// CHECK: gpt.reduce
func.func @attention_grad_sum_other_type(%dy: tensor<2x8x16xbf16>, %qkv: tensor<2x8x48xbf16>,
                                         %y: tensor<2x8x16xbf16>, %lse: tensor<2x2x8xf32>)
    -> tensor<48xf32> {
  %d = gpt.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 2 : i64}
      : (tensor<2x8x16xbf16>, tensor<2x8x48xbf16>, tensor<2x8x16xbf16>, tensor<2x2x8xf32>)
      -> tensor<2x8x48xbf16>
  %w = gpt.cast %d : tensor<2x8x48xbf16> to tensor<2x8x48xf32>
  %db = gpt.reduce sum %w dims [0, 1] : (tensor<2x8x48xf32>) -> tensor<48xf32>
  return %db : tensor<48xf32>
}

// -----

// Tests that gradient accumulation's adds fuse within a micro-batch only:
// micro-batch 1's adds run before micro-batch 2's GEMMs, so its gradients
// die there; one group with micro-batch 2's adds would run at the end.
// CHECK-LABEL: func.func @micro_batches
// CHECK-NEXT: %[[M1:.*]]:2 = gpt.fusion(
// CHECK: gpt.matmul
// CHECK: gpt.matmul
// CHECK: %[[M2:.*]]:2 = gpt.fusion(%[[M1]]#0, %{{.*}}, %[[M1]]#1, %{{.*}})
// CHECK: return %[[M2]]#0, %[[M2]]#1
func.func @micro_batches(%g0: tensor<4x8xf32>, %g1: tensor<4x8xf32>, %h0: tensor<4x8xf32>,
                         %h1: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a1 = gpt.add %g0, %g1 {gpt.micro_batch = 1 : i64} : tensor<4x8xf32>
  %b1 = gpt.add %h0, %h1 {gpt.micro_batch = 1 : i64} : tensor<4x8xf32>
  %g2 = gpt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h2 = gpt.matmul %g2, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a2 = gpt.add %a1, %g2 {gpt.micro_batch = 2 : i64} : tensor<4x8xf32>
  %b2 = gpt.add %b1, %h2 {gpt.micro_batch = 2 : i64} : tensor<4x8xf32>
  return %a2, %b2 : tensor<4x8xf32>, tensor<4x8xf32>
}
