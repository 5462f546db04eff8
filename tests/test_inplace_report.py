"""The in-place report tells the truth: each user request's outcome (``explain_inplace``,
``memory_plan().inplace``, ``strict_inplace``, the bufferized stage's ``dsl.inplace_outcome``) is read
off the plan the code follows, so it agrees with the offsets and reuses of the bufferized IR.

A request is ``in place`` when the array's value after it is stored where its value before it was
(same arena slot, or the same argument's memory), ``fused`` when one of the two never had a buffer
(nothing to copy), and ``copy`` only when the old value stays in its buffer while the new one is
computed into other memory. CPU plans come from the compiled program (bands, resized row-block
slots); CUDA plans are the CUDA target's pipeline's (``plan_program``), made without a GPU.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest
import test_fuzz_programs as fuzz
from helpers import assert_same
from hypothesis import assume, given, note, settings
from sample_programs import PROGRAMS, load_sample

import dsl
import dsl.numpy as dnp
from compiler.ir.core import Function, Value
from compiler.passes.inplace_report import WRITES_A_SOURCE
from compiler.passes.plan import INPLACE_ATTR, MemoryPlan
from compiler.pipeline import Compilation, Options, plan_program, run_passes

FUZZ_SETTINGS = fuzz.FUZZ_SETTINGS
rng = np.random.default_rng(25)
A = rng.standard_normal((16, 8)).astype(np.float32)
W = rng.standard_normal((8, 8)).astype(np.float32)


def _line(fn: Any, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


# ---- the plans of both targets -------------------------------------------------------------------


def cpu_report(fn: Any, args: tuple[Any, ...], **options: Any) -> tuple[Function, MemoryPlan]:
    """The bufferized stage and the plan of the compiled CPU program (what its code follows)."""
    program = dsl.compile(fn, target="cpu", **options).lower(*args)._program
    return program.stages["bufferized"], program.memory_plan


def cuda_report(fn: Any, args: tuple[Any, ...], inplace: bool = True) -> tuple[Function, MemoryPlan]:
    """The same for the CUDA target: its plan (no bands, no resized slots), lowered without a GPU."""
    program = dsl.compile(fn, target="cuda", inplace=inplace).lower(*args)._program
    return program.stages["bufferized"], program.memory_plan


REPORTS = {"cpu": cpu_report, "cuda": cuda_report}


def outcomes(plan: MemoryPlan) -> dict[str, str]:
    """``request at line -> outcome`` (the last decision of a line that has several ops)."""
    return {f"{d.request}@{d.loc.line}": d.outcome for d in plan.inplace if d.request}


# ---- the three programs of the issue ------------------------------------------------------------


def returned_after_increment(x):
    y = x * 2
    y += 1
    return y


def two_requests_on_a_fused_value(a, w):
    x = a * 2
    x.scale_(2)
    x.add_(1)
    return (x @ w).sum()


def two_requests_returned(a, w):
    x = a * 2
    x.scale_(2)
    x.add_(1)
    return x


def requests_on_a_matmul_result(a, w):
    h = a @ w
    h.tanh_()
    h.mul_(2.0)
    return (h @ w).sum()


@pytest.mark.parametrize("target", sorted(REPORTS))
def test_increment_of_a_fused_value_is_fused_not_a_copy(target: str) -> None:
    fn = returned_after_increment
    bufferized, plan = REPORTS[target](fn, (A,))
    (decision,) = [d for d in plan.inplace if d.request]
    assert decision.outcome == "fused", decision
    assert plan.peak_bytes == 0 and not plan.buffers  # one kernel, no arena buffer
    check_consistent(bufferized, plan)
    if target == "cpu":
        compiled = dsl.compile(fn, strict_inplace=True)  # nothing is copied: strict compiles
        assert_same(compiled(A), A * 2 + 1)
        assert "-> copy" not in compiled.lower(A).explain_inplace()


@pytest.mark.parametrize("fn", [two_requests_on_a_fused_value, two_requests_returned])
@pytest.mark.parametrize("target", sorted(REPORTS))
def test_two_requests_in_a_row_on_a_fused_value(target: str, fn: Any) -> None:
    bufferized, plan = REPORTS[target](fn, (A, W))
    scale, add = _line(fn, "scale_"), _line(fn, "add_")
    assert outcomes(plan) == {f"scale_@{scale}": "fused", f"add_@{add}": "fused"}
    check_consistent(bufferized, plan)
    if target == "cpu":
        compiled = dsl.compile(fn, strict_inplace=True)
        x = A * 4 + 1
        assert_same(compiled(A, W), (x @ W).sum() if fn is two_requests_on_a_fused_value else x, rtol=1e-5)


@pytest.mark.parametrize("target", sorted(REPORTS))
def test_requests_on_a_matmul_result_are_in_place(target: str) -> None:
    fn = requests_on_a_matmul_result
    bufferized, plan = REPORTS[target](fn, (A, W))
    tanh, mul = _line(fn, "h.tanh_"), _line(fn, "h.mul_")
    assert outcomes(plan) == {f"tanh_@{tanh}": "fused", f"mul_@{mul}": "in place"}
    mul_op = next(op for op in bufferized.ops if op.attrs.get(INPLACE_ATTR) == "mul_")
    matmul_op = bufferized.ops[0]
    assert mul_op.attrs["dsl.offset"] == matmul_op.attrs["dsl.offset"]  # h's slot, handed over
    assert mul_op.attrs["dsl.inplace_outcome"].startswith("in place")
    check_consistent(bufferized, plan)
    if target == "cpu":
        compiled = dsl.compile(fn, strict_inplace=True)
        assert_same(compiled(A, W), (np.tanh(A @ W) * 2 @ W).sum(), rtol=1e-4)


# ---- every request agrees with the bufferized IR ------------------------------------------------


def _storage(bufferized: Function, v: Value) -> tuple[Any, ...] | None:
    """Where the bufferized IR stores ``v`` (a view without a buffer: where its base is)."""
    params = {p: i for i, p in enumerate(bufferized.params)}
    producer = {r: op for op in bufferized.ops for r in op.results}
    while v not in params:
        op = producer[v]
        if "dsl.offset" in op.attrs:
            return ("arena", op.attrs["dsl.offset"], op.attrs.get("dsl.stored_as"))
        buffer = op.attrs.get("dsl.buffer")
        if buffer is not None and buffer.startswith("arg "):
            return ("arg", int(buffer[4:]))
        if buffer == "result":
            return ("result", list(bufferized.results).index(v))
        if buffer is not None and buffer.startswith("result "):  # kept in a result's memory
            return ("result", int(buffer[7:]))
        if op.prim.memory.view_of != 0 or buffer == "row" or op.attrs.get(INPLACE_ATTR) in WRITES_A_SOURCE:
            return None  # (a view realizing a setitem or copy_ holds the source, not the array)
        v = op.operands[0]
    return ("arg", params[v])


def check_consistent(bufferized: Function, plan: MemoryPlan) -> list[str]:
    """Each request: its outcome follows from the bufferized IR's storage of the array's value before
    and after it, and the IR's ``dsl.inplace_outcome`` is the report's line. Returns the copies, as
    ``request@line<-blocker line``."""
    ops = {r: op for op in bufferized.ops for r in op.results}
    # (a loop body's decisions are the program's too, reported with its own: checked on the body)
    decided = {d.new: d for d in plan.inplace if d.request and d.new in ops}
    kernel = {r: op.attrs.get("dsl.kernel") for op in bufferized.ops for r in op.results}
    assert len(decided) == len(plan.requests)
    copies = []
    for r in plan.requests:
        d = decided[r.new]
        op = ops[r.new]
        assert op.attrs["dsl.inplace_outcome"] == f"{d.outcome}: {d.reason}", (op, d)
        new_at = _storage(bufferized, r.new)
        old_at = None if r.old is None else _storage(bufferized, r.old)
        if new_at is None:
            assert d.outcome == "fused", d
        elif r.old is None:  # copy_/fill_: the old value is not read, so never copied
            assert d.outcome == "in place", d
        elif old_at is None:
            assert d.outcome == "fused", d
        else:
            assert d.outcome == ("in place" if new_at == old_at else "copy"), (d, new_at, old_at)
        if d.outcome != "copy":
            continue
        copies.append(_copy_line(d))
        if d.blocker is not None:  # a kernel running after the request's reads the old value there
            readers = [x for x in bufferized.ops if x.loc == d.blocker and r.old in x.operands]
            # (an op without a buffer is inlined into each kernel reading it; ``dsl.kernel``: the first)
            later = [
                x
                for x in readers
                if kernel[x.results[0]] > kernel[r.new] or _storage(bufferized, x.results[0]) is None
            ]
            assert later, d
    return copies


def demoted_for_the_backward(a, w):
    b = dnp.sin(a @ w)
    c = b @ w  # the backward of this product reads the old b
    b.exp_()
    return ((b @ w) + c).sum()


def demoted_for_a_later_reader(a, w):
    x = a @ w
    y = x * 2.0  # reads the old x, in a kernel after the request's
    x.exp_()
    return (x @ w) + y


def honored_chain(a, w):
    h = dnp.tanh(a @ w)
    h.mul_(0.5)
    h += 1.0
    h.clip_(0.0, 1.2)
    return (h @ w).sum()


def view_writes(a, w):
    x = a @ w
    x[0] = 1.0
    x.T.add_(1.0)
    x[:, 1:3] += 1.0
    return (x @ w).sum()


def copy_and_fill(a, w):
    x = a @ w
    x.copy_(a)
    y = x @ w
    y.fill_(2.0)
    return (y * x).sum()


def scale_with_bias(a, w):
    x = a @ w
    x.scale_(2.0, bias=1.0)
    return (x @ w).sum()


def returned_matmul_result(a, w):
    h = a @ w
    h.tanh_()
    return h


def sgd(w, g):
    w -= 0.1 * g
    return (w * w).sum()


def layer_norm_in_place(x, g):
    m = x.mean(axis=1, keepdims=True)
    x -= m
    x /= dnp.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)
    x *= g
    return dnp.exp(x).sum()


def _copy(fn: Any, request: str, at: str, blocker: str | None) -> str:
    return f"{request}@{_line(fn, at)}<-{_line(fn, blocker) if blocker else '-'}"


# (function, arguments, transform, the copies strict_inplace must name: request@line<-blocker line)
HAND_WRITTEN: dict[str, tuple[Any, tuple[Any, ...], Any, set[str]]] = {
    "backward": (
        demoted_for_the_backward,
        (A, W),
        lambda f: dsl.grad(f, argnums=1),
        {_copy(demoted_for_the_backward, "exp_", "b.exp_", "reads the old b")},
    ),
    "later reader": (
        demoted_for_a_later_reader,
        (A, W),
        None,
        {_copy(demoted_for_a_later_reader, "exp_", "x.exp_", "reads the old x")},
    ),
    "honored chain": (honored_chain, (A, W), None, set()),
    "honored chain, gradient": (honored_chain, (A, W), lambda f: dsl.grad(f, argnums=1), None),
    "view writes": (view_writes, (A, W), None, None),
    "copy and fill": (copy_and_fill, (A, W), None, set()),
    "scale with bias": (scale_with_bias, (A, W), None, set()),
    "returned matmul result": (
        returned_matmul_result,
        (A, W),
        None,
        set(),  # h lives in the result's memory (results_in_place): tanh_ runs there
    ),
    "sgd": (sgd, (W.ravel().copy(), W.ravel().copy()), None, set()),
    "layer norm": (layer_norm_in_place, (A.copy(), A[0].copy()), None, None),
    "layer norm, gradient": (
        layer_norm_in_place,
        (A.copy(), A[0].copy()),
        lambda f: dsl.grad(f, argnums=1),
        None,
    ),
}


def _hand_written(name: str) -> tuple[Any, tuple[Any, ...]]:
    fn, args, transform, _ = HAND_WRITTEN[name]
    return (transform(fn) if transform else fn), args


@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("target", sorted(REPORTS))
@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_report_agrees_with_the_plan(name: str, target: str, inplace: bool) -> None:
    fn, args = _hand_written(name)
    bufferized, plan = REPORTS[target](fn, args, inplace=inplace)
    assert plan.requests, "each program here makes in-place requests"
    copies = check_consistent(bufferized, plan)
    expected = HAND_WRITTEN[name][3]
    if inplace and target == "cpu" and expected is not None:
        assert set(copies) == expected


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_strict_raises_exactly_for_the_copies_naming_both_lines(name: str) -> None:
    fn, args = _hand_written(name)
    expected = HAND_WRITTEN[name][3]
    if expected is None:  # not pinned down here: the copies the report finds
        _, plan = cpu_report(fn, args)
        expected = {_copy_line(d) for d in plan.inplace if d.request and d.outcome == "copy"}
    strict = dsl.compile(fn, strict_inplace=True)
    if not expected:
        strict.lower(*args)  # compiles: nothing was copied
        return
    with pytest.raises(dsl.InplaceError) as info:
        strict.lower(*args)
    message = str(info.value)
    named = {c for c in expected if f"{__file__}:{c.split('@')[1].split('<-')[0]}:" in message}
    assert named, message
    for blocker in (c.split("<-")[1] for c in named):
        assert blocker == "-" or f"{__file__}:{blocker}" in message, message


def _copy_line(d: Any) -> str:
    return f"{d.request}@{d.loc.line}<-{d.blocker.line if d.blocker else '-'}"


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_sample_programs_report_agrees_with_the_plan(program: str) -> None:
    sample, _, fn_name = program.partition(":")
    module = load_sample(sample)
    compiled = getattr(module, fn_name)
    args = PROGRAMS[program](module, np.random.default_rng(0))
    program_ = compiled.lower(*args)._program
    check_consistent(program_.stages["bufferized"], program_.memory_plan)
    assert program_.options is not None
    options = Options(target="cuda", donate_argnums=program_.options.donate_argnums)
    planned = plan_program(program_.stages["optimized"], options)  # the CUDA plan: no bands
    assert planned.plan is not None
    check_consistent(planned.stage(), planned.plan)


def region_layers(x, w1, w2):
    h = x @ w1
    h.tanh_()
    h *= 0.5
    g = h @ w2
    g.tanh_()
    g += 1.0
    return (g @ w2).sum(axis=1)


def test_report_follows_the_resized_slots_of_a_row_block_region() -> None:
    """Codegen resizes a row-block region's slots after planning; the report is re-derived from the
    resized plan (the hand-overs stay in place, at the new offsets)."""
    x = rng.uniform(-2, 2, (2048, 64)).astype(np.float32)
    w1, w2 = (rng.standard_normal((2, 64, 64)) / 8).astype(np.float32)
    bufferized, plan = cpu_report(region_layers, (x, w1, w2))
    resized = {r.name for r in plan.buffers if r.stored_as}
    assert resized, "the program runs as a row-block region"
    fn = region_layers
    assert outcomes(plan) == {
        f"tanh_@{_line(fn, 'h.tanh_')}": "fused",
        f"*=@{_line(fn, 'h *=')}": "in place",
        f"tanh_@{_line(fn, 'g.tanh_')}": "fused",
        f"+=@{_line(fn, 'g +=')}": "in place",
    }
    in_place = [d for d in plan.inplace if d.request and d.outcome == "in place"]
    assert {d.target for d in in_place} <= resized and {d.value for d in in_place} <= resized
    check_consistent(bufferized, plan)
    assert_same(
        dsl.compile(fn, strict_inplace=True)(x, w1, w2),
        ((np.tanh(np.tanh(x @ w1) * 0.5 @ w2) + 1) @ w2).sum(axis=1),
        rtol=1e-3,
    )


@settings(max_examples=150, **FUZZ_SETTINGS)
@given(fuzz.programs())
def test_random_programs_report_agrees_with_the_plan(program: fuzz.Program) -> None:
    """The fuzzer's random programs (in-place methods, augmented assignments, writes through views):
    every request of the CPU plan (with bands) and of the CUDA one agrees with its bufferized IR."""
    note(program.describe())
    assume(not program.raises)  # a program NumPy rejects has no plan
    func, _, _, _ = dsl.compile(program.closure(fuzz.DSL))._trace(program.inputs())
    optimized = run_passes(func, Options(verify=False))["optimized"]
    for target in ("cpu", "cuda"):  # with bands and without
        planned = plan_program(optimized, Options(target=target, verify=False))
        assert planned.plan is not None
        check_consistent(planned.stage(), planned.plan)
        check_bodies(planned)
        check_no_shared_lifetimes(planned.plan)


def check_no_shared_lifetimes(plan: MemoryPlan) -> None:
    """No two arena rows that share bytes are shown live at once (an in-place handover touches at
    one kernel: the donor's last read is the taker's first write)."""
    rows = [r for r in plan.buffers if r.in_arena]
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a.offset < b.offset + b.bytes and b.offset < a.offset + a.bytes:
                assert not (a.live[0] < b.live[1] and b.live[0] < a.live[1]), (a.name, a.live, b.name, b.live)


def check_bodies(program: Compilation) -> None:
    """Each loop body's requests agree with the body's own bufferized IR and plan (nested ones too)."""
    for loop in program.loops.values():
        for body in loop.bodies:
            assert body.program.plan is not None
            check_consistent(body.program.stage(), body.program.plan)
            check_bodies(body.program)


def test_a_copy_in_a_loop_body_under_grad_gives_its_true_reason() -> None:
    """The forward loop of a gradient yields each old carry as a row of ys (what the backward reads),
    so an in-place ``sin_`` of the carry is computed into other memory. The report said "the value is
    returned (or written back) to the caller", which nothing in the program is."""

    def f(x):
        def body(i, c):
            c.sin_()
            return c

        return dsl.fori_loop(0, 3, body, x * 1.0).sum()

    x = np.array([0.1, 0.2, 0.3])
    text = dsl.compile(dsl.grad(f)).lower(x).explain_inplace()
    assert "sin_" in text and "old value is also a result of the loop body" in text, text
    assert "to the caller" not in text, text
    with pytest.raises(dsl.InplaceError, match="backward reads"):
        dsl.compile(dsl.grad(f), strict_inplace=True)(x)


def test_a_copy_names_the_value_that_took_the_old_memory_or_the_transposed_read() -> None:
    """Two copies whose reasons were each the other's (found 2026-11-27): ``h += 1`` then
    ``tanh(h)`` in one kernel, where tanh's result took h's dying block (the report said the kernel
    read h at other elements; it reads only the element it writes); and ``a += a.T`` written back,
    whose transposed read forbids writing the caller's array directly (the report blamed the
    write-back, which ``a += 1`` has too and does in place)."""
    x = np.random.default_rng(2).random((8, 8)).astype(np.float32)

    def f(x):
        h = x @ x
        h += 1.0
        t = dnp.tanh(h)
        return t @ h

    text = dsl.compile(f).lower(x).explain_inplace()
    line = _line(f, "t = dnp.tanh(h)")
    assert f"+= %2 -> copy (%0): its memory went to %3 (tanh, {__file__}:{line})" in text, text

    def g(a):
        a += a.T
        return a.sum()

    text = dsl.compile(g).lower(x.copy()).explain_inplace()
    assert "copy (%arg0): its kernel reads the old value at other elements than it writes" in text, text
    with pytest.raises(dsl.InplaceError, match="other elements"):
        dsl.compile(g, strict_inplace=True)(x.copy())

    def g2(a):
        a += 1
        return a.sum()

    assert (
        "in place (%arg0): written straight into the caller's array"
        in dsl.compile(g2).lower(x).explain_inplace()
    )


def test_a_reuse_by_the_compiler_names_the_line_of_the_value_it_stores() -> None:
    """A buffer the compiler reuses is reported at the line computing the value stored there, not at
    the line of the last op of its kernel (found 2026-11-27: the tanh's reuse was at ``a += h``)."""

    def f(a, b):
        h = dnp.tanh(a @ b)  # one kernel with the next line's add and cast: its root is that cast
        y = (a + h).astype(np.float32)  # (a float32 result cannot take a float64 block)
        return h @ h, y @ y

    x = np.random.default_rng(0).random((16, 16))
    text = dsl.compile(f).lower(x, x.T.copy()).explain_inplace()
    assert f"{__file__}:{_line(f, 'h = dnp.tanh')}: %1 -> in place (%0)" in text, text


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_write_back_computed_beside_the_argument_is_in_the_plan(target: str) -> None:
    """``a += a.T`` cannot be written straight into the caller's array (its kernel reads other
    elements): the new value is an intermediate of the arena, in the plan's peak, copied into the
    caller's array as the call returns. It was a fresh array per call that the plan left out (peak
    128 bytes for a 1 MiB write-back, found 2026-11-27). ``a += 1; return a`` returns the new value
    and writes the same array back: no second copy per call."""

    def f(a):
        a += a.T
        return a.sum()

    x = np.random.default_rng(4).random((128, 128))
    lowered = dsl.compile(f, target=target).lower(x.copy())
    plan = lowered.memory_plan()
    assert plan.peak_bytes >= x.nbytes and any(r.bytes == x.nbytes for r in plan.buffers), str(plan)
    if target == "cpu":
        got, want = x.copy(), x.copy()
        np.testing.assert_allclose(dsl.compile(f)(got), f(want))
        np.testing.assert_array_equal(got, want)

    def g(a):
        a += 1.0
        return a

    source = dsl.compile(g).lower(x.copy()).source()
    assert ".copy()" not in source.split("def ", 1)[1].rsplit("return", 1)[1], source
    got = x.copy()
    result = dsl.compile(g)(got)
    np.testing.assert_array_equal(got, x + 1.0)
    np.testing.assert_array_equal(result, x + 1.0)
    assert not np.shares_memory(result, got)


def updates_through_views(x, w):
    y = x @ w
    y[:, 0] += 1.0
    y[0].add_(1.0)
    v = y[1]
    v += 1.0
    return y


@pytest.mark.parametrize("target", sorted(REPORTS))
def test_an_update_through_a_view_is_one_request_and_in_place(target: str) -> None:
    """``y[:, 0] += 1`` is a view, ``+=`` on it written through to ``y``, and Python's setitem of that
    same view (nothing to write: not traced). The ops of one request (new elements, a view back,
    the write into the base) are judged as one: ``y`` stays where it was, so it is in place, the
    new elements' staging buffer named; strict compiles (it raised "the old value is still read"
    naming the request's own line, once per op)."""
    bufferized, plan = REPORTS[target](updates_through_views, (A, W))
    rows = [d for d in plan.inplace if d.request]
    assert sorted(d.loc.line for d in rows) == [
        _line(updates_through_views, t) for t in ("+= 1", "add_", "v +=")
    ]
    assert all(d.outcome == "in place" for d in rows), rows
    check_consistent(bufferized, plan)
    if target == "cpu":
        want = A @ W
        want[:, 0] += 1.0
        want[0] += 1.0
        want[1] += 1.0
        assert_same(dsl.compile(updates_through_views, strict_inplace=True)(A, W), want, rtol=1e-5)


def test_a_request_whose_value_is_never_read_is_listed_as_removed() -> None:
    """``explain_inplace`` lists every request: one whose value nothing reads is removed before the
    functional stage, and was missing from the report."""

    def f(x, w):
        y = x @ w
        d = x * 2
        d.add_(1.0)
        return y

    text = dsl.compile(f).lower(A, W).explain_inplace()
    assert f"test_inplace_report.py:{_line(f, 'd.add_')}: add_ -> removed" in text, text


def test_an_integer_index_write_reads_the_array_it_writes() -> None:
    """``h[idx] += 1`` ends with a scatter into ``h``, which keeps every element ``idx`` misses: the
    report said it "writes the array without reading its old value"; it names the old value, and
    the plan agrees."""

    def f(x, idx):
        h = x * 2.0
        h[idx] += 1.0
        return h

    args = (np.ones(5), np.array([0, 2, 2]))
    text = dsl.compile(f).lower(*args).explain_inplace()
    assert "without reading its old value" not in text and "setitem %6 -> in place (%1)" in text, text
    for target in sorted(REPORTS):
        check_consistent(*REPORTS[target](f, args))


def test_a_loop_bodys_report_names_the_carry_not_the_caller() -> None:
    """In a loop body the arguments are the loop's carries: ``c.mul_(2)`` written over the carry was
    "written straight into the caller's array", which the caller's arrays are not."""

    def f(x):
        def body(i, c):
            c.mul_(2.0)
            return c

        return dsl.fori_loop(0, 3, body, x * 1.0)

    text = dsl.compile(f).lower(np.ones(4)).explain_inplace()
    assert "mul_" in text and "written straight into the loop's carry" in text, text
    assert "caller" not in text, text


def writes_into_an_argument(x, y):
    x[0] = y[1] * 2.0
    x[2] = x[1] + y[0]
    x[3:] *= 2.0


def scales_then_updates_an_argument(x, y):
    x *= y
    x[1:] += 1.0
    return x.sum()


def scales_then_transposes_an_argument(x, y):
    x *= y
    x += x.T  # reads other elements: the new value is computed beside x and copied back


@pytest.mark.parametrize("target", sorted(REPORTS))
@pytest.mark.parametrize(
    "fn", [writes_into_an_argument, scales_then_updates_an_argument, scales_then_transposes_an_argument]
)
def test_an_argument_the_program_mutates_holds_its_own_chain(target: str, fn: Any) -> None:
    """A mutated argument's memory is the program's to overwrite, as a donated one's is (plan rule 1):
    ``x[0] = a; x[2] = b; x[3:] *= 2`` writes each update into the caller's array, as NumPy does.
    Before (found 2026-11-27 by an outside program), the first request copied the whole argument into
    the arena ("only the argument's final value is written into" it) and the last copied it back.
    Where the final value cannot go straight back (``x += x.T``), the chain still lives in ``x`` and
    only the final value is computed beside it."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
    bufferized, plan = REPORTS[target](fn, (x.copy(), y))
    requests = [d for d in plan.inplace if d.request]
    *chain, last = requests
    assert chain and all(d.outcome == "in place" for d in chain), "\n".join(map(str, requests))
    assert all("which the program mutates" in d.reason or "caller's array" in d.reason for d in chain)
    whole = [r for r in plan.buffers if r.bytes == x.nbytes and r.in_arena]
    if fn is scales_then_transposes_an_argument:
        assert last.outcome == "copy" and len(whole) == 1, str(plan)
    else:
        assert last.outcome == "in place" and "caller's array" in last.reason, str(last)
        assert not whole, str(plan)  # no copy of the argument in the arena
    assert "arg 0" in str(bufferized)
    if target == "cpu":
        for layout in ("C", "F", "strided"):
            base = np.zeros((128, 64))
            given = np.asfortranarray(x) if layout == "F" else x.copy()
            if layout == "strided":
                base[::2] = x
                given = base[::2]
            want = x.copy()
            expected = fn(want, y)
            result = dsl.compile(fn)(given, y)
            np.testing.assert_allclose(given, want, rtol=1e-12, err_msg=layout)
            if expected is not None:
                np.testing.assert_allclose(result, expected, rtol=1e-12)
            assert not base[1::2].any()


def test_a_kernel_storing_the_write_back_keeps_the_chain_out_of_the_argument() -> None:
    """Under ``grad`` one kernel stores both the write-back of ``y`` (straight into the caller's
    array) and ``y`` before its last update (read by the backward's kernel): the second may not also
    be kept in ``y``'s memory. It was, for one development version of the plan's rule 1 for mutated
    arguments (the fuzzer's mutating-program transforms found it): y came back as 2.4, not 1.68."""
    w = np.array([0.9])

    def f(x, y):
        y += x
        y += x
        y += x
        y *= x
        return (y * w).sum()

    x, y0 = np.array([0.7]), np.array([0.3])
    want = y0.copy()
    f(x.copy(), want)
    got = y0.copy()
    g = dsl.grad(f)(x, got)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(g, w * (want / x[0] + 3 * x[0]), rtol=1e-12)  # d/dx (y0 + 3x) x w


@pytest.mark.parametrize("target", sorted(REPORTS))
def test_a_loop_carrying_a_mutated_argument_starts_from_its_updated_value(target: str) -> None:
    """``v //= v`` is kept in v's own memory; the loop then carries v (its body updates the outer v).
    A carry handed the argument's memory started from the caller's old v (3.28125, not 4.28125: the
    CUDA simulator's fuzzer found it in a development version of the plan's rule 1 for mutated
    arguments). Carries stay out of a mutated argument's memory; the loop code copies them."""

    def f(v, c):
        v //= v

        def body(k, c):
            v[...] += c.sum() * 0.125
            return c * 0.5

        return dsl.fori_loop(0, 3, body, c)

    c = np.arange(6.0).reshape(2, 3)
    _, plan = REPORTS[target](f, (np.array([3.0]), c))
    carries = [r for r in plan.buffers if r.value.type.shape == (1,) and r.reused_from != "%arg0"]
    assert not any(r.param == 0 for r in carries), str(plan)
    if target == "cpu":
        v = np.array([3.0])
        dsl.compile(f)(v, c)
        np.testing.assert_allclose(v, [1 + c.sum() * 0.125 * 1.75], rtol=1e-12)


def test_a_fused_request_names_the_new_elements_it_stored() -> None:
    """``x[1:] += 1`` whose array is read next by another kernel (fused into it) still stores its new
    elements first: the report said "needs no buffer" beside the plan's 63x64 buffer (found
    2026-11-27); it names the bytes."""

    def f(x, y):
        x *= y
        x[1:] += 1.0
        x[0] = y[2]
        x[:, 1] = 5.0
        return x.sum()

    x = np.ones((64, 64))
    plan = dsl.compile(f).lower(x.copy(), x).memory_plan()
    (row,) = [r for r in plan.buffers if r.in_arena]
    (request,) = [d for d in plan.inplace if d.request == "+="]
    assert request.outcome == "fused" and f"computed first into {row.bytes} bytes" in request.reason, request


# ---- only the user's requests, judged on what the user wrote --------------------------------------


def at_add_then_read(x, idx):
    d = x.at[idx].add(1.0)
    return d + x


def at_set_both_returned(x, idx):
    d = x.at[idx].set(0.0)
    return d, x


def at_slice_set(x, idx):
    d = x.at[1:3].set(0.0)
    return d * x


def index_add_out_of_place(x, idx):
    d = x.index_add(0, idx, dnp.ones(3, np.float32))
    return d + x


def _at_reference(fn: Any, x: np.ndarray, idx: np.ndarray) -> Any:
    d = x.copy()
    if fn is at_slice_set:
        d[1:3] = 0.0
        return d * x
    if fn is at_set_both_returned:
        d[idx] = 0.0
        return d, x
    np.add.at(d, idx, 1.0)
    return d + x


@pytest.mark.parametrize("fn", [at_add_then_read, at_set_both_returned, at_slice_set, index_add_out_of_place])
def test_functional_updates_are_not_in_place_requests(fn: Any) -> None:
    """JAX's ``x.at[idx].add(v)`` (and PyTorch's ``x.index_add``) return a new array: no request, so
    no report row and nothing for ``strict_inplace`` to refuse (the report said "copy" and strict
    raised when ``x`` was read after it, found by an outside tester)."""
    x, idx = np.arange(5, dtype=np.float32), np.array([0, 2, 2])
    lowered = dsl.compile(fn).lower(x, idx)
    assert not [d for d in lowered.memory_plan().inplace if d.request]
    assert lowered.explain_inplace().startswith("no in-place requests")
    got = dsl.compile(fn, strict_inplace=True)(x, idx)
    assert_same(got, _at_reference(fn, x, idx))
    np.testing.assert_array_equal(x, np.arange(5, dtype=np.float32))  # x unchanged


def test_an_indexed_in_place_update_is_still_a_request() -> None:
    def f(x, idx):
        x[idx] += 1.0
        return x * 2

    x, idx = np.arange(5, dtype=np.float32), np.array([0, 2])
    rows = outcomes(dsl.compile(f).lower(x, idx).memory_plan())
    assert f"+=@{_line(f, '+=')}" in rows and "copy" not in rows.values(), rows


def increment_a_copy(x):
    v = x.copy()
    v += 1.0
    return v


def increment_a_product_by_one(x):
    v = x * 1.0
    v += 1.0
    return v


def increment_a_copy_read_after(x):
    v = x.copy()
    v *= 3.0
    return v + x


def test_a_copy_written_in_a_loop_body_is_not_copied_each_iteration() -> None:
    """``y = x.copy()`` written by a ``fori_loop`` body (a lifted carry): the body updates it in
    place. (The copy's explicit op, recorded for a request in the trace that made the copy, was
    recorded inside the body too: a whole-array copy per iteration, 1800x slower.)"""

    def f(x):
        y = x.copy()

        def body(i, c):
            y[i] += 1.0
            return c + 1.0

        return y, dsl.fori_loop(0, 20, body, x.sum())

    x = np.zeros(200, np.float32)
    text = dsl.compile(f).lower(x).ir("optimized")
    assert not re.search(r'"dsl\.copy"\(%\w+\)[^\n]*: \(tensor<200xf32>\)', text), text
    y, c = dsl.compile(f)(x)
    want = np.zeros(200, np.float32)
    want[:20] = 1.0
    assert_same(y, want)
    assert float(c) == 20.0


@pytest.mark.parametrize("fn", [increment_a_copy, increment_a_product_by_one, increment_a_copy_read_after])
def test_a_request_on_a_copy_of_an_argument_is_not_a_copy(fn: Any) -> None:
    """``v = x.copy(); v += 1`` writes the user's copy, not ``x``: the optimizer used to replace the
    copy (and ``x * 1.0``) by ``x``, and the request was judged against the caller's array
    ("copy ... fresh memory", strict raised) although the code is one kernel reading ``x``."""
    x = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    lowered = dsl.compile(fn).lower(x)
    (decision,) = [d for d in lowered.memory_plan().inplace if d.request]
    assert decision.outcome == "fused", decision
    assert lowered.memory_plan().peak_bytes == 0
    want = x * 3 + x if fn is increment_a_copy_read_after else x + 1
    assert_same(dsl.compile(fn, strict_inplace=True)(x), want)
    np.testing.assert_array_equal(x, np.linspace(0.0, 1.0, 8, dtype=np.float32))


def two_equal_matmuls_centred(y, w):
    a = y @ w
    s = a.sum(axis=0)
    a -= s[None, :]
    b = y @ w
    t = b.sum(axis=0)
    b -= t[None, :]
    return a, b


def test_equal_arrays_each_written_in_place_are_not_merged() -> None:
    """CSE merged ``b = y @ w`` into ``a = y @ w``; ``a -= ...`` was then judged a copy blocked by the
    read of ``b``, another array of the user's. An array a request writes over keeps its own op."""
    fn = two_equal_matmuls_centred
    y, w = A[:4, :4].copy(), W[:4, :4].copy()
    bufferized, plan = cpu_report(fn, (y, w))
    first, second = _line(fn, "a -="), _line(fn, "b -=")
    assert outcomes(plan) == {f"-=@{first}": "in place", f"-=@{second}": "in place"}
    check_consistent(bufferized, plan)
    want = y @ w - (y @ w).sum(axis=0)[None, :]
    got = dsl.compile(fn, strict_inplace=True)(y, w)
    assert_same(got[0], want, rtol=1e-5)
    assert_same(got[1], want, rtol=1e-5)


def exp_of_a_value_the_backward_reads(a, w):
    b = dnp.sin(a @ w)
    c = b @ w
    b.exp_()
    return ((b @ w) + c).sum()


def per_example_requests(x, w):
    h = x @ w
    h.tanh_()
    h[0] = 1.0
    return h.sum()


def test_requests_survive_vmap() -> None:
    """The batching transform rebuilt every op without its in-place mark: under ``vmap`` the report
    said "no in-place requests" and ``strict_inplace`` let a copy through that ``grad`` alone refuses."""
    a, w = A[:4, :3].astype(np.float64), W[:3, :3].astype(np.float64)
    grad = dsl.grad(exp_of_a_value_the_backward_reads, argnums=1)
    batched = dsl.vmap(grad, in_axes=(0, None))
    exp = _line(exp_of_a_value_the_backward_reads, "b.exp_")
    assert outcomes(dsl.compile(batched).lower(a, w).memory_plan()) == {f"exp_@{exp}": "copy"}
    with pytest.raises(dsl.InplaceError, match=f"exp_ cannot be realized without a copy.*:{exp - 1}"):
        dsl.compile(batched, strict_inplace=True)(a, w)
    assert_same(dsl.compile(batched)(a, w), np.stack([grad(row, w) for row in a]), rtol=1e-10)

    fn = dsl.vmap(per_example_requests, in_axes=(0, None))
    text = dsl.compile(fn).lower(A[:5, :3], W[:3, :3]).explain_inplace()
    tanh, setitem = _line(per_example_requests, "h.tanh_"), _line(per_example_requests, "h[0]")
    assert f":{tanh}: tanh_ " in text and f":{setitem}: setitem " in text, text
    assert "removed" not in text, text

    def scattered(x, i, v):
        y = x * 2.0
        y[:, i] += v
        return y

    # a batched index: the rule's scatter (not the transpose it ends with) carries the request
    x, i, v = np.ones((3, 4)), np.array([[0, 2], [1, 3]]), np.ones((2, 3, 2))
    fn = dsl.vmap(scattered, in_axes=(None, 0, 0))
    marked = re.findall(
        r'"dsl\.(\w+)"[^\n]*dsl\.inplace = "setitem"', dsl.compile(fn).lower(x, i, v).ir("functional")
    )
    assert "scatter" in marked and "transpose" not in marked, marked
    assert_same(dsl.compile(fn)(x, i, v), np.stack([scattered(x, k, u) for k, u in zip(i, v)]))


@pytest.mark.parametrize(
    "update, numpy_update",
    [
        (lambda h: h.reshape(-1).add_(1.0), lambda h: h + 1.0),
        (lambda h: h.reshape(4, 64).mul_(2.0), lambda h: h * 2.0),
        (lambda h: h.ravel().add_(1.0), lambda h: h + 1.0),
        (lambda h: h[None].add_(1.0), lambda h: h + 1.0),
        (lambda h: h.reshape(2, 128).__iadd__(1.0), lambda h: h + 1.0),
    ],
    ids=["reshape(-1).add_", "reshape(4,64).mul_", "ravel().add_", "[None].add_", "reshape +="],
)
def test_an_elementwise_update_through_a_reshape_is_in_place(update, numpy_update) -> None:
    """An elementwise update through a reshape of a contiguous array reads each element where it
    writes it (row-major order is the array's): it is in place. It was a copy, the report saying
    "its kernel reads the old value at other elements than it writes" (untrue), the plan twice the
    memory, and ``strict_inplace`` raised."""

    def f(x, w):
        h = x @ w
        update(h)
        return h @ w

    a = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    lo = dsl.compile(f).lower(a, a)
    assert set(outcomes(lo.memory_plan()).values()) == {"in place"}, lo.explain_inplace()
    assert "other elements" not in lo.explain_inplace() and "computed first" not in lo.explain_inplace()
    assert lo.memory_plan().peak_bytes == a.nbytes
    got = dsl.compile(f, strict_inplace=True)(a, a)
    assert_same(got, dsl.compile(f, inplace=False)(a, a))
    np.testing.assert_allclose(got, numpy_update(a @ a) @ a, rtol=1e-4)
