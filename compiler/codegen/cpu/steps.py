"""The CPU driver of a big program: its kernel calls as rows of a table, run by one native loop.

Numba's compile of the one-function driver (``compiler/codegen/cpu/__init__.py``) grows faster than
the program: each kernel call is ~25 ms of typing, lowering and LLVM work, LLVM's passes and
instruction selection are superlinear in the size of one function, and the CPython wrapper that
unboxes the driver's array parameters is quadratic in their number (200 arrays: 13 s for a driver
of one line). A 100-layer MLP's gradient, 900 kernel calls and 201 arrays, took 26 s to compile
its driver (benchmarks/results/compile_scaling.md). So above ``TABLE_STEPS`` kernel calls or
``TABLE_ARRAYS`` arrays the driver is two functions whose compile does not grow with the program:

- ``run_steps(kernel_table, bases, steps, operands, lo, hi)``, ``njit``: runs rows ``lo:hi`` of the
  step table. A row is a kernel call: its form (the kernel's signature; all kernels of one
  signature share one call site), its table slot, its first operand row, and the slots it is passed
  (a chunk function, ``parallel_for``). An operand row is a buffer: the index of its base address
  in ``bases`` (the arena, a result, an argument, a per-call buffer, a module constant), its byte
  offset from there and its shape; the call site views it with ``array_at``. A parallel kernel the
  driver runs directly (``Kernel.direct``) is one form for all: the frame of its operands' addresses
  (its scratch among them: views of the arena, ``Kernel.scratch``), then ``parallel_for``. The
  sanitizer's poison is one form per dtype. What fits no form (a row-block region, whose driver
  lines the regions pass writes) is a form of its own holding those lines, with views of the
  buffers they name.
- ``run(arena, kernel_table, outs..., args...)``, plain Python, the driver the executable calls
  (``runtime/executable.py``), with the one-function driver's parameters and results: it takes the
  data addresses of the arrays (``runtime.step_table.data_addresses``), runs the native loop, calls
  the NumPy kernels (``numba.objmode`` ones in the one-function driver) in Python between its
  ranges of steps, and returns the results.

The cost: per call, ~0.5 us of Python per array for its address; per step, a few loads and a
compare more than a straight-line call. Small programs keep the one-function driver.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from compiler.codegen.common import Placement, allocations, poison_value, returned
from compiler.ir.core import Function, Value
from compiler.kernel.cpu.parallel import PARALLEL_FOR_TEXT
from compiler.kernel.cpu.records import Kernel, jit_decorator
from compiler.kernel.emit import indent, literal, np_type, shape_literal
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.plan import BufferRow, MemoryPlan
from runtime.intrinsics import FLAT, signature_string

# A program with more kernel calls or arrays (results and arguments) than these gets the table
# driver. Measured on the 2-core CI machine (benchmarks/compile_scaling.py): the one-function
# driver compiles in ~25 ms per call and ~10-60 ms per array (quadratic), the table driver in
# ~0.5 s plus ~30 ms per distinct kernel signature, so the table pays from ~40 calls; the six suite
# programs (at most 36 calls and 19 arrays) keep the one-function driver and its generated code.
TABLE_STEPS = 64
TABLE_ARRAYS = 32

NATIVE = "run_steps"
STEPS = "step_rows"  # the module constants holding the tables
OPERANDS = "operand_rows"
VIEW = "view"  # runtime.intrinsics.buffer_view_python, as the Python driver binds it
ENTRY, TABLE = "run", "kernel_table"  # the driver and its kernel table, named as the one-function one

Signature = list[tuple[str, int | None]]


def table_driven(n_steps: int, n_arrays: int) -> bool:
    """Whether a program with ``n_steps`` kernel calls and ``n_arrays`` results and arguments gets
    the table driver (the module docstring)."""
    return n_steps > TABLE_STEPS or n_arrays > TABLE_ARRAYS


@dataclass(frozen=True)
class Operand:
    """A buffer as the table driver sees it: ``offset`` bytes from base address ``base`` (an index
    of ``bases``), of ``shape`` and ``dtype`` (generated code's spelling, ``np.float32``)."""

    base: int
    offset: int
    shape: tuple[int, ...]
    dtype: str


@dataclass
class TableDriver:
    source: str  # ``run_steps`` and ``run``
    constants: dict[str, np.ndarray]  # the step and operand tables
    signature: Signature  # run_steps's argument types, for compiling it ahead
    lines: int  # of run_steps: its compile weight


class _Builder:
    """Collects the step rows, operand rows and the native loop's forms (the module docstring)."""

    def __init__(self, operands: dict[str, Operand]) -> None:
        self.operands = operands
        self.rows: list[list[int]] = []
        self.operand_rows: list[list[int]] = []
        self.forms: dict[object, tuple[int, list[str]]] = {}  # key -> (form number, its lines)
        self.frame = 0  # the largest frame a direct kernel needs

    def form(self, key: object, lines: list[str]) -> int:
        if key not in self.forms:
            self.forms[key] = (len(self.forms), lines)
        return self.forms[key][0]

    def add_operands(self, operands: list[Operand]) -> int:
        first = len(self.operand_rows)
        self.operand_rows += [[op.base, op.offset, *op.shape] for op in operands]
        return first

    def plain(self, kernel: Kernel, slot: int, callees: list[int]) -> bool:
        """A kernel called with its buffers and table slots: a row of its signature's form."""
        assert kernel.signature is not None
        signature = kernel.signature[: len(kernel.args)]
        if len(signature) != len(kernel.args) or any(a not in self.operands for a in kernel.args):
            return False
        ranks = [1 if ndim == FLAT else ndim for _, ndim in signature]  # a FLAT array: its 1-D view
        if any(rank is None for rank in ranks):
            return False
        operands = [self.operands[a] for a in kernel.args]
        flat = [_flat(op) if ndim == FLAT else op for op, (_, ndim) in zip(operands, signature)]
        text = signature_string(kernel.signature)
        views = [_view("r", k, rank, dtype) for k, ((dtype, _), rank) in enumerate(zip(signature, ranks))]
        callees_text = [f"kernel_table[steps[s, {3 + k}]]" for k in range(len(callees))]
        call = ", ".join(["kernel_table[steps[s, 1]]", f'"{text}"', *views, *callees_text])
        lines = ["r = steps[s, 2]", f"call_kernel({call})"]
        form = self.form(("plain", text, len(callees)), lines)
        self.rows.append([form, slot, self.add_operands(flat), *callees])
        return True

    def direct(self, kernel: Kernel, run_chunks: int, chunk: int) -> bool:
        """A parallel kernel the driver runs itself: its frame (its operands' addresses, its scratch
        among them) and ``parallel_for``; one form for every such kernel."""
        if any(a not in self.operands for a in kernel.args) or kernel.direct is None:
            return False
        frame = [self.operands[a] for a in kernel.args]
        self.frame = max(self.frame, len(frame))
        lines = [
            "r = steps[s, 4]",
            "for k in range(steps[s, 5]):",
            "    frame[k] = bases[operands[r + k, 0]] + np.uint64(operands[r + k, 1])",
            f'call_kernel(kernel_table[steps[s, 1]], "{PARALLEL_FOR_TEXT}", kernel_table[steps[s, 2]], '
            "steps[s, 3], frame)",
        ]
        form = self.form("direct", lines)
        chunks = int(kernel.direct)
        self.rows.append([form, run_chunks, chunk, chunks, self.add_operands(frame), len(frame)])
        return True

    def poison(self, row: BufferRow) -> None:
        """The sanitizer's poison of a dead arena buffer: one form per dtype."""
        dtype = row.value.type.dtype
        view = f"array_at(bases[0] + np.uint64(steps[s, 1]), (steps[s, 2],), {np_type(dtype)})"
        form = self.form(("poison", dtype), [f"{view}[:] = {literal(poison_value(dtype), dtype)}"])
        self.rows.append([form, row.offset, row.bytes // dtype.np.itemsize])

    def explicit(self, lines: list[str]) -> None:
        """Lines of the one-function driver as a form of their own, after views of the buffers
        they name."""
        named = sorted(_identifiers(lines) & self.operands.keys())
        views = [f"{name} = {_literal_view(self.operands[name])}" for name in named]
        self.rows.append([self.form(("explicit", len(self.forms)), [*views, *lines])])


def _flat(op: Operand) -> Operand:
    return Operand(op.base, op.offset, (math.prod(op.shape),), op.dtype)


def _dtype(name: str) -> str:
    return "np.bool_" if name == "bool" else f"np.{name}"


def _view(row: str, k: int, ndim: int | None, dtype: str) -> str:
    """``array_at`` of operand row ``row + k`` with ``ndim`` extents."""
    at = f"{row} + {k}" if k else row
    assert ndim is not None
    shape = ", ".join(f"operands[{at}, {2 + d}]" for d in range(ndim)) + ("," if ndim == 1 else "")
    address = f"bases[operands[{at}, 0]] + np.uint64(operands[{at}, 1])"
    return f"array_at({address}, ({shape}), {_dtype(dtype)})"


def _literal_view(op: Operand) -> str:
    return f"array_at(bases[{op.base}] + np.uint64({op.offset}), {shape_literal(op.shape)}, {op.dtype})"


def _identifiers(lines: list[str]) -> set[str]:
    """The names the driver lines ``lines`` read (parsed, not matched as text)."""
    tree = ast.parse("\n".join(lines))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def table_driver(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    kernels: dict[Group, Kernel],
    names: dict[Value, str],
    outs: list[Value],
    slots: list[tuple[str, Signature]],
    constants: dict[str, np.ndarray],
    poison: dict[Group, list[BufferRow]] | None = None,
    hoist: dict[Group, list[Group]] | None = None,
) -> TableDriver:
    """The table driver of a program (the module docstring); the arguments are the one-function
    driver's, with the module's ``constants`` (kernels may take them as arguments)."""
    arg_names = [names[p] for p in func.params]
    allocated = allocations(func, fusion, plan, outs, hoist)
    fresh = [p for ps in allocated.values() for p in ps if p.kind == "fresh"]
    bases = ["arena", *(names[v] for v in outs), *arg_names, *(names[p.value] for p in fresh), *constants]
    base_of = {name: i for i, name in enumerate(bases)}
    operands: dict[str, Operand] = {}
    for v in [*outs, *func.params]:
        operands[names[v]] = Operand(base_of[names[v]], 0, v.type.shape, np_type(v.type.dtype))
    for p in (p for ps in allocated.values() for p in ps):
        operands[names[p.value]] = _placed(p, arg_names, base_of, names)
    for name, array in constants.items():
        operands[name] = Operand(base_of[name], 0, array.shape, _dtype(array.dtype.name))
    for s in (s for kernel in kernels.values() for s in kernel.scratch):  # (the ``scratch`` pass's)
        operands[s.name] = Operand(0, s.offset, s.shape, np_type(s.dtype))
    build = _Builder(operands)
    slot_index = {(name, tuple(signature)): i for i, (name, signature) in enumerate(slots)}
    python: list[tuple[int, str]] = []  # (the step it runs before, a line of the Python driver)
    for group in fusion.groups:
        kernel = kernels.get(group)
        if kernel is not None and kernel.objmode:  # a NumPy kernel: called from the Python driver
            args = [_python_view(operands[a], bases) if a in operands else a for a in kernel.args]
            python.append((len(build.rows), f"{kernel.name}({', '.join(args)})"))
        elif kernel is not None and kernel.direct is not None:
            chunk, run_chunks = (slot_index[n, tuple(sig)] for n, sig in kernel.calls)
            if not build.direct(kernel, run_chunks, chunk):
                raise AssertionError(f"{kernel.name}: a direct kernel the table cannot describe")
        elif kernel is not None:
            assert kernel.signature is not None
            slot = slot_index[kernel.name, tuple(kernel.signature)]
            callees = [slot_index[callee, tuple(sig)] for callee, sig in kernel.calls]
            if kernel.setup or kernel.teardown or not build.plain(kernel, slot, callees):
                call = [f"kernel_table[{slot}]", f'"{signature_string(kernel.signature)}"', *kernel.args]
                call += [f"kernel_table[{c}]" for c in callees]
                build.explicit([*kernel.setup, f"call_kernel({', '.join(call)})", *kernel.teardown])
        for row in (poison or {}).get(group, []):
            build.poison(row)
    native = _native(build)
    results = [_result(names[v], operands, bases) + (".copy()" if copy else "") for v, copy in returned(func)]
    params = ["arena", TABLE, *(names[v] for v in outs), *arg_names]
    driver = _python_driver(params, bases, fresh, names, python, len(build.rows), results)
    width = max((len(r) for r in build.rows), default=1)
    steps = np.zeros((len(build.rows), width), np.int64)
    for i, r in enumerate(build.rows):
        steps[i, : len(r)] = r
    depth = max((len(r) for r in build.operand_rows), default=2)
    operand_rows = np.zeros((max(len(build.operand_rows), 1), depth), np.int64)
    for i, r in enumerate(build.operand_rows):
        operand_rows[i, : len(r)] = r
    signature: Signature = [("uint64", 1), ("uint64", 1), ("int64", 2), ("int64", 2), ("int64", None)]
    signature.append(("int64", None))
    return TableDriver(
        source=native + "\n\n\n" + driver,
        constants={STEPS: steps, OPERANDS: operand_rows},
        signature=signature,
        lines=native.count("\n"),
    )


def _placed(p: Placement, arg_names: list[str], base_of: dict[str, int], names: dict[Value, str]) -> Operand:
    """The operand of a stored value's buffer, from where the driver skeleton places it."""
    t = p.value.type
    dtype = np_type(t.dtype)
    if p.kind in ("argument", "donated"):  # the caller's array (a donated one from its first byte)
        return Operand(base_of[arg_names[p.param]], 0, t.shape, dtype)
    if p.kind == "result":  # in a caller-allocated result's memory (its in-place chain)
        assert p.result is not None
        return Operand(base_of[names[p.result]], 0, t.shape, dtype)
    if p.kind == "fresh":
        return Operand(base_of[names[p.value]], 0, t.shape, dtype)
    if p.nbytes is not None:  # a row-block region's own buffer: its threads' blocks
        return Operand(0, p.offset, (p.nbytes // t.dtype.np.itemsize,), dtype)
    return Operand(0, p.offset, t.shape, dtype)


def _python_view(op: Operand, bases: list[str]) -> str:
    return f"{VIEW}({bases[op.base]}, {op.offset}, {shape_literal(op.shape)}, {op.dtype})"


def _result(name: str, operands: dict[str, Operand], bases: list[str]) -> str:
    """A result as the Python driver returns it: the array itself, or its view of the arena."""
    op = operands.get(name)
    if op is None or (op.base != 0 and op.offset == 0):
        return bases[op.base] if op is not None else name
    return _python_view(op, bases)


def _native(build: _Builder) -> str:
    body = []
    if build.frame:
        body.append(f"frame = np.empty({build.frame}, np.uint64)")
    body += ["for s in range(lo, hi):", "    form = steps[s, 0]"]
    for number, lines in build.forms.values():
        body += [f"    {'if' if number == 0 else 'elif'} form == {number}:", *indent(lines, 2)]
    body.append("return 0")
    header = [jit_decorator(), f"def {NATIVE}(kernel_table, bases, steps, operands, lo, hi):"]
    return "\n".join([*header, *indent(body, 1)])


def _python_driver(
    params: list[str],
    bases: list[str],
    fresh: list[Placement],
    names: dict[Value, str],
    python: list[tuple[int, str]],
    n_rows: int,
    results: list[str],
) -> str:
    """``run``: ``params`` are the one-function driver's; ``python`` the NumPy kernels' calls, each
    with the step it runs before."""
    body = [
        f"{names[p.value]} = np.empty({shape_literal(p.value.type.shape)}, {np_type(p.value.type.dtype)})"
        for p in fresh
    ]
    body.append(f"bases = data_addresses({', '.join(bases)})")
    start = 0
    for at, line in [*python, (n_rows, "")]:
        if at > start:
            body.append(f"{NATIVE}({params[1]}, bases, {STEPS}, {OPERANDS}, {start}, {at})")
        start = at
        if line:
            body.append(line)
    ret = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
    lines = [f"def {ENTRY}({', '.join(params)}):", *indent([*body, f"return {ret}"], 1)]
    lines.append(f"{ENTRY}.raises_midway = {bool(python)}  # NumPy kernels run between native steps")
    return "\n".join(lines)
