"""Native loops on the CUDA target without a GPU: every kernel of the loop programs (their bodies',
at every nesting level, and their gradients') compiles to PTX for sm_80 and sm_90, and the host
driver's loops take their counters and rows from views made once in ``bind``. Their values run in the
simulator: ``tests/cuda_sim/sim_native_loops.py``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import test_native_loops as programs
from cuda_ptx import ARCHS, PTX_AVAILABLE, PTX_UNAVAILABLE

import dsl
from compiler.compilation import option_defaults

sys.path.insert(0, str(Path(__file__).parent / "cuda_sim"))
import sim_native_loops as sim  # noqa: E402  (the simulator suite's extra programs)

X, W, XS = programs.X, programs.W, programs.XS


def _lowered(name: str):
    if name in programs.PROGRAMS:
        fn, args = programs.PROGRAMS[name]
        return dsl.compile(lambda *a: fn(dsl, *a), target="cuda").lower(*args)
    if name == "traced_trips":
        return dsl.compile(lambda n, x, w: sim.traced_trips(dsl, n, x, w), target="cuda").lower(3, X, W)
    if name == "loop_in_loop":
        return dsl.compile(lambda *a: sim.loop_in_loop(dsl, *a), target="cuda").lower(X, W, XS[:3])
    base = name.removeprefix("grad_")
    _, args = programs.PROGRAMS[base]
    return dsl.compile(dsl.grad(sim._loss(base), argnums=(0, 1)), target="cuda").lower(*args)


NAMES = [
    *sorted(programs.PROGRAMS),
    "traced_trips",
    "loop_in_loop",
    "grad_rnn",
    "grad_swapped",
    "grad_branches",
]


@pytest.mark.skipif(not PTX_AVAILABLE, reason=PTX_UNAVAILABLE)
@pytest.mark.parametrize("name", NAMES)
def test_loop_kernels_compile_to_ptx(name: str) -> None:
    with option_defaults(if_to_select=False):  # these branches are cheap: kept native, not selects
        lowered = _lowered(name)
    kernels = {k.name for k in lowered._program.generated.kernels}
    printed = set(re.findall(r"@cuda\.jit(?:\(cache=not SIM\))?\ndef (\w+)\(", lowered.source())) - {"_fill"}
    assert printed <= kernels  # (a tiled matmul is printed through _load_module)
    if name not in (
        "zero_trips",
    ):  # (a loop of no trips with a literal empty range has no body kernels left)
        assert any(re.match(r"l\d+[a-z]_", k) for k in kernels), "no kernel of a loop body"
    for cc in ARCHS:
        ptx = lowered.ptx(cc)
        entries = set(re.findall(r"===== kernel (\S+) \(sm_\d+\) =====", ptx))
        assert entries == kernels
        assert ptx.count(f".target sm_{cc[0]}{cc[1]}") == len(kernels)


def _sliced_in_run(source: str) -> list[str]:
    """The device arrays ``run`` slices (a ``[a:b]`` subscript in a run line, views made in bind aside)."""
    run = source[source.index("    def run(") :]
    return re.findall(r"(\w+)\[[^\[\]]*:[^\[\]]*\]", run)


def test_loop_iterations_slice_no_device_array_made_in_bind() -> None:
    """A for's counters (literal bounds) and a scan's rows of arena arrays are lists of views made once
    in ``bind``: an iteration indexes a list instead of slicing a device array (a DeviceNDArray slice
    costs tens of microseconds of host time). Only the rows of the call's own arrays are sliced."""
    short = dsl.compile(lambda x, y: dsl.fori_loop(0, 100, lambda i, c: c * 0.5 + y * i, x), target="cuda")
    assert _sliced_in_run(short.lower(X, X).source()) == []
    grad_rnn = _lowered("grad_rnn").source()  # the forward scan stacks its residuals, the backward reads them
    assert _sliced_in_run(grad_rnn) == ["a1"]  # the rows of xs, an argument
    assert "rows0 = [" in grad_rnn
    long = dsl.compile(lambda x, y: dsl.fori_loop(0, 5000, lambda i, c: c * 0.5 + y * i, x), target="cuda")
    assert len(_sliced_in_run(long.lower(X, X).source())) == 1  # past ROW_VIEWS: a slice per iteration
