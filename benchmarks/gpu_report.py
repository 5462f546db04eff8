"""The report of ``bench_gpu.py``: its rows (one per program and size, as its processes return them)
as Markdown tables: wall time, GPU time and dslc's host cost, the roofline of the memory-bound
programs, intermediates against XLA's temp bytes, and the notes (missing or failing peers)."""

from __future__ import annotations

from typing import Any

PEERS = ("jax", "torch", "torch.compile")
LABELS = {"dslc": "dslc", "jax": "JAX", "torch": "torch eager", "torch.compile": "torch.compile"}
MEMORY_BOUND = ("elementwise chain", "softmax + cross-entropy", "layer norm")  # roofline rows
STATES = {"missing": "n/a", "fails": "fails", "differs": "differs"}  # a peer that was not timed


def cell(entry: dict[str, Any], key: str) -> str:
    """A figure, or what stood in its way: not installed here ("n/a"), "fails", "differs" (values)."""
    if key in entry:
        return f"{entry[key]:.3f}"
    return next((shown for state, shown in STATES.items() if state in entry), "-")


def ratio_to_best(row: dict[str, Any]) -> str:
    fw = row["frameworks"]
    peers = [fw[p]["ms"] for p in PEERS if "ms" in fw.get(p, {})]
    return f"{fw['dslc']['ms'] / min(peers):.2f}" if peers and "ms" in fw.get("dslc", {}) else "-"


def gpu_cell(entry: dict[str, Any]) -> str:
    return f"{entry['gpu_ms']:.3f} ({entry['launches']:g})" if "gpu_ms" in entry else cell(entry, "gpu_ms")


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    names = [LABELS[f] for f in ("dslc", *PEERS)]
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    device = next((r["device"] for r in ok if "device" in r), "-")
    probe = next((r for r in ok if "copy_GBps" in r), {})
    copy = probe.get("copy_GBps")
    lines = [
        "# GPU benchmark (issue 27)",
        "",
        f"- date: {meta['date']}; device: {device}; copy bandwidth "
        + ("-" if copy is None else f"{copy:.0f} GB/s (device-to-device, {probe['copy_MB']:.0f} MB)"),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        f"- command: `{meta['command']}`",
        f"- wall: median of every synchronized call over {meta['rounds']} rounds (frameworks interleaved, "
        "inputs on the device, after warm-up); values checked against dslc's first; GPU time: the sum of "
        "a call's kernels, copies and fills recorded by torch.profiler (Kineto/CUPTI, every CUDA "
        "activity of the process, Numba's included), with the launches per call in parentheses; "
        "float32 matmuls at full precision (TF32 off, JAX `highest`)",
        "",
        "## Wall time per call (ms)",
        "",
        "| program | size | " + " | ".join(f"{n} ms" for n in names) + " | dslc / best | max rel err |",
        "|---|---|" + "---:|" * (len(names) + 1) + "---|",
    ]
    for r in ok:
        fw = r["frameworks"]
        errs = ", ".join(
            f"{LABELS[p]} {fw[p]['max_rel_err']:.1e}" for p in PEERS if "max_rel_err" in fw.get(p, {})
        )
        cells = " | ".join(cell(fw.get(f, {}), "ms") for f in ("dslc", *PEERS))
        lines.append(f"| {r['program']} | {r['size']} | {cells} | {ratio_to_best(r)} | {errs} |")
    lines += [
        "",
        "## GPU time per call (ms, launches) and dslc's host cost",
        "",
        "| program | size | dslc GPU | dslc host (wall - GPU) | " + " | ".join(names[1:]) + " |",
        "|---|---|---:|---:|" + "---:|" * len(PEERS),
    ]
    for r in ok:
        fw, ours = r["frameworks"], r["frameworks"].get("dslc", {})
        host = f"{ours['ms'] - ours['gpu_ms']:.3f}" if "gpu_ms" in ours else "-"
        peers = " | ".join(gpu_cell(fw.get(p, {})) for p in PEERS)
        lines.append(f"| {r['program']} | {r['size']} | {gpu_cell(ours)} | {host} | {peers} |")
    lines += roofline_lines(ok, copy, names) + memory_lines(ok) + note_lines(rows, meta)
    return "\n".join(lines) + "\n"


def roofline_lines(rows: list[dict[str, Any]], copy: float | None, names: list[str]) -> list[str]:
    """Memory-bound programs at the GPU size: minimal bytes at the copy bandwidth over each time."""
    lines = [
        "",
        "## Roofline of the memory-bound programs at the gpu size",
        "",
        "Minimal bytes: inputs read once, outputs written once; their time at the copy bandwidth over "
        "each framework's wall time (target: dslc at least 0.70).",
        "",
        "| program | minimal bytes | at copy bandwidth ms | " + " | ".join(names) + " |",
        "|---|---:|---:|" + "---:|" * len(names),
    ]
    for r in rows:
        if r["size"] != "gpu" or r["program"] not in MEMORY_BOUND or copy is None:
            continue
        floor = r["min_bytes"] / (r["copy_GBps"] * 1e9) * 1e3
        fracs = [r["frameworks"].get(f, {}).get("ms") for f in ("dslc", *PEERS)]
        cells = " | ".join("-" if t is None else f"{floor / t:.2f}" for t in fracs)
        lines.append(f"| {r['program']} | {r['min_bytes']:,} | {floor:.3f} | {cells} |")
    return lines


def memory_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Intermediates: dslc's plan for target=cuda against XLA's temp bytes",
        "",
        "| program | size | dslc planned peak | XLA temp | backend | dslc / XLA |",
        "|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        xla = r.get("xla_temp")
        ratio = f"{r['planned_peak'] / xla:.2f}" if xla else "-"
        shown = "-" if xla is None else f"{xla:,}"
        lines.append(
            f"| {r['program']} | {r['size']} | {r.get('planned_peak', 0):,} | {shown} | "
            f"{r.get('xla_backend', '-')} | {ratio} |"
        )
    return lines


def note_lines(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    lines = ["", "## Notes", ""]
    for r in rows:
        where = f"{r['program']} ({r['size']})"
        if "error" in r or "skipped" in r:
            lines.append(f"- {where}: {r.get('error') or r['skipped']}")
        for f, entry in r["frameworks"].items():
            for state in ("missing", "fails", "differs", "gpu_note"):
                if state in entry:
                    lines.append(f"- {where}: {LABELS[f]} {state.replace('_note', ' time')}: {entry[state]}")
    lines += [
        f"- {r['program']}: {r['description']}" for r in rows if r["size"] != "cpu" and "description" in r
    ]
    spent = ", ".join(f"{r['program']} ({r['size']}) {r['seconds']:.0f}" for r in rows if "seconds" in r)
    warm = f"compiling first (--warm-jobs): {meta['warm_s']:.0f} s; " if "warm_s" in meta else ""
    return lines + [f"- seconds: {warm}each program's measurement: {spent}"]
