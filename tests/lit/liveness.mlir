// RUN: %dslc opt %s --passes liveness | FileCheck %s

// In a chain each value dies at its only reader; the returned value dies nowhere.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0) {dsl.dies = array<i64: 0>}
// CHECK-NEXT:    %1 = "dsl.neg"(%0) {dsl.dies = array<i64: 0>}
// CHECK-NEXT:    %2 = "dsl.sin"(%1) {dsl.dies = array<i64: 0>}
// CHECK-NEXT:    return %2
func.func @chain(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dsl.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":2:3)
  %1 = "dsl.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":3:3)
  %2 = "dsl.sin"(%1) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":4:3)
  return %2 : tensor<4xf32>
}

// A value read by several ops dies at the last of them only.
// CHECK-LABEL: func.func @fan_out
// CHECK-NEXT:    %0 = "dsl.add"(%arg0, %arg1) {dsl.dies = array<i64: 1>}
// CHECK-NEXT:    %1 = "dsl.exp"(%0) :
// CHECK-NEXT:    %2 = "dsl.mul"(%1, %arg0) {dsl.dies = array<i64: 0, 1>}
// CHECK-NEXT:    %3 = "dsl.add"(%2, %0) {dsl.dies = array<i64: 0, 1>}
func.func @fan_out(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dsl.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":7:3)
  %1 = "dsl.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":8:3)
  %2 = "dsl.mul"(%1, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":9:3)
  %3 = "dsl.add"(%2, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":10:3)
  return %3 : tensor<4xf32>
}

// A value read twice by the op that kills it: both operand slots are listed.
// CHECK-LABEL: func.func @square
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0) {dsl.dies = array<i64: 0>}
// CHECK-NEXT:    %1 = "dsl.mul"(%0, %0) {dsl.dies = array<i64: 0, 1>}
func.func @square(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dsl.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":13:3)
  %1 = "dsl.mul"(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":14:3)
  return %1 : tensor<4xf32>
}

// Returned values (here an argument and an intermediate) are live out: they die at no op.
// A dead value kills nothing by being dead; its operand dies where it was last read.
// CHECK-LABEL: func.func @live_out
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0) :
// CHECK-NEXT:    %1 = "dsl.sin"(%arg1) {dsl.dies = array<i64: 0>}
// CHECK-NEXT:    %2 = "dsl.neg"(%0) :
// CHECK-NEXT:    return %0, %2, %arg0
func.func @live_out(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "dsl.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":17:3)
  %1 = "dsl.sin"(%arg1) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":18:3)
  %2 = "dsl.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":19:3)
  return %0, %2, %arg0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// A value written back to an argument is a function result: live out.
// CHECK-LABEL: func.func @writeback
// CHECK-SAME:    dsl.writeback = array<i64: 0>
// CHECK-NEXT:    %0 = "dsl.add"(%arg0, %arg1) {dsl.dies = array<i64: 0, 1>}
// CHECK-NEXT:    %1 = "dsl.reduce_sum"(%0) {axes = array<i64: 0>} :
// CHECK-NEXT:    return %1, %0
func.func @writeback(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) attributes {dsl.writeback = array<i64: 0>} {
  %0 = "dsl.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":22:3)
  %1 = "dsl.reduce_sum"(%0) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32> loc("user.py":23:3)
  return %1, %0 : tensor<f32>, tensor<4xf32>
}
