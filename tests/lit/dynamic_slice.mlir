// RUN: %dslc opt %s --passes fuse,plan,bufferize | FileCheck %s

// A window's update reads its base only at the element it writes (prims.dynamic.PARTIAL_UPDATES):
// over a base that dies there it is computed in place, in the base's block.
// CHECK-LABEL: func.func @row_update
// CHECK-SAME:    dsl.arena_bytes = 64
// CHECK:         %0 = "dsl.matmul"(%arg0, %arg0) {dsl.kernel = 0 : i64, dsl.offset = 0 : i64}
// CHECK:         %2 = "dsl.dynamic_update_slice"(%0, %arg1, %arg2, %1) {dsl.kernel = 1 : i64, dsl.offset = 0 : i64, dsl.reuses = "%0"}
func.func @row_update(%arg0: tensor<4x4xf32>, %arg1: tensor<1x4xf32>, %arg2: tensor<i64>) -> tensor<4x4xf32> {
  %0 = "dsl.matmul"(%arg0, %arg0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("user.py":2:3)
  %1 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":3:3)
  %2 = "dsl.dynamic_update_slice"(%0, %arg1, %arg2, %1) : (tensor<4x4xf32>, tensor<1x4xf32>, tensor<i64>, tensor<i64>) -> tensor<4x4xf32> loc("user.py":3:3)
  %3 = "dsl.matmul"(%2, %arg0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("user.py":4:3)
  return %3 : tensor<4x4xf32>
}

// Shifting rows down reads the base through a dynamic_slice, at a run-time index, never at the
// element being written: the update gets a block of its own.
// CHECK-LABEL: func.func @shift
// CHECK:         %0 = "dsl.matmul"(%arg0, %arg0) {dsl.kernel = 0 : i64, dsl.offset = 0 : i64}
// CHECK:         %2 = "dsl.dynamic_slice"(%0, %arg1, %1) {dsl.kernel = 2 : i64, sizes = array<i64: 2, 4>}
// CHECK:         %5 = "dsl.dynamic_update_slice"(%0, %2, %4, %1) {dsl.kernel = 2 : i64, dsl.offset = 128 : i64}
// CHECK-NOT:     dsl.reuses
func.func @shift(%arg0: tensor<4x4xf32>, %arg1: tensor<i64>) -> tensor<4x4xf32> {
  %0 = "dsl.matmul"(%arg0, %arg0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("user.py":7:3)
  %1 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":8:3)
  %2 = "dsl.dynamic_slice"(%0, %arg1, %1) {sizes = array<i64: 2, 4>} : (tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32> loc("user.py":8:3)
  %3 = "dsl.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64> loc("user.py":8:3)
  %4 = "dsl.add"(%arg1, %3) : (tensor<i64>, tensor<i64>) -> tensor<i64> loc("user.py":8:3)
  %5 = "dsl.dynamic_update_slice"(%0, %2, %4, %1) : (tensor<4x4xf32>, tensor<2x4xf32>, tensor<i64>, tensor<i64>) -> tensor<4x4xf32> loc("user.py":8:3)
  %6 = "dsl.matmul"(%5, %arg0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("user.py":9:3)
  return %6 : tensor<4x4xf32>
}
