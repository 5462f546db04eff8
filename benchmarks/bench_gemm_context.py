"""What a row-block matmul costs inside a program, and whether running independent operations side by
side (as XLA's CPU runtime does) would pay on this machine: the second derivative's open question.

    python benchmarks/bench_gemm_context.py [--rounds 3] [--repeats 60]

The second derivative (results/suite.md) is sixteen 4096x128x128 float32 matmuls and thirteen
elementwise kernels; its matmuls run ~5-8% slower inside the program than called alone in a loop
(``profile_kernels.py "second derivative"``). Three measurements, each a median per call:

- cache: ``runtime.blas.gemm_rows`` on the program's shape (two row blocks, one per core) with the
  operand ``x`` and the result ``o`` each either hot (the same buffer every call) or cold (one of 16
  buffers, 32 MiB, in turn); and ``gemm_rows_serial`` (all rows on one core), hot; each on OpenBLAS
  and on dslc's register tiles (``runtime.blas.gemm_rows_tiles``);
- working set: both operands taken in turn from ``n`` buffers of 2 MiB (``n`` = 2 .. 16), OpenBLAS;
- shape: each matmul shape of the suite and four with bigger right operands, on OpenBLAS and on the
  tiles, hot (where the tiles stop paying: ``runtime.blas.TILE_MAX_DEPTH_BYTES``);
- schedule: the second derivative's forward phase (a primal chain h = tanh(h @ W + b) and the
  tangent chain t = (t @ W) * (1 - h * h) that reads it: eight matmuls, nine elementwise passes),
  run op by op with each op split over both cores (dslc's schedule), and as two streams, one core
  per chain, each op on one core, the tangent chain waiting for the primal activation it reads
  (the inter-operation parallelism of XLA's CPU runtime, which overlaps independent thunks).

The table goes to ``results/gemm_context.md``; the sections after it there (a reading of the figures,
written by hand) are kept.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_blas import SHAPES  # noqa: E402  # (m, k, n, x stored transposed): the suite's products
from bench_suite import machine, versions, write_report  # noqa: E402

from compiler.prims.vecmath import helper_source  # noqa: E402
from runtime.blas import (  # noqa: E402
    GEMM_ROWS_PARAMS,
    gemm_rows,
    gemm_rows_serial,
    gemm_rows_tiles,
    gemm_tiles,
    single_threaded_blas,
)
from runtime.intrinsics import fmuladd_function  # noqa: E402

M, N = 4096, 128  # the second derivative's activations: batch x width; weights N x N
SIZE = M * N
CHUNKS = 16  # as a generated parallel kernel: 16 row ranges over Numba's threads
COLD_BUFFERS = 16

# The float32 tanh of generated code, compiled here the way a generated module's prelude does.
fma = fmuladd_function()
_helpers: dict[str, Any] = {"np": np, "math": math, "numba": numba, "fma": fma}
exec(helper_source({"tanh_f32"}), _helpers)  # noqa: S102 - our own helper source
tanh_f32 = _helpers["tanh_f32"]


def gemm_params(
    parts: int, m: int = M, k: int = N, n: int = N, transposed: bool = False, right_transposed: bool = False
) -> np.ndarray:
    """``GEMM_ROWS_PARAMS`` of an ``m x k`` by ``k x n`` product in ``parts`` row blocks, no batch;
    ``transposed``: the left operand stored ``k x m``; ``right_transposed``: the right one ``n x k``
    (``g @ W.T``)."""
    lda, x_step = (m, 1) if transposed else (k, k)
    ldb = k if right_transposed else n
    values = dict(copy=0, ta=int(transposed), tb=int(right_transposed), m=m, n=n, k=k, lda=lda, ldb=ldb)
    values["ldc"] = n
    values |= dict(x_step=x_step, o_step=n, parts=parts, blocks=parts)
    values |= {f"{p}b{i}": (1, 0, 1, 0)[i] for p in "xyo" for i in range(4)}
    return np.array([values[name] for name in GEMM_ROWS_PARAMS], np.int64)


SPLIT, SERIAL = gemm_params(2), gemm_params(1)  # the second derivative's M x N x N product
SCALES = np.array([1.0, 0.0])


def per_call(fn: Callable[[int], object], repeats: int) -> float:
    """Median seconds of ``fn(k)`` for k = 0, 1, ... after a few warm-up calls."""
    for k in range(5):
        fn(k)
    times = []
    for k in range(repeats):
        t0 = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- cache conditions and working set ------------------------------------------------------------------


def cache_cases(rng: np.random.Generator) -> dict[str, Callable[[int], object]]:
    w = (rng.standard_normal((N, N)) / math.sqrt(N)).astype(np.float32).ravel()
    xs = rng.standard_normal(COLD_BUFFERS * SIZE).astype(np.float32)
    os_ = np.zeros(COLD_BUFFERS * SIZE, np.float32)
    x_hot, o_hot = rng.standard_normal(SIZE).astype(np.float32), np.zeros(SIZE, np.float32)

    def case(
        x_cold: bool, o_cold: bool, one_core: bool = False, tiles: bool = False
    ) -> Callable[[int], object]:
        gemm = gemm_rows_tiles if tiles else gemm_rows_serial if one_core else gemm_rows
        params = SERIAL if one_core else SPLIT  # gemm_rows_tiles on one row block: one thread

        def call(k: int) -> object:
            at = (k % COLD_BUFFERS) * SIZE
            x = xs[at : at + SIZE] if x_cold else x_hot
            o = os_[at : at + SIZE] if o_cold else o_hot
            return gemm(x, w, o, o, params, SCALES)

        return call

    return {
        "x hot, o hot": case(False, False),
        "x cold, o hot": case(True, False),
        "x hot, o cold": case(False, True),
        "x cold, o cold": case(True, True),
        "x hot, o hot, one core": case(False, False, one_core=True),
        "tiles: x hot, o hot": case(False, False, tiles=True),
        "tiles: x cold, o hot": case(True, False, tiles=True),
        "tiles: x hot, o cold": case(False, True, tiles=True),
        "tiles: x cold, o cold": case(True, True, tiles=True),
        "tiles: x hot, o hot, one core": case(False, False, one_core=True, tiles=True),
    }


# The suite's products (bench_blas.SHAPES), then bigger right operands, deeper products up to one past
# the tiles' depth limit (``k`` 2048), and right operands stored transposed ("W.T": the tiles copy
# them one strip at a time).
BIG_SHAPES = [
    (4096, 512, 512, False),
    (2048, 768, 768, False),
    (1024, 1024, 1024, False),
    (512, 1536, 512, False),
    (512, 1024, 2048, False),
    (2048, 2048, 2048, False),
    (256, 512, 512, "W.T"),
    (256, 1024, 1024, "W.T"),
    (4096, 128, 128, "W.T"),
]


def shape_cases(rng: np.random.Generator) -> dict[str, tuple[Callable[[int], object], int]]:
    """Each shape (m, k, n, layout: x stored transposed, or "W.T") on OpenBLAS and on the tiles, hot,
    with its FLOPs."""
    cases = {}
    for m, k, n, layout in [*SHAPES, *BIG_SHAPES]:
        x = rng.standard_normal(k * m).astype(np.float32)
        y = rng.standard_normal(k * n).astype(np.float32)
        o = np.zeros(m * n, np.float32)
        note = " (x.T)" if layout is True else " (W.T)" if layout == "W.T" else ""
        label = f"{m}x{k}x{n}{note}, right {k * n * 4 >> 10} KiB"
        params = gemm_params(2, m, k, n, layout is True, layout == "W.T")
        for tiles in (False, True):

            def call(
                _: int, x: Any = x, y: Any = y, o: Any = o, p: Any = params, tiles: bool = tiles
            ) -> object:
                return (gemm_rows_tiles if tiles else gemm_rows)(x, y, o, o, p, SCALES)

            cases[f"{label}: {'tiles' if tiles else 'OpenBLAS'}"] = (call, 2 * m * k * n)
    return cases


def working_set_cases(rng: np.random.Generator) -> dict[str, Callable[[int], object]]:
    w = (rng.standard_normal((N, N)) / math.sqrt(N)).astype(np.float32).ravel()
    buffers = [rng.standard_normal(SIZE).astype(np.float32) for _ in range(COLD_BUFFERS)]
    cases = {}
    for n in (2, 4, 8, 12, 16):

        def call(k: int, n: int = n) -> object:
            x, o = buffers[k % n], buffers[(k + 1) % n]
            return gemm_rows(x, w, o, o, SPLIT, SCALES)

        cases[f"{n} buffers ({2 * n} MiB)"] = call
    return cases


# ---- the forward phase: split op by op, or two streams ----------------------------------------------


# Each pass over rows [lo, hi) of the M x N activations, through 2-D views (flat indexing with
# ``i * N + j`` leaves these loops scalar). The split forms run 16 row ranges in a prange, the body
# inlined into the loop (a call to a separately compiled function inside a prange runs several times
# slower here); the stream forms run all rows on the calling thread.
@numba.njit(nogil=True, error_model="numpy", inline="always")
def _first_rows(x: Any, w0: Any, b0: Any, h: Any, lo: int, hi: int) -> None:
    """h = tanh(x * w0 + b0): the first layer (input width 1)."""
    rows = h[lo * N : hi * N].reshape((hi - lo, N))
    for i in range(hi - lo):
        for j in range(N):
            rows[i, j] = tanh_f32(x[lo + i] * w0[j] + b0[j])


@numba.njit(nogil=True, error_model="numpy", inline="always")
def _tanh_rows(z: Any, b: Any, lo: int, hi: int) -> None:
    """z = tanh(z + b) in place."""
    rows = z[lo * N : hi * N].reshape((hi - lo, N))
    for i in range(hi - lo):
        for j in range(N):
            rows[i, j] = tanh_f32(rows[i, j] + b[j])


@numba.njit(nogil=True, error_model="numpy", inline="always")
def _tangent0_rows(w0: Any, h: Any, t: Any, lo: int, hi: int) -> None:
    """t = w0 * (1 - h * h): the tangent after the first layer."""
    hr, tr = h[lo * N : hi * N].reshape((hi - lo, N)), t[lo * N : hi * N].reshape((hi - lo, N))
    for i in range(hi - lo):
        for j in range(N):
            v = hr[i, j]
            tr[i, j] = w0[j] * (np.float32(1.0) - v * v)


@numba.njit(nogil=True, error_model="numpy", inline="always")
def _tangent_rows(u: Any, h: Any, t: Any, lo: int, hi: int) -> None:
    """t = u * (1 - h * h)."""
    ur, hr, tr = u[lo * N : hi * N], h[lo * N : hi * N], t[lo * N : hi * N]
    for i in range((hi - lo) * N):
        v = hr[i]
        tr[i] = ur[i] * (np.float32(1.0) - v * v)


def _forms(rows: Any, arity: int) -> tuple[Any, Any]:
    """``rows`` (taking ``arity`` arrays, then the row range) split over Numba's threads (16 row
    ranges), and on the calling thread (all rows)."""
    names = ", ".join(f"a{k}" for k in range(arity))
    source = f"""
def split({names}):
    for c in numba.prange(CHUNKS):
        rows({names}, np.int64(c) * M // CHUNKS, (np.int64(c) + 1) * M // CHUNKS)


def serial({names}):
    rows({names}, 0, M)
"""
    scope: dict[str, Any] = {"numba": numba, "np": np, "CHUNKS": CHUNKS, "M": M, "rows": rows}
    exec(source, scope)  # noqa: S102 - a fixed-arity wrapper (Numba calls no closure with *args)
    jit = dict(nogil=True, error_model="numpy")
    return numba.njit(parallel=True, **jit)(scope["split"]), numba.njit(**jit)(scope["serial"])


@numba.njit(parallel=True, nogil=True, error_model="numpy")
def fused_tanh(h: Any, w: Any, out: Any, b: Any) -> None:
    """out = tanh(h @ w + b), each of 16 row ranges' product (register tiles, on its thread) followed
    at once by its elementwise pass, while the rows are still in that core's cache."""
    for c in numba.prange(CHUNKS):
        lo, hi = np.int64(c) * M // CHUNKS, (np.int64(c) + 1) * M // CHUNKS
        one, zero = np.float32(1.0), np.float32(0.0)
        gemm_tiles(False, False, hi - lo, N, N, one, h, lo * N, N, w, 0, N, zero, out, lo * N, N)
        _tanh_rows(out, b, lo, hi)


@numba.njit(parallel=True, nogil=True, error_model="numpy")
def fused_tangent(t: Any, w: Any, u: Any, h: Any) -> None:
    """u = t @ w, then t = u * (1 - h * h), row range by row range as ``fused_tanh`` (a range's
    product reads only its own rows of ``t``, so its pass may overwrite them)."""
    for c in numba.prange(CHUNKS):
        lo, hi = np.int64(c) * M // CHUNKS, (np.int64(c) + 1) * M // CHUNKS
        one, zero = np.float32(1.0), np.float32(0.0)
        gemm_tiles(False, False, hi - lo, N, N, one, t, lo * N, N, w, 0, N, zero, u, lo * N, N)
        _tangent_rows(u, h, t, lo, hi)


first_split, first_serial = _forms(_first_rows, 4)
tanh_split, tanh_serial = _forms(_tanh_rows, 2)
tangent0_split, tangent0_serial = _forms(_tangent0_rows, 3)
tangent_split, tangent_serial = _forms(_tangent_rows, 3)


class ForwardPhase:
    """The forward phase's buffers (the activations and tangent products are kept, as the second
    derivative's backward phase reads them) and its two schedules."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.x = rng.uniform(-2.0, 2.0, M).astype(np.float32)
        self.w0 = rng.standard_normal(N).astype(np.float32)
        self.b = [rng.standard_normal(N).astype(np.float32) * 0.1 for _ in range(5)]
        self.w = [(rng.standard_normal((N, N)) / math.sqrt(N)).astype(np.float32).ravel() for _ in range(4)]
        self.h = [np.empty(SIZE, np.float32) for _ in range(5)]
        self.u = [np.empty(SIZE, np.float32) for _ in range(5)]
        self.t = np.empty(SIZE, np.float32)
        self.ready = [threading.Event() for _ in range(5)]  # primal activation i written
        self.go, self.done = threading.Event(), threading.Event()
        threading.Thread(target=self._tangent_worker, daemon=True).start()

    def split(self, gemm: Any = gemm_rows) -> None:
        """dslc's schedule: one op after another, each over both cores; the matmuls on ``gemm``
        (OpenBLAS's row blocks, or ``gemm_rows_tiles`` as dslc runs these products)."""
        h, u, t, w, b = self.h, self.u, self.t, self.w, self.b
        first_split(self.x, self.w0, b[0], h[0])
        for i in range(4):
            gemm(h[i], w[i], h[i + 1], h[i + 1], SPLIT, SCALES)
            tanh_split(h[i + 1], b[i + 1])
        tangent0_split(self.w0, h[0], t)
        for i in range(4):
            gemm(t, w[i], u[i + 1], u[i + 1], SPLIT, SCALES)
            tangent_split(u[i + 1], h[i + 1], t)

    def row_blocks(self) -> None:
        """Each matmul and the elementwise pass after it as one parallel loop over row ranges
        (``fused_tanh``, ``fused_tangent``): an elementwise epilogue fused into the matmul."""
        h, u, t, w, b = self.h, self.u, self.t, self.w, self.b
        first_split(self.x, self.w0, b[0], h[0])
        for i in range(4):
            fused_tanh(h[i], w[i], h[i + 1], b[i + 1])
        tangent0_split(self.w0, h[0], t)
        for i in range(4):
            fused_tangent(t, w[i], u[i + 1], h[i + 1])

    def passes_only(self) -> None:
        """``split`` without its matmuls: the elementwise passes' share of the phase."""
        h, u, t, b = self.h, self.u, self.t, self.b
        first_split(self.x, self.w0, b[0], h[0])
        for i in range(4):
            tanh_split(h[i + 1], b[i + 1])
        tangent0_split(self.w0, h[0], t)
        for i in range(4):
            tangent_split(u[i + 1], h[i + 1], t)

    def streams(self) -> None:
        """Two streams: this thread runs the primal chain, a second thread the tangent chain."""
        for event in self.ready:
            event.clear()
        self.done.clear()
        self.go.set()
        h, w, b = self.h, self.w, self.b
        first_serial(self.x, self.w0, b[0], h[0])
        self.ready[0].set()
        for i in range(4):
            gemm_rows_serial(h[i], w[i], h[i + 1], h[i + 1], SERIAL, SCALES)
            tanh_serial(h[i + 1], b[i + 1])
            self.ready[i + 1].set()
        self.done.wait()

    def _tangent_worker(self) -> None:
        h, u, t, w = self.h, self.u, self.t, self.w
        while True:
            self.go.wait()
            self.go.clear()
            self.ready[0].wait()
            tangent0_serial(self.w0, h[0], t)
            for i in range(4):
                gemm_rows_serial(t, w[i], u[i + 1], u[i + 1], SERIAL, SCALES)
                self.ready[i + 1].wait()
                tangent_serial(u[i + 1], h[i + 1], t)
            self.done.set()

    def check(self) -> None:
        """Both schedules compute the same values (and the same as NumPy)."""
        self.split()
        want = [a.copy() for a in (*self.h, *self.u[1:], self.t)]
        for schedule in (self.streams, lambda: self.split(gemm_rows_tiles), self.row_blocks):
            schedule()
            got = (*self.h, *self.u[1:], self.t)
            assert all(np.allclose(g, v, atol=1e-5) for g, v in zip(got, want, strict=True))
        h0 = np.tanh(np.outer(self.x, self.w0) + self.b[0])
        assert np.allclose(want[0].reshape(M, N), h0, atol=1e-5)


# ---- the report ------------------------------------------------------------------------------------------


def run(rounds: int, repeats: int, only: tuple[str, ...] = ()) -> str:
    single_threaded_blas()
    rng = np.random.default_rng(0)
    phase = ForwardPhase(rng)
    phase.check()
    flops = 2 * M * N * N
    groups: dict[str, dict[str, tuple[Callable[[int], object], int]]] = {
        "cache": {name: (fn, flops) for name, fn in cache_cases(rng).items()},
        "working set": {name: (fn, flops) for name, fn in working_set_cases(rng).items()},
        "shape": shape_cases(rng),
        "schedule": {
            "split op by op (dslc)": (lambda k: phase.split(), 8 * flops),
            "two streams": (lambda k: phase.streams(), 8 * flops),
            "split op by op, tiles": (lambda k: phase.split(gemm_rows_tiles), 8 * flops),
            "row blocks: matmul + its pass per range, tiles": (lambda k: phase.row_blocks(), 8 * flops),
            "elementwise passes alone": (lambda k: phase.passes_only(), 8 * flops),
        },
    }
    groups = {g: cases for g, cases in groups.items() if not only or g in only}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):  # cases interleaved, this VM's speed drifts
        for group, cases in groups.items():
            for name, (fn, _) in cases.items():
                times.setdefault((group, name), []).append(per_call(fn, repeats))
    info, ver = machine(), versions()
    lines = [
        "# A matmul inside a program, and inter-operation parallelism",
        "",
        f"- date: {time.strftime('%Y-%m-%d')}; machine: {info['cpu']}, {info['cores']} cores",
        f"- versions: numpy {ver['numpy']}, numba {ver['numba']}, dslc {ver['dslc']}",
        f"- command: `python benchmarks/bench_gemm_context.py --rounds {rounds} --repeats {repeats}"
        + f" --groups {','.join(only)}" * bool(only)
        + "`",
        f"- median per call of {repeats} calls, lowest of {rounds} rounds, interleaved (each: last column)",
        "- GFLOP/s: the matmuls' FLOPs over the time (a schedule's time includes its elementwise passes)",
        "",
        "| group | case | ms | GFLOP/s | rounds (ms) |",
        "|---|---|---:|---:|---|",
    ]
    for (group, name), ts in times.items():
        rate = f"{groups[group][name][1] / min(ts) / 1e9:.0f}"
        rounds_ms = " / ".join(f"{1e3 * t:.3f}" for t in ts)
        lines.append(f"| {group} | {name} | {1e3 * min(ts):.3f} | {rate} | {rounds_ms} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--groups", default="", help="comma-separated: cache, working set, shape, schedule")
    parser.add_argument("--out", default="", help="write the table alone here, not to results/")
    args = parser.parse_args()
    only = tuple(g for g in args.groups.split(",") if g)
    if args.out:
        write_report(run(args.rounds, args.repeats, only), args.out)
        return
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gemm_context.md")
    kept = ""
    if os.path.exists(path):  # the hand-written sections after the table
        with open(path) as f:
            old = f.read()
        kept = old[old.index("\n## ") :] if "\n## " in old else ""
    write_report(run(args.rounds, args.repeats, only) + kept, path)


if __name__ == "__main__":
    main()
