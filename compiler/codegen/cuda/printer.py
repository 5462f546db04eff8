"""The CUDA printer of the kernel IR: a ``CudaKernel`` as the text of a ``numba.cuda.jit`` function
(a band's launch constants before it). Loops print as Python ``range`` loops whose start and step
are thread and block coordinates; a ``BlockReduce`` of strategy "tree" as halving steps through
shared memory, of strategy "shuffle" as warp shuffles (the tree under the CUDA simulator, which has
none: the module's ``SIM`` constant picks one, and Numba drops the other branch on a GPU)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from compiler.ir.types import DType
from compiler.kernel.cuda.records import CudaKernel, text
from compiler.kernel.emit import literal, typed
from compiler.kernel.ir import Access, Alloc, Barrier, BlockReduce, For, Line, Stmt, View, print_python


def numba_type(dtype: DType) -> str:
    """The Numba scalar type (of shared arrays), as generated code spells it."""
    return "numba.boolean" if dtype.is_bool else f"numba.{dtype.np.name}"


def kernel_text(kernel: CudaKernel) -> str:
    header = ["@cuda.jit(cache=not SIM)", f"def {kernel.name}({', '.join(kernel.ir.params)}):"]
    text = "\n".join(header + (print_cuda(kernel.ir.body, 1) or ["    pass"]))
    if kernel.constants:  # read by the kernel as compile-time constants
        text = "\n".join(f"{name} = {expr}" for name, expr in kernel.constants) + "\n\n\n" + text
    return text


def launch_text(kernel: CudaKernel) -> str:
    return f"[{kernel.launch.grid}, {kernel.launch.block}, stream]"


def print_cuda(body: Sequence[Stmt], depth: int = 0) -> list[str]:
    """``body`` as a CUDA kernel's lines: the kernel IR's Python (a loop spread over threads or
    blocks by its start and step, not by ``prange``), with the GPU's own statements."""
    return print_python(body, depth, _gpu_statement, prange=False)


def _gpu_statement(s: Stmt) -> list[str] | None:
    if isinstance(s, For) and s.unroll > 1:
        return _unrolled(s)
    if isinstance(s, Alloc):
        if not s.shared:
            raise TypeError(f"{s.name}: a CUDA kernel allocates only shared memory (its scratch is planned)")
        shape = str(s.shape[0]) if len(s.shape) == 1 else "(" + ", ".join(map(str, s.shape)) + ")"
        return [f"{s.name} = cuda.shared.array({shape}, {numba_type(s.dtype)})"]
    if isinstance(s, Barrier):
        return ["cuda.syncthreads()"]
    if isinstance(s, BlockReduce):
        return _block_reduce(s)
    if isinstance(s, View):
        raise TypeError("a CUDA kernel indexes flat buffers: no views")
    return None


def _unrolled(loop: For) -> list[str]:
    """A loop (``For.unroll``, ``kernel/cuda/loops.unrollable``: an elementwise grid-stride loop, a
    reduction's loop, a band's row loop) as a ``while`` whose trip runs ``unroll`` of the thread's
    iterations, ``step`` apart: first the loads of every iteration whose position needs no loaded
    value (``_l{k}_{j}``, ``_hoisted``), after the index statements they need; then every iteration's
    statements in order (an accumulator adds them in the plain loop's order: the same bits), with its
    stores' values kept (``_u{k}_{j}``) and their positions (``_i{k}_{j}_{d}``: an index statement of
    the iteration may compute one, and the next redefine it), then the stores; then the thread's
    remaining iterations one at a time. A variable an iteration defines may be redefined by the next
    (Numba's SSA keeps them apart), and no store comes before the last load.

    Each hoisted load is pinned there (``_pin``: ``runtime/cuda_intrinsics.py``): LLVM otherwise sinks
    it to its first use, and ptxas then keeps it behind the previous iteration's branches (a float
    division's slow path), so that a thread had one load in flight, not ``unroll``."""
    var, u = loop.var, loop.unroll
    base, step = f"{var}_b", f"{var}_s"
    body = loop.body
    assert all(isinstance(s, Line) for s in body), "kernel/cuda/loops.unrollable: straight-line statements"
    hoisted, index = _hoisted(body, var)  # type: ignore[arg-type]
    loads: list[str] = []
    trip: list[str] = []
    stores: list[str] = []
    for k in range(u):
        at = f"{var} = {base}" + (f" + {k} * {step}" if k else "")
        loads.append(at)
        trip.append(at)
        for j, s in enumerate(body):
            assert isinstance(s, Line)
            if j in hoisted:
                name, access = hoisted[j]
                loads.append(f"_l{k}_{j} = _pin({access})")  # (runtime/cuda_intrinsics.py)
                trip.append(f"{name} = _l{k}_{j}")
                continue
            if j in index:
                loads.append(str(s.text))
            if not s.writes:
                trip.append(s.text)
                continue
            place = s.writes[0]
            trip.append(f"_u{k}_{j} = {s.text.removeprefix(text(place) + ' = ')}")
            at_k = []  # its position as the iteration computed it (an index statement may define it)
            for d, e in enumerate(place.index):
                if e == var:
                    at_k.append(f"{base} + {k} * {step}" if k else base)
                    continue
                trip.append(f"_i{k}_{j}_{d} = {e}")
                at_k.append(f"_i{k}_{j}_{d}")
            stores.append(f"{text(Access(place.array, tuple(at_k)))} = _u{k}_{j}")
    rest = For(var, loop.stop, loop.body, base, loop.parallel, loop.flat, step)
    return [
        f"{base} = {loop.start}",
        f"{step} = {loop.step}",
        f"while {base} + {u - 1} * {step} < {loop.stop}:",
        *_indent([*loads, *trip, *stores, f"{base} += {u} * {step}"]),
        *print_cuda([rest]),
    ]


_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _hoisted(body: list[Line], var: str) -> tuple[dict[int, tuple[str, str]], set[int]]:
    """An unrolled loop's loads an iteration may issue before its arithmetic, ``{j: (name,
    element)}`` (statements ``name = array[index]``), and the index statements they need, ``{j}``
    (statements that neither load nor store and compute from no loaded value: ``i0 = r``).

    A name is *loaded* if any statement of the body defines it from a load or from a loaded name (an
    accumulator, a temporary), wherever it stands, or defines it twice, or from itself: no hoisted
    statement reads a value an earlier iteration's arithmetic changes, and a load whose index reads
    a loaded name, or a name the body defines only later (the last iteration's), stays in place. A
    body with a statement this reading cannot follow (not ``name = value`` and not a store) hoists
    nothing."""
    parts = [str(s.text).partition(" = ") for s in body]
    defined = [name if sep and name.isidentifier() else None for name, sep, _ in parts]
    if any(d is None and not s.writes for s, d in zip(body, defined, strict=True)):
        return {}, set()
    uses = [set(_NAME.findall(value if sep else name)) for name, sep, value in parts]
    seen: set[str] = set()
    loaded = set()
    for s, d, u in zip(body, defined, uses, strict=True):
        if d and (s.reads or d in seen or d in u):
            loaded.add(d)
        seen |= {d} if d else set()
    grown = True
    while grown:  # names computed from loaded ones, anywhere in the body
        new = {d for d, u in zip(defined, uses, strict=True) if d and u & loaded} - loaded
        loaded |= new
        grown = bool(new)
    hoisted: dict[int, tuple[str, str]] = {}
    index: set[int] = set()
    used_before: set[str] = set()  # (a name read before its statement carries the last iteration's)
    for j, s in enumerate(body):
        name, value = defined[j], parts[j][2]
        later = {d for d in defined[j + 1 :] if d}  # (read here, defined after: the last iteration's)
        if not s.writes and name is not None and name not in used_before and not uses[j] & later:
            if not s.reads:  # (one reading a loaded name is loaded itself: the fixpoint above)
                if name not in loaded:
                    index.add(j)
            elif len(s.reads) == 1 and value == text(s.reads[0]) and not uses[j] & loaded:
                hoisted[j] = (name, value)
        used_before |= uses[j]
    needed = set().union(*(uses[j] for j in hoisted))  # only the index statements the loads read
    for j in sorted(index, reverse=True):
        if defined[j] in needed:
            needed |= uses[j]
        else:
            index.discard(j)
    return hoisted, index


def _block_reduce(r: BlockReduce) -> list[str]:
    if r.strategy == "tree":
        return _tree(r)
    if r.strategy == "shuffle":  # the simulator runs kernels as Python threads, without warp shuffles
        return ["if SIM:", *_indent(_tree(r)), "else:", *_indent(_shuffle(r))]
    raise ValueError(f"block reduce strategy {r.strategy!r}: the CUDA printer knows 'tree' and 'shuffle'")


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _tree(r: BlockReduce) -> list[str]:
    """Halving steps: the first ``s`` lanes of ``width`` combine their slot with the slot ``s``
    above, ``s`` = width/2, width/4 ... 1, a barrier after each: a fixed order."""
    mine, theirs = f"{r.prefix}mine", f"{r.prefix}theirs"
    return [
        f"{r.sm}[tid] = {r.acc}",
        "cuda.syncthreads()",
        f"s = {r.width} // 2",
        "while s > 0:",
        f"    if {r.lane} < s:",
        f"        {mine} = {r.sm}[tid]",
        f"        {theirs} = {r.sm}[tid + s]",
        f"        {r.sm}[tid] = {typed(r.reducer.combine(mine, theirs), r.dtype)}",
        "    cuda.syncthreads()",
        "    s //= 2",
    ]


def _shuffle(r: BlockReduce) -> list[str]:
    """Each warp's lanes combined by shuffles (the tree's pairs, lane ``l`` with ``l + s``, in
    registers); a warp's first lane stores its result in the slot of the group's ``l // 32``-th
    thread, one barrier; past 32 lanes, the group's first warp combines those the same way into the
    group's first slot, a second barrier. A fixed order. Every lane of a warp runs the shuffles
    (``width`` a power of two, groups aligned to it, the block a whole number of warps); where
    ``width`` < 32 a warp holds several groups, and lane ``l`` of a group reads lanes above it in
    its own group at every step that matters to the group's first lane (the others' results are
    never read)."""
    warp, first = f"{r.prefix}warp", f"tid - {r.lane}"
    identity = literal(r.reducer.identity(r.dtype), r.dtype)
    return [
        f"{warp} = {r.acc}",
        *_warp_steps(r, f"min({r.width}, 32) // 2"),
        f"if {r.lane} % 32 == 0:",
        f"    {r.sm}[{first} + {r.lane} // 32] = {warp}",
        "cuda.syncthreads()",
        f"if {r.width} > 32:",
        f"    if {r.lane} < 32:",
        f"        {warp} = {r.sm}[tid] if {r.lane} < {r.width} // 32 else {identity}",
        *("        " + line for line in _warp_steps(r, f"{r.width} // 64")),
        f"        if {r.lane} == 0:",
        f"            {r.sm}[tid] = {warp}",
        "    cuda.syncthreads()",
    ]


def _warp_steps(r: BlockReduce, start: str) -> list[str]:
    """Lane ``l`` combines its value with lane ``l + s``'s, ``s`` = start, start/2 ... 1. The shuffle
    is a statement of its own: a combine may spell an operand more than once, or in one branch."""
    warp, other = f"{r.prefix}warp", f"{r.prefix}other"
    return [
        f"s = {start}",
        "while s > 0:",
        f"    {other} = cuda.shfl_down_sync(0xFFFFFFFF, {warp}, s)",
        f"    {warp} = {typed(r.reducer.combine(warp, other), r.dtype)}",
        "    s //= 2",
    ]
