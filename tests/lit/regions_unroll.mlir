// RUN: env DSL_UNROLL_LOOPS=1 %dslc opt %s --passes unroll_regions | FileCheck %s
// RUN: %dslc opt %s | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: env DSL_UNROLL_LOOPS=1 %dslc opt %s --passes unroll_regions,simplify | FileCheck %s --check-prefix=SIMPLIFIED

// The temporary lowering of region ops: a for loop with constant bounds becomes one copy of its
// body per iteration, the counter a constant and each copy reading the carry the last one yielded;
// an if runs both branches and selects each result with the broadcast predicate.
// CHECK-LABEL: func.func @loop
// CHECK-NOT:     dsl.for
// CHECK:         %[[I0:.*]] = "dsl.constant"() {value = dense<0> : tensor<i64>}
// CHECK:         %[[A0:.*]] = "dsl.mul"(%arg0, %arg1)
// CHECK:         %[[I1:.*]] = "dsl.constant"() {value = dense<1> : tensor<i64>}
// CHECK:         %[[A1:.*]] = "dsl.mul"(%[[A0]], %arg1)
// CHECK-NOT:     dsl.mul
// CHECK:         return %[[A1]]

// ROUNDTRIP-LABEL: func.func @loop
// ROUNDTRIP:       %2 = "dsl.for"(%0, %1, %arg0) ({
// ROUNDTRIP-NEXT:  ^bb0(%3: tensor<i64>, %4: tensor<4xf64>):
// ROUNDTRIP-NEXT:    %5 = "dsl.mul"(%4, %arg1)
// ROUNDTRIP-NEXT:    "dsl.yield"(%5) : (tensor<4xf64>) -> ()
// ROUNDTRIP-NEXT:  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:3)
func.func @loop(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %1 = "dsl.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %2 = "dsl.for"(%0, %1, %arg0) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>):
    %3 = "dsl.mul"(%c, %arg1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:3)
  return %2 : tensor<4xf64>
}

// Each branch reads its operand through a gradient mask, select(pred, x, stop_gradient(x)) (the
// else branch's the other way round): the same value, but a cotangent only where the branch is
// taken, so the untaken branch's NaN or inf derivative never reaches a gradient. simplify folds the
// masks away.
// CHECK-LABEL: func.func @branch
// CHECK-NOT:     dsl.if
// CHECK:         %[[P0:.*]] = "dsl.broadcast"(%arg0) {shape = array<i64: 4>}
// CHECK:         %[[S0:.*]] = "dsl.stop_gradient"(%arg1)
// CHECK:         %[[M0:.*]] = "dsl.select"(%[[P0]], %arg1, %[[S0]])
// CHECK:         %[[T:.*]] = "dsl.exp"(%[[M0]])
// CHECK:         %[[S1:.*]] = "dsl.stop_gradient"(%arg1)
// CHECK:         %[[M1:.*]] = "dsl.select"(%{{.*}}, %[[S1]], %arg1)
// CHECK:         %[[E:.*]] = "dsl.neg"(%[[M1]])
// CHECK:         %[[P:.*]] = "dsl.broadcast"(%arg0) {shape = array<i64: 4>}
// CHECK:         %[[R:.*]] = "dsl.select"(%[[P]], %[[T]], %[[E]])
// CHECK:         return %[[R]]
// SIMPLIFIED-LABEL: func.func @branch
// SIMPLIFIED-NOT:     dsl.stop_gradient
// SIMPLIFIED:         "dsl.exp"(%arg1)
// SIMPLIFIED:         "dsl.neg"(%arg1)
// SIMPLIFIED:         "dsl.select"
// SIMPLIFIED-NOT:     "dsl.select"
func.func @branch(%arg0: tensor<i1>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.if"(%arg0, %arg1) ({
  ^bb0(%a: tensor<4xf64>):
    %1 = "dsl.exp"(%a) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":9:5)
    "dsl.yield"(%1) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%b: tensor<4xf64>):
    %2 = "dsl.neg"(%b) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":11:5)
    "dsl.yield"(%2) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":8:3)
  return %0 : tensor<4xf64>
}
