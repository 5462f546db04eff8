// REQUIRES: matplotlib
// `dslc plan --plot` prints the table and writes a 1000x500 PNG of the arena over time.
// RUN: %dslc plan %S/Inputs/model.py:mlp --arg 'f32[4,8]' --arg 'f32[8,8]' --arg 'f32[8,3]' --plot %t.png | FileCheck %s
// RUN: %python -c "import struct; h = open('%t.png', 'rb').read(24); print(h[1:4], h[12:16], struct.unpack('>II', h[16:24]))" | FileCheck %s --check-prefix=PNG

// CHECK:      peak 192 bytes, naive 304 bytes
// PNG:        b'PNG' b'IHDR' (1000, 500)
