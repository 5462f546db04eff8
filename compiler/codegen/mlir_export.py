"""Export a tensor-level program to upstream MLIR: ``func``, ``arith``, ``math``, ``tensor``, ``linalg``.

The output is plain MLIR that ``mlir-opt`` parses and verifies without
``--allow-unregistered-dialect`` and that
``--one-shot-bufferize="bufferize-function-boundaries allow-return-allocs-from-loops"`` bufferizes,
so our programs can be compared with (or handed to) MLIR's own pipeline. The second option is for
loops (``fori_loop``, ``scan``, ``while_loop``): each iteration computes its carry into a new
tensor, which an ``scf.for``/``scf.while`` may yield only with it; a program without loops needs
only the first.

Each op is printed by its primitive's lowering (``Primitive.mlir``, written with
``compiler/prims/mlir.py``): most are a ``linalg.generic`` whose body is the element's math as
``arith``/``math`` ops, the rest ``tensor`` ops or named ``linalg`` ops; loops and branches become
``scf.for``/``scf.while``/``scf.if`` holding their regions' ops. The registry test fails for a
primitive without a lowering.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.printer import BUFFERIZED, format_loc, format_symbol
from compiler.ir.types import DType
from compiler.prims import REGISTRY
from runtime.errors import DSLError


class _Exporter:
    """Writes one function (a ``prims.mlir.Builder``); ``names`` maps each IR value to its SSA name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"%{self.counter - 1}"

    def ops(self, ops: Sequence[Op]) -> None:
        for op in ops:
            if op.prim.mlir is None:
                raise DSLError(f"{op.loc}: no MLIR lowering for primitive '{op.prim.name}'")
            name = op.prim.mlir(self, op, [self.names[v] for v in op.operands], format_loc(op.loc))
            several = len(op.results) > 1  # a region op's results: %n#0, %n#1, ...
            self.names.update((r, f"{name}#{i}" if several else name) for i, r in enumerate(op.results))

    def region(self, block: Block, args: Sequence[str]) -> tuple[list[str], list[str]]:
        """The lines of ``block`` with its arguments named ``args`` and its results' names (the region
        lowerings of compiler/prims/control.py wrap them in ``scf`` ops)."""
        outer, self.lines = self.lines, []
        self.names.update(zip(block.args, args, strict=True))
        self.ops(block.ops)
        lines, self.lines = self.lines, outer
        return lines, [self.names[v] for v in block.results]


def missing_rules() -> list[str]:
    """Names of registered primitives without an MLIR lowering (the registry test wants none)."""
    return sorted(name for name, p in REGISTRY.items() if p.mlir is None)


def export_function(func: Function) -> str:
    """One ``func.func`` in upstream dialects (no module wrapper)."""
    if BUFFERIZED in func.attrs:
        raise DSLError("MLIR export takes a tensor stage (e.g. 'optimized'), not the bufferized one")
    ex = _Exporter()
    params = []
    for i, v in enumerate(func.params):
        ex.names[v] = f"%arg{i}"
        params.append(f"%arg{i}: {v.type}")
    ex.ops(func.ops)
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
# included, identity layouts at the boundary (our arguments and results are C-contiguous arrays); a
# loop may yield a new buffer for a carry (our scf.for bodies compute each carry into a new tensor).
ONE_SHOT_BUFFERIZE = (
    "--one-shot-bufferize=bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
    " allow-return-allocs-from-loops"
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
