"""The kernel-level IR: what a fused group (or a band of groups) becomes once it is scheduled.

A ``KernelIR`` is a small loop program over named arrays: loops (``For``; a parallel one is a loop
whose iterations are independent, run on threads by a backend), scratch allocations (``Alloc``),
flat views (``View``) and straight-line statements (``Line``). A statement's text is the scalar code
the primitives' lowerings produce (``compiler/kernel/emit.py``'s ``BodyBuilder``), the same on
both backends; what a statement loads and stores is not read back from that text but recorded when
the statement is built (``Line.reads`` / ``Line.writes``: an ``Access`` is an array and one index
expression per axis), and so is which iteration variables it uses (``Line.uses``: an index
expression is a name, an integer, or an ``Expr`` that carries the variables it was made of).
Questions a pass must answer about a kernel (is this a flat elementwise loop, which indices must a
GPU thread compute, may its parallel loop run as chunks, does a member of a row-block region touch
only the rows of its block) are answered from these records and the loop structure, never from
generated source.

A GPU kernel's IR says how its work is spread over the device: a loop whose ``start`` and ``step``
are thread or block coordinates (a grid-stride loop: ``start`` ``cuda.grid(1)``, ``step``
``cuda.gridsize(1)``), ``Alloc``s in the block's shared memory, ``Barrier``s, and ``BlockReduce``:
the combine of one value per thread over a block's threads, whose ``strategy`` the printer spells.

Backends print the IR: ``print_python`` here writes Numba-Python (the CPU's ``njit`` kernels; the
statements' text is Python on both targets); ``compiler/codegen/cuda/printer.py`` writes the CUDA
kernels' bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from compiler.ir.types import DType
from compiler.prims.base import Reducer


class Expr(str):
    """Generated code as printed, with the iteration variables it uses (``i0``, ``g``), recorded by
    whoever builds it: the body builder's statements, a flat index of a multi-dimensional one
    (``cuda.records.linear``). Where an index expression is expected, a plain ``str`` is a name
    (a variable, a temporary) or an integer."""

    __slots__ = ("uses",)
    uses: frozenset[str]

    def __new__(cls, text: str, uses: Iterable[str] = ()) -> Expr:
        self = super().__new__(cls, text)
        self.uses = frozenset(uses)
        return self


def uses_of(expr: str) -> frozenset[str]:
    """The variables an index expression uses: its record, or itself when it is a name."""
    return expr.uses if isinstance(expr, Expr) else frozenset((expr,))


@dataclass(frozen=True)
class Access:
    """One element of ``array``: one index expression per axis (``()`` for a 0-d array, and one
    expression, the flat position, for a flat view)."""

    array: str
    index: tuple[str, ...]


@dataclass
class Line:
    """One straight-line statement, as printed, with the array elements it loads and stores."""

    text: str
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()

    @property
    def uses(self) -> frozenset[str]:
        """The iteration variables the statement uses: those its text records (an ``Expr``: the
        primitives' expressions) and those of the index expressions it loads and stores at."""
        own = self.text.uses if isinstance(self.text, Expr) else frozenset()
        return own.union(*(uses_of(e) for a in (*self.reads, *self.writes) for e in a.index))


@dataclass
class For:
    """``for var in range(start, stop, step)``; ``parallel``: iterations are independent (distinct
    iterations write distinct elements), so a backend may run them on threads. On a GPU, ``start``
    and ``step`` spread the iterations over threads or blocks (a grid-stride loop)."""

    var: str
    stop: int | str
    body: list[Stmt]
    start: int | str = 0
    parallel: bool = False
    # a flat loop over an iteration space: its index is used only as the position in flat views of
    # arrays of the iteration's shape (``View``s of ``stop`` elements), so a chunk of it may slice them
    flat: bool = False
    step: int | str = 1
    # a GPU loop (grid-stride, or a reduction's) whose thread runs ``unroll`` iterations at once (the
    # CUDA printer's ``_unrolled``: their loads first, their stores last, their arithmetic in order, so
    # that a thread has that many loads in flight); a kernel builder's choice, which the CPU printer
    # ignores
    unroll: int = 1

    def range_text(self) -> str:
        if self.step != 1:
            return f"range({self.start}, {self.stop}, {self.step})"
        return f"range({self.stop})" if self.start == 0 else f"range({self.start}, {self.stop})"


@dataclass
class If:
    """``if cond:`` around ``body`` (a row block's flush of its partial results)."""

    cond: str
    body: list[Stmt]


@dataclass
class Alloc:
    """Scratch of the kernel: ``name = np.empty(shape, dtype)``; ``shared``: an array in a GPU
    block's shared memory (its extents constants of the module)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: DType
    shared: bool = False

    @property
    def shape_text(self) -> str:
        return f"({self.shape[0]},)" if len(self.shape) == 1 else "(" + ", ".join(map(str, self.shape)) + ")"


@dataclass
class Barrier:
    """Every thread of a GPU block waits here until all have arrived (their earlier stores to the
    block's shared memory are then visible to each other)."""


@dataclass
class BlockReduce:
    """Combine ``acc`` of ``width`` consecutive threads of a GPU block into the first one's slot of
    the shared array ``sm`` (each thread's slot: ``tid``; ``lane``: its place among the ``width``),
    in a fixed order (the same bits every run), with ``reducer``'s combine in ``dtype``.
    ``strategy``: how the printer combines them, the kernel builder's choice ("tree": halving steps
    through shared memory, a barrier each; "shuffle": warp shuffles, a barrier after the warps' and
    one after the block's combine: needs a whole number of warps per block, ``width`` a power of two
    and ``dtype`` a 32- or 64-bit number). ``prefix`` names its temporaries (a band member's own)."""

    acc: str
    sm: str
    lane: str
    width: str
    dtype: DType
    reducer: Reducer
    prefix: str = ""
    strategy: str = "tree"


@dataclass
class View:
    """``name``: ``base`` reshaped to ``shape`` (a flat view when one axis), sliced to
    ``[lo:hi]`` when ``chunk`` (a parallel loop's chunk of a flat loop), or ``base``'s row ``row``
    (a per-chunk row of a scratch array)."""

    name: str
    base: str
    shape: tuple[int, ...] = ()
    chunk: bool = False
    row: str | None = None


Stmt = Line | For | If | Alloc | View | Barrier | BlockReduce


@dataclass
class KernelIR:
    """One kernel: its name, its parameters (the arrays the driver passes, in order) and body."""

    name: str
    params: list[str]
    body: list[Stmt]
    reassoc: bool = False  # float sums may be reassociated (vectorized partial sums)
    rows: int | None = None  # a band's kernel: the rows its loop over chunks splits


def walk(body: Sequence[Stmt]) -> Iterator[Stmt]:
    """Every statement of ``body``, loops' bodies included, in program order."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, For | If):
            yield from walk(stmt.body)


def parallel_loops(body: Sequence[Stmt]) -> list[int]:
    """Positions in ``body`` (its top level) of parallel loops."""
    return [i for i, s in enumerate(body) if isinstance(s, For) and s.parallel]


def reads(body: Sequence[Stmt]) -> list[Access]:
    return [a for s in walk(body) if isinstance(s, Line) for a in s.reads]


def writes(body: Sequence[Stmt]) -> list[Access]:
    return [a for s in walk(body) if isinstance(s, Line) for a in s.writes]


def uses(body: Sequence[Stmt], name: str) -> bool:
    """Whether ``body`` touches array ``name`` (loads, stores, views of it)."""
    for s in walk(body):
        if isinstance(s, Line) and any(a.array == name for a in (*s.reads, *s.writes)):
            return True
        if isinstance(s, View) and s.base == name:
            return True
    return False


def variables(body: Sequence[Stmt]) -> set[str]:
    """The iteration variables ``body`` uses (``Line.uses``, and its loops' bounds): a variable
    outside that set need not be computed for it."""
    out: set[str] = set()
    for s in walk(body):
        if isinstance(s, Line):
            out |= s.uses
        elif isinstance(s, For):
            out.update(*(uses_of(e) for e in (s.start, s.stop, s.step) if isinstance(e, str)))
    return out


def np_type(dtype: DType) -> str:
    return f"np.{dtype.np.name}"


Special = Callable[[Stmt], list[str] | None]


def print_python(
    body: Sequence[Stmt], depth: int = 0, special: Special | None = None, prange: bool = True
) -> list[str]:
    """``body`` as lines of Numba-Python, indented ``depth`` levels (a parallel loop: ``numba.prange``
    where ``prange``). ``special``: a backend's lines for a statement it prints its own way (None:
    this printer's); the CUDA printer's shared arrays, barriers and block reductions."""
    pad = "    " * depth
    out: list[str] = []
    for s in body:
        own = special(s) if special is not None else None
        if own is not None:
            out += [pad + line for line in own]
        elif isinstance(s, Line):
            out.append(pad + s.text)
        elif isinstance(s, For):
            rng = ("numba.p" if s.parallel and prange else "") + s.range_text()
            out.append(f"{pad}for {s.var} in {rng}:")
            out += print_python(s.body, depth + 1, special, prange) or [pad + "    pass"]
        elif isinstance(s, If):
            out.append(f"{pad}if {s.cond}:")
            out += print_python(s.body, depth + 1, special, prange)
        elif isinstance(s, Alloc):
            out.append(f"{pad}{s.name} = np.empty({s.shape_text if s.shape else '()'}, {np_type(s.dtype)})")
        elif isinstance(s, View):
            out.append(pad + view_text(s))
        else:
            raise TypeError(f"{type(s).__name__} is a GPU statement: the CPU printer has no form of it")
    return out


def view_text(v: View) -> str:
    if v.row is not None:
        return f"{v.name} = {v.base}[{v.row}]" + (
            f".reshape(({', '.join(map(str, v.shape))}))" if len(v.shape) > 1 else ""
        )
    size = v.shape[0] if len(v.shape) == 1 else "(" + ", ".join(map(str, v.shape)) + ")"
    return f"{v.name} = {v.base}.reshape({size})" + ("[lo:hi]" if v.chunk else "")


def nest(
    names: Sequence[str],
    extents: Sequence[int | str],
    body: list[Stmt],
    parallel: bool = False,
    outer: tuple[int | str, int | str] | None = None,
    flat: bool = False,
) -> list[Stmt]:
    """Nested loops over ``names``, outermost first, around ``body``; ``outer``: the first loop's
    (start, stop) instead of (0, its extent); ``parallel`` / ``flat``: the first loop's flags."""
    for depth in reversed(range(len(names))):
        start, stop = (0, extents[depth]) if depth or outer is None else outer
        first = depth == 0
        body = [For(names[depth], stop, body, start, parallel and first, flat and first)]
    return body


def lines(*texts: str) -> list[Stmt]:
    """Statements that touch no array element (scalar assignments)."""
    return [Line(t) for t in texts]
