"""The kernel level: what fused groups become once scheduled (``ir.py``: the kernel IR), and the
passes over it, per target. ``cpu/`` builds the CPU's kernels from a planned program (``build.py``:
the ``kernels`` pass; ``regions.py``: the ``regions`` pass), which ``compiler/codegen/cpu/`` prints;
``cuda/`` builds the CUDA target's (``build.py``: the ``kernels`` and ``scratch`` passes), which
``compiler/codegen/cuda/`` prints."""
