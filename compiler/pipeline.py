"""The compiler pipeline: one visible, ordered list of named passes (``PASSES``), then the backend.

    traced -functionalize-> functional -autodiff-> grad -simplify-> simplified -remat-> rematerialized
      -schedule-> optimized -fuse-> fused -rows-> row_fused -plan-> planned -bufferize-> bufferized
      --codegen (print)--> source --first call--> executable

Each pass takes the pipeline's state (``Compilation``: the function, and once made the fusion plan and
the memory plan) and returns it; each stage prints as IR text (the kernel stages as the function
annotated with groups, bands and buffers: ``compiler/passes/bufferize.py``). Every choice a pass makes
is a field of ``Options`` (``compiler/compilation.py``). ``remat`` and ``schedule`` score their
candidates with the same fuse -> rows -> plan steps and options as the passes after them
(``plan.Planner``), so they optimize the plan that ships.

Functionalization of user mutation happens while tracing (``dsl/array.py`` resolves views and writes
into pure SSA, marking the ops that realize each in-place request); the ``functionalize`` pass then
drops the superseded versions nobody reads. Code generation prints the bufferized program and needs
no device; only building the executable (at the first call) does.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from compiler.autodiff import grad_function
from compiler.compilation import TARGETS, Compilation, Options, Target, option_defaults
from compiler.ir.core import Function
from compiler.ir.printer import print_function
from compiler.ir.verify import verify
from compiler.passes import rows
from compiler.passes.bufferize import annotate, annotate_inplace, annotate_kernels
from compiler.passes.fuse import FusionPlan, GroupKind
from compiler.passes.if_to_select import if_to_select, select_budget
from compiler.passes.liveness import annotate_liveness
from compiler.passes.loops import compile_loops
from compiler.passes.plan import MemoryPlan, Planner, check_no_overlap
from compiler.passes.regions import close_regions
from compiler.passes.regions_unroll import unroll_regions
from compiler.passes.remat import rematerialize
from compiler.passes.schedule import schedule_for_memory
from compiler.passes.simplify import INPLACE_ATTR, dce, simplify
from runtime.errors import InplaceError, VerificationError

# on a user in-place request made inside a function compiled with strict_inplace=True (dsl/tracing.py)
STRICT_ATTR = "dsl.strict_inplace"


def planner(options: Options) -> Planner:
    """The fuse -> rows -> plan steps for ``options`` (its target's bands, when it prints them)."""
    target = TARGETS[options.target]
    bands = None
    if target.bands and options.row_fusion:
        numpy_kernel = target.numpy_kernel(options) if target.numpy_kernel else _no_numpy_kernels
        role = functools.partial(rows.band_role, numpy_kernel=numpy_kernel, row_max=target.row_max)
        cache: rows.ReadsCache = {}  # one per planner: the candidates remat and schedule plan share it
        once = options.row_compute_once
        columns = target.columns(options) if target.columns else None
        bands = functools.partial(rows.form_bands, role=role, compute_once=once, cache=cache, columns=columns)
    return Planner(
        options.inplace,
        options.donate_argnums,
        options.contract_transposes,
        options.recompute,
        options.pack_by_size,
        bands,
        functools.partial(_kernel_plan, options) if _scores_kernels(target) else None,
        options.results_in_place,
    )


def _scores_kernels(target: Target) -> bool:
    """Whether remat and schedule score a candidate's plan after the target's kernel passes
    (``KernelPasses.scored``): where they add much scratch to it (CUDA; the transformer block's
    schedule then finds an order whose plan holds its scratch: 13.1 MB instead of 15.2). The CPU's
    ``regions`` pass only shrinks slots and its scratch is a few rows or partial results per chunk,
    and building the CPU's kernels for every candidate made the pipeline 1.2-2.8x slower on the suite
    (``benchmarks/results/notes.md``, 2026-11-25), so the CPU scores the plan before them."""
    return target.kernel_passes is not None and target.kernel_passes().scored


def _kernel_plan(options: Options, func: Function, fusion: Any, plan: MemoryPlan) -> MemoryPlan:
    """The plan the target's kernel passes (``kernels``, ``regions``, ``scratch``) make of ``plan``."""
    passes = TARGETS[options.target].kernel_passes
    assert passes is not None
    steps = passes()
    kernels = steps.build(func, fusion, plan, options)
    for step in (steps.regions, steps.scratch):
        if step is not None:
            kernels, plan = step(func, fusion, plan, kernels, options)
    return plan


def _no_numpy_kernels(group: Any) -> bool:
    return False


# ---- the passes ------------------------------------------------------------------------------------


def _planner(c: Compilation) -> Planner:
    if c.planner is None:
        c.planner = planner(c.options)
    return c.planner


def _rewritten(c: Compilation, func: Function) -> Compilation:
    """A new function: the fusion and memory plans of the old one no longer apply."""
    return c if func is c.func else Compilation(func, c.options, planner=c.planner)


_MADE_BY = {
    "fusion": ("fusion plan", "fuse"),
    "plan": ("memory plan", "plan"),
    "kernels": ("kernels", "kernels"),
}


def _needs(c: Compilation, what: str, pass_name: str) -> Any:
    """The state's ``fusion`` or ``plan``, which an earlier pass of the list must have made."""
    value = getattr(c, what)
    if value is None:
        noun, producer = _MADE_BY[what]
        raise VerificationError(
            f"pass '{pass_name}' needs the {noun} that pass '{producer}' makes: run '{producer}' "
            f"before it (the pipeline's order: {', '.join(p.name for p in PASSES)})"
        )
    return value


def _close_regions(c: Compilation) -> Compilation:
    return _rewritten(c, close_regions(c.func))


def _unroll_regions(c: Compilation) -> Compilation:
    if c.options.native_loops:
        return c
    return _rewritten(c, unroll_regions(c.func, for_grad=bool(c.options.grad)))


def _functionalize(c: Compilation) -> Compilation:
    return _rewritten(c, dce(c.func))


def _autodiff(c: Compilation) -> Compilation:
    return _rewritten(c, grad_function(c.func, c.options.grad)) if c.options.grad else c


def _simplify(c: Compilation) -> Compilation:
    return _rewritten(c, simplify(c.func))


def _if_to_select(c: Compilation) -> Compilation:
    if not c.options.if_to_select:
        return c
    return _rewritten(c, if_to_select(c.func, select_budget(c.options)))


def _remat(c: Compilation) -> Compilation:
    return _rewritten(c, rematerialize(c.func, _planner(c))) if c.options.remat else c


def _schedule(c: Compilation) -> Compilation:
    return _rewritten(c, schedule_for_memory(c.func, _planner(c))) if c.options.schedule else c


def _fuse(c: Compilation) -> Compilation:
    fusion = _planner(c).fuse(c.func)
    return replace(
        c, fusion=fusion, plan=None, kernels=None, loops={}, printed=annotate_kernels(c.func, fusion)
    )


def _rows(c: Compilation) -> Compilation:
    fusion: FusionPlan = _needs(c, "fusion", "rows")
    _planner(c).form_bands(c.func, fusion)
    return replace(c, plan=None, kernels=None, loops={}, printed=annotate_kernels(c.func, fusion))


def _plan(c: Compilation) -> Compilation:
    fusion: FusionPlan = _needs(c, "fusion", "plan")
    plan = _planner(c).plan_buffers(c.func, fusion)
    if c.options.sanitize:
        check_no_overlap(plan)
    return replace(
        c, plan=plan, kernels=None, loops={}, printed=annotate(c.func, fusion, plan, bufferized=False)
    )


def _loops(c: Compilation) -> Compilation:
    plan: MemoryPlan = _needs(c, "plan", "loops")
    assert c.fusion is not None
    if not any(g.kind is GroupKind.CONTROL for g in c.fusion.groups):
        return c
    loops, planned = compile_loops(c.func, c.fusion, plan, c.options, lambda f, o: run_pipeline(f, o)[0])
    printed = annotate(c.func, c.fusion, planned, bufferized=False)
    return replace(c, loops=loops, plan=planned, printed=printed)


def _kernels(c: Compilation) -> Compilation:
    plan: MemoryPlan = _needs(c, "plan", "kernels")
    passes = TARGETS[c.options.target].kernel_passes
    if passes is None:
        return replace(c, kernels=None)
    assert c.fusion is not None
    return replace(c, kernels=passes().build(c.func, c.fusion, plan, c.options))


def _kernel_step(name: str) -> Callable[[Compilation], Compilation]:
    """The target's kernel-level pass ``name`` (``regions``, ``scratch``): it takes the kernels and
    the plan and returns both; a target without it leaves the program as it is."""

    def run(c: Compilation) -> Compilation:
        plan: MemoryPlan = _needs(c, "plan", name)
        passes = TARGETS[c.options.target].kernel_passes
        step = getattr(passes(), name) if passes is not None else None
        if step is None or c.kernels is None:
            return c
        assert c.fusion is not None
        kernels, changed = step(c.func, c.fusion, plan, c.kernels, c.options)
        if changed is plan:
            return replace(c, kernels=kernels)
        printed = annotate(c.func, c.fusion, changed, bufferized=False)
        return replace(c, kernels=kernels, plan=changed, printed=printed)

    return run


_regions = _kernel_step("regions")
_scratch = _kernel_step("scratch")


def _bufferize(c: Compilation) -> Compilation:
    plan: MemoryPlan = _needs(c, "plan", "bufferize")
    check_strict(plan, c.options, c.func)
    assert c.fusion is not None
    return replace(c, printed=annotate(c.func, c.fusion, plan))


@dataclass(frozen=True)
class Pass:
    name: str
    stage: str  # the IR stage this pass's output is
    run: Callable[[Compilation], Compilation]
    doc: str


PASSES: tuple[Pass, ...] = (
    Pass(
        "close_regions",
        "closed",
        _close_regions,
        "each value a loop or branch body reads from above becomes an operand of its region op",
    ),
    Pass("functionalize", "functional", _functionalize, "drop values superseded by in-place writes"),
    Pass("autodiff", "grad", _autodiff, "joint forward+backward program for the requested gradients only"),
    Pass(
        "unroll_regions",
        "unrolled",
        _unroll_regions,
        "with native_loops off only: loops and branches as straight-line IR (the reference)",
    ),
    Pass("simplify", "simplified", _simplify, "DCE, CSE, folding, identities valid under IEEE"),
    Pass(
        "if_to_select",
        "selected",
        _if_to_select,
        "an if whose branches are safe and cheap to run both (Options.if_select_budget): both, then selects",
    ),
    Pass(
        "remat",
        "rematerialized",
        _remat,
        "recompute cheap stored values in their later readers when the planned arena shrinks",
    ),
    Pass(
        "schedule", "optimized", _schedule, "reorder kernels so the planned arena is smaller (never larger)"
    ),
    Pass(
        "fuse", "fused", _fuse, "partition the ops into kernels (dsl.kernel); decide which values are stored"
    ),
    Pass(
        "rows",
        "row_fused",
        _rows,
        "run consecutive kernels over the same rows as one band, row by row (dsl.band), where the "
        "target prints bands (CPU and CUDA)",
    ),
    Pass("plan", "planned", _plan, "give every stored value its arena offset (dsl.offset, dsl.reuses)"),
    Pass(
        "loops",
        "looped",
        _loops,
        "compile each loop's and branch's regions as programs of their own (the whole pipeline); their "
        "arena is one scratch block live while the loop runs",
    ),
    Pass(
        "kernels",
        "kernels",
        _kernels,
        "each kernel as kernel IR (compiler/kernel/): loop nests or grid-stride loops, reductions "
        "with a strategy, bands, parallel loops, equal kernels shared",
    ),
    Pass(
        "regions",
        "regions",
        _regions,
        "run kernels that read row i only to write row i block of rows by block (row-block regions); "
        "their own buffers hold one block per thread (dsl.stored_as)",
    ),
    Pass(
        "scratch",
        "scratch",
        _scratch,
        "give the kernels' scratch (partial results, rows per chunk or past shared memory) arena "
        "offsets while their kernel runs (dsl.scratch)",
    ),
    Pass(
        "bufferize",
        "bufferized",
        _bufferize,
        "the program on buffers (memref types); judge strict in-place requests",
    ),
)
# ``dslc opt`` also runs these analyses and reports, which the pipeline does not need.
EXTRA_PASSES: tuple[Pass, ...] = (
    Pass("dce", "dce", lambda c: _rewritten(c, dce(c.func)), "dead-code elimination only"),
    Pass(
        "liveness",
        "liveness",
        lambda c: replace(c, printed=annotate_liveness(c.func)),
        "annotate each op with the operands that die there",
    ),
    Pass(
        "inplace",
        "inplace",
        lambda c: replace(c, printed=annotate_inplace(c.func, c.fusion, _needs(c, "plan", "inplace"))),
        "after plan: annotate buffer reuse and each in-place request's outcome",
    ),
)
PASSES_BY_NAME = {p.name: p for p in PASSES + EXTRA_PASSES}
STAGES = ("traced",) + tuple(p.stage for p in PASSES)
# The passes after the ``optimized`` stage: what turns optimized IR into the program codegen prints.
KERNEL_PASSES = PASSES[[p.stage for p in PASSES].index("optimized") + 1 :]


_gc_lock = threading.Lock()
_gc_pauses = 0  # compiles in progress (nested or in other threads)
_gc_was_enabled = True


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the passes run. They allocate many small
    objects that stay alive (ops, values, maps), so collections get more frequent *and* each one
    walks everything alive: the pipeline then grows faster than linearly (synthetic programs: 42 us
    per op at 1k ops, 100 us at 30k with the collector; 40 and 54 us without). The passes make no
    garbage cycles worth collecting early; the collector resumes (and catches up) afterwards, when
    the last of nested or concurrent compiles ends."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def run_pipeline(
    func: Function,
    options: Options,
    passes: tuple[Pass, ...] = PASSES,
    observe: Callable[[Pass, Function], None] | None = None,
) -> tuple[Compilation, dict[str, Function]]:
    """Run ``passes`` in order on ``func``; the final state, and each stage's IR (``traced`` first)."""
    with paused_gc():
        state = Compilation(func, options)
        stages = {"traced": func}
        if options.verify:
            _verify(func, "the tracer")
        for p in passes:
            before = state.func
            state = p.run(state)
            if options.verify and state.func is not before:
                _verify(state.func, f"pass '{p.name}'")
            stages[p.stage] = state.stage()
            if observe is not None:
                observe(p, stages[p.stage])
    # the planner's caches served this run's passes; a kept Program must not hold them
    return replace(state, planner=None), stages


def run_passes(
    func: Function,
    options: Options,
    passes: tuple[Pass, ...] = PASSES,
    observe: Callable[[Pass, Function], None] | None = None,
) -> dict[str, Function]:
    """Run ``passes`` in order; returns the IR after each stage (``traced`` first)."""
    return run_pipeline(func, options, passes, observe)[1]


def plan_program(func: Function, options: Options | None = None) -> Compilation:
    """The passes after ``optimized`` (fuse, rows, plan, bufferize) on optimized IR: the program a
    code generator prints."""
    return run_pipeline(func, options or Options(), KERNEL_PASSES)[0]


def _verify(func: Function, after: str) -> None:
    try:
        verify(func)
    except Exception as err:
        raise type(err)(f"IR invalid after {after}: {err}") from None


def check_strict(plan: MemoryPlan, options: Options, func: Function) -> None:
    """``strict_inplace=True``: an in-place request demoted to a copy is a compile-time error; so is
    one made inside a function compiled with ``strict_inplace=True`` (its ops carry ``STRICT_ATTR``)
    that a transform or an outer compiled function inlined into this program."""
    strict = {(op.loc, str(op.attrs[INPLACE_ATTR])) for op in func.ops if op.attrs.get(STRICT_ATTR)}
    for d in plan.inplace:
        if d.request and d.outcome == "copy" and (options.strict_inplace or (d.loc, d.request) in strict):
            where = f"; the old value is still read at {d.blocker}" if d.blocker else ""
            raise InplaceError(
                f"{d.loc}: the in-place {d.request} cannot be realized without a copy{where} "
                f"(strict_inplace=True; reason: {d.reason})"
            )


def dump_stages(stages: Mapping[str, str], name: str, directory: str, options: Options | None = None) -> None:
    """``DSL_DUMP_IR=<dir>``: one file per stage, ``<name>.<program>.<nn>.<stage>.mlir``: ``program``
    a hash of the options and of every stage's text, so each program keeps its files: every signature
    of a function, every function of one name (each ``lambda``), and every transform and set of options
    of one function (``grad``, ``value_and_grad``, ``inplace=False`` share its traced stage, and a
    program with nothing to plan prints the same stages with ``inplace=False``); compiling the same
    program again writes the same files. ``nn`` lists the stages in order."""
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha256(repr(options).encode())  # a dataclass of plain values: a stable repr
    for stage, text in stages.items():
        digest.update(f"\0{stage}\0{text}".encode())
    program = digest.hexdigest()[:8]
    for i, (stage, text) in enumerate(stages.items()):
        with open(os.path.join(directory, f"{name}.{program}.{i:02d}.{stage}.mlir"), "w") as f:
            f.write(text)


class _PrintedStages(Mapping[str, str]):
    """Each stage's IR text, printed when first asked for."""

    def __init__(self, stages: Mapping[str, Function]) -> None:
        self._stages = stages
        self._text: dict[str, str] = {}

    def __getitem__(self, stage: str) -> str:
        if stage not in self._text:
            self._text[stage] = print_function(self._stages[stage])
        return self._text[stage]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stages)

    def __len__(self) -> int:
        return len(self._stages)


@dataclass
class Program:
    """Everything compiling one traced function produced: IR per stage, plan, code; the executable
    is built at its first use (for CUDA that needs the device: nothing before it does)."""

    stages: dict[str, Function]
    compilation: Compilation  # the pipeline's final state: what codegen printed
    generated: Any  # the code generator's program (CpuProgram or CudaProgram)
    memory_plan: MemoryPlan  # the plan the generated code follows
    build: Callable[[], Callable[..., tuple[Any, ...]]] = field(repr=False)
    target: str = "cpu"
    options: Options | None = None
    _executable: Callable[..., tuple[Any, ...]] | None = field(default=None, repr=False)
    _ptx: dict[tuple[int, int], dict[str, str]] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def stage_text(self) -> Mapping[str, str]:
        return _PrintedStages(self.stages)

    @property
    def source(self) -> str:
        """The generated Numba module (njit for the CPU, numba.cuda for CUDA)."""
        return str(self.generated.source)

    @property
    def executable(self) -> Callable[..., tuple[Any, ...]]:
        """The runnable program, built on first use (``DeviceError`` for CUDA without a GPU)."""
        if self._executable is None:
            self._executable = self.build()
        return self._executable

    def ptx(self, cc: tuple[int, int] = (9, 0)) -> str:
        """PTX of every CUDA kernel of this program for compute capability ``cc`` (default sm_90).

        Needs the ``cuda`` extra (NVVM) but no GPU: a CPU-target program is planned and generated for
        CUDA from the same optimized IR and options.
        """
        if cc not in self._ptx:
            from compiler.codegen import compile_ptx, cuda_program

            if self.target == "cuda":
                program = self.generated
            else:
                options = replace(self.options or Options(), target="cuda")
                program = cuda_program(plan_program(self.stages["optimized"], options))
            self._ptx[cc] = compile_ptx(program, cc)
        arch = f"sm_{cc[0]}{cc[1]}"
        kernels = self._ptx[cc].items()
        return "".join(f"// ===== kernel {name} ({arch}) =====\n{text.rstrip()}\n" for name, text in kernels)

    def explain_inplace(self) -> str:
        """Each user in-place request and what the compiler did with it, then its own reuses."""
        requests = [d for d in self.memory_plan.inplace if d.request]
        planned = {(d.loc, d.request) for d in requests}
        lines = [str(d) for d in requests]
        for op in self.stages["traced"].ops:
            request = op.attrs.get(INPLACE_ATTR)
            if request is not None and (op.loc, request) not in planned:
                lines.append(
                    f"{op.loc}: {request} -> removed: the optimizer replaced the written value (unused, "
                    "folded to a constant, or equal to another value): no in-place work is left"
                )
                planned.add((op.loc, request))
        chosen = [str(d) for d in self.memory_plan.inplace if not d.request]
        if not lines:
            lines.append("no in-place requests in this program")
        if chosen:
            lines += ["buffers reused in place by the compiler:", *(f"  {c}" for c in chosen)]
        return "\n".join(lines) + "\n"

    def dump(self, directory: str) -> None:
        dump_stages(self.stage_text, self.stages["traced"].name, directory, self.options)


def compile_function(func: Function, options: Options) -> Program:
    """Run the passes, then print the program for ``options.target``; the executable is built at its
    first use."""
    from compiler import codegen

    state, stages = run_pipeline(func, options)
    generated, plan = codegen.generate(state)
    return Program(
        stages,
        state,
        generated,
        plan,
        functools.partial(codegen.load, state, generated),
        options.target,
        options,
    )


__all__ = [
    "KERNEL_PASSES",
    "PASSES",
    "PASSES_BY_NAME",
    "STAGES",
    "TARGETS",
    "Compilation",
    "Options",
    "Pass",
    "Program",
    "Target",
    "compile_function",
    "option_defaults",
    "plan_program",
    "planner",
    "print_function",
    "run_passes",
    "run_pipeline",
]
