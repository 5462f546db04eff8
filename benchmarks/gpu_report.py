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


def best_peer_ms(row: dict[str, Any]) -> float | None:
    """The fastest peer's wall time where dslc and at least one peer were timed."""
    fw = row["frameworks"]
    peers = [fw[p]["ms"] for p in PEERS if "ms" in fw.get(p, {})]
    return min(peers) if peers and "ms" in fw.get("dslc", {}) else None


def ratio_to_best(row: dict[str, Any]) -> str:
    best = best_peer_ms(row)
    return "-" if best is None else f"{row['frameworks']['dslc']['ms'] / best:.2f}"


def floor_ms(row: dict[str, Any]) -> float:
    """The program's minimal bytes at the copy bandwidth, in milliseconds."""
    return row["min_bytes"] / (row["copy_GBps"] * 1e9) * 1e3


def gpu_cell(entry: dict[str, Any]) -> str:
    return f"{entry['gpu_ms']:.3f} ({entry['launches']:g})" if "gpu_ms" in entry else cell(entry, "gpu_ms")


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    names = [LABELS[f] for f in ("dslc", *PEERS)]
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    device = next((r["device"] for r in ok if "device" in r), "-")
    probe = next((r for r in ok if "copy_GBps" in r), {})
    copy = probe.get("copy_GBps")
    how = f"{probe.get('copy_MB', 0):.0f} MB read and written by {probe.get('copy_how', 'cuMemcpy')}"
    lines = [
        "# GPU benchmark (issue 27)",
        "",
        f"- date: {meta['date']}; device: {device}; copy bandwidth "
        + ("-" if copy is None else f"{copy:.0f} GB/s ({how})"),
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
    lines += roofline_lines(ok, copy, names) + memory_lines(ok) + target_lines(ok)
    lines += kernel_lines(ok) + note_lines(rows, meta)
    return "\n".join(lines) + "\n"


def kernel_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each framework's longest GPU operations of a call (ms per call, launches per call), by name."""
    lines = ["", "## The longest GPU operations of a call (ms, launches per call)", ""]
    for r in rows:
        shown = [
            f"{LABELS[f]}: "
            + "; ".join(f"`{name[:48]}` {ms:.3f} ({count:g})" for name, ms, count in entry["kernels"])
            for f, entry in r["frameworks"].items()
            if entry.get("kernels")
        ]
        if shown:
            lines.append(f"- {r['program']} ({r['size']}):")
            lines += [f"  - {s}" for s in shown]
    return lines if len(lines) > 3 else []


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
        floor = floor_ms(r)
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


def target_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 27's targets for dslc, each counted over the rows it applies to, with the rows missing it."""
    met: dict[str, list[tuple[str, bool]]] = {
        "wall time at most the best peer's": [],
        "memory-bound programs at the gpu size: at least 0.70 of the roofline": [],
        "host cost at most 20 us + 2 us per launch": [],
        "planned intermediates at most XLA's temp bytes": [],
    }
    goals = list(met.values())
    for r in rows:
        label, ours = f"{r['program']} ({r['size']})", r["frameworks"].get("dslc", {})
        best = best_peer_ms(r)
        if best is not None:
            goals[0].append((label, ours["ms"] <= best))
        if r["size"] == "gpu" and r["program"] in MEMORY_BOUND and "ms" in ours and "copy_GBps" in r:
            goals[1].append((label, floor_ms(r) / ours["ms"] >= 0.70))
        if "gpu_ms" in ours:
            goals[2].append((label, ours["ms"] - ours["gpu_ms"] <= 0.020 + 0.002 * ours["launches"]))
        if r.get("xla_temp") is not None and "planned_peak" in r:
            goals[3].append((label, r["planned_peak"] <= r["xla_temp"]))
    lines = ["", "## Issue 27's targets (dslc)", ""]
    for goal, checks in met.items():
        missed = [label for label, ok in checks if not ok]
        lines.append(f"- {goal}: {len(checks) - len(missed)} of {len(checks)} rows")
        lines[-1] += f"; not: {', '.join(missed)}" if missed else ""
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
