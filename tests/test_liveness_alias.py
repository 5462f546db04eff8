"""Liveness and alias analysis on hand-built functions: last uses, dying operands, storage classes.

Covers chains, fan-out, a value read twice by one op, dead values, live-out results, parameters,
write-backs, donated arguments, reshape views, regions (a hand-built loop-like op), the annotating
passes, and the linear running time of liveness on a 100,000-op function.
"""

from __future__ import annotations

from typing import Any

import pytest

from compiler.ir.core import Block, Function, Location, Op, Value
from compiler.ir.parser import parse_module
from compiler.ir.printer import print_function, print_module
from compiler.ir.types import DType, TensorType
from compiler.ir.verify import verify
from compiler.passes import liveness as liveness_module
from compiler.passes.alias import analyze_aliases, annotate_aliases
from compiler.passes.liveness import annotate_liveness, liveness
from compiler.pipeline import PASSES_BY_NAME, Options, run_passes
from compiler.prims import REGISTRY

LOC = Location("model.py", 1, 1)
VEC = TensorType((4,), DType.f32)


def op(name: str, *operands: Value, **attrs: Any) -> Op:
    return Op.create(REGISTRY[name], list(operands), attrs, LOC)


def function(params: tuple[Value, ...], ops: list[Op], results: tuple[Value, ...], **attrs: Any) -> Function:
    func = Function("f", Block(params, tuple(ops), results), attrs=attrs)
    verify(func)
    return func


def params(n: int, type: TensorType = VEC) -> tuple[Value, ...]:
    return tuple(Value(type) for _ in range(n))


# ---- liveness -----------------------------------------------------------------------------------


def test_chain_each_value_dies_at_its_only_reader() -> None:
    (x,) = params(1)
    a = op("exp", x)
    b = op("neg", a.result)
    c = op("sin", b.result)
    info = liveness(function((x,), [a, b, c], (c.result,)))
    assert info.position == {a: 0, b: 1, c: 2}
    assert info.last_use == {x: 0, a.result: 1, b.result: 2, c.result: 3}
    assert info.dies_at(a) == (x,)
    assert info.dies_at(b) == (a.result,)
    assert info.dies_at(c) == (b.result,)


def test_fan_out_lives_until_its_last_reader() -> None:
    x, y = params(2)
    a = op("add", x, y)
    b = op("exp", a.result)
    c = op("mul", b.result, x)  # x read again here
    d = op("add", c.result, a.result)  # a's last reader
    info = liveness(function((x, y), [a, b, c, d], (d.result,)))
    assert info.last_use[a.result] == 3
    assert info.last_use[x] == 2
    assert info.last_use[y] == 0
    assert info.dies_at(a) == (y,)
    assert info.dies_at(b) == ()
    assert info.dies_at(c) == (b.result, x)
    assert info.dies_at(d) == (c.result, a.result)


def test_value_read_twice_by_one_op_is_listed_once() -> None:
    (x,) = params(1)
    a = op("exp", x)
    b = op("mul", a.result, a.result)
    info = liveness(function((x,), [a, b], (b.result,)))
    assert info.dies_at(b) == (a.result,)
    annotated = annotate_liveness(function((x,), [a, b], (b.result,)))
    assert annotated.ops[1].attrs["dsl.dies"] == (0, 1)  # both operand slots hold the dying value


def test_dead_values_map_to_their_definition() -> None:
    x, unused = params(2)
    a = op("exp", x)
    dead = op("sin", x)
    b = op("neg", a.result)
    info = liveness(function((x, unused), [a, dead, b], (b.result,)))
    assert info.last_use[dead.result] == 1
    assert info.last_use[unused] == -1  # a parameter is defined before the first op
    assert info.last_use[x] == 1
    assert info.dies_at(dead) == (x,)
    assert info.live_across(1) == 1  # only a: the dead sin result is not live after its definition


def test_function_results_are_live_out() -> None:
    (x,) = params(1)
    a = op("exp", x)
    b = op("neg", a.result)
    info = liveness(function((x,), [a, b], (a.result, b.result, x)))
    assert info.last_use[a.result] == 2 == info.last_use[b.result] == info.last_use[x]
    assert info.dies_at(a) == ()
    assert info.dies_at(b) == ()
    assert info.live_across(0) == 2  # x and a
    assert info.live_across(1) == 3


def test_writeback_results_are_live_out() -> None:
    x, y = params(2)
    new_x = op("add", x, y)
    total = op("reduce_sum", new_x.result, axes=(0,))
    func = function((x, y), [new_x, total], (total.result, new_x.result), **{"dsl.writeback": (0,)})
    info = liveness(func)
    assert info.last_use[new_x.result] == 2
    assert info.dies_at(new_x) == (x, y)
    assert info.dies_at(total) == ()


def test_annotation_marks_dying_operand_indices_and_round_trips() -> None:
    x, y = params(2)
    a = op("add", x, y)
    b = op("mul", a.result, y)
    func = annotate_liveness(function((x, y), [a, b], (b.result,)))
    verify(func)
    assert func.ops[0].attrs["dsl.dies"] == (0,)
    assert func.ops[1].attrs["dsl.dies"] == (0, 1)
    text = print_function(func)
    assert print_module(parse_module(text)) == text
    again = annotate_liveness(func)  # idempotent: a stale annotation is replaced, not merged
    assert print_function(again) == text


def test_no_attribute_when_nothing_dies() -> None:
    (x,) = params(1)
    a = op("exp", x)
    func = annotate_liveness(function((x,), [a], (a.result, x)))
    assert "dsl.dies" not in func.ops[0].attrs


def test_passes_are_registered_and_run_through_the_pipeline() -> None:
    (x,) = params(1)
    a = op("exp", x)
    func = function((x,), [a], (a.result,))
    passes = (PASSES_BY_NAME["liveness"], PASSES_BY_NAME["alias"])
    out = run_passes(func, Options(verify=True), passes)["alias"]
    assert out.ops[0].attrs["dsl.dies"] == (0,)
    assert out.ops[0].attrs["dsl.storage"] == 1


# ---- liveness with regions ----------------------------------------------------------------------


def loop_op(operands: tuple[Value, ...], body: Block) -> Op:
    """A loop-like op: binds ``body.args`` to its operands, yields ``body.results`` as its results.

    No pass builds such ops yet; ``copy`` stands in as the primitive since only the structure matters.
    """
    results = tuple(Value(v.type) for v in body.results)
    return Op(REGISTRY["copy"], operands, {}, results, LOC, (body,))


def region_function() -> dict[str, Any]:
    """x, w -> loop(carried = x) { t = carried * w; u = exp(t); yield u + w }; after: r = loop + x."""
    x, w = params(2)
    carried = Value(VEC)
    t = op("mul", carried, w)
    u = op("exp", t.result)
    y = op("add", u.result, w)
    body = Block((carried,), (t, u, y), (y.result,))
    before = op("neg", w)
    loop = loop_op((x,), body)
    after = op("add", loop.result, x)
    func = Function("f", Block((x, w), (before, loop, after), (after.result,)))
    verify(func)
    return {**locals(), "func": func}


def test_value_read_inside_a_region_is_live_across_its_owner() -> None:
    r = region_function()
    info = liveness(r["func"])
    assert info.last_use[r["w"]] == 1  # read only inside the loop: live up to (and across) the loop op
    assert info.last_use[r["x"]] == 2
    assert info.dies_at(r["loop"]) == ()  # x is read after; w is captured, not an operand
    assert info.dies_at(r["before"]) == ()  # w is still needed by the loop


def test_outer_values_never_die_inside_a_loop_body() -> None:
    r = region_function()
    info = liveness(r["func"])
    body = info.blocks[r["body"]]
    assert body.live_in == frozenset({r["w"]})
    assert body.live_out == frozenset({r["y"].result, r["w"]})  # the next iteration reads w again
    assert info.dies_at(r["t"]) == (r["carried"],)  # the carried value is rebound each iteration
    assert info.dies_at(r["u"]) == (r["t"].result,)
    assert info.dies_at(r["y"]) == (r["u"].result,)  # w survives its last read in the body


def test_nested_regions_propagate_captures_outwards() -> None:
    (x,) = params(1)
    inner_arg, outer_arg = Value(VEC), Value(VEC)
    inner_add = op("add", inner_arg, x)  # x from two levels up
    inner = Block((inner_arg,), (inner_add,), (inner_add.result,))
    inner_loop = loop_op((outer_arg,), inner)
    outer = Block((outer_arg,), (inner_loop,), (inner_loop.result,))
    zero = op("neg", x)
    outer_loop = loop_op((zero.result,), outer)
    func = Function("f", Block((x,), (zero, outer_loop), (outer_loop.result,)))
    verify(func)
    info = liveness(func)
    assert info.last_use[x] == 1
    assert info.blocks[outer].live_in == frozenset({x})
    assert info.dies_at(inner_loop) == (outer_arg,)
    assert info.dies_at(inner_add) == (inner_arg,)


@pytest.fixture
def swept(monkeypatch: pytest.MonkeyPatch) -> list[Block]:
    """The blocks liveness sweeps, in order."""
    blocks: list[Block] = []
    original = liveness_module._sweep

    def counting(block: Block, *args: Any) -> Any:
        blocks.append(block)
        return original(block, *args)

    monkeypatch.setattr(liveness_module, "_sweep", counting)
    return blocks


def test_loop_fixpoint_resweeps_the_loop_body_not_the_program(swept: list[Block]) -> None:
    r = region_function()
    liveness(r["func"])
    # The body's live-in grows from nothing on its first sweep; the second confirms the fixpoint.
    assert swept == [r["body"], r["body"], r["func"].body]


def test_function_without_regions_is_swept_once(swept: list[Block]) -> None:
    func = chain_function(50)
    liveness(func)
    assert swept == [func.body]


def test_annotation_reaches_ops_inside_regions() -> None:
    r = region_function()
    func = annotate_liveness(r["func"])
    verify(func)
    (body,) = func.ops[1].regions
    assert [o.attrs.get("dsl.dies") for o in body.ops] == [(0,), (0,), (0,)]


# ---- linear time --------------------------------------------------------------------------------


def chain_function(n: int) -> Function:
    """n adds; each reads the previous value and one from 7 ops back (fan-out of 2 per value)."""
    (x,) = params(1)
    values, ops = [x], []
    for i in range(n):
        o = op("add", values[-1], values[max(0, i - 7)])
        ops.append(o)
        values.append(o.result)
    return Function("chain", Block((x,), tuple(ops), (values[-1],)))


@pytest.fixture(scope="module")
def big_chain() -> Function:
    return chain_function(100_000)


def test_liveness_on_100k_ops(big_chain: Function) -> None:
    """Correct at scale (its time per op is measured by benchmarks/bench_suite.py, not asserted)."""
    n, func = 100_000, big_chain
    info = liveness(func)
    ops = func.ops
    assert info.last_use[ops[-1].result] == n
    assert info.last_use[ops[500].result] == 508  # read by op 501 (previous) and op 508 (7 back + 1)
    assert info.dies_at(ops[508]) == (ops[500].result,)
    assert len(info.last_use) == n + 1


def test_alias_analysis_on_100k_ops(big_chain: Function) -> None:
    info = analyze_aliases(big_chain)
    assert len(info.storage) == len(big_chain.ops) + 1  # no views: every value has storage of its own
    assert len(set(info.storage.values())) == len(info.storage)


# ---- alias analysis -----------------------------------------------------------------------------


def test_every_plain_value_has_its_own_class_numbered_params_first() -> None:
    x, y = params(2)
    a = op("add", x, y)
    b = op("exp", a.result)
    info = analyze_aliases(function((x, y), [a, b], (b.result,)))
    assert [info.storage[v] for v in (x, y, a.result, b.result)] == [0, 1, 2, 3]
    assert info.owner == {0: "caller", 1: "caller", 2: "arena", 3: "result"}
    assert not info.may_overwrite(x)
    assert info.may_overwrite(a.result)
    assert info.may_overwrite(b.result)
    assert not info.same_storage(a.result, b.result)


def test_reshape_views_share_storage_with_their_operand() -> None:
    (x,) = params(1)
    view_of_param = op("reshape", x, shape=(2, 2))
    a = op("exp", x)
    view = op("reshape", a.result, shape=(2, 2))
    view_of_view = op("reshape", view.result, shape=(4,))
    b = op("neg", view_of_view.result)
    func = function((x,), [view_of_param, a, view, view_of_view, b], (b.result,))
    info = analyze_aliases(func)
    assert info.same_storage(view_of_param.result, x)
    assert not info.may_overwrite(view_of_param.result)  # a view of a caller's array is the caller's
    assert info.same_storage(a.result, view.result)
    assert info.same_storage(a.result, view_of_view.result)
    assert not info.same_storage(a.result, b.result)
    assert info.owner[info.storage[a.result]] == "arena"


def test_returned_view_puts_its_base_in_result_memory() -> None:
    (x,) = params(1)
    a = op("exp", x)
    view = op("reshape", a.result, shape=(2, 2))
    info = analyze_aliases(function((x,), [a, view], (view.result,)))
    assert info.owner[info.storage[a.result]] == "result"


def test_returned_parameter_keeps_the_callers_storage() -> None:
    (x,) = params(1)
    view = op("reshape", x, shape=(2, 2))
    info = analyze_aliases(function((x,), [view], (view.result, x)))
    assert info.owner == {0: "caller"}


def test_writeback_result_lives_in_the_argument() -> None:
    x, y = params(2)
    new_x = op("add", x, y)
    total = op("reduce_sum", new_x.result, axes=(0,))
    func = function((x, y), [new_x, total], (total.result, new_x.result), **{"dsl.writeback": (0,)})
    info = analyze_aliases(func)
    assert info.same_storage(new_x.result, x)
    assert info.owner[info.storage[x]] == "caller-mutable"
    assert info.owner[info.storage[y]] == "caller"
    assert info.may_overwrite(x)
    assert not info.may_overwrite(y)
    assert info.storage[new_x.result] == 0  # numbered by its class's first appearance: the param
    assert info.storage[total.result] == 2


def test_writeback_through_a_view_joins_the_whole_class() -> None:
    (x,) = params(1)
    flat = op("exp", x)
    view = op("reshape", flat.result, shape=(4,))
    func = function((x,), [flat, view], (view.result,), **{"dsl.writeback": (0,)})
    info = analyze_aliases(func)
    assert info.same_storage(flat.result, x)


def test_writeback_of_another_argument_is_a_copy() -> None:
    x, y = params(2)
    func = function((x, y), [], (y,), **{"dsl.writeback": (0,)})  # x <- y
    info = analyze_aliases(func)
    assert not info.same_storage(x, y)
    assert info.owner == {0: "caller-mutable", 1: "caller"}


def test_one_value_written_back_to_two_arguments_lives_in_the_first() -> None:
    x, y = params(2)
    a = op("exp", x)
    func = function((x, y), [a], (a.result, a.result), **{"dsl.writeback": (0, 1)})
    info = analyze_aliases(func)
    assert info.same_storage(a.result, x)
    assert not info.same_storage(a.result, y)
    assert info.owner == {0: "caller-mutable", 1: "caller-mutable"}


def test_donated_arguments_may_be_overwritten() -> None:
    x, y = params(2)
    a = op("add", x, y)
    func = function((x, y), [a], (a.result,))
    info = analyze_aliases(func, donate_argnums=(1,))
    assert not info.may_overwrite(x)
    assert info.may_overwrite(y)
    assert info.owner[info.storage[y]] == "caller-mutable"
    with pytest.raises(ValueError, match="donate_argnums: 2"):
        analyze_aliases(func, donate_argnums=(2,))


def test_alias_annotation_and_round_trip() -> None:
    x, y = params(2)
    new_x = op("add", x, y)
    view = op("reshape", new_x.result, shape=(2, 2))
    out = op("neg", view.result)
    func = function((x, y), [new_x, view, out], (out.result, new_x.result), **{"dsl.writeback": (0,)})
    annotated = annotate_aliases(func, donate_argnums=(1,))
    verify(annotated)
    assert [o.attrs["dsl.storage"] for o in annotated.ops] == [0, 0, 2]
    assert annotated.attrs["dsl.arg_storage"] == (0, 1)
    assert annotated.attrs["dsl.storage_owners"] == "caller-mutable caller-mutable result"
    assert annotated.attrs["dsl.writeback"] == (0,)
    text = print_function(annotated)
    assert print_module(parse_module(text)) == text


def test_region_values_get_classes() -> None:
    r = region_function()
    info = analyze_aliases(r["func"])
    body_values = (r["carried"], r["t"].result, r["u"].result, r["y"].result)
    assert len({info.storage[v] for v in body_values}) == 4
    assert all(info.owner[info.storage[v]] == "arena" for v in body_values)
    annotated = annotate_aliases(r["func"])
    verify(annotated)
    (body,) = annotated.ops[1].regions
    assert all("dsl.storage" in o.attrs for o in body.ops)
