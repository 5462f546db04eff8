// `dslc run` compiles IR text and runs it: values for small results, seeded random inputs.
// RUN: %dslc run %s --func ramp | FileCheck %s --check-prefix=RAMP
// RUN: %dslc run %s --func scale --seed 1 --save-dir %t | FileCheck %s --check-prefix=RANDOM
// RUN: %python -c "import numpy as np; print(np.load('%t/result0.npy').shape)" | FileCheck %s --check-prefix=SAVED
// RUN: not %dslc run %s --func scale --arg 'f32[3]' 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: not %dslc run %s 2>&1 | FileCheck %s --check-prefix=WHICH

// RAMP:       result 0: tensor<2x3xf64>  min 0  max 5  mean 2.5
// RAMP-NEXT:  {{\[\[}}0., 1., 2.],
// RAMP-NEXT:  [3., 4., 5.]]
// RAMP-NEXT:  result 1: tensor<f64>  min 15  max 15  mean 15
func.func @ramp() -> (tensor<2x3xf64>, tensor<f64>) {
  %0 = "dsl.iota"() {dimension = 0 : i64, dtype = f64, shape = array<i64: 6>} : () -> tensor<6xf64>
  %1 = "dsl.reshape"(%0) {shape = array<i64: 2, 3>} : (tensor<6xf64>) -> tensor<2x3xf64>
  %2 = "dsl.reduce_sum"(%1) {axes = array<i64: 0, 1>} : (tensor<2x3xf64>) -> tensor<f64>
  return %1, %2 : tensor<2x3xf64>, tensor<f64>
}

// RANDOM:     result 0: tensor<2x4xf32>  min {{-?[0-9.e+-]+}}  max {{-?[0-9.e+-]+}}  mean {{-?[0-9.e+-]+}}
// SAVED:      (2, 4)
// MISMATCH:   dslc: error: argument 0 of @scale is tensor<2x4xf32> (float32 array of shape (2, 4)); --arg f32[3] is tensor<3xf32>
// WHICH:      dslc: error: {{.*}}cli_run.mlir holds 2 functions; choose one with --func NAME
func.func @scale(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "dsl.constant"() {value = dense<2.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %1 = "dsl.mul"(%arg0, %0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
