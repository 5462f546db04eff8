"""benchmarks/bench_gpu.py without a GPU: its simulator smoke run (dslc in the CUDA simulator, checked
against JAX and PyTorch on the CPU), a peer's failure as a note (torch.compile of a double backward,
in a process of its own), and the report from the rows a GPU run produces."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks", "bench_gpu.py")
PROGRAMS = (
    "elementwise chain",
    "softmax + cross-entropy",
    "layer norm",
    "MLP training step",
    "second derivative",
    "transformer block",
)

pytest.importorskip("numba.cuda", reason="the CUDA simulator comes with numba's cuda target")
pytest.importorskip("jax")
pytest.importorskip("torch")


def run_bench(tmp_path, *args: str) -> str:
    env = dict(os.environ, DSL_CACHE_DIR=str(tmp_path / "cache"), DSL_TARGET="cuda")
    out = tmp_path / "gpu.md"
    cmd = [sys.executable, BENCH, "--sim", "--out", str(out), *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return out.read_text()


def test_simulator_run_checks_every_program_against_jax_and_torch(tmp_path) -> None:
    text = run_bench(tmp_path)
    for name in PROGRAMS:
        row = re.search(rf"^\| {re.escape(name)} \| sim \|.*$", text, re.M)
        assert row is not None, text
        assert "JAX " in row.group(0) and "torch eager " in row.group(0), row.group(0)  # max rel errors
    assert "| transformer block | sim |" in text.split("## Intermediates")[1]


def test_timing_code_runs_in_the_simulator(tmp_path) -> None:
    """With rounds, the simulator goes through the timing and profiling code (figures meaningless)."""
    text = run_bench(tmp_path, "--programs", "chain", "--rounds", "1", "--peers", "torch")
    assert re.search(
        r"^\| elementwise chain \| sim \| [0-9.]+ \| - \| [0-9.]+ \| - \| [0-9.]+ \|", text, re.M
    ), text
    assert "dslc gpu time: the profiler recorded none of its kernels" in text, text


def test_a_failing_peer_is_a_note_and_the_rest_runs(tmp_path) -> None:
    text = run_bench(tmp_path, "--isolate", "--programs", "second", "--peers", "torch.compile,torch")
    assert re.search(r"^\| second derivative \| sim \| - \| - \| - \| fails \|", text, re.M), (
        text
    )  # JAX not asked for
    assert "torch.compile fails: " in text and "double backward" in text, text


def test_report_of_a_gpu_run() -> None:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import gpu_report

    timed = {"ms": 2.0, "gpu_ms": 1.5, "launches": 4.0, "calls": 30, "kernels": [["k0_rows", 1.25, 1.0]]}
    row = {
        "size": "gpu",
        "program": "layer norm",
        "description": "forward+backward",
        "device": "H100",
        "copy_GBps": 1000.0,
        "copy_MB": 400.0,
        "min_bytes": 10**9,
        "planned_peak": 4096,
        "xla_temp": 2048,
        "xla_backend": "gpu",
        "frameworks": {
            "dslc": timed,
            "jax": {"ms": 1.0, "gpu_ms": 0.9, "launches": 3.0, "max_rel_err": 1e-6},
            "torch": {
                "ms": 4.0,
                "max_rel_err": 2e-6,
                "gpu_note": "the profiler recorded none of its kernels",
            },
            "torch.compile": {"fails": "RuntimeError: no"},
        },
    }
    skipped = {"size": "cpu", "program": "MLP training step", "frameworks": {}, "skipped": "not run: budget"}
    meta = {
        "date": "today",
        "command": "python benchmarks/bench_gpu.py",
        "rounds": 2,
        "versions": {"jax": "1"},
    }
    text = gpu_report.markdown([row, skipped], meta)
    assert (
        "| layer norm | gpu | 2.000 | 1.000 | 4.000 | fails | 2.00 | JAX 1.0e-06, torch eager 2.0e-06 |"
        in text
    )
    assert "| layer norm | gpu | 1.500 (4) | 0.500 | 0.900 (3) | - | fails |" in text  # host = wall - GPU
    assert "| layer norm | 1,000,000,000 | 1.000 | 0.50 | 1.00 | 0.25 | - |" in text  # 1 GB at 1000 GB/s
    assert "| layer norm | gpu | 4,096 | 2,048 | gpu | 2.00 |" in text
    assert "torch.compile fails: RuntimeError: no" in text and "MLP training step (cpu): not run" in text
    assert "device: H100; copy bandwidth 1000 GB/s (device-to-device, 400 MB)" in text
    assert "- wall time at most the best peer's: 0 of 1 rows; not: layer norm (gpu)" in text
    assert "- memory-bound programs at the gpu size: at least 0.70 of the roofline: 0 of 1 rows;" in text
    assert "- host cost at most 20 us + 2 us per launch: 0 of 1 rows;" in text  # 0.5 ms > 28 us
    assert "- layer norm (gpu):\n  - dslc: `k0_rows` 1.250 (1)" in text  # the longest kernels


def test_first_line_of_a_backend_error() -> None:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench_gpu

    err = RuntimeError("backend='inductor' raised:\nRuntimeError: out of memory\n\nmore")
    assert bench_gpu.first_line(err) == "RuntimeError: backend='inductor' raised: RuntimeError: out of memory"
    assert bench_gpu.first_line(ValueError("two\nlines")) == "ValueError: two"
