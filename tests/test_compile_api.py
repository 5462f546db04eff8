"""dsl.compile end to end on the CPU backend: caching, pytrees, statics, lowering, write-backs."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from helpers import assert_same

import dsl
import dsl.numpy as dnp
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_module
from compiler.passes.plan import Planner, align
from compiler.pipeline import STAGES, TARGETS, Options, _scores_kernels, planner, run_pipeline

USER_STAGES = ("traced", "functional", "grad", "optimized", "bufferized")  # ../shared/api.md


def test_second_call_does_not_retrace() -> None:
    @dsl.compile
    def f(x, y):
        return dnp.tanh(x) * y + 1.0

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = np.float32(2.0) * np.ones(4, np.float32)
    assert_same(f(x, y), np.tanh(x) * y + np.float32(1.0), rtol=1e-6)
    assert_same(f(x + 1, y), np.tanh(x + 1) * y + np.float32(1.0), rtol=1e-6)
    assert f.trace_count == 1
    f(x.astype(np.float64), y)  # a new dtype is a new signature: traced and compiled again
    assert f.trace_count == 2
    f(x.astype(np.float64), y)
    assert f.trace_count == 2


def test_pytrees_in_and_out_and_kwargs() -> None:
    @dsl.compile
    def f(params, x, scale=2.0):
        h = x @ params["w"] + params["b"]
        return {"out": h * scale, "parts": (h.sum(), [h.max()])}

    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((4, 3))
    h = x @ params["w"] + params["b"]
    want = {"out": h * 3.0, "parts": (np.asarray(h.sum()), [np.asarray(h.max())])}
    assert_same(f(params, x, scale=3.0), want, rtol=1e-12)
    assert_same(f(params, x=x, scale=3.0), want, rtol=1e-12)


class Pair(NamedTuple):
    w: Any
    b: Any


def test_namedtuples_are_pytree_nodes_rebuilt_as_their_class() -> None:
    """As in JAX: fields by name inside, the same class out, a plain tuple a different signature
    (a namedtuple argument arrived as a plain tuple: ``p.w`` raised AttributeError)."""

    @dsl.compile
    def f(p, x):
        h = x @ p.w + p.b
        return Pair(h.sum(), h * 2)

    rng = np.random.default_rng(2)
    p, x = Pair(rng.standard_normal((3, 2)), rng.standard_normal(2)), rng.standard_normal((4, 3))
    out = f(p, x)
    h = x @ p.w + p.b
    assert type(out) is Pair
    assert_same(out.w, np.asarray(h.sum()), rtol=1e-12)
    assert_same(out.b, h * 2, rtol=1e-12)
    g = dsl.grad(lambda p, x: (x @ p.w + p.b).sum())(p, x)
    assert type(g) is Pair
    assert_same(g.w, np.repeat(x.sum(0)[:, None], 2, axis=1), rtol=1e-12)
    assert_same(g.b, np.full(2, 4.0))
    carry = dsl.compile(lambda p: dsl.fori_loop(0, 3, lambda i, c: Pair(c.w + c.b, c.b), p))(Pair(0.0, 1.5))
    assert type(carry) is Pair and float(carry.w) == 4.5
    with pytest.raises(AttributeError):
        f(tuple(p), x)  # a plain tuple has no fields: traced anew, not the namedtuple's program


def test_static_argnums_are_part_of_the_key() -> None:
    @dsl.compile(static_argnums=(1,))
    def f(x, n):
        for _ in range(n):
            x = x * 2.0
        return x

    x = np.ones(3)
    assert_same(f(x, 3), np.full(3, 8.0))
    assert_same(f(x, 1), np.full(3, 2.0))
    assert f.trace_count == 2
    f(x, 3)
    assert f.trace_count == 2


def test_python_scalar_arguments_are_weak() -> None:
    @dsl.compile
    def f(x, lr):
        return x * lr

    out = f(np.ones(3, np.float32), 0.5)
    assert out.dtype == np.float32
    assert_same(out, np.full(3, 0.5, np.float32))


_WEAK_FLOAT_UNARY = """abs negative sign square sqrt cbrt exp exp2 expm1 log log2 log10 log1p sin cos tan
arctan sinh cosh tanh arcsinh floor ceil trunc rint round fix fabs reciprocal deg2rad rad2deg degrees radians
sinc""".split()
_WEAK_FLOAT_BINARY = """add subtract multiply divide floor_divide remainder mod fmod power float_power maximum
minimum fmax fmin copysign hypot arctan2 logaddexp logaddexp2 heaviside""".split()
_WEAK_INT = """add subtract multiply floor_divide remainder mod fmod maximum minimum fmax fmin bitwise_and
bitwise_or bitwise_xor left_shift right_shift""".split()


@pytest.mark.parametrize(
    "name, args",
    [(n, (2.5,)) for n in _WEAK_FLOAT_UNARY]
    + [(n, (2.5, 1.5)) for n in _WEAK_FLOAT_BINARY]
    + [(n, (7, 3)) for n in _WEAK_INT]
    + [("reciprocal", (3,)), ("abs", (-3,)), ("square", (3,))],
)
def test_functions_of_weak_scalars_stay_weak(name: str, args: tuple) -> None:
    """A function of Python numbers passed as arguments (weak) is weak, as JAX's weak types pass
    through its functions: added to a float32 (or int32) array it keeps the array's dtype, where
    NumPy's own function would return a typed scalar. Compositions took in typed constants and
    came out strong (float64 or int64) for ``%``, ``//``, ``where`` and a dozen others, so that a loop's
    ``c + (i % 2)`` changed its carry's type (2026-11-28, an outside prober)."""
    fn = getattr(dnp, name)
    base = np.ones(3, np.float32 if isinstance(args[0], float) else np.int32)
    got = dsl.compile(lambda b, *s: b + fn(*s))(base, *args)
    assert got.dtype == base.dtype, (name, got.dtype)
    want = base + getattr(np, name)(*args)  # (NumPy's typed scalar: compared in its dtype)
    np.testing.assert_allclose(got, want.astype(base.dtype), rtol=1e-6)


def test_operators_and_control_flow_of_weak_scalars_stay_weak() -> None:
    """``%``, ``//``, ``divmod`` and ``where`` of weak values (a Python number argument, a loop's
    counter) are weak: ``c + (i % 2)`` keeps a float32 carry's type, as in ``jax.lax.fori_loop``."""
    c = np.zeros(3, np.float32)
    got = dsl.compile(lambda c: dsl.fori_loop(0, 5, lambda i, c: c + (i % 2), c))(c)
    assert_same(got, np.full(3, 2, np.float32))
    ints = np.zeros(3, np.int32)
    got = dsl.compile(lambda c: dsl.fori_loop(0, 5, lambda i, c: c + (i % 3) * (i // 2), c))(ints)
    assert_same(got, np.full(3, sum((i % 3) * (i // 2) for i in range(5)), np.int32))
    x = np.ones(2, np.float32)
    assert_same(dsl.compile(lambda x, s: x + s % 7)(x, 5), np.full(2, 6, np.float32))
    assert_same(dsl.compile(lambda x, s: x + s // 2)(x, 5.0), np.full(2, 3, np.float32))
    assert_same(dsl.compile(lambda x, s: x + s % 2.0)(x, 5.0), np.full(2, 2, np.float32))
    q, r = dsl.compile(lambda x, s, t: tuple(x + v for v in divmod(s, t)))(x, 7.0, 2.0)
    assert_same(q, np.full(2, 4, np.float32))
    assert_same(r, np.full(2, 2, np.float32))
    on = dsl.compile(lambda x, c, s, t: x + dnp.where(c, s, t))(x, True, 2.5, 1.5)
    assert_same(on, np.full(2, 3.5, np.float32))
    typed = dsl.compile(lambda x, s: x + dnp.where(x > 0, s, np.float64(1.5)))(x, 2.5)  # a typed operand
    assert typed.dtype == np.float64


def test_results_never_alias_inputs_or_each_other() -> None:
    @dsl.compile
    def f(x):
        return x, x, x.reshape(-1)

    x = np.arange(6.0).reshape(2, 3)
    a, b, c = f(x)
    for r in (a, b, c):
        assert not np.shares_memory(r, x)
    assert not np.shares_memory(a, b)
    a[0, 0] = 99.0
    assert x[0, 0] == 0.0 and b[0, 0] == 0.0


def test_mutated_argument_is_written_back_and_others_are_untouched() -> None:
    @dsl.compile
    def step(w, g, lr):
        w -= lr * g
        w[0] = 0.0
        return (w * w).sum()

    w = np.arange(4, dtype=np.float32)
    g = np.ones(4, np.float32)
    g_before = g.copy()
    norm = step(w, g, 0.5)
    want = np.arange(4, dtype=np.float32) - 0.5
    want[0] = 0.0
    assert_same(w, want)
    assert_same(g, g_before)
    assert_same(norm, np.asarray((want * want).sum(), np.float32), rtol=1e-6)


def test_mutating_a_readonly_or_aliased_argument_is_a_clear_error() -> None:
    @dsl.compile
    def f(w, g):
        w += g
        return w.sum()

    w = np.ones(3)
    w.flags.writeable = False
    with pytest.raises(dsl.DSLError, match="read-only"):
        f(w, np.ones(3))
    w = np.ones(3)
    with pytest.raises(dsl.DSLError, match="share memory"):
        f(w, w)
    np.testing.assert_array_equal(w, np.ones(3))


def test_inputs_are_not_modified_and_odd_layouts_work() -> None:
    @dsl.compile
    def f(x):
        return (x * 2.0)[:, 1:]

    base = np.arange(24.0).reshape(4, 6)
    x_f = np.asfortranarray(base)
    x_strided = np.arange(48.0).reshape(4, 12)[:, ::2]
    for x in (x_f, x_strided):
        before = x.copy()
        assert_same(f(x), (x * 2.0)[:, 1:])
        np.testing.assert_array_equal(x, before)


def test_zero_d_and_empty_arrays() -> None:
    @dsl.compile
    def f(x, e):
        return x * 2.0, e.sum(), e * 3.0

    x = np.array(1.5)
    e = np.zeros((0, 3))
    out = f(x, e)
    assert_same(out, (np.array(3.0), np.array(0.0), np.zeros((0, 3))))


def test_lower_stages_and_round_trip() -> None:
    @dsl.compile
    def f(x, y):
        z = x @ y
        z += 1.0
        return dsl.nn.softmax(z)

    lo = f.lower(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    assert lo.stages() == list(STAGES)
    assert [s for s in lo.stages() if s in USER_STAGES] == list(USER_STAGES)  # in pipeline order
    for stage in lo.stages():
        text = lo.ir(stage)
        assert "func.func @f" in text
        assert print_module(parse_module(text)) == text
    assert "dsl.offset" in lo.ir("bufferized") or "dsl.buffer" in lo.ir("bufferized")
    assert "memref<" in lo.ir("bufferized")
    assert "@numba.njit" in lo.source() or "njit" in lo.source()
    assert lo.memory_plan().naive_bytes > 0
    assert lo.ir("grad") == lo.ir("functional")  # nothing to differentiate: autodiff changes nothing
    with pytest.raises(dsl.DSLError, match="no IR stage 'nope'"):
        lo.ir("nope")
    assert f.trace_count == 1


def test_cuda_target_lowers_without_a_gpu() -> None:
    """Compiling for CUDA needs no device (issue 26, item 5): lower, the stages, the memory plan, the
    source and the PTX; only the first call needs the GPU, and says so at the caller's line."""
    from cuda_ptx import PTX_AVAILABLE

    from runtime.devices import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present: the call would run")
    x = np.ones((64, 32), np.float32)
    f = dsl.compile(lambda x: dsl.nn.softmax(x * 2.0).sum(axis=1), target="cuda")
    lo = f.lower(x)
    assert lo.program.target == "cuda" and "cuda.jit" in lo.source()
    assert "memref<64x32xf32>" in lo.ir("bufferized") and lo.memory_plan().naive_bytes > 0
    assert "dsl.kernel" in lo.ir("row_fused")
    if PTX_AVAILABLE:
        assert ".target sm_80" in lo.ptx((8, 0))
    with pytest.raises(
        dsl.DeviceError, match=r"test_compile_api.py:\d+: target='cuda' needs a usable NVIDIA GPU"
    ):
        f(x)


def test_remat_and_schedule_score_the_plan_that_ships(monkeypatch) -> None:
    """The planned peaks remat and schedule compare are those of the fuse -> rows -> plan that the
    pipeline runs after them: with the target's bands, and the same options. CUDA's score includes
    its kernels' scratch (``KernelPasses.scored``); the CPU's is the shipped plan without its kernels'
    scratch (a few rows per chunk, placed after by the scratch pass: building CPU kernels for every
    candidate cost 1.2-2.8x pipeline time)."""
    scored: list[tuple[bool, int]] = []
    peak = Planner.peak

    def recording(self: Planner, func: object) -> int:
        scored.append((self.bands is not None, self.pack_by_size))
        return peak(self, func)

    monkeypatch.setattr(Planner, "peak", recording)

    def layer(x, w):
        h = x @ w
        c = h - h.mean(axis=1, keepdims=True)
        return (c * c).sum() + (h * 3.0).sum()

    x, w = np.ones((32, 16), np.float32), np.ones((16, 16), np.float32)
    func = dsl.compile(layer)._trace((x, w))[0]
    for target in ("cpu", "cuda"):
        bands = TARGETS[target].bands  # the CPU's printer writes bands (CUDA's too, once it does)
        scored.clear()
        options = Options(target=target, pack_by_size=False)
        state, stages = run_pipeline(func, options)
        assert scored and set(scored) == {(bands, False)}
        assert state.plan is not None
        shipped = state.plan.peak_bytes
        if not _scores_kernels(TARGETS[target]):
            assert any(r.scratch_of is not None for r in state.plan.buffers)  # a band's partials
            shipped = max(r.offset + align(r.bytes) for r in state.plan.buffers if r.scratch_of is None)
        assert planner(options).peak(stages["optimized"]) == shipped


def test_ir_dump_env(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DSL_DUMP_IR", str(tmp_path))

    @dsl.compile
    def g(x):
        return x + 1

    g(np.ones(2))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert [n.split(".")[3] for n in names] == list(STAGES)  # numbered 00, 01 ...: listed in order
    g(np.ones(3))  # another signature, and another function of the same name: files of their own
    dsl.compile(lambda x: x * 2)(np.ones(2))
    dsl.compile(lambda x: x * 3)(np.ones(2))
    programs = {tuple(p.name.split(".")[:2]) for p in tmp_path.iterdir()}
    assert len(programs) == 4 and len(list(tmp_path.iterdir())) == 4 * len(STAGES), programs


def test_ir_dump_keeps_each_transform_and_option_of_one_function(tmp_path, monkeypatch) -> None:
    """compile, grad, value_and_grad and inplace=False of one function share its traced stage: the
    dump's file names once hashed only that stage, so each overwrote the others' files."""
    monkeypatch.setenv("DSL_DUMP_IR", str(tmp_path))

    def f(x):
        return (dnp.tanh(x * 2.0) * dnp.exp(x)).sum()

    x = np.linspace(-1.0, 1.0, 64)
    dsl.compile(f)(x)
    dsl.grad(f)(x)
    dsl.value_and_grad(f)(x)
    dsl.compile(f, inplace=False)(x)
    files: dict[str, list[str]] = {}
    for p in tmp_path.iterdir():
        name, program, _, stage, _ = p.name.split(".")
        assert name == "f"
        files.setdefault(program, []).append(stage)
    assert len(files) == 4, sorted(files)
    assert all(sorted(stages) == sorted(STAGES) for stages in files.values()), files
    dsl.compile(f)(x)  # the same program again: the same names, written over
    assert len(list(tmp_path.iterdir())) == 4 * len(STAGES)


def test_defaults_the_caller_did_not_pass_stay_python_values() -> None:
    def f(x, flag=True, scale=2.0):
        return x * scale if flag else x  # `if` on a traced bool would raise

    compiled = dsl.compile(f)
    assert_same(compiled(np.ones(2)), np.full(2, 2.0))
    assert_same(compiled(np.ones(2), scale=3.0), np.full(2, 3.0))  # passed: traced as an argument
    assert_same(dsl.compile(dsl.nn.gelu)(np.zeros(3)), np.zeros(3))
    with pytest.raises(dsl.TraceError, match="bool"):
        compiled(np.ones(2), False)  # passed explicitly: traced, as in JAX


# ---- Python calling conventions --------------------------------------------------------------------


def test_keyword_only_parameters_with_and_without_defaults() -> None:
    @dsl.compile
    def f(x, *, scale, shift=1.0):
        return x * scale + shift

    x = np.arange(3.0)
    assert_same(f(x, scale=2.0), x * 2.0 + 1.0)
    assert_same(f(x, scale=np.full(3, 3.0), shift=np.ones(3)), x * 3.0 + 1.0)
    assert_same(f(x, shift=0.0, scale=2.0), x * 2.0)
    with pytest.raises(dsl.CallError, match="scale"):
        f(x)


def test_var_keyword_arguments_are_traced_leaves() -> None:
    @dsl.compile
    def f(x, **extra):
        out = x
        for name in sorted(extra):
            out = out + extra[name]
        return out

    x = np.arange(3.0)
    assert_same(f(x), x)
    assert_same(f(x, a=np.ones(3), b=np.full(3, 2.0)), x + 3.0)
    assert_same(f(x, b=np.full(3, 2.0), a=np.ones(3)), x + 3.0)
    assert f.trace_count == 3  # no kwargs; a and b in one order; the other order
    assert_same(f(x, a=np.ones(3), b=np.full(3, 5.0)), x + 6.0)
    assert f.trace_count == 3
    assert_same(f(x, c=np.ones(3)), x + 1.0)  # other names: another signature
    assert f.trace_count == 4


def test_kwargs_are_modified_in_place_like_positional_arguments() -> None:
    @dsl.compile
    def step(w, **state):
        state["m"] *= 0.5
        state["m"] += w
        return state["m"].sum()

    m = np.ones(2)
    assert float(step(np.ones(2), m=m)) == 3.0
    np.testing.assert_array_equal(m, [1.5, 1.5])


def test_var_positional_and_positional_only_parameters() -> None:
    @dsl.compile
    def f(x, /, y, *rest):
        return x - y + sum(rest)

    x, y = np.full(2, 5.0), np.ones(2)
    assert_same(f(x, y), x - y)
    assert_same(f(x, y=y), x - y)
    assert_same(f(x, y, np.ones(2), np.ones(2)), x - y + 2.0)
    with pytest.raises(dsl.CallError, match="positional"):
        f(x=x, y=y)


def test_error_names_a_keyword_argument() -> None:
    @dsl.compile
    def f(x, **extra):
        return x + extra["bad"]

    with pytest.raises(dsl.CallError, match="argument 'bad' is of type str"):
        f(np.ones(2), bad="text")


def test_static_argnames_and_negative_static_argnums() -> None:
    def f(x, n, *, power=1):
        for _ in range(n):
            x = x * 2.0
        return x**power

    x = np.ones(2)
    by_name = dsl.compile(f, static_argnames=("n", "power"))
    assert_same(by_name(x, 2, power=2), np.full(2, 16.0))
    assert_same(by_name(x, n=1, power=3), np.full(2, 8.0))
    assert by_name.trace_count == 2
    assert_same(by_name(x, 1, power=3), np.full(2, 8.0))  # n by position or by name: one signature
    assert by_name.trace_count == 2
    negative = dsl.compile(f, static_argnums=-1)
    assert_same(negative(x, 3), np.full(2, 8.0))
    with pytest.raises(dsl.CallError, match="static_argnums"):
        dsl.compile(f, static_argnums=5)
    with pytest.raises(dsl.CallError, match="static_argnames names 'm'"):
        dsl.compile(f, static_argnames="m")


def test_static_argnums_of_a_gradient_are_honoured() -> None:
    def f(x, scale, k):
        return (x**k).sum() * scale

    x = np.array([1.0, 2.0])
    g = dsl.compile(dsl.grad(f), static_argnums=(2,))
    assert_same(g(x, 1.0, 3), 3 * x**2)
    assert_same(g(x, 2.0, 2), 4 * x)
    assert g.trace_count == 2
    by_name = dsl.compile(dsl.value_and_grad(f, argnums=(0, 1)), static_argnames="k")
    value, (gx, gs) = by_name(x, 2.0, k=2)
    assert float(value) == 10.0 and float(gs) == 5.0
    assert_same(gx, 4 * x)


def test_grad_of_a_compiled_function_keeps_its_static_arguments() -> None:
    def f(x, k):
        for _ in range(k):  # range() of a traced value would raise
            x = x * x
        return x.sum()

    inner = dsl.compile(f, static_argnums=1)
    x = np.array([1.0, 2.0])
    assert_same(dsl.grad(inner)(x, 2), 4 * x**3)
    assert_same(dsl.value_and_grad(inner)(x, 1)[1], 2 * x)
    assert_same(dsl.hessian(inner)(x, 1), np.diag([2.0, 2.0]))
    assert_same(dsl.vjp(inner, x, 1)[1](np.ones(()))[0], 2 * x)


def test_argnums_naming_a_static_or_missing_argument_is_a_clear_error() -> None:
    def f(x, k, bias=0.0):
        return (x * k).sum() + bias

    x = np.ones(2)
    with pytest.raises(dsl.TransformError, match="argument 'k', which is static"):
        dsl.compile(dsl.grad(f, argnums=1), static_argnums=1)(x, 2.0)
    with pytest.raises(dsl.TransformError, match="argument 'bias', which was not passed"):
        dsl.grad(f, argnums=2)(x, 2.0)
    assert float(dsl.grad(f, argnums=2)(x, 2.0, 1.0)) == 1.0


def test_gradient_with_keyword_arguments() -> None:
    def f(x, *, w, b=0.0):
        return (x * w + b).sum()

    x, w = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    assert_same(dsl.grad(f)(x, w=w), w)
    assert_same(dsl.grad(f)(x, w=w, b=1.0), w)
    assert_same(dsl.grad(lambda x, w: dsl.grad(f)(x, w=w).sum())(x, w), np.zeros(2))


def test_transforms_keep_defaults_and_static_arguments_python_values() -> None:
    def f(x, mode="sum"):
        y = x * x * x
        return y.sum() if mode == "sum" else y.mean()  # `mode` must stay a str

    x = np.array([1.0, 2.0])
    assert_same(dsl.grad(lambda x: dsl.grad(f)(x).sum())(x), 6 * x)
    assert_same(dsl.hessian(f)(x), np.diag(6 * x))
    assert_same(dsl.vjp(f, x)[1](np.ones(()))[0], 3 * x**2)
    assert_same(dsl.compile(dsl.grad(f), static_argnames="mode")(x, mode="mean"), 1.5 * x**2)
    assert_same(dsl.compile(dsl.hessian(f), static_argnames="mode")(x, mode="mean"), np.diag(3 * x))


def test_precision_option() -> None:
    """``precision`` (``../shared/api.md``, "Options for the GPU"): "highest" by default, "tf32" opts
    float32 matmuls into TensorFloat-32 on a GPU. Every float matmul launcher of a CUDA program gets
    it (its backward's and a loop body's too); the CPU computes in full float32 either way; another
    value is an error at the user's line. (On the GPU: tests/cuda_sim/sim_precision.py.)"""
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)

    def loss(w, x):
        h = dsl.fori_loop(0, 3, lambda i, h: dnp.tanh(h @ w), x)
        return (h @ w.T).sum()

    grad = dsl.grad(loss)
    want = dsl.compile(grad)(w, x)
    np.testing.assert_array_equal(dsl.compile(grad, precision="tf32")(w, x), want)
    for precision, spelled in (("highest", ", stream)"), ("tf32", ", stream, 'tf32')")):
        source = dsl.compile(grad, target="cuda", precision=precision).lower(w, x).source()
        launchers = [line for line in source.splitlines() if "_matmul_launcher(_fast_launch(" in line]
        assert len(launchers) >= 4 and all(line.endswith(spelled) for line in launchers), launchers
    with pytest.raises(dsl.DeviceError, match=r"test_compile_api.py:\d+: unknown precision 'fp16'"):
        dsl.compile(loss, precision="fp16")


def test_the_binders_fast_paths_give_the_slots_and_layout_of_a_full_bind() -> None:
    """A positional call of a plain signature, one leaving trailing defaults out, and one of
    ``f(a, *rest)`` skip ``inspect.Signature.bind`` (most of a call's host time with a few arguments):
    they must give what it gives."""
    from dsl.binding import Binder

    def plain(a, b, c=3, d=4):
        return a

    def star(a, *rest):
        return a

    calls = [(plain, (1, 2)), (plain, (1, 2, 5)), (plain, (1, 2, 5, 6)), (star, (1,)), (star, (1, 2, 3))]
    for fn, args in calls:
        fast = Binder(fn, static_argnums=(0,)).bind(args, {})
        slow_binder = Binder(fn, static_argnums=(0,))
        slow_binder.positional, slow_binder._fast_tails, slow_binder._star = None, {}, None
        (slots, layout), (want_slots, want) = fast, slow_binder.bind(args, {})
        assert slots == want_slots and layout.n_passed == want.n_passed, (fn.__name__, args)
        assert layout._replace(n_args=-1) == want._replace(n_args=-1), (fn.__name__, args)


def test_an_ordered_dict_keeps_its_order_and_a_defaultdict_its_factory() -> None:
    """As in JAX: a dict's keys are sorted, an ``OrderedDict`` keeps its insertion order and class,
    a ``defaultdict`` its default factory (found 2026-11-27: both reached the function as a plain
    dict with sorted keys, so order-dependent code differed from NumPy's answer)."""
    import collections
    import functools

    x, y = np.ones(2), 2 * np.ones(2)
    digits = dsl.compile(lambda p: functools.reduce(lambda acc, v: acc * 10 + v, p.values(), 0.0))
    np.testing.assert_array_equal(digits(collections.OrderedDict([("b", y), ("a", x)])), [21.0, 21.0])
    np.testing.assert_array_equal(digits({"b": y, "a": x}), [12.0, 12.0])
    same = dsl.compile(lambda p: p)(collections.OrderedDict([("b", y), ("a", x)]))
    assert type(same) is collections.OrderedDict and list(same) == ["b", "a"]
    factory = functools.partial(float, 0.5)
    d = collections.defaultdict(factory, a=x)
    np.testing.assert_array_equal(dsl.compile(lambda p: p["a"] + p["missing"])(d), x + 0.5)


def test_a_big_endian_array_is_its_dtype_and_unsortable_dict_keys_name_the_argument() -> None:
    """An array of another byte order is its dtype, converted at the call as NumPy's ufuncs do (it
    was refused: "has dtype >f4 ... convert it to float32"), a mutated one written back in its own
    order; a dict argument whose keys do not sort is a CallError naming it at the caller's line (it
    was a bare TypeError from the flattening)."""
    x = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(dsl.compile(lambda x: x * 2)(x), [0.0, 2.0, 4.0])
    y = np.arange(3, dtype=">f8")

    def bump(y):
        y += 1

    dsl.compile(bump)(y)
    assert y.dtype == np.dtype(">f8")
    np.testing.assert_array_equal(y, [1.0, 2.0, 3.0])
    where = r"test_compile_api.py:\d+: argument 'p': a dict's keys must sort"
    with pytest.raises(dsl.CallError, match=where):
        dsl.compile(lambda p: p[1] + p["a"])({1: x, "a": x})


def test_a_decorators_wrapper_is_bound_against_its_own_parameters() -> None:
    """``functools.wraps`` names the wrapped function as ``__wrapped__``; a wrapper with parameters
    of its own is called with those (as Python and jax.jit call it), while a pass-through
    ``(*args, **kwargs)`` wrapper (and dslc's own transforms) keeps the wrapped function's names."""
    import functools

    def scaled(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(x: Any, scale: Any) -> Any:
            return f(x) * scale

        return wrapper

    def passing(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        return wrapper

    g = scaled(lambda x: dnp.sin(x))
    x = np.linspace(-1.0, 1.0, 5)
    assert_same(dsl.compile(g)(x, 2.0), 2.0 * np.sin(x))
    assert_same(dsl.grad(lambda x, s: g(x, s).sum(), argnums=1)(x, 2.0), np.sin(x).sum())
    assert_same(dsl.vmap(g, in_axes=(0, None))(x, 3.0), 3.0 * np.sin(x))
    assert_same(dsl.grad(scaled(lambda x: dnp.sin(x).sum()))(x, 2.0), 2.0 * np.cos(x))
    factorial = dsl.compile(lambda c: dsl.fori_loop(0, 3, scaled(lambda i: i + 1.0), c))  # body(i, c)
    assert_same(factorial(x), 6 * x)

    def keyword(f: Any) -> Any:
        @functools.wraps(f)
        def wrapper(*args: Any, scale: float = 1.0, **kwargs: Any) -> Any:
            return f(*args, **kwargs) * scale

        return wrapper

    assert_same(dsl.compile(keyword(lambda x: dnp.sin(x)))(x, scale=2.0), 2.0 * np.sin(x))

    @dsl.compile(static_argnames="n")
    @passing
    def h(x: Any, n: int = 2) -> Any:
        return x**n

    assert_same(h(x, n=3), x**3)
    assert_same(dsl.grad(lambda x: h(x).sum())(x), 2 * x)


def test_an_outside_probers_numpy_findings() -> None:
    """Found by an outside prober (2026-11-28), each against NumPy, JAX or the exact derivative."""
    x = np.array([0.7, 1.9])
    got = dsl.compile(lambda x: dnp.zeros(2, dtype=None) + x.astype(dnp.int32))(x)  # float64 zeros
    assert_same(got, np.zeros(2, dtype=None) + x.astype(np.int32))
    assert dsl.compile(lambda x: dnp.ones(2, dtype=None) + x[:1].astype(dnp.int32))(x).dtype == np.float64
    with pytest.raises(OverflowError):  # NumPy's: 1 + 2**38 does not fit int32 (the step wrapped to 0)
        dsl.compile(lambda x: dnp.arange(1, 2**40, 2**38, dtype=dnp.int32) + x)(np.zeros(4, np.int32))
    assert_same(
        dsl.compile(lambda x: dnp.arange(0.5, 4, 1.5, dtype=dnp.int32) + x)(np.zeros(3, np.int32)),
        np.arange(0.5, 4, 1.5, dtype=np.int32),
    )
    # logaddexp2 at x == y is smooth: 2**x / (2**x + 2**y), half each (it gave all to x)
    ties = np.array([1.0, 0.0, -3.0])
    for grads in dsl.grad(lambda x, y: dnp.sum(dnp.logaddexp2(x, y)), argnums=(0, 1))(ties, ties.copy()):
        assert_same(grads, np.full(3, 0.5))
    # d2(x**y)/dx dy = x**(y - 1) (1 + y log x): 1/3 at (3, 0), and the Hessian symmetric (it was 1)
    hessian = dsl.hessian(lambda z: dnp.power(z[0], z[1]))(np.array([3.0, 0.0]))
    np.testing.assert_allclose(hessian, [[0.0, 1 / 3], [1 / 3, np.log(3.0) ** 2]], rtol=1e-12)
