"""Region ops: loops and branches. Each holds its bodies as regions (``Op.regions``), blocks whose
arguments carry the loop state, and is printed in MLIR's generic form with a ``"dsl.yield"``
ending each block.

- ``for``: operands ``(lower, upper, carries..., consts...)``, 0-d i64 bounds; one region ``(i,
  carries..., consts...) -> carries``, run for ``i`` in ``range(lower, upper)``; results the final
  carries.
- ``while``: operands ``(carries..., consts...)``; regions ``cond: (carries..., consts...) ->
  tensor<i1>`` and ``body: (carries..., consts...) -> carries``; results the carries once ``cond`` is
  false.
- ``if``: operands ``(pred, operands...)``, ``pred`` a 0-d bool; regions ``then`` and ``else``, both
  ``operands -> results``; results those of the branch ``pred`` picks.
- ``scan``: operands ``(carries..., xs..., consts...)`` (attribute ``carries`` counts the first); one
  region ``(carries..., x slices..., consts...) -> (carries..., y slices...)`` run ``length`` times
  over axis 0 of ``xs`` (last to first if ``reverse``); results the final carries and the stacked
  ``ys``.

``consts`` (an optional attribute of ``for``, ``while`` and ``scan``, 0 when absent) counts the
trailing operands that every iteration reads unchanged (JAX's ``num_consts``), passed to each region
as its trailing block arguments. A region may also read values of the blocks enclosing it directly,
as MLIR's ``scf`` regions do (the tracer writes bodies so); the verifier checks that everything a
block reads is defined in it or above it. The ``close_regions`` pass (``compiler/passes/regions.py``)
turns every such read into a const operand, so the passes after it see each region op's every input
as an operand (a closed region, as a JAX jaxpr's). The shape rule of each (``region_rule``) checks its
regions' block signatures against the operands: a carry whose type changes is an error. Their vjps
(``compiler/autodiff_control.py``) are region ops again: a forward scan stacking residuals and a
backward scan, an ``if`` of each branch's vjp; the interpreter runs them natively.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import numpy as np

from compiler.ir.core import Block, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.prims import mlir as ml
from compiler.prims.base import AttrType, Kind, Primitive, RunBlock, fail

CONSTS = "consts"  # the optional attribute counting a loop's trailing loop-invariant operands
INDEX = TensorType((), DType.i64)  # a loop counter and a for loop's bounds
PRED = TensorType((), DType.i1)  # a branch's predicate and a while loop's condition


def types_text(types: Sequence[TensorType]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _check_block(
    name: str, what: str, block: Block, args: Sequence[TensorType], results: Sequence[TensorType]
) -> None:
    """``block`` takes ``args`` and yields ``results`` (a carry changing type fails here)."""
    got = [a.type for a in block.args]
    if got != list(args):
        raise fail(
            f"{name}: the {what} region takes {types_text(got)}, but the op passes it {types_text(args)}"
        )
    yielded = [v.type for v in block.results]
    if yielded != list(results):
        raise fail(f"{name}: the {what} region yields {types_text(yielded)}, expected {types_text(results)}")


def _regions(name: str, regions: Sequence[Block], count: int) -> None:
    if len(regions) != count:
        raise fail(f"{name} holds {count} region(s), got {len(regions)}")


def n_consts(op_or_attrs: Op | Mapping[str, Any]) -> int:
    """How many trailing operands of a ``for``, ``while`` or ``scan`` are consts (0 for an ``if``)."""
    attrs = op_or_attrs.attrs if isinstance(op_or_attrs, Op) else op_or_attrs
    return int(attrs.get(CONSTS, 0))


def split_consts(items: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """``items`` (operands, or their types) split before the trailing consts."""
    k = n_consts(attrs)
    if not 0 <= k <= len(items):
        raise fail(f"consts = {k} does not fit {len(items)} operand(s)")
    cut = len(items) - k
    return list(items[:cut]), list(items[cut:])


def carried(op: Op) -> list[tuple[Value, Value]]:
    """A loop's ``(initial value, result)`` pair per carry, in order (none for an ``if``)."""
    if op.prim is if_:
        return []
    first = 2 if op.prim is for_loop else 0
    n = int(op.attrs["carries"]) if op.prim is scan else len(op.results)
    return list(zip(op.operands[first : first + n], op.results[:n], strict=True))


def _no_reference(*args: Any, **kwargs: Any) -> np.ndarray:
    raise TypeError("a region op runs through its region_reference (the interpreter's)")


def _no_shape_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    raise fail("an op holding regions is typed by its region rule")


# ---- for ------------------------------------------------------------------------------------------


def _for_rule(
    types: Sequence[TensorType], attrs: Mapping[str, Any], regions: Sequence[Block]
) -> list[TensorType]:
    if len(types) < 2:
        raise fail(f"for takes (lower, upper, carries...), got {len(types)} operand(s)")
    lower, upper, *rest = types
    if lower != INDEX or upper != INDEX:
        raise fail(f"for: the bounds must be {INDEX}, got {lower} and {upper}")
    carries, consts = split_consts(rest, attrs)
    _regions("for", regions, 1)
    _check_block("for", "body", regions[0], [INDEX, *carries, *consts], carries)
    return carries


def _for_run(
    operands: Sequence[np.ndarray], attrs: Mapping[str, Any], regions: Sequence[Block], run: RunBlock
) -> list[np.ndarray]:
    lower, upper, *rest = operands
    carries, consts = split_consts(rest, attrs)
    for i in range(int(lower), int(upper)):
        carries = run(regions[0], [np.array(i, np.int64), *carries, *consts])
    return list(carries)


# ---- while ----------------------------------------------------------------------------------------


def _while_rule(
    types: Sequence[TensorType], attrs: Mapping[str, Any], regions: Sequence[Block]
) -> list[TensorType]:
    _regions("while", regions, 2)
    carries, _ = split_consts(types, attrs)
    _check_block("while", "cond", regions[0], types, [PRED])
    _check_block("while", "body", regions[1], types, carries)
    return carries


def _while_run(
    operands: Sequence[np.ndarray], attrs: Mapping[str, Any], regions: Sequence[Block], run: RunBlock
) -> list[np.ndarray]:
    carries, consts = split_consts(operands, attrs)
    while bool(run(regions[0], [*carries, *consts])[0]):
        carries = run(regions[1], [*carries, *consts])
    return list(carries)


# ---- if -------------------------------------------------------------------------------------------


def _if_rule(
    types: Sequence[TensorType], attrs: Mapping[str, Any], regions: Sequence[Block]
) -> list[TensorType]:
    pred, *operands = types
    if pred != PRED:
        raise fail(f"if: the predicate must be {PRED}, got {pred}")
    _regions("if", regions, 2)
    then_results = [v.type for v in regions[0].results]
    _check_block("if", "then", regions[0], operands, then_results)
    _check_block("if", "else", regions[1], operands, then_results)
    return then_results


def _if_run(
    operands: Sequence[np.ndarray], attrs: Mapping[str, Any], regions: Sequence[Block], run: RunBlock
) -> list[np.ndarray]:
    pred, *rest = operands
    return run(regions[0] if bool(pred) else regions[1], rest)


# ---- scan -----------------------------------------------------------------------------------------


def _scan_rule(
    types: Sequence[TensorType], attrs: Mapping[str, Any], regions: Sequence[Block]
) -> list[TensorType]:
    n, length = int(attrs["carries"]), int(attrs["length"])
    rest, consts = split_consts(types, attrs)
    if not 0 <= n <= len(rest) or length < 0:
        raise fail(f"scan: carries = {n} and length = {length} do not fit {len(types)} operand(s)")
    carries, xs = list(rest[:n]), list(rest[n:])
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise fail(f"scan: each xs must have leading axis {length} (the length), got {x}")
    _regions("scan", regions, 1)
    body = regions[0]
    ys = [v.type for v in body.results[n:]]
    rows = [TensorType(x.shape[1:], x.dtype) for x in xs]
    _check_block("scan", "body", body, carries + rows + consts, carries + ys)
    return carries + [TensorType((length, *y.shape), y.dtype) for y in ys]


def _scan_run(
    operands: Sequence[np.ndarray], attrs: Mapping[str, Any], regions: Sequence[Block], run: RunBlock
) -> list[np.ndarray]:
    n, length, body = int(attrs["carries"]), int(attrs["length"]), regions[0]
    rest, consts = split_consts(operands, attrs)
    carries, xs = list(rest[:n]), rest[n:]
    ys = [np.empty((length, *v.type.shape), v.type.dtype.np) for v in body.results[n:]]
    steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
    for t in steps:
        out = run(body, [*carries, *(x[t] for x in xs), *consts])
        carries = out[:n]
        for y, slice_ in zip(ys, out[n:], strict=True):
            y[t] = slice_
    return carries + ys


# ---- lowering to scf (--emit mlir) ----------------------------------------------------------------


class RegionBuilder(ml.Builder, Protocol):
    """The exporter as region ops need it: it also writes blocks (``compiler/codegen/mlir_export.py``)."""

    def region(self, block: Block, args: Sequence[str]) -> tuple[list[str], list[str]]:
        """The lines of ``block``'s ops with its arguments named ``args``, and its results' names."""
        ...


def _results(b: ml.Builder, op: Op) -> tuple[str, str]:
    """The name a region op's results take (``%n`` or ``%n:k``) and the ``= `` prefix of its line."""
    if not op.results:
        return "", ""
    name = b.fresh()
    return name, (f"{name}:{len(op.results)}" if len(op.results) > 1 else name) + " = "


def _yield(names: Sequence[str], types: Sequence[TensorType], op: str = "scf.yield") -> str:
    return f"{op} {', '.join(names)} : {', '.join(map(str, types))}" if names else op


def _indented(lines: Sequence[str]) -> list[str]:
    return ["  " + line for line in lines]


def _to_index(b: ml.Builder, tensor: str, dtype: DType = DType.i64) -> str:
    scalar = ml.emit(b, f"tensor.extract {tensor}[] : tensor<{dtype}>")
    return ml.emit(b, f"arith.index_cast {scalar} : {dtype} to index")


def _carry_list(b: ml.Builder, inits: Sequence[str]) -> tuple[list[str], str]:
    names = [b.fresh() for _ in inits]
    return names, ", ".join(f"{a} = {v}" for a, v in zip(names, inits, strict=True))


def _result_types(op: Op) -> str:
    return types_text([v.type for v in op.results])


def _for_mlir(builder: ml.Builder, op: Op, names: list[str], loc: str) -> str:
    b = cast(RegionBuilder, builder)
    lo, hi, *rest = names
    inits, consts = split_consts(rest, op.attrs)
    lower, upper = _to_index(b, lo), _to_index(b, hi)
    one = ml.emit(b, "arith.constant 1 : index")
    iv, i64, i = b.fresh(), b.fresh(), b.fresh()
    carries, iter_args = _carry_list(b, inits)
    lines, yielded = b.region(op.regions[0], [i, *carries, *consts])
    name, prefix = _results(b, op)
    iters = f" iter_args({iter_args}) -> {_result_types(op)}" if inits else ""
    b.lines.append(f"{prefix}scf.for {iv} = {lower} to {upper} step {one}{iters} {{")
    b.lines += _indented(
        [f"{i64} = arith.index_cast {iv} : index to i64", f"{i} = tensor.from_elements {i64} : tensor<i64>"]
        + lines
        + [_yield(yielded, [v.type for v in op.results])]
    )
    b.lines.append(f"}} {loc}")
    return name


def _while_mlir(builder: ml.Builder, op: Op, names: list[str], loc: str) -> str:
    b = cast(RegionBuilder, builder)
    cond, body = op.regions
    types = [v.type for v in op.results]
    inits, consts = split_consts(names, op.attrs)
    before, iter_args = _carry_list(b, inits)
    cond_lines, (flag,) = b.region(cond, before + consts)
    pred = b.fresh()
    after = [b.fresh() for _ in inits]
    body_lines, yielded = b.region(body, after + consts)
    name, prefix = _results(b, op)
    b.lines.append(f"{prefix}scf.while ({iter_args}) : {types_text(types)} -> {types_text(types)} {{")
    b.lines += _indented(
        cond_lines
        + [f"{pred} = tensor.extract {flag}[] : tensor<i1>", _yield(before, types, f"scf.condition({pred})")]
    )
    b.lines.append("} do {")
    b.lines.append(f"^bb0({', '.join(f'{a}: {t}' for a, t in zip(after, types, strict=True))}):")
    b.lines += _indented(body_lines + [_yield(yielded, types)])
    b.lines.append(f"}} {loc}")
    return name


def _if_mlir(builder: ml.Builder, op: Op, names: list[str], loc: str) -> str:
    b = cast(RegionBuilder, builder)
    flag, *operands = names
    pred = ml.emit(b, f"tensor.extract {flag}[] : tensor<i1>")
    types = [v.type for v in op.results]
    then_lines, then_results = b.region(op.regions[0], operands)
    else_lines, else_results = b.region(op.regions[1], operands)
    name, prefix = _results(b, op)
    b.lines.append(f"{prefix}scf.if {pred}{' -> ' + types_text(types) if types else ''} {{")
    b.lines += _indented(then_lines + [_yield(then_results, types)])
    b.lines.append("} else {")
    b.lines += _indented(else_lines + [_yield(else_results, types)])
    b.lines.append(f"}} {loc}")
    return name


def _slice(t: TensorType, at: str) -> str:
    """``[at, 0..] [1, dims..] [1..]``: the offsets, sizes and strides of row ``at`` of ``t``."""
    rest = t.shape[1:]
    offsets = ", ".join([at] + ["0"] * len(rest))
    sizes = ", ".join(["1"] + [str(d) for d in rest])
    return f"[{offsets}] [{sizes}] [{', '.join(['1'] * len(t.shape))}]"


def _scan_mlir(builder: ml.Builder, op: Op, names: list[str], loc: str) -> str:
    """A ``scf.for`` over the rows: x rows are ``tensor.extract_slice``s, y rows ``tensor.insert_slice``s
    into accumulators carried beside the carries."""
    b = cast(RegionBuilder, builder)
    n, length, body = int(op.attrs["carries"]), int(op.attrs["length"]), op.regions[0]
    rest, consts = split_consts(names, op.attrs)
    inits, xs = rest[:n], rest[n:]
    x_types = [v.type for v in op.operands[n : n + len(xs)]]
    carry_types = [v.type for v in op.results[:n]]
    y_types = [v.type for v in op.results[n:]]
    empties = [ml.emit(b, f"tensor.empty() : {t}") for t in y_types]
    lower = ml.emit(b, "arith.constant 0 : index")
    upper = ml.emit(b, f"arith.constant {length} : index")
    one = ml.emit(b, "arith.constant 1 : index")
    last = ml.emit(b, f"arith.constant {length - 1} : index") if op.attrs["reverse"] else ""
    iv = b.fresh()
    carries, iter_args = _carry_list(b, inits + empties)
    row = b.fresh() if last else iv
    x_rows = [b.fresh() for _ in xs]
    prologue = [f"{row} = arith.subi {last}, {iv} : index"] if last else []
    for x_row, x, t in zip(x_rows, xs, x_types, strict=True):
        prologue.append(
            f"{x_row} = tensor.extract_slice {x}{_slice(t, row)} : {t} to {TensorType(t.shape[1:], t.dtype)}"
        )
    lines, yielded = b.region(body, carries[:n] + x_rows + consts)
    epilogue, stacked = [], []
    for y_row, acc, t in zip(yielded[n:], carries[n:], y_types, strict=True):
        stacked.append(b.fresh())
        row_type = TensorType(t.shape[1:], t.dtype)
        epilogue.append(
            f"{stacked[-1]} = tensor.insert_slice {y_row} into {acc}{_slice(t, row)} : {row_type} into {t}"
        )
    name, prefix = _results(b, op)
    iters = f" iter_args({iter_args}) -> {_result_types(op)}" if op.results else ""
    b.lines.append(f"{prefix}scf.for {iv} = {lower} to {upper} step {one}{iters} {{")
    b.lines += _indented(prologue + lines + epilogue + [_yield(yielded[:n] + stacked, carry_types + y_types)])
    b.lines.append(f"}} {loc}")
    return name


# ---- the primitives -------------------------------------------------------------------------------


def _region_vjp(build: Any, op: Op, cts: Any, wanted: tuple[bool, ...]) -> tuple[Any, ...]:
    """Reverse mode through the regions (``compiler/autodiff_control.py``): it runs the sweep on the
    bodies, and the sweep's module imports the primitives, so it is imported when first used."""
    from compiler.autodiff_control import region_vjp

    return tuple(region_vjp(build, op, cts, wanted))


def _control(name: str, attrs: Mapping[str, AttrType], rule: Any, run: Any, lowering: ml.OpRule) -> Primitive:
    loops = name != "if"
    return Primitive(
        name=name,
        kind=Kind.CONTROL,
        nargs=None,
        attrs={**attrs, CONSTS: AttrType.INT} if loops else attrs,
        optional_attrs=frozenset({CONSTS}) if loops else frozenset(),
        shape_rule=_no_shape_rule,
        reference=_no_reference,
        mlir=lowering,
        vjp=_region_vjp,
        region_rule=rule,
        region_reference=run,
    )


for_loop = _control("for", {}, _for_rule, _for_run, _for_mlir)
while_loop = _control("while", {}, _while_rule, _while_run, _while_mlir)
if_ = _control("if", {}, _if_rule, _if_run, _if_mlir)
scan = _control(
    "scan",
    {"carries": AttrType.INT, "length": AttrType.INT, "reverse": AttrType.BOOL},
    _scan_rule,
    _scan_run,
    _scan_mlir,
)
