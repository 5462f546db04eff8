"""How much a suite program slows down when another process takes part of one core, dslc against JAX.

    python benchmarks/bench_interference.py ["second derivative"] [--duty 0.5] [--rounds 3]

On a 2-core machine every parallel kernel of dslc is a fork-join over both cores: when the OS runs
another process on one of them, the thread it preempts holds up the kernel's barrier. This times
each framework (each in a new process, ``bench_suite.time_in_child``) on an idle machine and beside
a process that is busy ``duty`` of each 20 ms on one core, the two conditions and the frameworks
interleaved, and prints the median of each framework's per-round medians and its slowdown. The
result goes to ``results/interference.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_suite import available, time_in_child, write_report  # noqa: E402

PERIOD_S = 0.02
_LOAD = """
import sys, time
busy, idle = float(sys.argv[1]), float(sys.argv[2])
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < busy:
        pass
    time.sleep(idle)
"""


@contextmanager
def competing_process(duty: float) -> Iterator[None]:
    """Another process busy ``duty`` of every ``PERIOD_S`` (none for 0)."""
    if duty <= 0:
        yield
        return
    busy = duty * PERIOD_S
    load = subprocess.Popen([sys.executable, "-c", _LOAD, str(busy), str(PERIOD_S - busy)])
    time.sleep(0.2)
    try:
        yield
    finally:
        load.kill()
        load.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("program", nargs="?", default="second derivative")
    parser.add_argument("--duty", type=float, default=0.5, help="share of one core the other process takes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "interference.md")
    )
    args = parser.parse_args()
    frameworks = ["dslc"] + [f for f in ("jax", "torch") if available(f) is None]
    conditions = {"idle": 0.0, f"{args.duty:.0%} of a core taken": args.duty}
    times: dict[tuple[str, str], list[float]] = {(c, f): [] for c in conditions for f in frameworks}
    for _ in range(args.rounds):
        for cond, duty in conditions.items():
            with competing_process(duty):
                for f in frameworks:
                    times[cond, f].append(time_in_child(args.program, f, args.repeats))
    idle = next(iter(conditions))
    lines = [
        f"# Slowdown beside another busy process: {args.program}",
        "",
        f"- date: {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores",
        f'- command: `python benchmarks/bench_interference.py "{args.program}" --duty {args.duty} '
        f"--rounds {args.rounds} --repeats {args.repeats}`",
        f"- median of {args.rounds} rounds (each a median of {args.repeats} calls in a new process); "
        f"the other process is busy {args.duty:.0%} of every {1e3 * PERIOD_S:.0f} ms",
        "",
        "| condition | "
        + " | ".join(f"{f} ms" for f in frameworks)
        + " | "
        + " | ".join(f"{f} slowdown" for f in frameworks)
        + " |",
        "|---|" + "---:|" * (2 * len(frameworks)),
    ]
    for cond in conditions:
        med = [statistics.median(times[cond, f]) for f in frameworks]
        base = [statistics.median(times[idle, f]) for f in frameworks]
        lines.append(
            f"| {cond} | "
            + " | ".join(f"{1e3 * m:.2f}" for m in med)
            + " | "
            + " | ".join(f"{m / b:.2f}x" for m, b in zip(med, base))
            + " |"
        )
    write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
