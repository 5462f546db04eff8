// RUN: %dslc opt %s --passes simplify | FileCheck %s

// simplify in loop and branch bodies (compiler/passes/simplify.py, licm.py): CSE within a body, folding
// and identities there, loop-invariant code motion, folding of control flow. The inputs are closed
// (close_regions has run): a body reads only its block arguments.

// CSE within the body: one exp of the carry. The exp of the const %w is invariant: it moves out of
// the loop, where CSE merges it with the exp of %arg1 already there, and the loop reads that value.
// CHECK-LABEL: func.func @cse
// CHECK:         %[[E:.*]] = "dsl.exp"(%arg1)
// CHECK-NOT:     "dsl.exp"
// CHECK:         "dsl.for"(%0, %1, %arg0, %[[E]]) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>, %[[W:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[X:.*]] = "dsl.exp"(%[[C]])
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[X]], %[[X]])
// CHECK-NEXT:      %[[A:.*]] = "dsl.add"(%[[M]], %[[W]])
// CHECK-NEXT:      "dsl.yield"(%[[A]])
// CHECK-NEXT:    }) {consts = 1 : i64}
func.func @cse(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":3:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":3:3)
  %2 = "dsl.exp"(%arg1) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":4:3)
  %3 = "dsl.for"(%0, %1, %arg0, %arg1) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %w: tensor<4xf64>):
    %4 = "dsl.exp"(%c) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %5 = "dsl.exp"(%c) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %6 = "dsl.mul"(%4, %5) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":6:5)
    %7 = "dsl.exp"(%w) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:5)
    %8 = "dsl.add"(%6, %7) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":7:5)
    "dsl.yield"(%8) : (tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:3)
  return %3, %2 : tensor<4xf64>, tensor<4xf64>
}

// Constant consts move into the body, where they fold (2 * 3 = 6) and where x + -0.0 is x.
// CHECK-LABEL: func.func @fold
// CHECK:         "dsl.for"(%0, %1, %arg0) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[K:.*]] = "dsl.constant"() {value = dense<6.0> : tensor<4xf64>}
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[C]], %[[K]])
// CHECK-NEXT:      "dsl.yield"(%[[M]])
// CHECK-NEXT:    }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64>
func.func @fold(%arg0: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":10:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":10:3)
  %2 = "dsl.constant"() {value = dense<2.0> : tensor<4xf64>} : () -> tensor<4xf64> loc("user.py":11:3)
  %3 = "dsl.constant"() {value = dense<3.0> : tensor<4xf64>} : () -> tensor<4xf64> loc("user.py":11:3)
  %4 = "dsl.constant"() {value = dense<-0.0> : tensor<4xf64>} : () -> tensor<4xf64> loc("user.py":11:3)
  %5 = "dsl.for"(%0, %1, %arg0, %2, %3, %4) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %a: tensor<4xf64>, %b: tensor<4xf64>, %z: tensor<4xf64>):
    %6 = "dsl.mul"(%a, %b) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":13:5)
    %7 = "dsl.mul"(%c, %6) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":13:5)
    %8 = "dsl.add"(%7, %z) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":14:5)
    "dsl.yield"(%8) : (tensor<4xf64>) -> ()
  }) {consts = 3 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":12:3)
  return %5 : tensor<4xf64>
}

// Nested loops: exp(%w) is invariant in both loops and moves to the top; sin(%c) reads the outer
// carry, so it moves out of the inner loop only, into the outer body. The inner loop keeps the
// counter and its carry; its bounds, constants, move into the outer body.
// CHECK-LABEL: func.func @licm_nested
// CHECK:         %[[E:.*]] = "dsl.exp"(%arg1)
// CHECK-NEXT:    "dsl.for"(%0, %1, %arg0, %[[E]]) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>, %[[EW:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[LO:.*]] = "dsl.constant"() {value = dense<0> : tensor<i64>}
// CHECK-NEXT:      %[[HI:.*]] = "dsl.constant"() {value = dense<2> : tensor<i64>}
// CHECK-NEXT:      %[[S:.*]] = "dsl.sin"(%[[C]])
// CHECK-NEXT:      %[[IN:.*]] = "dsl.for"(%[[LO]], %[[HI]], %[[C]], %[[EW]], %[[S]]) ({
// CHECK-NEXT:      ^bb0(%{{.*}}: tensor<i64>, %[[D:.*]]: tensor<4xf64>, %[[EV:.*]]: tensor<4xf64>, %[[SV:.*]]: tensor<4xf64>):
// CHECK-NEXT:        %[[P:.*]] = "dsl.mul"(%[[D]], %[[EV]])
// CHECK-NEXT:        %[[Q:.*]] = "dsl.add"(%[[P]], %[[SV]])
// CHECK-NEXT:        "dsl.yield"(%[[Q]])
// CHECK-NEXT:      }) {consts = 2 : i64}
// CHECK-NEXT:      "dsl.yield"(%[[IN]])
// CHECK-NEXT:    }) {consts = 1 : i64}
func.func @licm_nested(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":17:3)
  %1 = "dsl.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64> loc("user.py":17:3)
  %2 = "dsl.for"(%0, %1, %arg0, %0, %1, %arg1) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %lo: tensor<i64>, %hi: tensor<i64>, %w: tensor<4xf64>):
    %3 = "dsl.for"(%lo, %hi, %c, %c, %w) ({
    ^bb0(%j: tensor<i64>, %d: tensor<4xf64>, %cc: tensor<4xf64>, %v: tensor<4xf64>):
      %4 = "dsl.exp"(%v) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":19:7)
      %5 = "dsl.mul"(%d, %4) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":19:7)
      %6 = "dsl.sin"(%cc) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":20:7)
      %7 = "dsl.add"(%5, %6) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":20:7)
      "dsl.yield"(%7) : (tensor<4xf64>) -> ()
    }) {consts = 2 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":18:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) {consts = 3 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":17:3)
  return %2 : tensor<4xf64>
}

// A while loop: the invariant exp moves out of its body and the invariant sum out of its condition
// (which runs at least once); nothing moves out of an if's branch (it might not be taken).
// CHECK-LABEL: func.func @while_and_if
// CHECK-DAG:     %[[S:.*]] = "dsl.reduce_sum"(%arg1)
// CHECK-DAG:     %[[E:.*]] = "dsl.exp"(%arg1)
// CHECK:         "dsl.while"(%arg0, %[[S]], %[[E]]) ({
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<4xf64>, %[[SC:.*]]: tensor<f64>, %{{.*}}: tensor<4xf64>):
// CHECK-NEXT:      %[[R:.*]] = "dsl.reduce_sum"(%[[X]])
// CHECK-NEXT:      "dsl.lt"(%[[R]], %[[SC]])
// CHECK:         }, {
// CHECK-NEXT:    ^bb0(%[[X2:.*]]: tensor<4xf64>, %{{.*}}: tensor<f64>, %[[EW:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[X2]], %[[EW]])
// CHECK-NEXT:      "dsl.yield"(%[[M]])
// CHECK-NEXT:    }) {consts = 2 : i64}
// CHECK:         "dsl.if"(%arg2, %{{.*}}, %arg1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<4xf64>, %[[V:.*]]: tensor<4xf64>):
// CHECK-NEXT:      "dsl.exp"(%[[V]])
func.func @while_and_if(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>, %arg2: tensor<i1>) -> tensor<4xf64> {
  %0 = "dsl.while"(%arg0, %arg1) ({
  ^bb0(%x: tensor<4xf64>, %w: tensor<4xf64>):
    %1 = "dsl.reduce_sum"(%x) {axes = array<i64: 0>} : (tensor<4xf64>) -> tensor<f64> loc("user.py":24:5)
    %2 = "dsl.reduce_sum"(%w) {axes = array<i64: 0>} : (tensor<4xf64>) -> tensor<f64> loc("user.py":24:5)
    %3 = "dsl.lt"(%1, %2) : (tensor<f64>, tensor<f64>) -> tensor<i1> loc("user.py":24:5)
    "dsl.yield"(%3) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %w2: tensor<4xf64>):
    %4 = "dsl.exp"(%w2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":25:5)
    %5 = "dsl.mul"(%x2, %4) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":25:5)
    "dsl.yield"(%5) : (tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":23:3)
  %6 = "dsl.if"(%arg2, %0, %arg1) ({
  ^bb0(%y: tensor<4xf64>, %v: tensor<4xf64>):
    %7 = "dsl.exp"(%v) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":27:5)
    %8 = "dsl.add"(%y, %7) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":27:5)
    "dsl.yield"(%8) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%y2: tensor<4xf64>, %v2: tensor<4xf64>):
    %9 = "dsl.neg"(%y2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":29:5)
    "dsl.yield"(%9) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":26:3)
  return %6 : tensor<4xf64>
}

// An if on a constant predicate is the branch it takes, inlined.
// CHECK-LABEL: func.func @constant_if
// CHECK-NOT:     dsl.if
// CHECK:         %[[N:.*]] = "dsl.neg"(%arg0)
// CHECK-NEXT:    return %[[N]]
func.func @constant_if(%arg0: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1> loc("user.py":32:3)
  %1 = "dsl.if"(%0, %arg0) ({
  ^bb0(%x: tensor<4xf64>):
    %2 = "dsl.exp"(%x) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":33:5)
    "dsl.yield"(%2) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>):
    %3 = "dsl.neg"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":35:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":32:3)
  return %1 : tensor<4xf64>
}

// A for of constant bounds: zero trips is its inits; one trip is its body inlined, the counter the
// constant lower bound (folded: cast(3) is 3.0); a while whose condition is constant false is its
// inits.
// CHECK-LABEL: func.func @trip_counts
// CHECK-NOT:     dsl.for
// CHECK-NOT:     dsl.while
// CHECK:         %[[K:.*]] = "dsl.constant"() {value = dense<3.0> : tensor<4xf64>}
// CHECK-NEXT:    %[[A:.*]] = "dsl.add"(%arg0, %[[K]])
// CHECK-NEXT:    return %arg0, %[[A]], %arg0
func.func @trip_counts(%arg0: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %0 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":38:3)
  %1 = "dsl.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64> loc("user.py":38:3)
  %2 = "dsl.for"(%0, %0, %arg0) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>):
    %3 = "dsl.exp"(%c) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":39:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":38:3)
  %4 = "dsl.for"(%0, %1, %arg0) ({
  ^bb0(%j: tensor<i64>, %d: tensor<4xf64>):
    %5 = "dsl.cast"(%j) {dtype = f64} : (tensor<i64>) -> tensor<f64> loc("user.py":41:5)
    %6 = "dsl.broadcast"(%5) {shape = array<i64: 4>} : (tensor<f64>) -> tensor<4xf64> loc("user.py":41:5)
    %7 = "dsl.add"(%d, %6) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":41:5)
    "dsl.yield"(%7) : (tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":40:3)
  %8 = "dsl.while"(%arg0) ({
  ^bb0(%x: tensor<4xf64>):
    %9 = "dsl.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1> loc("user.py":43:5)
    "dsl.yield"(%9) : (tensor<i1>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>):
    %10 = "dsl.exp"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":44:5)
    "dsl.yield"(%10) : (tensor<4xf64>) -> ()
  }) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":42:3)
  return %2, %4, %8 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}

// A carry the body yields as it came (%b) is a const: the loop's result for it is its init. An if
// result that both branches yield as the same operand is that operand.
// CHECK-LABEL: func.func @unchanged
// CHECK:         %[[L:.*]] = "dsl.for"(%0, %arg2, %arg0, %arg1) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[A:.*]]: tensor<4xf64>, %[[B:.*]]: tensor<4xf64>):
// CHECK-NEXT:      %[[M:.*]] = "dsl.mul"(%[[A]], %[[B]])
// CHECK-NEXT:      "dsl.yield"(%[[M]])
// CHECK-NEXT:    }) {consts = 1 : i64}
// CHECK-NOT:     dsl.if
// CHECK:         return %[[L]], %arg1, %arg1
func.func @unchanged(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>, %arg2: tensor<i64>, %arg3: tensor<i1>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":47:3)
  %1:2 = "dsl.for"(%0, %arg2, %arg0, %arg1) ({
  ^bb0(%i: tensor<i64>, %a: tensor<4xf64>, %b: tensor<4xf64>):
    %2 = "dsl.mul"(%a, %b) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":48:5)
    "dsl.yield"(%2, %b) : (tensor<4xf64>, tensor<4xf64>) -> ()
  }) : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>) loc("user.py":47:3)
  %3 = "dsl.if"(%arg3, %arg0, %arg1) ({
  ^bb0(%x: tensor<4xf64>, %y: tensor<4xf64>):
    "dsl.yield"(%y) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%x2: tensor<4xf64>, %y2: tensor<4xf64>):
    "dsl.yield"(%y2) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":50:3)
  return %1#0, %1#1, %3 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}
