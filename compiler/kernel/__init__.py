"""The kernel level: what fused groups become once scheduled (``ir.py``: the kernel IR), and the
passes over it. ``cpu/`` builds the CPU target's kernels from a planned program (``build.py``:
the ``kernels`` pass; ``regions.py``: the ``regions`` pass), which ``compiler/codegen/cpu/``
prints. The CUDA printer (``compiler/codegen/cuda/``) still builds its kernels from the fusion plan
itself."""
