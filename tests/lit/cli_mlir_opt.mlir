// REQUIRES: mlir-opt
// The export is upstream MLIR: plain mlir-opt verifies it and one-shot-bufferizes it.
// RUN: %dslc compile %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --emit mlir -o %t.mlir
// RUN: %mlir-opt %t.mlir | FileCheck %s --check-prefix=VERIFY
// RUN: %mlir-opt %t.mlir --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// VERIFY:     linalg.matmul
// CHECK:      func.func @mlp(%arg0: memref<4x8xf32, strided<[?, ?], offset: ?>>
// CHECK:        memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK:        linalg.matmul ins(%arg0, %arg1 : memref<4x8xf32
// CHECK-NOT:    tensor.empty
