"""The memory planner end to end: in-place reuse, direct write-backs, strict mode, donation, reports,
the sanitizer, and the arena matching the plan."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from helpers import assert_same

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(3)
A = rng.standard_normal((16, 8)).astype(np.float32)
W = rng.standard_normal((8, 8)).astype(np.float32)


def _line(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


def test_scale_inplace_is_the_same_array_and_needs_no_new_buffer() -> None:
    def f(a, w):
        x = a @ w
        y = x.scale_(2.0)
        assert y is x
        return (y @ w).sum()

    compiled = dsl.compile(f)
    plan = compiled.lower(A, W).memory_plan()
    x_row, y_row, product_row = plan.buffers  # x = a @ w, y = x * 2, y @ w (read by the sum)
    assert y_row.reused_from == x_row.name and y_row.offset == x_row.offset  # y: no new buffer
    assert product_row.reused_from is None and product_row.offset != y_row.offset
    assert_same(compiled(A, W), np.asarray(((A @ W) * 2 @ W).sum(), np.float32), rtol=1e-4)
    assert "scale_" in compiled.lower(A, W).explain_inplace()


def test_sgd_step_updates_the_callers_array_without_an_arena_buffer() -> None:
    @dsl.compile
    def step(w, g, lr):
        w -= lr * g
        return (w * w).sum()

    w, g = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    plan = step.lower(w, g, 0.1).memory_plan()
    assert all(r.bytes < w.nbytes for r in plan.buffers)  # no arena buffer for the new w (only lr's cast)
    assert list(plan.direct_writeback.values()) == [0]
    expected = w - np.float32(0.1) * g
    step(w, g, 0.1)
    np.testing.assert_array_equal(w, expected)
    text = step.lower(w, g, 0.1).explain_inplace()
    assert "written straight into the caller's array" in text
    with pytest.raises(dsl.DSLError, match="share memory"):
        step(w, w, 0.1)


def test_fused_chain_needs_no_intermediate_buffer() -> None:
    @dsl.compile
    def chain(x):
        return dnp.exp(dnp.log(dnp.sin(x) + 1) * 2)

    x = rng.random(4096).astype(np.float32)
    plan = chain.lower(x).memory_plan()
    assert plan.naive_bytes >= 4 * x.nbytes  # an eager run allocates sin, +1, log, *2
    assert len(plan.buffers) <= 1 and plan.peak_bytes <= x.nbytes
    assert_same(chain(x), np.exp(np.log(np.sin(x) + 1) * 2), rtol=1e-5)


def test_naive_counts_the_intermediates_of_loop_bodies() -> None:
    """An eager loop allocates its body's values on every trip: the naive figure counts each once (it
    counted the top level only, so a loop program reported a plan twice its "naive" bytes)."""

    def f(x, w):
        def body(i, c):
            h = dnp.tanh(c @ w)  # an eager body allocates c @ w, tanh, * 0.5 and + c
            return h * 0.5 + c

        return dsl.fori_loop(0, 10, body, x * 1.0).sum()

    x = rng.random((64, 64))
    for program in (dsl.compile(f), dsl.compile(dsl.grad(f))):
        plan = program.lower(x, x).memory_plan()
        assert plan.naive_bytes >= 4 * x.nbytes and plan.peak_bytes <= plan.naive_bytes, str(plan)


# ``naive_bytes`` is what an eager NumPy run allocates for intermediates (api.md): no buffer for a
# scalar (NumPy never makes it full size, the IR's splat constant does) nor for a view, a buffer for a
# reshape NumPy has to copy. Each figure below is counted by hand, an eager line at a time.
V = np.ones(1000, np.float32)  # 4000 bytes


def test_naive_bytes_make_no_scalar_full_size() -> None:
    # eager: x * 2, + 3, * 4 are three temporaries; - 1 is the result
    plan = dsl.compile(lambda x: ((x * 2.0) + 3.0) * 4.0 - 1.0).lower(V).memory_plan()
    assert plan.naive_bytes == 3 * V.nbytes, str(plan)  # was 7 * 4000: the four splats counted


def test_naive_bytes_count_no_view_and_every_copy() -> None:
    plan = dsl.compile(lambda x: x[::2] + x[1::2]).lower(V).memory_plan()
    assert plan.naive_bytes == 0, str(plan)  # two slices: views; the sum is the result
    m = np.ones((100, 3), np.float32)  # 1200 bytes
    # m.T: a view, whose flat reshape NumPy copies (1200); m.reshape(300)[::-1]: views; + (1200)
    plan = dsl.compile(lambda m: (m.T.reshape(300) + m.reshape(300)[::-1]) * 2.0).lower(m).memory_plan()
    assert plan.naive_bytes == 2 * m.nbytes, str(plan)


def test_naive_bytes_of_a_matmul_chain_and_its_ratio() -> None:
    x, w1 = np.ones((64, 32), np.float32), np.ones((32, 16), np.float32)
    w2, b = np.ones((16, 8), np.float32), np.ones(8, np.float32)
    # eager: x @ w1 (4096), tanh (4096), @ w2 (2048); b's broadcast is a view; + b is the result
    plan = dsl.compile(lambda x, w1, w2, b: dnp.tanh(x @ w1) @ w2 + b).lower(x, w1, w2, b).memory_plan()
    assert plan.naive_bytes == 4096 + 4096 + 2048, str(plan)
    assert 0 < plan.peak_bytes < plan.naive_bytes
    assert f"naive 10240 bytes ({10240 / plan.peak_bytes:.1f}x less)" in str(plan)


def test_naive_bytes_of_in_place_requests() -> None:
    def f(x, idx):
        y = x * 2.0  # 4000
        z = y.copy()  # 4000 (the IR drops the copy and reads y's old value: the += below counts it)
        y += 1.0  # in place
        y[::2] += 1.0  # a view, in place
        y[idx] += 3.0  # y[idx] gathers a copy (40 bytes), then adds and scatters in place
        return (y * z).sum()  # y * z: 4000; the sum is the result

    plan = dsl.compile(f).lower(V, np.arange(10)).memory_plan()
    assert plan.naive_bytes == 3 * V.nbytes + 40, str(plan)


def test_naive_bytes_unchanged_where_every_value_is_an_eager_temporary() -> None:
    # no constant, view or in-place request: every intermediate is a buffer, as before (sin, exp, cos)
    lo = dsl.compile(lambda x: dnp.exp(dnp.sin(x)) * dnp.cos(x)).lower(V)
    assert lo.memory_plan().naive_bytes == 3 * V.nbytes == 12000


def test_demoted_request_is_explained_and_strict_mode_names_both_lines() -> None:
    def f(a, w):
        x = a @ w
        y = x * 2.0  # reads the old x, computed lazily in a later kernel
        x.exp_()  # the in-place request
        return (x @ w) + y

    want = np.exp(A @ W) @ W + (A @ W) * 2
    lenient = dsl.compile(f)
    assert_same(lenient(A, W), want.astype(np.float32), rtol=1e-4)
    explained = lenient.lower(A, W).explain_inplace()
    assert "exp_" in explained and "copy" in explained and "still read later" in explained
    with pytest.raises(dsl.InplaceError) as info:
        dsl.compile(f, strict_inplace=True)(A, W)
    msg = str(info.value)
    assert f"{__file__}:{_line(f, 'the in-place request')}" in msg
    assert f"{__file__}:{_line(f, 'reads the old x')}" in msg


def test_reference_plan_and_identical_results() -> None:
    def f(a, w):
        h = dnp.tanh(a @ w)
        h = dnp.tanh(h @ w) + h
        h[0] = 0.0
        return dsl.nn.softmax(h @ w)

    on, off = dsl.compile(f), dsl.compile(f, inplace=False)
    plan_on, plan_off = on.lower(A, W).memory_plan(), off.lower(A, W).memory_plan()
    assert plan_on.peak_bytes < plan_off.peak_bytes
    assert all(r.reused_from is None for r in plan_off.buffers)
    assert plan_off.peak_bytes >= sum(r.bytes for r in plan_off.buffers)
    np.testing.assert_array_equal(on(A, W), off(A, W))


def test_sanitizer_poisons_dead_buffers_and_results_stay_identical(monkeypatch) -> None:
    def f(a, w):
        h = dnp.tanh(a @ w)
        return (dnp.exp(h @ w) * h).sum(axis=1)

    plain = dsl.compile(f)(A, W)
    monkeypatch.setenv("DSL_SANITIZE", "1")
    sanitized = dsl.compile(f)
    np.testing.assert_array_equal(sanitized(A, W), plain)
    assert "math.nan" in sanitized.lower(A, W).source()


def test_overlap_check_catches_a_broken_plan() -> None:
    from compiler.passes.plan import check_no_overlap

    def f(a, w):
        h = dnp.tanh(a @ w)
        return (h @ w) * h

    plan = dsl.compile(f).lower(A, W).memory_plan()
    check_no_overlap(plan)
    assert len(plan.buffers) >= 2
    live_together = [r for r in plan.buffers]
    live_together[1].offset = live_together[0].offset  # corrupt: two live buffers on one block
    live_together[1].reused_from = None
    with pytest.raises(dsl.VerificationError, match="overlap"):
        check_no_overlap(plan)


def test_arena_is_exactly_the_planned_size() -> None:
    def f(a, w):
        return dnp.tanh(dnp.tanh(a @ w) @ w) @ w

    lowered = dsl.compile(f).lower(A, W)
    assert lowered._program.executable.arena.nbytes == max(lowered.memory_plan().peak_bytes, 1)


def test_donated_argument_holds_a_temporary() -> None:
    def f(a, w):
        t = dnp.tanh(a * 2.0)  # a dies here: t may live in a's memory when a is donated
        return t @ w

    donated = dsl.compile(f, donate_argnums=(0,))
    plan = donated.lower(A, W).memory_plan()
    assert plan.in_param and plan.peak_bytes == 0
    want = np.tanh(A * 2) @ W
    assert_same(donated(A.copy(), W), want, rtol=1e-5)
    with pytest.raises(dsl.DSLError, match="share memory"):
        a = A.copy()
        donated(a, a[:8])


def _synthetic_plan() -> object:
    """Rows: a and e below (one after the other at 0), the slot (b, then c in its place) above them,
    d above the slot. Values are stand-ins: resize_slots keys offsets by them only."""
    from compiler.passes.plan import BufferRow, MemoryPlan

    class Value:  # hashed by identity, printed by the report
        type = "tensor<?>"

    def row(name, nbytes, offset, live, reused_from=None):
        return BufferRow(name, Value(), nbytes, offset, live, reused_from)

    rows = [
        row("a", 128, 0, (0, 2)),
        row("b", 250, 128, (1, 3)),
        row("c", 250, 128, (3, 5), "b"),
        row("e", 64, 0, (3, 4)),
        row("d", 64, 384, (0, 5)),
    ]
    return MemoryPlan(448, 0, rows, offsets={r.value: r.offset for r in rows})


@pytest.mark.parametrize("nbytes", [40, 700])
def test_resizing_a_slot_closes_or_opens_the_arena_above_it(nbytes: int) -> None:
    from compiler.passes.plan import align, check_no_overlap, resize_slots

    plan = _synthetic_plan()
    resize_slots(plan, {128: (nbytes, "one block per thread")})
    by_name = {r.name: r for r in plan.buffers}
    assert (by_name["a"].offset, by_name["e"].offset) == (0, 0)  # below the slot: where they were
    assert by_name["b"].offset == by_name["c"].offset == 128
    assert by_name["b"].bytes == by_name["c"].bytes == nbytes
    assert by_name["d"].offset == 128 + align(nbytes)  # above it: moved by what it gave up or took
    assert plan.peak_bytes == by_name["d"].offset + 64
    assert plan.offsets[by_name["d"].value] == by_name["d"].offset
    assert by_name["b"].stored_as == "one block per thread" and by_name["a"].stored_as is None
    assert "one block per thread" in str(plan)
    check_no_overlap(plan)


def test_only_a_slot_of_its_own_can_be_resized() -> None:
    from compiler.passes.plan import resize_slots

    with pytest.raises(dsl.VerificationError, match="no arena slot of its own at offset 0"):
        resize_slots(_synthetic_plan(), {0: (32, "a and e differ in size")})
    plan = _synthetic_plan()
    plan.buffers[-1].offset = 300  # d now overlaps the slot's bytes
    with pytest.raises(dsl.VerificationError, match="no arena slot of its own at offset 128"):
        resize_slots(plan, {128: (32, "d would be cut")})
    with pytest.raises(dsl.VerificationError, match="at offset 64"):
        resize_slots(_synthetic_plan(), {64: (32, "nothing starts there")})


# ---- the CPU kernels' scratch (the scratch pass) -----------------------------------------------------


def _layer_norm_loss(x, g, b):
    c = x - x.mean(axis=-1, keepdims=True)
    y = c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b
    return (y * y).sum()


def _softmax_xent(z, y):
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


_LN = (
    dsl.value_and_grad(_layer_norm_loss, argnums=(0, 1, 2)),
    (rng.standard_normal((1024, 256)).astype(np.float32),)
    + tuple(rng.standard_normal(256).astype(np.float32) for _ in range(2)),
)
_XENT = (
    dsl.value_and_grad(_softmax_xent),
    (
        rng.standard_normal((1024, 512)).astype(np.float32),
        np.eye(512, dtype=np.float32)[rng.integers(0, 512, 1024)],
    ),
)


@pytest.mark.parametrize("fn, args", [_LN, _XENT], ids=["layer norm", "softmax + cross-entropy"])
def test_cpu_band_scratch_is_a_row_of_the_plan(fn, args) -> None:
    """A band's rows per chunk and its partial results per chunk are rows of the memory plan
    (``scratch_of`` the band's kernel), placed where no value live while the band runs is; the
    peak and the arena the executable allocates include them, the driver passes them as views of
    the arena at their offsets, and no kernel allocates memory of its own. The results are the
    same bits in place or not (the reference plan gives each scratch a slot of its own)."""
    from compiler.passes.plan import check_no_overlap

    compiled = dsl.compile(fn)
    lowered = compiled.lower(*args)
    plan = lowered.memory_plan()
    scratch = [r for r in plan.buffers if r.scratch_of is not None]
    assert scratch and all(r.scratch_of.endswith("_rows") for r in scratch), str(plan)
    assert plan.peak_bytes >= max(r.offset + r.bytes for r in plan.buffers)
    check_no_overlap(plan)
    assert lowered._program.executable.arena.nbytes == plan.peak_bytes
    source = lowered.source()
    assert "np.empty((" not in source.split("\ndef run(")[0]  # (frames of addresses are 1-D)
    for r in scratch:
        assert f"{r.name} = buffer_view(arena, {r.offset}, " in source
    assert "dsl.scratch = " in lowered.ir("bufferized")
    off = dsl.compile(fn, inplace=False)
    plan_off = off.lower(*args).memory_plan()
    assert plan_off.peak_bytes >= sum(-(-r.bytes // 64) * 64 for r in plan_off.buffers)
    for got, want in zip(_leaves(compiled(*args)), _leaves(off(*args)), strict=True):
        np.testing.assert_array_equal(got, want)


def _leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, tuple | list):
        return [leaf for x in tree for leaf in _leaves(x)]
    return [np.asarray(tree)]


def test_cpu_scratch_under_the_sanitizer(monkeypatch) -> None:
    """Under ``DSL_SANITIZE`` the plan with the kernels' scratch passes the overlap check (the
    scratch pass runs it) and a scratch row is poisoned once its kernel ran, like a dead value."""
    fn, args = _XENT
    plain = dsl.compile(fn)(*args)
    monkeypatch.setenv("DSL_SANITIZE", "1")
    sanitized = dsl.compile(fn)
    lowered = sanitized.lower(*args)
    scratch = [r for r in lowered.memory_plan().buffers if r.scratch_of is not None]
    assert scratch
    for r in scratch:
        assert (
            f"buffer_view(arena, {r.offset}, ({r.bytes // r.value.type.dtype.itemsize},)" in lowered.source()
        )
    for got, want in zip(_leaves(sanitized(*args)), _leaves(plain), strict=True):
        np.testing.assert_array_equal(got, want)


def test_loop_body_scratch_is_in_the_bodys_plan() -> None:
    """A loop body is compiled through the whole pipeline: its band's scratch is a row of the body's
    plan, inside the loop's arena block (the outer plan's scratch row for the loop's bodies), and the
    native loop gives the unrolled loop's bits."""
    from compiler.compilation import option_defaults

    def f(x):
        def step(i, c):
            e = dnp.exp(c - c.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True) * x

        return dsl.fori_loop(0, 3, step, x)

    x = rng.standard_normal((2048, 64)).astype(np.float32)
    compiled = dsl.compile(f)
    lowered = compiled.lower(x)
    (loop,) = lowered._program.compilation.loops.values()
    (body,) = loop.bodies
    body_plan = body.program.plan
    scratch = [r for r in body_plan.buffers if r.scratch_of is not None]
    assert scratch and body_plan.peak_bytes >= max(r.offset + r.bytes for r in scratch)
    arena_row = next(r for r in lowered.memory_plan().buffers if r.offset == loop.arena and r.scratch_of)
    assert arena_row.bytes >= body_plan.peak_bytes
    for r in scratch:  # the body's views: at the loop's arena block
        assert f"{r.name} = buffer_view(arena, {loop.arena + r.offset}, " in lowered.source()
    with option_defaults(native_loops=False):
        unrolled = dsl.compile(f)(x)
    np.testing.assert_array_equal(compiled(x), unrolled)


def test_buffers_sharing_memory_are_never_shown_live_at_once() -> None:
    """A band's member is born where the band starts; one that takes over the block of a value the
    band reads row by row was shown live from the band's start, beside that value ([4, 35] and
    [5, 39] at one offset: found 2026-11-27 by an outside user checking the plan). Its range now
    starts where the block is handed over, as any in-place reuse's does."""

    def mlp(x, w1, w2):
        h = dsl.nn.relu(x @ w1)
        return dsl.nn.logsumexp(h @ w2, axis=-1).sum()

    x, w = np.ones((16, 8)), np.ones((8, 8))
    plan = dsl.compile(dsl.grad(mlp, argnums=(1, 2))).lower(x, w, w).memory_plan()
    rows = [r for r in plan.buffers if r.in_arena]
    assert any(r.reused_from for r in rows), str(plan)
    for a in rows:
        for b in rows:
            shared = a is not b and a.offset < b.offset + b.bytes and b.offset < a.offset + a.bytes
            assert not (shared and a.live[0] < b.live[1] and b.live[0] < a.live[1]), (a, b)
