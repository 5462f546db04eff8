"""What every CUDA kernel writer shares: the ``CudaKernel`` record, flat C-order indexing (``linear``,
``unflatten``), a group's ``KernelSpec`` (its body builder over flat buffers, its kernel text) and the
block's shared-memory ``tree``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from compiler.ir.core import Op, Value
from compiler.ir.types import DType
from compiler.kernel.emit import BodyBuilder, ConstantPool, indent, mentions, typed
from compiler.passes.fuse import Group


@dataclass
class CudaKernel:
    name: str
    args: list[str]  # what the driver passes: its buffer names (inputs, outputs, constants, scratch), ints
    arg_types: list[tuple[DType, int]]  # (dtype, ndim) per argument, ndim 0 a scalar: the PTX signature
    text: str
    launch: str  # the launch configuration, e.g. ``[_grid(4096), TPB, stream]``
    # (name, elements, dtype); the elements an int or an expression of the module's constants
    scratch: list[tuple[str, int | str, DType]] = field(default_factory=list)
    follow: list[CudaKernel] = field(default_factory=list)  # kernels launched right after this one
    shared: bool = False  # defined in a library module of its own, shared by every program using it
    wrapper: str = ""  # a runtime function the configured launch goes through (``_matmul_launcher``)


def numba_type(dtype: DType) -> str:
    """The Numba scalar type (for shared arrays), as generated code spells it."""
    return "numba.boolean" if dtype.is_bool else f"numba.{dtype.np.name}"


def linear(idx: Sequence[str], shape: Sequence[int]) -> str:
    """The flat C-order offset of ``idx`` in an array of ``shape`` (size-1 dims contribute 0)."""
    terms = []
    stride = 1
    for name, extent in reversed(list(zip(idx, shape, strict=True))):
        if extent != 1:
            terms.append(name if stride == 1 else f"{name} * {stride}")
        stride *= extent
    return " + ".join(reversed(terms)) or "0"


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


@dataclass
class KernelSpec:
    group: Group
    names: dict[Value, str]
    pool: ConstantPool

    @property
    def kernel_name(self) -> str:
        return f"k{self.group.index}_{self.group.root.prim.name}"

    def inlined(self) -> dict[Value, Op]:
        return {op.result: op for op in self.group.ops}

    def builder(self, flat: str | None) -> BodyBuilder:
        """A body builder whose loads index flat buffers; ``flat``: the flat position of the
        iteration index (reads of a group-shaped value at that index use it directly)."""
        shape = self.group.shape
        idx = tuple(f"i{d}" for d in range(len(shape)))

        def load(v: Value, at: tuple[str, ...]) -> str:
            if flat is not None and at == idx and v.type.shape == shape:
                return f"{self.names[v]}[{flat}]"
            return f"{self.names[v]}[{linear(at, v.type.shape)}]"

        return BodyBuilder(self.inlined(), load, self.pool)

    def define(
        self,
        body: list[str],
        buffers: list[Value],
        launch: str,
        scratch: Sequence[tuple[str, int | str, DType]] = (),
        name: str | None = None,
    ) -> CudaKernel:
        """The kernel's text; constant arrays its body mentions become trailing arguments."""
        consts = [c for c in self.pool.arrays if mentions(body, [c])]
        args = [self.names[v] for v in buffers] + consts + [s[0] for s in scratch]
        types = [(v.type.dtype, 1) for v in buffers]
        types += [
            (DType.from_numpy(self.pool.arrays[c].dtype), max(self.pool.arrays[c].ndim, 1)) for c in consts
        ]
        types += [(dtype, 1) for _, _, dtype in scratch]
        return kernel(name or self.kernel_name, args, types, body, launch, scratch)

    @property
    def buffers(self) -> list[Value]:
        return self.group.inputs + self.group.outputs


def kernel(
    name: str,
    args: list[str],
    types: list[tuple[DType, int]],
    body: list[str],
    launch: str,
    scratch: Sequence[tuple[str, int | str, DType]] = (),
) -> CudaKernel:
    header = ["@cuda.jit(cache=not SIM)", f"def {name}({', '.join(args)}):"]
    text = "\n".join(header + indent(body or ["pass"], 1))
    return CudaKernel(name, args, types, text, launch, list(scratch))


def index_lines(lines: list[str], decomposition: list[tuple[str, str]]) -> list[str]:
    """The index computations ``lines`` need (each index is computed independently)."""
    return [f"{name} = {expr}" for name, expr in decomposition if mentions(lines, [name])]


def block_tree(
    dtype: DType,
    combine: Callable[[str, str], str],
    acc: str = "acc",
    sm: str = "sm",
    lane: str = "tid",
    width: str = "cuda.blockDim.x",
    prefix: str = "",
) -> list[str]:
    """Combine the ``acc`` values of ``width`` consecutive threads (a power of two; ``lane``: a
    thread's place among them, ``tid``: its slot in ``sm``) through shared memory into the first
    one's slot, in a fixed order; ``prefix`` names the temporaries (a band member's own)."""
    mine, theirs = f"{prefix}mine", f"{prefix}theirs"
    return [
        f"{sm}[tid] = {acc}",
        "cuda.syncthreads()",
        f"s = {width} // 2",
        "while s > 0:",
        f"    if {lane} < s:",
        f"        {mine} = {sm}[tid]",
        f"        {theirs} = {sm}[tid + s]",
        f"        {sm}[tid] = {typed(combine(mine, theirs), dtype)}",
        "    cuda.syncthreads()",
        "    s //= 2",
    ]
