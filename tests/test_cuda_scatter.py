"""The CUDA scatter's two forms (``compiler/kernel/cuda/scatter.py``) and how the compiler chooses
between them: the walk (threads owning result elements, each reading every index) for small
scatters, the sorted form (``compiler/kernel/cuda/sort.py``: a stable radix sort of the update
positions by row, then a thread per element combining its row's segment) where the walk's
threads x updates compares exceed the sort's O(updates + result) work. A large embedding gradient
takes the sorted form, its scratch is rows of the memory plan, and its kernels compile to PTX for
sm_80 and sm_90. Their results are checked bit for bit against NumPy in the CUDA simulator
(``tests/cuda_sim/sim_gather_scatter.py``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cuda_ptx import ARCHS, PTX_AVAILABLE, PTX_UNAVAILABLE

import dsl
import dsl.numpy as dnp
from compiler.codegen import compile_ptx
from compiler.kernel.cuda import scatter
from compiler.kernel.cuda.sizes import GPU
from compiler.kernel.cuda.sort import SCAN_CHUNK, TILE, RadixSort
from runtime.devices import cuda_available


def test_the_choice_follows_the_work() -> None:
    """An embedding gradient of 50,000 x 512 from 1,000,000 tokens (``benchmarks/bench_cuda.py``'s
    row): the walk's 65,536 threads read every index, 6.6e10 compares; the sort is four passes of
    4 bits over the index. A (5, 4) scatter of 6 updates keeps the walk."""
    lines, n, count = 512, 50_000, 1_000_000
    assert scatter.walk_work(lines, n, count) == 512 * 128 * count
    sort = RadixSort(count, n)
    assert (sort.passes, sort.bits, sort.tiles) == (4, 4, -(-count // TILE))
    assert scatter.sorted_work(lines, n, count) < scatter.walk_work(lines, n, count) // 100
    assert scatter.sorts(lines, n, count)
    assert scatter.sorts(64, 1000, 20_000)  # tests/test_cuda_ptx.py's embedding, before: the walk
    assert not scatter.sorts(4, 5, 6)
    assert not scatter.sorts(64, 1000, 300)


def test_radix_digits_split_the_row_bits_evenly() -> None:
    """Rows 0 .. n: ``n`` is a dropped update's (out of range), sorted after every real row."""
    assert [(RadixSort(10, n).passes, RadixSort(10, n).bits) for n in (1, 2, 255, 256, 1000, 1 << 20)] == [
        (1, 1),
        (1, 2),
        (2, 4),
        (3, 3),
        (3, 4),
        (6, 4),
    ]


def test_the_sort_spreads_over_the_gpu() -> None:
    """The radix sort's count and place kernels run a block of ``TPB`` threads per tile of ``TILE``
    entries: the embedding gradient's 1,000,000 entries take 977 blocks, 250,112 threads (an H100
    holds 270,336), where a thread per tile of 256 entries took 3,907; the table of (digit, tile)
    counters is 15,632 of them (62.5 KB, not 4 MB). The scan of a table is a block per chunk of
    ``SCAN_CHUNK`` counters: hundreds of blocks for a table of a million counters (64,000,000
    entries), not one."""
    sort = RadixSort(1_000_000, 50_000)
    assert (TILE, GPU.TPB, sort.tiles, sort.radix, sort.table) == (1024, 256, 977, 16, 15_632)
    assert sort.tiles * GPU.TPB >= 250_000
    assert (sort.chunks, sort.launches) == (4, 16)
    huge = RadixSort(64_000_000, 50_000)
    assert huge.table == 1_000_000 and huge.chunks == -(-huge.table // SCAN_CHUNK) == 245
    assert RadixSort(100_000, 50_000).chunks == 1  # (one block scans it: no chunk sums kernel)
    assert RadixSort(100_000, 50_000).launches == 12


def _embedding_gradient(rows: int, width: int, tokens: int):
    def loss(emb, ids, w):
        return (dnp.tanh(emb[ids]) * w).sum()

    emb = np.zeros((rows, width), np.float32)
    ids = np.random.default_rng(0).integers(0, rows, tokens)
    w = np.broadcast_to(np.float32(1), (tokens, width))  # (only its shape is read)
    return dsl.compile(dsl.grad(loss), target="cuda").lower(emb, ids, w)


@pytest.mark.skipif(not PTX_AVAILABLE, reason=PTX_UNAVAILABLE)
def test_a_large_embedding_gradient_is_sorted_with_planned_scratch() -> None:
    """50,000 x 512 from 1,000,000 tokens: the copy, four radix passes (count, the table's chunk
    sums and scan, place), the segment marks and the segments; the sort's table (62,528 bytes,
    4,000,768 before), its chunk totals, its two position arrays and the segment bounds are scratch
    rows of the memory plan (no device allocation in the driver); every kernel compiles for both
    archs, the sort's with barriers and without atomics, its count and place kernels launched on a
    block per tile."""
    lowered = _embedding_gradient(50_000, 512, 1_000_000)
    generated = lowered.program.generated
    names = [k.name for k in generated.kernels]
    (first,) = [k for k in names if k.endswith("_scatter_add")]
    passes = [f"{kind}{k}" for k in range(4) for kind in ("count", "place")]
    forms = ["count0", "sums", "scan", *passes[1:], "marks", "segments"]
    assert [k[len(first) + 1 :] for k in names if k.startswith(first + "_")] == forms
    sort = RadixSort(1_000_000, 50_000)
    scratch = {r.name[len(first) + 1 :]: r for r in lowered.memory_plan().buffers if r.scratch_of}
    assert {k: r.bytes for k, r in scratch.items()} == {
        "hist": 62_528,
        "totals": 16,
        "perm0": 4_000_000,
        "perm1": 4_000_000,
        "bounds": 2 * 50_000 * 4,
    }
    assert sort.table * 4 == 62_528
    assert all(r.offset + r.bytes <= lowered.memory_plan().peak_bytes for r in scratch.values())
    assert "cuda.device_array(" not in generated.source.split("def bind(")[1].split("def run(")[0]
    for f in passes:  # (the driver's launches)
        assert f"{first}_{f}[max(1, min({sort.tiles}, MAXB)), TPB, stream]" in generated.source
    assert f"{first}_scan[max(1, min({sort.chunks}, MAXB)), TPB, stream]" in generated.source
    for cc in ARCHS:
        ptx = compile_ptx(generated, cc)
        assert {first, *(f"{first}_{f}" for f in forms)} <= set(ptx)
        for f in ["sums", "scan", *passes]:
            assert "bar.sync" in ptx[f"{first}_{f}"] and "atom." not in ptx[f"{first}_{f}"], f
            assert ".local" not in ptx[f"{first}_{f}"], f"{f}: spills to local memory"
        for f in passes:  # the scan's 256 int64 totals; 16 counters a thread, a pad word per 32
            shared = re.findall(r"\.shared \.align \d+ \.b8 \S+\[(\d+)\]", ptx[f"{first}_{f}"])
            assert sorted(map(int, shared)) == ([64] if f.startswith("place") else []) + [2048, 16_896], f


@pytest.mark.skipif(not PTX_AVAILABLE, reason=PTX_UNAVAILABLE)
def test_a_small_scatter_keeps_the_walk() -> None:
    """1000 x 64 from 300 tokens: one follow kernel walking the 300 indices, no scratch."""
    lowered = _embedding_gradient(1000, 64, 300)
    names = [k.name for k in lowered.program.generated.kernels]
    assert not [k for k in names if k.endswith("_segments")], names
    assert [k for k in names if k.endswith("_scatter_add_2")], names
    assert not [r for r in lowered.memory_plan().buffers if r.scratch_of]


def _full_size_case(rows: int, count: int, seed: int = 0):
    """Scatters of ``count`` repeated, negative and past-the-end rows into ``rows`` x 3, float32 and
    float64 adds and a set, the function and its arguments, and NumPy's results (an update outside
    the axis after one wrap is dropped, as JAX's ``.at[]`` drops it)."""
    rng = np.random.default_rng(seed)
    i = rng.integers(-rows - 50, rows + 50, count)
    i[: count // 4] = i[0]  # a quarter of them on one row: a long segment, spread over many tiles
    x32, v32 = (
        rng.standard_normal((rows, 3)).astype(np.float32),
        rng.standard_normal((count, 3)).astype(np.float32),
    )
    x64, v64 = x32.astype(np.float64), v32.astype(np.float64)
    wrapped = np.where(i < 0, i + rows, i)  # one wrap; an update still outside the axis is dropped
    lands = (wrapped >= 0) & (wrapped < rows)
    c = wrapped[lands]
    added32, added64, put = x32.copy(), x64.copy(), x64.copy()
    np.add.at(added32, c, v32[lands])
    np.add.at(added64, c, v64[lands])
    put[c] = v64[lands]

    def f(x32, x64, i, v32, v64):
        return x32.at[i].add(v32), x64.at[i].add(v64), x64.at[i].set(v64)

    return f, (x32, x64, i, v32, v64), (added32, added64, put)


@pytest.mark.skipif(
    not cuda_available(),
    reason="needs a usable NVIDIA GPU: at the GPU's sizes (TPB 256, "
    "tiles of 1,024 entries, a table of several scan chunks) the simulator is far too slow",
)
def test_sorted_scatter_at_the_gpus_sizes() -> None:
    """300,000 updates into 20,000 rows: 293 tiles of 1,024 entries (the last shorter), four passes of
    4 bits, a table of 4,688 counters scanned in two chunks: NumPy's ``np.add.at`` bit for bit in
    float32 and float64 and the last write of a set, run after run."""
    f, args, want = _full_size_case(20_000, 300_000)
    sort = RadixSort(300_000, 20_000)
    assert (sort.tiles, sort.passes, sort.chunks) == (293, 4, 2)
    compiled = dsl.compile(f, target="cuda")
    assert "_sums(" in compiled.lower(*args).source()
    first = compiled(*[np.copy(a) for a in args])
    for got, expected in zip(first, want, strict=True):
        assert np.array_equal(np.asarray(got), expected)
    again = compiled(*[np.copy(a) for a in args])
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("count", [6, 0], ids=["updates", "no updates"])
def test_a_scatter_stored_over_its_dying_base_copies_nothing(count: int) -> None:
    """``y = x * 2; y.at[i].add(v)``: the plan stores the result over ``y``, which dies there, so no
    kernel copies the base into the result (the walk is the group's kernel; with no updates there is
    no kernel at all). ``inplace=False`` keeps the copy. Values: tests/cuda_sim/sim_gather_scatter.py."""

    def f(x, i, v):
        y = x * 2.0
        return y.at[i].add(v)

    args = (np.ones((5, 4)), np.array([3, 0, 3, 9][:count], np.int64), np.ones((min(count, 4), 4)))
    for inplace in (True, False):
        generated = dsl.compile(f, target="cuda", inplace=inplace).lower(*args).program.generated
        names = [k.name for k in generated.kernels]
        copies = [k.name for k in generated.kernels if k.name.endswith("_scatter_add")]
        walks = [k.name for k in generated.kernels if k.name.endswith("_scatter_add_2")]
        assert len(copies) == (0 if inplace else 1), names
        assert len(walks) == int(count > 0), names
