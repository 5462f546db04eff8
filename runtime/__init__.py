"""Executing compiled programs: arenas, the on-disk module cache, call-time checks.

``runtime`` never imports ``compiler`` or ``dsl``.
"""

import os

# Numba's OpenMP workers spin after each parallel kernel by default; on a machine with few cores
# they then steal the CPU from the BLAS threads of the matmul that follows (measured: a 3-layer MLP
# forward 44 ms -> 25 ms on 2 cores with passive waiting). A value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
