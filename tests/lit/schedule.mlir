// RUN: %dslc opt %s --passes schedule,fuse,plan | FileCheck %s
// RUN: %dslc opt %s --passes fuse,plan | FileCheck %s --check-prefix=TRACED

// %0 is read only by the last add: traced first, its buffer is live across the whole chain
// (three 64x64 f32 buffers at the peak). The schedule sinks it to just before its reader (two).
// CHECK-LABEL: func.func @late_reader
// CHECK-SAME:    dsl.arena_bytes = 32768
// CHECK:         "dsl.matmul"(%arg1, %arg1)
// CHECK:         "dsl.tanh"
// CHECK:         "dsl.matmul"(%{{[0-9]+}}, %{{[0-9]+}})
// CHECK:         "dsl.matmul"(%arg0, %arg0)
// CHECK:         "dsl.add"
// TRACED-LABEL: func.func @late_reader
// TRACED-SAME:    dsl.arena_bytes = 49152
func.func @late_reader(%arg0: tensor<64x64xf32>, %arg1: tensor<64x64xf32>) -> tensor<64xf32> {
  %0 = "dsl.matmul"(%arg0, %arg0) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("user.py":2:3)
  %1 = "dsl.matmul"(%arg1, %arg1) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("user.py":3:3)
  %2 = "dsl.tanh"(%1) : (tensor<64x64xf32>) -> tensor<64x64xf32> loc("user.py":4:3)
  %3 = "dsl.matmul"(%2, %2) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("user.py":5:3)
  %4 = "dsl.add"(%3, %0) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> loc("user.py":6:3)
  %5 = "dsl.reduce_sum"(%4) {axes = array<i64: 1>} : (tensor<64x64xf32>) -> tensor<64xf32> loc("user.py":7:3)
  return %5 : tensor<64xf32>
}
