"""Kernels of a new module compiled in helper processes (``runtime/precompile.py``): the helpers'
kernels load from Numba's cache in the calling process, none is compiled twice, results are the
same, a failed helper costs only time, and a module compiled before starts no helper."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from runtime import precompile

# A forward+backward program with several parallel kernels (tanh, matmuls, reductions), run once in
# a new process; reports, per kernel of the generated module, Numba's cache hits and misses in it.
CHILD = textwrap.dedent(
    """
    import json, os, re, sys
    import numpy as np
    import dsl, dsl.numpy as dnp
    from runtime import precompile

    if os.environ["HELPERS"] == "spawn":
        precompile.fork_safe = lambda: False  # as in a process with threads: a new Python per helper
    started = []
    start = precompile._start_helper
    precompile._start_helper = lambda *a: started.append(start(*a)) or started[-1]

    def loss(w1, w2, x):
        h = dnp.tanh(x @ w1)
        g = dnp.exp(h @ w2 * 0.1)
        return (g * x[:, :8]).sum() + (h * h).mean() + dnp.log(1 + g * g).max(axis=0).sum()

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 96)).astype(np.float32) / 8
    w2 = rng.standard_normal((96, 8)).astype(np.float32) / 10
    x = rng.standard_normal((512, 64)).astype(np.float32)
    f = dsl.value_and_grad(loss, argnums=(0, 1))
    value, (g1, g2) = f(w1, w2, x)
    entry = next(iter(f._cache.values()))
    module = sys.modules[entry.run.driver.py_func.__module__]
    names = re.findall(r"^def (k\\w+)\\(", entry.program.source, re.M)
    stats = {n: [sum(getattr(module, n).stats.cache_hits.values()),
                 sum(getattr(module, n).stats.cache_misses.values())] for n in names}
    out = {"stats": stats, "helpers": [type(h).__name__ for h in started], "value": float(value)}
    print(json.dumps({**out, "g1": g1.tolist(), "g2": g2.tolist()}))
    """
)


def run_child(cache: Path, jobs: int, helpers: str = "fork") -> dict[str, Any]:
    env = dict(os.environ, DSL_CACHE_DIR=str(cache), DSL_COMPILE_JOBS=str(jobs), HELPERS=helpers)
    env.pop("NUMBA_CACHE_DIR", None)  # Numba's cache beside the module, in this test's folder
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("helpers", ["fork", "spawn"])
def test_helpers_compile_kernels_the_caller_then_loads_from_the_cache(tmp_path: Path, helpers: str) -> None:
    """Helpers forked from the calling process (it has no other thread) or, where forking is not
    safe, new Python processes: either way every kernel is compiled once, in one of the processes."""
    shared = run_child(tmp_path / "two", 2, helpers)
    assert shared["helpers"] == ["_Forked" if helpers == "fork" else "Popen"]
    stats = shared["stats"]
    assert len(stats) >= 4, stats
    # Every kernel was either compiled here (a miss) or loaded from what a helper compiled (a hit):
    # none twice, and the helper did its share.
    assert all(hits + misses == 1 for hits, misses in stats.values()), stats
    assert sum(hits for hits, _ in stats.values()) >= 1, stats
    assert sum(misses for _, misses in stats.values()) >= 1, stats
    alone = run_child(tmp_path / "one", 1)
    assert alone["helpers"] == []
    assert all(stat == [0, 1] for stat in alone["stats"].values()), alone["stats"]
    assert shared["value"] == alone["value"]
    np.testing.assert_array_equal(shared["g1"], alone["g1"])
    np.testing.assert_array_equal(shared["g2"], alone["g2"])


def test_functions_go_heaviest_first_each_to_the_first_process_that_claims_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert precompile.by_weight({"a": 1, "b": 9, "c": 5, "d": 5}) == ["b", "c", "d", "a"]
    assert precompile.claim(str(tmp_path), "k1")
    assert not precompile.claim(str(tmp_path), "k1")  # taken: another process compiles it
    assert precompile.claim(str(tmp_path), "k2")
    compiled: list[str] = []
    monkeypatch.setattr(precompile, "compile_kernels", lambda module, signatures: compiled.extend(signatures))
    precompile.compile_claimed(Any, {"k1": [], "k3": [], "k2": [], "k4": []}, str(tmp_path))
    assert compiled == ["k3", "k4"]


def test_compile_jobs_reads_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSL_COMPILE_JOBS", "3")
    assert precompile.compile_jobs() == 3
    monkeypatch.setenv("DSL_COMPILE_JOBS", "0")
    assert precompile.compile_jobs() == 1
    monkeypatch.setenv("DSL_COMPILE_JOBS", "many")
    assert precompile.compile_jobs() == 1
    monkeypatch.delenv("DSL_COMPILE_JOBS")
    assert 1 <= precompile.compile_jobs() <= 8


def _fresh_program(scale: float) -> Any:
    """A program whose module no process compiled before (the scale is a literal in its source)."""

    def f(x: Any, w: Any) -> Any:
        h = dnp.tanh(x @ w) * scale
        h = dnp.tanh(h @ w.T) * scale  # a matmul each, between the elementwise kernels
        return h.sum(axis=0), dnp.exp(h @ w).max(), (h * x).mean(axis=1), dnp.sin(w * scale).sum(axis=1)

    return dsl.compile(f)


def test_a_failed_helper_leaves_its_kernels_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    started = []

    def failing_helper(module: Any, signatures: Any, claims: str) -> subprocess.Popen[bytes]:
        started.append(sorted(signatures))
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    monkeypatch.setattr(precompile, "_start_helper", failing_helper)
    monkeypatch.setenv("DSL_COMPILE_JOBS", "2")
    scale = 1.0 + float(np.random.default_rng().integers(1, 10**9)) * 1e-10
    f = _fresh_program(scale)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    w = rng.standard_normal((32, 32)).astype(np.float32) / 6
    got = f(x, w)
    h = np.tanh(x @ w) * np.float32(scale)
    h = np.tanh(h @ w.T) * np.float32(scale)
    want = (
        h.sum(axis=0),
        np.exp(h @ w).max(),
        (h * x).mean(axis=1),
        np.sin(w * np.float32(scale)).sum(axis=1),
    )
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=2e-5, atol=1e-5)
    assert len(re.findall(r"^def k\w+\(", f.lower(x, w).source(), re.M)) >= 4
    assert len(started) == 1  # one helper was asked (and failed); this process compiled everything
    # Compiled now: a new executable of the same module asks no helper.
    started.clear()
    g = _fresh_program(scale)
    g(x, w)
    assert started == []


def test_forking_is_safe_only_without_other_threads_or_a_fork_hostile_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(precompile.threading, "active_count", lambda: 1)
    for name in precompile.FORK_HOSTILE:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert precompile.fork_safe() == sys.platform.startswith("linux")
    monkeypatch.setitem(sys.modules, "jax", object())
    assert not precompile.fork_safe()  # JAX's threads: it documents fork as unsafe
    monkeypatch.delitem(sys.modules, "jax")
    monkeypatch.setattr(precompile.threading, "active_count", lambda: 2)
    assert not precompile.fork_safe()  # another thread may hold Numba's compile lock
