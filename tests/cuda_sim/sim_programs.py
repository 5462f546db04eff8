"""Whole programs on ``target="cuda"`` in the simulator: NumPy and device-array arguments, write-back
and donation, autodiff, every reduction strategy, matmuls, constants, the sanitizer; each against the
CPU backend (itself checked against NumPy and the interpreter elsewhere)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from numba import cuda

import dsl
import dsl.numpy as dnp
from runtime.cublas import gemm_calls as GEMM_CALLS
from runtime.errors import DSLError, ShapeError

RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def both(fn, *args, **kwargs):
    """``fn`` compiled for CUDA and for the CPU, on copies of ``args``."""
    on_gpu = dsl.compile(fn, target="cuda", **kwargs)(*[np.copy(a) for a in args])
    on_cpu = dsl.compile(fn, target="cpu", **kwargs)(*[np.copy(a) for a in args])
    return on_gpu, on_cpu


def close(got, want, rtol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("inplace", [True, False])
def test_mlp_training_step(inplace: bool) -> None:
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = dnp.tanh(h @ w + b)
        w, b = params[-1]
        logits = h @ w + b
        return -(dsl.nn.log_softmax(logits) * y).sum(axis=1).mean()

    def step(params, x, y):
        value, grads = dsl.value_and_grad(loss)(params, x, y)
        for (w, b), (gw, gb) in zip(params, grads):
            w -= 0.1 * gw
            b -= 0.1 * gb
        return value

    sizes = [6, 5, 5, 3]
    params = [(f32(a, b) * 0.5, f32(b) * 0.1) for a, b in zip(sizes, sizes[1:])]
    x, y = f32(4, 6), np.eye(3, dtype=np.float32)[[0, 2, 1, 0]]
    gpu_params = [(w.copy(), b.copy()) for w, b in params]
    cpu_params = [(w.copy(), b.copy()) for w, b in params]
    got = dsl.compile(step, target="cuda", inplace=inplace)(gpu_params, x, y)
    want = dsl.compile(step, target="cpu", inplace=inplace)(cpu_params, x, y)
    close(got, want)
    for (gw, gb), (cw, cb) in zip(gpu_params, cpu_params):
        close(gw, cw)
        close(gb, cb)


def test_device_arrays_stay_on_device_and_are_written_in_place() -> None:
    def sgd(w, g):
        w -= 0.5 * g
        return (w * w).sum(), w + 1

    w0, g0 = f32(33, 7), f32(33, 7)
    dw, dg = cuda.to_device(w0), cuda.to_device(g0)
    total, shifted = dsl.compile(sgd, target="cuda")(dw, dg)
    assert not isinstance(total, np.ndarray) and not isinstance(shifted, np.ndarray)  # results on device
    new = w0 - np.float32(0.5) * g0
    close(dw.copy_to_host(), new)
    close(total.copy_to_host(), (new * new).sum(dtype=np.float32), rtol=1e-4)
    close(shifted.copy_to_host(), new + 1)
    close(dg.copy_to_host(), g0)  # not written


def test_numpy_write_back_and_donation() -> None:
    def scale_(x, y):
        x *= 2.0
        return y * 3.0

    x, y = f32(5, 4), f32(5, 4)
    x0, y0 = x.copy(), y.copy()
    out = dsl.compile(scale_, target="cuda", donate_argnums=1)(x, y)
    close(x, x0 * 2)
    close(out, y0 * 3)


def test_aliasing_device_arguments_are_refused() -> None:
    def add_(x, y):
        x += y
        return x.sum()

    d = cuda.to_device(f32(8))
    with pytest.raises(DSLError, match="share"):
        dsl.compile(add_, target="cuda")(d, d)


def test_device_argument_dtype_and_shape_are_checked() -> None:
    f = dsl.compile(lambda x: x * 2, target="cuda")
    f(cuda.to_device(f32(3)))
    with pytest.raises(ShapeError):
        f._cache[next(iter(f._cache))].run(cuda.to_device(f32(4)))
    with pytest.raises(DSLError, match="dtype"):
        f._cache[next(iter(f._cache))].run(cuda.to_device(np.ones(3)))


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((5, 300), 1),  # a block and a tree per output row
        ((300, 5), 0),  # a leading reduced axis: the multi-index path, a block per output
        ((600, 20), 0),  # the innermost axis kept: columns side by side, chunks into partials
        ((3, 300, 9), 1),  # ... with an outer kept axis too
        ((3, 4, 50), (0, 2)),  # non-adjacent axes: a serial loop per output
        ((70000,), None),  # two passes: chunks into partials, then an in-order combine
        ((2, 70000), 1),
        ((4, 0), 1),  # an empty reduced extent: the identity
    ],
)
def test_reduction_strategies(shape, axis) -> None:
    x = f32(*shape)
    for fn in (lambda a: a.sum(axis=axis), lambda a: a.max(axis=axis), lambda a: dnp.exp(a).min(axis=axis)):
        if x.size == 0 and fn is not None and x.shape[1] == 0:
            fn = lambda a: a.sum(axis=axis)  # noqa: E731 (max of an empty axis is an error in NumPy)
        got, want = both(fn, x)
        close(got, want, rtol=1e-4)


def test_reduction_is_deterministic() -> None:
    x = f32(70000) * 100
    f = dsl.compile(lambda a: a.sum(), target="cuda")
    assert f(x).tobytes() == f(x).tobytes()


def test_matmuls_batched_integer_and_empty() -> None:
    a, b = f32(2, 3, 17, 9), f32(2, 3, 9, 6)
    got, want = both(lambda p, q: p @ q, a, b)
    close(got, want)
    ia, ib = RNG.integers(-5, 5, (7, 5)), RNG.integers(-5, 5, (5, 3))
    got, want = both(lambda p, q: p @ q, ia, ib)
    np.testing.assert_array_equal(got, want)
    got, want = both(lambda p, q: p @ q, f32(3, 0), f32(0, 4))
    close(got, want)


def test_matmuls_through_strided_views() -> None:
    """Split heads read in place, the head merge written in place (fuse.operand_view, result_view)."""

    def heads(x, w):
        q = dnp.transpose((x @ w).reshape(2, 3, 2, 2), (0, 2, 1, 3))  # (B, H, T, dh) of (B*T, D)
        a = q @ dnp.transpose(q, (0, 1, 3, 2)) @ q
        return dnp.transpose(a, (0, 2, 1, 3)).reshape(6, 4) @ w

    got, want = both(heads, f32(6, 4), f32(4, 4))
    close(got, want, rtol=1e-4)
    got, want = both(lambda a, b: dnp.transpose(a @ b, (0, 2, 1)).reshape(6, 3), f32(2, 3, 5), f32(2, 5, 3))
    close(got, want, rtol=1e-4)  # written as the transposed product


@pytest.mark.parametrize("seed", range(6))
def test_random_layouts_around_matmuls(seed) -> None:
    from test_matmul_views import _layout_case  # tests/ is on the path (its conftest)

    program, args = _layout_case(seed)
    got, want = both(lambda a, b: program(dnp, a, b), *args)
    close(got, want, rtol=1e-10)


def test_matmul_accumulation_epilogue() -> None:
    """``c - 0.5 * (a @ b)`` and an in-place SGD step: the kernel's alpha and beta (fuse.accumulation)."""
    got, want = both(lambda a, b, c: c - 0.5 * (a @ b), f32(5, 7), f32(7, 6), f32(5, 6))
    close(got, want, rtol=1e-4)

    def step(w, x, g):
        w -= 0.1 * (x.T @ g)
        return (x @ w).sum()

    w, x, g = f32(6, 4), f32(9, 6), f32(9, 4)
    on_gpu, on_cpu = np.copy(w), np.copy(w)
    close(dsl.compile(step, target="cuda")(on_gpu, x, g), dsl.compile(step)(on_cpu, x, g), rtol=1e-4)
    close(on_gpu, on_cpu)


def fresh(fn):
    """``fn`` as a new function object: compiled anew (a new executable, bound anew)."""
    return lambda *a: fn(*a)


def test_float_matmuls_run_on_cublas_where_it_is(monkeypatch) -> None:
    """On a GPU, float matmuls go to cuBLAS (runtime/cublas.py): transposed operands, padded views,
    strided and two-axis batches, the in-place accumulation; the same values as the generated
    kernel (``DSL_CUDA_BLAS=0``) and as the CPU backend. The simulator has no cuBLAS: there every
    matmul runs the kernel (the planned calls are checked in tests/test_cublas.py)."""
    from runtime import cublas

    on_gpu = os.environ.get("NUMBA_ENABLE_CUDASIM") != "1"
    assert cublas.available() is on_gpu, "libcublas did not load (pip install 'dslc[cuda]')"
    planned = []
    monkeypatch.setattr(cublas, "gemm_calls", lambda *sizes: planned.append(sizes) or GEMM_CALLS(*sizes))

    def attention(x, w):
        q = dnp.transpose((x @ w).reshape(2, 8, 4, 8), (0, 2, 1, 3))  # (B, H, T, dh) of (B*T, D)
        a = q @ dnp.transpose(q, (0, 1, 3, 2)) @ q
        return dnp.transpose(a, (0, 2, 1, 3)).reshape(16, 32) @ w.T

    def step(w, x, g):
        w -= 0.1 * (x.T @ g)
        return x @ w

    cases = [(attention, (f32(16, 32) / 4, f32(32, 32) / 4)), (step, (f32(12, 10), f32(33, 12), f32(33, 10)))]
    cases += [(lambda a, b: a @ b, (f32(3, 40, 17).astype(np.float64), f32(17, 9).astype(np.float64)))]
    for fn, args in cases:
        before = len(planned)
        got_args = [np.copy(a) for a in args]
        got = dsl.compile(fn, target="cuda")(*got_args)
        assert (len(planned) > before) is on_gpu, f"cuBLAS planned {len(planned) - before} calls"
        close(got, dsl.compile(fn, target="cpu")(*[np.copy(a) for a in args]), rtol=1e-4)
        if on_gpu:  # against the kernel
            monkeypatch.setenv("DSL_CUDA_BLAS", "0")  # read when an executable binds: a new one
            before = len(planned)
            kernel_args = [np.copy(a) for a in args]
            want = dsl.compile(fresh(fn), target="cuda")(*kernel_args)
            assert len(planned) == before, "DSL_CUDA_BLAS=0 still ran cuBLAS"
            monkeypatch.delenv("DSL_CUDA_BLAS")
            close(got, want, rtol=1e-4)
            close(got_args[0], kernel_args[0], rtol=1e-4)


def test_repeated_calls_with_new_arrays() -> None:
    """Launches reuse the flattened arguments that did not change (runtime/cuda_launch.py): calls
    with new arrays each time, on the device and from NumPy, must see the new ones."""
    f = dsl.compile(lambda a, b: dnp.tanh(a @ b).sum(axis=0) + a[0], target="cuda")
    for i in range(4):
        a, b = f32(6, 40), f32(40, 40)
        got = f(cuda.to_device(a), cuda.to_device(b)) if i % 2 else f(a, b)
        got = got.copy_to_host() if hasattr(got, "copy_to_host") else got
        want = np.tanh(a.astype(np.float64) @ b).sum(axis=0) + a[0]
        close(got, want.astype(np.float32), rtol=1e-4)


def test_big_constant_array_and_views() -> None:
    table = RNG.standard_normal((40, 30)).astype(np.float32)

    def f(x):
        y = x[::2, 1:] * table[::2, 1:]
        y[0] = 0.0
        return y.T + dnp.arange(20, dtype=dnp.float32)

    got, want = both(f, f32(40, 30))
    close(got, want)


def test_sanitizer_plan_runs() -> None:
    def f(x):
        a = dnp.exp(x)
        b = a.sum(axis=0)
        return dnp.tanh(a) + b

    x = f32(6, 5)
    from compiler.pipeline import Options, compile_function

    traced = dsl.compile(f, target="cpu").lower(x)._program.stages["traced"]
    program = compile_function(traced, Options(target="cuda", sanitize=True))
    close(program.executable(x)[0], dsl.compile(f, target="cpu")(x))


def test_second_derivative() -> None:
    def u(x):
        return (dnp.sin(x) * x).sum()

    x = f32(7)
    got, want = both(dsl.grad(lambda v: dsl.grad(u)(v).sum()), x)
    close(got, want, rtol=1e-4)


def test_launch_sizes_follow_the_device() -> None:
    """Under the simulator every thread is a Python thread: the generated module launches small; on a
    GPU it launches full size."""
    run = dsl.compile(lambda a: a.sum(axis=1), target="cuda").lower(f32(3, 200)).program.executable.run
    module = run.__globals__
    sim = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    want = (True, 8, 4, 2) if sim else (False, 256, 16, 8192)
    assert (module["SIM"], module["TPB"], module["TILE"], module["MAXB"]) == want


def test_device_array_to_a_cpu_program_is_an_error() -> None:
    f = dsl.compile(lambda x: x * 2, target="cpu")
    with pytest.raises(DSLError, match=r"sim_programs.py:\d+.*'x' is a GPU array.*target='cuda'"):
        f(cuda.to_device(f32(3)))


HOST_LAYOUTS = {
    "c": lambda base: base.reshape(4, 6),
    "fortran": lambda base: np.asfortranarray(base.reshape(4, 6)),
    "transposed": lambda base: base.reshape(6, 4).T,
    "strided_rows": lambda base: np.concatenate([base.reshape(4, 6)] * 2, axis=0)[::2],
}


@pytest.mark.parametrize("layout", HOST_LAYOUTS)
def test_host_argument_layouts_follow_numpy(layout: str) -> None:
    def f(x, y):
        r = x.reshape(-1)  # a view of C-ordered x only (NumPy decides by the caller's strides)
        r[0] = 100.0
        t = x.T.reshape(-1)  # a view of Fortran-ordered x only
        t[1] = -3.0
        y[1:, ::2] *= 2.0  # written back into the caller's strided y
        return r * 1.0, t * 1.0

    def make():
        x_base, y_base = np.arange(24, dtype=np.float32) - 5.5, np.arange(24, dtype=np.float32)
        return (x_base, y_base), (HOST_LAYOUTS[layout](x_base), HOST_LAYOUTS[layout](y_base))

    (want_bases, want_args), (got_bases, got_args) = make(), make()
    want = f(*want_args)
    got = dsl.compile(f, target="cuda")(*got_args)
    for g, w in zip(got, want):
        close(g, w)
    for g, w in zip(got_bases, want_bases):  # the arguments (views of these) as NumPy left them
        np.testing.assert_array_equal(g, w)


def test_non_contiguous_device_argument_is_refused() -> None:
    """At the caller's line, as the other call-time checks (found 2026-11-27: no line)."""
    d = cuda.to_device(np.asfortranarray(f32(4, 6)))
    with pytest.raises(DSLError, match=rf"^{re.escape(__file__)}:\d+: .*non-contiguous"):
        dsl.compile(lambda x: x.reshape(-1) * 2.0, target="cuda")(d)
