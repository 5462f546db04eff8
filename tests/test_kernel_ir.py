"""The kernel IR (compiler/kernel/ir.py) and the decisions the CPU's kernel passes make on it: the
split of a parallel loop into chunks (kernel/cpu/parallel.py) and a row-block region member's
legality (kernel/cpu/regions.py), each from the recorded loads and stores, never from text."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from compiler.compilation import option_defaults
from compiler.ir.types import DType, TensorType
from compiler.kernel.cpu.parallel import runtime_parallel
from compiler.kernel.cpu.records import Kernel
from compiler.kernel.cpu.regions import _chunk_member
from compiler.kernel.ir import (
    Access,
    Alloc,
    For,
    KernelIR,
    Line,
    View,
    nest,
    print_python,
    reads,
    uses,
    writes,
)


def _kernel(body: list, params: list[str], args: list[str] | None = None, rows: int | None = None) -> Kernel:
    ir = KernelIR("k0_test", params, body, rows=rows)
    return Kernel("k0_test", args or params, "", ir=ir)


def _types(**shapes: tuple[int, ...]) -> dict[str, TensorType]:
    return {name: TensorType(shape, DType.f32) for name, shape in shapes.items()}


def test_nest_prints_loops_outermost_first_with_a_parallel_first_loop() -> None:
    body = [
        Line("t0 = p0[i0, i1]", (Access("p0", ("i0", "i1")),)),
        Line("p1[i0, i1] = t0", (), (Access("p1", ("i0", "i1")),)),
    ]
    stmts = nest(["i0", "i1"], [4, 8], body, parallel=True)
    assert print_python(stmts) == [
        "for i0 in numba.prange(4):",
        "    for i1 in range(8):",
        "        t0 = p0[i0, i1]",
        "        p1[i0, i1] = t0",
    ]
    assert [a.array for a in reads(stmts)] == ["p0"] and [a.array for a in writes(stmts)] == ["p1"]
    assert uses(stmts, "p0") and not uses(stmts, "p2")


def test_a_flat_parallel_loop_runs_as_chunks_of_sliced_views() -> None:
    at = Access("p0_f", ("i",))
    loop = For(
        "i",
        1 << 16,
        [Line("t0 = p0_f[i]", (at,)), Line("p1_f[i] = t0", (), (Access("p1_f", ("i",)),))],
        parallel=True,
        flat=True,
    )
    kernel = _kernel(
        [View("p0_f", "p0", (1 << 16,)), View("p1_f", "p1", (1 << 16,)), loop], ["p0", "p1"], ["v0", "v1"]
    )
    split = runtime_parallel(kernel, _types(v0=(256, 256), v1=(256, 256)))
    assert split.direct == "16" and split.chunk is not None and split.chunk.form == "flat"
    assert "p0_f = p0.reshape(65536)[lo:hi]" in split.text and "for i in range(hi - lo):" in split.text
    assert "def k0_test_chunk(ch, frame):" in split.text and "parallel=True" not in split.text


def test_statements_after_the_loop_keep_a_kernel_around_the_chunks() -> None:
    part = Access("part", ("ch",))
    loop = For("ch", 16, [Line("acc = 0.0"), Line("part[ch] = acc", (), (part,))], parallel=True)
    after = [
        Line("acc = 0.0"),
        For("ch", 16, [Line("acc = acc + part[ch]", (part,))]),
        Line("p0[()] = acc", (), (Access("p0", ()),)),
    ]
    # the partial results are planned scratch: a parameter of the kernel, not an allocation in it
    kernel = _kernel([loop, *after], ["p0", "part"], ["v0", "s0"])
    types = {**_types(v0=()), "s0": TensorType((16,), DType.f64)}
    split = runtime_parallel(kernel, types)
    assert split.direct is None and split.chunk is None
    assert "def k0_test(p0, part, chunk_at, parallel_at):" in split.text
    assert "np.empty((16,)" not in split.text
    assert "fill_frame(frame, p0, part)" in split.text and "acc = acc + part[ch]" in split.text
    # an allocation before the loop (scratch not planned) keeps the kernel as it is
    unplanned = _kernel([Alloc("part", (16,), DType.f64), loop, *after], ["p0"], ["v0"])
    assert runtime_parallel(unplanned, _types(v0=())) is unplanned


def _rows_member(index: tuple[str, ...]) -> Kernel:
    """A directly-run kernel over 1024 rows of p0 -> p1 that reads p0 at ``index``."""
    body = [
        Line("t0 = p0[...]", (Access("p0", index),)),
        Line("p1[i0, i1] = t0", (), (Access("p1", ("i0", "i1")),)),
    ]
    loop = For("i0", 1024, nest(["i1"], [8], body), parallel=True)
    kernel = _kernel([loop], ["p0", "p1"], ["v0", "v1"])
    return runtime_parallel(kernel, _types(v0=(1024, 8), v1=(1024, 8)))


def test_a_member_that_reads_only_its_own_row_joins_a_region() -> None:
    split = _rows_member(("i0", "i1"))
    assert split.chunk is not None and split.chunk.form == "rows"
    member = _chunk_member(None, split, {"v0": (1024, 8), "v1": (1024, 8)})  # type: ignore[arg-type]
    assert member is not None and member.row_arrays == {"v0", "v1"} and member.written == {"v1"}


def test_a_member_that_reads_a_neighbouring_row_does_not() -> None:
    split = _rows_member(("i0 + 1", "i1"))  # a block would read its neighbour's first row
    assert _chunk_member(None, split, {"v0": (1024, 8), "v1": (1024, 8)}) is None  # type: ignore[arg-type]


def test_kernels_equal_up_to_their_buffers_are_one_function() -> None:
    def f(x, w):
        return np.tanh(np.tanh(x) * 2.0 @ w) * 2.0  # the matmul keeps the two loops apart

    x, w = np.ones((300, 300), np.float32), np.eye(300, dtype=np.float32)
    shared = dsl.compile(f).lower(x, w).source()
    with option_defaults(shared_kernels=False):
        apart = dsl.compile(f).lower(x, w).source()
    assert shared.count("_chunk(ch, frame):") == 1 and apart.count("_chunk(ch, frame):") == 2
    assert "def k0_mul_chunk(ch, frame):" in shared  # the first defines it, the second calls it
    want = np.tanh(np.tanh(x) * 2.0 @ w) * 2.0
    np.testing.assert_allclose(dsl.compile(f)(x, w), want, rtol=1e-5)


@pytest.mark.parametrize(
    "name",
    [
        "index",
        "gathered",
        "carried",
        "forward",
        "twice",
        "tuple",
        "augmented",
        "stored",
        "parenthesized",
        "kept",
        "read later",
        "read before",
        "lambda",
    ],
)
def test_an_unrolled_loop_computes_what_the_plain_loop_does(name: str) -> None:
    """The CUDA printer's unrolled loop (``_unrolled``: the loads it can issue first, ``_hoisted``)
    as plain Python against the plain loop, on bodies the kernel builders make (an index statement
    then loads, a load at a loaded position) and on shapes its reading of the statements must refuse
    to reorder (a carried index, one defined after its use or twice, a tuple target, ``+=``): these
    hoisted a stale load before (a review's cases, 2026-11-27)."""
    from compiler.codegen.cuda.printer import _unrolled
    from compiler.kernel.ir import Access, For, Line, print_python

    a, b = Access("a", ("k",)), Access("b", ("k",))
    bodies = {
        "index": [Line("k = r * 2"), Line("t0 = a[k]", (a,)), Line("acc = acc + t0 / (1.0 + t0)")],
        "gathered": [
            Line("t0 = a[r]", (Access("a", ("r",)),)),
            Line("k = int(t0) % 50"),
            Line("t1 = b[k]", (b,)),
            Line("acc = acc + t1"),
        ],
        "carried": [Line("k = k + 2"), Line("t0 = a[k]", (a,)), Line("acc = acc + t0")],
        "forward": [Line("t0 = a[k]", (a,)), Line("k = r * 3"), Line("acc = acc + t0")],
        "twice": [
            Line("k = r"),
            Line("t0 = a[k]", (a,)),
            Line("k = r + 1"),
            Line("t1 = b[k]", (b,)),
            Line("acc = acc + t0 + t1"),
        ],
        "tuple": [
            Line("q = a[r]", (Access("a", ("r",)),)),
            Line("k, w = divmod(int(q), 5)"),
            Line("t2 = b[k]", (b,)),
            Line("acc = acc + t2"),
        ],
        "augmented": [
            Line("t0 = a[r]", (Access("a", ("r",)),)),
            Line("acc += t0"),
            Line("t1 = b[int(acc) % 50]", (Access("b", ("int(acc) % 50",)),)),
            Line("acc += t1"),
        ],
        # a store's position from an index statement the next iteration redefines (the store comes
        # last, at the position its own iteration computed)
        "stored": [
            Line("k = r * 3 + 1"),
            Line("t0 = a[k]", (a,)),
            Line("t1 = (t0 * 2.0)"),
            Line("c[k] = t1", (), (Access("c", ("k",)),)),
            Line("acc = (acc + t1) * 0.5"),
        ],
        # a value the code after the loop reads (a band's register of a one-element row): the last
        # iteration's, where the unrolled trips ran the last one (n = 8, no remainder)
        "kept": [Line("t0 = a[r]", (Access("a", ("r",)),)), Line("reg = t0 + 1.0"), Line("acc = acc + reg")],
        # an index statement reading a variable of the body that is no index statement (defined
        # later, or read before it is defined): neither it nor the load it feeds may go first (a
        # review's cases, 2026-11-27: the loads section read the previous trip's value)
        "read later": [Line("k = m + r"), Line("t0 = a[k]", (a,)), Line("m = r * 2"), Line("acc = acc + t0")],
        "read before": [
            Line("w = m + 1"),
            Line("m = r * 2"),
            Line("k = m + 1"),
            Line("t0 = a[k]", (a,)),
            Line("acc = acc + t0 + w"),
        ],
        # a statement binding names of its own: not renamed (the plain loop)
        "lambda": [Line("t0 = a[r]", (Access("a", ("r",)),)), Line("acc = acc + (lambda r: r * 2.0)(t0)")],
        "parenthesized": [
            Line("k = (r + 2)"),
            Line("t0 = (a[k])", (a,)),
            Line("acc = (acc + (t0))"),
            Line("c[(k)] = (acc)", (), (Access("c", ("(k)",)),)),
        ],
    }
    body = bodies[name]
    unrolled = For("r", "n", body, 0, step=1)
    unrolled.unroll = 4
    results = []
    for code in (
        "\n".join(_unrolled(unrolled)),
        "\n".join(print_python([For("r", "n", body, 0)], 0, prange=False)),
    ):
        env = {"a": np.arange(100.0) * 1.5, "b": np.arange(100.0) ** 2, "c": np.zeros(100)}
        env.update(n=8 if name == "kept" else 10, k=0, acc=0.0, reg=0.0, m=0, w=0)
        exec(code, {**env, "_pin": lambda v: v}, env)  # noqa: S102 (the printers' own text)
        results.append((env["acc"], env["reg"], env["c"].tolist()))
    assert results[0] == results[1], (name, results)


def test_which_gpu_loops_unroll() -> None:
    """``cuda/loops.unrollable``: straight-line statements whose stores are of one element each, at
    the loop's own position or, in a parallel loop (a grid-stride loop, a band's row loop), anywhere;
    never a body that reads an array it stored earlier (its load would be issued first)."""
    from compiler.kernel.cuda.loops import unrollable
    from compiler.kernel.ir import Access, For, Line

    own, other = Access("c", ("g",)), Access("c", ("ty * 8 + g",))
    load = Line("t0 = a[g]", (Access("a", ("g",)),))
    assert unrollable(For("g", 9, [load, Line("c[g] = t0", (), (own,))]))
    assert not unrollable(For("g", 9, [load, Line("c[ty * 8 + g] = t0", (), (other,))]))
    assert unrollable(For("g", 9, [load, Line("c[ty * 8 + g] = t0", (), (other,))], parallel=True))
    read_back = Line("t1 = c[ty * 8 + g]", (other,))
    assert not unrollable(
        For("g", 9, [load, Line("c[ty * 8 + g] = t0", (), (other,)), read_back], parallel=True)
    )
    assert not unrollable(For("g", 9, [load, For("h", 2, [])], parallel=True))
