"""The CUDA backend's semantic tests, run in a process of their own: in the CUDA simulator always, and
on the GPU where one is present.

``tests/cuda_sim/sim_*.py`` (every primitive forward and backward with in-place on and off, and whole
programs) need ``NUMBA_ENABLE_CUDASIM=1``, which cannot share a process with ``compile_ptx``; this
test runs them with pytest in a subprocess and fails with their report if any fails.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)

pytest.importorskip("numba.cuda", reason="the CUDA simulator comes with numba's cuda target")


def run_suite(tmp_path, simulator: bool) -> None:
    env = dict(os.environ)
    env.update(DSL_TARGET="cuda", DSL_CACHE_DIR=str(tmp_path / "cache"))
    env["NUMBA_ENABLE_CUDASIM"] = "1" if simulator else "0"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        os.path.join(HERE, "cuda_sim"),
        "-o",
        "python_files=sim_*.py",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::RuntimeWarning",
    ]
    done = subprocess.run(cmd, cwd=HERE, env=env, capture_output=True, text=True, timeout=1200)
    report = done.stdout[-20000:] + done.stderr[-5000:]
    where = "in the simulator" if simulator else "on the GPU"
    assert done.returncode == 0, f"CUDA suite failed {where}:\n{report}"
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, report


def test_cuda_suite_in_the_simulator(tmp_path) -> None:
    run_suite(tmp_path, simulator=True)


def test_cuda_suite_on_the_gpu(tmp_path) -> None:
    from runtime.devices import cuda_available

    if not cuda_available():
        pytest.skip("no usable NVIDIA GPU here (numba.cuda.is_available() is False)")
    run_suite(tmp_path, simulator=False)
