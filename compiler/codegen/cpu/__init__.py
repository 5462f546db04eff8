"""CPU code generation: one ``numba.njit`` kernel per fusion group and one ``njit`` driver.

The driver ``run(arena, kernel_table, o0, ..., a0, a1, ...)`` carves typed views of the uint8 arena
at the planned offsets, calls the kernels in order and returns the results as a tuple: a call enters
native code once. The caller allocates the results (they never alias the arena or the inputs) and
passes the kernel table: each kernel is called through its native address (``call_kernel``, slot
``CpuProgram.kernel_slots[i]``), so Numba compiles it once, alone, and never again into the driver.

Loop forms. A LOOP group is first written as one flat loop over the iteration space, reading its
same-shape inputs through 1-D views: LLVM vectorizes that best. If any read needs the
multi-dimensional index (a broadcast, transpose, slice, iota ...) the group is written as a loop
nest in storage order instead. Reductions iterate their operand in storage order and accumulate
into the output (into a local accumulator over the trailing reduced axes). Float matmuls are calls of
the runtime's ``gemm_rows`` (``runtime/blas.py``: BLAS gemm per batch element and row block), each
operand a strided view of its buffer (``fuse.operand_view``) described by a constant array of the
module; integer matmuls are explicit i-k-j loops over the same views.

0-d values are 0-d Numba arrays, read and written as ``x[()]``; a flat loop reshapes them to
``(1,)``. Groups of at least ``PARALLEL_MIN_ELEMENTS`` elements get a ``numba.prange`` outer loop;
below that, threading costs more than it saves. Such a kernel is then split into a chunk function
and a plain kernel that runs the chunks through ``runtime.parallel.parallel_for``
(``_runtime_parallel``), so Numba's parallel lowering is not repeated for every kernel.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.codegen.common import (
    Level,
    Placement,
    allocations,
    body_lines,
    carry_swaps,
    initial_copies,
    poison_value,
    program_facts,
    returned,
    shape_literal,
)
from compiler.codegen.cpu.steps import NATIVE, table_driven, table_driver
from compiler.compilation import Options
from compiler.ir.core import Function, Value
from compiler.ir.types import TensorType
from compiler.kernel import arraylevel
from compiler.kernel.cpu.build import CpuKernels, build_kernels, form_regions, plan_scratch
from compiler.kernel.cpu.matmul import split_matmuls
from compiler.kernel.cpu.parallel import PARALLEL_FOR, PARALLEL_FOR_TEXT
from compiler.kernel.cpu.records import CpuSchedule, Kernel, jit_decorator, numba_threads
from compiler.kernel.emit import indent, literal, np_type
from compiler.passes.fuse import FusionPlan, Group
from compiler.passes.loops import Body, Loop
from compiler.passes.plan import MemoryPlan
from compiler.prims import control, exactmath, random, vecmath
from compiler.prims.elementwise import SCALAR_HELPERS
from runtime import blas
from runtime.intrinsics import signature_string

__all__ = ["CpuProgram", "Kernel", "generate_cpu", "jit_decorator", "numba_threads"]

ENTRY = "run"
SlotIndex = dict[tuple[str, tuple[tuple[str, int | None], ...]], int]  # a kernel table slot's index
TABLE = "kernel_table"  # the driver's parameter holding its kernels' addresses
# The driver's compile-time weight per line of its source (``kernel_weights`` are source lengths,
# ``runtime.precompile``): the second derivative's driver, 64 lines, compiles in 0.7 s, like a
# kernel of 2,000 characters.
DRIVER_WEIGHT_PER_LINE = 32


@dataclass
class CpuProgram:
    source: str
    constants: dict[str, np.ndarray]
    entry: str
    n_results: int
    writeback: tuple[int, ...]
    arena_bytes: int
    direct_writeback: tuple[int, ...]  # arguments the driver writes their new value into directly
    result_types: list[TensorType]
    out_types: list[TensorType]  # results the caller allocates and passes in, in driver order
    # The memory plan the code follows: the planner's, with the arena slots of row-block regions'
    # own buffers resized to one block per thread (``plan.resize_slots``).
    plan: MemoryPlan
    # The driver's kernel table, slot by slot: a jitted kernel and the argument types it is called
    # with, (dtype, ndim) of a C-contiguous array per argument; and each kernel's source length.
    # runtime/precompile.py compiles them ahead and fills the table with their addresses.
    kernel_slots: list[tuple[str, list[tuple[str, int | None]]]] = field(default_factory=list)
    kernel_weights: dict[str, int] = field(default_factory=dict)
    # The driver's argument types (arena, kernel table, results, inputs), so that it can be compiled
    # ahead beside the kernels; its weight is in kernel_weights. A big program's driver is plain
    # Python around a native loop over a table of steps (``steps.py``): then ``compiled_entry``
    # names that loop and these are its argument types.
    entry_signature: list[tuple[str, int | None]] = field(default_factory=list)
    compiled_entry: str = ENTRY
    # Arguments the driver writes into: direct write-backs, and those whose memory holds a mutated
    # or donated argument's intermediate values (``plan.in_param``): snapshotted where it may raise.
    args_written: tuple[int, ...] = ()


def generate_cpu(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    options: Options | None = None,
    kernels: CpuKernels | None = None,
    loops: dict[Group, Loop] | None = None,
) -> CpuProgram:
    """The module of a program planned for the CPU: its kernels (the ``kernels``, ``regions`` and
    ``scratch`` passes' ``CpuKernels``, built here when not given) printed with the prelude and the
    driver. ``plan``: the memory plan the kernels follow (the ``scratch`` pass's); ``options``: the
    pipeline's (its ``CpuSchedule`` fields choose the prelude's helpers too); ``loops``: the
    ``loops`` pass's compiled bodies, whose kernels the module holds too and whose drivers' statements
    the driver runs inside its loops."""
    options = options or Options()
    sanitize, schedule = options.sanitize, CpuSchedule.of(options)
    if kernels is None:
        kernels, plan = form_regions(func, fusion, plan, build_kernels(func, fusion, plan, options), options)
        kernels, plan = plan_scratch(func, fusion, plan, kernels, options)
    top = Level(func, fusion, plan, kernels, loops or {}, sanitize)
    levels = top.levels()
    every = [k for level in levels for k in [*level.kernels.absorbed, *level.kernels.kernels.values()]]
    by_group = kernels.kernels
    outs = top.outs
    slots, weights = _kernel_slots(every)
    constants, compiled_entry = (
        {n: a for level in levels for n, a in level.kernels.pool.arrays.items()},
        ENTRY,
    )
    if len(levels) == 1 and table_driven(len(by_group), len(outs) + len(func.params)):
        names, hoist = kernels.names, kernels.hoist
        table = table_driver(func, fusion, plan, by_group, names, outs, slots, constants, top.poison, hoist)
        driver, entry_signature, compiled_entry = table.source, table.signature, NATIVE
        weights[NATIVE] = DRIVER_WEIGHT_PER_LINE * table.lines
        constants.update(table.constants)
    else:
        driver = _driver(top, levels, slots)
        weights[ENTRY] = DRIVER_WEIGHT_PER_LINE * driver.count("\n")
        entry_signature = [("uint8", 1), ("uint64", 1)]
        entry_signature += [(v.type.dtype.np.name, len(v.type.shape)) for v in [*outs, *func.params]]
    texts = dict.fromkeys(k.text for k in every if k.text)
    helpers = set().union(*(level.kernels.pool.helpers for level in levels))
    prelude = _prelude(constants, every, helpers, schedule, compiled_entry == NATIVE)
    return CpuProgram(
        source="\n\n".join([prelude, *texts, driver]) + "\n",
        constants=constants,
        entry=ENTRY,
        **program_facts(func, plan, outs),
        args_written=tuple(sorted({*plan.direct_writeback.values(), *plan.in_param.values()})),
        kernel_slots=slots,
        kernel_weights=weights,
        entry_signature=entry_signature,
        compiled_entry=compiled_entry,
        plan=plan,
    )


def _slot(kernel: Kernel) -> tuple[str, list[tuple[str, int | None]]]:
    assert kernel.signature is not None, kernel.name
    return kernel.name, kernel.signature


def _kernel_slots(
    kernels: Iterable[Kernel],
) -> tuple[list[tuple[str, list[tuple[str, int | None]]]], dict[str, int]]:
    """The kernel table's slots: each jitted kernel with each distinct signature it is called with (a
    shared kernel may be called with buffers of other dtypes), in order of first call; and the
    length of each kernel's source (a runtime function, ``gemm_rows``, has none)."""
    slots: list[tuple[str, list[tuple[str, int | None]]]] = []
    weights: dict[str, int] = {}
    for kernel in kernels:
        if kernel.objmode:
            continue
        for slot in [*([] if kernel.direct else [_slot(kernel)]), *kernel.calls]:
            if slot not in slots:
                slots.append(slot)
        if kernel.text:  # the one that defines a shared kernel (its callers have no text)
            # a parallel kernel's chunk function first (its whole text if the driver runs it)
            chunk_at = len(kernel.text)
            if not kernel.direct:
                chunk_at = kernel.text.find("\n\n\n") + 1
                weights[kernel.name] = len(kernel.text) - chunk_at
            callees = [
                name for name, _ in kernel.calls if name != PARALLEL_FOR and name not in blas.GEMM_ROWS
            ]
            for name in callees:  # (a region's members' chunk functions are weighed by their own text)
                weights.setdefault(name, chunk_at)
    return slots, weights


def runtime_fingerprint() -> str:
    """A hash of the runtime modules generated code calls into (intrinsics, BLAS bindings): part of
    every module's text, so a module compiled against other runtime code gets another name (the
    module cache's content hash) and Numba never loads code whose pickled references to the runtime
    no longer resolve."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import runtime.intrinsics
        import runtime.mkl
        import runtime.parallel

        h = hashlib.sha256()
        for mod in (runtime.intrinsics, blas, runtime.mkl, runtime.parallel):
            h.update(Path(str(mod.__file__)).read_bytes())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


_FINGERPRINT: str | None = None


def _prelude(
    constants: dict[str, np.ndarray],
    kernels: Iterable[Kernel],
    helpers: set[str],
    schedule: CpuSchedule,
    table: bool = False,
) -> str:
    """The module's imports and bindings; ``helpers``: the scalar helpers its kernels call (their
    ``ConstantPool.helpers``); ``table``: for the table driver (``steps.py``) too."""
    lines = [
        '"""Generated by dslc. Do not edit: regenerated from the IR."""',
        f"# runtime code {runtime_fingerprint()}",
        "",
        "import numba",
        "import numpy as np",
        "",
        "from runtime.intrinsics import math_module",
        "",
        "math = math_module()",
        *(f"{name} = {spelling['cpu']}" for name, spelling in SCALAR_HELPERS.items() if spelling["cpu"]),
    ]
    kernels = list(kernels)
    used = helpers & set(vecmath.HELPERS)
    if not schedule.vector_math:  # the plain libm spellings
        lines += [f"{name} = math.{name.removesuffix('_f32')}" for name in vecmath.F32_MATH if name in used]
        used -= set(vecmath.F32_MATH)
    if used:
        if vecmath.with_callees(used) & vecmath.FMA:
            lines += _fma_binding(schedule)
        lines += ["", "", vecmath.helper_source(used)]
    exact = helpers & (set(exactmath.HELPERS) | set(exactmath.BINDINGS["cpu"]))
    if exact:  # log1p and float products: the text CUDA compiles too (the same bits)
        lines += ["", "import operator", "", exactmath.helper_source("cpu", exact)]
    if random.HELPER in helpers:  # random_bits' Threefry
        lines += ["", "", random.helper_source("cpu")]
    if any(name in blas.GEMM_ROWS for k in kernels for name in [k.name, *(c for c, _ in k.calls)]):
        library = blas.vendor() if split_matmuls(schedule) else "openblas"  # MKL runs sequential: split only
        chosen = "" if library == "openblas" else f'"{library}"'
        lines += ["", "from runtime.blas import gemm_rows_functions, single_threaded_blas", ""]
        lines.append(f"{', '.join(blas.GEMM_ROWS)} = gemm_rows_functions({chosen})")
        if split_matmuls(schedule) and library == "openblas":
            lines.append("single_threaded_blas()")
    lines += ["", "from runtime.intrinsics import buffer_view_function, call_kernel_function", ""]
    lines += ["buffer_view = buffer_view_function()", "call_kernel = call_kernel_function()"]
    lines += ["from runtime.intrinsics import copy_flat"]
    if table:
        lines += ["from runtime.intrinsics import buffer_view_python as view"]
        lines += ["from runtime.step_table import data_addresses"]
    if table or any(k.calls for k in kernels):
        lines += ["", "from runtime.intrinsics import frame_functions"]
        lines += ["from runtime.parallel import parallel_for_function", ""]
        lines += ["array_at, keep_alive, fill_frame = frame_functions()"]
        lines.append(f"{PARALLEL_FOR} = parallel_for_function()")
    if any(k.objmode for k in kernels):
        lines += ["", arraylevel.PRELUDE]
    if constants:
        # The runtime saves the constants beside this file (same name, .npz); Numba freezes them.
        lines += ["", 'with np.load(__file__[:-3] + ".npz") as _constants:']
        lines += [f'    {name} = _constants["{name}"]' for name in constants]
    return "\n".join(lines)


def _fma_binding(schedule: CpuSchedule) -> list[str]:
    """What the helpers' ``fma(a, b, c)`` is: the contracting multiply-add (``runtime/intrinsics.py``),
    or with ``fused_multiply_add`` off a plain multiply and add."""
    if schedule.fused_multiply_add:
        return ["", "from runtime.intrinsics import fmuladd_function", "", "fma = fmuladd_function()"]
    return ["", "", '@numba.njit(inline="always")', "def fma(a, b, c):", "    return a * b + c"]


def _allocation(p: Placement, params: list[str], base: int = 0, names: dict[Value, str] | None = None) -> str:
    t = p.value.type
    if p.kind == "result":  # in a caller-allocated result's memory (its in-place chain)
        assert names is not None and p.result is not None
        return f"buffer_view({names[p.result]}, 0, {shape_literal(t.shape)}, {np_type(t.dtype)})"
    if p.kind == "argument":  # the new value of an argument, stored into the caller's array
        return params[p.param]
    if p.kind == "donated":  # lives in a donated argument's memory
        return f"buffer_view({params[p.param]}, 0, {shape_literal(t.shape)}, {np_type(t.dtype)})"
    if p.kind == "fresh":  # a function result (fresh per call) or a zero-size value
        return f"np.empty({shape_literal(t.shape)}, {np_type(t.dtype)})"
    if p.nbytes is not None:  # a row-block region's own buffer: its threads' blocks (the region's frames)
        return (
            f"buffer_view(arena, {base + p.offset}, ({p.nbytes // t.dtype.np.itemsize},), {np_type(t.dtype)})"
        )
    return f"buffer_view(arena, {base + p.offset}, {shape_literal(t.shape)}, {np_type(t.dtype)})"


def _driver(top: Level, levels: list[Level], slots: list[tuple[str, list[tuple[str, int | None]]]]) -> str:
    func, names = top.func, top.kernels.names
    arg_names = [names[p] for p in func.params]
    params = ["arena", TABLE, *(names[v] for v in top.outs), *arg_names]
    slot_index = {(name, tuple(signature)): i for i, (name, signature) in enumerate(slots)}
    body = _statements(top, slot_index, 0)
    results = [names[v] + (".copy()" if copy else "") for v, copy in returned(func)]
    ret = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
    every = [k for level in levels for k in level.kernels.kernels.values()]
    objmode = any(k.objmode for k in every)  # object mode holds the GIL anyway
    header = [jit_decorator(nogil=not objmode), f"def {ENTRY}({', '.join(params)}):"]
    frames = [len(k.args) for k in every if k.direct is not None]
    if frames:  # one frame for every kernel the driver runs directly (one at a time)
        body.insert(0, f"frame = np.empty({max(frames)}, np.uint64)")
    if objmode:
        # Numba reuses what one object-mode block set up in the blocks after it, which LLVM refuses
        # when the first is in a loop or branch ("Instruction does not dominate all uses", numba
        # issue 9574): an empty block at the entry sets it up where it dominates every other
        body[:0] = ["with numba.objmode():", "    pass"]
    lines = [*header, *indent([*body, f"return {ret}"], 1)]
    return "\n".join(lines)


def _statements(level: Level, slot_index: SlotIndex, base: int) -> list[str]:
    """The driver's statements of one program (the function's, or a loop body's, whose arena starts at
    byte ``base`` of the arena): buffers, kernel calls, poison, loops."""
    func, fusion, plan, program = level.func, level.fusion, level.plan, level.kernels
    names, kernels, hoist = program.names, program.kernels, program.hoist
    arg_names = [names[p] for p in func.params]
    body = []
    allocated = allocations(func, fusion, plan, level.outs, hoist)
    poison = level.poison
    for group in fusion.groups:
        placed = allocated.get(group, [])
        body += [f"{names[p.value]} = {_allocation(p, arg_names, base, names)}" for p in placed]
        kernel = kernels.get(group)
        body += _scratch_views(kernel, base)
        if group in level.loops:
            body += _loop(level, level.loops[group], slot_index, base)
        elif kernel is not None and kernel.objmode:
            body += ["with numba.objmode():", f"    {kernel.name}({', '.join(kernel.args)})"]
        elif kernel is not None and kernel.direct is not None:
            chunk, run_chunks = (f"{TABLE}[{slot_index[n, tuple(sig)]}]" for n, sig in kernel.calls)
            body.append(f"fill_frame(frame, {', '.join(kernel.args)})")
            call = [run_chunks, f'"{PARALLEL_FOR_TEXT}"', chunk, kernel.direct, "frame"]
            body.append(f"call_kernel({', '.join(call)})  # {kernel.name}")
        elif kernel is not None:
            name, signature = _slot(kernel)
            index = slot_index[name, tuple(signature)]
            call = [f"{TABLE}[{index}]", f'"{signature_string(signature)}"', *kernel.args]
            call += [f"{TABLE}[{slot_index[callee, tuple(sig)]}]" for callee, sig in kernel.calls]
            body += [*kernel.setup, f"call_kernel({', '.join(call)})  # {kernel.name}", *kernel.teardown]
        for row in poison.get(group, []):
            dtype = row.value.type.dtype
            at = base + row.offset
            view = f"buffer_view(arena, {at}, ({row.bytes // dtype.np.itemsize},), {np_type(dtype)})"
            body.append(f"{view}[:] = {literal(poison_value(dtype), dtype)}")
    return body


def _scratch_views(kernel: Kernel | None, base: int) -> list[str]:
    """The views of the arena a kernel takes as its scratch, where the ``scratch`` pass placed them
    (``base``: where the arena of the kernel's program starts)."""
    if kernel is None:
        return []
    assert all(s.offset >= 0 for s in kernel.scratch), f"{kernel.name}: scratch not placed (the scratch pass)"
    return [
        f"{s.name} = buffer_view(arena, {base + s.offset}, {_shape(TensorType(s.shape, s.dtype))}, "
        f"{np_type(s.dtype)})"
        for s in kernel.scratch
    ]


def _copy(dst: str, src: str, t: TensorType) -> list[str]:
    """``dst``'s elements set to ``src``'s (C-contiguous arrays of type ``t``)."""
    if t.size == 0:
        return []
    if not t.shape:
        return [f"{dst}[()] = {src}[()]"]
    flat = f"({t.size},), {np_type(t.dtype)}"
    return [f"copy_flat(buffer_view({dst}, 0, {flat}), buffer_view({src}, 0, {flat}))"]


def _row(array: str, t: TensorType, at: str) -> str:
    """Row ``at`` (an expression) of the C-contiguous ``array`` of type ``t``, as a view."""
    row = TensorType(t.shape[1:], t.dtype)
    return f"buffer_view({array}, {at} * {row.nbytes}, {_shape(row)}, {np_type(t.dtype)})"


def _shape(t: TensorType) -> str:
    return shape_literal(t.shape) if t.shape else "()"


def _loop(outer: Level, loop: Loop, slot_index: SlotIndex, base: int) -> list[str]:
    """A loop or branch: its carries initialized, then its bodies' statements in a native loop, each
    body's parameters and results bound to the loop's buffers (``passes/loops.py``). ``base``: where
    the arena of the program holding the loop starts."""
    op, names = loop.op, outer.kernels.names
    scope = loop.bodies[0].func.attrs["dsl.scope"]
    lines = [
        line
        for carry, init in initial_copies(outer, loop)
        for line in _copy(names[carry], names[init], carry.type)
    ]
    # a carry with a temporary alternates between its buffer and the temporary (``swaps``): the body
    # reads ``cur`` and its kernels write ``nxt``, then the names swap; no copy per iteration
    swaps, flip = carry_swaps(loop, scope), f"{scope}f"
    for j, offset in loop.temps.items():
        t = loop.carries[j].type
        lines.append(f"{swaps[j][1]} = buffer_view(arena, {base + offset}, {_shape(t)}, {np_type(t.dtype)})")
        lines.append(f"{swaps[j][0]} = {names[loop.carries[j]]}")
    if swaps:
        lines.append(f"{flip} = False")
    counter, pred, step = f"{scope}i", f"{scope}p", f"{scope}t"

    def buffer(v: Value | None, kind: str, j: int, temp: bool = False) -> str:
        """A body parameter's or result's buffer: the loop's (a row of a sequence; with ``temp``, the
        carry's temporary)."""
        if v is None:
            return counter if kind == "counter" else pred
        if kind in ("row", "y"):
            return _row(names[v], v.type, step)
        if kind == "carry" and j in swaps:
            return swaps[j][1] if temp else swaps[j][0]
        return names[v]

    def run(body: Body) -> list[str]:
        level = outer.body(body)
        copy = lambda dst, src, v: _copy(dst, src, v.type)  # noqa: E731
        bind, after = body_lines(loop, body, level.kernels.names, buffer, copy, swaps, flip)
        return bind + _statements(level, slot_index, base + loop.arena) + after

    def settle() -> list[str]:
        """After the loop: a carry whose last value is in its temporary is copied to its buffer."""
        copies = [
            line
            for j, (c, _) in swaps.items()
            for line in _copy(names[loop.carries[j]], c, loop.carries[j].type)
        ]
        return [f"if {flip}:", *indent(copies, 1)] if copies else []

    if op.prim is control.if_:
        then, else_ = loop.bodies
        return lines + [
            f"if {names[op.operands[0]]}[()]:",
            *indent(run(then), 1),
            "else:",
            *indent(run(else_), 1),
        ]
    if op.prim is control.while_loop:
        cond, body = loop.bodies
        lines.append(f"{pred} = np.empty((), np.bool_)")
        loop_lines = [*run(cond), f"if not {pred}[()]:", "    break", *run(body)]
        return lines + ["while True:", *indent(loop_lines, 1), *settle()]
    (body,) = loop.bodies
    if op.prim is control.for_loop:
        lo, hi = (names[v] for v in op.operands[:2])
        lines.append(f"{counter} = np.empty((), np.int64)")
        head = [f"for {step} in range({lo}[()], {hi}[()]):"]
        first = [f"{counter}[()] = {step}"]
    else:  # scan
        length = int(op.attrs["length"])
        it = f"{scope}s"
        head = [f"for {it} in range({length}):"]
        first = [f"{step} = {length - 1} - {it}" if op.attrs["reverse"] else f"{step} = {it}"]
    return lines + head + indent(first + run(body), 1) + settle()
