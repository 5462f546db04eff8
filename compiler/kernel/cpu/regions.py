"""Row-block regions: a run of consecutive CPU kernels that read row ``i`` only to write row ``i``
runs depth-first, block of rows by block of rows (the comment below). Legality is decided on the
members' kernel IR (their chunk functions' recorded loads and stores) and the memory plan."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from compiler.ir.core import Function, Value
from compiler.ir.types import TensorType
from compiler.kernel.cpu.parallel import CHUNK_SUFFIX, PARALLEL_FOR_SLOT, PARALLEL_FOR_TEXT
from compiler.kernel.cpu.records import Kernel, Scratch, jit_decorator, numba_threads
from compiler.kernel.emit import ConstantPool, np_type
from compiler.kernel.ir import Line, View, reads, walk, writes
from compiler.passes.fuse import FusionPlan, Group, GroupKind
from compiler.passes.plan import MemoryPlan
from compiler.passes.rows import REDUCE_CHUNKS
from runtime import blas
from runtime.intrinsics import signature_string
from runtime.parallel import CHUNK_SIGNATURE

# ---- row-block regions -----------------------------------------------------------------------------
# A run of consecutive kernels that each read row ``i`` of their row operands (leading dimension
# ``m``, the same for all) only to write row ``i`` of their results runs depth-first: the rows are cut
# into ``chunks`` blocks, spread over Numba's threads, and every kernel of the run does its block
# before the thread moves to the next block. The intermediates of a block then stay in the core's
# cache between kernels instead of going to L3 and back after every kernel (the second derivative,
# sixteen 4096-row matmuls and their elementwise passes: ``benchmarks/results/notes.md``). The
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


def _chunk_member(group: Group, kernel: Kernel, shapes: dict[str, tuple[int, ...]]) -> _Member | None:
    """A directly-run kernel as a region member, if its chunk function (``kernel.chunk``, kernel IR)
    works on row ranges and touches nothing outside its chunk's rows but per-chunk scratch; else
    None. Decided on the loads and stores its statements record."""
    chunk = kernel.chunk
    if chunk is None or chunk.form == "chunks":
        return None
    actual = kernel.args  # the frame's arrays (its scratch among them), as this call passes them
    local = dict(zip(chunk.frame, actual, strict=True))  # the chunk function's array name -> the driver's
    scratch = {s.name for s in kernel.scratch}
    private = {name for name, a in local.items() if a in scratch}
    views: dict[str, str] = {}  # flat chunk view -> the array it slices
    for s in walk(chunk.body):
        if isinstance(s, View) and s.row is not None and s.base in private:
            private.add(s.name)
        elif isinstance(s, View) and s.chunk:
            views[s.name] = s.base
    rows, chunks, index = chunk.n, chunk.chunks, chunk.var
    flat_rows = None
    if chunk.form == "flat":  # elements [ch * n // chunks, ...) are whole rows if every view is m rows
        sizes = {shapes[local[a]] for a in views.values()}
        if len(sizes) != 1:
            return None
        (shape,) = sizes
        if not shape or math.prod(shape) != rows or shape[0] % chunks:
            return None
        flat_rows = shape[0]
    m_rows = flat_rows if flat_rows is not None else rows
    accesses = [*reads(chunk.body), *writes(chunk.body)]
    reshaped = {s.base for s in walk(chunk.body) if isinstance(s, View)}
    row_arrays, whole_arrays, written = set(), set(), set()
    for name, a in local.items():
        if name in private:
            continue
        shape = shapes[a]
        used = [acc.index for acc in accesses if acc.array == name]
        flat = [v for v, base in views.items() if base == name]
        if flat:
            if used or any(acc.index != (index,) for acc in accesses if acc.array == flat[0]):
                return None
            row_arrays.add(a)
        elif shape and shape[0] == m_rows and (used or name in reshaped):
            if flat_rows is not None or name in reshaped or any(at[:1] != (index,) for at in used):
                return None
            row_arrays.add(a)
        elif used or name in reshaped:
            whole_arrays.add(a)
    read: set[str] = set()
    base_of = {**{n: n for n in local}, **views}
    for s in walk(chunk.body):
        if not isinstance(s, Line):
            continue
        for w in s.writes:
            target = base_of.get(w.array, w.array)
            if target not in private:
                if target not in local or local[target] not in row_arrays:
                    return None
                written.add(local[target])
        read.update(local[base_of[r.array]] for r in s.reads if r.array in base_of)
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


def storage_of(names: dict[Value, str], plan: MemoryPlan, func: Function) -> dict[str, _Storage]:
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
        elif v in plan.in_result:  # in a result's memory: that result's own storage
            out[name] = _Storage(names[plan.in_result[v]], 0, nbytes)
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


def row_block_regions(
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
        if group.kind is GroupKind.CONTROL:  # a loop runs other kernels in between: no region spans it
            close()
            continue
        kernel = kernels.get(group)
        if kernel is None:
            if current:
                span.append(group)
            continue
        member = None
        if kernel.direct is not None:
            member = _chunk_member(group, kernel, shapes)
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
                used_outside.update(kernel.args)  # (its scratch among them)
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
    transposed right operands are transposed once per call, rather than every block copying them,
    into scratch of the region (a parameter after the frames). The region's scratch is its own and
    its members' (``Kernel.scratch``), arena views the driver names in the frames."""
    name = f"{pool.prefix}region{index}"
    count, width, chunks = len(members), max(len(mb.frame) for mb in members), members[0].chunks
    rows = members[0].rows
    frames = f"{pool.prefix}rframes{index}"
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
    run: list[str] = []
    transposed: dict[tuple[str, int, int, int], int] = {}  # a right operand's copy: the member holding it
    calls: list[tuple[str, list[tuple[str, int | None]]]] = []
    setup = [f"{frames} = np.empty(({count}, {width}), np.uint64)"]
    scratch = [s for mb in members for s in mb.kernel.scratch]
    copies: list[tuple[str, Scratch]] = []  # the transposed right operands: parameter, scratch
    for j, mb in enumerate(members):
        frame = list(mb.frame)
        row = f"frames[{j}]"
        chunk += [
            f"    {row}[{q}] += tid * np.uint64({block_rows * row_bytes}) - np.uint64(r0 * {row_bytes})"
            for q, row_bytes in ((q, internal[a]) for q, a in enumerate(frame) if a in internal)
        ]
        if mb.kernel.direct is not None:  # (its scratch: views of the arena among its arguments)
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
                    copies.append((f"w{j}", Scratch(f"{name}_w{j}", (k * n,), types_by_name[o].dtype)))
                    run += [
                        f"    y{j} = array_at(frames[{j}, 1], ({y_size},), {dtype})",
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
    calls += [(f"{name}{CHUNK_SUFFIX}", CHUNK_SIGNATURE), PARALLEL_FOR_SLOT]
    function = [
        plain,
        f"def {name}({', '.join(['frames', *(w for w, _ in copies), *params])}, chunk_at, parallel_at):",
        *run,
        f"    frame = np.empty({count + 1}, np.uint64)",
        "    fill_frame(frame, frames)",
        *(f"    frame[{1 + j}] = {p}" for j, p in enumerate(params)),
        f'    call_kernel(parallel_at, "{PARALLEL_FOR_TEXT}", chunk_at, {chunks}, frame)',
    ]
    text = "\n".join(chunk) + "\n\n\n" + "\n".join(function)
    signature: list[tuple[str, int | None]] = [("uint64", 2)]
    signature += [(s.dtype.np.name, 1) for _, s in copies] + [("uint64", None)] * len(calls)
    args = [frames, *(s.name for _, s in copies)]
    scratch += [s for _, s in copies]
    return Kernel(name, args, text, signature=signature, calls=calls, setup=setup, scratch=scratch)
