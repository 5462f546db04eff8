// `dslc compile` of a Python function in Inputs/, each --emit kind.
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' | FileCheck %s --check-prefix=OPT
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --emit plan | FileCheck %s --check-prefix=PLAN
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --emit mlir | FileCheck %s --check-prefix=MLIR
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --emit dot | FileCheck %s --check-prefix=DOT
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --print-ir-after-all -o %t.mlir | FileCheck %s --check-prefix=ALL
// RUN: FileCheck %s --check-prefix=OPT < %t.mlir
// RUN: %dslc compile %S/Inputs/model.py:loss --arg 'f32[4,8]' --arg 'f32[8,3]' --grad 1 | FileCheck %s --check-prefix=GRAD

// OPT-LABEL:  func.func @mlp(%arg0: tensor<4x8xf32> {dsl.name = "x"}
// OPT:          "dsl.matmul"(%arg0, %arg1) {{.*}} loc("{{.*}}model.py":8:18)
// OPT-NEXT:     "dsl.tanh"
// OPT-NEXT:     "dsl.matmul"
// OPT-NEXT:     "dsl.reduce_sum"(%2) {axes = array<i64: 1>}

// PLAN:       buffer {{ +}}bytes {{ +}}offset  live {{ +}}reused_from type
// PLAN:       %1 {{ +}}128 {{ +}}0  [1, 2] {{ +}}%0 {{ +}}tensor<4x8xf32>
// PLAN:       peak 192 bytes, naive 304 bytes
// PLAN:       model.py:8: %1 -> in place (%0)

// MLIR:       func.func @mlp(%arg0: tensor<4x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8x3xf32>) -> tensor<4xf32>
// MLIR:         linalg.fill
// MLIR:         linalg.matmul ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8x8xf32>)
// MLIR:         linalg.generic
// MLIR:           math.tanh
// MLIR:         iterator_types = ["parallel", "reduction"]
// MLIR:           arith.addf
// MLIR-NOT:     "dsl.

// DOT:        digraph "mlp" {
// DOT:          arg0 [shape=invhouse{{.*}}label="x\ntensor<4x8xf32>"];
// DOT:          op1 [shape=box, label="tanh\ntensor<4x8xf32>\nmodel.py:8"];
// DOT:          arg0 -> op0 [label="%arg0"];
// DOT:          op0 -> op1 [label="%0"];
// DOT:          op3 -> result0 [label="%3"];
// DOT-NEXT:   }

// ALL:        // -----// IR Dump After trace (traced) //----- //
// ALL:        // -----// IR Dump After functionalize (functional) //----- //
// ALL:        // -----// IR Dump After autodiff (grad) //----- //
// ALL:        // -----// IR Dump After simplify (simplified) //----- //
// ALL:        // -----// IR Dump After remat (rematerialized) //----- //
// ALL:        // -----// IR Dump After schedule (optimized) //----- //
// ALL:        // -----// IR Dump After fuse (fused) //----- //
// ALL:          "dsl.tanh"(%0) {dsl.kernel = 1 : i64}
// ALL:        // -----// IR Dump After rows (row_fused) //----- //
// ALL:        // -----// IR Dump After plan (planned) //----- //
// ALL:          func.func @mlp(%arg0: tensor<4x8xf32>
// ALL-SAME:       dsl.arena_bytes = 192
// ALL:        // -----// IR Dump After bufferize (bufferized) //----- //
// ALL:          func.func @mlp(%arg0: memref<4x8xf32>
// ALL-SAME:       dsl.arena_bytes = 192

// GRAD-LABEL: func.func @loss
// GRAD-SAME:    -> tensor<8x3xf32>
// GRAD:         "dsl.transpose"(%arg0) {perm = array<i64: 1, 0>}
