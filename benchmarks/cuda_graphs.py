"""Host cost of a CUDA call with and without graphs (issue 27: at most 20 us + 2 us per kernel).

    python benchmarks/cuda_graphs.py [--repeats 50] [--rounds 5] [--out gpu_out/graphs.md]
                                     [--profile 200 [--profile-out gpu_out/graphs_profile.txt]]

Needs an NVIDIA GPU. For each of the suite's six programs at the CPU suite's sizes
(``suite_programs.BUILDERS``), inputs on the device: two executables of the program, one kept eager
and one replaying its graph whatever the cost rule says (``runtime/cuda_graphs.py``), their results
checked bit for bit, then timed in alternating rounds (medians of ``repeats`` calls, each call
returning after its stream finished). The kernel time is the graph replayed back to back without
staging; a call's host cost is its wall time less that. Printed beside: the kernel launches, the
target (20 us + 2 us per launch) and what the cost rule chooses by itself. ``--profile N`` then runs
N more graph calls of each program under cProfile and lists the functions the host time goes to (per
call, by own time): where a call's host cost is, beyond the one ``cuGraphLaunch``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_measure import median_time  # noqa: E402
from numba import cuda  # noqa: E402
from suite_programs import BUILDERS  # noqa: E402

from dsl import pytree  # noqa: E402
from runtime import cuda_graphs  # noqa: E402


def on_device(tree: Any) -> Any:
    leaves, treedef = pytree.flatten(tree)
    return pytree.unflatten(treedef, [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in leaves])


def host(tree: Any) -> list[np.ndarray]:
    return [
        np.asarray(a.copy_to_host() if hasattr(a, "copy_to_host") else a) for a in pytree.flatten(tree)[0]
    ]


def build(name: str, graphs: bool) -> tuple[Any, Any, Any]:
    """The program's compiled function, device arguments and executable, graphs forced on or off."""
    program = BUILDERS[name]()
    args = on_device(program.args)
    executable = program.dslc.lower(*args).program.executable  # (device arguments: their signature)
    rule = executable.eager_reason  # what the cost rule and the switches chose by themselves
    executable.eager_reason = None if graphs else "measured eager"
    return program, args, (executable, rule)


def measure(name: str, repeats: int, rounds: int) -> dict[str, Any]:
    eager_prog, eager_args, (eager_exe, _) = build(name, graphs=False)
    graph_prog, graph_args, (graph_exe, rule) = build(name, graphs=True)
    want = host(eager_prog.dslc(*on_device(eager_prog.args)))
    for _ in range(2):  # eager (warm), then capture and replay (fresh arguments: a step mutates them)
        got = host(graph_prog.dslc(*on_device(graph_prog.args)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: graph and eager results differ")
    assert graph_exe.graph is not None, graph_exe.eager_reason
    off, on = [], []
    for _ in range(rounds):  # alternating, so that drift in the machine's speed hits both alike
        # (a call returns after its stream finished: timed to its return, no warm-up of its own)
        off.append(median_time(lambda: eager_prog.dslc(*eager_args), repeats, warmup=0, wait=False))
        on.append(median_time(lambda: graph_prog.dslc(*graph_args), repeats, warmup=0, wait=False))
    stream = graph_exe.stream
    handle = cuda_graphs.stream_handle(stream)
    stream.synchronize()
    begin = time.perf_counter()
    for _ in range(repeats):
        graph_exe.graph.launch(handle)
    stream.synchronize()
    kernels = (time.perf_counter() - begin) / repeats
    launches = graph_prog.dslc.lower(*graph_args).program.generated.launches
    return dict(
        name=name,
        launches=launches,
        off=statistics.median(off),
        on=statistics.median(on),
        kernels=kernels,
        rule="graphs" if rule is None else f"eager: {rule}",
    )


def profile(name: str, calls: int, top: int = 14) -> str:
    """The functions a graph call's host time goes to: ``calls`` calls of the program under cProfile,
    the ``top`` by own time, in microseconds per call."""
    program, args, (executable, _) = build(name, graphs=True)
    for _ in range(3):  # eager, capture, one replay
        program.dslc(*args)
    assert executable.graph is not None, executable.eager_reason
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        program.dslc(*args)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.stats.values()) / calls * 1e6  # type: ignore[attr-defined]
    lines = [f"## {name}: {total:.0f} us of profiled host time per call (profiling inflates it)", ""]
    for (path, line, func), (_, ncalls, tottime, cumtime, _) in rows:
        where = f"{os.path.basename(path)}:{line}"
        lines.append(
            f"{tottime / calls * 1e6:8.1f} us own {cumtime / calls * 1e6:8.1f} us cum "
            f"{ncalls / calls:5.1f}x  {func} ({where})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default=None, help="one program's name")
    parser.add_argument("--profile", type=int, default=0, help="then profile this many graph calls of each")
    parser.add_argument("--profile-out", default=None, help="write the profiles to this file")
    args = parser.parse_args()
    os.environ["DSL_CUDA_GRAPHS"] = "1"  # the rule's own choice is reported; both paths are forced
    name = getattr(cuda.get_current_device(), "name", "the CUDA simulator")
    device = name.decode() if isinstance(name, bytes) else name
    load = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    command = f"python benchmarks/cuda_graphs.py --repeats {args.repeats} --rounds {args.rounds}"
    lines = [
        f"# Host cost of a call, graphs off and on ({device})",
        "",
        f"`{command}`; host load {load}.",
        "Times in ms per call (medians); host = wall - kernels; target = 0.020 + 0.002 x launches.",
        "",
        "| program | launches | kernels | eager wall | eager host | graph wall | graph host "
        "| target | rule |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    print("\n".join(lines), flush=True)
    for program in [args.only] if args.only else list(BUILDERS):
        r = measure(program, args.repeats, args.rounds)
        ms = lambda s: f"{s * 1e3:.3f}"  # noqa: E731
        times = [r["kernels"], r["off"], r["off"] - r["kernels"], r["on"], r["on"] - r["kernels"]]
        target = 20e-6 + 2e-6 * r["launches"]
        row = f"| {program} | {r['launches']} | {' | '.join(map(ms, times))} | {ms(target)} | {r['rule']} |"
        print(row, flush=True)
        lines.append(row)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.profile:
        profiles = [profile(p, args.profile) for p in ([args.only] if args.only else list(BUILDERS))]
        text = "\n\n".join(profiles)
        print(text, flush=True)
        if args.profile_out:
            with open(args.profile_out, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
