"""Executing compiled programs: arenas, the on-disk module cache, call-time checks.

``runtime`` never imports ``compiler`` or ``dsl``.
"""

import os

# Numba's OpenMP workers spin briefly after each parallel kernel (libgomp's default), so the next
# kernel of the same call starts in ~4 us instead of ~45 us for a futex wake-up (measured on the
# 2-core CI machine; the MLP training step 15.1 -> 12.9 ms, softmax + cross-entropy 4.8 -> 3.8 ms).
# Matmul kernels run BLAS inside those same workers (runtime/blas.py), so no second thread pool
# competes with the spinning. With ``DSL_BLAS_THREADS=native`` BLAS keeps its own threads, and then
# spinning workers starve them (a 3-layer MLP forward 44 ms -> 25 ms with passive waiting): that
# mode waits passively. A value the user set is kept.
if os.environ.get("DSL_BLAS_THREADS", "").strip().lower() == "native":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
