// RUN: %dslc opt %s --passes fuse,plan,inplace | FileCheck %s
// RUN: %dslc opt %s --passes fuse,plan,inplace --no-inplace | FileCheck %s --check-prefix=OFF
// RUN: not %dslc opt %s --passes inplace 2>&1 | FileCheck %s --check-prefix=ORDER

// ORDER:      dslc: error: pass 'inplace' needs the memory plan that pass 'plan' makes: run 'plan' before it

// An elementwise kernel whose operand dies there writes into the operand's buffer.
// CHECK-LABEL: func.func @dying_operand
// CHECK:         %1 = "dsl.tanh"(%0) {dsl.reuses = "%0"}
// CHECK:         %2 = "dsl.matmul"(%1, %arg1) :
// OFF-LABEL:   func.func @dying_operand
// OFF-NOT:       dsl.reuses
func.func @dying_operand(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":2:3)
  %1 = "dsl.tanh"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":3:3)
  %2 = "dsl.matmul"(%1, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":4:3)
  %3 = "dsl.reduce_sum"(%2) {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32> loc("user.py":5:3)
  return %3 : tensor<4xf32>
}

// A user's in-place request on a value that is still read later is demoted to a copy, naming the reader.
// CHECK-LABEL: func.func @still_needed
// CHECK:         %1 = "dsl.exp"(%0) {dsl.inplace = "exp_", dsl.inplace_outcome = "copy: the old value is still read later, at user.py:12; computed into a copy"}
// CHECK-NOT:     dsl.reuses = "%0"
func.func @still_needed(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":10:3)
  %1 = "dsl.exp"(%0) {dsl.inplace = "exp_"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":11:3)
  %2 = "dsl.matmul"(%0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":12:3)
  %3 = "dsl.matmul"(%1, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":13:3)
  %4 = "dsl.add"(%2, %3) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":14:3)
  return %4 : tensor<4x8xf32>
}

// The same request when nothing reads the old value afterwards is realized in place.
// CHECK-LABEL: func.func @honored
// CHECK:         %1 = "dsl.exp"(%0) {dsl.inplace = "exp_", dsl.inplace_outcome = "in place: reuses the buffer of %0", dsl.reuses = "%0"}
func.func @honored(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":20:3)
  %1 = "dsl.exp"(%0) {dsl.inplace = "exp_"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":21:3)
  %2 = "dsl.matmul"(%1, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":22:3)
  return %2 : tensor<4x8xf32>
}

// A mutated argument whose old value nobody reads later is updated directly in the caller's array.
// CHECK-LABEL: func.func @sgd
// CHECK:         %2 = "dsl.sub"(%arg0, %1) {dsl.inplace = "-=", dsl.inplace_outcome = "in place: written straight into the caller's array (when C-contiguous; another layout is copied in and back)", dsl.reuses = "%arg0"}
func.func @sgd(%arg0: tensor<16xf32>, %arg1: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) attributes {dsl.writeback = array<i64: 0>} {
  %0 = "dsl.constant"() {value = dense<0.1> : tensor<16xf32>} : () -> tensor<16xf32> loc("user.py":30:3)
  %1 = "dsl.mul"(%0, %arg1) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("user.py":30:3)
  %2 = "dsl.sub"(%arg0, %1) {dsl.inplace = "-="} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("user.py":30:3)
  %3 = "dsl.reduce_sum"(%2) {axes = array<i64: 0>} : (tensor<16xf32>) -> tensor<f32> loc("user.py":31:3)
  return %3, %2 : tensor<f32>, tensor<16xf32>
}

// Two requests on a value computed in the same kernel: nothing was stored before them, nothing is copied.
// CHECK-LABEL: func.func @fused_value
// CHECK:         %2 = "dsl.mul"(%1, %0) {dsl.inplace = "scale_", dsl.inplace_outcome = "fused: computed inside its kernel's loop: needs no buffer"}
// CHECK:         %4 = "dsl.add"(%2, %3) {dsl.inplace = "add_", dsl.inplace_outcome = "fused: the old value %1 is never stored (computed in the same kernel): no copy"}
func.func @fused_value(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = "dsl.constant"() {value = dense<2.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32> loc("user.py":40:3)
  %1 = "dsl.mul"(%arg0, %0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":40:3)
  %2 = "dsl.mul"(%1, %0) {dsl.inplace = "scale_"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":41:3)
  %3 = "dsl.constant"() {value = dense<1.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32> loc("user.py":42:3)
  %4 = "dsl.add"(%2, %3) {dsl.inplace = "add_"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":42:3)
  %5 = "dsl.matmul"(%4, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":43:3)
  return %5 : tensor<4x8xf32>
}

// tanh_ then mul_ on a matmul's result: one kernel stores the second over the product's buffer.
// CHECK-LABEL: func.func @handed_over
// CHECK:         %1 = "dsl.tanh"(%0) {dsl.inplace = "tanh_", dsl.inplace_outcome = "fused: computed inside its kernel's loop: needs no buffer"}
// CHECK:         %3 = "dsl.mul"(%1, %2) {dsl.inplace = "mul_", dsl.inplace_outcome = "in place: reuses the buffer of %0", dsl.reuses = "%0"}
// OFF-LABEL:   func.func @handed_over
// OFF:           %3 = "dsl.mul"(%1, %2) {dsl.inplace = "mul_", dsl.inplace_outcome = "copy: in-place is off (inplace=False or DSL_NO_INPLACE=1): reference plan"}
func.func @handed_over(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":50:3)
  %1 = "dsl.tanh"(%0) {dsl.inplace = "tanh_"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":51:3)
  %2 = "dsl.constant"() {value = dense<2.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32> loc("user.py":52:3)
  %3 = "dsl.mul"(%1, %2) {dsl.inplace = "mul_"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("user.py":52:3)
  %4 = "dsl.matmul"(%3, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("user.py":53:3)
  return %4 : tensor<4x8xf32>
}
