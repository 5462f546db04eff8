// RUN: %dslc opt %s --passes close_regions,fuse,rows,plan,loops | FileCheck %s

// The loops pass on region IR: a loop is a kernel of its own (dsl.kernel), and its bodies are compiled
// as programs of their own. A carry the body writes over its old value (exp(c * w): read only at the
// element written) lives in one buffer, the loop's result, which takes the block of its dying initial
// value (dsl.reuses) and needs no scratch; a carry a matmul computes goes through a temporary of the
// loop, a scratch row of the plan live while the loop runs (dsl.scratch).
// CHECK-LABEL: func.func @loop
// CHECK-SAME:    dsl.arena_bytes = 192
// CHECK-NOT:     dsl.scratch
// CHECK:         %2 = "dsl.mul"(%arg0, %arg0) {dsl.kernel = 2 : i64, dsl.offset = 128 : i64}
// CHECK:         %3 = "dsl.for"(%0, %1, %2, %arg1) ({
// CHECK:         }) {consts = 1 : i64, dsl.kernel = 3 : i64, dsl.offset = 128 : i64, dsl.reuses = "%2"}
// CHECK-LABEL: func.func @matmul_carry
// CHECK-SAME:    dsl.scratch = "for%2: 128 bytes at 128 (the bodies of the for at user.py:9)"
// CHECK:         "dsl.for"(%0, %1, %arg0, %arg1)
// CHECK:         {consts = 1 : i64, dsl.buffer = "result", dsl.kernel = 2 : i64}
func.func @loop(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %2 = "dsl.mul"(%arg0, %arg0) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":4:3)
  %3 = "dsl.for"(%0, %1, %2) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>):
    %4 = "dsl.mul"(%c, %arg1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %5 = "dsl.exp"(%4) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    "dsl.yield"(%5) : (tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:3)
  %6 = "dsl.add"(%3, %arg1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:3)
  return %6 : tensor<4xf64>
}

func.func @matmul_carry(%arg0: tensor<4x4xf64>, %arg1: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":9:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":9:3)
  %2 = "dsl.for"(%0, %1, %arg0) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4x4xf64>):
    %3 = "dsl.matmul"(%c, %arg1) : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64> loc("user.py":10:5)
    "dsl.yield"(%3) : (tensor<4x4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4x4xf64>) -> tensor<4x4xf64> loc("user.py":9:3)
  return %2 : tensor<4x4xf64>
}
