"""NumPy-assisted kernels: a loop group dominated by transcendental math runs as whole-array NumPy
calls (each primitive's own NumPy reference: a NumPy function or one of ``runtime/array_ops.py``,
which the generated module imports; it needs no compiler) inside ``numba.objmode``.

Why: without Intel's SVML (not in the llvmlite wheels), Numba calls libm once per element, while
NumPy's ufuncs use SIMD implementations: ``tanh(h @ w + b)`` over 4096x128 f32 takes 5.1 ms as a
fused Numba loop and 0.32 ms as two NumPy calls (measured on the 2-core CI machine). Float32 exp,
tanh, log and logistic have vectorizable polynomials (``compiler/prims/vecmath.py``) and stay in the
loop code; what still comes here is float64 transcendental math and the functions without one. The price is
~3 us to enter object mode, so only big groups containing such an op take this path. Semantics are
the primitives' references: exactly what the reference interpreter computes. Outputs are stored
after every op has run (the last op, a ufunc, writes its output's buffer itself:
``_stored_directly``), so a kernel whose output shares a block with an input (in place) still
reads every input before writing.

Temporaries are planned memory: each op whose reference has an ``out`` (a ufunc, or a function of
``runtime/array_ops.py`` with that parameter) computes into scratch of the kernel (``Scratch``, a
row of the memory plan that ``memory_plan()`` shows; the driver passes views of the arena), one
chunk's rows in the chunked form, and a scratch is reused once no value still to be read lies in
it (``_Temporaries``). A call then allocates nothing of a temporary's size. What still allocates:
views cost no data (broadcast, reshape, transpose, slices, constants), but a reshape of a
non-contiguous value copies; iota's one row; gather (``np.take`` of clamped indices); copy and
stop_gradient (np.copy; simplify removes them); a float32 sum's float64 total and max/min's zero
test (arrays of the reduced shape; arrays of the operand's shape only where a result is zero);
NumPy's own iterator buffers (``np.getbufsize()`` elements) for a broadcast operand or a cast.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.kernel.cpu.records import Scratch
from compiler.kernel.emit import ConstantPool, indent, np_type
from compiler.passes.fuse import Group, GroupKind
from compiler.prims import elementwise as ew
from compiler.prims.base import Kind, Primitive
from runtime import array_ops

MIN_ELEMENTS = 1 << 14
CHUNK_ELEMENTS = 1 << 16  # elements per chunk of a chunked kernel: its temporaries stay in cache
CHUNK_MIN_ELEMENTS = 1 << 18  # smaller groups' temporaries fit in cache anyway: one call per op is less

PRELUDE = "from runtime import array_ops as _ops"


def wants_numpy(group: Group, vector_math: bool = True, keyed_minmax: bool = True) -> bool:
    """Big loop groups with at least one libm-bound op (``ew.libm_bound``: float64 transcendental
    functions, float32 ones without a ``vecmath`` polynomial, every one when ``vector_math`` is off;
    floats only: NumPy's int semantics for division and overflow differ from the loop code's); also
    reductions with such an op in their prologue (their chunks' partial results combine by the
    reduction's own reference over the two stacked: np.maximum would not order -0.0 below +0.0 as
    max does); and float max/min reductions (``Reducer.selects``) when ``keyed_minmax`` is off (a
    NaN-propagating compare-and-select loop does not vectorize; NumPy's does). Never a group with
    an ``ew.EXACT`` op (``log1p``): its bits are exactmath's on every target, not NumPy's."""
    reducer = group.root.prim.reducer if group.kind is GroupKind.REDUCE else None
    return (
        group.kind in (GroupKind.LOOP, GroupKind.REDUCE)
        and math.prod(group.shape) >= MIN_ELEMENTS
        and (
            any(ew.libm_bound(op, vector_math) for op in group.ops)
            or (reducer is not None and reducer.selects is not None and not keyed_minmax)
        )
        and all(op.result.type.dtype.is_float or op.result.type.dtype.is_bool for op in group.ops)
        and not any(op.prim in ew.EXACT for op in group.ops)
    )


def _literal(value: Any, pool: ConstantPool) -> str:
    if isinstance(value, DType):  # references take NumPy dtypes (``prims.base.numpy_attrs``)
        return np_type(value)
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return f"np.array({_literal(value.item(), pool)}, {np_type(DType.from_numpy(value.dtype))})"
        return pool.add(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def reference(prim: Primitive) -> str:
    """How generated code names ``prim``'s NumPy reference: ``np.<name>`` or ``_ops.<name>``."""
    fn = prim.reference
    name = getattr(fn, "__name__", "")
    if getattr(np, name, None) is fn:
        return f"np.{name}"
    assert getattr(array_ops, name, None) is fn, f"{prim.name}: its reference is not importable"
    return f"_ops.{name}"


def _call(op: Op, operands: list[str], pool: ConstantPool, out: str | None = None) -> str:
    attrs = [
        f"{key}={_literal(val, pool)}" for key, val in sorted(op.attrs.items()) if not key.startswith("dsl.")
    ]
    if out is not None:  # (``_into``: the reference stores exactly its result's dtype there)
        return f"{reference(op.prim)}({', '.join([*operands, *attrs, f'out={out}'])})"
    call = f"{reference(op.prim)}({', '.join(operands + attrs)})"
    return f"np.asarray({call}).astype({np_type(op.result.type.dtype)}, copy=False)"


def _into(op: Op) -> bool:
    """Whether ``op``'s reference stores its result into an ``out`` array, bit for bit the array it
    would make: a ufunc whose loop for the operands' dtypes gives the result's dtype, or a function
    of ``runtime/array_ops.py`` with an ``out`` parameter. The others give views of their operands
    (broadcast, reshape, transpose, slices, dynamic_slice, constant, iota's broadcast row) or have no
    ``out`` (gather's np.take of clamped indices): a new array of their own."""
    fn = op.prim.reference
    if not isinstance(fn, np.ufunc):
        return "out" in inspect.signature(fn).parameters
    if fn.nout != 1 or len(op.operands) != fn.nin or any(not k.startswith("dsl.") for k in op.attrs):
        return False
    loop = fn.resolve_dtypes((*(v.type.dtype.np for v in op.operands), None))
    return bool(loop[-1] == op.result.type.dtype.np)


@dataclass
class _Temporaries:
    """A NumPy kernel's temporaries: scratch of the memory plan (``Scratch``: parameters after the
    kernel's buffers, views of the arena the driver passes), each op with an ``out`` (``_into``)
    computing into one that no value still to be read may lie in. ``held``: the scratch each
    value's array may view (a view op's result: its operands'); ``direct``: the values that are a
    whole scratch (or its chunk), which a ufunc may overwrite as it reads them (same elements,
    same strides: NumPy copies nothing)."""

    kernel: str
    scratch: list[Scratch] = field(default_factory=list)
    held: dict[Value, frozenset[str]] = field(default_factory=dict)
    direct: set[Value] = field(default_factory=set)

    def take(self, shape: tuple[int, ...], dtype: DType, busy: AbstractSet[str]) -> str:
        """A scratch of ``shape`` and ``dtype`` outside ``busy``: a free one, else a new one."""
        for s in self.scratch:
            if s.shape == shape and s.dtype is dtype and s.name not in busy:
                return s.name
        self.scratch.append(Scratch(f"{self.kernel}_s{len(self.scratch)}", shape, dtype))
        return self.scratch[-1].name

    def own(self, shape: tuple[int, ...], dtype: DType) -> str:
        """A scratch no op computes into (a reduction's accumulator over the chunks)."""
        return self.take(shape, dtype, {s.name for s in self.scratch})

    def evaluate(
        self,
        ops: list[Op],
        local: dict[Value, str],
        read: Callable[[Value], str],
        extent: Callable[[Op], tuple[tuple[int, ...], bool]],
        keep: AbstractSet[Value],
        pool: ConstantPool,
        stored: Mapping[Value, str] | None = None,
    ) -> list[str]:
        """Lines computing ``ops`` in order (``t<k>``, named in ``local``), read as ``read(v)``;
        ``extent(op)``: the shape of its scratch and whether an op's result is its first
        ``r1 - r0`` rows (a chunk's); ``keep``: values read after ``ops`` (stored outputs, values
        every chunk reads), whose scratch no later op takes; ``stored``: values computed straight
        into their output's buffer, there (``_stored_directly``)."""
        last = {v: k for k, op in enumerate(ops) for v in op.operands}
        lines = []
        for k, op in enumerate(ops):
            local[op.result] = name = f"t{len(self.held)}"  # (every op evaluated is in ``held``)
            operands = [read(v) for v in op.operands]
            if stored and op.result in stored:
                self.held[op.result] = frozenset()
                lines.append(f"{name} = {_call(op, operands, pool, stored[op.result])}")
                continue
            if not _into(op):
                self.held[op.result] = frozenset().union(
                    *(self.held.get(v, frozenset()) for v in op.operands)
                )
                lines.append(f"{name} = {_call(op, operands, pool)}")
                continue
            live = [v for v in self.held if v in keep or last.get(v, -1) > k]
            shared = isinstance(op.prim.reference, np.ufunc)  # may write over what it reads
            read_now = [
                v
                for v in op.operands
                if not (shared and v in self.direct and v.type.shape == op.result.type.shape)
            ]
            busy = frozenset().union(*(self.held.get(v, frozenset()) for v in [*live, *read_now]))
            shape, chunk = extent(op)
            out = self.take(shape, op.result.type.dtype, busy)
            self.held[op.result] = frozenset({out})
            self.direct.add(op.result)
            lines.append(f"{name} = {_call(op, operands, pool, out + ('[: r1 - r0]' if chunk else ''))}")
        return lines


def numpy_kernel(
    name: str,
    args: list[str],
    group: Group,
    names: dict[Value, str],
    pool: ConstantPool,
    chunked: bool = True,
) -> tuple[str, list[Scratch]]:
    """A plain Python function evaluating ``group`` op by op with NumPy, then storing its outputs;
    in chunks of rows when ``chunked`` and the group allows it (``_chunk_plan``). Returns its text
    and its scratch (``_Temporaries``), parameters after ``args``."""
    plan = _chunk_plan(group) if chunked else None
    temps = _Temporaries(name)
    if plan is None:
        lines = _whole_array_body(group, names, pool, temps)
    else:
        lines = _chunked_body(group, names, pool, temps, *plan)
    params = [*args, *(s.name for s in temps.scratch)]
    return "\n".join([f"def {name}({', '.join(params)}):", *indent(lines, 1)]), temps.scratch


def _whole_array_body(
    group: Group, names: dict[Value, str], pool: ConstantPool, temps: _Temporaries
) -> list[str]:
    local: dict[Value, str] = {v: names[v] for v in group.inputs}

    def whole(op: Op) -> tuple[tuple[int, ...], bool]:
        return op.result.type.shape, False

    direct = _stored_directly(group, group.ops)
    stored = {} if direct is None else {direct: names[direct]}
    lines = temps.evaluate(group.ops, local, local.__getitem__, whole, set(group.outputs), pool, stored)
    copies = [v for v in group.outputs if v not in stored]
    return lines + [f"np.copyto({names[v]}, {local[v]}, casting='unsafe')" for v in copies]


def _stored_directly(group: Group, ops: list[Op]) -> Value | None:
    """The output that the last of ``ops`` may compute straight into its buffer (no scratch, no
    copy): a LOOP group's, when that op is a ufunc's (an input stored over in place is read element
    by element, exactly where it is written: NumPy reads each element before writing it; every
    other op has run) and every other output is computed into scratch (stored from there, not from
    a view of an input this write could change)."""
    if group.kind is not GroupKind.LOOP or not ops:
        return None
    op = ops[-1]
    made = {o.result: o for o in group.ops}
    others = [made[v] for v in group.outputs if v is not op.result]
    if op.result in group.outputs and isinstance(op.prim.reference, np.ufunc) and _into(op):
        return op.result if all(_into(o) for o in others) else None
    return None


def _chunk_plan(group: Group) -> tuple[set[Value], int] | None:
    """Chunking by rows (axis 0 of the iteration space) keeps each temporary in cache, instead of a
    full-size array per op. Elementwise ops over the whole iteration space run per chunk, into
    scratch of one chunk's rows; everything else (index maps, constants, small values) is evaluated
    once, whole (NumPy gives views for broadcasts), and sliced where a chunk reads it. Returns the
    per-chunk values and the rows per chunk, or None where a whole-array value would depend on a
    per-chunk one."""
    shape = group.shape
    if not shape or shape[0] < 2 or math.prod(shape) < CHUNK_MIN_ELEMENTS:
        return None
    per_chunk: set[Value] = set()
    body = group.ops[:-1] if group.kind is GroupKind.REDUCE else group.ops
    for op in body:
        if op.prim.kind is Kind.ELEMENTWISE and op.result.type.shape == shape:
            per_chunk.add(op.result)
        elif any(v in per_chunk for v in op.operands):
            return None
    stored = [v for v in group.outputs if v is not group.root.result or group.kind is GroupKind.LOOP]
    if any(v.type.shape != shape for v in stored):
        return None
    rows = max(1, CHUNK_ELEMENTS // max(1, math.prod(shape[1:])))
    return (per_chunk, rows) if rows < shape[0] else None


def _chunked_body(
    group: Group,
    names: dict[Value, str],
    pool: ConstantPool,
    temps: _Temporaries,
    per_chunk: set[Value],
    rows: int,
) -> list[str]:
    shape = group.shape
    root = group.root
    reduced = root.result if group.kind is GroupKind.REDUCE else None
    axes = {int(a) for a in root.attrs["axes"]} if reduced is not None else set()
    local: dict[Value, str] = {v: names[v] for v in group.inputs}

    def chunk_of(v: Value) -> str:
        return local[v] if v in per_chunk or v is reduced else f"{local[v]}[r0:r1]"

    def extent(op: Op) -> tuple[tuple[int, ...], bool]:
        """A chunk's rows of a per-chunk value; a reduction over the rows: its whole result."""
        result = op.result.type.shape
        if op.result is reduced and 0 in axes:
            return result, False
        if op.result in per_chunk or op.result is reduced:
            return (rows, *result[1:]), True
        return result, False

    inside = [op for op in group.ops if op.result in per_chunk or op.result is reduced]
    once = [op for op in group.ops if not (op.result in per_chunk or op.result is reduced)]
    every_chunk = {op.result for op in once}  # (their scratch is theirs until the kernel returns)
    before = temps.evaluate(once, local, local.__getitem__, extent, every_chunk, pool)
    stores = every_chunk | set(group.outputs)
    direct = _stored_directly(group, inside)
    stored = {} if direct is None else {direct: f"{names[direct]}[r0:r1]"}
    lines = temps.evaluate(inside, local, chunk_of, extent, stores, pool, stored)
    after = []
    for v in group.outputs:
        if v is reduced and 0 in axes:  # every chunk adds to the whole result (in the reducer's accumulator)
            out, wide = names[v], _accumulator(root)
            if wide is not v.type.dtype:
                out = temps.own(v.type.shape, wide)
                after.append(f"np.copyto({names[v]}, {out}, casting='unsafe')")
            both = temps.own((2, *v.type.shape), wide)  # (np.stack's dtype: the wider one)
            stacked = f"np.stack(({out}, {local[v]}), out={both})"
            lines += [
                "if r0 == 0:",
                f"    np.copyto({out}, {local[v]}, casting='unsafe')",
                "else:",
                f"    {reference(root.prim)}({stacked}, axes=(0,), out={out})",
            ]
        elif v is reduced:
            lines.append(f"np.copyto({names[v]}[r0:r1], {local[v]}, casting='unsafe')")
        elif v not in stored:
            lines.append(f"np.copyto({names[v]}[r0:r1], {chunk_of(v)}, casting='unsafe')")
    loop = [f"for r0 in range(0, {shape[0]}, {rows}):", f"    r1 = min(r0 + {rows}, {shape[0]})"]
    return before + loop + indent(lines, 1) + after


def _accumulator(root: Op) -> DType:
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    return reducer.accumulator(root.result.type.dtype)
