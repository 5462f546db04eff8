"""The cuBLAS mapping of CUDA matmuls (``runtime/cublas.py``), checked without a GPU: the calls that
``gemm_calls`` plans are run by a NumPy model of cuBLAS's column-major gemm and compared with the
generated kernel's own indexing (``compiler/kernel/cuda/matmul.py``) on random layouts: transposed
operands and results, padded rows, batches that are strided, broadcast or split over two axes, an in-place
accumulation. On a GPU the same mapping runs for real in the CUDA suite (``tests/cuda_sim``)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import suite_programs

import dsl
from runtime.cublas import OP_N, Call, batch_plan, gemm_calls, layout

RNG = np.random.default_rng(7)


def positions(off: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """Flat element positions of a strided view (element strides)."""
    grids = np.meshgrid(*(np.arange(s) for s in shape), indexing="ij")
    return off + sum((g * st for g, st in zip(grids, strides, strict=True)), np.zeros(shape, np.int64))


def walk_offset(t: int, walk: tuple[int, int, int]) -> int:
    inner, outer, stride = walk
    return (t // inner) * outer + (t % inner) * stride


def kernel_semantics(a, b, o, alpha, beta, sizes, cin=None) -> np.ndarray:
    """What the generated kernel writes: o[t](i, j) = alpha * A[t] @ B[t] + beta * cin[t](i, j)
    (``cin``: ``o`` unless given)."""
    cin = o if cin is None else cin
    nb, m, k, n, sa_i, sa_p, sb_p, sb_j, *rest = sizes
    a_walk, b_walk, (so_i, so_j), o_walk = rest[0:3], rest[3:6], rest[6:8], rest[8:11]
    out = o.copy()
    for t in range(nb):
        am = a[positions(walk_offset(t, a_walk), (m, k), (sa_i, sa_p))]
        bm = b[positions(walk_offset(t, b_walk), (k, n), (sb_p, sb_j))]
        at = positions(walk_offset(t, o_walk), (m, n), (so_i, so_j))
        out[at] = alpha * (am @ bm) + beta * cin[at]
    return out


def cublas_model(calls: list[Call], a, b, o, alpha, beta) -> np.ndarray:
    """cuBLAS's gemm (column-major) run on the flat buffers: our ``b`` is its A and our ``a`` its B
    where a call is swapped, else the other way round."""
    out = o.copy()
    for c in calls:
        for q in range(c.batch):

            def operand(buf, off, ld, trans, rows, cols):
                if trans == OP_N:  # rows x cols, column-major
                    return buf[positions(off, (rows, cols), (1, ld))]
                return buf[positions(off, (cols, rows), (1, ld))].T

            first, second = (b, a) if c.swapped else (a, b)
            left = operand(first, c.a_off + q * c.a_stride, c.lda, c.trans_a, c.m, c.k)
            right = operand(second, c.b_off + q * c.b_stride, c.ldb, c.trans_b, c.k, c.n)
            at = positions(c.c_off + q * c.c_stride, (c.m, c.n), (1, c.ldc))
            out[at] = alpha * (left @ right) + beta * out[at]
    return out


def matrix(rows: int, cols: int, transposed: bool, pad: int) -> tuple[int, int, int]:
    """(row stride, column stride, footprint) of a rows x cols matrix, maybe stored transposed."""
    if transposed:
        return 1, rows + pad, (rows + pad) * cols
    return cols + pad, 1, (cols + pad) * rows


def case(kind: str, nb: int, m: int, k: int, n: int) -> tuple[list[int], int, int, int]:
    """Sizes (the kernel's parameters) of a random layout of ``kind`` and each buffer's length."""
    layouts, walks, lengths = [], [], []
    for rows, cols, name in ((m, k, "a"), (k, n, "b"), (m, n, "o")):
        transposed = bool(RNG.integers(2))  # a result too: written through a transposing epilogue
        s_r, s_c, foot = matrix(rows, cols, transposed, int(RNG.integers(0, 3)))
        layouts.append((s_r, s_c))
        if nb == 1:
            walk = (1, 0, 0)
        elif kind == "broadcast" and name == "b":
            walk = (nb, 0, 0)
        elif kind == "two axes":  # (outer, inner) = (nb // 3, 3), outer blocks padded apart
            walk = (3, 3 * foot + 5, foot)
        elif kind == "heads":  # (outer, inner) = (nb // 2, 2): a run per head, over the outer axis
            walk = (2, 2 * foot + 3, foot) if name != "b" or nb % 4 else (nb, 0, foot)
        else:
            walk = (nb, 0, foot)
        walks.append(walk)
        lengths.append(max(walk_offset(t, walk) for t in range(nb)) + foot + 1)
    (sa_i, sa_p), (sb_p, sb_j), (so_i, so_j) = layouts
    sizes = [nb, m, k, n, sa_i, sa_p, sb_p, sb_j, *walks[0], *walks[1], so_i, so_j, *walks[2]]
    return sizes, *lengths


@pytest.mark.parametrize("kind", ["single", "batched", "broadcast", "two axes", "heads"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_planned_calls_compute_what_the_kernel_computes(kind: str, beta: float) -> None:
    for _ in range(12):
        nb = {"single": 1, "heads": int(RNG.choice([8, 12]))}.get(kind, 6)
        m, k, n = (int(x) for x in RNG.integers(1, 9, 3))
        sizes, la, lb, lo = case(kind, nb, m, k, n)
        a, b, o = (RNG.standard_normal(size) for size in (la, lb, lo))
        calls = gemm_calls(*sizes)
        assert calls is not None, sizes
        want = kernel_semantics(a, b, o, 1.5, beta, sizes)
        got = cublas_model(calls, a, b, o, 1.5, beta)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(sizes))
        for c in calls:  # cuBLAS's own argument rules
            assert c.lda >= max(1, c.m if c.trans_a == OP_N else c.k)
            assert c.ldb >= max(1, c.k if c.trans_b == OP_N else c.n)
            assert c.ldc >= max(1, c.m)


def test_what_cublas_cannot_do_stays_on_the_kernel() -> None:
    assert layout(4, 3, 6, 2) is None  # neither stride 1: no BLAS matrix
    assert gemm_calls(1, 4, 3, 5, 6, 2, 5, 1, 1, 0, 0, 1, 0, 0, 5, 1, 1, 0, 0) is None
    no_blas_result = (2, 10, 1, 0, 0)  # the result's strides: neither is 1
    assert gemm_calls(1, 4, 3, 5, 3, 1, 5, 1, 1, 0, 0, 1, 0, 0, *no_blas_result) is None
    assert batch_plan(8, [(4, 1000, 10), (2, 0, 5), (8, 0, 20)]) is None  # runs of 4 and of 2
    big = 2**31  # past cuBLAS's 32-bit sizes
    assert gemm_calls(1, 2, big, 2, big, 1, 2, 1, 1, 0, 0, 1, 0, 0, 2, 1, 1, 0, 0) is None
    assert gemm_calls(1, 2, 3, 2, 3, 1, 2, 1, 1, 0, 0, 1, 0, 0, 2, 1, 1, 0, 0) is not None


def test_batch_runs() -> None:
    assert batch_plan(8, [(8, 0, 100), (8, 0, 0), (8, 0, 50)]) == (1, 8, [(800, 100), (0, 0), (400, 50)])
    assert batch_plan(8, [(4, 1000, 10), (8, 0, 5), (4, 2000, 20)]) == (
        2,
        4,
        [(1000, 10), (20, 5), (2000, 20)],
    )
    assert batch_plan(6, [(1, 7, 0), (3, 30, 10), (6, 0, 9)]) == (1, 6, [(42, 7), (60, 10), (54, 9)])
    # 16 (batch, head) pairs of 4 heads: 4 runs of 4 either way; 64 pairs of 4 heads: a run per head
    assert batch_plan(16, [(4, 1000, 10), (16, 0, 5)]) == (4, 4, [(1000, 10), (20, 5)])
    assert batch_plan(64, [(4, 1000, 10), (64, 0, 5)]) == (4, 16, [(10, 1000), (5, 20)])
    assert batch_plan(6, [(4, 1000, 10)]) is None  # 6 pairs are no whole number of runs of 4


def test_a_result_laid_out_by_heads_goes_to_cublas() -> None:
    """The transformer block's backward (``benchmarks/suite_programs.transformer_program``, B=4 T=128
    D=256 H=4) writes one batched gradient through a transposing epilogue: element (i, j) of head t at
    ``i + 256 * j``, heads walked as (batch, head). That matmul ran on the generated kernel; it is one
    strided-batched cuBLAS call run as ``O = A @ B`` (not swapped)."""
    sizes = [16, 64, 128, 128, 1, 256, 128, 1, 4, 32768, 64, 16, 0, 16384, 1, 256, 4, 32768, 64]
    calls = gemm_calls(*sizes)
    assert calls is not None and len(calls) == 4 and not calls[0].swapped
    la = walk_offset(15, (4, 32768, 64)) + 256 * 127 + 64
    lb, lo = 16 * 16384, la
    a, b, o = (RNG.standard_normal(size) for size in (la, lb, lo))
    want = kernel_semantics(a, b, o, 1.0, 0.0, sizes)
    np.testing.assert_allclose(cublas_model(calls, a, b, o, 1.0, 0.0), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["transformer block", "MLP training step"])
def test_every_float_matmul_of_the_suite_has_a_cublas_plan(name: str) -> None:
    """Every float matmul launch of the suite's transformer block and MLP step, compiled for CUDA (no
    GPU needed), is one cuBLAS can do: a plan from ``gemm_calls`` and ``cin`` the result's own buffer
    (or ``beta`` 0). The transformer's attention gradient laid out by heads ran on the generated
    kernel before results laid out transposed went to cuBLAS."""
    program = suite_programs().BUILDERS[name]()
    inner = getattr(program.dslc, "_fn", program.dslc)
    lowered = dsl.compile(lambda *a: inner(*a), target="cuda").lower(*program.args)
    kernels = lowered.program.compilation.kernels.kernels.values()
    launches = [k for top in kernels for k in (top, *top.follow) if k.wrapper]
    assert len(launches) >= 3
    size = {n: v.type.size for v, n in lowered.program.compilation.kernels.names.items()}
    for k in launches:
        a, b, o, cin, alpha, beta, *sizes = k.args
        assert gemm_calls(*map(int, sizes)) is not None, (k.name, sizes)
        nb, m, _, n = map(int, sizes[:4])
        # cin is o, beta is 0, or cin is copied into o first (matmul_launcher): o written whole
        assert cin == o or float(beta.split("(")[-1].rstrip(")")) == 0.0 or nb * m * n == size[o] == size[cin]


def test_an_accumulated_buffer_of_its_own_is_copied_into_the_result_first() -> None:
    """``o = alpha * a @ b + beta * cin`` with ``cin`` a buffer of its own (an SGD step's weight the
    caller keeps): ``matmul_launcher`` copies ``cin`` into ``o``, then runs the calls with C = ``o``."""
    for kind in ("single", "batched"):
        nb = 1 if kind == "single" else 4
        sizes, la, lb, lo = case(kind, nb, 5, 3, 4)
        a, b, cin = RNG.standard_normal(la), RNG.standard_normal(lb), RNG.standard_normal(lo)
        calls = gemm_calls(*sizes)
        assert calls is not None
        want = kernel_semantics(a, b, np.zeros(lo), -0.01, 1.0, sizes, cin=cin)
        got = cublas_model(calls, a, b, cin.copy(), -0.01, 1.0)
        written = kernel_semantics(a, b, np.zeros(lo), 1.0, 0.0, sizes) != 0  # the result's elements
        np.testing.assert_allclose(got[written], want[written], rtol=1e-12, atol=1e-12)
