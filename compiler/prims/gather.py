"""Gather and scatter along one axis: NumPy's ``np.take`` and its transposes (JAX's ``x.at[idx]``).

``gather(x, idx, axis=a)`` reads ``x`` at the integer positions ``idx`` along axis ``a``: the result
has shape ``x.shape[:a] + idx.shape + x.shape[a + 1:]``, element ``[p, j, q]`` being
``x[p, idx[j], q]``. ``scatter_add(x, idx, v, axis=a)`` is ``x`` with each update ``v[p, j, q]``
added at ``[p, idx[j], q]``, one after the other in ``idx``'s row-major order (repeated positions
accumulate, as ``x.at[idx].add(v)`` in JAX and ``np.add.at``); ``scatter(x, idx, v, axis=a)``
writes them instead (repeated positions keep the last update in that order, as NumPy's
``x[idx] = v`` does in practice). NumPy's multi-array indexing (``x[i, j]``) is a gather over the
indexed axes merged into one (``dsl/gather.py``).

Bounds (the same text on every backend; a compiled program cannot raise): a negative index counts
from the end once (NumPy), then a read clamps it into the axis (``clamped``,
``runtime.array_ops.clamped_indices``: JAX's gather and the XLA clamp) while a scatter drops an
update whose index is still outside the axis (``landing``, ``runtime.array_ops.landing_indices``:
JAX's ``x.at[idx].set/add/...``, ``mode="drop"``, which padded index arrays rely on: an update
meant for nowhere must not land on the last element). A gather's cotangent goes back to the
clamped positions it read (its true derivative; JAX drops it); a dropped update's cotangent is zero
(JAX's). docs/semantics.md says so.

Fusion: a gather is an index map (``Kind.MOVEMENT``) like ``dynamic_slice``, inlined into its
readers; its position is computed at run time from the index array. A scatter is ``Kind.SCATTER``:
it roots a kernel of its own (``compiler/kernel/*/scatter.py``) that reads materialized operands,
and it may be computed over its dying base in place. How an update combines with the element it
lands on is the scatter's ``reducer.combine`` (``+`` for ``scatter_add``; the update itself for
``scatter``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise as ew
from compiler.prims import mlir as ml
from compiler.prims import movement as mv
from compiler.prims import reduction as _red
from compiler.prims import source
from compiler.prims.base import AttrType, Build, EmitContext, Kind, Memory, Primitive, Reducer, fail
from compiler.prims.batch_helpers import with_batch
from compiler.prims.mlir import Body, Builder
from compiler.prims.vjp_helpers import Cotangents, Wanted, full_like, vjp_rule
from runtime import array_ops

INPUTS = frozenset({"inputs"})


def _axis(attrs: Mapping[str, Any]) -> int:
    return int(attrs["axis"])


def gathered_shape(x: TensorType, idx: TensorType, axis: int) -> tuple[int, ...]:
    return x.shape[:axis] + idx.shape + x.shape[axis + 1 :]


def _check(name: str, x: TensorType, idx: TensorType, axis: int) -> None:
    if not 0 <= axis < x.rank:
        raise fail(f"{name}: axis {axis} is out of range for {x}")
    if not idx.dtype.is_int:
        raise fail(f"{name}: the indices must be integers, got {idx}")
    if x.shape[axis] == 0 and idx.size > 0:
        raise fail(f"{name}: cannot index axis {axis} of {x}: it is empty")


def clamped(i: str, n: int) -> str:
    """Index ``i`` (a name safe to repeat) on an axis of ``n``: wrapped once if negative, clamped."""
    return f"min(max(({i} + {n} if {i} < 0 else {i}), 0), {n - 1})"


def landing(i: str, n: int) -> str:
    """Where the scatter update at index ``i`` (a name safe to repeat) lands on an axis of ``n``:
    ``i`` wrapped once if negative, ``n`` (nowhere: the update is dropped) if still outside."""
    return f"({i} + {n} if {i} < 0 else {i}) if {-n} <= {i} < {n} else {n}"


def split_index(idx: Sequence[str], axis: int, k: int) -> tuple[list[str], list[str], list[str]]:
    """An index of the gathered shape as (leading axes, the index array's ``k`` axes, trailing)."""
    return list(idx[:axis]), list(idx[axis : axis + k]), list(idx[axis + k :])


# ---- gather ----------------------------------------------------------------------------------


def _gather_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    x, idx = types
    _check("gather", x, idx, _axis(attrs))
    return [x.with_shape(gathered_shape(x, idx, _axis(attrs)))]


def _gather_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x, it = ctx.operand_types
    axis = _axis(ctx.attrs)
    lead, at, trail = split_index(idx, axis, it.rank)
    i = ctx.read(1, at)
    return ctx.read(0, [*lead, clamped(i, x.shape[axis]), *trail])


@vjp_rule
def _gather_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # every read element gets its cotangents back, summed where an index repeats
    # (at the positions read: the clamped ones, where the scatter would drop an update)
    x, idx = op.operands
    zeros = full_like(build, 0, x.type)
    attrs = {"axis": _axis(op.attrs), **({UNIQUE: True} if op.attrs.get(UNIQUE) else {})}
    read = clamped_value(build, idx, x.type.shape[attrs["axis"]])
    return (build(scatter_add, [zeros, ct, read], attrs), None)


def _mlir_wrapped(b: Body, i: str, t: DType, n: int) -> str:
    """``i`` wrapped once if negative, in ``arith`` ops."""
    negative = b.emit(f"arith.cmpi slt, {i}, {b.const(0, t)} : {t}")
    from_end = b.emit(f"arith.addi {i}, {b.const(n, t)} : {t}")
    return b.emit(f"arith.select {negative}, {from_end}, {i} : {t}")


def _mlir_index(b: Body, i: str, t: DType, n: int) -> str:
    """``clamped`` in ``arith`` ops, as an ``index``."""
    low = b.emit(f"arith.maxsi {_mlir_wrapped(b, i, t, n)}, {b.const(0, t)} : {t}")
    high = b.emit(f"arith.minsi {low}, {b.const(max(n - 1, 0), t)} : {t}")
    return b.emit(f"arith.index_cast {high} : {t} to index")


def _mlir_lands(b: Body, i: str, t: DType, n: int) -> str:
    """Whether a scatter update at index ``i`` lands (``landing`` is not ``n``), as an ``i1``."""
    wrapped = _mlir_wrapped(b, i, t, n)
    low = b.emit(f"arith.cmpi sge, {wrapped}, {b.const(0, t)} : {t}")
    high = b.emit(f"arith.cmpi slt, {wrapped}, {b.const(n, t)} : {t}")
    return b.emit(f"arith.andi {low}, {high} : i1")


def _gather_mlir(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    """A ``linalg.generic`` over the result reading the index array at its axes, then
    ``tensor.extract`` of ``x`` at the clamped position."""
    x, it = (v.type for v in op.operands)
    out, axis = op.result.type, _axis(op.attrs)
    idx_map = ml.affine_map(out.rank, [f"d{axis + j}" for j in range(it.rank)])

    def body(bb: Body, args: list[str], acc: str) -> str:
        dims = [bb.emit(f"linalg.index {d} : index") for d in range(out.rank)]
        lead, _, trail = split_index(dims, axis, it.rank)
        at = _mlir_index(bb, args[0], it.dtype, x.shape[axis])
        where = ", ".join([*lead, at, *trail])
        return bb.emit(f"tensor.extract {xs[0]}[{where}] : {x}")

    return ml.generic(b, out, [(xs[1], it, idx_map)], body, loc=loc)


def _gather_unview(build: Build, base: Value, new: Value, attrs: Mapping[str, Any], idx: Value) -> Value:
    """A write through ``x[idx]``: the base with the written elements put back (NumPy: the last)."""
    return build(scatter, [base, new, idx], {"axis": _axis(attrs)})


# ---- batching (vmap) ---------------------------------------------------------------------------


def _wrapped_value(build: Build, idx: Value, n: int) -> Value:
    """``idx`` in int64, wrapped once where negative (NumPy)."""
    i = idx if idx.type.dtype is DType.i64 else build(ew.cast, [idx], {"dtype": DType.i64})
    zero, end = (full_like(build, c, i.type) for c in (0, n))
    return build(ew.select, [build(ew.lt, [i, zero], {}), build(ew.add, [i, end], {}), i], {})


def clamped_value(build: Build, idx: Value, n: int) -> Value:
    """``clamped`` as primitives, in int64 (an index read the way the kernels read it; the frontend
    computes merged read positions with it: ``dsl/gather.py``)."""
    wrapped = _wrapped_value(build, idx, n)
    zero = full_like(build, 0, wrapped.type)
    last = full_like(build, max(n - 1, 0), wrapped.type)
    return build(ew.min_, [build(ew.max_, [wrapped, zero], {}), last], {})


def lands_value(build: Build, idx: Value, n: int) -> Value:
    """Whether each scatter update at ``idx`` lands on the axis of ``n`` (``landing``: not dropped; the
    frontend drops an update outside any of several merged axes with it: ``dsl/gather.py``)."""
    wrapped = _wrapped_value(build, idx, n)
    inside = build(ew.ge, [wrapped, full_like(build, 0, wrapped.type)], {})
    return build(ew.and_, [inside, build(ew.lt, [wrapped, full_like(build, n, wrapped.type)], {})], {})


def _front(build: Build, v: Value, axis: int) -> Value:
    """``v`` with its axis ``axis`` moved to the front."""
    if axis == 0:
        return v
    perm = (axis, *(d for d in range(v.type.rank) if d != axis))
    return build(mv.transpose, [v], {"perm": perm})


def _per_example(
    build: Build, x: Value, idx: Value, axis: int, size: int, drop: bool = False
) -> tuple[Value, Value]:
    """A batched ``x`` (batch first) with the batch axis merged into its axis ``axis`` (moved next
    to it: ``(pre, B * n, post)``), and a batched index array's positions in that merged axis
    (example ``b``'s clamped index plus ``b * n``; with ``drop``, a scatter's, ``B * n`` where the
    update is dropped, so that it stays dropped and lands in no other example)."""
    xt, n = x.type, x.type.shape[1 + axis]
    perm = (*range(1, 1 + axis), 0, *range(1 + axis, xt.rank))
    moved = build(mv.transpose, [x], {"perm": perm}) if axis else x
    merged = xt.shape[1 : 1 + axis] + (size * n,) + xt.shape[2 + axis :]
    x = build(mv.reshape, [moved], {"shape": merged})
    it = idx.type.with_shape(idx.type.shape)
    offsets = build(source.iota, [], {"shape": it.shape, "dimension": 0, "dtype": DType.i64})
    step = full_like(build, n, TensorType(it.shape, DType.i64))
    base = _wrapped_value(build, idx, n) if drop else clamped_value(build, idx, n)
    position = build(ew.add, [base, build(ew.mul, [offsets, step], {})], {})
    if drop:
        nowhere = full_like(build, size * n, position.type)
        position = build(ew.select, [lands_value(build, idx, n), position, nowhere], {})
    return x, position


def _gather_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    x, idx = operands
    axis = _axis(op.attrs)
    if not batched[1]:  # a batch of arrays read at the same positions
        return build(gather, [x, idx], {"axis": axis + 1})
    if not batched[0]:  # one array read at a batch of positions: the batch lands at ``axis``
        return _front(build, build(gather, [x, idx], {"axis": axis}), axis)
    x, position = _per_example(build, x, idx, axis, size)
    return _front(build, build(gather, [x, position], {"axis": axis}), axis)


def _scatter_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    x, v, idx = operands
    axis = _axis(op.attrs)
    x = with_batch(build, x, batched[0], size)
    v = with_batch(build, v, batched[1], size)
    if not batched[2]:  # the same positions in every example
        return build(op.prim, [x, v, idx], {"axis": axis + 1})
    shape = x.type.shape
    x, position = _per_example(build, x, idx, axis, size, drop=True)
    if axis:  # the updates' batch axis beside their index axes, as the merged axis has it
        v = build(mv.transpose, [v], {"perm": (*range(1, 1 + axis), 0, *range(1 + axis, v.type.rank))})
    out = build(op.prim, [x, v, position], {"axis": axis})
    out = build(mv.reshape, [out], {"shape": shape[1 : 1 + axis] + (size,) + shape[1 + axis :]})
    return _front(build, out, axis)


# ``unique`` (optional, on gather and the scatters): no two index entries name the same element,
# known from how the positions were made (``take_along_axis`` with one index per line); a scatter
# with it may combine its updates in parallel (kernel/cuda/scatter.py: the direct form)
UNIQUE = "unique"

gather = Primitive(
    name="gather",
    kind=Kind.MOVEMENT,
    nargs=2,
    attrs={"axis": AttrType.INT, UNIQUE: AttrType.BOOL},
    optional_attrs=frozenset({UNIQUE}),
    shape_rule=_gather_rule,
    reference=array_ops.gather,
    memory=Memory(vjp_needs=INPUTS),
    emit=_gather_emit,
    mlir=_gather_mlir,
    unview=_gather_unview,
    vjp=_gather_vjp,
    batch=_gather_batch,
)

# ---- scatters ----------------------------------------------------------------------------------


def _scatter_rule(name: str) -> Any:
    def rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
        x, v, idx = types
        axis = _axis(attrs)
        _check(name, x, idx, axis)
        want = gathered_shape(x, idx, axis)
        if v.shape != want or v.dtype != x.dtype:
            raise fail(f"{name}: the updates must be {x.with_shape(want)} (x {x}, indices {idx}), got {v}")
        return [x]

    return rule


def _scatter_mlir(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    """A loop nest (``scf.for``) over the updates in row-major order carrying the result tensor:
    each step extracts the index, the update and the element it lands on, combines them and
    inserts the result (the kernels' order); a dropped update (``landing``) puts back the clamped
    element it read."""
    x, v, it = (val.type for val in op.operands)
    axis = _axis(op.attrs)
    reducer = op.prim.reducer
    assert reducer is not None
    if v.size == 0:
        return xs[0]
    ivs, acc, results = ml.open_nest(b, v.shape, xs[0], x)
    body = Body(b.fresh)
    lead, at, trail = split_index(ivs, axis, it.rank)
    i = body.emit(f"tensor.extract {xs[2]}[{', '.join(at)}] : {it}")
    where = ", ".join([*lead, _mlir_index(body, i, it.dtype, x.shape[axis]), *trail])
    lands = _mlir_lands(body, i, it.dtype, x.shape[axis])
    new = body.emit(f"tensor.extract {xs[1]}[{', '.join(ivs)}] : {v}")
    old = body.emit(f"tensor.extract {acc}[{where}] : {x}")
    combined = reducer.mlir_combine(body, [new, old], [x.dtype, x.dtype], x.dtype, op.attrs)
    value = body.emit(f"arith.select {lands}, {combined}, {old} : {x.dtype}")
    inserted = body.emit(f"tensor.insert {value} into {acc}[{where}] : {x}")
    b.lines += body.lines
    return ml.close_nest(b, results, inserted, x, loc)


@vjp_rule
def _scatter_add_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # x shows through with every update added on: both get the cotangent, the updates at their
    # positions (a dropped update: zero)
    if not wanted[1]:
        return (ct, None, None)
    return (ct, _landed(build, op, build(gather, [ct, op.operands[2]], {"axis": _axis(op.attrs)})), None)


def _landed(build: Build, op: Op, values: Value) -> Value:
    """An update cotangent ``values`` (the updates' shape) of the scatter ``op``, zero where the
    update was dropped (``landing``)."""
    x, _, idx = op.operands
    axis = _axis(op.attrs)
    return _masked(build, lands_value(build, idx, x.type.shape[axis]), values, axis)


@vjp_rule
def _scatter_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """The written elements of ``x`` are overwritten (zero cotangent there); of updates landing on
    the same element only the last written shows (it gets the cotangent, the others zero): the
    winner of each element is found by scattering the updates' own positions (an iota) the same
    way and reading them back (a dropped update wins nowhere: zero)."""
    x, v, idx = op.operands
    attrs = {"axis": _axis(op.attrs)}
    ct_x = build(scatter, [ct, full_like(build, 0, v.type), idx], attrs) if wanted[0] else None
    ct_v = None
    if wanted[1]:
        ids = build(source.iota, [], {"shape": (idx.type.size,), "dimension": 0, "dtype": DType.i64})
        if idx.type.shape != (idx.type.size,):
            ids = build(mv.reshape, [ids], {"shape": idx.type.shape})
        nobody = full_like(build, -1, TensorType((x.type.shape[attrs["axis"]],), DType.i64))
        won = build(scatter, [nobody, ids, idx], {"axis": 0})
        mine = build(ew.eq, [build(gather, [won, idx], {"axis": 0}), ids], {})
        ct_v = _masked(build, mine, build(gather, [ct, idx], attrs), attrs["axis"])
    return (ct_x, ct_v, None)


def _masked(build: Build, mine: Value, values: Value, axis: int) -> Value:
    """``values`` (the gathered shape) where ``mine`` (the index array's shape, at ``axis``) holds,
    else zero."""
    shape = values.type.shape
    k = mine.type.rank
    lifted = (1,) * axis + mine.type.shape + (1,) * (len(shape) - axis - k)
    mask = build(mv.reshape, [mine], {"shape": lifted})
    mask = build(mv.broadcast, [mask], {"shape": shape})
    return build(ew.select, [mask, values, full_like(build, 0, values.type)], {})


def _set_combine(acc: str, x: str) -> str:
    return x


def _set_mlir(b: Body, xs: Sequence[str], ts: Sequence[DType], out: DType, attrs: Any) -> str:
    return xs[0]  # (the update, then the element it replaces)


scatter_add = Primitive(
    name="scatter_add",
    kind=Kind.SCATTER,
    nargs=3,
    attrs={"axis": AttrType.INT, UNIQUE: AttrType.BOOL},
    optional_attrs=frozenset({UNIQUE}),
    shape_rule=_scatter_rule("scatter_add"),
    reference=array_ops.scatter_add,
    memory=Memory(vjp_needs=INPUTS),
    reducer=Reducer(lambda acc, x: f"({acc} + {x})", lambda d: 0, mlir_combine=ml.ADD),
    mlir=_scatter_mlir,
    vjp=_scatter_add_vjp,
    batch=_scatter_batch,
)

scatter = Primitive(
    name="scatter",
    kind=Kind.SCATTER,
    nargs=3,
    attrs={"axis": AttrType.INT, UNIQUE: AttrType.BOOL},
    optional_attrs=frozenset({UNIQUE}),
    shape_rule=_scatter_rule("scatter"),
    reference=array_ops.scatter,
    memory=Memory(vjp_needs=INPUTS),
    reducer=Reducer(_set_combine, lambda d: 0, mlir_combine=_set_mlir),
    mlir=_scatter_mlir,
    vjp=_scatter_vjp,
    batch=_scatter_batch,
)


@vjp_rule
def _scatter_mul_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """``x`` times the product of its updates: ``x``'s cotangent is ``ct`` times that product (the
    same scatter of the updates into ``ct``). An update's is ``ct`` times its element with the
    update's own factor left out: ``ct * x`` where no other update lands there; where others do,
    ``ct * out / v`` (PyTorch's rule for ``index_reduce``'s and ``scatter_reduce``'s ``prod``), and
    for the one zero among an element's updates, ``ct`` times the element multiplied with that zero
    taken as 1 (``out / v`` would be 0 / 0). JAX refuses repeated indices here
    (docs/semantics.md)."""
    x, v, idx = op.operands
    attrs = {"axis": _axis(op.attrs)}
    ct_x = build(scatter_mul, [ct, v, idx], attrs) if wanted[0] else None
    if not wanted[1]:
        return (ct_x, None, None)

    def at(a: Value) -> Value:  # an element of x's shape read at each update's position
        return build(gather, [a, idx], attrs)

    def summed_at(values: Value) -> Value:  # the sum of ``values`` over the updates at each one's element
        return at(build(scatter_add, [full_like(build, 0, x.type), values, idx], attrs))

    ones = full_like(build, 1, v.type)
    is_zero = build(ew.eq, [v, full_like(build, 0, v.type)], {})
    alone = build(ew.eq, [summed_at(ones), ones], {})
    zeros = summed_at(build(ew.cast, [is_zero], {"dtype": v.type.dtype}))
    only_zero = build(ew.and_, [is_zero, build(ew.eq, [zeros, ones], {})], {})
    without_it = build(scatter_mul, [x, build(ew.select, [only_zero, ones, v], {}), idx], attrs)
    nonzero = build(ew.select, [is_zero, ones, v], {})
    divided = build(ew.div, [at(build(ew.mul, [ct, op.result], {})), nonzero], {})
    shared = build(ew.select, [only_zero, at(build(ew.mul, [ct, without_it], {})), divided], {})
    ct_v = build(ew.select, [alone, at(build(ew.mul, [ct, x], {})), shared], {})
    return (ct_x, _landed(build, op, ct_v), None)


@vjp_rule
def _scatter_chooser_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """max/min: as ``reduce_max``'s rule, the cotangent of an element is shared equally by every
    value that attains it, the base's element and the updates landing on it alike."""
    x, v, idx = op.operands
    attrs = {"axis": _axis(op.attrs)}
    dtype = x.type.dtype
    out_at_v = build(gather, [op.result, idx], attrs)
    x_wins = build(ew.cast, [build(ew.eq, [x, op.result], {})], {"dtype": dtype})
    v_wins = build(ew.cast, [build(ew.eq, [v, out_at_v], {})], {"dtype": dtype})
    count = build(scatter_add, [x_wins, v_wins, idx], attrs)
    share = build(ew.div, [ct, count], {})
    ct_x = build(ew.mul, [x_wins, share], {}) if wanted[0] else None
    ct_v = build(ew.mul, [v_wins, build(gather, [share, idx], attrs)], {}) if wanted[1] else None
    return (ct_x, None if ct_v is None else _landed(build, op, ct_v), None)


def _reducer_of(prim: Primitive) -> Reducer:
    assert prim.reducer is not None
    return prim.reducer


def _combining(name: str, reference: Any, reducer: Reducer, vjp: Any, needs: frozenset[str]) -> Primitive:
    return Primitive(
        name=name,
        kind=Kind.SCATTER,
        nargs=3,
        attrs={"axis": AttrType.INT, UNIQUE: AttrType.BOOL},
        optional_attrs=frozenset({UNIQUE}),
        shape_rule=_scatter_rule(name),
        reference=reference,
        memory=Memory(vjp_needs=needs),
        reducer=reducer,
        mlir=_scatter_mlir,
        vjp=vjp,
        batch=_scatter_batch,
    )


# ``x.at[idx].mul/max/min(v)``: the updates combined with ``*``, or as ``reduce_max`` / ``reduce_min``
# combine (NaN wins; -0.0 orders below +0.0)
scatter_mul = _combining(
    "scatter_mul",
    array_ops.scatter_mul,
    Reducer(lambda acc, x: f"({acc} * {x})", lambda d: 1, mlir_combine=ml.MUL),
    _scatter_mul_vjp,
    INPUTS | {"output"},
)
scatter_max = _combining(
    "scatter_max",
    array_ops.scatter_max,
    _reducer_of(_red.reduce_max),
    _scatter_chooser_vjp,
    INPUTS | {"output"},
)
scatter_min = _combining(
    "scatter_min",
    array_ops.scatter_min,
    _reducer_of(_red.reduce_min),
    _scatter_chooser_vjp,
    INPUTS | {"output"},
)

SCATTERS = frozenset({scatter_add, scatter, scatter_mul, scatter_max, scatter_min})
