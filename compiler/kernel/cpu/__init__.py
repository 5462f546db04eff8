"""The CPU target's kernels as kernel IR: loop and reduction nests (``loops.py``), bands
(``bands.py``), matmuls
(``matmul.py``), parallel loops on the runtime's threads (``parallel.py``), row-block regions
(``regions.py``), the whole program's kernels (``build.py``) and the kernel record (``records.py``)."""
