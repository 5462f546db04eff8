"""How parallel loops share Numba's threads (``runtime/parallel.py``, ``runtime/blas.py``): every chunk
runs exactly once whichever threads claim it, a thread held up in one chunk leaves the rest to the
others, results are bit-identical to the static schedule, and libgomp's busy-wait is bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
from numba.core import types
from numba.extending import intrinsic

from runtime import GOMP_SPINCOUNT
from runtime.intrinsics import array_at
from runtime.parallel import (
    CHUNK_SIGNATURE,
    PARALLEL_FOR_SIGNATURE,
    claim_next,
    parallel_for,
    parallel_for_static,
)
from runtime.precompile import kernel_table

ROOT = Path(__file__).resolve().parents[1]


@intrinsic
def _load(typingctx: Any, array: Any) -> Any:
    """``array[0]`` read atomically (a plain load in a loop may be read once, before it)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(array)(context, builder, value=args[0]).data
        return builder.load_atomic(data, "acquire", 8)

    return types.int64(array), codegen


N_CHUNKS = 16
PATIENCE = 1 << 31  # atomic reads chunk 0 waits for the others (seconds, far more than a wake-up)


@numba.njit(cache=False, nogil=True)
def _count(ch: int, frame: Any) -> None:
    """Counts its own run, and records which thread ran it."""
    n = frame[2]
    runs = array_at(frame[0], (n,), np.int64)
    thread = array_at(frame[1], (n,), np.int64)
    runs[ch] += 1
    thread[ch] = numba.get_thread_id()


@numba.njit(cache=False, nogil=True)
def _first_waits(ch: int, frame: Any) -> None:
    """Chunk 0 waits until every other chunk has run (``done[0]`` counts them), or gives up after
    ``PATIENCE`` reads (``done[1]`` = 1): only another thread can run them meanwhile."""
    done = array_at(frame[0], (2,), np.int64)
    if ch == 0:
        reads = 0
        while _load(done) < N_CHUNKS - 1 and reads < PATIENCE:
            reads += 1
        done[1] = _load(done) < N_CHUNKS - 1
    else:
        claim_next(done, 0)  # (an atomic increment)


class _Chunks:  # what kernel_table reads
    count = _count
    first_waits = _first_waits
    parallel_for = parallel_for
    parallel_for_static = parallel_for_static


def _addresses() -> dict[str, int]:
    slots = [
        ("count", CHUNK_SIGNATURE),
        ("first_waits", CHUNK_SIGNATURE),
        ("parallel_for", PARALLEL_FOR_SIGNATURE),
        ("parallel_for_static", PARALLEL_FOR_SIGNATURE),
    ]
    table = kernel_table(_Chunks, slots)  # type: ignore[arg-type]
    return {name: int(a) for (name, _), a in zip(slots, table.addresses)}


@pytest.mark.parametrize("threads", sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}))
@pytest.mark.parametrize("n", [1, 2, 3, 16, 1000])
def test_every_chunk_runs_once_on_a_thread_of_the_pool(n: int, threads: int) -> None:
    chunk = _addresses()["count"]
    runs, thread = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    frame = np.array([runs.ctypes.data, thread.ctypes.data, n], np.uint64)
    saved = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        for _ in range(20):  # the threads race for the chunks differently each time
            parallel_for(chunk, n, frame)
    finally:
        numba.set_num_threads(saved)
    np.testing.assert_array_equal(runs, 20)
    assert 0 <= thread.min() and thread.max() < threads


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two of Numba's threads")
def test_a_thread_held_up_in_one_chunk_leaves_the_others_to_the_pool() -> None:
    """Chunk 0 does not finish before all the others have: under a static schedule its thread owns
    chunks 1..7 too, and it waits out its patience; claimed, the other thread runs them all."""
    addresses = _addresses()
    done = np.zeros(2, np.int64)
    frame = np.array([done.ctypes.data], np.uint64)
    saved = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        parallel_for(addresses["first_waits"], N_CHUNKS, frame)
    finally:
        numba.set_num_threads(saved)
    assert done.tolist() == [N_CHUNKS - 1, 0]


_PROGRAMS = """
import json, sys
import numpy as np
import dsl, dsl.numpy as dnp

def d2(params, x):  # row-block region, matmuls split over the threads
    def u(x):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            h = dnp.tanh(h) if i < len(params) - 1 else h
        return h.sum()
    return dsl.grad(lambda x: dsl.grad(u)(x).sum())(x)

def stats(x, y):  # chunked reductions (partials combined in order), a row band, a batched matmul
    z = x - x.max(axis=1, keepdims=True)
    soft = dnp.exp(z) / dnp.exp(z).sum(axis=1, keepdims=True)
    return (soft * y).sum(), x.sum(axis=0), dnp.tanh(x).sum(), (x.reshape(8, 512, 64) @ y[:64]).sum(axis=1)

rng = np.random.default_rng(7)
sizes = [(1, 128), (128, 128), (128, 128), (128, 1)]
params = [(rng.standard_normal(s) / np.sqrt(s[0]), rng.standard_normal(s[1])) for s in sizes]
params = [(w.astype(np.float32), b.astype(np.float32)) for w, b in params]
x1 = rng.uniform(-2, 2, (4096, 1)).astype(np.float32)
x, y = rng.standard_normal((4096, 64)).astype(np.float32), rng.standard_normal((4096, 64)).astype(np.float32)
outs = [dsl.compile(d2)(params, x1), *dsl.compile(stats)(x, y)]
np.savez(sys.argv[1], *[np.asarray(o) for o in outs])
"""


def test_results_are_bit_identical_to_the_static_schedule(tmp_path: Path) -> None:
    """The same programs in two processes, chunks claimed and chunks dealt statically
    (``DSL_STATIC_CHUNKS=1``): every result equal to the bit."""
    script = tmp_path / "programs.py"
    script.write_text(_PROGRAMS)
    results = []
    for static in ("0", "1"):
        out = tmp_path / f"static{static}.npz"
        env = {**os.environ, "DSL_STATIC_CHUNKS": static, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, str(script), str(out)], check=True, env=env, cwd=ROOT)
        results.append(np.load(out))
    claimed, static = results
    assert claimed.files == static.files and len(claimed.files) == 5
    for name in claimed.files:
        np.testing.assert_array_equal(claimed[name], static[name])


def _environment_after_import(**env: str) -> dict[str, str | None]:
    """``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` after ``import runtime`` in a new process."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    names = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    code = f"import os, json, runtime; print(json.dumps([os.environ.get(k) for k in {names}]))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    policy, spins = json.loads(out.stdout)
    return {"OMP_WAIT_POLICY": policy, "GOMP_SPINCOUNT": spins}


def test_openmp_threads_spin_briefly_then_sleep_unless_told_otherwise() -> None:
    """libgomp's default busy-wait (300,000 spins) is replaced by a short one before Numba loads it;
    a setting of the user's is kept, and native BLAS threads get passive waiting."""
    assert _environment_after_import() == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": GOMP_SPINCOUNT}
    assert _environment_after_import(GOMP_SPINCOUNT="300000")["GOMP_SPINCOUNT"] == "300000"
    assert _environment_after_import(OMP_WAIT_POLICY="ACTIVE") == {
        "OMP_WAIT_POLICY": "ACTIVE",
        "GOMP_SPINCOUNT": None,
    }
    native = _environment_after_import(DSL_BLAS_THREADS="native")
    assert native == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": None}


def test_a_new_process_loads_the_parallel_runtime_from_numba_cache(tmp_path: Path) -> None:
    """``parallel_for`` and the matmul rows read the thread count through the threading layer's
    symbol, which Numba registers only when it launches the layer: a process whose first parallel
    function came from Numba's on-disk cache (never typed) failed with "LLVM ERROR: Symbol not found:
    get_num_threads" until importing the runtime launched it. The first run warms the cache, the
    second loads from it."""
    program = (
        "import numpy as np, dsl, dsl.numpy as dnp\n"
        "def loss(w, x):\n"
        "    return dnp.tanh(x @ w).sum()\n"
        "def step(w, x):\n"
        "    value, g = dsl.value_and_grad(loss)(w, x)\n"
        "    w -= 0.1 * g\n"
        "    return value\n"
        "w, x = np.full((6, 5), 0.1, np.float32), np.ones((4, 6), np.float32)\n"
        "print(float(dsl.compile(step)(w, x)))\n"
    )
    env = dict(os.environ, DSL_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert abs(float(done.stdout) - 20 * np.tanh(0.6)) < 1e-5
