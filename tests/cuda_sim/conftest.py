"""The CUDA simulator suite: collected only by ``tests/test_cuda_sim.py``, which runs it in its own
process with ``NUMBA_ENABLE_CUDASIM=1`` (the simulator and ``compile_ptx`` cannot share a process)."""

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        skip = pytest.mark.skip(reason="runs only in the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        for item in items:
            item.add_marker(skip)
