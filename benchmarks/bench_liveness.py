"""Liveness at scale on programs with nested loops (issue 28 item 3: linear in program size).

    python benchmarks/bench_liveness.py                      # 10k, 30k, 100k, 300k ops; writes the record
    python benchmarks/bench_liveness.py --sizes 10000 30000 --no-record

``nested_program(n)`` builds a program of about ``n`` ops (every op of every block counted) out of
units: a run of straight-line elementwise ops, then a nest of region ops drawn from ``NESTS`` (a for
in a scan in a while with an if inside, and shorter nests), each block of the nest holding its own
straight-line ops that read the block's arguments, the newest values and values of the enclosing
blocks (reads across region boundaries), and a top-level value defined before the nest and read
again after it. It is built as the tracer writes bodies (reading values from above) and closed by
``close_regions``, as the pipeline's passes see it. ``tests/test_liveness.py`` checks liveness on
small instances against a brute-force computation.

Each size is timed for ``liveness`` (the analysis) and ``annotate_liveness`` (the analysis, then
each op's dying operands: ``Liveness.dies_at`` on every op of every block), the best of ``--repeat``
runs with the cyclic garbage collector paused as the pipeline pauses it; the figure is microseconds
per op, constant when the analysis is linear. Results go to ``results/<date>-liveness.md``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compiler.ir.core import Block, Function, Location, Op, Value  # noqa: E402
from compiler.ir.types import DType, TensorType  # noqa: E402
from compiler.passes.liveness import annotate_liveness, liveness  # noqa: E402
from compiler.passes.regions import close_regions  # noqa: E402
from compiler.prims import REGISTRY  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VEC = TensorType((4,), DType.f64)
INDEX = TensorType((), DType.i64)
LENGTH = 3  # a scan's rows
LOC = Location("nested.py", 1, 1)
UNARY = ("exp", "sin", "neg", "tanh")
BINARY = ("add", "mul", "sub", "max")
# the region nests a unit holds, outermost first
NESTS = (("while", "scan", "for", "if"), ("for", "if"), ("scan", "for"), ("if",), ("while", "for"))


class _Writer:
    """Appends ops to the block being written; ``scope``: the values each enclosing block defined."""

    def __init__(self, rng: np.random.Generator, xs: Value) -> None:
        self.rng = rng
        self.xs = xs  # the scans' sequence, a parameter
        self.ops: list[Op] = []
        self.scope: list[list[Value]] = []

    def emit(self, name: str, *operands: Value, **attrs: object) -> Value:
        if name in UNARY or name in BINARY:  # typed here: building 300k ops stays quick
            op = Op(REGISTRY[name], operands, {}, (Value(VEC),), LOC)
        else:
            op = Op.create(REGISTRY[name], list(operands), attrs, LOC)  # type: ignore[arg-type]
        self.ops.append(op)
        self.scope[-1].append(op.result)
        return op.result

    def pick(self) -> Value:
        """A float vector visible here: mostly a recent one of this block, else one from above."""
        level = len(self.scope) - 1
        if level and self.rng.random() < 0.25:
            level = int(self.rng.integers(level))
        vectors = [v for v in self.scope[level][-12:] if v.type == VEC]
        return vectors[int(self.rng.integers(len(vectors)))] if vectors else self.newest()

    def newest(self) -> Value:
        return next(v for v in reversed(self.scope[-1]) if v.type == VEC)

    def straight(self, n: int) -> Value:
        """``n`` elementwise ops, each reading the newest vector (and one picked for binaries)."""
        for _ in range(n):
            if self.rng.random() < 0.3:
                self.emit(UNARY[int(self.rng.integers(len(UNARY)))], self.newest())
            else:
                self.emit(BINARY[int(self.rng.integers(len(BINARY)))], self.newest(), self.pick())
        return self.newest()

    def block(self, args: list[Value], write: Callable[[], list[Value]]) -> Block:
        """A region: ``write`` appends its ops (reading ``args`` and values from above) and returns
        what it yields."""
        saved = self.ops
        self.ops = []
        self.scope.append(list(args))
        results = write()
        block = Block(tuple(args), tuple(self.ops), tuple(results))
        self.scope.pop()
        self.ops = saved
        return block

    def region_op(
        self, name: str, operands: list[Value], regions: tuple[Block, ...], **attrs: object
    ) -> Value:
        op = Op.create(REGISTRY[name], operands, attrs, LOC, regions)  # type: ignore[arg-type]
        self.ops.append(op)
        self.scope[-1].extend(op.results)
        return op.results[0]

    def nest(self, kinds: tuple[str, ...], carry: Value, m: int) -> Value:
        """The region op ``kinds[0]`` around the rest of the nest; ``m`` straight ops per block."""
        if not kinds:
            return self.straight(m)
        kind, inner = kinds[0], kinds[1:]

        def body(*args: Value) -> Callable[[], list[Value]]:
            def write() -> list[Value]:
                self.straight(m // 2)
                value = self.nest(inner, self.newest(), m)
                self.emit("add", value, self.pick())
                return [self.newest()]

            return write

        if kind == "for":
            lo = self.emit("constant", value=np.array(0, np.int64))
            hi = self.emit("constant", value=np.array(2, np.int64))
            i, c = Value(INDEX), Value(VEC)
            return self.region_op("for", [lo, hi, carry], (self.block([i, c], body(i, c)),))
        if kind == "while":
            c, c2 = Value(VEC), Value(VEC)

            def test() -> list[Value]:
                total = self.emit("reduce_sum", c, axes=(0,))
                limit = self.emit("reduce_sum", self.pick(), axes=(0,))
                return [self.emit("lt", total, limit)]

            cond = self.block([c], test)
            return self.region_op("while", [carry], (cond, self.block([c2], body(c2))))
        if kind == "scan":
            h, row = Value(VEC), Value(VEC)

            def step() -> list[Value]:
                (out,) = body(h, row)()
                return [out, self.emit("mul", out, row)]

            region = self.block([h, row], step)
            return self.region_op(
                "scan", [carry, self.xs], (region,), carries=1, length=LENGTH, reverse=False
            )
        # if: the predicate from this block's values, one operand, both branches reading from above
        total = self.emit("reduce_sum", self.pick(), axes=(0,))
        pred = self.emit("lt", total, self.emit("reduce_sum", self.pick(), axes=(0,)))
        a, b = Value(VEC), Value(VEC)
        then = self.block([a], body(a))
        other = self.block([b], lambda: [self.straight(m)])
        return self.region_op("if", [pred, carry], (then, other))


def nested_program(n_ops: int, seed: int = 0, block_ops: int = 12, closed: bool = True) -> Function:
    """A function of about ``n_ops`` ops (nested ones counted) built of units of straight-line ops
    and a region nest from ``NESTS``, ``block_ops`` straight ops per block (see the module docstring);
    closed by ``close_regions`` unless ``closed`` is False."""
    rng = np.random.default_rng(seed)
    x, xs = Value(VEC), Value(TensorType((LENGTH, 4), DType.f64))
    w = _Writer(rng, xs)
    w.scope.append([x])
    count = 0
    while count < n_ops:
        before = len(w.ops)
        kept = w.straight(block_ops)  # read again after the nest: live across it
        out = w.nest(NESTS[int(rng.integers(len(NESTS)))], w.newest(), block_ops)
        w.emit("add", out, kept)
        count += sum(1 for op in w.ops[before:] for _ in _walk(op))
    func = Function("nested", Block((x, xs), tuple(w.ops), (w.newest(),)))
    return close_regions(func) if closed else func


def _walk(op: Op):  # type: ignore[no-untyped-def]
    yield op
    for region in op.regions:
        for inner in region.ops:
            yield from _walk(inner)


def count_ops(func: Function) -> int:
    return sum(1 for _ in func.walk())


def best_time(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def measure(sizes: list[int], repeat: int) -> list[dict[str, float]]:
    rows = []
    for n in sizes:
        func = nested_program(n)
        ops = count_ops(func)
        blocks = 1 + sum(len(op.regions) for op in func.walk())
        t_live = best_time(lambda: liveness(func), repeat)  # noqa: B023
        t_annot = best_time(lambda: annotate_liveness(func), repeat)  # noqa: B023
        row = {"target": n, "ops": ops, "blocks": blocks, "liveness_s": t_live, "annotate_s": t_annot}
        rows.append(row)
        print(
            f"{ops:>8} ops {blocks:>7} blocks  liveness {t_live:7.3f} s {t_live / ops * 1e6:6.2f} us/op"
            f"  annotate {t_annot:7.3f} s {t_annot / ops * 1e6:6.2f} us/op",
            flush=True,
        )
    return rows


def record(rows: list[dict[str, float]], load: str, path: str) -> None:
    lines = [
        f"# Liveness on programs with nested loops ({datetime.date.today().isoformat()})",
        "",
        "`python benchmarks/bench_liveness.py` (issue 28 item 3). `nested_program(n)`: units of",
        "straight-line ops and a region nest (a for in a scan in a while with an if inside, and shorter",
        "nests), closed by close_regions; best of the runs, the garbage collector paused.",
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()};",
        f"load average before the run: {load}.",
        "",
        "| ops | blocks | liveness s | us/op | annotate_liveness s | us/op |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ops = r["ops"]
        lines.append(
            f"| {ops:,} | {r['blocks']:,} | {r['liveness_s']:.3f} | {r['liveness_s'] / ops * 1e6:.2f} "
            f"| {r['annotate_s']:.3f} | {r['annotate_s'] / ops * 1e6:.2f} |"
        )
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000, 300_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"load average: {load}")
    rows = measure(args.sizes, args.repeat)
    if not args.no_record:
        name = f"{datetime.date.today().isoformat()}-liveness.md"
        record(rows, load, os.path.join(HERE, "results", name))


if __name__ == "__main__":
    main()
