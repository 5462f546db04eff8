// RUN: %dslc opt %s --passes dce | FileCheck %s
// RUN: %dslc opt %s --passes functionalize | FileCheck %s

// Ops nobody reads are dropped; the rest keep their order and locations.
// CHECK-LABEL: func.func @dead
// CHECK-NOT:     dsl.sin
// CHECK:         %0 = "dsl.cos"(%arg0) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:3)
// CHECK-NEXT:    return %0
func.func @dead(%arg0: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.sin"(%arg0) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:3)
  %1 = "dsl.cos"(%arg0) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:3)
  %2 = "dsl.exp"(%0) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":8:3)
  return %1 : tensor<4xf64>
}
