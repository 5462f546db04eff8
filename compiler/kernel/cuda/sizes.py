"""The launch sizes of CUDA kernels, on a GPU and under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
where every thread is a Python thread, so everything is smaller). Generated modules define them
as constants (``compiler/codegen/cuda/prelude.py``); the kernels pass reads the GPU's to size the
scratch it asks the memory plan for (the simulator's launches need no more of it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchSizes:
    """The sizes a generated module defines (``MEANING``: what each is)."""

    TPB: int
    MAXB: int
    BANDB: int
    FILLB: int
    COLS: int
    LANES: int
    TILE: int
    MAXG: int


MEANING = {  # printed beside each size in generated modules
    "TPB": "threads per block of loops and reductions (a power of two)",
    "MAXB": "blocks of a grid-stride launch",
    "BANDB": "blocks of a band kernel with global scratch per block (partials, rows)",
    "FILLB": "blocks of a band kernel whose scratch per block is a few scalars (enough to fill the GPU)",
    "COLS": "column reductions: outputs per block (one warp's consecutive columns)...",
    "LANES": "... and threads per output in a block (rows lane, lane + LANES, ...)",
    "TILE": "matmul threads per block edge; each computes MICRO x MICRO outputs",
    "MAXG": "blocks along y and z",
}
# FILLB: an H100's 132 SMs take 8 blocks of 256 threads each (a band's shared rows may allow fewer)
GPU = LaunchSizes(TPB=256, MAXB=8192, BANDB=256, FILLB=1024, COLS=32, LANES=8, TILE=16, MAXG=65535)
SIM = LaunchSizes(TPB=8, MAXB=2, BANDB=2, FILLB=2, COLS=4, LANES=2, TILE=4, MAXG=2)
