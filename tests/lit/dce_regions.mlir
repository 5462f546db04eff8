// RUN: %dslc opt %s --passes dce | FileCheck %s

// DCE inside bodies and of loop state (compiler/passes/dce.py). Carry 0 is returned; carry 1 is read
// by nobody after the loop but carry 0's update reads it, so it stays; carry 2 is read by nobody
// outside and by no needed carry inside (it reads carry 0 and itself): it goes, with its sin and the
// exp no yield needs. The const %arg1 was read only by carry 2's update: it goes too.
// CHECK-LABEL: func.func @dead_carry
// CHECK:         %[[R:.*]]:2 = "dsl.for"(%0, %1, %arg0, %arg0) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[A:.*]]: tensor<4xf64>, %[[B:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[A]], %[[B]])
// CHECK-NEXT:      %[[N:.*]] = "dsl.neg"(%[[B]])
// CHECK-NEXT:      "dsl.yield"(%[[M]], %[[N]])
// CHECK-NEXT:    }) : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>)
// CHECK-NEXT:    return %[[R]]#0
func.func @dead_carry(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":5:3)
  %2:3 = "dsl.for"(%0, %1, %arg0, %arg0, %arg0, %arg1) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf64>, %b: tensor<4xf64>, %c: tensor<4xf64>, %w: tensor<4xf64>):
    %3 = "dsl.mul"(%a, %b) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %4 = "dsl.neg"(%b) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:5)
    %5 = "dsl.exp"(%a) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":8:5)
    %6 = "dsl.add"(%a, %c) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":9:5)
    %7 = "dsl.sin"(%6) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":9:5)
    %8 = "dsl.mul"(%7, %w) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":9:5)
    "dsl.yield"(%3, %4, %8) : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) loc("user.py":5:3)
  return %2#0 : tensor<4xf64>
}

// A while loop's condition needs what it reads: carry 1, unread after the loop, stays because the
// condition reads it; carry 2 goes.
// CHECK-LABEL: func.func @while_condition
// CHECK:         "dsl.while"(%arg0, %arg1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<4xf64>, %[[N:.*]]: tensor<f64>):
// CHECK-NEXT:      "dsl.lt"(%[[N]], %[[N]])
// CHECK:         }, {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<4xf64>, %[[M:.*]]: tensor<f64>):
// CHECK-NEXT:      %[[E:.*]] = "dsl.exp"(%[[X]])
// CHECK-NEXT:      %[[S:.*]] = "dsl.sin"(%[[M]])
// CHECK-NEXT:      "dsl.yield"(%[[E]], %[[S]])
// CHECK-NEXT:    }) : (tensor<4xf64>, tensor<f64>) -> (tensor<4xf64>, tensor<f64>)
func.func @while_condition(%arg0: tensor<4xf64>, %arg1: tensor<f64>) -> tensor<4xf64> {
  %0:3 = "dsl.while"(%arg0, %arg1, %arg0) ({
  ^bb0(%x: tensor<4xf64>, %n: tensor<f64>, %y: tensor<4xf64>):
    %1 = "dsl.lt"(%n, %n) : (tensor<f64>, tensor<f64>) -> tensor<i1> loc("user.py":12:5)
    "dsl.yield"(%1) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %n2: tensor<f64>, %y2: tensor<4xf64>):
    %2 = "dsl.exp"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":13:5)
    %3 = "dsl.sin"(%n2) : (tensor<f64>) -> tensor<f64> loc("user.py":14:5)
    %4 = "dsl.add"(%y2, %x2) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":15:5)
    "dsl.yield"(%2, %3, %4) : (tensor<4xf64>, tensor<f64>, tensor<4xf64>) -> ()
  }) : (tensor<4xf64>, tensor<f64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<f64>, tensor<4xf64>) loc("user.py":11:3)
  return %0#0 : tensor<4xf64>
}

// A scan's ys nobody reads go, and so does an xs only they read (here the second); the carries
// attribute follows the carries.
// CHECK-LABEL: func.func @scan_ys
// CHECK:         %[[S:.*]]:2 = "dsl.scan"(%arg0, %arg1) ({
// CHECK-NEXT:    ^bb0(%[[C:.*]]: tensor<3xf64>, %[[R:.*]]: tensor<3xf64>):
// CHECK-NEXT:      %[[A:.*]] = "dsl.add"(%[[C]], %[[R]])
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[R]], %[[C]])
// CHECK-NEXT:      "dsl.yield"(%[[A]], %[[M]])
// CHECK-NEXT:    }) {carries = 1 : i64, length = 2 : i64, reverse = false} : (tensor<3xf64>, tensor<2x3xf64>) -> (tensor<3xf64>, tensor<2x3xf64>)
// CHECK-NEXT:    return %[[S]]#1
func.func @scan_ys(%arg0: tensor<3xf64>, %arg1: tensor<2x3xf64>, %arg2: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %0:4 = "dsl.scan"(%arg0, %arg0, %arg1, %arg2) ({
  ^bb0(%a: tensor<3xf64>, %b: tensor<3xf64>, %r: tensor<3xf64>, %q: tensor<3xf64>):
    %1 = "dsl.add"(%a, %r) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":18:5)
    %2 = "dsl.mul"(%b, %b) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":19:5)
    %3 = "dsl.mul"(%r, %a) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("user.py":20:5)
    %4 = "dsl.sin"(%q) : (tensor<3xf64>) -> tensor<3xf64> loc("user.py":21:5)
    "dsl.yield"(%1, %2, %3, %4) : (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> ()
  }) {carries = 2 : i64, length = 2 : i64, reverse = false} : (tensor<3xf64>, tensor<3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) loc("user.py":17:3)
  return %0#2 : tensor<2x3xf64>
}

// An if result nobody reads goes from both branches, and the operand only it read goes too.
// CHECK-LABEL: func.func @if_result
// CHECK:         %[[R:.*]] = "dsl.if"(%arg0, %arg1) ({
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[E:.*]] = "dsl.exp"(%[[X]])
// CHECK-NEXT:      "dsl.yield"(%[[E]])
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%[[X2:.*]]: tensor<4xf64>):
// CHECK-NEXT:      "dsl.yield"(%[[X2]])
// CHECK-NEXT:    }) : (tensor<i1>, tensor<4xf64>) -> tensor<4xf64>
// CHECK-NEXT:    return %[[R]]
func.func @if_result(%arg0: tensor<i1>, %arg1: tensor<4xf64>, %arg2: tensor<4xf64>) -> tensor<4xf64> {
  %0:2 = "dsl.if"(%arg0, %arg1, %arg2) ({
  ^bb0(%x: tensor<4xf64>, %y: tensor<4xf64>):
    %1 = "dsl.exp"(%x) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":24:5)
    %2 = "dsl.sin"(%y) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":25:5)
    "dsl.yield"(%1, %2) : (tensor<4xf64>, tensor<4xf64>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %y2: tensor<4xf64>):
    "dsl.yield"(%x2, %y2) : (tensor<4xf64>, tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) loc("user.py":23:3)
  return %0#0 : tensor<4xf64>
}

// Nested loops: the inner loop's dead carry goes, then the outer const that only it read (the inner
// loop's const) goes from both loops; a dead op in the outer body goes.
// CHECK-LABEL: func.func @nested
// CHECK:         "dsl.for"(%0, %1, %arg0, %0, %1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>, %[[LO:.*]]: tensor<i64>, %[[HI:.*]]: tensor<i64>):
// CHECK-NEXT:      %[[IN:.*]] = "dsl.for"(%[[LO]], %[[HI]], %[[C]]) ({
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i64>, %[[D:.*]]: tensor<4xf64>):
// CHECK-NEXT:        %[[T:.*]] = "dsl.tanh"(%[[D]])
// CHECK-NEXT:        "dsl.yield"(%[[T]])
// CHECK-NEXT:      }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64>
// CHECK-NEXT:      "dsl.yield"(%[[IN]])
// CHECK-NEXT:    }) {consts = 2 : i64}
func.func @nested(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":27:3)
  %1 = "dsl.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64> loc("user.py":27:3)
  %2 = "dsl.for"(%0, %1, %arg0, %0, %1, %arg1) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %lo: tensor<i64>, %hi: tensor<i64>, %w: tensor<4xf64>):
    %3:2 = "dsl.for"(%lo, %hi, %c, %c, %w) ({
    ^bb0(%j: tensor<i64>, %d: tensor<4xf64>, %e: tensor<4xf64>, %v: tensor<4xf64>):
      %4 = "dsl.tanh"(%d) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":29:7)
      %5 = "dsl.mul"(%e, %v) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":30:7)
      "dsl.yield"(%4, %5) : (tensor<4xf64>, tensor<4xf64>) -> ()
    }) {consts = 1 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) loc("user.py":28:5)
    %6 = "dsl.exp"(%c) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":31:5)
    "dsl.yield"(%3#0) : (tensor<4xf64>) -> ()
  }) {consts = 3 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":27:3)
  return %2 : tensor<4xf64>
}
