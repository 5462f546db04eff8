// RUN: %dslc opt %s --passes if_to_select | FileCheck %s
// RUN: %dslc opt %s --passes if_to_select --target cuda | FileCheck %s --check-prefix=CUDA

// if_to_select: an if whose branches are safe to run both and cheap (at most Options.if_select_budget
// element operations, a transcendental counting 16; by default the target's budget: 1,024 on the
// CPU, 1,048,576 on CUDA) becomes both branches, inlined on its operands, and a select per result on
// the predicate, broadcast to the result's shape.
// CHECK-LABEL: func.func @cheap
// CHECK-NOT:     dsl.if
// CHECK:         %[[E:.*]] = "dsl.exp"(%arg1)
// CHECK-NEXT:    %[[T:.*]] = "dsl.add"(%arg0, %[[E]])
// CHECK-NEXT:    %[[N:.*]] = "dsl.neg"(%arg0)
// CHECK-NEXT:    %[[P:.*]] = "dsl.broadcast"(%arg2) {shape = array<i64: 4>}
// CHECK-NEXT:    %[[S:.*]] = "dsl.select"(%[[P]], %[[T]], %[[N]])
// CHECK-NEXT:    return %[[S]]
func.func @cheap(%arg0: tensor<4xf64>, %arg1: tensor<4xf64>, %arg2: tensor<i1>) -> tensor<4xf64> {
  %0 = "dsl.if"(%arg2, %arg0, %arg1) ({
  ^bb0(%y: tensor<4xf64>, %v: tensor<4xf64>):
    %1 = "dsl.exp"(%v) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":3:5)
    %2 = "dsl.add"(%y, %1) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":3:5)
    "dsl.yield"(%2) : (tensor<4xf64>) -> ()
  }, {
  ^bb0(%y2: tensor<4xf64>, %v2: tensor<4xf64>):
    %3 = "dsl.neg"(%y2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":5:5)
    "dsl.yield"(%3) : (tensor<4xf64>) -> ()
  }) : (tensor<i1>, tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":2:3)
  return %0 : tensor<4xf64>
}

// Too much work to do both, even within the CUDA budget: a 256x256 exp (16 operations an element)
// and neg, and the select, stay an if whose branch runs alone.
// CHECK-LABEL: func.func @big
// CHECK:         "dsl.if"(%arg1, %arg0)
// CHECK-NOT:     dsl.select
// CUDA-LABEL:  func.func @big
// CUDA:          "dsl.if"(%arg1, %arg0)
func.func @big(%arg0: tensor<256x256xf32>, %arg1: tensor<i1>) -> tensor<256x256xf32> {
  %0 = "dsl.if"(%arg1, %arg0) ({
  ^bb0(%x: tensor<256x256xf32>):
    %1 = "dsl.exp"(%x) : (tensor<256x256xf32>) -> tensor<256x256xf32> loc("user.py":9:5)
    "dsl.yield"(%1) : (tensor<256x256xf32>) -> ()
  }, {
  ^bb0(%x2: tensor<256x256xf32>):
    %2 = "dsl.neg"(%x2) : (tensor<256x256xf32>) -> tensor<256x256xf32> loc("user.py":11:5)
    "dsl.yield"(%2) : (tensor<256x256xf32>) -> ()
  }) : (tensor<i1>, tensor<256x256xf32>) -> tensor<256x256xf32> loc("user.py":8:3)
  return %0 : tensor<256x256xf32>
}

// A matmul counts its multiply-adds: 32x32 @ 32x32 is 32,768 of them, over the CPU's budget though
// its result has 1,024 elements; under CUDA's, where the native if would read its predicate back.
// CHECK-LABEL: func.func @matmul
// CHECK:         "dsl.if"
// CHECK:           "dsl.matmul"
// CUDA-LABEL:  func.func @matmul
// CUDA-NOT:      dsl.if
// CUDA:          %[[M:.*]] = "dsl.matmul"(%arg0, %arg0)
// CUDA-NEXT:     %[[P:.*]] = "dsl.broadcast"(%arg1) {shape = array<i64: 32, 32>}
// CUDA-NEXT:     "dsl.select"(%[[P]], %[[M]], %arg0)
func.func @matmul(%arg0: tensor<32x32xf32>, %arg1: tensor<i1>) -> tensor<32x32xf32> {
  %0 = "dsl.if"(%arg1, %arg0) ({
  ^bb0(%x: tensor<32x32xf32>):
    %1 = "dsl.matmul"(%x, %x) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> loc("user.py":15:5)
    "dsl.yield"(%1) : (tensor<32x32xf32>) -> ()
  }, {
  ^bb0(%x2: tensor<32x32xf32>):
    "dsl.yield"(%x2) : (tensor<32x32xf32>) -> ()
  }) : (tensor<i1>, tensor<32x32xf32>) -> tensor<32x32xf32> loc("user.py":14:3)
  return %0 : tensor<32x32xf32>
}

// A branch holding a while is kept, however small: run when its branch is not taken, the loop might
// never end.
// CHECK-LABEL: func.func @holds_while
// CHECK:         "dsl.if"(%arg1, %arg0)
// CHECK:           "dsl.while"
// CHECK-NOT:     dsl.select
func.func @holds_while(%arg0: tensor<f64>, %arg1: tensor<i1>) -> tensor<f64> {
  %0 = "dsl.if"(%arg1, %arg0) ({
  ^bb0(%x: tensor<f64>):
    %1 = "dsl.while"(%x) ({
    ^bb0(%c: tensor<f64>):
      %2 = "dsl.lt"(%c, %c) : (tensor<f64>, tensor<f64>) -> tensor<i1> loc("user.py":20:7)
      "dsl.yield"(%2) : (tensor<i1>) -> ()
    }, {
    ^bb0(%c2: tensor<f64>):
      %3 = "dsl.exp"(%c2) : (tensor<f64>) -> tensor<f64> loc("user.py":21:7)
      "dsl.yield"(%3) : (tensor<f64>) -> ()
    }) : (tensor<f64>) -> tensor<f64> loc("user.py":19:5)
    "dsl.yield"(%1) : (tensor<f64>) -> ()
  }, {
  ^bb0(%x2: tensor<f64>):
    "dsl.yield"(%x2) : (tensor<f64>) -> ()
  }) : (tensor<i1>, tensor<f64>) -> tensor<f64> loc("user.py":18:3)
  return %0 : tensor<f64>
}

// An integer division guarded by the predicate (d != 0) is converted: in dslc's semantics i // 0 is
// 0 (docs/semantics.md), never a trap, and the select drops it. The predicate is a scalar like the
// result: no broadcast.
// CHECK-LABEL: func.func @guarded_division
// CHECK-NOT:     dsl.if
// CHECK:         %[[P:.*]] = "dsl.ne"(%arg1, %{{.*}})
// CHECK:         %[[Q:.*]] = "dsl.div"(%arg0, %arg1)
// CHECK:         "dsl.select"(%[[P]], %[[Q]], %{{.*}})
func.func @guarded_division(%arg0: tensor<i64>, %arg1: tensor<i64>) -> tensor<i64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":25:3)
  %1 = "dsl.ne"(%arg1, %0) : (tensor<i64>, tensor<i64>) -> tensor<i1> loc("user.py":25:3)
  %2 = "dsl.if"(%1, %arg0, %arg1) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %3 = "dsl.div"(%a, %b) : (tensor<i64>, tensor<i64>) -> tensor<i64> loc("user.py":26:5)
    "dsl.yield"(%3) : (tensor<i64>) -> ()
  }, {
  ^bb0(%a2: tensor<i64>, %b2: tensor<i64>):
    %4 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":28:5)
    "dsl.yield"(%4) : (tensor<i64>) -> ()
  }) : (tensor<i1>, tensor<i64>, tensor<i64>) -> tensor<i64> loc("user.py":25:3)
  return %2 : tensor<i64>
}

// An integer power traps on a negative exponent (0 ** -1 raises in Numba, any negative one in
// NumPy): guarded by the predicate, it stays in its branch.
// CHECK-LABEL: func.func @guarded_power
// CHECK:         "dsl.if"
// CHECK:           "dsl.pow"
// CHECK-NOT:     dsl.select
func.func @guarded_power(%arg0: tensor<i64>, %arg1: tensor<i64>) -> tensor<i64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":32:3)
  %1 = "dsl.ge"(%arg1, %0) : (tensor<i64>, tensor<i64>) -> tensor<i1> loc("user.py":32:3)
  %2 = "dsl.if"(%1, %arg0, %arg1) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %3 = "dsl.pow"(%a, %b) : (tensor<i64>, tensor<i64>) -> tensor<i64> loc("user.py":33:5)
    "dsl.yield"(%3) : (tensor<i64>) -> ()
  }, {
  ^bb0(%a2: tensor<i64>, %b2: tensor<i64>):
    "dsl.yield"(%a2) : (tensor<i64>) -> ()
  }) : (tensor<i1>, tensor<i64>, tensor<i64>) -> tensor<i64> loc("user.py":32:3)
  return %2 : tensor<i64>
}

// Inside a loop body too (a readback per iteration on CUDA), and inside out: the inner if is
// converted first, then the outer one, whose branch then holds no region op. The body stays closed:
// the selects read its block arguments. (The simplification after it hoists the broadcast of the
// loop-invariant inner predicate out of the loop.)
// CHECK-LABEL: func.func @in_a_loop
// CHECK:         %[[Q:.*]] = "dsl.broadcast"(%arg1) {shape = array<i64: 4>}
// CHECK-NEXT:    "dsl.for"(%0, %1, %arg0, %[[Q]]) ({
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<i64>, %[[C:.*]]: tensor<4xf64>, %[[P:.*]]: tensor<4xi1>):
// CHECK-NOT:       dsl.if
// CHECK:           %[[S:.*]] = "dsl.sin"(%[[C]])
// CHECK-NEXT:      %[[K:.*]] = "dsl.cos"(%[[C]])
// CHECK-NEXT:      %[[I:.*]] = "dsl.select"(%[[P]], %[[S]], %[[K]])
// CHECK:           "dsl.select"(%{{.*}}, %[[I]], %{{.*}})
// CHECK:           "dsl.yield"
// CHECK-NEXT:    }) {consts = 1 : i64}
func.func @in_a_loop(%arg0: tensor<4xf64>, %arg1: tensor<i1>) -> tensor<4xf64> {
  %0 = "dsl.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64> loc("user.py":38:3)
  %1 = "dsl.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64> loc("user.py":38:3)
  %2 = "dsl.for"(%0, %1, %arg0, %arg1) ({
  ^bb0(%i: tensor<i64>, %c: tensor<4xf64>, %q: tensor<i1>):
    %3 = "dsl.reduce_sum"(%c) {axes = array<i64: 0>} : (tensor<4xf64>) -> tensor<f64> loc("user.py":39:5)
    %4 = "dsl.lt"(%3, %3) : (tensor<f64>, tensor<f64>) -> tensor<i1> loc("user.py":39:5)
    %5 = "dsl.if"(%4, %c, %q) ({
    ^bb0(%x: tensor<4xf64>, %p: tensor<i1>):
      %6 = "dsl.if"(%p, %x) ({
      ^bb0(%z: tensor<4xf64>):
        %7 = "dsl.sin"(%z) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":41:9)
        "dsl.yield"(%7) : (tensor<4xf64>) -> ()
      }, {
      ^bb0(%z2: tensor<4xf64>):
        %8 = "dsl.cos"(%z2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":43:9)
        "dsl.yield"(%8) : (tensor<4xf64>) -> ()
      }) : (tensor<i1>, tensor<4xf64>) -> tensor<4xf64> loc("user.py":40:7)
      "dsl.yield"(%6) : (tensor<4xf64>) -> ()
    }, {
    ^bb0(%x2: tensor<4xf64>, %p2: tensor<i1>):
      %9 = "dsl.neg"(%x2) : (tensor<4xf64>) -> tensor<4xf64> loc("user.py":45:7)
      "dsl.yield"(%9) : (tensor<4xf64>) -> ()
    }) : (tensor<i1>, tensor<4xf64>, tensor<i1>) -> tensor<4xf64> loc("user.py":39:5)
    "dsl.yield"(%5) : (tensor<4xf64>) -> ()
  }) {consts = 1 : i64} : (tensor<i64>, tensor<i64>, tensor<4xf64>, tensor<i1>) -> tensor<4xf64> loc("user.py":38:3)
  return %2 : tensor<4xf64>
}
