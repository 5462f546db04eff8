// A shape error inside the traced function: one line naming the user's file and line, no traceback;
// --debug shows the traceback.
// RUN: not %dslc compile %S/Inputs/model.py:mismatched --arg 'f32[4,8]' --arg 'f32[4,8]' 2>&1 | FileCheck %s
// RUN: not %dslc --debug compile %S/Inputs/model.py:mismatched --arg 'f32[4,8]' --arg 'f32[4,8]' 2>&1 | FileCheck %s --check-prefix=DEBUG
// RUN: not %dslc compile %S/Inputs/model.py:mlp --arg 'f16[4]' 2>&1 | FileCheck %s --check-prefix=USAGE

// CHECK-NOT:  Traceback
// CHECK:      dslc: error: {{.*}}Inputs/model.py:17: matmul: shapes (4, 8) and (4, 8) are not aligned
// CHECK-NOT:  Traceback
// DEBUG:      Traceback (most recent call last):
// DEBUG:      dslc: error: {{.*}}model.py:17: matmul
// USAGE:      usage: dslc compile
// USAGE:      error: argument --arg: bad argument spec 'f16[4]'
