// RUN: %dslc opt %s --passes simplify | FileCheck %s

// CSE merges the two exps, the neutral add disappears, and mul reads the one exp twice.
// CHECK-LABEL: func.func @cse_and_identity
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0)
// CHECK-NEXT:    %1 = "dsl.mul"(%0, %0)
// CHECK-NEXT:    return %1
func.func @cse_and_identity(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "dsl.constant"() {value = dense<0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %1 = "dsl.add"(%arg0, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = "dsl.exp"(%1) : (tensor<3xf32>) -> tensor<3xf32>
  %3 = "dsl.exp"(%1) : (tensor<3xf32>) -> tensor<3xf32>
  %4 = "dsl.mul"(%2, %3) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %4 : tensor<3xf32>
}

// Constants fold through elementwise ops and broadcasts of small size.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %0 = "dsl.constant"() {value = dense<[3.0, 6.0]> : tensor<2xf64>}
// CHECK-NEXT:    return %0
func.func @fold() -> tensor<2xf64> {
  %0 = "dsl.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf64>} : () -> tensor<2xf64>
  %1 = "dsl.constant"() {value = dense<2.0> : tensor<2xf64>} : () -> tensor<2xf64>
  %2 = "dsl.mul"(%0, %1) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %3 = "dsl.add"(%2, %0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  return %3 : tensor<2xf64>
}

// Identity movement ops vanish; reshape of reshape is one reshape.
// CHECK-LABEL: func.func @movement
// CHECK-NEXT:    %0 = "dsl.reshape"(%arg0) {shape = array<i64: 6>}
// CHECK-NEXT:    return %0
func.func @movement(%arg0: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = "dsl.transpose"(%arg0) {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "dsl.reshape"(%0) {shape = array<i64: 3, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = "dsl.reshape"(%1) {shape = array<i64: 6>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %3 = "dsl.copy"(%2) : (tensor<6xf32>) -> tensor<6xf32>
  return %3 : tensor<6xf32>
}

// A transpose of a transpose composes into one (here: the identity, which vanishes).
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT:    %0 = "dsl.transpose"(%arg0) {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT:    return %0, %arg0
func.func @transposes(%arg0: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = "dsl.transpose"(%arg0) {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %1 = "dsl.transpose"(%0) {perm = array<i64: 2, 0, 1>} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  %2 = "dsl.transpose"(%0) {perm = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  return %2, %1 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// A matmul over K = 1 is an outer product: two broadcasts and a mul, which fusion inlines; K = 2
// stays a matmul.
// CHECK-LABEL: func.func @outer_product
// CHECK-NEXT:    %0 = "dsl.broadcast"(%arg0) {shape = array<i64: 4, 3>}
// CHECK-NEXT:    %1 = "dsl.broadcast"(%arg1) {shape = array<i64: 4, 3>}
// CHECK-NEXT:    %2 = "dsl.mul"(%0, %1)
// CHECK-NEXT:    %3 = "dsl.matmul"(%arg2, %arg3)
// CHECK-NEXT:    return %2, %3
func.func @outer_product(%arg0: tensor<4x1xf32>, %arg1: tensor<1x3xf32>, %arg2: tensor<4x2xf32>, %arg3: tensor<2x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x1xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  %1 = "dsl.matmul"(%arg2, %arg3) : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
}
