"""Matmul kernels on BLAS gemm blocks (``runtime/blas.py``): the intrinsics (SciPy's OpenBLAS, and
MKL where it loads: ``runtime/mkl.py``) against NumPy for every transpose/offset/alpha/beta
combination, the plain-Python twin, and compiled matmuls of awkward shapes (batched, transposed
operands, fewer rows than threads, K or N of 1) split over threads or not, against NumPy, with
each library."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import pytest
from helpers import driver_calls, gemm_calls

import dsl
import dsl.numpy as dnp
from compiler.compilation import Options, option_defaults
from runtime import blas, mkl

rng = np.random.default_rng(5)
MKL = pytest.mark.skipif(not mkl.available(), reason="MKL is not installed (pip install 'dslc[mkl]')")
LIBRARIES = ["openblas", pytest.param("mkl", marks=MKL)]


@numba.njit(cache=False)
def _call_gemm(ta, tb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off, ldc):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    blas.gemm(ta, tb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off, ldc)


@numba.njit(cache=False)
def _call_gemm_mkl(ta, tb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off, ldc):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    blas.gemm_mkl(ta, tb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off, ldc)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("impl", ["intrinsic", pytest.param("mkl", marks=MKL), "python", "tiles"])
def test_gemm_blocks_match_numpy(dtype: Any, ta: bool, tb: bool, impl: str) -> None:
    m, n, k, rows, i0 = 23, 17, 9, 7, 5  # rows i0 .. i0+rows of a 23-row product
    A = rng.standard_normal((m, k)).astype(dtype)
    B = rng.standard_normal((k, n)).astype(dtype)
    C = rng.standard_normal((m, n)).astype(dtype)
    a = np.ascontiguousarray(A.T) if ta else A  # stored transposed: BLAS reads it with its flag
    b = np.ascontiguousarray(B.T) if tb else B
    lda, ldb = (m if ta else k), (k if tb else n)
    a_off = i0 if ta else i0 * k
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0), (-3.0, 1.0)):
        c = C.copy()
        args = (ta, tb, rows, n, k, dtype(alpha), a.reshape(-1), a_off, lda, b.reshape(-1), 0, ldb)
        args += (dtype(beta), c.reshape(-1), i0 * n, n)
        impls = {"intrinsic": _call_gemm, "mkl": _call_gemm_mkl, "python": blas._gemm_python}
        impls["tiles"] = blas.gemm_tiles
        impls[impl](*args)
        want = C.copy()
        want[i0 : i0 + rows] = alpha * (A[i0 : i0 + rows] @ B) + beta * C[i0 : i0 + rows]
        np.testing.assert_allclose(c, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_beta_zero_never_reads_the_destination() -> None:
    for fn in (_call_gemm, blas._gemm_python, blas.gemm_tiles):
        for m, n in ((2, 2), (blas.TILE_ROWS + 1, blas.tile_width(4) + 1)):  # tiles and the rest
            a, b = np.ones((m, 3), np.float32), np.ones((3, n), np.float32)
            c = np.full((m, n), np.nan, np.float32)
            args = (False, False, m, n, 3, np.float32(1.0), a.reshape(-1), 0, 3, b.reshape(-1), 0, n)
            fn(*args, np.float32(0.0), c.reshape(-1), 0, n)
            np.testing.assert_array_equal(c, np.full((m, n), 3.0, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_register_tiles_match_numpy_on_whole_tiles_and_the_rest(dtype: Any, ta: bool, tb: bool) -> None:
    """``gemm_tiles`` on blocks of whole tiles, with rows and columns left over, and fewer than one
    tile, inside bigger strided buffers (offsets, leading dimensions past the block)."""
    rows, width = blas.TILE_ROWS, blas.tile_width(np.dtype(dtype).itemsize)
    for m, n, k in ((4 * rows, 2 * width, 128), (3 * rows + 5, width + 7, 19), (rows - 1, width - 1, 3)):
        pad = 3  # every leading dimension 3 more than the block's width; offsets 5 elements in
        A = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        B = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        C = rng.standard_normal((m, n)).astype(dtype)
        a, b, c = (np.zeros(5 + x.shape[0] * (x.shape[1] + pad), dtype) for x in (A, B, C))
        for flat, x in ((a, A), (b, B), (c, C)):
            flat[5:].reshape(x.shape[0], x.shape[1] + pad)[:, : x.shape[1]] = x
        lda, ldb, ldc = A.shape[1] + pad, B.shape[1] + pad, n + pad
        for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
            out = c.copy()
            blas.gemm_tiles(ta, tb, m, n, k, dtype(alpha), a, 5, lda, b, 5, ldb, dtype(beta), out, 5, ldc)
            want = alpha * ((A.T if ta else A) @ (B.T if tb else B)) + beta * C
            got = out[5:].reshape(m, ldc)[:, :n]
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4)
            np.testing.assert_array_equal(out[5:].reshape(m, ldc)[:, n:], c[5:].reshape(m, ldc)[:, n:])
            np.testing.assert_array_equal(out[:5], c[:5])  # nothing outside the block written


def test_matmuls_of_shallow_depth_run_on_register_tiles() -> None:
    """Products of depth ``k`` up to ``TILE_MAX_DEPTH_BYTES`` run on dslc's tiles (the
    ``gemm_rows_tiles`` form; with a transposed right operand too, and a 4 MiB one), deeper ones and
    right operands past ``TILE_MAX_RIGHT_BYTES`` on the library; the same values with the tiles
    switched off."""
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    w = rng.standard_normal((1024, 128)).astype(np.float32)
    big = rng.standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB, read in strips
    deep = rng.standard_normal((2048, 128)).astype(np.float32)
    assert deep.shape[0] * 4 > blas.TILE_MAX_DEPTH_BYTES >= w.shape[0] * 4

    assert big.nbytes <= blas.TILE_MAX_RIGHT_BYTES < 2 * big.nbytes

    def f(x: Any, w: Any, big: Any, deep: Any) -> Any:
        wide = dnp.concatenate([big, big], axis=1)  # 1024 x 2048: 8 MiB
        return x @ w, (x @ w) @ w.T, x @ big, big.reshape(512, 2048) @ deep, x @ wide

    def matmuls(compiled: Any) -> list[str]:
        calls = driver_calls(compiled.lower(x, w, big, deep).source())
        return [name for name, _ in calls if name.startswith("gemm")]

    compiled = dsl.compile(f)
    assert matmuls(compiled) == ["gemm_rows_tiles"] * 3 + ["gemm_rows"] * 2
    got = compiled(x, w, big, deep)
    with option_defaults(matmul_tiles=False):
        plain = dsl.compile(f)
        assert matmuls(plain) == ["gemm_rows"] * 5
        want = plain(x, w, big, deep)
    refs = (x @ w, (x @ w) @ w.T, x @ big, big.reshape(512, 2048) @ deep, x @ np.concatenate([big, big], 1))
    for g, p, ref in zip(got, want, refs, strict=True):
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(g, ref, rtol=2e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(g, p, rtol=2e-5, atol=1e-5 * scale)


SHAPES = [
    ((512, 300), (300, 200)),  # split into row blocks
    ((3, 300, 40), (3, 40, 500)),  # batched: row blocks of each batch element
    ((16, 64, 64), (16, 64, 64)),  # batch elements spread over threads
    ((1, 3000), (3000, 2000)),  # one row: no split
    ((3000, 2000), (2000, 1)),  # N = 1
    ((5, 7), (7, 3)),  # small: the calling thread
]


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_compiled_matmuls_match_numpy(
    library: str, dtype: Any, shapes: tuple[tuple[int, ...], tuple[int, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSL_BLAS", library)
    x = rng.standard_normal(shapes[0]).astype(dtype)
    y = rng.standard_normal(shapes[1]).astype(dtype)
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2))

    swap = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)

    def f(x: Any, y: Any, xt: Any) -> Any:  # plain, and reading a transposed operand
        return x @ y, dnp.transpose(xt, swap) @ y

    compiled = dsl.compile(f)
    lowered = compiled.lower(x, y, xt)
    source = lowered.source()
    assert len(gemm_calls(lowered)) == 2 and "np.dot" not in source
    assert ('gemm_rows_functions("mkl")' in source) == (library == "mkl")
    rtol = 2e-5 if dtype == np.float32 else 1e-12
    scale = np.sqrt(x.shape[-1])
    for got in compiled(x, y, xt):
        np.testing.assert_allclose(got, x @ y, rtol=rtol, atol=rtol * scale)


def test_native_blas_threads_leave_blas_threading_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSL_BLAS_THREADS", "native")
    x = rng.standard_normal((512, 300)).astype(np.float32)
    compiled = dsl.compile(lambda a: a @ a.T)
    lowered = compiled.lower(x)
    source = lowered.source()
    (call,) = gemm_calls(lowered)
    assert [name for name, _ in driver_calls(source)] == ["gemm_rows_serial"] and call["parts"] == 1
    assert "single_threaded_blas()" not in source
    assert Options().split_matmuls
    np.testing.assert_allclose(compiled(x), x @ x.T, rtol=2e-5, atol=1e-3)


def test_k1_matmul_is_an_outer_product_without_blas() -> None:
    x, y = (
        rng.standard_normal((2000, 1)).astype(np.float32),
        rng.standard_normal((1, 3000)).astype(np.float32),
    )
    compiled = dsl.compile(lambda a, b: a @ b)
    assert not gemm_calls(compiled.lower(x, y))  # simplify made it broadcast * broadcast
    np.testing.assert_array_equal(compiled(x, y), x @ y)  # one product per element, as BLAS does


def test_big_matmuls_split_small_ones_stay_on_the_calling_thread() -> None:
    big, small = (
        rng.standard_normal((512, 300)).astype(np.float32),
        rng.standard_normal((5, 7)).astype(np.float32),
    )
    for x, serial in ((big, False), (small, True)):  # on the library's gemm or on the tiles
        (name,) = [name for name, _ in driver_calls(dsl.compile(lambda a: a @ a.T).lower(x).source())]
        assert name.startswith("gemm_rows") and name.endswith("_serial") == serial


def test_the_blas_library_is_chosen_by_dsl_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS unless ``DSL_BLAS=mkl``; ``DSL_BLAS_THREADS=native`` keeps OpenBLAS (MKL runs
    sequential here); the library is named in the module's text, so cached modules differ by it."""
    monkeypatch.delenv("DSL_BLAS", raising=False)
    assert blas.vendor() == "openblas"
    x = rng.standard_normal((512, 300)).astype(np.float32)
    source = dsl.compile(lambda a: a @ a.T).lower(x).source()
    assert "= gemm_rows_functions()" in source and "single_threaded_blas()" in source
    monkeypatch.setenv("DSL_BLAS", "mkl")
    if not mkl.available():
        with pytest.raises(RuntimeError, match="dslc\\[mkl\\]"):
            blas.vendor()
        return
    monkeypatch.setenv("DSL_BLAS_THREADS", "native")
    assert blas.vendor() == "openblas"
    monkeypatch.delenv("DSL_BLAS_THREADS")
    source = dsl.compile(lambda a: a @ a.T).lower(x).source()
    assert '= gemm_rows_functions("mkl")' in source and "single_threaded_blas()" not in source


_CACHED_MKL_CHILD = """
import numpy as np, dsl
x = np.arange(600, dtype=np.float32).reshape(30, 20) / 100
f = dsl.compile(lambda a: a @ a.T)
assert 'gemm_rows_functions("mkl")' in f.lower(x).source()
np.testing.assert_allclose(f(x), x @ x.T, rtol=1e-5)
print("ok")
"""


@MKL
def test_mkl_modules_load_from_the_cache_in_a_new_process(tmp_path: Any) -> None:
    """The second process imports the module Numba compiled in the first: MKL's gemm is found by the
    name ``runtime.mkl`` registers when the module binds ``gemm_rows``, before any kernel loads."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DSL_BLAS": "mkl", "DSL_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # compile and store, then load
        run = subprocess.run(
            [sys.executable, "-c", _CACHED_MKL_CHILD], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    assert any(name.endswith(".nbc") for _, _, files in os.walk(tmp_path) for name in files)


def test_register_tiles_of_the_avx2_shape_match_numpy() -> None:
    """The tile shape of a host without AVX-512 (6 rows x 2 ymm), in a new process told by llvmlite
    that the host has none (``runtime.blas`` picks the shape when imported), against NumPy."""
    code = """
import llvmlite.binding as llvm
host = llvm.get_host_cpu_features
def without_avx512():
    features = host()
    features["avx512f"] = False
    return features
llvm.get_host_cpu_features = without_avx512
import numpy as np
from runtime import blas
assert (blas.VECTOR_BYTES, blas.TILE_ROWS) == (32, 6)
rng = np.random.default_rng(0)
for dtype in (np.float32, np.float64):
    for ta, tb in ((False, False), (True, True)):
        m, n, k = 6 * 5 + 1, blas.tile_width(np.dtype(dtype).itemsize) * 2 + 3, 17
        A = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        B = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        C = np.zeros((m, n), dtype)
        a, b, c, one, zero = A.ravel(), B.ravel(), C.ravel(), dtype(1.0), dtype(0.0)
        blas.gemm_tiles(ta, tb, m, n, k, one, a, 0, A.shape[1], b, 0, B.shape[1], zero, c, 0, n)
        want = (A.T if ta else A) @ (B.T if tb else B)
        np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-4)
print("ok")
"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
