// RUN: %dslc opt %s --passes alias | FileCheck %s

// Arguments are classes 0..n-1, owned by the caller; temporaries are arena; a returned value
// gets fresh result memory.
// CHECK-LABEL: func.func @plain
// CHECK-SAME:    attributes {dsl.arg_storage = array<i64: 0, 1>, dsl.storage_owners = "caller caller arena result"}
// CHECK-NEXT:    %0 = "dsl.add"(%arg0, %arg1) {dsl.storage = 2 : i64}
// CHECK-NEXT:    %1 = "dsl.exp"(%0) {dsl.storage = 3 : i64}
func.func @plain(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dsl.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":2:3)
  %1 = "dsl.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":3:3)
  return %1 : tensor<4xf32>
}

// A reshape is a view: it shares its operand's class, an argument's or a temporary's, through
// chains of views.
// CHECK-LABEL: func.func @views
// CHECK-SAME:    dsl.storage_owners = "caller arena result"
// CHECK-NEXT:    %0 = "dsl.reshape"(%arg0) {dsl.storage = 0 : i64, shape = array<i64: 2, 2>}
// CHECK-NEXT:    %1 = "dsl.exp"(%0) {dsl.storage = 1 : i64}
// CHECK-NEXT:    %2 = "dsl.reshape"(%1) {dsl.storage = 1 : i64, shape = array<i64: 4>}
// CHECK-NEXT:    %3 = "dsl.reshape"(%2) {dsl.storage = 1 : i64, shape = array<i64: 1, 4>}
// CHECK-NEXT:    %4 = "dsl.neg"(%3) {dsl.storage = 2 : i64}
func.func @views(%arg0: tensor<4xf32>) -> tensor<1x4xf32> {
  %0 = "dsl.reshape"(%arg0) {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32> loc("user.py":6:3)
  %1 = "dsl.exp"(%0) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("user.py":7:3)
  %2 = "dsl.reshape"(%1) {shape = array<i64: 4>} : (tensor<2x2xf32>) -> tensor<4xf32> loc("user.py":8:3)
  %3 = "dsl.reshape"(%2) {shape = array<i64: 1, 4>} : (tensor<4xf32>) -> tensor<1x4xf32> loc("user.py":9:3)
  %4 = "dsl.neg"(%3) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("user.py":10:3)
  return %4 : tensor<1x4xf32>
}

// Returning a view puts its base in result memory too.
// CHECK-LABEL: func.func @returned_view
// CHECK-SAME:    dsl.storage_owners = "caller result"
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0) {dsl.storage = 1 : i64}
// CHECK-NEXT:    %1 = "dsl.reshape"(%0) {dsl.storage = 1 : i64
func.func @returned_view(%arg0: tensor<4xf32>) -> tensor<2x2xf32> {
  %0 = "dsl.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("user.py":13:3)
  %1 = "dsl.reshape"(%0) {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32> loc("user.py":14:3)
  return %1 : tensor<2x2xf32>
}

// The new value of a written-back argument lives in the caller's array: same class, which the
// program may now overwrite; the other argument stays read-only.
// CHECK-LABEL: func.func @writeback
// CHECK-SAME:    attributes {dsl.arg_storage = array<i64: 0, 1>, dsl.storage_owners = "caller-mutable caller result", dsl.writeback = array<i64: 0>}
// CHECK-NEXT:    %0 = "dsl.add"(%arg0, %arg1) {dsl.storage = 0 : i64}
// CHECK-NEXT:    %1 = "dsl.reduce_sum"(%0) {axes = array<i64: 0>, dsl.storage = 2 : i64}
func.func @writeback(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) attributes {dsl.writeback = array<i64: 0>} {
  %0 = "dsl.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":17:3)
  %1 = "dsl.reduce_sum"(%0) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32> loc("user.py":18:3)
  return %1, %0 : tensor<f32>, tensor<4xf32>
}

// Writing one argument's value back into another never merges two caller arrays: it is a copy.
// CHECK-LABEL: func.func @copy_between_arguments
// CHECK-SAME:    dsl.storage_owners = "caller-mutable caller"
func.func @copy_between_arguments(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> attributes {dsl.writeback = array<i64: 0>} {
  return %arg1 : tensor<4xf32>
}

// A returned argument (or a view of one) keeps the caller's storage.
// CHECK-LABEL: func.func @returned_argument
// CHECK-SAME:    dsl.storage_owners = "caller"
// CHECK-NEXT:    %0 = "dsl.reshape"(%arg0) {dsl.storage = 0 : i64
func.func @returned_argument(%arg0: tensor<4xf32>) -> (tensor<2x2xf32>, tensor<4xf32>) {
  %0 = "dsl.reshape"(%arg0) {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32> loc("user.py":24:3)
  return %0, %arg0 : tensor<2x2xf32>, tensor<4xf32>
}
