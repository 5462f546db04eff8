"""The launch sizes of CUDA kernels, on a GPU and under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
where every thread is a Python thread, so everything is smaller). Generated modules define them
as constants (``compiler/codegen/cuda/prelude.py``); the kernels pass reads the GPU's to size the
scratch it asks the memory plan for (the simulator's launches need no more of it)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchSizes:
    """The sizes a generated module defines (``MEANING``: what each is)."""

    TPB: int
    MAXB: int
    BANDB: int
    SMS: int
    COLS: int
    LANES: int
    TILE: int
    MAXG: int


MEANING = {  # printed beside each size in generated modules
    "TPB": "threads per block of loops and reductions (a power of two)",
    "MAXB": "blocks of a grid-stride launch",
    "BANDB": "blocks of a band kernel with global scratch per block (partials, rows)",
    "SMS": "streaming multiprocessors (a band whose blocks keep a few scalars takes a wave of blocks)",
    "COLS": "column reductions: outputs per block (one warp's consecutive columns)...",
    "LANES": "... and threads per output in a block (rows lane, lane + LANES, ...)",
    "TILE": "matmul threads per block edge; each computes MICRO x MICRO outputs",
    "MAXG": "blocks along y and z",
}
# SMS: an H100's and an H200's (compiler/kernel/cuda/bands._block_cap); DSL_CUDA_SMS (read at import)
# sets it for an A/B (43: about the 256 blocks of BANDB that layer norm's band took before 2026-11-27)
_SMS = int(os.environ.get("DSL_CUDA_SMS", "").strip() or 132)
GPU = LaunchSizes(TPB=256, MAXB=8192, BANDB=256, SMS=_SMS, COLS=32, LANES=8, TILE=16, MAXG=65535)
SIM = LaunchSizes(TPB=8, MAXB=2, BANDB=2, SMS=1, COLS=4, LANES=2, TILE=4, MAXG=2)
