"""How much the suite's programs slow down beside other CPU-bound processes: dslc against JAX and
PyTorch, in one run (issue 25).

    python benchmarks/bench_contention.py [--only NAME,...] [--competitors 0,1,2] [--rounds 3]
        [--repeats 15] [--competitor python|numpy|half] [--variant LABEL:VAR=VALUE,...]
    python benchmarks/bench_contention.py --only second --competitor half --competitors 1

Each round starts ``k`` competing processes for every ``k`` of ``--competitors`` (``python``: a
Python busy loop, ``numpy``: a loop of NumPy operations over 8 MB arrays, ``half``: a loop busy half
of every 20 ms, so one takes half of a core), then times every program
of ``suite_programs.py`` in every framework while they run, each framework in a new process of its
own (``bench_suite.py --time-child``: median of ``--repeats`` calls after warm-up), the frameworks
interleaved, each program starting with the next one in turn. The competitors are children of this
process, so a scheduler that shares the CPUs per session (Linux's autogroups) shares them per thread
between the frameworks' threads and the competitors. A program's slowdown at ``k`` is its median
over the rounds at ``k`` divided by its median at 0, per framework; the target is dslc's slowdown no
worse than JAX's. ``--variant`` adds dslc run with environment variables set (A/B of a setting in
the same run, e.g. ``old:GOMP_SPINCOUNT=300000,DSL_STATIC_CHUNKS=1``). Writes the table to
``results/contention.md`` and every measurement to ``results/contention.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import suite_programs  # noqa: E402
from bench_suite import available, machine, versions, write_report  # noqa: E402

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_suite.py")
COMPETITORS = {
    "python": "while True: pass",
    "numpy": "import numpy as np\na = np.ones(1 << 20)\nb = np.empty_like(a)\n"
    "while True: np.multiply(a, 1.0001, out=b)",
    # Busy 10 ms of every 20 ms: half of one core, as a desktop's background work takes it.
    "half": "import time\nwhile True:\n    t = time.perf_counter()\n"
    "    while time.perf_counter() - t < 0.01:\n        pass\n    time.sleep(0.01)",
}
DESCRIPTIONS = {
    "python": "a Python busy loop (`while True: pass`)",
    "numpy": "a loop of NumPy multiplies over 8 MB arrays",
    "half": "a Python loop busy 10 ms of every 20 ms (half of one core)",
}


@contextmanager
def competing(k: int, kind: str) -> Iterator[None]:
    """``k`` CPU-bound processes running for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", COMPETITORS[kind]]) for _ in range(k)]
    time.sleep(0.3 if k else 0.0)  # started and busy before anything is timed
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def time_child(name: str, framework: str, repeats: int, env: dict[str, str]) -> float:
    """Median seconds per call of ``framework`` on program ``name`` in a new process (``bench_suite``'s
    child mode), with ``env`` added to this process's environment."""
    cmd = [sys.executable, SUITE, "--time-child", f"{name}:{framework}:{repeats}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if out.returncode != 0:
        raise RuntimeError(f"timing {framework} on {name} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``LABEL:VAR=VALUE,VAR=VALUE`` -> (``dslc LABEL``, {VAR: VALUE, ...})."""
    label, _, assignments = text.partition(":")
    env = dict(a.split("=", 1) for a in assignments.split(",") if a)
    return f"dslc {label}", env


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def markdown(result: dict[str, Any]) -> str:
    columns, ks = result["columns"], result["competitors"]
    busy = [k for k in ks if k]
    lines = [
        "# Slowdown beside competing CPU-bound processes",
        "",
        f"- date: {result['date']}, {result['machine'].get('cpu', '')}, {os.cpu_count()} cores",
        f"- command: `{result['command']}`",
        f"- {result['rounds']} rounds, each a median of {result['repeats']} calls per framework in a new "
        f"process, the frameworks interleaved; competitor: {DESCRIPTIONS[result['competitor']]} "
        "(children of the benchmark)",
        f"- load average (1, 5, 15 min) at each round's start: {', '.join(result['loads'])}",
        *(
            f"- {column}: dslc with " + ", ".join(f"`{k}={v}`" for k, v in env.items())
            for column, env in result["variants"].items()
        ),
        "",
        "Idle: median ms per call with no competitor. `xK`: median time beside K competitors / idle "
        "median, per framework (lower is better).",
        "",
        "| program | "
        + " | ".join(f"{c} idle ms" for c in columns)
        + " | "
        + " | ".join(f"{c} x{k}" for k in busy for c in columns)
        + " | dslc <= JAX |",
        "|---|" + "---:|" * (len(columns) * (1 + len(busy))) + "---|",
    ]
    for name, row in result["programs"].items():
        med = {(c, int(k)): statistics.median(ts) for c, per_k in row.items() for k, ts in per_k.items()}
        idle = [f"{1e3 * med[c, 0]:.2f}" for c in columns]
        slow = {(c, k): med[c, k] / med[c, 0] for k in busy for c in columns}
        met = "n/a"
        if "jax" in columns and busy:
            met = "yes" if all(slow["dslc", k] <= slow["jax", k] for k in busy) else "no"
        cells = [f"{slow[c, k]:.2f}" for k in busy for c in columns]
        lines.append(f"| {name} | " + " | ".join(idle + cells) + f" | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated program names (substring match)")
    parser.add_argument("--competitors", default="0,1,2", help="numbers of competing processes")
    parser.add_argument("--competitor", choices=sorted(COMPETITORS), default="python")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--variant", action="append", default=[], help="LABEL:VAR=VALUE,... (dslc)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "contention.md"))
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.competitors.split(",")} | {0})
    wanted = [w for w in args.only.split(",") if w]
    names = [n for n in suite_programs.BUILDERS if not wanted or any(w in n for w in wanted)]
    runs = {"dslc": ("dslc", {})} | {label: ("dslc", env) for label, env in map(parse_variant, args.variant)}
    runs |= {f: (f, {}) for f in ("jax", "torch") if available(f) is None}
    command = "python benchmarks/bench_contention.py" + f" --only {args.only}" * bool(args.only)
    command += f" --competitors {args.competitors}" * (args.competitors != "0,1,2")
    command += f" --competitor {args.competitor}" * (args.competitor != "python")
    command += f" --rounds {args.rounds}" + f" --repeats {args.repeats}" * (args.repeats != 15)
    command += "".join(f" --variant {v}" for v in args.variant)
    times: dict[str, dict[str, dict[int, list[float]]]] = {
        n: {c: {k: [] for k in ks} for c in runs} for n in names
    }
    loads = []
    for r in range(args.rounds):
        for k in ks:
            loads.append(load())
            with competing(k, args.competitor):
                for i, name in enumerate(names):
                    columns = list(runs)
                    turn = (r + i) % len(
                        columns
                    )  # each column first in turn: no column always follows another
                    for column in columns[turn:] + columns[:turn]:
                        framework, env = runs[column]
                        times[name][column][k].append(time_child(name, framework, args.repeats, env))
                    got = {c: f"{1e3 * times[name][c][k][-1]:.2f}" for c in runs}
                    print(f"round {r} competitors {k} {name}: {json.dumps(got)} ms", flush=True)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "command": command,
        "competitor": args.competitor,
        "competitors": ks,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "columns": list(runs),
        "variants": {c: env for c, (_, env) in runs.items() if env},
        "loads": loads,
        "programs": times,
    }
    write_report(markdown(result), args.out)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
