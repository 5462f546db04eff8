// RUN: %dslc opt %s --passes fuse,plan,bufferize | FileCheck %s
// RUN: %dslc opt %s --passes fuse,plan,bufferize --no-inplace | FileCheck %s --check-prefix=REF

// Best fit: once %0 and %1 are dead, the later buffers reuse their blocks; the reference plan
// gives every buffer its own 64-byte-aligned slot.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME:    dsl.arena_bytes = 256
// CHECK:         %0 = "dsl.matmul"(%arg0, %arg1) {dsl.kernel = 0 : i64, dsl.offset = 0 : i64}
// CHECK:         %1 = "dsl.tanh"(%0) {dsl.kernel = 1 : i64, dsl.offset = 0 : i64, dsl.reuses = "%0"}
// CHECK:         %2 = "dsl.matmul"(%1, %arg1) {dsl.kernel = 2 : i64, dsl.offset = 128 : i64}
// CHECK:         %3 = "dsl.tanh"(%2) {dsl.kernel = 3 : i64, dsl.offset = 128 : i64, dsl.reuses = "%2"}
// CHECK:         %4 = "dsl.matmul"(%3, %arg1) {dsl.kernel = 4 : i64, dsl.offset = 0 : i64}
// CHECK:         "dsl.reduce_sum"(%4) {axes = array<i64: 1>, dsl.buffer = "result"
// REF-LABEL:   func.func @mlp
// REF-SAME:      dsl.arena_bytes = 640
// REF:           %4 = "dsl.matmul"(%3, %arg1) {dsl.kernel = 4 : i64, dsl.offset = 512 : i64}
func.func @mlp(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":2:3)
  %1 = "dsl.tanh"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":3:3)
  %2 = "dsl.matmul"(%1, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":4:3)
  %3 = "dsl.tanh"(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":5:3)
  %4 = "dsl.matmul"(%3, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":6:3)
  %5 = "dsl.reduce_sum"(%4) {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32> loc("user.py":7:3)
  return %5 : tensor<4xf32>
}

// A fused elementwise chain exp(log(sin(x) + 1) * 2) needs no intermediate buffer at all.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    dsl.arena_bytes = 0
// CHECK-NOT:     dsl.offset
// CHECK:         return
func.func @chain(%arg0: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = "dsl.sin"(%arg0) : (tensor<1024xf32>) -> tensor<1024xf32> loc("user.py":10:3)
  %1 = "dsl.constant"() {value = dense<1.0> : tensor<1024xf32>} : () -> tensor<1024xf32> loc("user.py":10:3)
  %2 = "dsl.add"(%0, %1) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32> loc("user.py":10:3)
  %3 = "dsl.log"(%2) : (tensor<1024xf32>) -> tensor<1024xf32> loc("user.py":10:3)
  %4 = "dsl.constant"() {value = dense<2.0> : tensor<1024xf32>} : () -> tensor<1024xf32> loc("user.py":10:3)
  %5 = "dsl.mul"(%3, %4) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32> loc("user.py":10:3)
  %6 = "dsl.exp"(%5) : (tensor<1024xf32>) -> tensor<1024xf32> loc("user.py":10:3)
  return %6 : tensor<1024xf32>
}
