// RUN: not %dslc opt %s 2>&1 | FileCheck %s

// A bad op name is a one-line user error naming the file, line and column.
// CHECK: dslc: error: {{.*}}parse_error.mlir:8:{{[0-9]+}}: {{.*}}dsl.nope
// CHECK-NOT: Traceback
func.func @bad(%arg0: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.sin"(%arg0) : (tensor<4xf64>) -> tensor<4xf64>
  %1 = "dsl.nope"(%0) : (tensor<4xf64>) -> tensor<4xf64>
  return %1 : tensor<4xf64>
}
