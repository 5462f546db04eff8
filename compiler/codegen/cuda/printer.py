"""The CUDA printer of the kernel IR: a ``CudaKernel`` as the text of a ``numba.cuda.jit`` function
(a band's launch constants before it). Loops print as Python ``range`` loops whose start and step
are thread and block coordinates; a ``BlockReduce`` of strategy "tree" as halving steps through
shared memory, of strategy "shuffle" as warp shuffles (the tree under the CUDA simulator, which has
none: the module's ``SIM`` constant picks one, and Numba drops the other branch on a GPU)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from compiler.ir.types import DType
from compiler.kernel.cuda.records import CudaKernel, text
from compiler.kernel.emit import literal, typed
from compiler.kernel.ir import Alloc, Barrier, BlockReduce, For, Line, Stmt, View, print_python


def numba_type(dtype: DType) -> str:
    """The Numba scalar type (of shared arrays), as generated code spells it."""
    return "numba.boolean" if dtype.is_bool else f"numba.{dtype.np.name}"


def kernel_text(kernel: CudaKernel) -> str:
    bounds = f", **_bounds({kernel.min_blocks})" if kernel.min_blocks else ""
    header = [f"@cuda.jit(cache=not SIM{bounds})", f"def {kernel.name}({', '.join(kernel.ir.params)}):"]
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
    other statements in order (an accumulator adds them in the plain loop's order: the same bits),
    with its stores' values kept (``_u{k}_{j}``), then the stores; then the thread's remaining
    iterations one at a time, as the plain loop runs them.

    Iteration ``k``'s variables are its own (``t0`` is ``t0__k``; ``t0__k_j`` where the body assigns
    ``t0`` again in statement ``j``), so no variable is assigned in two iterations and Numba's SSA
    pass has next to nothing to rename (it took a fifth of a kernel's compile time
    when each iteration redefined the same names); at the end of the trip each variable the body
    assigns is assigned its last iteration's value, as the plain loop leaves it: the next trip reads
    an accumulator's, and code after the loop a band's register (``v9_r``). An index statement runs
    once per iteration, in the loads; a store's position is read from the iteration's own variables.
    A body whose statements are not each ``name = value`` or ``element = value`` (``_Statement``) is
    printed as the plain loop.

    Each hoisted load is pinned there (``_pin``: ``runtime/cuda_intrinsics.py``): LLVM otherwise sinks
    it to its first use, and ptxas then keeps it behind the previous iteration's branches (a float
    division's slow path), so that a thread had one load in flight, not ``unroll``."""
    var, u = loop.var, loop.unroll
    base, step = f"{var}_b", f"{var}_s"
    assert all(isinstance(s, Line) for s in loop.body), "loops.unrollable: straight-line statements"
    body: list[Line] = loop.body  # type: ignore[assignment]
    parsed = [_Statement.parse(str(s.text)) for s in body]
    plain = For(var, loop.stop, loop.body, loop.start, loop.parallel, loop.flat, loop.step)
    if any(p is None for p in parsed):
        return print_cuda([plain])
    stmts: list[_Statement] = parsed  # type: ignore[assignment]
    hoisted, index = _hoisted(body, stmts)
    loads: list[str] = []
    issued: list[dict[str, str]] = []  # per iteration: the variables its loads section assigned
    for k in range(u):
        mine = {var: f"{var}__{k}"}
        loads.append(f"{var}__{k} = {base}" + (f" + {k} * {step}" if k else ""))
        for j in sorted(index | set(hoisted)):
            st = stmts[j]
            if j in hoisted:
                loads.append(f"_l{k}_{j} = _pin({st.value(mine)})")  # (runtime/cuda_intrinsics.py)
                mine[hoisted[j]] = f"_l{k}_{j}"
            else:
                loads.append(f"{st.defines}__{k} = {st.value(mine)}")
                mine[str(st.defines)] = f"{st.defines}__{k}"
        issued.append(mine)
    trip: list[str] = []
    stores: list[str] = []
    current: dict[str, str] = {}  # each variable -> the one holding its latest value in this trip
    for k in range(u):
        current.update(issued[k])  # (the body reads none of these before its statement assigns it)
        for j, st in enumerate(stmts):
            if j in index or j in hoisted:
                continue
            if st.defines is None:  # a store: its value now, the store after the last load
                trip.append(f"_u{k}_{j} = {st.value(current)}")
                stores.append(f"{st.target(current)} = _u{k}_{j}")
                continue
            name = f"{st.defines}__{k}"
            name = name if current.get(st.defines) != name else f"{name}_{j}"  # (assigned twice)
            trip.append(f"{name} = {st.value(current)}")
            current[st.defines] = name
    back = [f"{d} = {current[d]}" for d in dict.fromkeys(st.defines for st in stmts if st.defines)]
    return [
        f"{base} = {loop.start}",
        f"{step} = {loop.step}",
        f"while {base} + {u - 1} * {step} < {loop.stop}:",
        *_indent([*loads, *trip, *stores, *back, f"{base} += {u} * {step}"]),
        *print_cuda([For(var, loop.stop, loop.body, base, loop.parallel, loop.flat, step)]),
    ]


class _Statement:
    """A statement of an unrolled loop's body, ``name = value`` or ``element = value`` (a store),
    parsed once (``ast``) into the spans of the names it reads, so that it can be printed with
    other variables in their places (an iteration's own)."""

    def __init__(self, text: str, defines: str | None, split: int, reads: list[tuple[int, int, str]]) -> None:
        self.text = text
        self.defines = defines  # the name it assigns (None: a store)
        self.split = split  # where its value starts in ``text``
        self.reads = reads  # (start, end, name) of each name it reads, in order

    @staticmethod
    def parse(text: str) -> _Statement | None:
        """The statement ``text``, or None where it is not one assignment of one name or element on
        one line, or binds names of its own (a lambda, a comprehension)."""
        try:
            (tree,) = ast.parse(text).body
        except (SyntaxError, ValueError):
            return None
        if not (text.isascii() and "\n" not in text and isinstance(tree, ast.Assign)):
            return None
        if any(isinstance(n, ast.Lambda | ast.comprehension | ast.NamedExpr) for n in ast.walk(tree)):
            return None  # (names it binds itself: not the body's variables)
        (target,) = tree.targets if len(tree.targets) == 1 else (None,)
        if not isinstance(target, ast.Name | ast.Subscript) or target.end_col_offset is None:
            return None
        reads = sorted(
            (n.col_offset, int(n.end_col_offset or 0), n.id)
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        )
        defines = target.id if isinstance(target, ast.Name) else None
        equals = text.index("=", target.end_col_offset)  # (a value's node starts inside its parentheses)
        return _Statement(text, defines, len(text) - len(text[equals + 1 :].lstrip()), reads)

    def names(self) -> set[str]:
        """The names it reads (a store's position included)."""
        return {name for _, _, name in self.reads}

    def value(self, names: dict[str, str]) -> str:
        """Its value with each name read replaced by ``names``' variable for it, where there is one."""
        return self._printed(names, self.split, len(self.text))

    def target(self, names: dict[str, str]) -> str:
        """The element a store writes, its position's names replaced as in ``value``."""
        return self._printed(names, 0, self.text.rindex("=", 0, self.split)).rstrip()

    def _printed(self, names: dict[str, str], begin: int, end: int) -> str:
        out, at = [], begin
        for start, stop, name in self.reads:
            if begin <= start and stop <= end:
                out += [self.text[at:start], names.get(name, name)]
                at = stop
        return "".join(out) + self.text[at:end]


def _hoisted(body: list[Line], stmts: list[_Statement]) -> tuple[dict[int, str], set[int]]:
    """An unrolled loop's loads an iteration may issue before its arithmetic, ``{j: name}``
    (statements ``name = array[index]``), and the index statements they need, ``{j}`` (statements
    that neither load nor store and compute from no loaded value: ``i0 = r``).

    A name is *loaded* if any statement of the body defines it from a load or from a loaded name (an
    accumulator, a temporary), wherever it stands, or defines it twice, or from itself: no hoisted
    statement reads a value an earlier iteration's arithmetic changes, and a load whose index reads
    a loaded name, or a name the body defines only later (the last iteration's), stays in place. Of
    the body's names, a hoisted statement reads only those of index statements hoisted before it
    (the loads section has no other of the iteration's values)."""
    defined = [st.defines for st in stmts]
    uses = [st.names() for st in stmts]
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
    hoisted: dict[int, str] = {}
    index: set[int] = set()
    used_before: set[str] = set()  # (a name read before its statement carries the last iteration's)
    for j, (s, st) in enumerate(zip(body, stmts, strict=True)):
        name = defined[j]
        later = {d for d in defined[j + 1 :] if d}  # (read here, defined after: the last iteration's)
        if not s.writes and name is not None and name not in used_before and not uses[j] & later:
            if not s.reads:  # (one reading a loaded name is loaded itself: the fixpoint above)
                if name not in loaded:
                    index.add(j)
            elif len(s.reads) == 1 and st.value({}) == text(s.reads[0]) and not uses[j] & loaded:
                hoisted[j] = name
        used_before |= uses[j]
    body_names = {d for d in defined if d}
    settled = False
    while not settled:  # each reads, of the body's names, only index statements issued before it
        settled = True
        for j in sorted(index | set(hoisted)):
            issued = {defined[i] for i in index if i < j}
            if (uses[j] & body_names) - issued:  # (a name defined later, or read before it is defined)
                index.discard(j)
                hoisted.pop(j, None)
                settled = False
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
