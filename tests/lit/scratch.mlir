// RUN: %dslc opt %s --target cuda --passes fuse,rows,plan,kernels,scratch | FileCheck %s
// RUN: %dslc opt %s --target cuda --passes fuse,rows,plan,kernels | FileCheck %s --check-prefix=KERNELS
// RUN: %dslc opt %s --target cpu --passes fuse,rows,plan,kernels,regions,scratch | FileCheck %s --check-prefix=CPU
// RUN: %dslc opt %s --target cpu --passes fuse,rows,plan,kernels,regions | FileCheck %s --check-prefix=CPU-KERNELS

// A sum of 65536 rows into 4 outputs is a split reduction on CUDA: chunks of rows into partial
// sums (float64 for a float32 sum), then one combine per output. The partials are the kernel's
// scratch: the scratch pass gives them arena bytes of their own while the kernel runs.
// CHECK-LABEL: func.func @colsum
// CHECK-SAME:    dsl.arena_bytes = 256
// CHECK-SAME:    dsl.scratch = "k0_reduce_sum_part: 256 bytes at 0 (k0_reduce_sum_1)"
// The kernels pass alone leaves the plan as the plan pass made it.
// KERNELS-LABEL: func.func @colsum
// KERNELS-SAME:    dsl.arena_bytes = 0
// KERNELS-NOT:     dsl.scratch
// On the CPU the same sum runs as 16 chunks of rows in parallel, each into its own partial sums
// (float64, and a float32 block of rows flushed into them), combined in chunk order: the kernel's
// scratch, which the scratch pass places in the arena too.
// CPU-LABEL: func.func @colsum
// CPU-SAME:    dsl.arena_bytes = 768
// CPU-SAME:    dsl.scratch = "k0_reduce_sum_part: 512 bytes at 0 (k0_reduce_sum); k0_reduce_sum_part_b: 256 bytes at 512 (k0_reduce_sum)"
// CPU-KERNELS-LABEL: func.func @colsum
// CPU-KERNELS-SAME:    dsl.arena_bytes = 0
// CPU-KERNELS-NOT:     dsl.scratch
func.func @colsum(%arg0: tensor<65536x4xf32>) -> tensor<4xf32> {
  %0 = "dsl.reduce_sum"(%arg0) {axes = array<i64: 0>} : (tensor<65536x4xf32>) -> tensor<4xf32> loc("user.py":2:3)
  return %0 : tensor<4xf32>
}

// The rows of a softmax are one band for the CPU target; its exp row, kept per row, needs no
// buffer but a row of scratch per chunk of rows (one chunk here), a row of the plan while the band
// runs.
// CPU-LABEL: func.func @softmax
// CPU-SAME:    dsl.arena_bytes = 128
// CPU-SAME:    dsl.scratch = "k0_rows_l2_s: 128 bytes at 0 (k0_rows)"
// CPU:         "dsl.exp"(%3) {dsl.buffer = "row"
// CPU-KERNELS-LABEL: func.func @softmax
// CPU-KERNELS-SAME:    dsl.arena_bytes = 0
func.func @softmax(%arg0: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %0 = "dsl.reduce_max"(%arg0) {axes = array<i64: 1>} : (tensor<64x32xf32>) -> tensor<64xf32> loc("user.py":6:3)
  %1 = "dsl.reshape"(%0) {shape = array<i64: 64, 1>} : (tensor<64xf32>) -> tensor<64x1xf32> loc("user.py":6:3)
  %2 = "dsl.broadcast"(%1) {shape = array<i64: 64, 32>} : (tensor<64x1xf32>) -> tensor<64x32xf32> loc("user.py":6:3)
  %3 = "dsl.sub"(%arg0, %2) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32> loc("user.py":6:3)
  %4 = "dsl.exp"(%3) : (tensor<64x32xf32>) -> tensor<64x32xf32> loc("user.py":6:3)
  %5 = "dsl.reduce_sum"(%4) {axes = array<i64: 1>} : (tensor<64x32xf32>) -> tensor<64xf32> loc("user.py":7:3)
  %6 = "dsl.reshape"(%5) {shape = array<i64: 64, 1>} : (tensor<64xf32>) -> tensor<64x1xf32> loc("user.py":7:3)
  %7 = "dsl.broadcast"(%6) {shape = array<i64: 64, 32>} : (tensor<64x1xf32>) -> tensor<64x32xf32> loc("user.py":7:3)
  %8 = "dsl.div"(%4, %7) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32> loc("user.py":7:3)
  return %8 : tensor<64x32xf32>
}
