// RUN: gpt-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that equal constants of one type are merged and that constants with
// different values or types stay apart (a regression test: constants that
// could not fold were once merged regardless of value).

// CHECK-LABEL: func.func @constants
// CHECK-DAG: %[[ZERO:.*]] = gpt.constant 0.000000e+00 : tensor<4xf32>
// CHECK-DAG: %[[ONE:.*]] = gpt.constant 1.000000e+00 : tensor<4xf32>
// CHECK-DAG: %[[ZERO8:.*]] = gpt.constant 0.000000e+00 : tensor<8xf32>
// CHECK: return %[[ZERO]], %[[ONE]], %[[ZERO]], %[[ZERO8]]
func.func @constants() -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %a = gpt.constant 0.0 : tensor<4xf32>
  %b = gpt.constant 1.0 : tensor<4xf32>
  %c = gpt.constant 0.0 : tensor<4xf32>
  %d = gpt.constant 0.0 : tensor<8xf32>
  return %a, %b, %c, %d : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}
