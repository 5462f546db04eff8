"""Movement primitives: broadcast, reshape, transpose, slice, pad, concatenate, update_slice.

Their scalar lowering is an index map: the element at output index ``idx`` is an operand element at
an index computed from ``idx``. Piecewise ops (pad, concatenate, update_slice) clamp every read into
range so that a backend may evaluate both sides of the choice eagerly without reading out of bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import TensorType
from compiler.prims import elementwise as ew
from compiler.prims import mlir as ml
from compiler.prims import reduction as red
from compiler.prims.base import AttrType, Build, EmitContext, Kind, Memory, Primitive, fail
from compiler.prims.batch_helpers import all_batched, shifted, with_batch
from compiler.prims.vjp_helpers import Cotangents, Wanted, full_like, own_attrs, vjp_rule
from runtime import array_ops

INPUTS = frozenset({"inputs"})


def _ints(attrs: Mapping[str, Any], name: str) -> tuple[int, ...]:
    return tuple(int(v) for v in attrs[name])


def _clamp(expr: str, hi: int) -> str:
    return f"min(max({expr}, 0), {hi})"


# ---- broadcast -------------------------------------------------------------------------------


def _broadcast_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    (x,) = types
    shape = _ints(attrs, "shape")
    off = len(shape) - x.rank
    if off < 0 or any(d not in (1, shape[off + j]) for j, d in enumerate(x.shape)):
        raise fail(f"broadcast: cannot broadcast shape {x.shape} to {shape}")
    return [x.with_shape(shape)]


def _broadcast_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x = ctx.operand_types[0]
    shape = ctx.result_type.shape
    off = len(shape) - x.rank
    src = [idx[off + j] if d == shape[off + j] else 0 for j, d in enumerate(x.shape)]
    return ctx.read(0, src)


@vjp_rule
def _broadcast_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    """The one place where broadcasting is undone: sum over the added and the stretched axes."""
    x = op.operands[0].type
    shape = op.result.type.shape
    off = len(shape) - x.rank
    stretched = [off + j for j, d in enumerate(x.shape) if d != shape[off + j]]
    axes = tuple(range(off)) + tuple(stretched)
    if not axes:
        return (ct,)
    summed = build(red.reduce_sum, [ct], {"axes": axes})
    return (summed if summed.type.shape == x.shape else build(reshape, [summed], {"shape": x.shape}),)


def _broadcast_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    """Broadcasting aligns trailing axes: the batch axis first moves to the front of the new axes."""
    (x,) = operands
    shape = _ints(op.attrs, "shape")
    lead = (1,) * (len(shape) - x.type.rank + 1)
    x = build(reshape, [x], {"shape": (size,) + lead + x.type.shape[1:]})
    return build(broadcast, [x], {"shape": (size,) + shape})


# A view a user can make (``dnp.broadcast_to``) but never write through: it has no ``unview``, so
# ``dsl.array`` makes its views read-only (as NumPy's, whose stretched elements share memory).
broadcast = Primitive(
    name="broadcast",
    kind=Kind.MOVEMENT,
    nargs=1,
    attrs={"shape": AttrType.INTS},
    shape_rule=_broadcast_rule,
    reference=array_ops.broadcast,
    emit=_broadcast_emit,
    mlir=ml.broadcast,
    vjp=_broadcast_vjp,
    batch=_broadcast_batch,
)

# ---- reshape ---------------------------------------------------------------------------------


def _reshape_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    (x,) = types
    shape = _ints(attrs, "shape")
    out = x.with_shape(shape)
    if any(d < 0 for d in shape) or out.size != x.size:
        raise fail(f"reshape: cannot reshape an array of shape {x.shape} into shape {shape}")
    return [out]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of ``shape``, in elements."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(strides[::-1])


def reshaped_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The strides of ``new_shape`` viewing the same elements as (``shape``, ``strides``) in row-major
    order, or ``None`` where that needs a copy (NumPy's no-copy reshape rule: each run of old axes
    merged or split must be contiguous within itself)."""
    if math.prod(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(n, st) for n, st in zip(shape, strides, strict=True) if n != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        if new_shape[ni] == 1:
            ni += 1
            continue
        oj, nj = oi + 1, ni + 1
        n_old, n_new = old[oi][0], new_shape[ni]
        while n_old != n_new:
            if n_new < n_old:
                n_new *= new_shape[nj]
                nj += 1
            else:
                n_old *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj, nj
    return tuple(new_strides)


def _reshape_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    src_shape = ctx.operand_types[0].shape
    dst_shape = ctx.result_type.shape
    src_big = [i for i, d in enumerate(src_shape) if d != 1]
    dst_big = [i for i, d in enumerate(dst_shape) if d != 1]
    if [src_shape[i] for i in src_big] == [dst_shape[i] for i in dst_big]:
        # Only unit dimensions move: index each remaining dimension directly.
        src: list[str | int] = [0] * len(src_shape)
        for s, d in zip(src_big, dst_big, strict=True):
            src[s] = idx[d]
        return ctx.read(0, src)
    flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, contiguous_strides(dst_shape), strict=True)) or "0"
    src = [f"(({flat}) // {s}) % {d}" for s, d in zip(contiguous_strides(src_shape), src_shape, strict=True)]
    return ctx.read(0, src)


@vjp_rule
def _reshape_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (build(reshape, [ct], {"shape": op.operands[0].type.shape}),)


reshape = Primitive(
    name="reshape",
    kind=Kind.MOVEMENT,
    nargs=1,
    attrs={"shape": AttrType.INTS},
    shape_rule=_reshape_rule,
    reference=array_ops.reshape,
    memory=Memory(view_of=0),
    emit=_reshape_emit,
    mlir=ml.reshape,
    unview=lambda build, base, new, attrs: _reshape_unview(build, base, new),
    vjp=_reshape_vjp,
    batch=lambda build, op, operands, batched, size: _reshape_batch(build, op, operands, size),
)


def _reshape_batch(build: Build, op: Op, operands: Sequence[Value], size: int) -> Value:
    return build(reshape, operands, {"shape": shifted(op.attrs, "shape", size)})


def _reshape_unview(build: Build, base: Any, new: Any) -> Any:
    return build(reshape, [new], {"shape": base.type.shape})


# ---- transpose -------------------------------------------------------------------------------


def _transpose_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    (x,) = types
    perm = _ints(attrs, "perm")
    if sorted(perm) != list(range(x.rank)):
        raise fail(f"transpose: {perm} is not a permutation of the {x.rank} axes of shape {x.shape}")
    return [x.with_shape(tuple(x.shape[p] for p in perm))]


def _transpose_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    perm = _ints(ctx.attrs, "perm")
    src = [""] * len(perm)
    for i, p in enumerate(perm):
        src[p] = idx[i]
    return ctx.read(0, src)


@vjp_rule
def _transpose_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    return (_transpose_unview(build, ct, op.attrs),)  # the inverse permutation


transpose = Primitive(
    name="transpose",
    kind=Kind.MOVEMENT,
    nargs=1,
    attrs={"perm": AttrType.INTS},
    shape_rule=_transpose_rule,
    reference=array_ops.transpose,
    emit=_transpose_emit,
    mlir=ml.transpose,
    unview=lambda build, base, new, attrs: _transpose_unview(build, new, attrs),
    vjp=_transpose_vjp,
    batch=lambda build, op, operands, batched, size: _transpose_batch(build, op, operands),
)


def _transpose_batch(build: Build, op: Op, operands: Sequence[Value]) -> Value:
    return build(transpose, operands, {"perm": (0,) + tuple(p + 1 for p in _ints(op.attrs, "perm"))})


def _transpose_unview(build: Build, new: Any, attrs: Mapping[str, Any]) -> Any:
    return build(transpose, [new], {"perm": tuple(int(i) for i in np.argsort(attrs["perm"]))})


STRIDED_VIEWS = frozenset({reshape, transpose})  # ops whose result can be a strided view of the operand


def view_strides(op: Op, strides: tuple[int, ...], backward: bool = False) -> tuple[int, ...] | None:
    """For ``op`` in ``STRIDED_VIEWS``: the strides of its result when its operand is the strided view
    ``strides`` of some buffer (``backward``: of its operand when its result is), or ``None`` where
    that is no strided view (a reshape merging axes of different strides)."""
    before, after = op.operands[0].type.shape, op.result.type.shape
    if backward:
        before, after = after, before
    if op.prim is transpose:
        perm = _ints(op.attrs, "perm")
        order = [int(i) for i in np.argsort(perm)] if backward else perm
        return tuple(strides[p] for p in order)
    assert op.prim is reshape, f"{op.prim.name} is no strided view"
    return reshaped_strides(before, strides, after)


# ---- slice (Python range semantics per axis: start, limit, stride; stride may be negative) ----


def slice_shape(shape: Sequence[int], attrs: Mapping[str, Any], name: str) -> tuple[int, ...]:
    start, limit, stride = (_ints(attrs, k) for k in ("start", "limit", "stride"))
    if not len(start) == len(limit) == len(stride) == len(shape):
        raise fail(f"{name}: start/limit/stride need one entry per axis of shape {tuple(shape)}")
    out = []
    for d, s, lim, st in zip(shape, start, limit, stride, strict=True):
        if st == 0:
            raise fail(f"{name}: stride must not be zero")
        n = len(range(s, lim, st))
        if n and not (0 <= s < d and 0 <= s + (n - 1) * st < d):
            raise fail(f"{name}: range({s}, {lim}, {st}) is out of bounds for an axis of size {d}")
        out.append(n)
    return tuple(out)


def _slice_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    (x,) = types
    return [x.with_shape(slice_shape(x.shape, attrs, "slice"))]


def _slice_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    start, stride = _ints(ctx.attrs, "start"), _ints(ctx.attrs, "stride")
    src = [i if (s, st) == (0, 1) else f"({s} + {i} * {st})" for i, s, st in zip(idx, start, stride)]
    return ctx.read(0, src)


SLICE_ATTRS = {"start": AttrType.INTS, "limit": AttrType.INTS, "stride": AttrType.INTS}


@vjp_rule
def _slice_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # Scatter into zeros with the same start/limit/stride: right for any stride, negative included.
    zeros = full_like(build, 0, op.operands[0].type)
    return (build(update_slice, [zeros, ct], own_attrs(slice_, op)),)


slice_ = Primitive(
    name="slice",
    kind=Kind.MOVEMENT,
    nargs=1,
    attrs=SLICE_ATTRS,
    shape_rule=_slice_rule,
    reference=array_ops.slice_,
    emit=_slice_emit,
    mlir=ml.slice_,
    unview=lambda build, base, new, attrs: _slice_unview(build, base, new, attrs),
    vjp=_slice_vjp,
    batch=lambda build, op, operands, batched, size: _slice_batch(build, op, operands, size),
)

# ---- pad (constant padding; low/high >= 0) ---------------------------------------------------


def _pad_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    x, value = types
    low, high = _ints(attrs, "low"), _ints(attrs, "high")
    if value.rank != 0 or value.dtype != x.dtype:
        raise fail(f"pad: the padding value must be a scalar of dtype {x.dtype}, got {value}")
    if len(low) != x.rank or len(high) != x.rank or min(low + high, default=0) < 0:
        raise fail(f"pad: low={low} and high={high} need one non-negative entry per axis of {x.shape}")
    return [x.with_shape(tuple(d + lo + hi for d, lo, hi in zip(x.shape, low, high)))]


def _pad_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x = ctx.operand_types[0]
    value = ctx.read(1, ())
    if x.size == 0:
        return value
    low, high = _ints(ctx.attrs, "low"), _ints(ctx.attrs, "high")
    conds, src = [], []
    for i, d, lo, hi in zip(idx, x.shape, low, high):
        src.append(i if lo == 0 and hi == 0 else _clamp(f"{i} - {lo}", d - 1))
        if lo or hi:
            conds.append(f"{lo} <= {i} < {lo + d}")
    inner = ctx.read(0, src)
    return f"({inner} if ({' and '.join(conds)}) else {value})" if conds else inner


def _sum_all(build: Build, v: Value) -> Value:
    return build(red.reduce_sum, [v], {"axes": tuple(range(v.type.rank))})


@vjp_rule
def _pad_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    x = op.operands[0].type
    low, high = _ints(op.attrs, "low"), _ints(op.attrs, "high")
    if not any(low + high):  # padding nothing: the identity, and the value is never read
        return (ct, None)
    limit = tuple(lo + d for lo, d in zip(low, x.shape))
    inner = build(slice_, [ct], {"start": low, "limit": limit, "stride": (1,) * x.rank})
    # The value fills every position outside the operand: its cotangent is the sum there.
    ct_value = build(ew.sub, [_sum_all(build, ct), _sum_all(build, inner)], {}) if wanted[1] else None
    return (inner if wanted[0] else None, ct_value)


def _pad_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    """A per-example padding value pads with zero, then selects it into the padded border."""
    x = with_batch(build, operands[0], batched[0], size)
    attrs = {"low": shifted(op.attrs, "low", 0), "high": shifted(op.attrs, "high", 0)}
    if not batched[1]:
        return build(pad, [x, operands[1]], attrs)
    zero, one = (full_like(build, v, operands[1].type.with_shape(())) for v in (0, 1))
    body = build(pad, [x, zero], attrs)
    inside = build(pad, [full_like(build, 1, x.type), zero], attrs)
    shape = body.type.shape
    value = build(
        broadcast,
        [build(reshape, [operands[1]], {"shape": (size,) + (1,) * (len(shape) - 1)})],
        {"shape": shape},
    )
    return build(
        ew.select, [build(ew.eq, [inside, build(broadcast, [one], {"shape": shape})], {}), body, value], {}
    )


pad = Primitive(
    name="pad",
    kind=Kind.MOVEMENT,
    nargs=2,
    attrs={"low": AttrType.INTS, "high": AttrType.INTS},
    shape_rule=_pad_rule,
    reference=array_ops.pad,
    emit=_pad_emit,
    mlir=ml.pad,
    vjp=_pad_vjp,
    batch=_pad_batch,
)

# ---- concatenate -----------------------------------------------------------------------------


def _concat_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    first = types[0]
    axis = int(attrs["axis"])
    if not 0 <= axis < first.rank:
        raise fail(f"concatenate: axis {axis} is out of range for arrays of rank {first.rank}")
    total = 0
    for t in types:
        same = t.rank == first.rank and all(
            a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis
        )
        if not same or t.dtype != first.dtype:
            raise fail(f"concatenate: {t} does not fit {first} along axis {axis}")
        total += t.shape[axis]
    return [first.with_shape(first.shape[:axis] + (total,) + first.shape[axis + 1 :])]


def _concat_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    axis = int(ctx.attrs["axis"])
    parts: list[tuple[int, int, int]] = []  # (operand, offset, size) of the non-empty operands
    offset = 0
    for k, t in enumerate(ctx.operand_types):
        if t.shape[axis]:
            parts.append((k, offset, t.shape[axis]))
        offset += t.shape[axis]
    if not parts:  # every operand empty along the axis: no element is ever read (a loop of no trips)
        return ctx.const(0, ctx.result_type.dtype)
    i = idx[axis]
    reads = []
    for k, off, n in parts:
        src = list(idx)
        src[axis] = _clamp(f"{i} - {off}", n - 1) if len(parts) > 1 else f"{i} - {off}"
        reads.append(ctx.read(k, src))

    def pick(lo: int, hi: int) -> str:
        """The read of parts[lo:hi] at ``i``: a balanced tree of conditionals, so a stack of
        hundreds of arrays nests log2(n) deep (Python's parser allows 200 parentheses)."""
        if hi - lo == 1:
            return reads[lo]
        mid = (lo + hi) // 2
        return f"({pick(lo, mid)} if {i} < {parts[mid][1]} else {pick(mid, hi)})"

    return pick(0, len(parts))


@vjp_rule
def _concat_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    axis = int(op.attrs["axis"])
    shape = ct.type.shape
    out: list[Value | None] = []
    offset = 0
    for v, w in zip(op.operands, wanted):
        n = v.type.shape[axis]
        if w:
            start = tuple(offset if i == axis else 0 for i in range(len(shape)))
            limit = tuple(offset + n if i == axis else d for i, d in enumerate(shape))
            out.append(build(slice_, [ct], {"start": start, "limit": limit, "stride": (1,) * len(shape)}))
        else:
            out.append(None)
        offset += n
    return tuple(out)


concatenate = Primitive(
    name="concatenate",
    kind=Kind.MOVEMENT,
    nargs=None,
    attrs={"axis": AttrType.INT},
    shape_rule=_concat_rule,
    reference=array_ops.concatenate,
    emit=_concat_emit,
    mlir=ml.concatenate,
    vjp=_concat_vjp,
    batch=lambda build, op, operands, batched, size: _concat_batch(build, op, operands, batched, size),
)

# ---- update_slice: the base with the region ``base[start:limit:stride]`` replaced -------------


def _update_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    base, update = types
    region = slice_shape(base.shape, attrs, "update_slice")
    if update.shape != region or update.dtype != base.dtype:
        raise fail(
            f"update_slice: the update {update} does not match the region "
            f"{base.with_shape(region)} it replaces"
        )
    return [base]


def _update_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    update = ctx.operand_types[1]
    if update.size == 0:
        return ctx.read(0, idx)
    start, stride = _ints(ctx.attrs, "start"), _ints(ctx.attrs, "stride")
    conds, src = [], []
    for i, s, st, n in zip(idx, start, stride, update.shape):
        if st == 1:
            conds.append(f"{s} <= {i} < {s + n}")
            src.append(_clamp(f"{i} - {s}", n - 1))
        else:
            conds.append(f"({i} - {s}) % {st} == 0 and 0 <= ({i} - {s}) // {st} < {n}")
            src.append(_clamp(f"({i} - {s}) // {st}", n - 1))
    new, old = ctx.read(1, src), ctx.read(0, idx)
    return f"({new} if ({' and '.join(conds)}) else {old})" if conds else new


def _slice_unview(build: Build, base: Any, new: Any, attrs: Mapping[str, Any]) -> Any:
    return build(update_slice, [base, new], attrs)


@vjp_rule
def _update_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    attrs = own_attrs(update_slice, op)
    update = op.operands[1].type
    # The base shows through everywhere except the replaced region; the update is exactly that region.
    ct_base = build(update_slice, [ct, full_like(build, 0, update)], attrs) if wanted[0] else None
    return (ct_base, build(slice_, [ct], attrs) if wanted[1] else None)


update_slice = Primitive(
    name="update_slice",
    kind=Kind.MOVEMENT,
    nargs=2,
    attrs=SLICE_ATTRS,
    shape_rule=_update_rule,
    reference=array_ops.update_slice,
    emit=_update_emit,
    mlir=ml.update_slice,
    vjp=_update_vjp,
    batch=lambda build, op, operands, batched, size: _update_batch(build, op, operands, batched, size),
)


def _batched_slice(attrs: Mapping[str, Any], size: int) -> dict[str, Any]:
    """A slice's attributes with the whole leading batch axis in front."""
    return {
        "start": shifted(attrs, "start", 0),
        "limit": shifted(attrs, "limit", size),
        "stride": shifted(attrs, "stride", 1),
    }


def _slice_batch(build: Build, op: Op, operands: Sequence[Value], size: int) -> Value:
    return build(slice_, operands, _batched_slice(op.attrs, size))


def _concat_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    axis = int(op.attrs["axis"]) + 1
    return build(concatenate, all_batched(build, operands, batched, size), {"axis": axis})


def _update_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    return build(update_slice, all_batched(build, operands, batched, size), _batched_slice(op.attrs, size))
