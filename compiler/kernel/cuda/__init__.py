"""The CUDA target's kernel program: every fusion group (or band) of a planned program as a kernel
of the kernel IR with its launch shape and reduction strategy (``build.py``, the ``kernels`` pass),
and the kernels' global scratch placed in the memory plan (the ``scratch`` pass). The CUDA printer
(``compiler/codegen/cuda/``) prints it."""
