"""Dynamic slices: a window of static size at a start known only when the program runs (the loop
counter, a computed index): JAX's ``lax.dynamic_slice`` and ``lax.dynamic_update_slice``.

``dynamic_slice(x, *starts, sizes)`` reads the window of shape ``sizes`` whose corner is at
``starts`` (one 0-d integer operand per axis of ``x``); ``dynamic_update_slice(x, update, *starts)``
is ``x`` with that window (of ``update``'s shape) replaced. As in JAX (``lax.dynamic_slice``'s
``allow_negative_indices``, then XLA's clamp), a negative start counts from the end once (``-1`` is
the last position), then each start is clamped into ``[0, dim - size]`` so that the window always
lies inside the array: a start past either end reads or writes the window at that end. The scalar
lowering loads each start from its 0-d operand and wraps and clamps it in the loop body (the same
text on the CPU and in CUDA kernels); an axis the window spans whole starts at 0 and reads no start.

A start may also vary along leading axes that the window spans whole: a start of shape
``x.shape[:r]`` gives element ``(i0, ..., ir-1, ...)`` the window at its own ``start[i0, ..., ir-1]``
(a window per row). ``vmap`` makes these of starts that differ per example (JAX lowers that case to
a gather or scatter; here it is the same primitive, read at the row in the same loop body): the
windows of different rows never overlap, so an update stays a select per element.

Fusion sees both as index maps (``Kind.MOVEMENT``): a read through a dynamic slice is at an index
computed at run time, never at the group's own index. ``dynamic_update_slice`` reads its base at
the element it writes (every element outside the window shows through), so, like ``update_slice``,
it may be computed over its dying base in place (``PARTIAL_UPDATES``, read by fusion's access
records); the window itself is read at a data-dependent index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import mlir as ml
from compiler.prims import movement as mv
from compiler.prims.base import AttrType, Build, EmitContext, Kind, Memory, Primitive, fail
from compiler.prims.batch_helpers import with_batch
from compiler.prims.mlir import Builder
from compiler.prims.vjp_helpers import Cotangents, Wanted, full_like, scalar, vjp_rule
from runtime import array_ops

INPUTS = frozenset({"inputs"})


def _sizes(attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in attrs["sizes"])


def _check_starts(name: str, x: TensorType, starts: Sequence[TensorType], window: Sequence[int]) -> None:
    """One integer start per axis: 0-d, or varying along the leading axes (shape ``x.shape[:r]``,
    for an axis past them) that the window spans whole (the module docstring)."""
    if len(starts) != x.rank:
        raise fail(f"{name}: needs one start per axis of {x} ({x.rank}), got {len(starts)}")
    for k, s in enumerate(starts):
        if not s.dtype.is_int:
            raise fail(f"{name}: start {k} must be an integer array, got {s}")
        per_row = s.shape == x.shape[: s.rank] and s.rank <= k
        if s.rank and not (per_row and tuple(window[: s.rank]) == x.shape[: s.rank]):
            raise fail(
                f"{name}: start {k} must be 0-d, or of shape {x.shape[: s.rank]} (one per row of the "
                f"leading axes, which the window must span whole), got {s}"
            )


def _check_window(name: str, x: TensorType, window: Sequence[int]) -> None:
    if len(window) != x.rank or any(not 0 <= n <= d for n, d in zip(window, x.shape, strict=True)):
        raise fail(f"{name}: a window of shape {tuple(window)} does not fit in {x}")


def _clamp(expr: str, hi: int) -> str:
    return f"min(max({expr}, 0), {hi})"


def _clamped(ctx: EmitContext, k: int, dim: int, size: int, idx: Sequence[str]) -> str:
    """The start read from operand ``k`` (at element ``idx``'s row, for a start per row), wrapped
    once if negative, then clamped so that ``size`` elements from it fit in ``dim``
    (``runtime.array_ops.window``)."""
    return clamped_start(ctx.read(k, tuple(idx[: ctx.operand_types[k].rank])), dim, size)


def clamped_start(s: str, dim: int, size: int) -> str:
    """The start ``s`` (an expression) wrapped once if negative, then clamped so that ``size``
    elements from it fit in ``dim`` (also the in-place window kernels' corner:
    ``compiler/kernel/window.py``)."""
    return _clamp(f"({s} + {dim} if {s} < 0 else {s})", dim - size)


# ---- dynamic_slice ---------------------------------------------------------------------------


def _slice_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    x, *starts = types
    _check_window("dynamic_slice", x, _sizes(attrs))
    _check_starts("dynamic_slice", x, starts, _sizes(attrs))
    return [x.with_shape(_sizes(attrs))]


def _slice_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x = ctx.operand_types[0]
    src = []
    for axis, (i, d, n) in enumerate(zip(idx, x.shape, _sizes(ctx.attrs))):
        src.append(i if n == d else f"{_clamped(ctx, 1 + axis, d, n, idx)} + {i}")
    return ctx.read(0, src)


@vjp_rule
def _slice_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # The window of zeros gets the cotangent back, at the same (equally clamped) starts.
    zeros = full_like(build, 0, op.operands[0].type)
    starts = list(op.operands[1:])
    return (build(dynamic_update_slice, [zeros, ct, *starts], {}), *(None for _ in starts))


def _offsets(b: Builder, op: Op, window: Sequence[int], starts: Sequence[str]) -> list[str]:
    """The wrapped and clamped starts (the last operands of ``op``, named ``starts``) as ``index``
    values; a literal 0 where the window spans the axis."""
    x = op.operands[0].type
    start_types = [v.type for v in op.operands[len(op.operands) - x.rank :]]
    out = []
    for d, n, start, t in zip(x.shape, window, starts, start_types, strict=True):
        s = "0" if n == d else ml.emit(b, f"tensor.extract {start}[] : {t}")
        out.append("0" if n == d else _mlir_clamped(b, s, t.dtype, d, n))
    return out


def _mlir_clamped(b: Builder | ml.Body, s: str, i: DType, d: int, n: int) -> str:
    """The start ``s`` (a scalar of dtype ``i``) wrapped and clamped as ``clamped_start``, as an
    ``index``."""
    zero = ml.const(b, 0, i)
    negative = ml.emit(b, f"arith.cmpi slt, {s}, {zero} : {i}")
    from_end = ml.emit(b, f"arith.addi {s}, {ml.const(b, d, i)} : {i}")
    wrapped = ml.emit(b, f"arith.select {negative}, {from_end}, {s} : {i}")
    low = ml.emit(b, f"arith.maxsi {wrapped}, {zero} : {i}")
    high = ml.emit(b, f"arith.minsi {low}, {ml.const(b, d - n, i)} : {i}")
    return ml.emit(b, f"arith.index_cast {high} : {i} to index")


def _per_row(op: Op) -> bool:
    return any(v.type.rank for v in op.operands[len(op.operands) - op.operands[0].type.rank :])


def _mlir_rows(
    b: Builder,
    op: Op,
    xs: list[str],
    over: TensorType,
    window: Sequence[int],
    inputs: list[tuple[str, TensorType]],
) -> tuple[list[tuple[str, TensorType, str]], Any]:
    """For a window per row (``_per_row``): the ``linalg.generic`` inputs over ``over`` (``inputs``
    at the identity, then the starts that vary per row, each at its rows) and a function giving,
    in the generic's body, each axis's loop index and the window's clamped corner on that axis
    (``None`` where the window spans the axis)."""
    x = op.operands[0].type
    first = len(op.operands) - x.rank
    ident = ml.affine_map(over.rank, [f"d{k}" for k in range(over.rank)])
    rows = [(k, v.type) for k, v in enumerate(op.operands[first:]) if v.type.rank]
    maps = [(xs[first + k], t, ml.affine_map(over.rank, [f"d{j}" for j in range(t.rank)])) for k, t in rows]

    def corners(bb: ml.Body, args: list[str]) -> list[tuple[str, str | None]]:
        row_args = dict(zip((k for k, _ in rows), args[len(inputs) :], strict=True))
        out: list[tuple[str, str | None]] = []
        for axis, (d, n) in enumerate(zip(x.shape, window, strict=True)):
            i = bb.emit(f"linalg.index {axis} : index")
            start = op.operands[first + axis].type
            if n == d:
                out.append((i, None))
                continue
            s = row_args.get(axis) or bb.emit(f"tensor.extract {xs[first + axis]}[] : {start}")
            out.append((i, _mlir_clamped(bb, s, start.dtype, d, n)))
        return out

    return [*((name, t, ident) for name, t in inputs), *maps], corners


def _window(offsets: Sequence[str], window: Sequence[int]) -> str:
    return f"[{', '.join(offsets)}] [{', '.join(map(str, window))}] [{', '.join('1' for _ in window)}]"


def _slice_mlir(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    x, out = op.operands[0].type, op.result.type
    if _per_row(op):  # each row's window: a generic reading x at the row's corner
        inputs, corners = _mlir_rows(b, op, xs, out, out.shape, [])

        def body(bb: ml.Body, args: list[str], acc: str) -> str:
            at = [i if c is None else bb.emit(f"arith.addi {c}, {i} : index") for i, c in corners(bb, args)]
            return bb.emit(f"tensor.extract {xs[0]}[{', '.join(at)}] : {x}")

        return ml.generic(b, out, inputs, body, loc=loc)
    offsets = _offsets(b, op, out.shape, xs[1:])
    return ml.emit(b, f"tensor.extract_slice {xs[0]}{_window(offsets, out.shape)} : {x} to {out} {loc}")


def _slice_unview(build: Build, base: Value, new: Value, starts: Sequence[Value]) -> Value:
    """A write through the view ``base[window]``: the base with that window replaced."""
    return build(dynamic_update_slice, [base, new, *starts], {})


def _batched_starts(build: Build, starts: Sequence[Value], batched: Wanted, size: int) -> list[Value]:
    """The starts of an op batched along a new leading axis, which the window spans whole (its start
    0): a start per example, or one that already varies per row (a batched op batched again), is a
    start per row of the new axis too; a shared 0-d start stays as it is."""
    rows = [
        with_batch(build, s, b, size) if b or s.type.rank else s for s, b in zip(starts, batched, strict=True)
    ]
    return [scalar(build, 0, DType.i64), *rows]


def _slice_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    """The window over the whole batch axis, each example's at its own starts where they differ."""
    x, *starts = operands
    x = with_batch(build, x, batched[0], size)
    sizes = (size, *_sizes(op.attrs))
    return build(dynamic_slice, [x, *_batched_starts(build, starts, batched[1:], size)], {"sizes": sizes})


dynamic_slice = Primitive(
    name="dynamic_slice",
    kind=Kind.MOVEMENT,
    nargs=None,
    attrs={"sizes": AttrType.INTS},
    shape_rule=_slice_rule,
    reference=array_ops.dynamic_slice,
    memory=Memory(vjp_needs=INPUTS),
    emit=_slice_emit,
    mlir=_slice_mlir,
    unview=lambda build, base, new, attrs, *starts: _slice_unview(build, base, new, starts),
    vjp=_slice_vjp,
    batch=_slice_batch,
)

# ---- dynamic_update_slice --------------------------------------------------------------------


def _update_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    if len(types) < 2:
        raise fail(f"dynamic_update_slice: needs a base, an update and starts, got {len(types)} operands")
    x, update, *starts = types
    _check_window("dynamic_update_slice", x, update.shape)
    _check_starts("dynamic_update_slice", x, starts, update.shape)
    if update.dtype != x.dtype:
        raise fail(f"dynamic_update_slice: the update {update} must have the base's dtype ({x})")
    return [x]


def _update_emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    x, update = ctx.operand_types[:2]
    if update.size == 0:
        return ctx.read(0, idx)
    conds, src = [], []
    for axis, (i, d, n) in enumerate(zip(idx, x.shape, update.shape)):
        if n == d:  # the window spans the axis
            src.append(i)
            continue
        rel = f"{i} - {_clamped(ctx, 2 + axis, d, n, idx)}"
        conds.append(f"0 <= {rel} < {n}")
        src.append(_clamp(rel, n - 1))  # in bounds wherever it is read: both sides are evaluated
    new, old = ctx.read(1, src), ctx.read(0, idx)
    return f"({new} if ({' and '.join(conds)}) else {old})" if conds else new


@vjp_rule
def _update_vjp(build: Build, op: Op, ct: Value, wanted: Wanted) -> Cotangents:
    # The base shows through everywhere except the window; the update is exactly the window.
    update, starts = op.operands[1], list(op.operands[2:])
    ct_base = None
    if wanted[0]:
        ct_base = build(dynamic_update_slice, [ct, full_like(build, 0, update.type), *starts], {})
    ct_update = None
    if wanted[1]:
        ct_update = build(dynamic_slice, [ct, *starts], {"sizes": update.type.shape})
    return (ct_base, ct_update, *(None for _ in starts))


def _update_mlir(b: Builder, op: Op, xs: list[str], loc: str) -> str:
    x, update = (v.type for v in op.operands[:2])
    if update.size == 0:
        return xs[0]
    if _per_row(op):  # each row's window: a generic over x selecting the update inside it
        inputs, corners = _mlir_rows(b, op, xs, x, update.shape, [(xs[0], x)])

        def body(bb: ml.Body, args: list[str], acc: str) -> str:
            inside, src = None, []
            for (i, c), n in zip(corners(bb, args), update.shape, strict=True):
                if c is None:
                    src.append(i)
                    continue
                rel = bb.emit(f"arith.subi {i}, {c} : index")
                zero, size = bb.emit("arith.constant 0 : index"), bb.emit(f"arith.constant {n} : index")
                low = bb.emit(f"arith.cmpi sge, {rel}, {zero} : index")
                high = bb.emit(f"arith.cmpi slt, {rel}, {size} : index")
                both = bb.emit(f"arith.andi {low}, {high} : i1")
                inside = both if inside is None else bb.emit(f"arith.andi {inside}, {both} : i1")
                last = bb.emit(f"arith.constant {n - 1} : index")
                src.append(
                    bb.emit(f"arith.minsi {bb.emit(f'arith.maxsi {rel}, {zero} : index')}, {last} : index")
                )
            new = bb.emit(f"tensor.extract {xs[1]}[{', '.join(src)}] : {update}")
            return new if inside is None else bb.emit(f"arith.select {inside}, {new}, {args[0]} : {x.dtype}")

        return ml.generic(b, x, inputs, body, loc=loc)
    offsets = _offsets(b, op, update.shape, xs[2:])
    where = _window(offsets, update.shape)
    return ml.emit(b, f"tensor.insert_slice {xs[1]} into {xs[0]}{where} : {update} into {x} {loc}")


def _update_batch(build: Build, op: Op, operands: Sequence[Value], batched: Wanted, size: int) -> Value:
    """The base and the update over the whole batch axis, each example's window at its own starts
    where they differ."""
    x, update, *starts = operands
    parts = [with_batch(build, v, b, size) for v, b in ((x, batched[0]), (update, batched[1]))]
    return build(dynamic_update_slice, [*parts, *_batched_starts(build, starts, batched[2:], size)], {})


dynamic_update_slice = Primitive(
    name="dynamic_update_slice",
    kind=Kind.MOVEMENT,
    nargs=None,
    attrs={},
    shape_rule=_update_rule,
    reference=array_ops.dynamic_update_slice,
    memory=Memory(vjp_needs=INPUTS),
    emit=_update_emit,
    mlir=_update_mlir,
    vjp=_update_vjp,
    batch=_update_batch,
)

# Ops whose result is operand 0 with a window replaced: they read operand 0 only at the element they
# write (fusion records that read at the group's own index, so the result may take the dying base's
# buffer), and a user's ``x[...] = v`` realized by one reads the array's old value.
PARTIAL_UPDATES = frozenset({mv.update_slice, dynamic_update_slice})
