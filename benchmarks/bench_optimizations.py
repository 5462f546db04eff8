"""The measured effect of each CPU optimization (``compiler.compilation.CPU_SWITCHES``, the passes' options):
each suite program compiled with all of them and with one switched off, timed interleaved in one run.

    python benchmarks/bench_optimizations.py [--only NAME,...] [--switches NAME,...] [--rounds 5]
        [--tile-depths KIB,...] [--out FILE.md]

Also checks that both builds give the same results (allclose), so each optimization is checked
against its switched-off form on every suite program.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import suite_programs  # noqa: E402
from bench_suite import copy_tree, leaves  # noqa: E402

from compiler.compilation import CPU_SWITCHES  # noqa: E402
from compiler.pipeline import option_defaults  # noqa: E402
from runtime import blas  # noqa: E402

# The passes' choices (``Options`` fields: fusion's and row fusion's) compared the same way, each
# on by default: each column shows the effect of turning it off.
FUSION = {
    name: {name: False} for name in ("recompute", "contract_transposes", "row_fusion", "row_compute_once")
}


@contextlib.contextmanager
def switched_off(names: set[str]) -> Iterator[None]:
    """Compiling without the CPU optimizations and fusion choices in ``names`` (``Options`` fields
    all), meanwhile."""
    with option_defaults(**dict.fromkeys(names, False)):
        yield


def build(name: str, off: set[str], tile_depth: int | None = None) -> tuple[Callable[[], Any], Any]:
    """Suite program ``name`` compiled with ``off`` switched off (and, given ``tile_depth``, register
    tiles for products up to that many bytes deep: ``runtime.blas.TILE_MAX_DEPTH_BYTES``): a call on
    its own inputs, and its first result."""
    limit = blas.TILE_MAX_DEPTH_BYTES
    blas.TILE_MAX_DEPTH_BYTES = limit if tile_depth is None else tile_depth
    with switched_off(off), contextlib.ExitStack() as restore:
        restore.callback(setattr, blas, "TILE_MAX_DEPTH_BYTES", limit)
        prog = suite_programs.BUILDERS[name]()
        args = copy_tree(prog.args)
        first = leaves(prog.dslc(*copy_tree(prog.args)))  # compiles with the switches as set now
    return (lambda: prog.dslc(*args)), first


def interleaved_times(
    fns: dict[str, Callable[[], Any]], rounds: int, per_round: int
) -> dict[str, list[float]]:
    """Every call's seconds: each function once to warm up, then ``rounds`` rounds calling each
    ``per_round`` times in turn (this VM's speed drifts: alternating exposes them to the same drift)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
    return times


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, per_round: int = 3) -> dict[str, float]:
    times = interleaved_times(fns, rounds, per_round)
    return {k: min(v) for k, v in times.items()}  # the least disturbed run: other load only adds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="", help="also write the table here (markdown)")
    parser.add_argument("--switches", default="", help="only these optimizations (comma-separated)")
    parser.add_argument("--tile-depths", default="", help="also tiles up to these KiB of depth (k)")
    args = parser.parse_args()
    lines: list[str] = []
    emit = lines.append
    wanted = [w for w in args.only.split(",") if w]
    switches = sorted(CPU_SWITCHES) + list(FUSION)
    if args.switches:
        unknown = set(args.switches.split(",")) - set(switches)
        if unknown:
            parser.error(f"unknown switches {sorted(unknown)}; known: {', '.join(switches)}")
        switches = [o for o in switches if o in args.switches.split(",")]
    command = "python benchmarks/bench_optimizations.py" + (f" --only {args.only}" if args.only else "")
    command += f" --switches {args.switches}" if args.switches else ""
    command += f" --tile-depths {args.tile_depths}" if args.tile_depths else ""
    limits = {f"+tiles to {kib} KiB deep": int(kib) << 10 for kib in args.tile_depths.split(",") if kib}
    switches += list(limits)
    emit(f"# Optimizations, each switched off (min of {args.rounds} interleaved rounds of 3 calls)\n")
    emit(f"- command: `{command} --rounds {args.rounds}`; load average {os.getloadavg()[0]:.2f}\n")
    emit(
        "| program | as built ms | "
        + " | ".join(f"{o if o[0] == '+' else 'without ' + o} ms" for o in switches)
        + " |"
    )
    emit("|---|" + "---:|" * (len(switches) + 1))
    for name in suite_programs.BUILDERS:
        if wanted and not any(w in name for w in wanted):
            continue
        on, want = build(name, set())
        fns = {"on": on}
        for opt in switches:
            fns[opt], got = build(name, set(), limits[opt]) if opt in limits else build(name, {opt})
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(w).max())))
        t = interleaved(fns, args.rounds)
        cells = " | ".join(f"{1e3 * t[o]:.2f} ({t[o] / t['on']:.2f}x)" for o in switches)
        emit(f"| {name} | {1e3 * t['on']:.2f} | {cells} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
