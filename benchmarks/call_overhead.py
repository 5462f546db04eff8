"""Host time of a compiled call outside its executable: binding the arguments, the signature key, the
cache lookup, the scalar checks and the result pytree (issue 27's host budget is 20 us + 2 us per
kernel for a whole GPU call, and this part is the same on every target).

    python benchmarks/call_overhead.py [--batches 30] [--calls 50]

For each of the suite's programs at the CPU suite's sizes (``suite_programs.BUILDERS``): the
executable's ``__call__`` is replaced by one returning its first results again, and the best of
``batches`` means of ``calls`` calls is printed (the minimum: this machine's other load only adds),
beside the number of argument leaves. Needs no GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from suite_programs import BUILDERS  # noqa: E402

from dsl import pytree  # noqa: E402


def overhead(name: str, batches: int, calls: int) -> tuple[float, int]:
    """Seconds per call outside the executable, and the argument leaves, of program ``name``."""
    program = BUILDERS[name]()
    f, args = program.dslc, program.args
    f(*args)
    executable = f.lower(*args).program.executable
    kind = type(executable)
    real = kind.__call__
    kept: dict[str, Any] = {}

    def replay(self: Any, *arrays: Any) -> Any:
        if "results" not in kept:
            kept["results"] = real(self, *arrays)
        return kept["results"]

    kind.__call__ = replay  # type: ignore[method-assign]
    try:
        f(*args)
        best = float("inf")
        for _ in range(batches):
            begin = time.perf_counter()
            for _ in range(calls):
                f(*args)
            best = min(best, (time.perf_counter() - begin) / calls)
    finally:
        kind.__call__ = real  # type: ignore[method-assign]
    return best, len(pytree.flatten(args)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    print("| program | argument leaves | us per call outside the executable |")
    print("|---|---:|---:|")
    for name in BUILDERS:
        seconds, leaves = overhead(name, args.batches, args.calls)
        print(f"| {name} | {leaves} | {seconds * 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
