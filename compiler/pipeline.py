"""The compiler pipeline: one visible, ordered list of named passes, then the backend.

    traced --functionalize--> functional --simplify--> optimized --fuse+plan--> bufferized --codegen

Functionalization of user mutation happens while tracing (``dsl/array.py`` resolves views and writes
into pure SSA, marking the ops that realize each in-place request); the ``functionalize`` pass then
drops the superseded versions nobody reads. Autodiff (the ``grad`` stage) slots in after it.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from compiler.autodiff import GradSpec, grad_function
from compiler.ir.core import Function
from compiler.ir.printer import print_function
from compiler.ir.verify import verify, verify_enabled
from compiler.passes.bufferize import annotate_inplace, plan_and_annotate
from compiler.passes.liveness import annotate_liveness
from compiler.passes.remat import remat_enabled, rematerialize
from compiler.passes.schedule import schedule_enabled, schedule_for_memory
from compiler.passes.simplify import INPLACE_ATTR, dce, simplify
from runtime.errors import InplaceError

# on a user in-place request made inside a function compiled with strict_inplace=True (dsl/tracing.py)
STRICT_ATTR = "dsl.strict_inplace"


def inplace_enabled() -> bool:
    return os.environ.get("DSL_NO_INPLACE", "") in ("", "0")


def sanitize_enabled() -> bool:
    return os.environ.get("DSL_SANITIZE", "") not in ("", "0")


@dataclass
class Options:
    """Compiler options; the CLI and ``dsl.compile`` set these fields."""

    target: str = "cpu"
    inplace: bool = field(default_factory=inplace_enabled)
    strict_inplace: bool = False
    donate_argnums: tuple[int, ...] = ()
    verify: bool = field(default_factory=verify_enabled)
    sanitize: bool = field(default_factory=sanitize_enabled)
    grad: GradSpec | None = None  # set for grad/value_and_grad programs: what the autodiff pass derives
    remat: bool = field(default_factory=remat_enabled)  # recompute cheap stored values (DSL_NO_REMAT)
    schedule: bool = field(default_factory=schedule_enabled)  # memory-aware op order (DSL_NO_SCHEDULE)


@dataclass(frozen=True)
class Pass:
    name: str
    stage: str  # the IR stage this pass's output is
    run: Callable[[Function, Options], Function]
    doc: str


PASSES: tuple[Pass, ...] = (
    Pass("functionalize", "functional", lambda f, o: dce(f), "drop values superseded by in-place writes"),
    Pass(
        "autodiff",
        "grad",
        lambda f, o: grad_function(f, o.grad) if o.grad else f,
        "joint forward+backward program for the requested gradients only",
    ),
    Pass(
        "simplify",
        "optimized",
        lambda f, o: memory_passes(simplify(f), o),
        "DCE, CSE, folding; remat, schedule",
    ),
)


def memory_passes(func: Function, options: Options) -> Function:
    """The last steps of the ``optimized`` stage, each kept only where it shrinks the planned arena:
    ``remat`` (``Options.remat``) then ``schedule`` (``Options.schedule``). They run inside the
    ``simplify`` entry so the stage list and its dump headers stay as they are; ``dslc opt --passes
    remat,schedule`` runs them on their own."""
    if options.remat:
        func = rematerialize(func, options.inplace, options.donate_argnums)
    if options.schedule:
        func = schedule_for_memory(func, options.inplace, options.donate_argnums)
    return func


PASSES_BY_NAME = {p.name: p for p in PASSES} | {
    "dce": Pass("dce", "dce", lambda f, o: dce(f), "dead-code elimination only"),
    "remat": Pass(
        "remat",
        "remat",
        lambda f, o: rematerialize(f, o.inplace, o.donate_argnums),
        "recompute cheap stored values in their later readers when the planned arena shrinks",
    ),
    "schedule": Pass(
        "schedule",
        "scheduled",
        lambda f, o: schedule_for_memory(f, o.inplace, o.donate_argnums),
        "reorder kernels so the planned arena is smaller (never larger)",
    ),
    "inplace": Pass(
        "inplace",
        "inplace",
        lambda f, o: annotate_inplace(f, o.inplace, o.donate_argnums),
        "fuse and plan; annotate buffer reuse and each in-place request's outcome",
    ),
    "plan": Pass(
        "plan",
        "bufferized",
        lambda f, o: plan_and_annotate(f, o.inplace, o.donate_argnums),
        "fuse and plan buffers; print the bufferized stage (offsets, reuse, kernels)",
    ),
    "liveness": Pass(
        "liveness",
        "liveness",
        lambda f, o: annotate_liveness(f),
        "annotate each op with the operands that die there",
    ),
}
STAGES = ("traced",) + tuple(p.stage for p in PASSES) + ("bufferized",)


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


def run_passes(
    func: Function,
    options: Options,
    passes: tuple[Pass, ...] = PASSES,
    observe: Callable[[Pass, Function], None] | None = None,
) -> dict[str, Function]:
    """Run ``passes`` in order; returns the function after each stage (``traced`` first)."""
    with paused_gc():
        return _run_passes(func, options, passes, observe)


def _run_passes(
    func: Function,
    options: Options,
    passes: tuple[Pass, ...],
    observe: Callable[[Pass, Function], None] | None,
) -> dict[str, Function]:
    stages = {"traced": func}
    if options.verify:
        _verify(func, "the tracer")
    for p in passes:
        func = p.run(func, options)
        if options.verify:
            _verify(func, f"pass '{p.name}'")
        stages[p.stage] = func
        if observe is not None:
            observe(p, func)
    return stages


def _verify(func: Function, after: str) -> None:
    try:
        verify(func)
    except Exception as err:
        raise type(err)(f"IR invalid after {after}: {err}") from None


def dump_stages(stages: dict[str, str], name: str, directory: str) -> None:
    """``DSL_DUMP_IR=<dir>``: one file per stage."""
    os.makedirs(directory, exist_ok=True)
    for i, (stage, text) in enumerate(stages.items()):
        with open(os.path.join(directory, f"{name}.{i}.{stage}.mlir"), "w") as f:
            f.write(text)


__all__ = ["Options", "PASSES", "PASSES_BY_NAME", "STAGES", "Pass", "print_function", "run_passes"]


@dataclass
class Program:
    """Everything compiling one traced function produced: IR per stage, plan, code, executable."""

    stages: dict[str, Function]
    stage_text: dict[str, str]
    executable: Callable[..., tuple[Any, ...]]
    memory_plan: Any
    source: str  # the generated Numba module (njit for the CPU, numba.cuda for CUDA)
    target: str = "cpu"
    options: Options | None = None
    _ptx: dict[tuple[int, int], dict[str, str]] = field(default_factory=dict, repr=False)

    def ptx(self, cc: tuple[int, int] = (9, 0)) -> str:
        """PTX of every CUDA kernel of this program for compute capability ``cc`` (default sm_90).

        Needs the ``cuda`` extra (NVVM) but no GPU: a CPU-target program is generated for CUDA
        from the same optimized IR and plan options.
        """
        if cc not in self._ptx:
            from compiler.codegen import compile_ptx, cuda_program

            opts = self.options or Options()
            program = cuda_program(self.stages["optimized"], opts.inplace, opts.donate_argnums)
            self._ptx[cc] = compile_ptx(program, cc)
        arch = f"sm_{cc[0]}{cc[1]}"
        kernels = self._ptx[cc].items()
        return "".join(f"// ===== kernel {name} ({arch}) =====\n{text.rstrip()}\n" for name, text in kernels)

    def explain_inplace(self) -> str:
        """Each user in-place request and what the compiler did with it, then its own reuses."""
        requests = [d for d in self.memory_plan.inplace if d.request]
        planned = {(d.loc, d.request) for d in requests}
        lines = [str(d) for d in requests]
        for op in self.stages["functional"].ops:
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
        dump_stages(self.stage_text, self.stages["traced"].name, directory)


def _check_strict(plan: Any, options: Options, func: Function) -> None:
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


def compile_function(func: Function, options: Options) -> Program:
    """Run the passes, then build the executable for ``options.target``."""
    from compiler.codegen import build_cpu_executable, build_cuda_executable
    from compiler.passes.bufferize import annotate

    stages = run_passes(func, options)
    build = build_cuda_executable if options.target == "cuda" else build_cpu_executable
    executable, generated, fusion, plan = build(
        stages["optimized"], options.inplace, options.donate_argnums, options.sanitize
    )
    _check_strict(plan, options, stages["optimized"])
    stages["bufferized"] = annotate(stages["optimized"], fusion, plan)
    text = {name: print_function(f) for name, f in stages.items()}
    return Program(stages, text, executable, plan, generated.source, options.target, options)
