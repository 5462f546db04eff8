// RUN: %dslc opt %s --passes functionalize,autodiff,simplify,remat,schedule,fuse,rows,plan,bufferize --grad 0 --print-ir-after-all | FileCheck %s

// Every pass of the pipeline prints its output under a header naming the pass and its stage.
// CHECK:       // -----// IR Dump After functionalize (functional) //----- //
// CHECK-NOT:     "user.py":2:3
// CHECK:       // -----// IR Dump After autodiff (grad) //----- //
// CHECK:         "dsl.cos"(%arg0)
// CHECK:       // -----// IR Dump After simplify (simplified) //----- //
// CHECK:       // -----// IR Dump After remat (rematerialized) //----- //
// CHECK:       // -----// IR Dump After schedule (optimized) //----- //
// CHECK:       // -----// IR Dump After fuse (fused) //----- //
// CHECK:         "dsl.cos"(%arg0) {dsl.kernel = 0 : i64}
// CHECK:       // -----// IR Dump After rows (row_fused) //----- //
// CHECK:       // -----// IR Dump After plan (planned) //----- //
// CHECK:         func.func @f(%arg0: tensor<8xf64>) -> tensor<8xf64>
// CHECK-SAME:    dsl.arena_bytes = 0
// CHECK:       // -----// IR Dump After bufferize (bufferized) //----- //
// CHECK:         func.func @f(%arg0: memref<8xf64>) -> memref<8xf64>
// CHECK-SAME:    dsl.bufferized
func.func @f(%arg0: tensor<8xf64>) -> tensor<f64> {
  %0 = "dsl.sin"(%arg0) : (tensor<8xf64>) -> tensor<8xf64> loc("user.py":2:3)
  %1 = "dsl.sin"(%arg0) : (tensor<8xf64>) -> tensor<8xf64> loc("user.py":3:3)
  %2 = "dsl.reduce_sum"(%1) {axes = array<i64: 0>} : (tensor<8xf64>) -> tensor<f64> loc("user.py":4:3)
  return %2 : tensor<f64>
}
