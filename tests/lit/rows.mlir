// RUN: %dslc opt %s --passes fuse,rows | FileCheck %s
// RUN: %dslc opt %s --passes fuse,rows,plan | FileCheck %s --check-prefix=PLAN
// RUN: %dslc opt %s --passes fuse,plan | FileCheck %s --check-prefix=NOROWS

// A row sum, then the centred row squared and summed: two kernels over the same 64 rows run as one
// band, row by row, and the row sums only the band reads need one row of scratch, not a buffer.
// CHECK-LABEL: func.func @center
// CHECK:         %0 = "dsl.reduce_sum"(%arg0) {axes = array<i64: 1>, dsl.band = 0 : i64, dsl.buffer = "row", dsl.kernel = 0 : i64}
// CHECK:         %3 = "dsl.sub"(%arg0, %2) {dsl.band = 0 : i64, dsl.kernel = 1 : i64}
// CHECK:         %5 = "dsl.reduce_sum"(%4) {axes = array<i64: 1>, dsl.band = 0 : i64, dsl.kernel = 1 : i64}
// PLAN-LABEL:  func.func @center
// PLAN-SAME:     dsl.arena_bytes = 0
// Without the rows pass the row sums get a buffer.
// NOROWS-LABEL: func.func @center
// NOROWS-SAME:    dsl.arena_bytes = 256
// NOROWS-NOT:     dsl.band
// NOROWS:         %0 = "dsl.reduce_sum"(%arg0) {axes = array<i64: 1>, dsl.kernel = 0 : i64, dsl.offset = 0 : i64}
func.func @center(%arg0: tensor<64x32xf32>) -> tensor<64xf32> {
  %0 = "dsl.reduce_sum"(%arg0) {axes = array<i64: 1>} : (tensor<64x32xf32>) -> tensor<64xf32> loc("user.py":2:3)
  %1 = "dsl.reshape"(%0) {shape = array<i64: 64, 1>} : (tensor<64xf32>) -> tensor<64x1xf32> loc("user.py":2:3)
  %2 = "dsl.broadcast"(%1) {shape = array<i64: 64, 32>} : (tensor<64x1xf32>) -> tensor<64x32xf32> loc("user.py":2:3)
  %3 = "dsl.sub"(%arg0, %2) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32> loc("user.py":3:3)
  %4 = "dsl.mul"(%3, %3) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32> loc("user.py":4:3)
  %5 = "dsl.reduce_sum"(%4) {axes = array<i64: 1>} : (tensor<64x32xf32>) -> tensor<64xf32> loc("user.py":4:3)
  return %5 : tensor<64xf32>
}
