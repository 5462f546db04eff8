// RUN: %dslc opt %s --passes remat,fuse,plan | FileCheck %s
// RUN: %dslc opt %s --passes fuse,plan | FileCheck %s --check-prefix=STORED

// d = 1 - t * t (a tanh's derivative) is read by two kernels with a matmul between them. Stored, its
// buffer lives from the first to the second (its 1 KiB is part of the peak); t is read at the end
// anyway, so remat recomputes d inside the second reader's loop and the arena shrinks.
// CHECK-LABEL: func.func @tanh_grad
// CHECK-SAME:    dsl.arena_bytes = 2048
// CHECK:         %4 = "dsl.sub"(%3, %2) {dsl.kernel = 3 : i64}
// CHECK:         %8 = "dsl.mul"(%1, %1) {dsl.kernel = 5 : i64}
// CHECK-NEXT:    %9 = "dsl.sub"(%3, %8) {dsl.kernel = 5 : i64}
// CHECK-NEXT:    %10 = "dsl.mul"(%7, %9)
// STORED-LABEL: func.func @tanh_grad
// STORED-SAME:    dsl.arena_bytes = 3072
// STORED:         %4 = "dsl.sub"(%3, %2) {dsl.kernel = 3 : i64, dsl.offset = 2048 : i64}
func.func @tanh_grad(%arg0: tensor<16x16xf32>, %arg1: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":2:3)
  %1 = "dsl.tanh"(%0) : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":3:3)
  %2 = "dsl.mul"(%1, %1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":4:3)
  %3 = "dsl.constant"() {value = dense<1.0> : tensor<16x16xf32>} : () -> tensor<16x16xf32> loc("user.py":4:3)
  %4 = "dsl.sub"(%3, %2) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":4:3)
  %5 = "dsl.matmul"(%1, %arg1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":5:3)
  %6 = "dsl.mul"(%5, %4) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":6:3)
  %7 = "dsl.matmul"(%6, %arg1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":7:3)
  %8 = "dsl.mul"(%7, %4) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":8:3)
  %9 = "dsl.add"(%8, %1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> loc("user.py":9:3)
  return %9 : tensor<16x16xf32>
}
