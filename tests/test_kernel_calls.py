"""The driver calls its kernels through their native addresses (``runtime.intrinsics.call_kernel``)
and carves its buffers with ``buffer_view``: each checked against what Numba and NumPy do, and the
driver's compiled code checked to hold none of the kernels' code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
from helpers import driver_calls, parallel_loops
from numba.core.errors import TypingError

import dsl
import dsl.numpy as dnp
from compiler.compilation import option_defaults
from runtime.intrinsics import (
    array_at,
    array_at_python,
    buffer_view,
    buffer_view_python,
    call_kernel,
    data_address,
    data_address_python,
    keep_alive,
    signature_string,
)
from runtime.parallel import CHUNK_SIGNATURE, PARALLEL_FOR_SIGNATURE, parallel_for, parallel_for_python
from runtime.precompile import kernel_table


@numba.njit(cache=False, parallel=True)
def _affine(x, out):
    for i in numba.prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = 2 * x[i, j] + 1


@numba.njit(cache=False)
def _checked(x):
    if x[0] < 0:
        raise ValueError("negative first element")


class _Module:  # what kernel_table reads: the kernels as attributes
    affine = _affine
    checked = _checked


F8_2 = [("float64", 2), ("float64", 2)]
F8_1 = [("float64", 1)]
CHUNK, PARALLEL_FOR = CHUNK_SIGNATURE, PARALLEL_FOR_SIGNATURE


@numba.njit
def _driver(table, x):
    out = np.empty_like(x)
    call_kernel(table[0], "f8:2,f8:2", x, out)
    call_kernel(table[1], "f8:1", out.reshape(-1))
    return out


def test_a_kernel_called_through_its_address_runs_and_raises_like_a_call_by_name() -> None:
    table = kernel_table(_Module, [("affine", F8_2), ("checked", F8_1)])  # type: ignore[arg-type]
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(_driver(table.addresses, x), 2 * x + 1)
    with pytest.raises(ValueError, match="negative first element"):
        _driver(table.addresses, -x - 1)


def test_a_call_whose_arrays_differ_from_the_signature_does_not_type() -> None:
    @numba.njit
    def wrong(table, x):
        call_kernel(table[0], "f4:2,f4:2", x, x)  # the entry was compiled for float64

    with pytest.raises(TypingError):
        wrong(np.zeros(1, np.uint64), np.zeros((2, 2)))


def test_signature_string_names_dtype_and_rank() -> None:
    assert signature_string([("float32", 2), ("bool", 0), ("int64", 1)]) == "f4:2,b1:0,i8:1"


@pytest.mark.parametrize(
    ("offset", "shape", "dtype"),
    [
        (0, (3, 4), np.float32),
        (16, (5,), np.float64),
        (8, (), np.int32),
        (3, (2, 3), np.bool_),
        (24, (2, 1, 3), np.int64),
    ],
)
def test_buffer_view_is_numpys_view_of_the_same_bytes(
    offset: int, shape: tuple[int, ...], dtype: type
) -> None:
    @numba.njit
    def view_and_fill(base, value):
        v = buffer_view(base, offset, shape, dtype)
        v[...] = value
        return v.copy()

    base = np.zeros(256, np.uint8)
    got = view_and_fill(base, 1)
    expected = buffer_view_python(np.zeros(256, np.uint8), offset, shape, dtype)
    assert got.shape == expected.shape == shape and got.dtype == expected.dtype
    expected[...] = 1
    np.testing.assert_array_equal(got, expected)
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    # the writes went to base's bytes [offset, offset + size) and nowhere else
    assert not base[:offset].any() and not base[offset + size :].any() and base[offset : offset + size].any()


def test_the_driver_holds_none_of_its_kernels_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))  # compiled here, so Numba has its LLVM IR
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)

    @dsl.compile
    def f(x, w):
        h = dnp.tanh(x @ w)
        return (h * h).sum(axis=0)

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((64, 32)), rng.standard_normal((32, 48)) / 6
    np.testing.assert_allclose(f(x, w), (np.tanh(x @ w) ** 2).sum(axis=0), rtol=1e-12)
    entry = next(iter(f._cache.values()))
    driver, table = entry.run.driver, entry.run.kernels
    assert len(table.addresses) >= 2 and all(int(a) != 0 for a in table.addresses)
    assert sum(driver.stats.cache_misses.values()) == 1
    (ir,) = driver.inspect_llvm().values()
    assert ir.count("inttoptr") >= len(table.addresses)  # each kernel called through its address
    names = {name for name, _ in driver_calls(entry.program.source)}  # a kernel and gemm_rows_serial
    assert len(names) >= 2
    defined = [line for line in ir.splitlines() if line.startswith("define")]
    assert not [line for line in defined for name in names if f"{name}B" in line or f"{name}$" in line], (
        defined
    )


def test_a_module_names_the_runtime_code_it_was_generated_against(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint of runtime/intrinsics.py, blas.py and mkl.py is part of the module's text, hence
    of its name: after an upgrade of the runtime, Numba never loads code compiled against the old one."""
    from compiler.codegen import cpu

    x = np.ones((8, 4))
    source = dsl.compile(lambda a: (a @ a.T).sum()).lower(x).source()
    assert f"# runtime code {cpu.runtime_fingerprint()}\n" in source
    monkeypatch.setattr(cpu, "_FINGERPRINT", "0" * 16)
    other = dsl.compile(lambda a: (a @ a.T).sum()).lower(x).source()
    assert "# runtime code 0000000000000000\n" in other and other != source


@numba.njit(cache=False)
def _round_trip(x, out):
    frame = np.empty(2, np.uint64)
    frame[0], frame[1] = data_address(x), data_address(out)
    a = array_at(frame[0], x.shape, x.dtype)
    b = array_at(frame[1], out.shape, out.dtype)
    b[...] = a
    return frame


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_array_at_reads_and_writes_the_memory_data_address_gives(dtype: Any, shape: Any) -> None:
    x = (np.arange(max(1, int(np.prod(shape)))) % 3).astype(dtype).reshape(shape)
    out = np.zeros_like(x)
    frame = _round_trip(x, out)
    assert int(frame[0]) == x.ctypes.data and int(frame[1]) == out.ctypes.data
    np.testing.assert_array_equal(out, x)
    out = np.zeros_like(x)  # the plain-Python forms (NUMBA_DISABLE_JIT)
    a = array_at_python(data_address_python(x), shape, dtype)
    array_at_python(data_address_python(out), shape, dtype)[...] = a
    np.testing.assert_array_equal(out, x)


@numba.njit(cache=False)
def _square_rows(ch, frame):
    x = array_at(frame[0], (16, 3), np.float64)
    out = array_at(frame[1], (16, 3), np.float64)
    for j in range(3):
        out[ch, j] = x[ch, j] * x[ch, j] + ch


class _Chunks:
    square_rows = _square_rows
    parallel_for = parallel_for


def test_parallel_for_runs_each_chunk_once_through_its_address() -> None:
    slots = [("square_rows", CHUNK), ("parallel_for", PARALLEL_FOR)]
    table = kernel_table(_Chunks, slots)  # type: ignore[arg-type]
    x, out = np.arange(48.0).reshape(16, 3), np.full((16, 3), np.nan)
    frame = np.array([x.ctypes.data, out.ctypes.data], np.uint64)
    parallel_for(table.addresses[0], 16, frame)
    np.testing.assert_array_equal(out, x * x + np.arange(16)[:, None])
    out[...] = np.nan

    def square_rows(ch: int, frame: Any) -> None:  # the chunk function as plain Python
        x_, out_ = (array_at_python(frame[k], (16, 3), np.float64) for k in (0, 1))
        out_[ch] = x_[ch] * x_[ch] + ch

    parallel_for_python(square_rows, 16, frame)  # what a module runs under NUMBA_DISABLE_JIT
    np.testing.assert_array_equal(out, x * x + np.arange(16)[:, None])


def test_generated_parallel_kernels_are_chunk_functions_run_by_parallel_for() -> None:
    """With ``runtime_parallel`` no kernel is compiled with ``parallel=True``: each parallel loop
    is a chunk function the runtime's ``parallel_for`` runs; switched off, the same loops are
    ``numba.prange`` loops. Both give the same results (a flat loop, a row band, a reduction)."""

    x = np.random.default_rng(3).standard_normal((300, 400)).astype(np.float32)

    def band(x: Any) -> Any:  # one row band: per-row max, a column sum's partial results
        y = dnp.tanh(x) * 2.0 + x
        return y, (y - y.max(axis=1, keepdims=True)).sum(axis=0), dnp.exp(x).sum()

    def flat(x: Any) -> Any:  # a flat elementwise loop
        return dnp.tanh(x) * x + 1.0

    for f in (band, flat):
        on = dsl.compile(f)
        source = on.lower(x).source()
        assert "parallel=True" not in source and parallel_loops(source) == [16]
        # the band combines partial results after its loop: a kernel function of its own calls
        # parallel_for; the flat loop has nothing around it: the driver runs its chunks directly
        kernel = re.search(r"^def (k\w+)\(.*chunk_at, parallel_at\):$", source, re.M)
        direct = re.search(r"^    fill_frame\(frame, .*\n    call_kernel\(.*, frame\)  # k", source, re.M)
        assert (kernel is not None, direct is not None) == ((True, False) if f is band else (False, True))
        with option_defaults(runtime_parallel=False):
            off = dsl.compile(f)
            off_source = off.lower(x).source()
            assert "parallel=True" in off_source and "parallel_for" not in off_source
            want = off(x)
        got = on(x)
        for g, w in zip(
            got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]
        ):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-3)


def test_a_parallel_loop_reads_a_0d_argument() -> None:
    """A 0-d argument (a traced step count) read inside a ``numba.prange`` loop: Numba's parfor
    lowering cannot type ``k[()]`` there (a TypingError at the first call); the kernel reads it
    through a one-element view. A reduction over a middle axis with a side output keeps its
    ``prange`` with ``runtime_parallel`` on too."""

    def f(c, k, v0):
        v1 = c + k * 0.25
        return v1, dnp.sum(v1 >= v0, axis=1).astype(np.float64)

    x, k = np.random.default_rng(5).standard_normal((256, 16, 32)), np.array(3)
    for runtime_parallel in (True, False):
        with option_defaults(runtime_parallel=runtime_parallel):
            compiled = dsl.compile(f)
            if not runtime_parallel:
                assert "numba.prange" in compiled.lower(x, k, x).source()
            got = compiled(x, k, x)
        np.testing.assert_array_equal(got[0], x + 0.75)
        np.testing.assert_array_equal(got[1], np.sum(x + 0.75 >= x, axis=1).astype(np.float64))


@numba.njit(cache=False)
def _fresh_block(ch, frame):
    """A chunk that allocates a block the size of its kernel's scratch and reports its address."""
    out = array_at(frame[0], (16,), np.uint64)
    fresh = np.empty(4096, np.float64)
    out[ch] = data_address(fresh)
    fresh[0] = 1.0


def _scratch_kernel(keep: bool) -> Any:
    """The generated kernel's pattern: scratch only its chunks use, reached through the frame."""

    @numba.njit(cache=False)
    def kernel(out, chunk_at, parallel_at):
        scratch = np.empty(4096, np.float64)
        frame = np.empty(2, np.uint64)
        frame[0] = data_address(out)
        frame[1] = data_address(scratch)
        call_kernel(parallel_at, "u8,i8,u8:1", chunk_at, 16, frame)
        if keep:
            keep_alive(scratch)
        return frame[1]

    return kernel


class _Fresh:
    fresh_block = _fresh_block
    parallel_for = parallel_for


def test_scratch_a_kernel_passes_by_address_lives_until_its_chunks_ran() -> None:
    """Numba frees an array after the last use it sees: without ``keep_alive`` after
    ``parallel_for``, a kernel's scratch was freed before its chunks wrote to it, and a chunk's
    own allocation got the same block (glibc hands a freed block of that size straight back)."""
    table = kernel_table(_Fresh, [("fresh_block", CHUNK), ("parallel_for", PARALLEL_FOR)])  # type: ignore[arg-type]
    reused = {}
    saved = numba.get_num_threads()
    # one thread: every chunk runs on the thread that freed the scratch (glibc's arenas are per
    # thread, and with two, the other may claim every chunk)
    numba.set_num_threads(1)
    try:
        for keep in (False, True):
            kernel = _scratch_kernel(keep)
            hits = 0
            for _ in range(20):
                out = np.zeros(16, np.uint64)
                hits += int(kernel(out, table.addresses[0], table.addresses[1]) in set(out.tolist()))
            reused[keep] = hits
    finally:
        numba.set_num_threads(saved)
    assert reused[True] == 0
    assert reused[False] > 0  # the check can fail: this is what it catches


def test_generated_kernels_take_their_scratch_from_the_arena() -> None:
    """A kernel's scratch (a band's rows per chunk, partial results) is a view of the arena the driver
    passes (placed by the ``scratch`` pass), never an array a kernel or the driver allocates per call:
    the chunks reach it by address through the whole call, as the caller holds the arena."""
    x = np.random.default_rng(5).standard_normal((4096, 64)).astype(np.float32)

    def f(x: Any) -> Any:  # a row band keeping exp and softmax rows in scratch, a column sum's partials
        e = dnp.exp(x - x.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        return (p * x).sum(axis=0), (p * p).sum(axis=1)

    def g(x: Any) -> Any:  # a row band keeping exp rows in scratch, nothing after its loop
        e = dnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True) * x

    for fn in (f, g):
        lowered = dsl.compile(fn).lower(x)
        source = lowered.source()
        allocated = re.findall(r"^\s+(\w+) = np\.empty\(", source, re.M)
        assert set(allocated) <= {"frame"}, source  # (a frame of data addresses is no scratch)
        scratch = [r for r in lowered.memory_plan().buffers if r.scratch_of is not None]
        assert scratch, source
        driver = source.split("\ndef run(")[1]
        for r in scratch:
            assert re.search(rf"^    {r.name} = buffer_view\(arena, {r.offset}, ", driver, re.M), driver
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    for got, want in zip(dsl.compile(f)(x), ((p * x).sum(axis=0), (p * p).sum(axis=1)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dsl.compile(g)(x), p * x, rtol=1e-5, atol=1e-6)
