// RUN: gpt-opt %s --split-input-file | gpt-opt --split-input-file | FileCheck %s
// RUN: gpt-opt %s --split-input-file --mlir-print-op-generic | gpt-opt --split-input-file | FileCheck %s

// Tests that gpt.fusion with a bias broadcast and two results round-trips.
// CHECK-LABEL: func.func @fusion
// CHECK: %[[R:.*]]:2 = gpt.fusion(%{{.*}}, %{{.*}}) : (tensor<8x48xf32>, tensor<48xf32>) -> (tensor<8x48xf32>, tensor<8x48xbf16>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x48xf32>, %[[B:.*]]: tensor<48xf32>):
// CHECK-NEXT:   %[[S:.*]] = gpt.bias_add %[[X]], %[[B]]
// CHECK-NEXT:   %[[G:.*]] = gpt.gelu %[[S]]
// CHECK-NEXT:   %[[C:.*]] = gpt.cast %[[G]]
// CHECK-NEXT:   gpt.yield %[[G]], %[[C]] : tensor<8x48xf32>, tensor<8x48xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @fusion(%x: tensor<8x48xf32>, %b: tensor<48xf32>) -> (tensor<8x48xf32>, tensor<8x48xbf16>) {
  %y, %yh = gpt.fusion (%x, %b) : (tensor<8x48xf32>, tensor<48xf32>)
      -> (tensor<8x48xf32>, tensor<8x48xbf16>) {
  ^bb0(%xa: tensor<8x48xf32>, %ba: tensor<48xf32>):
    %0 = gpt.bias_add %xa, %ba : (tensor<8x48xf32>, tensor<48xf32>) -> tensor<8x48xf32>
    %1 = gpt.gelu %0 : tensor<8x48xf32>
    %2 = gpt.cast %1 : tensor<8x48xf32> to tensor<8x48xbf16>
    gpt.yield %1, %2 : tensor<8x48xf32>, tensor<8x48xbf16>
  }
  return %y, %yh : tensor<8x48xf32>, tensor<8x48xbf16>
}

// -----

// Tests that independent results of different sizes (sibling casts) and a
// constant in the body round-trip.
// CHECK-LABEL: func.func @siblings
// CHECK: gpt.fusion(%{{.*}}, %{{.*}}) : (tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xbf16>, tensor<8xbf16>)
// CHECK:   gpt.constant
// CHECK:   gpt.yield
func.func @siblings(%w: tensor<16x8xf32>, %b: tensor<8xf32>) -> (tensor<16x8xbf16>, tensor<8xbf16>) {
  %wh, %bh = gpt.fusion (%w, %b) : (tensor<16x8xf32>, tensor<8xf32>)
      -> (tensor<16x8xbf16>, tensor<8xbf16>) {
  ^bb0(%wa: tensor<16x8xf32>, %ba: tensor<8xf32>):
    %c = gpt.constant 0.5 : tensor<8xf32>
    %0 = gpt.cast %wa : tensor<16x8xf32> to tensor<16x8xbf16>
    %1 = gpt.mul %ba, %c : tensor<8xf32>
    %2 = gpt.cast %1 : tensor<8xf32> to tensor<8xbf16>
    gpt.yield %0, %2 : tensor<16x8xbf16>, tensor<8xbf16>
  }
  return %wh, %bh : tensor<16x8xbf16>, tensor<8xbf16>
}
