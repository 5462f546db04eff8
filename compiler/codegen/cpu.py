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

import bisect
import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path

import numba
import numpy as np

from compiler.codegen import arraylevel
from compiler.codegen.common import caller_allocated, poison_after, poison_value, py_name, shape_literal
from compiler.codegen.emit import (
    ROW,
    BodyBuilder,
    ConstantPool,
    indent,
    literal,
    loop_nest,
    mentions,
    np_type,
    subscript,
    typed,
)
from compiler.ir.core import Function, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.passes import rows
from compiler.passes.fuse import (
    MAX_VIEW_BATCH_AXES,
    Band,
    FusionPlan,
    Group,
    GroupKind,
    OperandView,
    accumulation,
    matmul_views,
)
from compiler.passes.plan import BufferRow, MemoryPlan, resize_slots
from compiler.prims import REDUCTIONS, vecmath
from compiler.prims.elementwise import SCALAR_HELPERS
from runtime import blas
from runtime.intrinsics import FLAT, signature_string
from runtime.parallel import CHUNK_SIGNATURE, PARALLEL_FOR_SIGNATURE

PARALLEL_MIN_ELEMENTS = 1 << 16
PARALLEL_MIN_FLOPS = 4_000_000  # a matmul below this runs on the calling thread (~40 us of BLAS)
MIN_BLOCK_ROWS = 16  # rows per gemm call when a matmul is split into row blocks
# Code-generation choices that only change speed; tests switch each off to check it against the
# plain form (``tests/test_perf_paths.py``):
# - "reassoc_sums": float sum reductions accumulate with ``fastmath={"reassoc"}`` so LLVM vectorizes
#   them (partial sums per vector lane: the result differs from serial order within rounding);
# - "chunked_numpy": NumPy-assisted kernels run in cache-sized chunks of rows (``arraylevel.py``).
#   (Spreading the chunks over a thread pool was tried: with BLAS and Numba threads on 2 cores it
#   made the MLP step 4x slower, so the NumPy kernels stay on the calling thread.)
# - "vector_math": float32 exp/tanh/log/logistic lower to the branch-free polynomials of
#   ``compiler/prims/vecmath.py``, which LLVM vectorizes (off: ``math.exp`` etc., one libm call per
#   element, and big groups holding one go to NumPy);
# - "split_matmuls": float matmuls call BLAS gemm per batch element and row block, spread over
#   Numba's threads, with SciPy's BLAS on one thread (``runtime/blas.py``; off: one gemm call per batch
#   element with BLAS's own threads);
# - "split_reductions": big reductions over axis 0 that keep other axes run in fixed chunks of axis 0
#   in parallel, into partial results combined in order (off: one serial loop nest);
# - "keyed_minmax": float max/min reductions reduce order-preserving integer keys (vectorized ``smax``;
#   ``vecmath.max_key_f32``) instead of a NaN-aware float compare-and-select loop or NumPy;
# - "row_fusion": consecutive loop and reduction kernels over the same rows run as one kernel, row
#   by row, with the values only they read kept one row per thread (``compiler/passes/rows.py``;
#   off: one kernel per group, every stored value a buffer);
# - "row_compute_once": inside such a band, a transcendental value that several members would each
#   recompute (softmax's ``exp(z - max)``, once for the row sum and once for the gradient) is computed
#   by the first and kept in the row scratch for the others (``rows._compute_once``; off: recomputed);
# - "shared_kernels": kernels equal up to their buffers' names are one function (an MLP's layers of
#   one shape, forward and backward), so Numba compiles each once (off: one function per kernel);
# - "runtime_parallel": a kernel with a parallel loop is a chunk function and a plain kernel that
#   runs it on Numba's threads through ``runtime.parallel.parallel_for`` (compiled once per machine),
#   so Numba's parallel lowering is not repeated per kernel (off: ``parallel=True`` kernels);
# - "fused_multiply_add": the polynomial steps of the "vector_math" helpers are multiply-adds LLVM
#   may fuse into one FMA instruction (``runtime/intrinsics.py``; off: a multiply and an add).
OPTIMIZATIONS = {
    "runtime_parallel",
    "fused_multiply_add",
    "row_compute_once",
    "row_fusion",
    "shared_kernels",
    "reassoc_sums",
    "chunked_numpy",
    "vector_math",
    "keyed_minmax",
    "split_matmuls",
    "split_reductions",
    "matmul_tiles",
    "row_blocks",
}
# Reducer facts (``Reducer.reassociable``, ``Reducer.selects``): sums may be regrouped; max/min keyed.
_REASSOCIABLE = frozenset(p for p in REDUCTIONS if p.reducer is not None and p.reducer.reassociable)
_KEYED = {p: p.reducer.selects for p in REDUCTIONS if p.reducer is not None and p.reducer.selects}
REDUCE_CHUNKS = 16  # partial accumulators of a parallel full reduction (fixed: results don't vary)
PARTIALS_MAX_ELEMENTS = 1 << 20  # partial results a chunked axis-0 reduction may keep
ENTRY = "run"
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
    direct_writeback: tuple[int, ...]  # arguments the driver writes into directly
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
    # ahead beside the kernels; its weight is in kernel_weights.
    entry_signature: list[tuple[str, int | None]] = field(default_factory=list)


@dataclass
class Kernel:
    name: str
    args: list[str]  # what the driver passes: its buffers' names, inputs then outputs (and constants)
    text: str
    objmode: bool = False  # a plain Python (NumPy) kernel: the driver calls it in object mode
    # The argument types (``runtime.precompile.KernelSignature``): set by the writer of a call of a
    # runtime function (``runtime.blas.gemm_rows``), else by generate_cpu from the buffers' types.
    signature: list[tuple[str, int | None]] | None = None
    # Table slots whose addresses the driver passes after ``args`` (a parallel kernel's chunk
    # function and ``runtime.parallel.parallel_for``: ``_runtime_parallel``).
    calls: list[tuple[str, list[tuple[str, int | None]]]] = field(default_factory=list)
    # A parallel kernel with nothing to do after its loop: its text is the chunk function alone;
    # the driver allocates its ``scratch`` (lines ``name = np.empty(...)``), fills the frame with
    # ``args`` and the scratch, and calls ``parallel_for`` for ``direct`` chunks.
    direct: str | None = None
    scratch: list[str] = field(default_factory=list)
    # Driver lines run before and after the call (a row-block region's frames: ``_region_kernel``).
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)


def jit_decorator(parallel: bool = False, nogil: bool = True, reassoc: bool = False) -> str:
    extra = ", parallel=True" if parallel else ""
    extra += ', fastmath={"reassoc"}' if reassoc else ""
    return f'@numba.njit(cache=True, nogil={nogil}, error_model="numpy"{extra})'


def generate_cpu(func: Function, fusion: FusionPlan, plan: MemoryPlan, sanitize: bool = False) -> CpuProgram:
    names = {v: py_name(n) for v, n in fusion.names.items()}
    pool = ConstantPool()
    kernels: dict[Group, Kernel] = {}
    over = _overwrites(func, fusion, plan, names)
    for group in fusion.groups:
        band = fusion.band_of.get(group)
        if band is not None:
            if group is band.groups[0]:  # the band's kernel runs where its first member would
                same = {v: n for g in band.groups for v, n in over.get(g, {}).items()}
                kernels[group] = _band_kernel(band, {**names, **same}, pool)
            continue
        spec = _KernelSpec(group, {**names, **over.get(group, {})}, pool)
        kernel = _WRITERS[group.kind](spec)
        if kernel is not None:
            kernels[group] = kernel
    types_by_name = {n: v.type for v, n in names.items()}
    if "runtime_parallel" in OPTIMIZATIONS:
        kernels = {g: _runtime_parallel(k, types_by_name) for g, k in kernels.items()}
    if "shared_kernels" in OPTIMIZATIONS:
        kernels = _shared(kernels)
    for kernel in kernels.values():
        if kernel.signature is None and not kernel.objmode and kernel.direct is None:
            kernel.signature = [
                (types_by_name[a].dtype.np.name, len(types_by_name[a].shape)) for a in kernel.args
            ] + [("uint64", None)] * len(kernel.calls)
    absorbed: list[Kernel] = []
    hoist: dict[Group, list[Group]] = {}
    if "row_blocks" in OPTIMIZATIONS and not sanitize and not numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        storage = _storage(names, plan, func)
        returned = {names[v] for v in func.results}
        kernels, absorbed, hoist, blocks = _row_block_regions(
            fusion, kernels, types_by_name, storage, pool, returned
        )
        if blocks:  # the plan the code follows (the caller's stays as the planner made it)
            plan = replace(plan, buffers=[replace(r) for r in plan.buffers])
            resize_slots(plan, blocks)
    outs = caller_allocated(func, plan)
    poison = poison_after(fusion, plan) if sanitize else {}
    slots, weights = _kernel_slots([*absorbed, *kernels.values()])
    driver = _driver(func, fusion, plan, kernels, names, outs, slots, poison, hoist)
    weights[ENTRY] = DRIVER_WEIGHT_PER_LINE * driver.count("\n")
    entry_signature: list[tuple[str, int | None]] = [("uint8", 1), ("uint64", 1)]
    entry_signature += [(v.type.dtype.np.name, len(v.type.shape)) for v in [*outs, *func.params]]
    texts = dict.fromkeys(k.text for k in [*absorbed, *kernels.values()] if k.text)
    parts = [_prelude(pool, [*absorbed, *kernels.values()]), *texts, driver]
    return CpuProgram(
        source="\n\n".join(parts) + "\n",
        constants=dict(pool.arrays),
        entry=ENTRY,
        n_results=len(func.results),
        writeback=tuple(int(i) for i in func.attrs.get("dsl.writeback", ())),
        arena_bytes=plan.peak_bytes,
        direct_writeback=tuple(sorted(plan.direct_writeback.values())),
        result_types=[v.type for v in func.results],
        out_types=[v.type for v in outs],
        kernel_slots=slots,
        kernel_weights=weights,
        entry_signature=entry_signature,
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


def _overwrites(
    func: Function, fusion: FusionPlan, plan: MemoryPlan, names: dict[Value, str]
) -> dict[Group, dict[Value, str]]:
    """Per group, each value it stores over one of its inputs of the same type (in place, a direct
    write-back, a donated argument), named as that input: the kernel then loads and stores through
    one array. Two arrays that share memory make LLVM's run-time overlap check fail, and the loop
    then runs its scalar version (4.9 against 0.43 ms for a 4096x128 tanh written in place)."""
    by_name = {n: v for v, n in fusion.names.items()}
    donor = {r.value: by_name[r.reused_from] for r in plan.buffers if r.reused_from in by_name}
    donor.update({v: func.params[k] for v, k in plan.direct_writeback.items()})
    out: dict[Group, dict[Value, str]] = {}
    for group in fusion.groups:
        if _wants_numpy(group):  # (a matmul has a donor only for its accumulation epilogue)
            continue
        for v in group.outputs:
            x = donor.get(v)
            if x is not None and x in group.inputs and x.type == v.type:
                out.setdefault(group, {})[v] = names[x]
    return out


def _shared(kernels: dict[Group, Kernel]) -> dict[Group, Kernel]:
    """One function per distinct kernel: a kernel whose text equals an earlier one's up to the names
    of its buffers (the same layer shape of an MLP, forward or backward) calls the earlier function
    with its own buffers, and its text is dropped. Numba compiles each distinct kernel once."""
    first: dict[str, Kernel] = {}
    out = {}
    for group, kernel in kernels.items():
        if not kernel.text:  # a call of a runtime function
            out[group] = kernel
            continue
        key = _canonical(kernel)
        seen = first.setdefault(key, kernel)
        out[group] = kernel if seen is kernel else replace(seen, args=kernel.args, text="", signature=None)
    return out


def _canonical(kernel: Kernel) -> str:
    """The kernel's text with its own name and its parameters' names (and their flat views,
    ``v3_f``) replaced by positions."""
    rename = {kernel.name: "K", f"{kernel.name}{CHUNK_SUFFIX}": "K_chunk"}
    for i, a in enumerate(kernel.args):
        rename.update({a: f"@{i}", f"{a}_f": f"@{i}_f"})
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: rename.get(m.group(0), m.group(0)), kernel.text)


@dataclass
class _KernelSpec:
    group: Group
    names: dict[Value, str]
    pool: ConstantPool
    local: dict[Value, str] = field(default_factory=dict)  # band scratch: value -> its row's name

    def ref(self, v: Value, at: tuple[str, ...]) -> str:
        """The element of ``v`` at ``at``: its buffer, or inside a band the row kept per thread (the
        row index dropped; a row of one element is a scalar)."""
        local = self.local.get(v)
        if local is None:
            return subscript(self.names[v], at)
        assert at[:1] == (ROW,), f"{self.names[v]}: a band reads its rows only at the current row"
        return local if math.prod(v.type.shape[1:]) == 1 else subscript(local, at[1:])

    @property
    def kernel_name(self) -> str:
        return f"k{self.group.index}_{self.group.root.prim.name}"

    @property
    def args(self) -> list[str]:
        """Each buffer once (an output stored over an input has that input's name)."""
        return list(dict.fromkeys(self.names[v] for v in self.group.inputs + self.group.outputs))

    def inlined(self) -> dict[Value, Op]:
        return {op.result: op for op in self.group.ops}

    def define(self, body: list[str], parallel: bool = False, reassoc: bool = False) -> Kernel:
        header = [
            jit_decorator(parallel, reassoc=reassoc),
            f"def {self.kernel_name}({', '.join(self.args)}):",
        ]
        text = "\n".join(header + indent(body or ["pass"], 1))
        return Kernel(self.kernel_name, self.args, text)


@dataclass
class _Body:
    lines: list[str]  # loop body statements (computations and stores)
    views: list[str]  # statements before the loops (flat views)
    loops: list[str]  # loop variable names, outermost first
    extents: list[int]
    target: str | None  # temporary holding the requested value (the reduction operand)


def _loop_body(
    spec: _KernelSpec, shape: tuple[int, ...], stores: list[Value], want: Value | None, try_flat: bool
) -> _Body:
    """One flat loop if allowed and no read needs the multi-dimensional index, else a loop nest."""
    if try_flat:
        flat = _body(spec, shape, stores, want, flat=True)
        if flat is not None:
            return flat
    nested = _body(spec, shape, stores, want, flat=False)
    assert nested is not None  # a loop nest can always be written
    return nested


def _body(
    spec: _KernelSpec, shape: tuple[int, ...], stores: list[Value], want: Value | None, flat: bool
) -> _Body | None:
    """The loop body over ``shape`` storing ``stores``; ``None`` if ``flat`` and a read needs indices."""
    idx = tuple(f"i{d}" for d in range(len(shape)))
    flat_views: dict[str, None] = {}

    def load(v: Value, at: tuple[str, ...]) -> str:
        if flat and at == idx and v.type.shape == shape:
            flat_views[spec.names[v]] = None
            return f"{spec.names[v]}_f[i]"
        return spec.ref(v, at)

    builder = BodyBuilder(spec.inlined(), load, spec.pool)
    target = builder.value_at(want, idx) if want is not None else None
    store_lines = []
    for v in stores:
        temp = builder.value_at(v, idx)
        if flat:
            flat_views[spec.names[v]] = None
        store_lines.append(f"{spec.names[v]}_f[i] = {temp}" if flat else f"{spec.ref(v, idx)} = {temp}")
    lines = builder.lines + store_lines
    if not flat:
        return _Body(lines, [], list(idx), list(shape), target)
    if mentions(lines, idx):
        return None
    size = math.prod(shape)
    views = [f"{name}_f = {name}.reshape({size})" for name in flat_views]
    return _Body(lines, views, ["i"], [size], target)


def _loop_kernel(spec: _KernelSpec) -> Kernel | None:
    shape = spec.group.shape
    if math.prod(shape) == 0:
        return None
    if _wants_numpy(spec.group):
        return _numpy_kernel(spec)
    body = _loop_body(spec, shape, spec.group.outputs, None, try_flat=True)
    parallel = math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    return spec.define(body.views + loop_nest(body.loops, body.extents, body.lines, parallel), parallel)


def _numpy_kernel(spec: _KernelSpec) -> Kernel:
    name = spec.kernel_name + "_np"
    chunked = "chunked_numpy" in OPTIMIZATIONS
    text = arraylevel.numpy_kernel(name, spec.args, spec.group, spec.names, spec.pool, chunked)
    return Kernel(name, spec.args, text, objmode=True)


def _reduce_kernel(spec: _KernelSpec) -> Kernel | None:
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    if _wants_numpy(spec.group):
        return _numpy_kernel(spec)
    shape = spec.group.shape
    axes = {int(a) for a in root.attrs["axes"]}
    split = _reduced_tail(shape, axes)  # loops from ``split`` on are all reduced: into a local
    extra = [v for v in spec.group.outputs if v is not out]  # prologue values stored as well
    body = _loop_body(spec, shape, extra, root.operands[0], try_flat=split == 0)  # flat: full reductions
    assert body.target is not None
    reducer = root.prim.reducer
    assert reducer is not None
    dtype = out.type.dtype
    identity, partial = _accumulation(root, body.target)
    kept = tuple(f"i{d}" for d in range(len(shape)) if d not in axes)
    dest = subscript(spec.names[out], kept)
    n_outer = split  # a flat body only happens for a full reduction, where split == 0
    big = math.prod(shape) >= PARALLEL_MIN_ELEMENTS
    reassoc = "reassoc_sums" in OPTIMIZATIONS and dtype.is_float and root.prim in _REASSOCIABLE
    if n_outer == 0 and big:
        return _chunked_full_reduction(spec, body, partial, identity, dest, reducer.combine, reassoc)
    revisit = any(d in axes for d in range(n_outer))  # an output element is reached again later
    inner = _accumulating_nest(body.loops[n_outer:], body.extents[n_outer:], body.lines, partial)
    chunks = min(REDUCE_CHUNKS, shape[0]) if shape else 1
    if (
        "split_reductions" in OPTIMIZATIONS
        and big
        and 0 in axes
        and n_outer > 0
        and chunks > 1
        and chunks * out.type.size <= PARTIALS_MAX_ELEMENTS
    ):
        return _chunked_row_reduction(spec, body, inner, partial, (chunks, n_outer), reassoc)
    parallel = big and n_outer > 0 and 0 not in axes  # distinct i0 write distinct outputs
    lines = list(body.views)
    if not revisit:
        block = [f"acc = {partial.load(identity)}", *inner, f"{dest} = {partial.value('acc')}"]
        lines += loop_nest(body.loops[:n_outer], body.extents[:n_outer], block, parallel)
        return spec.define(lines, parallel, reassoc=reassoc and n_outer < len(shape))
    # An output element is reached again later: its partial is kept between visits, in the output
    # itself or, for a wider accumulator, in a scratch array of that dtype cast into it at the end.
    o, size = spec.names[out], out.type.size
    keep = o if partial.dtype is dtype else f"{o}_w"
    if keep != o:
        lines.append(f"{keep} = np.empty({shape_literal(out.type.shape)}, {np_type(partial.dtype)})")
    lines += _fill(keep, size, identity)
    slot = subscript(keep, kept)
    block = [f"acc = {partial.load(slot)}", *inner, f"{slot} = {partial.finish('acc')}"]
    lines += loop_nest(body.loops[:n_outer], body.extents[:n_outer], block, parallel)
    if keep != o:
        lines += [f"{o}_f = {o}.reshape({size})", f"for q in range({size}):"]
        lines.append(f"    {o}_f[q] = {partial.result(f'{keep}_init[q]')}")
    return spec.define(lines, parallel, reassoc=reassoc and n_outer < len(shape))


def _wants_numpy(group: Group) -> bool:
    return arraylevel.wants_numpy(group, "vector_math" in OPTIMIZATIONS, "keyed_minmax" in OPTIMIZATIONS)


def _same(v: str) -> str:
    return v


def _keyed(root: Op) -> bool:
    """A float max/min reduction that reduces integer keys (``vecmath.max_key_f32``)."""
    dtype = root.result.type.dtype
    return "keyed_minmax" in OPTIMIZATIONS and root.prim in _KEYED and dtype in (DType.f32, DType.f64)


@dataclass(frozen=True)
class _Partial:
    """How a chunk accumulates: a kept partial result -> acc, its update statement, acc -> a kept
    partial (of ``dtype``: the reducer's accumulator, ``Reducer.accumulator``), and a kept partial
    -> the result's dtype."""

    load: Callable[[str], str]
    update: str
    finish: Callable[[str], str]
    dtype: DType
    result: Callable[[str], str] = _same
    # A widened sum's block (``_accumulating_nest``): ``blk`` set to the identity, its update in the
    # result's dtype, and ``blk`` added to ``acc``.
    block: tuple[str, str, str] | None = None

    def value(self, acc: str) -> str:
        """``acc`` as the reduction's result."""
        return self.result(self.finish(acc))


def _reduced_tail(shape: tuple[int, ...], axes: AbstractSet[int]) -> int:
    """Where the trailing run of reduced axes starts (``len(shape)`` when the last axis is kept)."""
    split = len(shape)
    while split > 0 and split - 1 in axes:
        split -= 1
    return split


def _accumulation(root: Op, target: str) -> tuple[str, _Partial]:
    """A reduction root's identity literal (as a kept partial) and how ``acc`` accumulates the
    temporary ``target``: in the reducer's accumulator dtype (float32 sums in float64), or for a
    keyed float max/min as integer keys (``acc`` holds key(value))."""
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    dtype = root.result.type.dtype
    wide = reducer.accumulator(dtype)
    identity = literal(reducer.identity(dtype), wide)
    if not _keyed(root):
        if wide is dtype:
            return identity, _Partial(
                _same, f"acc = {typed(reducer.combine('acc', target), dtype)}", _same, dtype
            )
        update = f"acc = {typed(reducer.combine('acc', typed(target, wide)), wide)}"
        block = (
            f"blk = {literal(reducer.identity(dtype), dtype)}",
            f"blk = {typed(reducer.combine('blk', target), dtype)}",
            f"acc = {typed(reducer.combine('acc', typed('blk', wide)), wide)}",
        )
        return identity, _Partial(_same, update, _same, wide, lambda v: typed(v, dtype), block)
    which, width = _KEYED[root.prim], dtype.name
    return identity, _Partial(
        lambda v: f"{which}_key_{width}({v})",
        f"acc = {which}(acc, {which}_key_{width}({target}))",
        lambda v: f"from_key_{width}({v})",
        dtype,
    )


ACC_BLOCK = 256  # elements of a widened sum's block, summed in the result's dtype


def _accumulating_nest(
    names: list[str],
    extents: list[int],
    lines: list[str],
    partial: _Partial,
    nest: Callable[[list[str], list[int], list[str]], list[str]] = loop_nest,
) -> list[str]:
    """The loops of a reduction's accumulation (``nest`` of them), ``partial.update`` innermost. A
    widened sum (float32 into float64) takes a long innermost loop in fixed blocks of ``ACC_BLOCK``
    elements, each summed in the result's dtype into ``blk`` and added to the wide ``acc``: LLVM
    vectorizes a block at float32's width (a float64 add in the loop halves it: softmax + cross-entropy
    2.4x slower), and the error is a block's, not the loop's. The bounds are constants (a block's start
    provably >= 0, so no index wraps around and the loop vectorizes); the rest is a shorter block."""
    if partial.block is None or not names or extents[-1] == 1:  # (``_row_nest`` drops loops of 1)
        return nest(names, extents, lines + [partial.update])
    init, update, merge = partial.block
    var, extent = names[-1], extents[-1]
    full = extent // ACC_BLOCK * ACC_BLOCK
    inner = []
    if full:
        inner += [
            f"for {var}_b in range({extent // ACC_BLOCK}):",
            f"    {init}",
            f"    for {var} in range({var}_b * {ACC_BLOCK}, {var}_b * {ACC_BLOCK} + {ACC_BLOCK}):",
            *indent([*lines, update], 2),
            f"    {merge}",
        ]
    if full < extent:  # the rest: a shorter block
        inner += [init, f"for {var} in range({full}, {extent}):", *indent([*lines, update], 1), merge]
    return nest(names[:-1], extents[:-1], inner)


def _chunked_row_reduction(
    spec: _KernelSpec,
    body: _Body,
    inner: list[str],
    partial: _Partial,
    chunks_outer: tuple[int, int],
    reassoc: bool,
) -> Kernel:
    """A big reduction over axis 0 that keeps other axes (a bias or layer-norm gain gradient): fixed
    chunks of axis 0 in parallel, each into its own partial result, then the partials combined in
    chunk order (no atomics, the same result every run)."""
    chunks, n_outer = chunks_outer
    axes = spec.group.reduced_axes
    kept = tuple(f"i{d}" for d in range(len(spec.group.shape)) if d not in axes)
    parts = _partials(spec, chunks, partial, row_blocks=n_outer == len(spec.group.shape))
    block = _partial_update(kept, inner, partial, parts)
    n = body.extents[0]
    chunk_range = f"range(ch * {n} // {chunks}, (ch + 1) * {n} // {chunks})"
    row = [*loop_nest(body.loops[1:n_outer], body.extents[1:n_outer], block), *parts.flush]
    per_chunk = loop_nest(body.loops[:1], body.extents[:1], row, outer_range=chunk_range)
    lines = [
        *body.views,
        *parts.before,
        f"for ch in numba.prange({chunks}):",
        *indent(parts.chunk, 1),
        *indent(per_chunk, 1),
        *parts.after,
    ]
    return spec.define(lines, parallel=True, reassoc=reassoc and n_outer < len(spec.group.shape))


def _partials(spec: _KernelSpec, chunks: int, partial: _Partial, row_blocks: bool = False) -> _Rows:
    """The partial results of a reduction over axis 0, one per chunk of rows (in the accumulator's
    dtype): allocated before the parallel loop, set to the identity as each chunk starts, combined in
    chunk order into the result after the loop (no atomics: the same result every run).

    With ``row_blocks`` (a widened sum updated once per element: nothing reduced after the kept
    axes), rows add into a second, float32 partial ``part_b`` (vectorized at float32's width across
    the kept axes), which every ``ACC_BLOCK``-th row (``_Rows.flush``) and at the end adds into the
    wide one: the error is a block's of rows, not the chunk's."""
    root = spec.group.root
    out = root.result
    dtype, size, wide = out.type.dtype, out.type.size, partial.dtype
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    o = spec.names[out]
    shape = shape_literal((chunks, *out.type.shape))
    parts = _Rows(
        before=[f"part = np.empty({shape}, {np_type(wide)})", f"part_f = part.reshape(({chunks}, {size}))"],
        chunk=[f"for q in range({size}):", f"    part_f[ch, q] = {literal(reducer.identity(dtype), wide)}"],
    )
    add = [f"acc = {typed(reducer.combine('acc', 'part_f[ch, q]'), wide)}"]
    if row_blocks and partial.block is not None:
        identity = literal(reducer.identity(dtype), dtype)
        merge = typed(reducer.combine("part_f[ch, q]", typed("part_b_f[ch, q]", wide)), wide)
        parts.before += [
            f"part_b = np.empty({shape}, {np_type(dtype)})",
            f"part_b_f = part_b.reshape(({chunks}, {size}))",
        ]
        parts.chunk.append(f"    part_b_f[ch, q] = {identity}")
        parts.flush = [
            f"if ({ROW} + 1) % {ACC_BLOCK} == 0:",
            f"    for q in range({size}):",
            f"        part_f[ch, q] = {merge}",
            f"        part_b_f[ch, q] = {identity}",
        ]
        add.append(f"acc = {typed(reducer.combine('acc', typed('part_b_f[ch, q]', wide)), wide)}")
    parts.after = [
        *([f"{o}_f = {o}.reshape({size})"] if out.type.shape else []),
        f"for q in range({size}):",
        f"    acc = {literal(reducer.identity(dtype), wide)}",
        f"    for ch in range({chunks}):",
        *indent(add, 2),
        f"    {f'{o}_f[q]' if out.type.shape else f'{o}[()]'} = {partial.result('acc')}",
    ]
    return parts


def _chunked_full_reduction(
    spec: _KernelSpec,
    body: _Body,
    partial: _Partial,
    identity: str,
    dest: str,
    combine: Callable[[str, str], str],
    reassoc: bool,
) -> Kernel:
    """A big full reduction: fixed chunks of the outer loop in parallel, then their partials in order."""
    wide = partial.dtype
    n = body.extents[0]
    chunks = min(REDUCE_CHUNKS, n)
    chunk_range = f"range(ch * {n} // {chunks}, (ch + 1) * {n} // {chunks})"
    if len(body.loops) == 1:  # the chunk's range is the innermost loop's (not blocked: not constant)
        per_chunk = loop_nest(
            body.loops, body.extents, body.lines + [partial.update], outer_range=chunk_range
        )
    else:
        per_chunk = _accumulating_nest(
            body.loops,
            body.extents,
            body.lines,
            partial,
            lambda names, extents, lines: loop_nest(names, extents, lines, outer_range=chunk_range),
        )
    lines = [
        *body.views,
        f"part = np.empty({chunks}, {np_type(wide)})",
        f"for ch in numba.prange({chunks}):",
        *indent([f"acc = {partial.load(identity)}", *per_chunk, f"part[ch] = {partial.finish('acc')}"], 1),
        f"acc = {identity}",
        f"for ch in range({chunks}):",
        f"    acc = {typed(combine('acc', 'part[ch]'), wide)}",
        f"{dest} = {partial.result('acc')}",
    ]
    return spec.define(lines, parallel=True, reassoc=reassoc)


def band_role(group: Group) -> str | None:
    """The row-fusion roles of this backend (``rows.form_bands``): ``MEMBER`` for a group written as a
    loop nest (not a NumPy kernel) whose reduction over axis 0, if any, keeps a partial result per
    chunk of rows within ``PARTIALS_MAX_ELEMENTS``; ``TAIL`` for a small loop nest that can run
    serially after a band's loop."""
    if group.kind is GroupKind.CONTRACT or _wants_numpy(group) or math.prod(group.shape) == 0:
        return None
    if 0 in group.reduced_axes and REDUCE_CHUNKS * group.root.result.type.size > PARTIALS_MAX_ELEMENTS:
        return None
    if group.shape and group.shape[0] >= 2:
        return rows.MEMBER
    small = group.kind is GroupKind.LOOP and math.prod(group.shape) < PARALLEL_MIN_ELEMENTS
    return rows.TAIL if small else None


@dataclass
class _Rows:
    """One band member's code: before the parallel loop, at the start of each chunk of rows, for
    each row, and after the loop."""

    before: list[str] = field(default_factory=list)
    chunk: list[str] = field(default_factory=list)
    row: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    reassoc: bool = False
    flush: list[str] = field(default_factory=list)  # after each row: a row block's end (``_partials``)


_MEMBER_LOCALS = re.compile(r"\b(t\d+|k\d+|acc|blk|part|part_f|part_b|part_b_f)\b")


def _band_kernel(band: Band, names: dict[Value, str], pool: ConstantPool) -> Kernel:
    """One kernel for a band (``compiler/passes/rows.py``): fixed chunks of rows in parallel; in each
    chunk, row by row, every member's loop nest for that row in member order. Values the band keeps
    per row live in a row of scratch per chunk (a scalar when a row is one element); reductions over
    axis 0 accumulate per chunk and are combined in chunk order after the loop."""
    n = band.rows
    parallel = max(math.prod(g.shape) for g in band.groups if g not in band.tail) >= PARALLEL_MIN_ELEMENTS
    chunks = min(REDUCE_CHUNKS, n) if parallel else 1
    local = {v: f"{names[v]}_r" for v in band.local}
    code = _Rows()
    for v in sorted(band.local, key=lambda v: names[v]):
        row_shape = v.type.shape[1:]
        size = math.prod(row_shape)
        if size == 1:
            continue  # a scalar variable
        code.before.append(f"{names[v]}_s = np.empty(({chunks}, {size}), {np_type(v.type.dtype)})")
        view = f"{names[v]}_s[ch]" + (f".reshape({shape_literal(row_shape)})" if len(row_shape) > 1 else "")
        code.chunk.append(f"{local[v]} = {view}")
    for j, group in enumerate(band.groups):
        spec = _KernelSpec(group, names, pool, local)
        member = _band_tail(spec) if group in band.tail else _band_rows(spec, chunks)
        prefix = rf"m{j}_\1"
        code.before += [_MEMBER_LOCALS.sub(prefix, line) for line in member.before]
        code.chunk += [_MEMBER_LOCALS.sub(prefix, line) for line in member.chunk]
        code.row += [_MEMBER_LOCALS.sub(prefix, line) for line in member.row]
        code.after += [_MEMBER_LOCALS.sub(prefix, line) for line in member.after]
        code.reassoc |= member.reassoc
    args: dict[str, None] = {}
    for g in band.groups:
        args.update((names[v], None) for v in g.inputs + g.outputs if v not in band.local)
    rows_of_chunk = f"range(ch * {n} // {chunks}, (ch + 1) * {n} // {chunks})"
    lines = [
        *code.before,
        f"for ch in {'numba.prange' if parallel else 'range'}({chunks}):",
        *indent([*code.chunk, f"for {ROW} in {rows_of_chunk}:", *indent(code.row, 1)], 1),
        *code.after,
    ]
    name = f"k{band.groups[0].index}_rows"
    header = [jit_decorator(parallel, reassoc=code.reassoc), f"def {name}({', '.join(args)}):"]
    return Kernel(name, list(args), "\n".join(header + indent(lines, 1)))


def _band_tail(spec: _KernelSpec) -> _Rows:
    """A tail member: its own serial loop nest after the band's loop (and after the partial results
    of the members before it are combined)."""
    body = _loop_body(spec, spec.group.shape, spec.group.outputs, None, try_flat=True)
    return _Rows(after=body.views + loop_nest(body.loops, body.extents, body.lines))


def _row_nest(names: list[str], extents: list[int], body: list[str]) -> list[str]:
    """``loop_nest`` without its loops of one iteration (their index is 0): a per-row scalar is then
    assigned on every path through the row, so Numba's parallel lowering keeps it private to the
    thread (assigned inside a ``range(1)`` loop, it would be live into the parallel body and shared)."""
    kept = [(n, e) for n, e in zip(names, extents, strict=True) if e != 1]
    fixed = [f"{n} = 0" for n, e in zip(names, extents, strict=True) if e == 1]
    return fixed + loop_nest([n for n, _ in kept], [e for _, e in kept], body)


def _band_rows(spec: _KernelSpec, chunks: int) -> _Rows:
    """A member's code for one row ``i0`` (its loops over the other axes), and for a reduction over
    axis 0 its partial results: initialized per chunk, combined after the loop."""
    shape = spec.group.shape
    if spec.group.kind is GroupKind.LOOP:
        body = _body(spec, shape, spec.group.outputs, None, flat=False)
        assert body is not None
        return _Rows(row=_row_nest(body.loops[1:], body.extents[1:], body.lines))
    root = spec.group.root
    out = root.result
    axes = spec.group.reduced_axes
    split = _reduced_tail(shape, axes)
    extra = [v for v in spec.group.outputs if v is not out]
    body = _body(spec, shape, extra, root.operands[0], flat=False)
    assert body is not None and body.target is not None
    identity, acc = _accumulation(root, body.target)
    dtype = out.type.dtype
    kept = tuple(f"i{d}" for d in range(len(shape)) if d not in axes)
    outer = max(split, 1)  # loops 1..outer-1 keep their axis; loops from ``outer`` on accumulate
    inner = _accumulating_nest(body.loops[outer:], body.extents[outer:], body.lines, acc, _row_nest)
    reassoc = "reassoc_sums" in OPTIMIZATIONS and dtype.is_float and root.prim in _REASSOCIABLE
    reassoc = reassoc and outer < len(shape)
    if 0 not in axes:  # a row reduction: row i0's result is ready after row i0
        block = [f"acc = {acc.load(identity)}", *inner, f"{spec.ref(out, kept)} = {acc.value('acc')}"]
        return _Rows(row=_row_nest(body.loops[1:outer], body.extents[1:outer], block), reassoc=reassoc)
    parts = _partials(spec, chunks, acc, row_blocks=outer == len(shape))
    parts.row = _row_nest(
        body.loops[1:outer], body.extents[1:outer], _partial_update(kept, inner, acc, parts)
    )
    parts.row += parts.flush
    parts.reassoc = reassoc
    return parts


def _partial_update(kept: tuple[str, ...], inner: list[str], partial: _Partial, parts: _Rows) -> list[str]:
    """A row's update of its chunk's partial result at ``kept``: through ``acc``, or with row blocks
    (``_partials``) into the block's float32 partial."""
    if not parts.flush:
        slot = subscript("part", ("ch", *kept))
        return [f"acc = {partial.load(slot)}", *inner, f"{slot} = {partial.finish('acc')}"]
    assert partial.block is not None
    slot = subscript("part_b", ("ch", *kept))
    return [f"blk = {slot}", *inner[:-1], partial.block[1], f"{slot} = blk"]


def _fill(name: str, size: int, value: str) -> list[str]:
    return [
        f"{name}_init = {name}.reshape({size})",
        f"for q in range({size}):",
        f"    {name}_init[q] = {value}",
    ]


def _matmul_kernel(spec: _KernelSpec) -> Kernel | None:
    root = spec.group.root
    out = root.result
    if out.type.size == 0:
        return None
    *batch, m, k = root.operands[0].type.shape
    n = out.type.shape[-1]
    nb = math.prod(batch)
    x, y, dest = matmul_views(spec.group)
    o = spec.names[dest.source]
    dtype = out.type.dtype
    if k == 0:
        return spec.define(_fill(o, out.type.size, literal(0, dtype)))
    if dtype in (DType.f32, DType.f64):
        return _gemm_kernel(spec, (x, y, dest), (nb, m, n, k), _split_matmuls())
    # Integer (and other) matmuls: explicit i-k-j loops over the operands' flat buffers.
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no reducer"
    lines = [
        f"x = {spec.names[x.source]}.reshape(-1)",
        f"y = {spec.names[y.source]}.reshape(-1)",
        f"o = {o}.reshape(-1)",
    ]
    at = f"o[ot + i * {dest.rows} + j * {dest.cols}]"
    step = typed(reducer.combine(at, f"(aik * y[yt + p * {y.rows} + j * {y.cols}])"), dtype)
    row = [
        f"for j in range({n}):",
        f"    {at} = {literal(reducer.identity(dtype), dtype)}",
        f"for p in range({k}):",
        f"    aik = x[xt + i * {x.rows} + p * {x.cols}]",
        f"    for j in range({n}):",
        f"        {at} = {step}",
    ]
    parallel = nb * m * n * k >= PARALLEL_MIN_ELEMENTS and m > 1  # rows are independent
    rows_range = "numba.prange" if parallel else "range"
    lines += [
        f"for t in range({nb}):",
        f"    xt = {x.batch_offset('t')}",
        f"    yt = {y.batch_offset('t')}",
        f"    ot = {dest.batch_offset('t')}",
        f"    for i in {rows_range}({m}):",
        *indent(row, 2),
    ]
    return spec.define(lines, parallel)


def _gemm_kernel(
    spec: _KernelSpec,
    views: tuple[OperandView, OperandView, OperandView],
    dims: tuple[int, int, int, int],
    split: bool,
) -> Kernel:
    """BLAS gemm calls on blocks (``runtime/blas.py``): with ``split``, batch elements and row blocks
    of the result spread over Numba's threads when the matmul is big enough to pay for a parallel
    region (else one call per batch element, BLAS threading as it is). Each operand is read as a
    strided view of its buffer (``fuse.operand_view``): a leading dimension, the transpose flag
    where its columns are the strided axis, an offset per batch element; the result likewise, written
    through ``views[2]`` (as the transposed product where the result's columns are the strided axis)."""
    nb, m, n, k = dims
    dtype = spec.group.root.result.type.dtype
    x_view, y_view, dest = views
    if dest.cols != 1:  # columns of the result are the strided axis: compute o^T = y^T @ x^T
        x_view, y_view, dest, m, n = y_view.transposed(), x_view.transposed(), dest.transposed(), n, m
    flops = 2 * nb * m * n * k
    threads = numba_threads()
    parts = 1
    if split and flops >= PARALLEL_MIN_FLOPS and nb < threads:
        parts = max(1, min(-(-threads // nb), m // MIN_BLOCK_ROWS))
    parallel = split and flops >= PARALLEL_MIN_FLOPS and nb * parts > 1
    layouts = []
    for view, (n_rows, n_cols) in ((x_view, (m, k)), (y_view, (k, n))):
        if view.cols == 1:  # rows of the matrix are rows of memory: leading dimension = row stride
            layouts.append((False, max(view.rows, n_cols), view.rows))
        else:  # columns are rows of memory: BLAS's transpose flag, leading dimension = column stride
            layouts.append((True, max(view.cols, n_rows), 1))
    (ta, lda, row_step), (tb, ldb, _) = layouts
    alpha, beta, source = 1.0, 0.0, dest.source
    acc = accumulation(spec.group)
    if acc is not None:  # o = alpha * x @ y + beta * source: gemm reads source's values from o
        alpha, beta, source = float(acc.alpha), float(acc.beta), acc.source
    copy = spec.names[source] != spec.names[dest.source]  # not planned in place: copied in first
    params = dict(copy=copy, ta=ta, tb=tb, m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=max(dest.rows, n))
    params |= dict(x_step=row_step, o_step=dest.rows, parts=parts, blocks=nb * parts)
    # dslc's register tiles instead of the library's gemm where they pay (``blas.tiles_pay``), for a
    # matmul split over the threads: one too small to split would save microseconds on the tiles and
    # cost their serial form's compile (~0.8 s, once per machine)
    tiles = "matmul_tiles" in OPTIMIZATIONS and parallel and blas.tiles_pay(m // parts, n, k, dtype.itemsize)
    for prefix, view in (("x", x_view), ("y", y_view), ("o", dest)):
        assert len(view.batch) <= MAX_VIEW_BATCH_AXES, view
        batch = [(1, 0)] * (MAX_VIEW_BATCH_AXES - len(view.batch)) + list(view.batch)
        params |= {f"{prefix}b{i}": v for i, v in enumerate(x for axis in batch for x in axis)}
    p = spec.pool.add(np.array([params[name] for name in blas.GEMM_ROWS_PARAMS], np.int64))
    s = spec.pool.add(np.array([alpha, beta], np.float64))
    args = [spec.names[v] for v in (x_view.source, y_view.source, dest.source, source)] + [p, s]
    signature: list[tuple[str, int | None]] = [(dtype.np.name, FLAT)] * 4
    signature += [("int64", 1), ("float64", 1)]
    name = "gemm_rows_tiles" if tiles else "gemm_rows" if parallel else "gemm_rows_serial"
    return Kernel(name, args, "", signature=signature)


def numba_threads() -> int:
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def _split_matmuls() -> bool:
    """Matmul kernels split their work over Numba's threads, with SciPy's BLAS on one thread."""
    return "split_matmuls" in OPTIMIZATIONS and not blas.native_blas_threads()


_WRITERS: dict[GroupKind, Callable[[_KernelSpec], Kernel | None]] = {
    GroupKind.LOOP: _loop_kernel,
    GroupKind.REDUCE: _reduce_kernel,
    GroupKind.CONTRACT: _matmul_kernel,
}


PARALLEL_FOR = "parallel_for"  # runtime.parallel.parallel_for, as a generated module binds it
CHUNK_SUFFIX = "_chunk"
_PARALLEL_FOR_SLOT = (PARALLEL_FOR, PARALLEL_FOR_SIGNATURE)
_PARALLEL_FOR_SIGNATURE = signature_string(PARALLEL_FOR_SIGNATURE)
_PRANGE = re.compile(r"    for (\w+) in numba\.prange\((\d+)\):")
_SCRATCH = re.compile(r"    (\w+) = np\.empty\((.+), (np\.\w+)\)")
_ASSIGN = re.compile(r"    (\w+) = (.+)")


def _runtime_parallel(kernel: Kernel, types: dict[str, TensorType]) -> Kernel:
    """A parallel kernel (one ``numba.prange`` loop in its body) as two plain functions: the chunk
    function (one chunk of the loop: an iteration of a loop over chunks, ``REDUCE_CHUNKS`` fixed
    ranges of a loop over elements or rows; its arrays read from a frame of data addresses with
    ``array_at``) and the kernel (what comes before and after the loop, then the frame filled and
    ``runtime.parallel.parallel_for`` called through its address). Numba's parallel lowering then
    runs for ``parallel_for`` alone, once per machine, instead of for every kernel of every program
    (``runtime/parallel.py``). With nothing after the loop (no partial results to combine) the
    kernel is the chunk function alone (``Kernel.direct``: the driver allocates its scratch and
    runs it). Other kernels are returned as they are."""
    if kernel.objmode or not kernel.text:  # (a runtime function's call has no text)
        return kernel
    decorator, header, *body = kernel.text.split("\n")
    loops = [i for i, line in enumerate(body) if _PRANGE.fullmatch(line)]
    if ", parallel=True" not in decorator or len(loops) != 1:
        return kernel
    start = loops[0]
    end = start + 1
    while end < len(body) and body[end].startswith(" " * 8):
        end += 1
    before, chunk, after = body[:start], body[start + 1 : end], body[end:]
    if not all(_ASSIGN.fullmatch(line) for line in before):
        return kernel  # (only allocations and views precede a parallel loop today)
    frame = [
        (a, shape_literal(types[a].shape) if types[a].shape else "()", np_type(types[a].dtype))
        for a in kernel.args
    ]
    views, scratch_names = [], []
    for line in before:
        scratch = _SCRATCH.fullmatch(line)
        if scratch is None:
            views.append(line)
            continue
        name, shape, dtype = scratch.groups()
        frame.append((name, shape if shape.startswith("(") else f"({shape},)", dtype))
        scratch_names.append(name)
    defined = {line: line.split(" = ", 1)[0].strip() for line in views}
    kept = [line for line in before if line not in defined or mentions(after, [defined[line]])]
    index, extent = _PRANGE.fullmatch(body[start]).groups()  # type: ignore[union-attr]
    if index == "ch":  # chunks already: one per iteration
        chunks, loop = extent, [line[4:] for line in chunk]
    else:  # a loop over elements or rows: REDUCE_CHUNKS fixed ranges of it
        n, chunks = int(extent), str(min(REDUCE_CHUNKS, int(extent)))
        bounds = [f"    lo = ch * {n} // {chunks}", f"    hi = (ch + 1) * {n} // {chunks}"]
        flat = _chunk_views(views, defined, chunk, index, n)
        if flat is None:
            loop = [*bounds, f"    for {index} in range(lo, hi):", *chunk]
        else:  # each flat view sliced to the chunk: LLVM's overlap checks then pass, it vectorizes
            views, loop = flat, [f"    for {index} in range(hi - lo):", *chunk]
            views = bounds + views
    plain = decorator.replace(", parallel=True", "")
    chunk_name = f"{kernel.name}{CHUNK_SUFFIX}"
    calls = [(chunk_name, CHUNK_SIGNATURE), _PARALLEL_FOR_SLOT]
    chunk_text = [
        plain,
        f"def {chunk_name}(ch, frame):",
        *(
            f"    {name} = array_at(frame[{k}], {shape}, {dtype})"
            for k, (name, shape, dtype) in enumerate(frame)
        ),
        *views,
        *loop,
    ]
    if all(_SCRATCH.fullmatch(line) for line in kept) and not any(line.strip() for line in after):
        # nothing after the loop: the driver allocates the scratch, fills the frame and runs the
        # chunks (a function fewer to compile: ~0.07 s each)
        allocations = [line.strip() for line in kept]
        text = "\n".join(chunk_text)
        return Kernel(kernel.name, kernel.args, text, calls=calls, direct=chunks, scratch=allocations)
    run = [
        *kept,
        f"    frame = np.empty({len(frame)}, np.uint64)",
        f"    fill_frame(frame, {', '.join(name for name, _, _ in frame)})",
        f'    call_kernel(parallel_at, "{_PARALLEL_FOR_SIGNATURE}", chunk_at, {chunks}, frame)',
        *(f"    keep_alive({name})" for name in scratch_names if not mentions(after, [name])),
        *after,
    ]
    params = header[header.index("(") + 1 : header.rindex(")")]
    kernel_text = [plain, f"def {kernel.name}({params}, chunk_at, parallel_at):", *run]
    text = "\n".join(chunk_text) + "\n\n\n" + "\n".join(kernel_text)
    return Kernel(kernel.name, kernel.args, text, calls=calls)


def _chunk_views(
    views: list[str], defined: dict[str, str], chunk: list[str], index: str, n: int
) -> list[str] | None:
    """``views`` with every flat view of ``n`` elements sliced to ``[lo:hi]``, if the loop ``chunk``
    reads ``index`` only as the subscript of such views (a flat elementwise loop); else None. Looping
    over ``range(lo, hi)`` of the whole views instead, LLVM's run-time overlap check failed for some
    placements of the buffers and the loop ran scalar (0.7 against 0.07 ms, 2 MB f32 operands).
    ``defined`` names what each line of ``views`` assigns."""
    whole = {defined[line]: line for line in views if line.endswith(f".reshape({n})")}
    text = "\n".join(chunk)
    subscripted = re.findall(rf"(\w+)\[{index}\]", text)
    if not subscripted or len(subscripted) != len(re.findall(rf"\b{index}\b", text)):
        return None
    if not set(subscripted) <= set(whole):
        return None
    return [line + "[lo:hi]" if line in whole.values() else line for line in views]


# ---- row-block regions -----------------------------------------------------------------------------
# A run of consecutive kernels that each read row ``i`` of their row operands (leading dimension
# ``m``, the same for all) only to write row ``i`` of their results runs depth-first: the rows are cut
# into ``chunks`` blocks, spread over Numba's threads, and every kernel of the run does its block
# before the thread moves to the next block. The intermediates of a block then stay in the core's
# cache between kernels instead of going to L3 and back after every kernel (the second derivative,
# sixteen 4096-row matmuls and their elementwise passes: ``benchmarks/bench_depth_first.py``). The
# members are kernels the driver runs directly (chunk functions over row ranges of the same ``m``)
# and float matmuls of one batch element, whose left operand and result are row-major ``m``-row
# buffers (``runtime.blas.gemm_rows_block`` computes one block of rows on the register tiles). Each
# member's code is unchanged; the region is one more function, which runs the members' steps for a
# block (``_region_kernel``). The region's own buffers (``_internal``) hold one block per thread:
# their arena slots shrink to that, and the arena closes over the rest (``plan.resize_slots``), so
# the reported peak is the memory the program uses. It is exact only if no block can see another
# block's rows: checked per member from its chunk function's text (every access of an ``m``-row
# array at the loop's row, or through a flat view sliced to the chunk; nothing else written but
# per-chunk scratch) and, over the region, from the memory plan (arrays sharing arena bytes are both
# row arrays at the same offset with the same row size; arrays read whole, like a matmul's right
# operand, are never written).
REGION_MIN_BLOCK_ROWS = 32  # rows per block at least (the tiles' 8-row tiles, and their overhead)
# A matmul's right operand is read whole by every block: past this it costs more than it saves (the
# transformer's 1024x256 MLP projection, 32-row blocks: no gain).
REGION_MAX_RIGHT_BYTES = 256 << 10
_ARRAY_AT = re.compile(r"    (\w+) = array_at\(frame\[(\d+)\], (\([\d, ]*\)), np\.\w+\)")
_ROWS_LO = re.compile(r"    lo = ch \* (\d+) // (\d+)")
_ROW_LOOP = re.compile(r"    for (\w+) in range\(lo, hi\):")
_BAND_LOOP = re.compile(r"    for (\w+) in range\(ch \* (\d+) // (\d+), \(ch \+ 1\) \* \d+ // \d+\):")
_FLAT_VIEW = re.compile(r"    (\w+) = (\w+)\.reshape\((\d+)\)\[lo:hi\]")
_SCRATCH_ROW = re.compile(r"    (\w+) = (\w+)\[ch\]")
_STORE = re.compile(r"^\s*(\w+)\[[^=]*\] [-+*/]?= ")
_GEMM_PARAM_AT = {name: i for i, name in enumerate(blas.GEMM_ROWS_PARAMS)}  # a matmul's parameter array


@dataclass
class _Member:
    """One kernel of a region: what it reads and writes, by array name (the driver's)."""

    group: Group
    kernel: Kernel
    rows: int
    chunks: int
    row_arrays: set[str]
    whole_arrays: set[str]  # read whole (a broadcast operand, a matmul's right operand)
    written: set[str]
    read: set[str]  # the row arrays it reads (before or besides writing them)
    frame: list[str]  # what the region's frame row for this member holds, in order

    @property
    def block_rows(self) -> int:
        """Rows of the largest block (``ch * rows // chunks`` onwards)."""
        return -(-self.rows // self.chunks)


def _chunk_member(
    group: Group, kernel: Kernel, text: str, shapes: dict[str, tuple[int, ...]]
) -> _Member | None:
    """A directly-run kernel as a region member, if its chunk function (``text``) works on row
    ranges and touches nothing outside its chunk's rows but per-chunk scratch; else None."""
    scratch = [line.split(" = ", 1)[0] for line in kernel.scratch]
    actual = [*kernel.args, *scratch]  # the frame's arrays, as this call passes them
    lines = text.split("\n")[2:]
    local: dict[str, str] = {}  # the chunk function's array name -> the driver's
    body_start = 0
    for i, line in enumerate(lines):
        match = _ARRAY_AT.fullmatch(line)
        if match is None:
            body_start = i
            break
        local[match.group(1)] = actual[int(match.group(2))]
    body = lines[body_start:]
    private = {name for name, a in local.items() if a in scratch}
    rows = chunks = None
    index = None
    views: dict[str, str] = {}  # flat chunk view -> the array it slices
    for line in body:
        if (m := _ROWS_LO.fullmatch(line)) is not None:
            rows, chunks = int(m.group(1)), int(m.group(2))
        elif (m := _ROW_LOOP.fullmatch(line)) is not None:
            index = m.group(1)
        elif (m := _BAND_LOOP.fullmatch(line)) is not None:
            index, rows, chunks = m.group(1), int(m.group(2)), int(m.group(3))
        elif (m := _FLAT_VIEW.fullmatch(line)) is not None:
            views[m.group(1)] = m.group(2)
        elif (m := _SCRATCH_ROW.fullmatch(line)) is not None and m.group(2) in private:
            private.add(m.group(1))
    if rows is None or chunks is None:
        return None
    flat_rows = None
    if views:  # a flat loop: elements [ch * n // chunks, ...) are whole rows if every view is m rows
        if index is not None:
            return None
        sizes = {shapes[local[a]] for a in views.values()}
        if len(sizes) != 1:
            return None
        (shape,) = sizes
        if not shape or math.prod(shape) != rows or shape[0] % chunks:
            return None
        flat_rows, index = shape[0], "i"
    elif index is None:
        return None
    m_rows = flat_rows if flat_rows is not None else rows
    text_body = "\n".join(body)
    row_arrays, whole_arrays, written = set(), set(), set()
    for name, a in local.items():
        if name in private:
            continue
        shape = shapes[a]
        used = re.findall(rf"\b{name}\b(.{{0,{len(index) + 9}}})", text_body)
        flat = [v for v, base in views.items() if base == name]
        if flat:
            uses = [u for u in re.findall(rf"\b{flat[0]}\b(.{{0,3}})", text_body) if u != " = "]
            if any(not u.startswith(f"[{index}]") for u in uses) or any(
                not u.startswith(".reshape(") for u in used
            ):
                return None
            row_arrays.add(a)
        elif shape and shape[0] == m_rows and used:
            if flat_rows is not None or any(
                not (u.startswith(f"[{index},") or u.startswith(f"[{index}]")) for u in used
            ):
                return None
            row_arrays.add(a)
        elif used:
            whole_arrays.add(a)
    read: set[str] = set()
    base_of = {**{n: n for n in local}, **views}
    for line in body:
        if _FLAT_VIEW.fullmatch(line) or _SCRATCH_ROW.fullmatch(line):
            continue
        rhs = line
        if (m := _STORE.match(line)) is not None:
            target = base_of.get(m.group(1), m.group(1))
            rhs = line[m.end() :] + (" " + m.group(1) if not m.group(0).rstrip().endswith(" =") else "")
            if target not in private:
                if target not in local or local[target] not in row_arrays:
                    return None
                written.add(local[target])
        read.update(local[base_of[w]] for w in re.findall(r"\b\w+\b", rhs) if w in base_of)
    read &= row_arrays
    return _Member(group, kernel, m_rows, chunks, row_arrays, whole_arrays, written, read, actual)


def _gemm_member(
    group: Group, kernel: Kernel, shapes: dict[str, tuple[int, ...]], pool: ConstantPool
) -> _Member | None:
    """A matmul on the tiles as a region member: one batch element, its left operand and result
    row-major buffers of ``m`` rows read and written in place of each other row for row."""
    if kernel.name not in blas.GEMM_ROWS:  # (a block of any of them runs on the tiles where they fit)
        return None
    x, y, o, c, p_name, s_name = kernel.args
    p = dict(zip(blas.GEMM_ROWS_PARAMS, (int(v) for v in pool.arrays[p_name]), strict=True))
    m, n, k = p["m"], p["n"], p["k"]
    if p["copy"] or c != o or p["ta"] or p["blocks"] != p["parts"] or len({x, y, o}) != 3:
        return None
    if (
        shapes[x] != (m, k)
        or shapes[o] != (m, n)
        or (p["lda"], p["x_step"], p["ldc"], p["o_step"]) != (k, k, n, n)
    ):
        return None
    assert kernel.signature is not None
    itemsize = np.dtype(kernel.signature[0][0]).itemsize
    if k * n * itemsize > REGION_MAX_RIGHT_BYTES or k * itemsize > blas.TILE_MAX_DEPTH_BYTES:
        return None
    accumulates = float(pool.arrays[s_name][1]) != 0.0  # beta: o's old rows are read
    return _Member(
        group, kernel, m, REDUCE_CHUNKS, {x, o}, {y}, {o}, {x, o} if accumulates else {x}, [x, y, o]
    )


@dataclass
class _Storage:
    base: str
    offset: int
    nbytes: int


def _storage(names: dict[Value, str], plan: MemoryPlan, func: Function) -> dict[str, _Storage]:
    """Where each named buffer lives: the arena at an offset, a donated or written-back argument,
    or memory of its own."""
    params = [names[p] for p in func.params]
    out = {}
    for v, name in names.items():
        nbytes = v.type.nbytes
        if v in plan.direct_writeback:
            out[name] = _Storage(params[plan.direct_writeback[v]], 0, nbytes)
        elif v in plan.in_param:
            out[name] = _Storage(params[plan.in_param[v]], 0, nbytes)
        elif v in plan.offsets:
            out[name] = _Storage("arena", plan.offsets[v], nbytes)
        else:
            out[name] = _Storage(name, 0, nbytes)
    return out


def _fits(region: list[_Member], member: _Member, storage: dict[str, _Storage]) -> bool:
    """Whether ``member`` can join ``region`` (row-locality over the whole region; the comment above)."""
    members = [*region, member]
    if len({(mb.rows, mb.chunks) for mb in members}) != 1:
        return False
    rows_of = set().union(*(mb.row_arrays for mb in members))
    whole = set().union(*(mb.whole_arrays for mb in members))
    written = set().union(*(mb.written for mb in members))
    if whole & written:
        return False
    arrays = sorted(rows_of | whole)
    if any(a not in storage for a in arrays):
        return False
    for i, a in enumerate(arrays):
        sa = storage[a]
        for b in arrays[i + 1 :]:
            sb = storage[b]
            if sa.base != sb.base or sa.offset + sa.nbytes <= sb.offset or sb.offset + sb.nbytes <= sa.offset:
                continue
            same = sa.offset == sb.offset and sa.nbytes == sb.nbytes
            if not (same and a in rows_of and b in rows_of and not ({a, b} & whole)):
                return False
    return True


def _row_block_regions(
    fusion: FusionPlan,
    kernels: dict[Group, Kernel],
    types_by_name: dict[str, TensorType],
    storage: dict[str, _Storage],
    pool: ConstantPool,
    returned: set[str],
) -> tuple[dict[Group, Kernel], list[Kernel], dict[Group, list[Group]], dict[int, tuple[int, str]]]:
    """``kernels`` with each row-block region (the comment above) as one kernel at its first member's
    group; the members it took over (their texts and chunk functions stay in the module); per
    region, the groups whose buffers the driver must have allocated before it runs; and the arena
    slots of the regions' own buffers, with the bytes they need (``plan.resize_slots``): one block
    of rows per thread."""
    shapes = {name: t.shape for name, t in types_by_name.items()}
    texts = {k.calls[0][0]: k.text for k in kernels.values() if k.direct is not None and k.text}
    regions: list[list[_Member]] = []
    current: list[_Member] = []
    spans: list[list[Group]] = []
    span: list[Group] = []

    def close() -> None:
        nonlocal current, span
        gemms = sum(mb.kernel.direct is None for mb in current)
        if len(current) >= 2 and gemms:
            regions.append(current)
            spans.append(span[: span.index(current[-1].group) + 1])
        current, span = [], []

    for group in fusion.groups:
        kernel = kernels.get(group)
        if kernel is None:
            if current:
                span.append(group)
            continue
        member = None
        if kernel.direct is not None and kernel.calls[0][0] in texts:
            member = _chunk_member(group, kernel, texts[kernel.calls[0][0]], shapes)
            if member is not None and str(member.chunks) != kernel.direct:
                member = None
        elif kernel.text == "" and kernel.name in blas.GEMM_ROWS:
            member = _gemm_member(group, kernel, shapes, pool)
        if member is not None and member.rows // member.chunks < REGION_MIN_BLOCK_ROWS:
            member = None
        if member is not None and current and _fits(current, member, storage):
            current.append(member)
            span.append(group)
            continue
        close()
        if member is not None:
            current, span = [member], [group]
    close()
    out = dict(kernels)
    absorbed: list[Kernel] = []
    hoist: dict[Group, list[Group]] = {}
    slots: dict[int, tuple[int, str]] = {}
    arena = sorted(
        (st.offset, st.offset + st.nbytes, name) for name, st in storage.items() if st.base == "arena"
    )
    for index, (members, groups) in enumerate(zip(regions, spans, strict=True)):
        first = members[0].group
        inside = set(groups)
        used_outside = set(returned)
        for group, kernel in kernels.items():
            if group not in inside:
                used_outside.update(kernel.args, (line.split(" = ", 1)[0] for line in kernel.scratch))
        internal = _internal(members, storage, arena, used_outside)
        out[first] = _region_kernel(index, members, types_by_name, pool, internal)
        rows, block_rows, threads = members[0].rows, members[0].block_rows, numba_threads()
        for name, row_bytes in internal.items():
            why = f"in region{index}: {threads} blocks of {block_rows} of its {rows} rows, one per thread"
            slots[storage[name].offset] = (threads * block_rows * row_bytes, why)
        hoist[first] = groups
        for group in groups[1:]:
            out.pop(group, None)
        absorbed += [mb.kernel for mb in members if mb.kernel.direct is not None]
    return out, absorbed, hoist, slots


def _internal(
    members: list[_Member],
    storage: dict[str, _Storage],
    arena: list[tuple[int, int, str]],
    used_outside: set[str],
) -> dict[str, int]:
    """The region's own buffers, which live in one block per thread instead of whole
    (``_region_kernel``): name -> bytes per row. A slot of the arena
    (the row arrays of the region at one offset: a value and those written in its place) is the
    region's own if every buffer sharing its bytes is one of them, none is used outside the region
    (by another kernel, or returned), and the first member touching it writes it without reading it
    (so no value from before the region lives there)."""
    rows = members[0].rows
    row_arrays = set().union(*(mb.row_arrays for mb in members))
    by_offset: dict[int, set[str]] = defaultdict(set)
    for name in row_arrays:
        if storage[name].base == "arena":
            by_offset[storage[name].offset].add(name)
    starts = [start for start, _, _ in arena]
    longest = max((end - start for start, end, _ in arena), default=0)
    out: dict[str, int] = {}
    for offset, slot in sorted(by_offset.items()):
        nbytes = storage[next(iter(slot))].nbytes
        lo = bisect.bisect_left(starts, offset - longest + 1)
        hi = bisect.bisect_left(starts, offset + nbytes)
        sharing = {n for start, end, n in arena[lo:hi] if end > offset}
        if sharing != slot or slot & used_outside:
            continue
        first = next(mb for mb in members if mb.row_arrays & slot)
        if not (first.written & slot) or first.read & slot:
            continue
        out.update((name, nbytes // rows) for name in slot)
    return out


def _region_kernel(
    index: int,
    members: list[_Member],
    types_by_name: dict[str, TensorType],
    pool: ConstantPool,
    internal: dict[str, int],
) -> Kernel:
    """The region as a kernel: its chunk function (every member's step for block ``ch``) and the
    function that runs the chunks. The driver fills one frame row per member (the arrays the member
    would be called with). The region's own buffers (``internal``) live in one block per thread: a
    chunk's copy of a member's frame row points each at its thread's block minus the block's first
    row, so the member's row indices land there. Thread t's block is the t-th of the buffer's arena
    slot, which holds one block per thread (``_row_block_regions`` resizes it). The matmuls'
    transposed right operands are transposed once per call, rather than every block copying them."""
    name = f"region{index}"
    count, width, chunks = len(members), max(len(mb.frame) for mb in members), members[0].chunks
    rows = members[0].rows
    frames = f"rframes{index}"
    plain = jit_decorator()
    chunk = [
        plain,
        f"def {name}{CHUNK_SUFFIX}(ch, frame):",
        f"    frames = array_at(frame[0], ({count}, {width}), np.uint64)",
    ]
    block_rows = members[0].block_rows
    if internal:  # this chunk's frame rows: the region's own buffers in the thread's block
        chunk += [
            f"    r0 = ch * {rows} // {chunks}",
            "    tid = np.uint64(numba.get_thread_id())",  # below the pool's size (numba_threads)
            "    frames = frames.copy()",
        ]
    run, after = [], []
    transposed: dict[tuple[str, int, int, int], int] = {}  # a right operand's copy: the member holding it
    calls: list[tuple[str, list[tuple[str, int | None]]]] = []
    setup = [f"{frames} = np.empty(({count}, {width}), np.uint64)"]
    teardown = []
    for j, mb in enumerate(members):
        frame = list(mb.frame)
        row = f"frames[{j}]"
        chunk += [
            f"    {row}[{q}] += tid * np.uint64({block_rows * row_bytes}) - np.uint64(r0 * {row_bytes})"
            for q, row_bytes in ((q, internal[a]) for q, a in enumerate(frame) if a in internal)
        ]
        if mb.kernel.direct is not None:
            renames = {}  # the member's per-chunk scratch, named apart from other members'
            for line in mb.kernel.scratch:
                scratch_name, allocation = line.split(" = ", 1)
                renames[scratch_name] = f"{scratch_name}_r{index}m{j}"
                setup.append(f"{renames[scratch_name]} = {allocation}")
            frame = [renames.get(a, a) for a in frame]
            teardown += [f"keep_alive({a})" for a in renames.values()]
            calls.append(mb.kernel.calls[0])
            chunk.append(f'    call_kernel(frame[{1 + j}], "{signature_string(CHUNK_SIGNATURE)}", ch, {row})')
        else:
            x, y, o, _, p_name, s_name = mb.kernel.args
            assert mb.kernel.signature is not None
            dtype = np_type(types_by_name[o].dtype)
            p = pool.arrays[p_name].copy()
            at = _GEMM_PARAM_AT
            y_size = math.prod(types_by_name[y].shape)
            if p[at["tb"]]:  # B stored n x k: a k x n copy, once per call, for every block to read
                k, n, ldb = (int(p[at[key]]) for key in ("k", "n", "ldb"))
                if (y, k, n, ldb) in transposed:  # another member's copy of the same operand
                    run.append(f"    frames[{j}, 1] = frames[{transposed[y, k, n, ldb]}, 1]")
                else:
                    transposed[y, k, n, ldb] = j
                    after.append(f"    keep_alive(w{j})")
                    run += [
                        f"    y{j} = array_at(frames[{j}, 1], ({y_size},), {dtype})",
                        f"    w{j} = np.empty({k * n}, {dtype})",
                        f"    for s in range({k}):",
                        f"        for c in range({n}):",
                        f"            w{j}[s * {n} + c] = y{j}[c * {ldb} + s]",
                        f"    at{j} = np.empty(1, np.uint64)",
                        f"    fill_frame(at{j}, w{j})",
                        f"    frames[{j}, 1] = at{j}[0]",
                    ]
                p[at["tb"]], p[at["ldb"]], y_size = 0, n, k * n
                p_name = pool.add(p)
            sizes = [math.prod(types_by_name[x].shape), y_size, math.prod(types_by_name[o].shape)]
            block_signature = [*mb.kernel.signature, ("int64", None), ("int64", None)]
            calls.append(("gemm_rows_block", block_signature))
            chunk += [
                f"    g{j}_{q} = array_at({row}[{q}], ({size},), {dtype})" for q, size in enumerate(sizes)
            ]
            operands = f"g{j}_0, g{j}_1, g{j}_2, g{j}_2, {p_name}, {s_name}, ch, {chunks}"
            block = signature_string(block_signature)
            chunk.append(f'    call_kernel(frame[{1 + j}], "{block}", {operands})')
        setup.append(f"fill_frame({frames}[{j}], {', '.join(frame)})")
    params = [f"m{j}_at" for j in range(count)]
    calls += [(f"{name}{CHUNK_SUFFIX}", CHUNK_SIGNATURE), _PARALLEL_FOR_SLOT]
    function = [
        plain,
        f"def {name}(frames, {', '.join(params)}, chunk_at, parallel_at):",
        *run,
        f"    frame = np.empty({count + 1}, np.uint64)",
        "    fill_frame(frame, frames)",
        *(f"    frame[{1 + j}] = {p}" for j, p in enumerate(params)),
        f'    call_kernel(parallel_at, "{_PARALLEL_FOR_SIGNATURE}", chunk_at, {chunks}, frame)',
        *after,
    ]
    text = "\n".join(chunk) + "\n\n\n" + "\n".join(function)
    signature: list[tuple[str, int | None]] = [("uint64", 2)] + [("uint64", None)] * len(calls)
    return Kernel(name, [frames], text, signature=signature, calls=calls, setup=setup, teardown=teardown)


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


def _prelude(pool: ConstantPool, kernels: Iterable[Kernel]) -> str:
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
    used = {name for name in vecmath.HELPERS if any(f"{name}(" in k.text for k in kernels)}
    if "vector_math" not in OPTIMIZATIONS:  # the plain libm spellings
        lines += [f"{name} = math.{name.removesuffix('_f32')}" for name in vecmath.F32_MATH if name in used]
        used -= set(vecmath.F32_MATH)
    if used:
        source = vecmath.helper_source(used)
        if "fma(" in source:
            lines += _fma_binding()
        lines += ["", "", source]
    if any(name in blas.GEMM_ROWS for k in kernels for name in [k.name, *(c for c, _ in k.calls)]):
        library = blas.vendor() if _split_matmuls() else "openblas"  # MKL runs sequential: split only
        chosen = "" if library == "openblas" else f'"{library}"'
        lines += ["", "from runtime.blas import gemm_rows_functions, single_threaded_blas", ""]
        lines.append(f"{', '.join(blas.GEMM_ROWS)} = gemm_rows_functions({chosen})")
        if _split_matmuls() and library == "openblas":
            lines.append("single_threaded_blas()")
    lines += ["", "from runtime.intrinsics import buffer_view_function, call_kernel_function", ""]
    lines += ["buffer_view = buffer_view_function()", "call_kernel = call_kernel_function()"]
    if any(k.calls for k in kernels):
        lines += ["", "from runtime.intrinsics import frame_functions"]
        lines += ["from runtime.parallel import parallel_for_function", ""]
        lines += ["array_at, keep_alive, fill_frame = frame_functions()"]
        lines.append(f"{PARALLEL_FOR} = parallel_for_function()")
    if any(k.objmode for k in kernels):
        lines += ["", arraylevel.PRELUDE]
    if pool.arrays:
        # The runtime saves the constants beside this file (same name, .npz); Numba freezes them.
        lines += ["", 'with np.load(__file__[:-3] + ".npz") as _constants:']
        lines += [f'    {name} = _constants["{name}"]' for name in pool.arrays]
    return "\n".join(lines)


def _fma_binding() -> list[str]:
    """What the helpers' ``fma(a, b, c)`` is: the contracting multiply-add (``runtime/intrinsics.py``),
    or with ``fused_multiply_add`` off a plain multiply and add."""
    if "fused_multiply_add" in OPTIMIZATIONS:
        return ["", "from runtime.intrinsics import fmuladd_function", "", "fma = fmuladd_function()"]
    return ["", "", '@numba.njit(inline="always")', "def fma(a, b, c):", "    return a * b + c"]


def _allocation(v: Value, plan: MemoryPlan, params: list[str], resized: dict[Value, int]) -> str:
    t = v.type
    if v in plan.direct_writeback:  # the new value of an argument, stored into the caller's array
        return params[plan.direct_writeback[v]]
    if v in plan.in_param:  # lives in a donated argument's memory
        return f"buffer_view({params[plan.in_param[v]]}, 0, {shape_literal(t.shape)}, {np_type(t.dtype)})"
    offset = plan.offsets.get(v)
    if offset is None:  # a function result (fresh per call) or a zero-size value
        return f"np.empty({shape_literal(t.shape)}, {np_type(t.dtype)})"
    if v in resized:  # a row-block region's own buffer: its threads' blocks (the region's frames)
        return f"buffer_view(arena, {offset}, ({resized[v] // t.dtype.np.itemsize},), {np_type(t.dtype)})"
    return f"buffer_view(arena, {offset}, {shape_literal(t.shape)}, {np_type(t.dtype)})"


def _driver(
    func: Function,
    fusion: FusionPlan,
    plan: MemoryPlan,
    kernels: dict[Group, Kernel],
    names: dict[Value, str],
    outs: list[Value],
    slots: list[tuple[str, list[tuple[str, int | None]]]],
    poison: dict[Group, list[BufferRow]] | None = None,
    hoist: dict[Group, list[Group]] | None = None,
) -> str:
    arg_names = [names[p] for p in func.params]
    params = ["arena", TABLE, *(names[v] for v in outs), *arg_names]
    slot_index = {(name, tuple(signature)): i for i, (name, signature) in enumerate(slots)}
    passed_in = set(outs)
    body = []
    local = fusion.local
    hoisted: set[Group] = set()
    resized = {r.value: r.bytes for r in plan.buffers if r.stored_as}
    for group in fusion.groups:
        # a row-block region's buffers (every member's) exist before it runs
        for g in [] if group in hoisted else (hoist or {}).get(group, [group]):
            hoisted.add(g)
            band = fusion.band_of.get(g)
            if band is None or g is band.groups[0]:  # a band's buffers exist before its kernel runs
                stored = [v for b in (band.groups if band else [g]) for v in b.outputs]
                body += [
                    f"{names[v]} = {_allocation(v, plan, arg_names, resized)}"
                    for v in stored
                    if v not in passed_in and v not in local
                ]
        kernel = kernels.get(group)
        if kernel is not None and kernel.objmode:
            body += ["with numba.objmode():", f"    {kernel.name}({', '.join(kernel.args)})"]
        elif kernel is not None and kernel.direct is not None:
            chunk, run_chunks = (f"{TABLE}[{slot_index[n, tuple(sig)]}]" for n, sig in kernel.calls)
            scratch = [line.split(" = ", 1)[0] for line in kernel.scratch]
            body += [*kernel.scratch, f"fill_frame(frame, {', '.join([*kernel.args, *scratch])})"]
            call = [run_chunks, f'"{_PARALLEL_FOR_SIGNATURE}"', chunk, kernel.direct, "frame"]
            body.append(f"call_kernel({', '.join(call)})  # {kernel.name}")
            body += [f"keep_alive({name})" for name in scratch]  # the chunks reach it by address
        elif kernel is not None:
            name, signature = _slot(kernel)
            index = slot_index[name, tuple(signature)]
            call = [f"{TABLE}[{index}]", f'"{signature_string(signature)}"', *kernel.args]
            call += [f"{TABLE}[{slot_index[callee, tuple(sig)]}]" for callee, sig in kernel.calls]
            body += [*kernel.setup, f"call_kernel({', '.join(call)})  # {kernel.name}", *kernel.teardown]
        for row in (poison or {}).get(group, []):
            dtype = row.value.type.dtype
            view = f"buffer_view(arena, {row.offset}, ({row.bytes // dtype.np.itemsize},), {np_type(dtype)})"
            body.append(f"{view}[:] = {literal(poison_value(dtype), dtype)}")
    results, seen = [], set(func.params)
    for v in func.results:  # a param or a repeated value is copied: results never alias anything
        results.append(names[v] + (".copy()" if v in seen else ""))
        seen.add(v)
    ret = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
    objmode = any(k.objmode for k in kernels.values())  # object mode holds the GIL anyway
    header = [jit_decorator(nogil=not objmode), f"def {ENTRY}({', '.join(params)}):"]
    frames = [len(k.args) + len(k.scratch) for k in kernels.values() if k.direct is not None]
    if frames:  # one frame for every kernel the driver runs directly (one at a time)
        body.insert(0, f"frame = np.empty({max(frames)}, np.uint64)")
    lines = [*header, *indent([*body, f"return {ret}"], 1)]
    return "\n".join(lines)
