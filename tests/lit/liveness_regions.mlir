// RUN: %dslc opt %s --passes liveness | FileCheck %s

// Liveness on closed region IR (compiler/passes/liveness.py). A region op reads its operands where
// it stands: an outer value read by nothing after the loop dies at the loop op. Inside a loop body a
// carry is rebound every iteration and dies at its last reader, but a const (%w) is read again by
// the next iteration: it dies nowhere in the body (the add lists only its operand 0).
// CHECK-LABEL: func.func @for_loop
// CHECK:         "dsl.for"(%0, %arg2, %arg0, %1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %{{.*}}: tensor<4xf64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      "dsl.mul"{{.*}} {dsl.dies = array<i64: 0>}
// CHECK-NEXT:      "dsl.sin"{{.*}} {dsl.dies = array<i64: 0>}
// CHECK-NEXT:      "dsl.add"{{.*}} {dsl.dies = array<i64: 0>}
// CHECK-NEXT:      "dsl.yield"
// CHECK-NEXT:    }) {consts = 1 : i64, dsl.dies = array<i64: 0, 1, 2, 3>}
// CHECK-NEXT:    "dsl.add"(%{{.*}}, %arg1) {dsl.dies = array<i64: 0, 1>}
func.func @for_loop(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>, %arg2: tensor<i64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":2:3)
  %1 = "dsl.exp"(%arg1) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":3:3)
  %2 = "dsl.for"(%0, %arg2, %arg0, %1) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %w: tensor<4xf64>):
    %3 = "dsl.mul"(%c, %w) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:5)
    %4 = "dsl.sin"(%3) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %5 = "dsl.add"(%4, %w) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:5)
    "dsl.yield"(%5) : (tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":4:3)
  %6 = "dsl.add"(%2, %arg1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":8:3)
  return %6 : tensor<4xf64>
}

// A while's condition dies nothing: its body runs next on the same carries and consts. In the body
// the carry dies at its last reader, the const nowhere. The outer %arg1 is read after the loop:
// the loop kills only %arg0.
// CHECK-LABEL: func.func @while_loop
// CHECK:         "dsl.while"(%arg0, %arg1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<4xf64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      "dsl.reduce_sum"({{.*}}) {axes = array<i64: 0>} :
// CHECK-NEXT:      "dsl.reduce_sum"({{.*}}) {axes = array<i64: 0>} :
// CHECK-NEXT:      "dsl.lt"{{.*}} {dsl.dies = array<i64: 0, 1>}
// CHECK-NEXT:      "dsl.yield"
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<4xf64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      "dsl.mul"{{.*}} {dsl.dies = array<i64: 0>}
// CHECK-NEXT:      "dsl.yield"
// CHECK-NEXT:    }) {consts = 1 : i64, dsl.dies = array<i64: 0>}
func.func @while_loop(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) {
  %0 = "dsl.while"(%arg0, %arg1) ({
  ^bb0(%x: tensor<4xf64>, %w: tensor<4xf64>):
    %1 = "dsl.reduce_sum"(%x) {axes = array<i64: 0>} : (tensor<4xf64>) -> tensor<f64> loc("user.py":12:5)
    %2 = "dsl.reduce_sum"(%w) {axes = array<i64: 0>} : (tensor<4xf64>) -> tensor<f64> loc("user.py":12:5)
    %3 = "dsl.lt"(%1, %2) : (tensor<f64>, tensor<f64>) -> tensor<i1> loc("user.py":12:5)
    "dsl.yield"(%3) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %w2: tensor<4xf64>):
    %4 = "dsl.mul"(%x2, %w2) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":13:5)
    "dsl.yield"(%4) : (tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":11:3)
  return %0, %arg1 : tensor<4xf64>, tensor<4xf64>
}

// A scan: the row of xs is new every iteration and dies at its last reader, like the carry; the
// const does not. Nested in a for loop, the scan's operands that are the outer body's consts (%v)
// do not die at the scan either: the outer loop reads them again.
// CHECK-LABEL: func.func @scan_in_loop
// CHECK:         "dsl.for"
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %{{.*}}: tensor<3xf64>, %{{.*}}: tensor<2x3xf64>, %{{.*}}: tensor<3xf64>):
// CHECK-NEXT:      "dsl.scan"
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<3xf64>, %{{.*}}: tensor<3xf64>, %{{.*}}: tensor<3xf64>):
// CHECK-NEXT:        "dsl.add"{{.*}} {dsl.dies = array<i64: 0, 1>}
// CHECK-NEXT:        "dsl.mul"{{.*}} {dsl.dies = array<i64: 0>}
// CHECK-NEXT:        "dsl.yield"
// CHECK-NEXT:      }) {carries = 1 : i64, consts = 1 : i64, dsl.dies = array<i64: 0>, length = 2 : i64, reverse = false}
// CHECK-NEXT:      "dsl.yield"
// CHECK-NEXT:    }) {consts = 2 : i64, dsl.dies = array<i64: 0, 1, 2, 3, 4>}
func.func @scan_in_loop(%arg0: tensor<3xf64>, %arg1: tensor<2x3xf64>, %arg2: tensor<3xf64>, %arg3: tensor<i64>) -> tensor<3xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":16:3)
  %1 = "dsl.for"(%0, %arg3, %arg0, %arg1, %arg2) ({
  ^bb0(%i: tensor<i64>, %c: tensor<3xf64>, %xs: tensor<2x3xf64>, %v: tensor<3xf64>):
    %2:2 = "dsl.scan"(%c, %xs, %v) ({
    ^bb0(%d: tensor<3xf64>, %r: tensor<3xf64>, %u: tensor<3xf64>):
      %3 = "dsl.add"(%d, %r) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":18:7)
      %4 = "dsl.mul"(%3, %u) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":19:7)
      "dsl.yield"(%4, %4) : (tensor<3xf64>, tensor<3xf64>) -> ()
    }) {carries = 1 : i64, consts = 1 : i64, length = 2 : i64, reverse = false} : (tensor<3xf64>, tensor<2x3xf64>, tensor<3xf64>) -> (tensor<3xf64>, tensor<2x3xf64>) loc("user.py":17:5)
    "dsl.yield"(%2#0) : (tensor<3xf64>) -> ()
  }) {consts = 2 : i64} : (tensor<i64>, tensor<i64>, tensor<3xf64>, tensor<2x3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":16:3)
  return %1 : tensor<3xf64>
}

// An if runs one branch once: a branch's arguments die at their last reader there.
// CHECK-LABEL: func.func @branch
// CHECK:         "dsl.if"(%arg0, %arg1, %arg2) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<4xf64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      "dsl.add"{{.*}} {dsl.dies = array<i64: 0, 1>}
// CHECK:         }) {dsl.dies = array<i64: 0, 1, 2>}
func.func @branch(%arg0: tensor<i1>, %arg1: tensor<4xf64>, %arg2: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.if"(%arg0, %arg1, %arg2) ({
  ^bb0(%x: tensor<4xf64>, %y: tensor<4xf64>):
    %1 = "dsl.add"(%x, %y) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":23:5)
    "dsl.yield"(%1) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %y2: tensor<4xf64>):
    %2 = "dsl.neg"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":25:5)
    "dsl.yield"(%2) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":22:3)
  return %0 : tensor<4xf64>
}
