"""The CUDA suite: collected only by ``tests/test_cuda_sim.py``, which runs it in a process of its own,
in the simulator (``NUMBA_ENABLE_CUDASIM=1``; it cannot share a process with ``compile_ptx``) and, where
a GPU is present, again on the GPU."""

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this folder's tests unless the simulator is on or a real GPU is here (the hook sees the
    whole session's items)."""
    from runtime.devices import cuda_available

    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and not cuda_available():
        skip = pytest.mark.skip(reason="needs the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) or a GPU")
        for item in items:
            if os.path.dirname(str(item.path)) == HERE:
                item.add_marker(skip)
