// RUN: %dslc opt %s --passes autodiff --grad 0 | FileCheck %s
// RUN: %dslc opt %s --passes autodiff,simplify --grad 0,1 | FileCheck %s --check-prefix=BOTH
// RUN: %dslc opt %s --passes autodiff | FileCheck %s --check-prefix=NOGRAD

// d/dx sum(x * y) = y: the joint function returns only the requested gradient; the seed 1.0 is
// broadcast back over the summed axis (the one place broadcasting is undone) and multiplied by the
// other operand only (no work for y's gradient, which was not asked for).
// CHECK-LABEL: func.func @dot
// CHECK-SAME:    -> tensor<4xf32>
// CHECK:         %2 = "dsl.constant"() {value = dense<1.0> : tensor<f32>}
// CHECK:         %4 = "dsl.broadcast"(%3) {shape = array<i64: 4>}
// CHECK-NEXT:    %5 = "dsl.mul"(%4, %arg1) : {{.*}} loc("user.py":2:3)
// CHECK-NEXT:    return %5 : tensor<4xf32>
// After simplify the gradients w.r.t. both arguments are the other argument.
// BOTH-LABEL:  func.func @dot
// BOTH-NEXT:     return %arg1, %arg0 : tensor<4xf32>, tensor<4xf32>
// Without --grad the pass leaves the program alone.
// NOGRAD:        -> tensor<f32>
// NOGRAD-NOT:    dsl.broadcast
func.func @dot(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<f32> {
  %0 = "dsl.mul"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("user.py":2:3)
  %1 = "dsl.reduce_sum"(%0) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32> loc("user.py":3:3)
  return %1 : tensor<f32>
}
