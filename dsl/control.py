"""Loops and branches traced as IR regions: ``fori_loop``, ``scan``, ``while_loop`` and ``cond``, with
``jax.lax``'s signatures and semantics.

Each body runs once, on abstract arrays, in a trace of its own (``tracing.tracing``): its ops become a
block whose arguments are the carries (and the counter, the rows of ``xs``, a branch's operands),
held by one region op of ``compiler/prims/control.py``. A body may read arrays from outside it (they
stay values of the enclosing block, as in MLIR's ``scf``); only what it returns leaves it, so an array
computed inside a body and read after it is a ``TraceError`` at the reading line (``Trace.sealed``).

A body that writes into an array of an enclosing block (``a[i] = c`` for an argument ``a``) has eager
semantics: the write raises ``tracing.LiftCarry`` (``Array.write``), and the loop traces its body again
with that array's storage as one more carry (after the user's; for ``cond`` one more operand and
result of both branches), its storage bound inside the body to the carry's block argument, so every
iteration reads what the previous one wrote; after the op the storage holds the op's result (and an
argument's final value is written back to the caller as for any in-place write).
Carries are pytrees (``dsl/pytree.py``); a carry whose shape or dtype changes is a ``TraceError`` at
the line of the call naming both types. Python control flow on a traced value inside a body is the
usual error of ``bool()`` of a traced array, at the body's line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from compiler.ir.core import Block, Op, Value, walk_values
from compiler.ir.types import DType, TensorType
from compiler.prims import control, elementwise
from dsl import ops, pytree, tracing
from dsl.array import Array, Storage
from dsl.binding import signature_of
from dsl.errors import TraceError


def _leaves(tree: Any) -> tuple[list[Array], pytree.TreeDef]:
    leaves, treedef = pytree.flatten(tree)
    return [ops.asarray(x) for x in leaves], treedef


class _Shown(str):
    """A type in a message: its IR text wherever it is printed (a tuple's repr shows its items')."""

    def __repr__(self) -> str:
        return str(self)


def _describe(types: Sequence[TensorType]) -> str:
    return ", ".join(str(t) for t in types) or "nothing"


class _Body:
    """A body traced into a block: ``args`` are arrays of the given types, fresh values per body.
    ``lifted``: storages of enclosing arrays the body writes (``LiftCarry``), bound to block arguments
    placed after the first ``at`` (default: after all) and yielded after the body's own results."""

    def __init__(
        self,
        fn: Callable[..., Any],
        types: Sequence[TensorType],
        weak: Sequence[bool],
        lifted: Sequence[Storage] = (),
        at: int | None = None,
    ) -> None:
        self.fn = fn
        values = [Value(t) for t in types]
        self.args = [Array.fresh(v, w) for v, w in zip(values, weak, strict=True)]
        self.lifted = list(lifted)
        self.lifted_values = [Value(s.value.type) for s in self.lifted]
        at = len(values) if at is None else at
        self.values = values[:at] + self.lifted_values + values[at:]
        self.changed = False  # whether the body wrote a lifted storage (a ``while``'s cond may not)

    def trace(self, *args: Any) -> tuple[Block, Any, list[Array]]:
        """Run ``fn(*args)`` in a trace of its own; returns the block, the output tree and its leaves
        (the lifted storages' final values are the block's last results, not among the leaves)."""
        outer = tracing.current()
        saved = [s.value for s in self.lifted]
        with tracing.tracing() as inner:
            inner.strict = outer.strict
            inner.sealed = outer.sealed  # what enclosing bodies sealed stays sealed in here
            inner.local = set(self.values)
            try:
                for s, v in zip(self.lifted, self.lifted_values, strict=True):
                    s.value, s.version = v, s.version + 1
                out = _call_body(self.fn, args)
                leaves, treedef = _leaves(out)
                results = [a.value for a in leaves]  # may record ops (a Python scalar, a view): in here
                final = [s.value for s in self.lifted]
            finally:
                for s, v in zip(self.lifted, saved, strict=True):
                    s.value, s.version = v, s.version + 1
        self.changed = final != self.lifted_values
        block = Block(tuple(self.values), tuple(inner.ops), tuple(results + final))
        outer.narrowed.update(inner.narrowed)
        outer.assigned_floats.update(inner.assigned_floats)
        outer.sealed |= walk_values(block)
        return block, treedef, leaves


def _call_body(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)``; a body that cannot take them (``fori_loop(0, n, lambda c: ..., x)``) raises a
    ``TraceError`` at the line of the loop or branch, saying what it passes."""
    try:
        return fn(*args)
    except TypeError as err:
        try:
            signature_of(fn).bind(*args)
        except TypeError:
            name = getattr(fn, "__name__", "the body")
            raise tracing.user_error(
                TraceError,
                f"{name} is called with {len(args)} argument(s) here ({err}): a fori_loop body takes "
                "(i, carry), a scan body (carry, x), a while_loop's cond_fun and body_fun (carry), "
                "cond's branches the operands",
            ) from None
        except ValueError:  # no signature to check
            pass
        raise


def _check_carry(what: str, init_types: list[TensorType], tree: Any, treedef: Any, out: list[Array]) -> None:
    """The body returns the carry's structure and types (``TraceError`` at the call's line)."""
    if treedef != tree:
        returned = pytree.unflatten(treedef, ["*"] * len(out))
        given = pytree.unflatten(tree, ["*"] * len(init_types))
        raise tracing.user_error(
            TraceError,
            f"{what} must return a carry shaped as its input: it returned {returned!r} for {given!r}",
        )
    for k, (want, got) in enumerate(zip(init_types, out, strict=True)):
        if got.type != want:
            raise tracing.user_error(
                TraceError,
                f"{what} changes the type of carry leaf #{k} from {want} to {got.type}: a carry keeps "
                "its shape and dtype (cast it in the initial value or in the body, e.g. .astype())",
            )


def _emit(prim: Any, operands: Sequence[Value], attrs: dict[str, Any], regions: tuple[Block, ...]) -> Op:
    return tracing.current().emit_op(prim, operands, attrs, regions)


T = TypeVar("T")


def _lifting(run: Callable[[list[Storage]], T]) -> tuple[T, list[Storage]]:
    """``run(lifted)`` (which traces the bodies), again with one more lifted storage each time a body
    writes into an array of an enclosing block (``tracing.LiftCarry``)."""
    lifted: list[Storage] = []
    while True:
        try:
            return run(lifted), lifted
        except tracing.LiftCarry as signal:
            if any(s is signal.storage for s in lifted):
                raise
            lifted.append(signal.storage)


def _store_lifted(lifted: Sequence[Storage], values: Sequence[Value]) -> None:
    """After the op: each lifted storage holds the op's result for it (a write of the enclosing
    trace, which may itself be a body writing an array of its own enclosing block)."""
    trace = tracing.current()
    for s, v in zip(lifted, values, strict=True):
        if not trace.owns(s.value):
            raise tracing.LiftCarry(s)
        s.value, s.version = v, s.version + 1


def _bound(x: Any, name: str) -> Array:
    """A loop bound as a 0-d i64 array: a Python int or a traced integer scalar."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, Array)):
        raise tracing.user_error(
            TraceError, f"fori_loop: {name} must be an int or a traced integer scalar, got {type(x).__name__}"
        )
    a = ops.constant(int(x), DType.i64) if not isinstance(x, Array) else x
    if a.shape != () or not a.ir_dtype.is_int:
        raise tracing.user_error(
            TraceError, f"fori_loop: {name} must be an integer scalar, got an array of type {a.type}"
        )
    return a if a.ir_dtype is DType.i64 else ops.emit(elementwise.cast, [a], {"dtype": DType.i64})


def _rank(d: DType) -> int:
    return 0 if d.is_bool else 1 if d.is_int else 2


def _promoted(init: list[Array], tree: Any, treedef: Any, out: Sequence[Array]) -> list[Array] | None:
    """JAX's promotion of weak initial carries: a leaf made from a Python scalar whose body result has
    its shape and a dtype of its kind or wider starts in that dtype (``0.0`` summing float32 arrays
    carries a float32), then the body is traced again. None when no leaf changes."""
    if treedef != tree:
        return None
    changed, new = False, []
    for a, b in zip(init, out, strict=True):
        if (
            a.weak
            and a.shape == b.shape
            and a.ir_dtype != b.ir_dtype
            and _rank(a.ir_dtype) <= _rank(b.ir_dtype)
        ):
            a, changed = ops.emit(elementwise.cast, [a], {"dtype": b.ir_dtype}, weak=b.weak), True
        new.append(a)
    return new if changed else None


def _traced_promoted(
    traced: Callable[[list[Array]], tuple[Block, pytree.TreeDef, list[Array]]],
    init: list[Array],
    tree: Any,
    carried: Callable[[pytree.TreeDef, list[Array]], tuple[pytree.TreeDef, list[Array]]] = lambda t, o: (
        t,
        o,
    ),
) -> tuple[list[Array], Block, pytree.TreeDef, list[Array]]:
    """``traced(init)``, traced again from the promoted carries where ``_promoted`` changes one
    (``carried``: the carry's tree and leaves among the body's output); returns the carries used."""
    block, treedef, out = traced(init)
    promoted = _promoted(init, tree, *carried(treedef, out))
    if promoted is None:
        return init, block, treedef, out
    return (promoted, *traced(promoted))


def _promote_branches(blocks: list[Block], then_out: list[Array], else_out: list[Array]) -> list[Block]:
    """JAX's promotion of weak branch results: where one branch returns a Python scalar (weak) and the
    other an array of its shape and of its kind or wider, the weak one is cast to the other's dtype
    (a cast op added to the end of its block)."""
    ops_of = [list(b.ops) for b in blocks]
    results = [list(b.results) for b in blocks]
    for k, (a, b) in enumerate(zip(then_out, else_out, strict=True)):
        if a.shape != b.shape or a.ir_dtype == b.ir_dtype:
            continue
        for side, (weak, strong) in enumerate(((a, b), (b, a))):
            if weak.weak and _rank(weak.ir_dtype) <= _rank(strong.ir_dtype):
                cast = Op.create(
                    elementwise.cast, [results[side][k]], {"dtype": strong.ir_dtype}, tracing.user_location()
                )
                ops_of[side].append(cast)
                results[side][k] = cast.result
                break
    return [Block(b.args, tuple(o), tuple(r)) for b, o, r in zip(blocks, ops_of, results, strict=True)]


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``body_fun(i, carry) -> carry`` for ``i`` in ``range(lower, upper)``; returns the last carry.
    The counter is a weak integer scalar, as a Python loop's ``i`` is: ``c + i`` keeps ``c``'s dtype."""
    lo, hi = _bound(lower, "lower"), _bound(upper, "upper")
    init0, tree = _leaves(init_val)

    def run(lifted: list[Storage]) -> tuple[list[Array], Block, pytree.TreeDef, list[Array]]:
        def traced(init: list[Array]) -> tuple[Block, pytree.TreeDef, list[Array]]:
            weak = [True, *(a.weak for a in init)]
            body = _Body(body_fun, [control.INDEX, *(a.type for a in init)], weak, lifted)
            return body.trace(body.args[0], pytree.unflatten(tree, body.args[1:]))

        return _traced_promoted(traced, init0, tree)

    (init, block, treedef, out), lifted = _lifting(run)
    types = [a.type for a in init]
    _check_carry("fori_loop's body_fun", types, tree, treedef, out)
    inits = [lo.value, hi.value, *(a.value for a in init), *(s.value for s in lifted)]
    op = _emit(control.for_loop, inits, {}, (block,))
    _store_lifted(lifted, op.results[len(init) :])
    return pytree.unflatten(
        tree, [Array.fresh(r, a.weak) for r, a in zip(op.results[: len(init)], init, strict=True)]
    )


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``while cond_fun(carry): carry = body_fun(carry)``; returns the last carry. Not differentiable
    in reverse mode (as in JAX): the trip count is known only at run time."""
    init0, tree = _leaves(init_val)

    def run(lifted: list[Storage]) -> tuple[list[Array], Block, Block, pytree.TreeDef, list[Array]]:
        def traced(init: list[Array]) -> tuple[Block, pytree.TreeDef, list[Array]]:
            body = _Body(body_fun, [a.type for a in init], [a.weak for a in init], lifted)
            return body.trace(pytree.unflatten(tree, body.args))

        init, body_block, treedef, out = _traced_promoted(traced, init0, tree)
        _check_carry("while_loop's body_fun", [a.type for a in init], tree, treedef, out)
        cond = _Body(cond_fun, [a.type for a in init], [a.weak for a in init], lifted)
        cond_block, cond_tree, flag = cond.trace(pytree.unflatten(tree, cond.args))
        if cond.changed:
            raise tracing.user_error(
                TraceError, "while_loop's cond_fun writes into an array: only body_fun may change the carries"
            )
        if cond_tree != pytree.LEAF or flag[0].type != control.PRED:
            got = _describe([a.type for a in flag]) if cond_tree != pytree.NONE else "None"
            raise tracing.user_error(
                TraceError, f"while_loop's cond_fun must return a bool scalar ({control.PRED}), got {got}"
            )
        # the condition yields its predicate only: the lifted values it received stay unchanged
        cond_block = Block(cond_block.args, cond_block.ops, cond_block.results[:1])
        return init, cond_block, body_block, treedef, out

    (init, cond_block, body_block, treedef, out), lifted = _lifting(run)
    weak = [a.weak for a in init]
    inits = [*(a.value for a in init), *(s.value for s in lifted)]
    op = _emit(control.while_loop, inits, {}, (cond_block, body_block))
    _store_lifted(lifted, op.results[len(init) :])
    return pytree.unflatten(
        tree, [Array.fresh(r, w) for r, w in zip(op.results[: len(weak)], weak, strict=True)]
    )


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``; both are traced and must
    return the same structure and types. ``pred``: a bool or integer scalar (nonzero is true)."""
    p = ops.asarray(pred)
    if p.shape != ():
        raise tracing.user_error(TraceError, f"cond: pred must be a scalar, got an array of type {p.type}")
    if not p.ir_dtype.is_bool:
        p = ops.emit(elementwise.ne, [p, ops.constant(0, p.ir_dtype)])
    args, tree = _leaves(operands)
    types, weak = [a.type for a in args], [a.weak for a in args]

    def run(lifted: list[Storage]) -> tuple[list[Block], list[tuple[Any, list[Array]]]]:
        blocks, outs = [], []
        for fn in (true_fun, false_fun):
            branch = _Body(fn, types, weak, lifted)
            block, treedef, out = branch.trace(*pytree.unflatten(tree, branch.args))
            blocks.append(block)
            outs.append((treedef, out))
        return blocks, outs

    (blocks, outs), lifted = _lifting(run)
    (then_tree, then_out), (else_tree, else_out) = outs
    n = len(blocks[0].results) - len(lifted)  # the branches' own results, before the lifted ones
    if then_tree == else_tree:
        blocks = _promote_branches(blocks, then_out, else_out)
    then_types, else_types = [v.type for v in blocks[0].results[:n]], [v.type for v in blocks[1].results[:n]]
    if then_tree != else_tree or then_types != else_types:
        then_shown, else_shown = (  # (types as tensor<2xf64> inside tuples and dicts too)
            pytree.unflatten(then_tree, [_Shown(t) for t in then_types]),
            pytree.unflatten(else_tree, [_Shown(t) for t in else_types]),
        )
        raise tracing.user_error(
            TraceError,
            "cond: true_fun and false_fun must return the same structure and types: true_fun returns "
            f"{then_shown} and false_fun {else_shown}",
        )
    inits = [p.value, *(a.value for a in args), *(s.value for s in lifted)]
    op = _emit(control.if_, inits, {}, (blocks[0], blocks[1]))
    _store_lifted(lifted, op.results[n:])
    weak_out = [a.weak and b.weak for a, b in zip(then_out, else_out, strict=True)]
    return pytree.unflatten(
        then_tree, [Array.fresh(r, w) for r, w in zip(op.results[:n], weak_out, strict=True)]
    )


def scan(
    f: Callable[[Any, Any], Any], init: Any, xs: Any = None, length: int | None = None, reverse: bool = False
) -> tuple[Any, Any]:
    """``f(carry, x) -> (carry, y)`` over the rows of ``xs`` (axis 0 of each leaf; last to first if
    ``reverse``); returns the last carry and the ``y``s stacked along a new axis 0."""
    carries, tree = _leaves(init)
    x_leaves, x_tree = _leaves(xs)
    lengths = {a.shape[0] for a in x_leaves if a.ndim}
    if any(a.ndim == 0 for a in x_leaves) or len(lengths) > 1 or (length is not None and lengths - {length}):
        shapes = ", ".join(str(a.shape) for a in x_leaves)
        given = f" length={length}" if length is not None else ""
        raise tracing.user_error(
            TraceError,
            f"scan: every leaf of xs needs the same leading axis (the length{given}); got {shapes}",
        )
    if length is None and not lengths:
        raise tracing.user_error(TraceError, "scan: pass length= when xs is None (or has no leaves)")
    n = int(length) if length is not None else lengths.pop()
    row_types = [TensorType(a.shape[1:], a.ir_dtype) for a in x_leaves]

    def run(lifted: list[Storage]) -> tuple[list[Array], Block, pytree.TreeDef, list[Array]]:
        def traced(carries: list[Array]) -> tuple[Block, pytree.TreeDef, list[Array]]:
            types = [a.type for a in carries]
            weak = [a.weak for a in carries] + [False] * len(x_leaves)
            body = _Body(f, types + row_types, weak, lifted, at=len(carries))
            carry_args, row_args = body.args[: len(carries)], body.args[len(carries) :]
            versions = [a._storage.version for a in row_args]
            block, treedef, out = body.trace(
                pytree.unflatten(tree, carry_args), pytree.unflatten(x_tree, row_args)
            )
            if any(a._storage.version != v for a, v in zip(row_args, versions, strict=True)):
                raise tracing.user_error(
                    TraceError,
                    "scan's f writes into its row of xs: a scan passes each row by value (as JAX's), "
                    "where a Python loop's row is a view that writes the array scanned; write into a "
                    "copy (x = x.copy()) or return the new row as a y",
                )
            if treedef[0] != "tuple" or len(treedef[1]) != 2:
                raise tracing.user_error(TraceError, "scan: f must return a pair (carry, y)")
            # the lifted storages are carries: after the user's carries, before the ys
            own, final = list(block.results[: len(out)]), list(block.results[len(out) :])
            count = _count_leaves(treedef[1][0])
            results = own[:count] + final + own[count:]
            return Block(block.args, block.ops, tuple(results)), treedef, out

        def carried(treedef: pytree.TreeDef, out: list[Array]) -> tuple[pytree.TreeDef, list[Array]]:
            return treedef[1][0], out[: _count_leaves(treedef[1][0])]

        return _traced_promoted(traced, carries0, tree, carried)

    carries0 = carries
    (carries, block, treedef, out), lifted = _lifting(run)
    if any(x._storage is s for x in x_leaves for s in lifted):
        raise tracing.user_error(
            TraceError,
            "scan's f writes into an array it scans over (xs): a scan reads its rows as they were before "
            "it (as JAX's), where a Python loop would see the writes; scan a copy (xs.copy())",
        )
    carry_tree, y_tree = treedef[1]
    carry_count = _count_leaves(carry_tree)
    types = [a.type for a in carries]
    _check_carry("scan's f", types, tree, carry_tree, out[:carry_count])
    k = len(carries) + len(lifted)  # the op's carries: the user's, then the lifted storages
    attrs = {"carries": k, "length": n, "reverse": bool(reverse)}
    op = _emit(
        control.scan,
        [*(a.value for a in carries), *(s.value for s in lifted), *(a.value for a in x_leaves)],
        attrs,
        (block,),
    )
    _store_lifted(lifted, op.results[len(carries) : k])
    weak = [a.weak for a in carries] + [False] * (len(op.results) - k)
    results = [
        Array.fresh(r, w) for r, w in zip(op.results[: len(carries)] + op.results[k:], weak, strict=True)
    ]
    return pytree.unflatten(tree, results[: len(carries)]), pytree.unflatten(y_tree, results[len(carries) :])


def _count_leaves(treedef: pytree.TreeDef) -> int:
    kind = treedef[0]
    if kind == "*":
        return 1
    if kind == "None":
        return 0
    return sum(_count_leaves(sub) for sub in (treedef[2] if kind == "dict" else treedef[1]))
