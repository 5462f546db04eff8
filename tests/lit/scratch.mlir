// RUN: %dslc opt %s --target cuda --passes fuse,rows,plan,kernels,scratch | FileCheck %s
// RUN: %dslc opt %s --target cuda --passes fuse,rows,plan,kernels | FileCheck %s --check-prefix=KERNELS

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
func.func @colsum(%arg0: tensor<65536x4xf32>) -> tensor<4xf32> {
  %0 = "dsl.reduce_sum"(%arg0) {axes = array<i64: 0>} : (tensor<65536x4xf32>) -> tensor<4xf32> loc("user.py":2:3)
  return %0 : tensor<4xf32>
}
