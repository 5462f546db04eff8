"""The sorted CUDA scatter (``compiler/kernel/cuda/scatter.py``, its radix sort ``sort.py``) timed
against PyTorch on the same GPU, in one run: the gradient of an embedding lookup (a scatter-add of
each token's row of ``g`` into its row, repeated rows), as ``bench_cuda.py``'s row.

    python benchmarks/cuda_scatter.py [--quick] [--out scatter.md]
    python benchmarks/cuda_scatter.py --sim      # a smoke run in the CUDA simulator (tiny, no timings)

For each size: dslc's result checked bit for bit against the walk form's (the CPU's serial order, the
other form forced; one call) and against PyTorch's within 1e-4, then medians of synchronized calls
of dslc, of ``aten.embedding_dense_backward`` (PyTorch's embedding backward, atomics: not bitwise
deterministic) and of ``index_add_`` into zeros with ``torch.use_deterministic_algorithms`` off
(atomics) and on (PyTorch's deterministic path); then where dslc's GPU time goes, by kernel (the
copy, the sort's count, chunk sums, scan and place kernels, the segment marks, the segments), from
``torch.profiler`` (``gpu_measure.device_time``'s source).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict
from typing import Any

import numpy as np

SIM = "--sim" in sys.argv
if SIM:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_cuda import as_torch, close, embedding_loss, scatter_walk  # noqa: E402
from gpu_measure import median_time, sync  # noqa: E402
from numba import cuda  # noqa: E402

import dsl  # noqa: E402
from compiler.kernel.cuda.sort import RadixSort  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

PARTS = re.compile(r"scatter_add_(count|place)\d|scatter_add_(sums|scan|marks|segments)|scatter_add")


def part_of(kernel: str) -> str:
    """The part of the sorted form a profiled kernel is (its name mangled by Numba)."""
    found = PARTS.search(kernel)
    if found is None:
        return "other"
    return found.group(1) or found.group(2) or "copy"


def kernel_times(fn: Any, calls: int) -> dict[str, float]:
    """GPU milliseconds per call of each part of ``fn``'s work, from ``torch.profiler``."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync()
    times: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[part_of(e.name)] += e.time_range.elapsed_us() / 1e3 / calls
    return dict(times)


def torch_peers(g: Any, ids: Any, rows: int, repeats: int) -> dict[str, float]:
    """Milliseconds of PyTorch's embedding backward and of ``index_add_`` (atomics, deterministic)."""
    tg, tids = as_torch(g), as_torch(ids)
    backward = torch.ops.aten.embedding_dense_backward

    def index_add() -> Any:
        return torch.zeros((rows, tg.shape[1]), device="cuda").index_add_(0, tids, tg)

    out = {
        "embedding_dense_backward": median_time(lambda: backward(tg, tids, rows, -1, False), repeats),
        "index_add_": median_time(index_add, repeats),
    }
    torch.use_deterministic_algorithms(True)
    try:
        out["index_add_ (deterministic)"] = median_time(index_add, repeats)
    except RuntimeError as e:  # (a PyTorch without a deterministic index_add_ on CUDA)
        print(f"index_add_ (deterministic): {e}")
    finally:
        torch.use_deterministic_algorithms(False)
    return {k: v * 1e3 for k, v in out.items()}


def run_size(rows: int, width: int, tokens: int, repeats: int, use_torch: bool) -> list[str]:
    """The report's lines for one size."""
    rng = np.random.default_rng(0)
    emb = cuda.to_device(np.zeros((rows, width), np.float32))
    ids = cuda.to_device(rng.integers(0, rows, tokens))
    g = cuda.to_device(rng.standard_normal((tokens, width)).astype(np.float32))
    f = dsl.compile(dsl.grad(embedding_loss), target="cuda")
    ours = f(emb, ids, g).copy_to_host()
    assert "_segments(" in f.lower(emb, ids, g).source(), "the sorted form was not chosen"
    _, walked = scatter_walk(dsl.grad(embedding_loss), emb, ids, g)
    assert np.array_equal(ours, walked.copy_to_host()), "the sorted form and the walk differ"
    sort = RadixSort(tokens, rows)
    head = (
        f"## {rows} x {width} from {tokens:,} tokens ({tokens * width * 4 / 1e6:.0f} MB of updates): "
        f"{sort.passes} passes of {sort.bits} bits, {sort.tiles} tiles, a table of {sort.table} counters "
        f"in {sort.chunks} chunks, {sort.launches} sort launches"
    )
    if SIM:
        return [head, "", "simulator: the sorted form gave the walk's bits; no times"]
    lines = [head, "", "| what | ms |", "|---|---:|"]
    lines.append(f"| dslc (sorted form) | {median_time(lambda: f(emb, ids, g), repeats) * 1e3:.3f} |")
    if use_torch:
        close(
            ours,
            torch.ops.aten.embedding_dense_backward(as_torch(g), as_torch(ids), rows, -1, False),
            1e-4,
            "",
        )
        lines += [f"| torch {name} | {ms:.3f} |" for name, ms in torch_peers(g, ids, rows, repeats).items()]
        parts = kernel_times(lambda: f(emb, ids, g), 5)
        lines += [
            "",
            "dslc's GPU time by kernel (ms per call, torch.profiler):",
            "",
            "| kernel | ms |",
            "|---|---:|",
        ]
        lines += [f"| {name} | {ms:.3f} |" for name, ms in sorted(parts.items(), key=lambda p: -p[1])]
        lines.append(f"| (all) | {sum(parts.values()):.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the smaller size only")
    parser.add_argument("--sim", action="store_true", help="smoke run in the CUDA simulator (no timings)")
    parser.add_argument("--out", default="", help="also write the report (markdown) here")
    args = parser.parse_args()
    if not SIM and not cuda.is_available():
        sys.exit("cuda_scatter: no usable NVIDIA GPU here (numba.cuda.is_available() is False); nothing run")
    use_torch = torch is not None and not SIM and torch.cuda.is_available()
    if SIM:  # the sorted form forced on a tiny size, its sort over several tiles, passes and chunks
        from compiler.kernel.cuda import scatter, sort

        scatter.SORT_STEP, scatter.LAUNCH_WORK = 0, 0
        sort.TILE, sort.RADIX_BITS, sort.SCAN_CHUNK = 20, 2, 5
        sizes = [(7, 4, 30)]
    else:
        sizes = [(5_000, 128, 100_000)] + ([] if args.quick else [(50_000, 512, 1_000_000)])
    report = ["# The sorted CUDA scatter against PyTorch", ""]
    if not SIM:
        name = cuda.get_current_device().name
        report += [
            f"{name.decode() if isinstance(name, bytes) else name}, torch {torch and torch.__version__}",
            "",
        ]
    for rows, width, tokens in sizes:
        lines = run_size(rows, width, tokens, 5 if SIM else 20, use_torch)
        print("\n".join(lines), flush=True)
        report += [*lines, ""]
    if args.out:
        with open(args.out, "w") as out:
            out.write("\n".join(report))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
