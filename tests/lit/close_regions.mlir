// RUN: %dslc opt %s --passes close_regions | FileCheck %s

// close_regions: every value a body reads from above becomes an operand of its region op (a const
// of a loop, counted by its consts attribute; an operand of an if), and a block argument of each of
// its regions. Nested regions close inside out: the inner loop's bounds and its const %arg1 are the
// outer loop's consts too.
// CHECK-LABEL: func.func @nested
// CHECK:         "dsl.for"(%0, %1, %arg0, %0, %1, %arg1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>, %[[LO:.*]]: tensor<i64>, %[[HI:.*]]: tensor<i64>, %[[W:.*]]: tensor<4xf64>):
// CHECK-NEXT:      "dsl.for"(%[[LO]], %[[HI]], %[[C]], %[[W]]) ({
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i64>, %[[D:.*]]: tensor<4xf64>, %[[V:.*]]: tensor<4xf64>):
// CHECK-NEXT:        "dsl.mul"(%[[D]], %[[V]])
// CHECK:           {consts = 1 : i64}
// CHECK:         {consts = 3 : i64}
// CHECK-LABEL: func.func @branch
// CHECK:         "dsl.if"(%arg0, %arg1, %arg2) ({
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<4xf64>, %[[Y:.*]]: tensor<4xf64>):
// CHECK-NEXT:      "dsl.add"(%[[X]], %[[Y]])
// CHECK:         ^bb0(%[[X2:.*]]: tensor<4xf64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      "dsl.neg"(%[[X2]])
func.func @nested(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %1 = "dsl.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %2 = "dsl.for"(%0, %1, %arg0) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>):
    %3 = "dsl.for"(%0, %1, %c) ({
    ^bb0(%j: tensor<i64>, %d: tensor<4xf64>):
      %4 = "dsl.mul"(%d, %arg1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:7)
      "dsl.yield"(%4) : (tensor<4xf64>) -> ()
    }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:3)
  return %2 : tensor<4xf64>
}

func.func @branch(%arg0: tensor<i1>, %arg1: tensor<4xf64>, %arg2: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.if"(%arg0, %arg1) ({
  ^bb0(%x: tensor<4xf64>):
    %1 = "dsl.add"(%x, %arg2) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":9:5)
    "dsl.yield"(%1) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>):
    %2 = "dsl.neg"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":11:5)
    "dsl.yield"(%2) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":8:3)
  return %0 : tensor<4xf64>
}
