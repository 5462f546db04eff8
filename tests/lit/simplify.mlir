// RUN: %dslc opt %s --passes simplify | FileCheck %s

// CSE merges the two exps, the neutral add (of -0.0: x + -0.0 is x for every float) disappears, and
// mul reads the one exp twice.
// CHECK-LABEL: func.func @cse_and_identity
// CHECK-NEXT:    %0 = "dsl.exp"(%arg0)
// CHECK-NEXT:    %1 = "dsl.mul"(%0, %0)
// CHECK-NEXT:    return %1
func.func @cse_and_identity(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "dsl.constant"() {value = dense<-0.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %1 = "dsl.add"(%arg0, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = "dsl.exp"(%1) : (tensor<3xf32>) -> tensor<3xf32>
  %3 = "dsl.exp"(%1) : (tensor<3xf32>) -> tensor<3xf32>
  %4 = "dsl.mul"(%2, %3) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %4 : tensor<3xf32>
}

// Constants fold through elementwise ops and broadcasts of small size.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %0 = "dsl.constant"() {value = dense<[3.0, 6.0]> : tensor<2xf64>}
// CHECK-NEXT:    return %0
func.func @fold() -> tensor<2xf64> {
  %0 = "dsl.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf64>} : () -> tensor<2xf64>
  %1 = "dsl.constant"() {value = dense<2.0> : tensor<2xf64>} : () -> tensor<2xf64>
  %2 = "dsl.mul"(%0, %1) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %3 = "dsl.add"(%2, %0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  return %3 : tensor<2xf64>
}

// Identity movement ops vanish; reshape of reshape is one reshape.
// CHECK-LABEL: func.func @movement
// CHECK-NEXT:    %0 = "dsl.reshape"(%arg0) {shape = array<i64: 6>}
// CHECK-NEXT:    return %0
func.func @movement(%arg0: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = "dsl.transpose"(%arg0) {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "dsl.reshape"(%0) {shape = array<i64: 3, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = "dsl.reshape"(%1) {shape = array<i64: 6>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %3 = "dsl.copy"(%2) : (tensor<6xf32>) -> tensor<6xf32>
  return %3 : tensor<6xf32>
}

// A transpose of a transpose composes into one (here: the identity, which vanishes).
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT:    %0 = "dsl.transpose"(%arg0) {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT:    return %0, %arg0
func.func @transposes(%arg0: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = "dsl.transpose"(%arg0) {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %1 = "dsl.transpose"(%0) {perm = array<i64: 2, 0, 1>} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  %2 = "dsl.transpose"(%0) {perm = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  return %2, %1 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// A matmul over K = 1 is an outer product: two broadcasts and a mul, which fusion inlines, plus
// +0.0 (a matmul's sum starts at +0.0: a product of -0.0 comes out +0.0); K = 2 stays a matmul.
// CHECK-LABEL: func.func @outer_product
// CHECK-NEXT:    %0 = "dsl.broadcast"(%arg0) {shape = array<i64: 4, 3>}
// CHECK-NEXT:    %1 = "dsl.broadcast"(%arg1) {shape = array<i64: 4, 3>}
// CHECK-NEXT:    %2 = "dsl.mul"(%0, %1)
// CHECK-NEXT:    %3 = "dsl.constant"() {value = dense<0.0> : tensor<4x3xf32>}
// CHECK-NEXT:    %4 = "dsl.add"(%2, %3)
// CHECK-NEXT:    %5 = "dsl.matmul"(%arg2, %arg3)
// CHECK-NEXT:    return %4, %5
func.func @outer_product(%arg0: tensor<4x1xf32>, %arg1: tensor<1x3xf32>, %arg2: tensor<4x2xf32>, %arg3: tensor<2x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = "dsl.matmul"(%arg0, %arg1) : (tensor<4x1xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  %1 = "dsl.matmul"(%arg2, %arg3) : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// Float identities must hold for signed zeros, infinities and NaN. Kept: x + 0.0 (-0.0 + 0.0 is
// +0.0), 0.0 + x, x * 0.0 (inf * 0 is NaN, -1 * 0 is -0.0), x - x (inf - inf is NaN), 0.0 - x (-x
// would give -0.0 at x = 0), x - -0.0 (-0.0 - -0.0 is +0.0). Removed: x - 0.0, x * 1.0, x / 1.0,
// x ** 1.0, x + -0.0 (exact for every x); nothing is folded from NaN's self-comparison.
// CHECK-LABEL: func.func @ieee_identities
// CHECK-NEXT:    %0 = "dsl.constant"() {value = dense<0.0> : tensor<2xf64>}
// CHECK-NEXT:    %1 = "dsl.constant"() {value = dense<-0.0> : tensor<2xf64>}
// CHECK-NEXT:    %2 = "dsl.add"(%arg0, %0)
// CHECK-NEXT:    %3 = "dsl.add"(%0, %arg0)
// CHECK-NEXT:    %4 = "dsl.mul"(%arg0, %0)
// CHECK-NEXT:    %5 = "dsl.sub"(%arg0, %arg0)
// CHECK-NEXT:    %6 = "dsl.sub"(%0, %arg0)
// CHECK-NEXT:    %7 = "dsl.sub"(%arg0, %1)
// CHECK-NEXT:    %8 = "dsl.eq"(%arg0, %arg0)
// CHECK-NEXT:    %9 = "dsl.ne"(%arg0, %arg0)
// CHECK-NEXT:    return %2, %3, %4, %5, %6, %7, %arg0, %arg0, %arg0, %arg0, %arg0, %8, %9
func.func @ieee_identities(%arg0: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xi1>, tensor<2xi1>) {
  %zero = "dsl.constant"() {value = dense<0.0> : tensor<2xf64>} : () -> tensor<2xf64>
  %negzero = "dsl.constant"() {value = dense<-0.0> : tensor<2xf64>} : () -> tensor<2xf64>
  %one = "dsl.constant"() {value = dense<1.0> : tensor<2xf64>} : () -> tensor<2xf64>
  %0 = "dsl.add"(%arg0, %zero) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %1 = "dsl.add"(%zero, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %2 = "dsl.mul"(%arg0, %zero) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %3 = "dsl.sub"(%arg0, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %4 = "dsl.sub"(%zero, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %5 = "dsl.sub"(%arg0, %negzero) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %6 = "dsl.sub"(%arg0, %zero) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %7 = "dsl.mul"(%one, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %8 = "dsl.div"(%arg0, %one) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %9 = "dsl.pow"(%arg0, %one) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %10 = "dsl.add"(%negzero, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %11 = "dsl.eq"(%arg0, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  %12 = "dsl.ne"(%arg0, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12 : tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xi1>, tensor<2xi1>
}

// Integers have no signed zero, infinity or NaN: x + 0, 0 + x, x - 0, x * 1, x // 1, x | 0, x ^ 0 and
// x << 0 are x. (x * 0 and x - x are left alone: no rule for them, for any dtype.)
// CHECK-LABEL: func.func @integer_identities
// CHECK-NEXT:    return %arg0, %arg0, %arg0, %arg0, %arg0, %arg0, %arg0, %arg0
func.func @integer_identities(%arg0: tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) {
  %zero = "dsl.constant"() {value = dense<0> : tensor<3xi32>} : () -> tensor<3xi32>
  %one = "dsl.constant"() {value = dense<1> : tensor<3xi32>} : () -> tensor<3xi32>
  %0 = "dsl.add"(%arg0, %zero) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %1 = "dsl.add"(%zero, %arg0) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %2 = "dsl.sub"(%arg0, %zero) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %3 = "dsl.mul"(%arg0, %one) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %4 = "dsl.div"(%arg0, %one) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %5 = "dsl.or"(%zero, %arg0) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %6 = "dsl.xor"(%arg0, %zero) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %7 = "dsl.shift_left"(%arg0, %zero) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
}

// A neutral operand past FOLD_LIMIT elements is a broadcast of a small splat constant (the gradient
// of a sum seeds ones so): x * broadcast(1.0) is x, as x * 1.0 is. (An embedding gradient of
// 1,000,000 x 512 multiplied its 2 GB cotangent by such ones before scattering it.)
// CHECK-LABEL: func.func @neutral_broadcast
// CHECK-NEXT:    return %arg0, %arg0
func.func @neutral_broadcast(%arg0: tensor<2000x512xf32>) -> (tensor<2000x512xf32>, tensor<2000x512xf32>) {
  %0 = "dsl.constant"() {value = dense<1.0> : tensor<1x1xf32>} : () -> tensor<1x1xf32>
  %1 = "dsl.broadcast"(%0) {shape = array<i64: 2000, 512>} : (tensor<1x1xf32>) -> tensor<2000x512xf32>
  %2 = "dsl.mul"(%1, %arg0) : (tensor<2000x512xf32>, tensor<2000x512xf32>) -> tensor<2000x512xf32>
  %3 = "dsl.constant"() {value = dense<-0.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "dsl.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<f32>) -> tensor<1x1xf32>
  %5 = "dsl.broadcast"(%4) {shape = array<i64: 2000, 512>} : (tensor<1x1xf32>) -> tensor<2000x512xf32>
  %6 = "dsl.add"(%arg0, %5) : (tensor<2000x512xf32>, tensor<2000x512xf32>) -> tensor<2000x512xf32>
  return %2, %6 : tensor<2000x512xf32>, tensor<2000x512xf32>
}

// A write through a transposed view (`y.T[2] = v`) is a window update of `y` itself: the update of
// the transpose, transposed back, becomes an update of the permuted window with `v` transposed.
// CHECK-LABEL: func.func @update_through_transpose
// CHECK:         %[[V:.*]] = "dsl.transpose"(%arg1) {perm = array<i64: 1, 0>}
// CHECK-NEXT:    %[[U:.*]] = "dsl.update_slice"(%arg0, %[[V]]) {limit = array<i64: 4, 3>, start = array<i64: 0, 2>, stride = array<i64: 1, 1>}
// CHECK-NEXT:    return %[[U]]
func.func @update_through_transpose(%arg0: tensor<4x5xf32>, %arg1: tensor<1x4xf32>) -> tensor<4x5xf32> {
  %0 = "dsl.transpose"(%arg0) {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  %1 = "dsl.update_slice"(%0, %arg1) {limit = array<i64: 3, 4>, start = array<i64: 2, 0>, stride = array<i64: 1, 1>} : (tensor<5x4xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
  %2 = "dsl.transpose"(%1) {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  return %2 : tensor<4x5xf32>
}

// An update of a window of a window (`y[:, 1:][::2, 0] = v`) is one update of the composed window:
// only v's elements are written, not the outer window computed first and stored.
// CHECK-LABEL: func.func @nested_update
// CHECK-NEXT:    %0 = "dsl.update_slice"(%arg0, %arg1) {limit = array<i64: 3, 2>, start = array<i64: 0, 1>, stride = array<i64: 2, 1>}
// CHECK-NEXT:    return %0
func.func @nested_update(%arg0: tensor<4x5xf32>, %arg1: tensor<2x1xf32>) -> tensor<4x5xf32> {
  %0 = "dsl.slice"(%arg0) {limit = array<i64: 4, 5>, start = array<i64: 0, 1>, stride = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x4xf32>
  %1 = "dsl.update_slice"(%0, %arg1) {limit = array<i64: 3, 1>, start = array<i64: 0, 0>, stride = array<i64: 2, 1>} : (tensor<4x4xf32>, tensor<2x1xf32>) -> tensor<4x4xf32>
  %2 = "dsl.update_slice"(%arg0, %1) {limit = array<i64: 4, 5>, start = array<i64: 0, 1>, stride = array<i64: 1, 1>} : (tensor<4x5xf32>, tensor<4x4xf32>) -> tensor<4x5xf32>
  return %2 : tensor<4x5xf32>
}

// Not when something else reads the inner update: it must exist anyway.
// CHECK-LABEL: func.func @nested_update_read_twice
// CHECK:         "dsl.update_slice"(%0, %arg1)
// CHECK:         "dsl.update_slice"(%arg0, %1)
func.func @nested_update_read_twice(%arg0: tensor<4x5xf32>, %arg1: tensor<2x1xf32>) -> (tensor<4x5xf32>, tensor<4x4xf32>) {
  %0 = "dsl.slice"(%arg0) {limit = array<i64: 4, 5>, start = array<i64: 0, 1>, stride = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<4x4xf32>
  %1 = "dsl.update_slice"(%0, %arg1) {limit = array<i64: 3, 1>, start = array<i64: 0, 0>, stride = array<i64: 2, 1>} : (tensor<4x4xf32>, tensor<2x1xf32>) -> tensor<4x4xf32>
  %2 = "dsl.update_slice"(%arg0, %1) {limit = array<i64: 4, 5>, start = array<i64: 0, 1>, stride = array<i64: 1, 1>} : (tensor<4x5xf32>, tensor<4x4xf32>) -> tensor<4x5xf32>
  return %2, %1 : tensor<4x5xf32>, tensor<4x4xf32>
}
