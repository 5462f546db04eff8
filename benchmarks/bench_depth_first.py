"""The second derivative depth-first over row blocks: by the compiler (row-block regions), by hand,
and breadth-first (regions off).

    python benchmarks/bench_depth_first.py [--blocks 16] [--rounds 15] [--repeats 10] [--no-pretranspose]

Every operation of the suite's second derivative (``suite_programs.d2u_program``: sixteen
4096x128x128 float32 matmuls and the elementwise work between them) reads row ``i`` of its row
operands to produce row ``i`` of its result: the batch rows are independent (no weight gradient is
asked for). Breadth-first, one operation runs over all 4096 rows at a time (each split over both
cores), so every 2 MiB intermediate goes to L3 or memory and comes back for the next operation.
Depth-first, the rows are cut into blocks spread over Numba's threads, and a thread runs the whole
program on a block before the next, on block-sized intermediates that stay in its L2. The compiler
does this with ``row_blocks`` (``compiler/codegen/cpu.py``, docs/architecture.md); here it is also
written out by hand (``--blocks`` row blocks, the compiled program's operations in its order, the
same register tiles ``runtime.blas.gemm_tiles`` and ``tanh_f32``; with ``--no-pretranspose`` the
tiles copy the ``W.T`` operands' strips at every block instead of once per call), as the reference
the compiler's form should reach.

The results are checked against each other, then the three are timed alternately in one process
(this VM's speed drifts: ``bench_optimizations.interleaved_times``); min and median per call.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from typing import Any

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import suite_programs  # noqa: E402
from bench_optimizations import interleaved_times, switched_off  # noqa: E402

from compiler.prims import vecmath  # noqa: E402
from runtime.blas import gemm_tiles, single_threaded_blas  # noqa: E402
from runtime.intrinsics import fmuladd  # noqa: E402

_HELPERS: dict[str, Any] = {"np": np, "numba": numba, "fma": fmuladd, "math": math}
exec(vecmath.helper_source({"tanh_f32"}), _HELPERS)  # the generated modules' tanh, as they define it
tanh_f32 = _HELPERS["tanh_f32"]
WIDTH = 128
ONE, TWO = np.float32(1.0), np.float32(2.0)


@numba.njit(nogil=True, error_model="numpy")
def _mm(a: Any, w: Any, o: Any, rows: int, transposed: bool) -> None:
    """``o[:rows] = a[:rows] @ (w.T if transposed else w)`` on flat row-major blocks, WIDTH wide."""
    gemm_tiles(
        False, transposed, rows, WIDTH, WIDTH, ONE, a, 0, WIDTH, w, 0, WIDTH, np.float32(0.0), o, 0, WIDTH
    )  # type: ignore[call-arg]


@numba.njit(nogil=True, error_model="numpy", inline="always")
def _bias_tanh(z: Any, b: Any, h: Any, rows: int) -> None:
    for i in range(rows):
        for j in range(WIDTH):
            h[i * WIDTH + j] = tanh_f32(z[i * WIDTH + j] + b[j])


@numba.njit(nogil=True, error_model="numpy", inline="always")
def _times_slope(d: Any, h: Any, g: Any, rows: int) -> None:
    for i in range(rows):
        for j in range(WIDTH):
            q = i * WIDTH + j
            g[q] = d[q] * (ONE - h[q] * h[q])


@numba.njit(parallel=True, nogil=True, error_model="numpy")
def depth_first(
    x: Any, weights: Any, biases: Any, w0: Any, w5: Any, out: Any, blocks: int, pretranspose: bool
) -> None:  # noqa: PLR0913, PLR0915
    """The compiled program's operations, block by block (its generated source, read with
    ``profile_kernels.py "second derivative" --source``, names the same steps)."""
    m = x.shape[0]
    transposed = np.empty_like(weights)
    if pretranspose:
        for q in range(weights.shape[0]):
            transposed[q] = weights[q].T
    for blk in numba.prange(blocks):
        r0 = blk * m // blocks
        rows = (blk + 1) * m // blocks - r0
        buf = np.empty((12, rows * WIDTH), np.float32)
        h1, h2, h3, h4, z, d1, d2, d3, d4, g, e, u = buf  # activations, tangents, scratch
        for i in range(rows):
            for j in range(WIDTH):
                h1[i * WIDTH + j] = tanh_f32(x[r0 + i, 0] * w0[0, j] + biases[0, j])
        _mm(h1, weights[0].reshape(-1), z, rows, False)  # the primal chain
        _bias_tanh(z, biases[1], h2, rows)
        _mm(h2, weights[1].reshape(-1), z, rows, False)
        _bias_tanh(z, biases[2], h3, rows)
        _mm(h3, weights[2].reshape(-1), z, rows, False)
        _bias_tanh(z, biases[3], h4, rows)
        _mm(h4, weights[3].reshape(-1), z, rows, False)
        for i in range(rows):
            for j in range(WIDTH):
                g[i * WIDTH + j] = w0[0, j] * (ONE - h1[i * WIDTH + j] * h1[i * WIDTH + j])
        _mm(g, weights[0].reshape(-1), d1, rows, False)  # the tangent chain
        _times_slope(d1, h2, g, rows)
        _mm(g, weights[1].reshape(-1), d2, rows, False)
        _times_slope(d2, h3, g, rows)
        _mm(g, weights[2].reshape(-1), d3, rows, False)
        _times_slope(d3, h4, g, rows)
        _mm(g, weights[3].reshape(-1), d4, rows, False)
        for i in range(rows):
            for j in range(WIDTH):
                q = i * WIDTH + j
                t = tanh_f32(z[q] + biases[4, j])
                s = ONE - t * t
                g[q] = w5[j, 0] * s
                e[q] = ((-(d4[q] * w5[j, 0])) * t * TWO) * s
        for level in range(4):  # the second backward pass, two products per layer
            w = transposed[3 - level].reshape(-1) if pretranspose else weights[3 - level].reshape(-1)
            _mm(g, w, u, rows, not pretranspose)
            _mm(e, w, z, rows, not pretranspose)
            if level < 3:
                d = d3 if level == 0 else d2 if level == 1 else d1
                h = h4 if level == 0 else h3 if level == 1 else h2
                for i in range(rows):
                    for j in range(WIDTH):
                        q = i * WIDTH + j
                        s = ONE - h[q] * h[q]
                        e[q] = ((-(d[q] * u[q])) * h[q] * TWO + z[q]) * s
                        g[q] = u[q] * s
        for i in range(rows):
            acc = np.float32(0.0)
            for j in range(WIDTH):
                q = i * WIDTH + j
                s = ONE - h1[q] * h1[q]
                acc += ((-(w0[0, j] * u[q])) * h1[q] * TWO + z[q]) * s * w0[0, j]
            out[r0 + i, 0] = acc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-pretranspose", action="store_true")
    args = parser.parse_args()
    single_threaded_blas()
    prog = suite_programs.BUILDERS["second derivative"]()
    params, x = prog.args
    (w0, b0), *hidden, (w5, _) = params
    weights = np.stack([w for w, _ in hidden])
    biases = np.stack([b0] + [b for _, b in hidden])
    assert weights.shape == (4, WIDTH, WIDTH) and x.shape[1] == 1, "the suite's program changed shape"
    out = np.empty_like(x)

    def hand() -> None:
        depth_first(x, weights, biases, w0, w5, out, args.blocks, not args.no_pretranspose)

    def compiled() -> None:
        prog.dslc(*prog.args)

    with switched_off({"row_blocks"}):
        breadth = suite_programs.BUILDERS["second derivative"]().dslc
        breadth(*prog.args)

    def breadth_first() -> None:
        breadth(*prog.args)

    hand()
    expected = np.asarray(prog.dslc(*prog.args))
    assert np.array_equal(expected, np.asarray(breadth(*prog.args)))
    error = float(np.abs(out - expected).max() / np.abs(expected).max())
    layout = f"{args.blocks} blocks, pretranspose {not args.no_pretranspose}"
    print(f"{layout}: max difference {error:.1e} of the compiled result's largest")
    assert error < 1e-5
    fns = {"compiled, regions": compiled, "compiled, no regions": breadth_first, "by hand": hand}
    times = interleaved_times(fns, args.rounds, args.repeats)
    for name, t in times.items():
        print(f"{name:22s} min {1e3 * min(t):.2f} ms  median {1e3 * statistics.median(t):.2f} ms")


if __name__ == "__main__":
    main()
