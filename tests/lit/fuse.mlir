// RUN: %dslc opt %s --passes fuse | FileCheck %s

// Fusion partitions the ops into kernels (dsl.kernel: the kernel's index in execution order). The
// matmul is its own kernel; the bias broadcast (an index map), the add and the tanh are inlined into
// the row sum's loop: one kernel, no buffer between them. The dead exp belongs to no kernel.
// CHECK-LABEL: func.func @layer
// CHECK:         %0 = "dsl.matmul"(%arg0, %arg1) {dsl.kernel = 0 : i64}
// CHECK:         %1 = "dsl.broadcast"(%arg2) {dsl.kernel = 1 : i64, shape = array<i64: 4, 8>}
// CHECK:         %2 = "dsl.add"(%0, %1) {dsl.kernel = 1 : i64}
// CHECK:         %3 = "dsl.tanh"(%2) {dsl.kernel = 1 : i64}
// CHECK:         %4 = "dsl.exp"(%0) : (tensor<4x8xf32>)
// CHECK:         %5 = "dsl.reduce_sum"(%3) {axes = array<i64: 1>, dsl.kernel = 1 : i64}
func.func @layer(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8xf32>) -> tensor<4xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":2:3)
  %1 = "dsl.broadcast"(%arg2) {shape = array<i64: 4, 8>} : (tensor<8xf32>) -> tensor<4x8xf32> loc("user.py":3:3)
  %2 = "dsl.add"(%0, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":3:3)
  %3 = "dsl.tanh"(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":4:3)
  %4 = "dsl.exp"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":5:3)
  %5 = "dsl.reduce_sum"(%3) {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32> loc("user.py":6:3)
  return %5 : tensor<4xf32>
}
