"""Export a tensor-level program to upstream MLIR: ``func``, ``arith``, ``math``, ``tensor``, ``linalg``.

The output is plain MLIR that ``mlir-opt`` parses and verifies without
``--allow-unregistered-dialect`` and that ``--one-shot-bufferize=bufferize-function-boundaries``
bufferizes, so our programs can be compared with (or handed to) MLIR's own pipeline.

Most primitives take one general path: a ``linalg.generic`` whose indexing maps say which operand
element each output element reads (identity for elementwise ops, a projection for broadcast and
reductions, a permutation for transpose, ``n - 1 - d`` to reverse an axis) and whose body is built
from ``SCALAR_OPS`` (``mlir_scalar.py``), a per-primitive table of ``arith``/``math`` ops. The rest
map to the ``tensor`` dialect (slices, padding, reshapes) or to named ``linalg`` ops (``matmul``,
``fill``).
``EXPORT_RULES`` holds one rule per primitive; the registry test fails for a primitive without one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from compiler.codegen.mlir_scalar import COMBINERS, SCALAR_OPS, Body
from compiler.ir.core import Function, Op, Value
from compiler.ir.printer import BUFFERIZED, format_dense, format_loc, format_symbol
from compiler.ir.types import DType, TensorType
from compiler.prims import REGISTRY, Primitive
from compiler.prims import contraction as ct
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import source as src
from runtime.errors import DSLError


def _dims(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank)]


def _map(rank: int, results: Sequence[str]) -> str:
    return f"affine_map<({', '.join(_dims(rank))}) -> ({', '.join(results)})>"


class _Exporter:
    """Writes one function; ``names`` maps each IR value to its MLIR SSA name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter - 1}"

    def emit(self, rhs: str) -> str:
        name = self.fresh()
        self.lines.append(f"{name} = {rhs}")
        return name

    def empty(self, t: TensorType) -> str:
        return self.emit(f"tensor.empty() : {t}")

    def filled(self, t: TensorType, value: float | int | bool) -> str:
        """``linalg.fill`` of a new tensor with a scalar (the init of reductions and matmuls)."""
        body = Body(self.fresh)
        scalar = body.const(value, t.dtype)
        self.lines += body.lines
        return self.emit(f"linalg.fill ins({scalar} : {t.dtype}) outs({self.empty(t)} : {t}) -> {t}")

    def generic(
        self,
        out: TensorType,
        inputs: Sequence[tuple[str, TensorType, str]],  # (name, type, indexing map)
        body: Callable[[Body, list[str], str], str],  # (body, input scalars, accumulator) -> yielded
        rank: int | None = None,
        reduced: Sequence[int] = (),
        init: str | None = None,
        loc: str = "",
    ) -> str:
        """A ``linalg.generic`` over ``rank`` loops (the output's rank unless reducing)."""
        rank = out.rank if rank is None else rank
        out_map = _map(rank, [f"d{i}" for i in range(rank) if i not in reduced])
        maps = ", ".join([m for _, _, m in inputs] + [out_map])
        iters = ", ".join('"reduction"' if i in reduced else '"parallel"' for i in range(rank))
        init = init or self.empty(out)
        ins = ""
        if inputs:
            ins = f" ins({', '.join(n for n, _, _ in inputs)} : {', '.join(str(t) for _, t, _ in inputs)})"
        name = self.fresh()  # named before its region, so SSA numbers read in order
        block = Body(self.fresh)
        args = [block.fresh() for _ in inputs]
        acc = block.fresh()
        params = [f"{a}: {t.dtype}" for a, (_, t, _) in zip(args, inputs)] + [f"{acc}: {out.dtype}"]
        result = body(block, args, acc)
        self.lines.append(
            f"{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}"
            f"{ins} outs({init} : {out}) {{"
        )
        self.lines.append(f"^bb0({', '.join(params)}):")
        self.lines += [f"  {line}" for line in block.lines]
        self.lines.append(f"  linalg.yield {result} : {out.dtype}")
        self.lines.append(f"}} -> {out} {loc}".rstrip())
        return name

    def gather(self, x: str, xt: TensorType, out: TensorType, exprs: Sequence[str], loc: str = "") -> str:
        """``out[d] = x[exprs(d)]``: broadcast, transpose and axis reversal in one form."""
        return self.generic(out, [(x, xt, _map(out.rank, exprs))], lambda b, xs, acc: xs[0], loc=loc)

    def reverse(self, x: str, t: TensorType, axes: Sequence[int]) -> str:
        if not axes or t.size == 0:
            return x
        exprs = [f"{n - 1} - d{i}" if i in axes else f"d{i}" for i, n in enumerate(t.shape)]
        return self.gather(x, t, t, exprs)


# ---- op rules: (exporter, op, operand names, location) -> result name ----------------------------

OpRule = Callable[[_Exporter, Op, list[str], str], str]


def _elementwise(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    rule, out = SCALAR_OPS[op.prim], op.result.type
    ident = _map(out.rank, _dims(out.rank))
    inputs = [(x, v.type, ident) for x, v in zip(xs, op.operands)]
    in_types = [v.type.dtype for v in op.operands]
    return ex.generic(out, inputs, lambda b, a, acc: rule(b, a, in_types, out.dtype, op.attrs), loc=loc)


def _broadcast(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    off = out.rank - xt.rank
    exprs = [f"d{off + j}" if d == out.shape[off + j] else "0" for j, d in enumerate(xt.shape)]
    return ex.gather(xs[0], xt, out, exprs, loc)


def _transpose(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    perm = [int(p) for p in op.attrs["perm"]]
    exprs = [""] * len(perm)
    for i, p in enumerate(perm):
        exprs[p] = f"d{i}"
    return ex.gather(xs[0], op.operands[0].type, op.result.type, exprs, loc)


def _reshape(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    """Collapse to one dimension, then expand to the new shape (views once bufferized)."""
    xt, out = op.operands[0].type, op.result.type
    flat, x = xt.with_shape((xt.size,)), xs[0]
    if xt.rank != 1:
        groups = f"[{list(range(xt.rank))}]" if xt.rank else "[]"
        verb = "collapse_shape" if xt.rank else "expand_shape"
        shape = "" if xt.rank else " output_shape [1]"
        x = ex.emit(f"tensor.{verb} {x} {groups}{shape} : {xt} into {flat} {loc}".rstrip())
    if out.rank == 1:
        return x
    if out.rank == 0:
        return ex.emit(f"tensor.collapse_shape {x} [] : {flat} into {out} {loc}".rstrip())
    dims = ", ".join(str(d) for d in out.shape)
    return ex.emit(
        f"tensor.expand_shape {x} [{list(range(out.rank))}] output_shape [{dims}] : {flat} into {out}"
    )


def _region(op: Op, region: Sequence[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """``start:limit:stride`` per axis as ``tensor`` slice offsets, sizes, positive strides, and
    the axes whose elements come in reverse order (a negative stride)."""
    start, stride = op.attrs["start"], op.attrs["stride"]
    offsets, strides, reversed_axes = [], [], []
    for axis, (s, st, n) in enumerate(zip(start, stride, region)):
        s, st = int(s), int(st)
        if n == 0:
            s, st = 0, 1
        elif st < 0:
            s, st = s + (n - 1) * st, -st
            reversed_axes.append(axis)
        offsets.append(s)
        strides.append(st)
    return offsets, list(region), strides, reversed_axes


def _slice_text(offsets: list[int], sizes: list[int], strides: list[int]) -> str:
    return "".join(f"[{', '.join(str(v) for v in vs)}]" for vs in (offsets, sizes, strides))


def _slice(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    offsets, sizes, strides, rev = _region(op, out.shape)
    part = ex.emit(
        f"tensor.extract_slice {xs[0]}{_slice_text(offsets, sizes, strides)} : {xt} to {out} {loc}"
    )
    return ex.reverse(part, out, rev)


def _update_slice(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    base, update = (v.type for v in op.operands)
    if update.size == 0:
        return xs[0]
    offsets, sizes, strides, rev = _region(op, update.shape)
    part = ex.reverse(xs[1], update, rev)
    where = _slice_text(offsets, sizes, strides)
    return ex.emit(f"tensor.insert_slice {part} into {xs[0]}{where} : {update} into {base} {loc}")


def _pad(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    value = ex.emit(f"tensor.extract {xs[1]}[] : {op.operands[1].type}")
    low, high = (", ".join(str(int(v)) for v in op.attrs[k]) for k in ("low", "high"))
    idx = ", ".join(f"%i{k}: index" for k in range(xt.rank))
    name = ex.fresh()
    ex.lines += [
        f"{name} = tensor.pad {xs[0]} low[{low}] high[{high}] {{",
        f"^bb0({idx}):",
        f"  tensor.yield {value} : {xt.dtype}",
        f"}} : {xt} to {out} {loc}".rstrip(),
    ]
    return name


def _concatenate(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    axis, out = int(op.attrs["axis"]), op.result.type
    acc, offset = ex.empty(out), 0
    for x, v in zip(xs, op.operands):
        t = v.type
        if t.size:
            offsets = [offset if i == axis else 0 for i in range(out.rank)]
            where = _slice_text(offsets, list(t.shape), [1] * out.rank)
            acc = ex.emit(f"tensor.insert_slice {x} into {acc}{where} : {t} into {out} {loc}".rstrip())
        offset += t.shape[axis]
    return acc


def _reduce(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    xt, out = op.operands[0].type, op.result.type
    axes = [int(a) for a in op.attrs["axes"]]
    assert op.prim.reducer is not None
    init = ex.filled(out, op.prim.reducer.identity(out.dtype))
    combine = COMBINERS[op.prim]
    return ex.generic(
        out,
        [(xs[0], xt, _map(xt.rank, _dims(xt.rank)))],
        lambda b, a, acc: combine(b, [a[0], acc], [xt.dtype, xt.dtype], out.dtype, op.attrs),
        rank=xt.rank,
        reduced=axes,
        init=init,
        loc=loc,
    )


def _matmul(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    (a, b), out = (v.type for v in op.operands), op.result.type
    init = ex.filled(out, 0)
    named = {2: "linalg.matmul", 3: "linalg.batch_matmul"}.get(out.rank)
    if named:
        return ex.emit(f"{named} ins({xs[0]}, {xs[1]} : {a}, {b}) outs({init} : {out}) -> {out} {loc}")
    # More batch dimensions: loops (batch..., m, n, k) with k reduced.
    r = out.rank
    batch = [f"d{i}" for i in range(r - 2)]
    m, n, k = f"d{r - 2}", f"d{r - 1}", f"d{r}"
    inputs = [(xs[0], a, _map(r + 1, [*batch, m, k])), (xs[1], b, _map(r + 1, [*batch, k, n]))]
    add, mul = SCALAR_OPS[ew.add], SCALAR_OPS[ew.mul]
    d = [out.dtype, out.dtype]

    def body(bb: Body, args: list[str], acc: str) -> str:
        return add(bb, [acc, mul(bb, args, d, out.dtype, {})], d, out.dtype, {})

    return ex.generic(out, inputs, body, rank=r + 1, reduced=[r], init=init, loc=loc)


def _constant(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    return ex.emit(f"arith.constant {format_dense(op.attrs['value'])} {loc}".rstrip())


def _iota(ex: _Exporter, op: Op, xs: list[str], loc: str) -> str:
    out, dim = op.result.type, int(op.attrs["dimension"])

    def body(b: Body, args: list[str], acc: str) -> str:
        index = b.emit(f"linalg.index {dim} : index")
        as_int = DType.i32 if out.dtype is DType.i32 else DType.i64
        value = b.emit(f"arith.index_cast {index} : index to {as_int}")
        return b.emit(f"arith.sitofp {value} : {as_int} to {out.dtype}") if out.dtype.is_float else value

    return ex.generic(out, [], body, loc=loc)


EXPORT_RULES: dict[Primitive, OpRule] = {
    **{p: _elementwise for p in SCALAR_OPS},
    **{p: _reduce for p in COMBINERS},
    mv.broadcast: _broadcast,
    mv.transpose: _transpose,
    mv.reshape: _reshape,
    mv.slice_: _slice,
    mv.update_slice: _update_slice,
    mv.pad: _pad,
    mv.concatenate: _concatenate,
    ct.matmul: _matmul,
    src.constant: _constant,
    src.iota: _iota,
}


def missing_rules() -> list[str]:
    """Names of registered primitives that have no export rule (the registry test wants none)."""
    return sorted(name for name, p in REGISTRY.items() if p not in EXPORT_RULES)


def export_function(func: Function) -> str:
    """One ``func.func`` in upstream dialects (no module wrapper)."""
    if BUFFERIZED in func.attrs:
        raise DSLError("MLIR export takes a tensor stage (e.g. 'optimized'), not the bufferized one")
    ex = _Exporter()
    params = []
    for i, v in enumerate(func.params):
        ex.names[v] = f"%arg{i}"
        params.append(f"%arg{i}: {v.type}")
    for op in func.ops:
        rule = EXPORT_RULES.get(op.prim)
        if rule is None:
            raise DSLError(f"{op.loc}: no MLIR export rule for primitive '{op.prim.name}'")
        ex.names[op.result] = rule(ex, op, [ex.names[v] for v in op.operands], format_loc(op.loc))
    rtypes = [str(v.type) for v in func.results]
    sig = "" if not rtypes else " -> " + (rtypes[0] if len(rtypes) == 1 else f"({', '.join(rtypes)})")
    ret = "return"
    if func.results:
        ret += f" {', '.join(ex.names[v] for v in func.results)} : {', '.join(rtypes)}"
    lines = [f"func.func {format_symbol(func.name)}({', '.join(params)}){sig} {{"]
    lines += [f"  {line}" for line in ex.lines + [ret]]
    return "\n".join(lines + ["}"])


def export_module(funcs: Sequence[Function]) -> str:
    """A ``module`` holding every function, as text ``mlir-opt`` reads."""
    body = "\n".join("  " + line for f in funcs for line in export_function(f).splitlines())
    return "module {\n" + body + "\n}\n"


# How the tests and benchmarks/bench_memory.py let MLIR bufferize an export: function boundaries
# included, identity layouts at the boundary (our arguments and results are C-contiguous arrays).
ONE_SHOT_BUFFERIZE = (
    "--one-shot-bufferize=bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
)
# The same after MLIR's own elementwise fusion, the fairer comparison with our fused kernels.
FUSE_THEN_BUFFERIZE = (
    "--linalg-fuse-elementwise-ops",
    "--canonicalize",
    "--cse",
    "--eliminate-empty-tensors",
    ONE_SHOT_BUFFERIZE,
)
_ALLOC_RE = re.compile(r"memref\.alloc\(\)(?: \{[^}]*\})? : memref<((?:\d+x)*)(\w+)>")
_ELEMENT_BYTES = {d.value: d.itemsize for d in DType}


def count_allocs(bufferized: str) -> tuple[int, int]:
    """``memref.alloc`` ops in bufferized MLIR text and the bytes they allocate (static shapes)."""
    count = total = 0
    for dims, element in _ALLOC_RE.findall(bufferized):
        size = 1
        for d in dims.split("x")[:-1]:
            size *= int(d)
        count += 1
        total += size * _ELEMENT_BYTES[element]
    return count, total
