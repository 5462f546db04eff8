"""What the pipeline hands from pass to pass: the ``Options`` it runs with, the ``Target`` it compiles
for, and the ``Compilation`` (the function, and once fused and planned its kernels and buffers).

A leaf module (IR and pass data types only), so that the passes that score a plan (``remat``,
``schedule``) and the code generators can read these records without importing the pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.ir.core import Function
from compiler.ir.verify import verify_enabled

if TYPE_CHECKING:
    from compiler.autodiff import GradSpec
    from compiler.passes.fuse import FusionPlan, Group
    from compiler.passes.plan import MemoryPlan, Planner


def _env_off(name: str) -> bool:
    """A switch that is on unless ``name`` is set to something other than ``0``."""
    return os.environ.get(name, "") in ("", "0")


_DEFAULTS: dict[str, Any] = {}  # option_defaults(): fields every new Options starts from


def _default(name: str, value: Callable[[], Any]) -> Any:
    return field(default_factory=lambda: _DEFAULTS[name] if name in _DEFAULTS else value())


@contextmanager
def option_defaults(**fields: Any) -> Iterator[None]:
    """Every ``Options`` made inside starts from these field values (fields given explicitly still
    win): how tests and benchmarks switch an optimization off for programs that ``dsl.compile``
    builds, e.g. ``with option_defaults(row_fusion=False): f(x)``. Process-wide, like the
    environment variables the defaults come from."""
    unknown = set(fields) - set(Options.__dataclass_fields__)
    if unknown:
        raise TypeError(f"Options has no field {sorted(unknown)[0]!r}")
    saved = dict(_DEFAULTS)
    _DEFAULTS.update(fields)
    try:
        yield
    finally:
        _DEFAULTS.clear()
        _DEFAULTS.update(saved)


PRECISIONS = ("highest", "tf32")  # Options.precision's values (dsl.compile's ``precision``)


@dataclass
class Options:
    """Compiler options, one field per choice a pass makes; ``dsl.compile`` and the CLI set them.

    The optimization switches are on by default; the environment variables of ``docs/flags.md``
    (``DSL_NO_INPLACE``, ``DSL_NO_REMAT``, ``DSL_NO_SCHEDULE``, ``DSL_NO_PACK_BY_SIZE``,
    ``DSL_SANITIZE``, ``DSL_VERIFY``) are their defaults' source.
    """

    target: str = "cpu"  # a key of TARGETS
    inplace: bool = _default("inplace", lambda: _env_off("DSL_NO_INPLACE"))  # buffer reuse, plan
    strict_inplace: bool = False  # an in-place request demoted to a copy is an error (bufferize)
    donate_argnums: tuple[int, ...] = ()
    # float32 matmuls on a GPU: "highest" (full float32), "tf32" (TensorFloat-32 allowed: cuBLAS's
    # tensor-op math; the CPU and the generated matmul kernel compute in full float32 either way)
    precision: str = "highest"
    verify: bool = _default("verify", verify_enabled)  # the IR verifier after every pass
    sanitize: bool = _default("sanitize", lambda: not _env_off("DSL_SANITIZE"))
    grad: GradSpec | None = None  # set for grad/value_and_grad programs: what the autodiff pass derives
    # loops and branches compiled as native loops (the ``loops`` pass); off: unrolled (``unroll_regions``)
    native_loops: bool = _default("native_loops", lambda: _env_off("DSL_UNROLL_LOOPS"))
    remat: bool = _default("remat", lambda: _env_off("DSL_NO_REMAT"))  # the remat pass
    schedule: bool = _default("schedule", lambda: _env_off("DSL_NO_SCHEDULE"))  # the schedule pass
    # if_to_select: a safe if whose branches cost at most if_select_budget element operations (both
    # branches and the selects together; None: the target's default, compiler/passes/if_to_select.py)
    # runs both and selects
    if_to_select: bool = _default("if_to_select", lambda: _env_off("DSL_NO_IF_TO_SELECT"))
    if_select_budget: int | None = _default("if_select_budget", lambda: None)
    # fuse: matmuls read transposed operands as strided views; cheap shared values are recomputed
    contract_transposes: bool = _default("contract_transposes", lambda: True)
    recompute: bool = _default("recompute", lambda: True)
    # rows (targets whose printer writes bands): row fusion, and transcendentals computed once per row
    row_fusion: bool = _default("row_fusion", lambda: True)
    row_compute_once: bool = _default("row_compute_once", lambda: True)
    # rows (CUDA): where a band's column reductions run: "auto" (a cost model), "kernel" (a column
    # kernel after the band's rows), "band" (partial rows per block in the band, and its kept rows as
    # fusion made them: the one-pass form)
    band_columns: str = _default("band_columns", lambda: "auto")
    # rows (CUDA): reductions over the same space and axes that share inputs run as one kernel with an
    # output each (rows.reductions_together)
    sibling_reductions: bool = _default("sibling_reductions", lambda: True)
    # plan: repack the arena offline, largest block first, and keep the smaller arena
    pack_by_size: bool = _default("pack_by_size", lambda: _env_off("DSL_NO_PACK_BY_SIZE"))
    # plan: a returned value computed in place from a dying arena value keeps that value's chain of
    # blocks in the result's own memory (passes/plan.py); loop bodies' results are carries: off there
    results_in_place: bool = _default("results_in_place", lambda: True)
    # kernels and regions for the CPU (compiler/kernel/cpu/records.py's CpuSchedule says what each does)
    runtime_parallel: bool = _default("runtime_parallel", lambda: True)
    shared_kernels: bool = _default("shared_kernels", lambda: True)
    reassoc_sums: bool = _default("reassoc_sums", lambda: True)
    chunked_numpy: bool = _default("chunked_numpy", lambda: True)
    vector_math: bool = _default("vector_math", lambda: True)
    fused_multiply_add: bool = _default("fused_multiply_add", lambda: True)
    keyed_minmax: bool = _default("keyed_minmax", lambda: True)
    split_matmuls: bool = _default("split_matmuls", lambda: True)
    split_reductions: bool = _default("split_reductions", lambda: True)
    matmul_tiles: bool = _default("matmul_tiles", lambda: True)
    row_blocks: bool = _default("row_blocks", lambda: True)


# The options that only change the CPU's kernels' speed, never their results beyond rounding:
# tests switch each off and compare (tests/test_perf_paths.py), benchmarks/bench_optimizations.py
# measures each.
CPU_SWITCHES = (
    "runtime_parallel",
    "shared_kernels",
    "reassoc_sums",
    "chunked_numpy",
    "vector_math",
    "fused_multiply_add",
    "keyed_minmax",
    "split_matmuls",
    "split_reductions",
    "matmul_tiles",
    "row_blocks",
)


@dataclass(frozen=True)
class Target:
    """What the passes must know of a backend. ``bands``: its printer writes bands of row-fused
    kernels, so the ``rows`` pass runs for it. ``numpy_kernel``: the groups it writes as calls of
    NumPy rather than loop nests (they cannot join a band); a function returning that test, looked
    up when a program is planned (the CPU printer's choice, which depends on its switches).
    ``row_max``: the longest row (elements after the leading axis) a band member may have."""

    name: str
    bands: bool
    numpy_kernel: Callable[[Options], Callable[[Group], bool]] | None = None
    # its kernel-level passes (``compiler/kernel/``), looked up when they run
    kernel_passes: Callable[[], KernelPasses] | None = None
    row_max: int | None = None
    # the rows pass's sizes for a band's column reductions and kept rows (``rows.BandCosts``, or None:
    # the bands run their column reductions and keep their rows as fusion made them); looked up when
    # a program is planned
    columns: Callable[[Options], Any] | None = None


def _cpu_numpy_kernel(options: Options) -> Callable[[Group], bool]:
    from compiler.kernel.cpu.loops import wants_numpy  # the kernels pass's kernel form
    from compiler.kernel.cpu.records import CpuSchedule

    schedule = CpuSchedule.of(options)
    return lambda group: wants_numpy(group, schedule)


def _cpu_kernels() -> KernelPasses:
    from compiler.kernel.cpu.build import build_kernels, form_regions, plan_scratch

    return KernelPasses(build_kernels, form_regions, plan_scratch)


def _cuda_kernels() -> KernelPasses:
    from compiler.kernel.cuda.build import build_kernels, plan_scratch

    return KernelPasses(build_kernels, scratch=plan_scratch, scored=True)


def _cuda_columns(options: Options) -> Any:
    from compiler.kernel.cuda.bands import band_costs

    return band_costs(options.band_columns, options.sibling_reductions)


@dataclass(frozen=True)
class KernelPasses:
    """A target's ``kernels`` pass (a planned program's kernels as kernel IR: ``build(func, fusion,
    plan)``), ``regions`` pass (``regions(func, fusion, plan, kernels, options)``: the kernels and
    the memory plan they then follow) and ``scratch`` pass."""

    build: Callable[..., Any]
    regions: Callable[..., tuple[Any, MemoryPlan]] | None = None
    # ``scratch(func, fusion, plan, kernels, options)``: the kernels' global scratch placed in the plan
    scratch: Callable[..., tuple[Any, MemoryPlan]] | None = None
    # remat and schedule score a candidate's plan after these passes (``pipeline.planner``)
    scored: bool = False


# The CUDA kernels (compiler/kernel/cuda/bands.py) keep a row of each value a band keeps per row
# in the block's shared memory while the band's rows fit ``SHARED_BYTES``, else in global scratch per
# block slot (or compute it again): rows of up to 8192 elements (a 32 KiB float32 row, a block of 256
# threads taking 32 elements each) join a band, so softmax + cross-entropy over 8192 classes is one
# pass. ``DSL_CUDA_ROW_MAX`` (read at import) sets another limit, for comparison (4096 before
# 2026-11-27: benchmarks/results/2026-11-27-gpu-lease.md).
CUDA_ROW_MAX = int(os.environ.get("DSL_CUDA_ROW_MAX", "").strip() or 8192)
TARGETS = {
    "cpu": Target("cpu", bands=True, numpy_kernel=_cpu_numpy_kernel, kernel_passes=_cpu_kernels),
    "cuda": Target(
        "cuda", bands=True, row_max=CUDA_ROW_MAX, kernel_passes=_cuda_kernels, columns=_cuda_columns
    ),
}


@dataclass
class Compilation:
    """The pipeline's state, which each pass takes and returns: the function, the fusion plan once
    ``fuse`` ran (``rows`` adds its bands), the memory plan once ``plan`` ran (``regions`` may
    resize slots of it), the kernels once ``kernels`` ran. ``printed``: how the
    stage prints when it is not ``func`` itself (``func`` annotated with groups, bands or buffers).
    ``planner``: the fuse -> rows -> plan steps for ``options`` (``pipeline.planner``), made once per
    run so that its caches serve every pass that plans."""

    func: Function
    options: Options
    fusion: FusionPlan | None = None
    plan: MemoryPlan | None = None
    printed: Function | None = None
    kernels: Any = None  # the target's kernels once ``kernels`` ran (CPU: kernel.cpu.build.CpuKernels)
    planner: Planner | None = None
    # the loops' and branches' bodies once ``loops`` ran: CONTROL group -> ``passes.loops.Loop``
    loops: dict[Any, Any] = field(default_factory=dict)

    def stage(self) -> Function:
        return self.printed if self.printed is not None else self.func
