// RUN: %dslc opt %s --passes fuse,rows,plan,kernels,regions | FileCheck %s
// RUN: %dslc opt %s --passes fuse,rows,plan,kernels | FileCheck %s --check-prefix=KERNELS

// Two layers of 1024 rows: matmul, tanh, matmul, tanh read row i only to write row i, so the regions
// pass runs them block of rows by block (row-block regions), and the first two intermediates live in
// one block of rows per thread: their slots shrink in the plan the code follows (dsl.stored_as). The
// second matmul's result is computed in the function result's memory, where the last tanh runs in
// place (results_in_place): no slot at all.
// CHECK-LABEL: func.func @mlp2
// CHECK-NOT:     dsl.arena_bytes = 262144
// CHECK:         %0 = "dsl.matmul"(%arg0, %arg1) {{.*}}dsl.stored_as = "in region0: {{[0-9]+}} blocks of 64 of its 1024 rows, one per thread"
// CHECK:         %1 = "dsl.tanh"(%0) {{.*}}dsl.reuses = "%0", dsl.stored_as = "in region0:
// CHECK:         %2 = "dsl.matmul"(%1, %arg2) {dsl.buffer = "result 0", dsl.kernel = 2 : i64}
// CHECK:         %3 = "dsl.tanh"(%2) {dsl.buffer = "result", dsl.kernel = 3 : i64, dsl.reuses = "%2"}
// The kernels pass builds the kernels (kernel IR) and leaves the plan as the plan pass made it.
// KERNELS-LABEL: func.func @mlp2
// KERNELS-SAME:    dsl.arena_bytes = 262144
// KERNELS-NOT:     dsl.stored_as
func.func @mlp2(%arg0: tensor<1024x64xf32>, %arg1: tensor<64x64xf32>, %arg2: tensor<64x64xf32>) -> tensor<1024x64xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<1024x64xf32>, tensor<64x64xf32>) -> tensor<1024x64xf32> loc("user.py":2:3)
  %1 = "dsl.tanh"(%0) : (tensor<1024x64xf32>) -> tensor<1024x64xf32> loc("user.py":3:3)
  %2 = "dsl.matmul"(%1, %arg2) : (tensor<1024x64xf32>, tensor<64x64xf32>) -> tensor<1024x64xf32> loc("user.py":4:3)
  %3 = "dsl.tanh"(%2) : (tensor<1024x64xf32>) -> tensor<1024x64xf32> loc("user.py":5:3)
  return %3 : tensor<1024x64xf32>
}
