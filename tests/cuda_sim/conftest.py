"""The CUDA simulator suite: collected only by ``tests/test_cuda_sim.py``, which runs it in its own
process with ``NUMBA_ENABLE_CUDASIM=1`` (the simulator and ``compile_ptx`` cannot share a process)."""

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this folder's tests outside the simulator (the hook sees the whole session's items)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        skip = pytest.mark.skip(reason="runs only in the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        for item in items:
            if os.path.dirname(str(item.path)) == HERE:
                item.add_marker(skip)
