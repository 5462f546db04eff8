"""NumPy-assisted kernels (compiler/kernel/arraylevel.py): big groups with libm-bound math (float64
here: float32 exp/tanh have vectorized loops, tests/test_vecmath.py) run as NumPy calls in object
mode, with the same results as the loop code and the reference interpreter. Their calls are the
primitives' own references, from NumPy or runtime/array_ops.py: no generated module, CPU or CUDA,
imports the compiler."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import interpret_fn, suite_programs

import dsl
import dsl.numpy as dnp
from compiler.kernel import arraylevel
from compiler.prims import CONTROL, REGISTRY
from dsl.compile import Compiled
from runtime import array_ops

rng = np.random.default_rng(11)


def f(a, w, b):
    h = a @ w  # a buffer the tanh kernel may overwrite in place
    y = dnp.tanh(h + b)
    return (y @ w.T).sum(axis=1), dnp.exp(-y) * 2.0


def test_big_transcendental_group_uses_numpy_and_matches() -> None:
    a = rng.standard_normal((128, 256))
    w = rng.standard_normal((256, 256)) / 16
    b = rng.standard_normal(256)
    on = dsl.compile(f)
    source = on.lower(a, w, b).source()
    assert "numba.objmode()" in source and "np.tanh(" in source
    plan = on.lower(a, w, b).memory_plan()
    assert any(r.reused_from for r in plan.buffers)  # the NumPy kernel writes over its dying input
    got_on, got_off = on(a, w, b), dsl.compile(f, inplace=False)(a, w, b)
    want = interpret_fn(f, a, w, b)
    for x, y, z in zip(got_on, got_off, want):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(x, z, rtol=1e-5, atol=1e-5)


def test_small_groups_stay_numba_loops() -> None:
    x = rng.standard_normal((8, 8))
    assert "objmode" not in dsl.compile(lambda x: dnp.tanh(x) + 1).lower(x).source()


def h(x):
    """Every kind of reference an array-level kernel may call: NumPy ufuncs, a cast to a NumPy dtype,
    an iota, a concatenate (runtime/array_ops.py), and a max over rows combined chunk by chunk."""
    y = dnp.sin(x) * dnp.arange(x.shape[1])
    z = dnp.concatenate([y, dnp.cos(x)], axis=1)
    return dnp.exp(z).max(axis=0), dnp.tanh(x).astype(np.float32)


def test_array_level_kernels_call_numpy_and_runtime_array_ops() -> None:
    x = rng.standard_normal((512, 512))
    source = dsl.compile(h).lower(x).source()
    assert "_ops.cast(" in source and "dtype=np.float32" in source and "np.stack(" in source
    for got, want in zip(dsl.compile(h)(x), interpret_fn(h, x)):
        np.testing.assert_array_equal(got, want)


def test_special_constants_are_printed_as_python_knows_them() -> None:
    """A 0-d constant of inf or NaN in a NumPy-assisted kernel (a causal mask's ``-inf``, the ``inf``
    ``%`` compares with) was printed ``np.array(-inf, ...)``: a NameError at the first call."""

    def masked(x):
        return dnp.exp(dnp.where(x > 0, x, -np.inf)), dnp.exp(dnp.maximum(x, np.nan)), (x % 0.3) * dnp.exp(x)

    x = np.linspace(-1.0, 1.0, arraylevel.MIN_ELEMENTS)
    assert "numba.objmode()" in dsl.compile(masked).lower(x).source()
    for got, want in zip(dsl.compile(masked)(x), interpret_fn(masked, x)):
        np.testing.assert_allclose(got, want, rtol=1e-15)


def test_numpy_kernels_in_a_loop_then_after_it() -> None:
    """Two loops whose bodies run NumPy-assisted kernels (an RNN's float64 tanh, then exp): Numba
    reused the first object-mode block's setup in the second, where it does not dominate (numba issue
    9574), and LLVM refused the driver. Found by the fuzzer with the size gates lowered."""

    def f(x, n):
        h = dsl.fori_loop(0, n, lambda i, h: dnp.tanh(h * 0.5 + i), x)
        return dsl.fori_loop(0, 2, lambda i, h: dnp.exp(-h), h)

    x, n = rng.standard_normal(arraylevel.MIN_ELEMENTS), np.int64(3)
    assert dsl.compile(f).lower(x, n).source().count("np.exp(") == 1
    np.testing.assert_allclose(dsl.compile(f)(x, n), interpret_fn(f, x, n), rtol=1e-15)


# ---- generated modules need no compiler ----------------------------------------------------------

IMPORTS_COMPILER = re.compile(r"^\s*(?:from|import)\s+(?:compiler|dsl)\b", re.M)


def test_every_reference_is_reachable_from_generated_code() -> None:
    """Each primitive's NumPy reference is a NumPy function or one of runtime/array_ops.py, and
    ``arraylevel.reference`` names it as a generated module (``np``, ``_ops``) reaches it."""
    namespace = {"np": np, "_ops": array_ops}
    for prim in (p for p in REGISTRY.values() if p not in CONTROL):  # a region op runs its blocks
        assert eval(arraylevel.reference(prim), namespace) is prim.reference, prim.name


def test_no_code_generator_writes_an_import_of_the_compiler() -> None:
    """No string a generator in compiler/codegen or compiler/kernel writes (preludes, generated lines)
    imports compiler or dsl: generated modules import only runtime, NumPy and Numba."""
    compiler = Path(__file__).parent.parent / "compiler"
    for path in sorted(p for part in ("codegen", "kernel") for p in (compiler / part).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not IMPORTS_COMPILER.search(node.value), f"{path.name}: {node.value!r}"


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_generated_modules_import_no_compiler(target: str) -> None:
    """The suite's programs and array-level ones, lowered for each target (no GPU needed): the
    generated source imports nothing from compiler or dsl."""
    x = rng.standard_normal((512, 512))
    a, w, b = rng.standard_normal((128, 256)), rng.standard_normal((256, 256)), rng.standard_normal(256)
    cases = [(h, (x,)), (f, (a, w, b))]
    for build in suite_programs().BUILDERS.values():
        prog = build()
        cases.append((prog.dslc, prog.args))
    for fn, args in cases:
        if isinstance(fn, Compiled):  # the suite's: compiled for the CPU, with its donations
            fn = dsl.compile(fn._fn, target=target, donate_argnums=fn._donate)
        else:
            fn = dsl.compile(fn, target=target)
        source = fn.lower(*args).source()
        assert not IMPORTS_COMPILER.search(source), source


# ---- the kernels' temporaries are planned memory ---------------------------------------------------


def _chain(x, y):
    return dnp.tanh(dnp.exp(x) * y) + 1.0


def _in_place(a, w, b):
    y = dnp.tanh(a @ w + b) * 2.0  # the matmul's block, dead after, takes the NumPy kernel's result
    return y @ w


def _rows(x, y):
    return dnp.sin(x).sum(axis=0), (dnp.cos(x) * y).max(axis=1), dnp.expm1(x * y).sum(axis=1)


def _f32(x, y):
    return dnp.sin(x) * dnp.cos(y) - dnp.expm1(x), dnp.tan(dnp.abs(y)).sum(axis=0)


def _case(fn: Any, shape: tuple[int, int], dtype: Any) -> tuple[Any, tuple[np.ndarray, ...]]:
    if fn is _in_place:
        a = rng.standard_normal(shape).astype(dtype)
        w = (rng.standard_normal((shape[1], shape[1])) / 16).astype(dtype)
        return fn, (a, w, rng.standard_normal(shape[1]).astype(dtype))
    return fn, tuple(rng.standard_normal(shape).astype(dtype) for _ in range(2))


# (512, 1024): chunked by rows; (128, 256): one NumPy call per op; each also with chunking off
_TEMPS = [
    (_chain, (512, 1024), np.float64),
    (_chain, (128, 256), np.float64),
    (_in_place, (512, 512), np.float64),
    (_rows, (512, 1024), np.float64),
    (_rows, (256, 256), np.float32),
    (_f32, (512, 1024), np.float32),
]


# results summed over the rows chunk by chunk, in another order than one np.sum's (and a matmul's
# BLAS against np.matmul): equal to the interpreter's only up to rounding
_CHUNKED_SUMS = {_rows: {0}, _f32: {1}}


def _numpy_kernels(lowered: Any) -> list[str]:
    return re.findall(r"^def (\w+_np)\(", lowered.source(), re.M)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "whole"])
@pytest.mark.parametrize("fn, shape, dtype", _TEMPS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_numpy_kernel_temporaries_are_rows_of_the_plan(fn, shape, dtype, chunked) -> None:
    """Every NumPy kernel's temporaries are scratch of the memory plan (``scratch_of`` the kernel),
    so the peak ``memory_plan()`` reports counts them; the results are the reference interpreter's
    bits, in place or not."""
    from compiler.compilation import option_defaults

    fn, args = _case(fn, shape, dtype)
    with option_defaults(chunked_numpy=chunked):
        compiled, reference_plan = dsl.compile(fn), dsl.compile(fn, inplace=False)
        lowered = compiled.lower(*args)
        kernels = _numpy_kernels(lowered)
        assert kernels, lowered.source()
        plan = lowered.memory_plan()
        owners = {r.scratch_of for r in plan.buffers if r.scratch_of is not None}
        assert set(kernels) <= owners, str(plan)
        assert lowered._program.executable.arena.nbytes == plan.peak_bytes
        assert fn is not _in_place or any(r.reused_from for r in plan.buffers), str(plan)
        got, got_off = compiled(*args), reference_plan(*args)
    want = _leaves(interpret_fn(fn, *args))
    for k, (x, y, z) in enumerate(zip(_leaves(got), _leaves(got_off), want, strict=True)):
        np.testing.assert_array_equal(x, y)
        if fn is _in_place or (chunked and k in _CHUNKED_SUMS.get(fn, ())):
            tol = 1e-12 if dtype is np.float64 else 1e-5
            np.testing.assert_allclose(x, z, rtol=tol, atol=tol)
        else:  # the same NumPy calls as the interpreter's
            np.testing.assert_array_equal(x, z)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "whole"])
@pytest.mark.parametrize("fn, shape, dtype", _TEMPS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_call_allocates_only_its_results(fn, shape, dtype, chunked) -> None:
    """A second call of a program with NumPy kernels allocates its results and nothing of a
    temporary's size (256 KiB at least here), traced by tracemalloc, which sees NumPy's allocations;
    NumPy's own iterator buffers (``np.getbufsize()`` elements, for a broadcast operand or a cast)
    aside."""
    import tracemalloc

    from compiler.compilation import option_defaults

    fn, args = _case(fn, shape, dtype)
    with option_defaults(chunked_numpy=chunked):
        compiled = dsl.compile(fn)
        compiled(*args)
    tracemalloc.start()
    try:
        results = compiled(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    results_bytes = sum(x.nbytes for x in _leaves(results))
    assert peak - results_bytes < 2 * np.getbufsize() * 8, (peak, results_bytes)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "whole"])
def test_the_last_ufunc_writes_its_output_itself(chunked) -> None:
    """A loop group's last op, a ufunc, computes straight into its output's buffer (its rows of it,
    chunked): no copy from scratch, also where the output is stored over a dying input (in place;
    the values are checked in test_numpy_kernel_temporaries_are_rows_of_the_plan)."""
    from compiler.compilation import option_defaults

    for fn, shape in [(_chain, (512, 1024)), (_in_place, (512, 512))]:
        fn, args = _case(fn, shape, np.float64)
        with option_defaults(chunked_numpy=chunked):
            source = dsl.compile(fn).lower(*args).source()
        (kernel,) = [p for p in source.split("\n\n") if re.match(r"def \w+_np\(", p)]
        assert "np.copyto(" not in kernel and re.search(r"out=v\d+(\[r0:r1\])?\)", kernel), kernel


def test_numpy_kernel_scratch_under_the_sanitizer(monkeypatch) -> None:
    """Under ``DSL_SANITIZE`` the plan with the NumPy kernels' scratch passes the overlap check (the
    scratch pass runs it), each scratch row is poisoned once its kernel ran, and the results are the
    same bits as without."""
    fn, args = _case(_rows, (512, 1024), np.float64)
    plain = dsl.compile(fn)(*args)
    monkeypatch.setenv("DSL_SANITIZE", "1")
    lowered = dsl.compile(fn).lower(*args)
    scratch = [r for r in lowered.memory_plan().buffers if r.scratch_of is not None]
    assert {r.scratch_of for r in scratch} == set(_numpy_kernels(lowered)), lowered.source()
    for r in scratch:  # (the poison after its kernel: a flat view of the row)
        assert (
            f"buffer_view(arena, {r.offset}, ({r.bytes // r.value.type.dtype.itemsize},)" in lowered.source()
        )
    for got, want in zip(_leaves(dsl.compile(fn)(*args)), _leaves(plain), strict=True):
        np.testing.assert_array_equal(got, want)


def _leaves(tree: Any) -> list[np.ndarray]:
    if isinstance(tree, tuple | list):
        return [leaf for x in tree for leaf in _leaves(x)]
    return [np.asarray(tree)]
