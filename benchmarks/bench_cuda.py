"""CUDA benchmark: dslc's generated kernels against PyTorch on the same GPU, in one run.

    python benchmarks/bench_cuda.py [--quick] [--out benchmarks/results/cuda.md]
    python benchmarks/bench_cuda.py --sim      # a smoke run in the CUDA simulator (tiny, no timings)

Needs an NVIDIA GPU (and ``pip install -e '.[cuda]'``; PyTorch with CUDA for the comparisons). The
suite's six programs against JAX, PyTorch eager and torch.compile on the GPU: ``bench_gpu.py``.
Measures, with arguments already on the device (medians of repeated runs after warm-up, each timed
between two device synchronizations):
- the device's copy bandwidth (a device-to-device copy of the chain's bytes);
- an 8-op elementwise chain over 10^8 float32 (one fused kernel): its bandwidth as a fraction of the
  copy's (target >= 80%), and PyTorch eager on the same chain;
- reductions: row sums of a 8192 x 8192 matrix and the full sum of 10^8 values, against torch.sum;
- matmul 4096^3 float32 in GFLOP/s against torch.matmul (TF32 off, so both compute in float32): on
  cuBLAS (``runtime/cublas.py``) and on dslc's generated tiled kernel (``DSL_CUDA_BLAS=0``);
- a 6-layer MLP training step (value_and_grad + in-place SGD, width 1024, batch 4096) against
  PyTorch eager autograd doing the same, with its matmuls on cuBLAS and on the generated kernel;
- an embedding gradient (50,000 x 512 float32 from 1,000,000 tokens: a scatter-add with repeated
  rows) in the scatter's sorted form (``compiler/kernel/cuda/scatter.py``, the form the compiler
  picks at this size) and forced into the walk, which must give the same bits, against PyTorch's
  embedding backward (``aten.embedding_dense_backward``);
Each dslc result is checked against PyTorch's (or NumPy's) before it is timed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

SIM = "--sim" in sys.argv
if SIM:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_measure import copy_bandwidth, median_time  # noqa: E402
from numba import cuda  # noqa: E402
from suite_programs import chain  # noqa: E402 (the suite's 8-op chain, written once for every array module)

import dsl  # noqa: E402
import dsl.numpy as dnp  # noqa: E402
from runtime import cublas  # noqa: E402

LIBRARY = "cuBLAS" if cublas.available() else "generated tiled kernel"

try:
    import torch
except ImportError:  # the comparisons are skipped, dslc's figures stay
    torch = None


def mlp_host_inputs(rng: np.random.Generator, width: int, batch: int) -> tuple[Any, Any, Any]:
    """The MLP step's parameters (6 layers of ``width``, 16 outputs), inputs and targets, on the host."""
    sizes = [width] * 6 + [16]
    params = [
        ((rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32))
        for i, o in zip(sizes, sizes[1:])
    ]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    return params, x, rng.standard_normal((batch, 16)).astype(np.float32)


def kernel_only(fn: Callable[..., Any], *args: Any) -> Callable[..., Any]:
    """``fn`` compiled for CUDA with its matmuls on the generated kernel (``DSL_CUDA_BLAS=0``, read
    when the executable binds, at this first call on ``args``)."""
    compiled = dsl.compile(lambda *a: fn(*a), target="cuda")
    os.environ["DSL_CUDA_BLAS"] = "0"
    try:
        compiled(*args)
    finally:
        del os.environ["DSL_CUDA_BLAS"]
    return compiled


def scatter_walk(fn: Callable[..., Any], *args: Any) -> tuple[Callable[..., Any], Any]:
    """``fn`` compiled for CUDA with every scatter in the walk form (the sorted form's weight made
    prohibitive while it compiles, at this first call on ``args``), and that call's result."""
    from compiler.kernel.cuda import scatter

    compiled = dsl.compile(lambda *a: fn(*a), target="cuda")
    saved, scatter.SORT_STEP = scatter.SORT_STEP, 1 << 60
    try:
        first = compiled(*args)
    finally:
        scatter.SORT_STEP = saved
    return compiled, first


def embedding_loss(emb, ids, g):
    return (emb[ids] * g).sum()


def embedding_rows(
    record: Callable[..., None],
    rng: np.random.Generator,
    sizes: tuple[int, int, int],
    use_torch: bool,
    repeats: int,
) -> None:
    """The gradient of an embedding lookup (a scatter-add of each token's row of ``g`` into its
    row): the sorted form and the walk, bit for bit the same, against PyTorch's embedding backward."""
    rows, width, tokens = sizes
    emb = cuda.to_device(np.zeros((rows, width), np.float32))
    ids = cuda.to_device(rng.integers(0, rows, tokens))
    g = cuda.to_device(rng.standard_normal((tokens, width)).astype(np.float32))
    f_sorted = dsl.compile(dsl.grad(embedding_loss), target="cuda")
    ours = f_sorted(emb, ids, g).copy_to_host()
    f_walk, walked = scatter_walk(dsl.grad(embedding_loss), emb, ids, g)
    assert np.array_equal(ours, walked.copy_to_host()), "embedding gradient: the two forms differ"
    peer = None
    if use_torch:
        tg, tids = as_torch(g), as_torch(ids)
        backward = torch.ops.aten.embedding_dense_backward
        close(ours, backward(tg, tids, rows, -1, False), 1e-4, "embedding gradient")
        peer = median_time(lambda: backward(tg, tids, rows, -1, False), repeats)
    else:
        want = np.zeros((rows, width), np.float32)
        np.add.at(want, ids.copy_to_host(), g.copy_to_host())
        close(ours, want, 0.0, "embedding gradient")
    label = f"embedding gradient {rows}x{width}, {tokens} tokens"
    work = f"{tokens * width * 4 / 1e6:.0f} MB of updates"
    chosen = "sorted form" if "_segments(" in f_sorted.lower(emb, ids, g).source() else "walk form (chosen)"
    record(label, median_time(lambda: f_sorted(emb, ids, g), repeats), work, peer, chosen)
    record(label, median_time(lambda: f_walk(emb, ids, g), repeats), work, peer, "walk form (forced)")


def chain_dsl(x):
    return chain(dnp, x)


def chain_torch(x):
    return chain(SimpleNamespace(maximum=torch.clamp_min), x)  # torch.maximum takes tensors only


def mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = dnp.tanh(h @ w + b)
    w, b = params[-1]
    return ((h @ w + b - y) ** 2).mean()


def mlp_step(params, x, y):
    loss, grads = dsl.value_and_grad(mlp_loss)(params, x, y)
    for (w, b), (gw, gb) in zip(params, grads):
        w -= 0.01 * gw
        b -= 0.01 * gb
    return loss


def torch_mlp_step(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = torch.tanh(h @ w + b)
    w, b = params[-1]
    loss = ((h @ w + b - y) ** 2).mean()
    grads = torch.autograd.grad(loss, [t for pair in params for t in pair])
    with torch.no_grad():
        for t, g in zip([t for pair in params for t in pair], grads):
            t -= 0.01 * g
    return loss


def as_torch(d: Any) -> Any:
    return torch.as_tensor(d, device="cuda")


def close(got: Any, want: Any, rtol: float, what: str) -> None:
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    want = want.detach().cpu().numpy() if hasattr(want, "detach") else np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=what)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--sim", action="store_true", help="smoke run in the CUDA simulator (no timings)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "cuda.md"))
    args = parser.parse_args()
    if not SIM and not cuda.is_available():
        sys.exit("bench_cuda: no usable NVIDIA GPU here (numba.cuda.is_available() is False); nothing run")
    use_torch = torch is not None and not SIM and torch.cuda.is_available()
    if use_torch:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    scale = 1 if not (args.quick or SIM) else None
    n_chain = 10**8 if scale else (10**7 if not SIM else 300)
    n_rows = 8192 if scale else (2048 if not SIM else 20)
    n_mm = 4096 if scale else (1024 if not SIM else 24)
    width, batch = (1024, 4096) if scale else ((256, 1024) if not SIM else (8, 6))
    repeats = 20 if scale else (5 if not SIM else 1)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []

    def record(name: str, ours: float, work: str, peer: float | None = None, extra: str = "") -> None:
        rows.append(
            {
                "program": name,
                "dslc_ms": ours * 1e3,
                "torch_ms": None if peer is None else peer * 1e3,
                "ratio": None if peer is None else ours / peer,
                "work": work,
                "note": extra,
            }
        )
        print(rows[-1], flush=True)

    # Copy bandwidth and the fused chain.
    x = cuda.to_device(rng.standard_normal(n_chain).astype(np.float32))
    copy_bw, _ = copy_bandwidth(x, repeats)
    bytes_moved = 2 * x.size * 4
    f_chain = dsl.compile(chain_dsl, target="cuda")
    want = chain_torch(as_torch(x)) if use_torch else None
    if use_torch:
        close(f_chain(x), want, 1e-5, "chain")
    else:  # NumPy is the oracle
        close(f_chain(x), dsl.compile(chain_dsl, target="cpu")(x.copy_to_host()), 1e-5, "chain")
    t_chain = median_time(lambda: f_chain(x), repeats)
    t_chain_torch = median_time(lambda: chain_torch(as_torch(x)), repeats) if use_torch else None
    frac = (bytes_moved / t_chain) / copy_bw
    record(
        f"8-op chain, {n_chain:.0e} f32",
        t_chain,
        f"{bytes_moved / t_chain / 1e9:.0f} GB/s = {frac:.0%} of copy ({copy_bw / 1e9:.0f} GB/s)",
        t_chain_torch,
    )

    # Reductions.
    m = cuda.to_device(rng.standard_normal((n_rows, n_rows)).astype(np.float32))
    f_rows = dsl.compile(lambda a: a.sum(axis=1), target="cuda")
    f_all = dsl.compile(lambda a: a.sum(), target="cuda")
    if use_torch:
        close(f_rows(m), as_torch(m).sum(dim=1), 1e-3, "row sums")
        close(f_all(x), as_torch(x).sum(), 1e-3, "full sum")
    else:
        close(f_rows(m), m.copy_to_host().sum(axis=1), 1e-3, "row sums")
        close(f_all(x), x.copy_to_host().sum(), 1e-3, "full sum")
    t_rows = median_time(lambda: f_rows(m), repeats)
    t_all = median_time(lambda: f_all(x), repeats)
    peer_rows = median_time(lambda: as_torch(m).sum(dim=1), repeats) if use_torch else None
    peer_all = median_time(lambda: as_torch(x).sum(), repeats) if use_torch else None
    record(f"row sums {n_rows}x{n_rows}", t_rows, f"{m.size * 4 / t_rows / 1e9:.0f} GB/s", peer_rows)
    record(f"full sum {n_chain:.0e}", t_all, f"{x.size * 4 / t_all / 1e9:.0f} GB/s", peer_all)

    # Matmul: the tiled kernel.
    a = cuda.to_device(rng.standard_normal((n_mm, n_mm)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((n_mm, n_mm)).astype(np.float32))
    f_mm = dsl.compile(lambda p, q: p @ q, target="cuda")
    if use_torch:
        close(f_mm(a, b), as_torch(a) @ as_torch(b), 1e-3, "matmul")
    else:
        close(f_mm(a, b), a.copy_to_host() @ b.copy_to_host(), 1e-3, "matmul")
    t_mm = median_time(lambda: f_mm(a, b), repeats)
    peer_mm = median_time(lambda: as_torch(a) @ as_torch(b), repeats) if use_torch else None
    flops = 2 * n_mm**3
    note = "" if peer_mm is None else f"torch.matmul {flops / peer_mm / 1e9:.0f} GFLOP/s"
    record(f"matmul {n_mm}^3 f32 ({LIBRARY})", t_mm, f"{flops / t_mm / 1e9:.0f} GFLOP/s", peer_mm, note)
    f_tiled = kernel_only(lambda p, q: p @ q, a, b)
    close(f_tiled(a, b), a.copy_to_host() @ b.copy_to_host(), 1e-3, "matmul, generated kernel")
    t_tiled = median_time(lambda: f_tiled(a, b), repeats)
    work = f"{flops / t_tiled / 1e9:.0f} GFLOP/s"
    record(f"matmul {n_mm}^3 f32 (generated tiled kernel)", t_tiled, work, peer_mm, "DSL_CUDA_BLAS=0")

    # MLP training step.
    host, x_host, y_host = mlp_host_inputs(rng, width, batch)
    params = [(cuda.to_device(w), cuda.to_device(bias)) for w, bias in host]
    xb, yb = cuda.to_device(x_host), cuda.to_device(y_host)
    f_step = dsl.compile(mlp_step, target="cuda")
    peer_step = None
    if use_torch:
        tparams = [(torch.tensor(w, device="cuda"), torch.tensor(bias, device="cuda")) for w, bias in host]
        for w, bias in tparams:
            w.requires_grad_(True)
            bias.requires_grad_(True)
        close(f_step(params, xb, yb), torch_mlp_step(tparams, as_torch(xb), as_torch(yb)), 1e-3, "mlp step")
        peer_step = median_time(lambda: torch_mlp_step(tparams, as_torch(xb), as_torch(yb)), repeats)
    t_step = median_time(lambda: f_step(params, xb, yb), repeats)
    label = f"MLP training step 6x{width}, batch {batch}"
    record(label, t_step, f"value_and_grad + SGD, {LIBRARY}", peer_step)
    f_kernel_step = kernel_only(mlp_step, params, xb, yb)
    t_kernel_step = median_time(lambda: f_kernel_step(params, xb, yb), repeats)
    work = "value_and_grad + SGD, generated matmul kernel"
    record(label, t_kernel_step, work, peer_step, "DSL_CUDA_BLAS=0")

    embedding = (50_000, 512, 1_000_000) if scale else ((5_000, 128, 100_000) if not SIM else (7, 4, 30))
    embedding_rows(record, rng, embedding, use_torch, repeats)

    if SIM:
        print("simulator smoke run: every program ran (checked against NumPy but the MLP step); no figures")
        return
    device = cuda.get_current_device()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.name.decode() if isinstance(device.name, bytes) else str(device.name),
        "compute_capability": list(device.compute_capability),
        "host": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__ if torch is not None else None,
        "quick": args.quick,
        "command": "python benchmarks/bench_cuda.py" + (" --quick" if args.quick else ""),
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    lines = [
        "# CUDA benchmark",
        "",
        f"`{meta['command']}` on {meta['device']} (sm_{''.join(map(str, meta['compute_capability']))}), "
        f"{meta['date']}, torch {meta['torch']}.",
        "",
        "| program | dslc ms | torch ms | dslc/torch | work | note |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        peer = "-" if r["torch_ms"] is None else f"{r['torch_ms']:.3f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        ours = f"{r['dslc_ms']:.3f}"
        lines.append(f"| {r['program']} | {ours} | {peer} | {ratio} | {r['work']} | {r['note']} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
