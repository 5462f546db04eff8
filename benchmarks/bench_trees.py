"""dslc's CPU suite times in two source trees, side by side in one run: a refactor's A/B.

    python benchmarks/bench_trees.py BEFORE_DIR [AFTER_DIR] [--only NAME,...] [--rounds 5] [--out FILE.md]

A tree is a checkout of the repository (``git worktree add /tmp/before <rev>``; AFTER_DIR defaults to
this one). For each program of ``suite_programs.py`` (each tree's own), each round runs a fresh
process per tree, alternating which tree goes first: the process compiles the program (the first
round warms Numba's cache), checks the two trees' results agree, and times the median of repeated
calls after warm-up; a tree's figure is its lowest round median. The ratio AFTER / BEFORE is the
change (the issue-26 bar: within 5% on every program).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_CHILD = r"""
import json, os, statistics, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
sys.path.insert(0, os.getcwd())
import numpy as np
import suite_programs
from bench_suite import copy_tree, leaves
name, repeats, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prog = suite_programs.BUILDERS[name]()
args = copy_tree(prog.args)
first = [np.asarray(v) for v in leaves(prog.dslc(*copy_tree(prog.args)))]
for _ in range(3):
    prog.dslc(*args)
times = []
for _ in range(repeats):
    t = time.perf_counter()
    prog.dslc(*args)
    times.append(time.perf_counter() - t)
np.savez(out, *first)
print(json.dumps({"median_ms": statistics.median(times) * 1e3}))
"""


def run(tree: str, name: str, repeats: int, out: str) -> float:
    env = {**os.environ, "PYTHONPATH": tree}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, name, str(repeats), out],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode:
        raise RuntimeError(f"{tree}: {name} failed:\n{proc.stderr[-3000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["median_ms"])


def main() -> None:
    import numpy as np

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=here)
    parser.add_argument("--only", default="")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(here, "benchmarks"))
    sys.path.insert(0, here)
    import suite_programs

    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    wanted = [w for w in args.only.split(",") if w]
    names = [n for n in suite_programs.BUILDERS if not wanted or any(w in n for w in wanted)]
    best: dict[str, dict[str, float]] = {n: {} for n in names}
    scratch = f"/tmp/bench_trees_{os.getpid()}"
    for r in range(args.rounds + 1):  # round 0 compiles (fills each tree's Numba cache), untimed
        for name in names:
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for label in order:
                ms = run(trees[label], name, args.repeats if r else 1, f"{scratch}_{label}.npz")
                if r:
                    best[name][label] = min(best[name].get(label, float("inf")), ms)
            if r == 0:  # the two trees compute the same values
                with np.load(f"{scratch}_before.npz") as a, np.load(f"{scratch}_after.npz") as b:
                    for k in a.files:
                        np.testing.assert_allclose(
                            b[k], a[k], rtol=1e-4, atol=1e-4 * float(np.abs(a[k]).max(initial=1))
                        )
    load = os.getloadavg()
    lines = [
        f"# dslc CPU suite, two trees side by side ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"- command: `python benchmarks/bench_trees.py {args.before} {args.after}"
        + (f" --only {args.only}" if args.only else "")
        + f" --rounds {args.rounds} --repeats {args.repeats}`",
        f"- before: {trees['before']}; after: {trees['after']}",
        f"- load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "",
        "| program | before ms | after ms | after / before |",
        "|---|---:|---:|---:|",
    ]
    for name in names:
        b, a = best[name]["before"], best[name]["after"]
        lines.append(f"| {name} | {b:.3f} | {a:.3f} | {a / b:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
