"""The CUDA kernel record and what every CUDA kernel writer shares: flat C-order indexing
(``linear``, ``unflatten``), a group's ``KernelSpec`` (its body builder over flat buffers, its
kernel), the index statements a body needs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.kernel.emit import BodyBuilder, ConstantPool, subscript
from compiler.kernel.ir import Access, Expr, KernelIR, Line, Stmt, uses_of, variables
from compiler.passes.fuse import Group

Place = Access | str  # an element of an array, or a scalar variable (a band's one-element row)


def text(place: Place) -> str:
    return place if isinstance(place, str) else subscript(place.array, place.index)


@dataclass
class Launch:
    """``kernel[grid, block, stream]``: expressions of the module's launch constants."""

    grid: str
    block: str


@dataclass
class Scratch:
    """Global memory a kernel needs only while it (and the kernels that follow it) run: ``size``
    elements of ``dtype`` on a GPU (fewer are used under the simulator's smaller launches). The
    ``scratch`` pass places it in the arena (``MemoryPlan``: a row of its own, at ``offset``)."""

    name: str
    size: int
    dtype: DType
    offset: int = -1  # in the arena, once placed

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass
class CudaKernel:
    """One ``cuda.jit`` kernel: its parameters (what the driver passes: buffers, constants,
    scratch, integers), their ``(dtype, ndim)`` (ndim 0: a scalar; the PTX signature), its body as
    kernel IR, its launch, its global scratch, and the kernels launched right after it (a split
    reduction's second pass, a band's combines and tails). ``strategy``: how it spreads its work
    ("loop", a reduction's "serial" / "block" / "split" / "column", a band's "rows", "matmul",
    "combine")."""

    name: str
    args: list[str]
    arg_types: list[tuple[DType, int]]
    ir: KernelIR
    launch: Launch
    strategy: str
    scratch: list[Scratch] = field(default_factory=list)
    follow: list[CudaKernel] = field(default_factory=list)
    # module-level constants its body and launch read (a band's launch shape): (name, expression)
    constants: list[tuple[str, str]] = field(default_factory=list)
    shared: bool = False  # defined in a library module of its own, shared by every program using it
    wrapper: str = ""  # a runtime function the configured launch goes through (``_matmul_launcher``)
    wrapper_args: tuple[str, ...] = ()  # the wrapper's arguments after the launch and stream (literals)
    # blocks of ``TPB`` threads an SM must hold at once (0: any): a GPU's registers per thread are
    # capped to let it (``launch_bounds``; ptxas spills past the cap)
    min_blocks: int = 0


def linear(idx: Sequence[str], shape: Sequence[int]) -> str:
    """The flat C-order offset of ``idx`` in an array of ``shape`` (size-1 dims contribute 0), with
    the variables it uses."""
    terms = []
    uses: set[str] = set()
    stride = 1
    for name, extent in reversed(list(zip(idx, shape, strict=True))):
        if extent != 1:
            terms.append(name if stride == 1 else f"{name} * {stride}")
            uses |= uses_of(name)
        stride *= extent
    return Expr(" + ".join(reversed(terms)) or "0", uses)


def unflatten(flat: str, names: Sequence[str], shape: Sequence[int]) -> list[tuple[str, str]]:
    """``(name, expression)`` of each index of the C-order position ``flat`` in ``shape``."""
    out = []
    stride = math.prod(shape)
    if stride == 0:  # an empty space: the loop over it never runs
        return [(name, "0") for name in names]
    for d, (name, extent) in enumerate(zip(names, shape, strict=True)):
        stride //= extent
        expr = flat if stride == 1 else f"{flat} // {stride}"
        if d > 0:
            expr = f"({expr}) % {extent}" if stride != 1 else f"{flat} % {extent}"
        out.append((name, "0" if extent == 1 else expr))
    return out


def index_stmts(body: Sequence[Stmt], decomposition: list[tuple[str, str]]) -> list[Stmt]:
    """The index computations ``body`` needs (each index is computed independently): those of the
    variables its statements use (``ir.variables``, recorded as they were built)."""
    used = variables(body)
    return [Line(f"{name} = {expr}") for name, expr in decomposition if name in used]


def body_stmts(builder: Builder) -> list[Stmt]:
    """``builder``'s lines as statements, each load recorded where it reads (``Builder.places``)."""
    out: list[Stmt] = []
    for k, line in enumerate(builder.lines):
        place = builder.places.get(k)
        out.append(Line(line, (place,) if isinstance(place, Access) else ()))
    return out


def store(place: Place, value: str) -> Line:
    """``place = value``, recording the store."""
    return Line(f"{text(place)} = {value}", (), (place,) if isinstance(place, Access) else ())


class Builder(BodyBuilder):
    """A body builder that records where each load reads (``places``: line position -> place)."""

    def __init__(
        self, inlined: dict[Value, Op], locate: object, pool: ConstantPool, prefix: str = ""
    ) -> None:
        self.locate = locate
        self.places: dict[int, Place] = {}

        def load(v: Value, at: tuple[str, ...]) -> str:
            place = self.locate(v, at)  # type: ignore[operator]
            self.places[len(self.lines)] = place
            return text(place)

        super().__init__(inlined, load, pool, prefix)


def _apart(v: Value, w: Value) -> bool:
    return False


@dataclass
class KernelSpec:
    group: Group
    names: dict[Value, str]
    pool: ConstantPool
    # whether two values live in exactly the same bytes under the memory plan (an output stored over
    # a dying input: ``build.memory_places``); a kernel then skips copying one into the other
    same_memory: Callable[[Value, Value], bool] = _apart

    @property
    def kernel_name(self) -> str:
        return f"{self.pool.prefix}k{self.group.index}_{self.group.root.prim.name}"

    def inlined(self) -> dict[Value, Op]:
        return {op.result: op for op in self.group.ops}

    def builder(self, flat: str | None) -> Builder:
        """A body builder whose loads index flat buffers; ``flat``: the flat position of the
        iteration index (reads of a group-shaped value at that index use it directly)."""
        shape = self.group.shape
        idx = tuple(f"i{d}" for d in range(len(shape)))

        def locate(v: Value, at: tuple[str, ...]) -> Place:
            if flat is not None and at == idx and v.type.shape == shape:
                return Access(self.names[v], (flat,))
            return Access(self.names[v], (linear(at, v.type.shape),))

        return Builder(self.inlined(), locate, self.pool)

    def define(
        self,
        body: Sequence[Stmt],
        buffers: list[Value],
        launch: Launch,
        strategy: str,
        builders: Sequence[BodyBuilder],
        scratch: Sequence[Scratch] = (),
        name: str | None = None,
    ) -> CudaKernel:
        """The kernel; the constant arrays its ``builders`` read become trailing arguments."""
        used = {c for b in builders for c in b.constants}
        consts = [c for c in self.pool.arrays if c in used]
        args = [self.names[v] for v in buffers] + consts + [s.name for s in scratch]
        types = [(v.type.dtype, 1) for v in buffers]
        types += [
            (DType.from_numpy(self.pool.arrays[c].dtype), max(self.pool.arrays[c].ndim, 1)) for c in consts
        ]
        types += [(s.dtype, 1) for s in scratch]
        return kernel(name or self.kernel_name, args, types, body, launch, strategy, scratch)

    @property
    def buffers(self) -> list[Value]:
        return self.group.inputs + self.group.outputs


def kernel(
    name: str,
    args: list[str],
    types: list[tuple[DType, int]],
    body: Sequence[Stmt],
    launch: Launch,
    strategy: str,
    scratch: Sequence[Scratch] = (),
) -> CudaKernel:
    return CudaKernel(name, args, types, KernelIR(name, args, list(body)), launch, strategy, list(scratch))
