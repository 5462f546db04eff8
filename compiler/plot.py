"""A picture of a memory plan: the arena over program time (``dslc plan --plot memory.png``).

Each buffer is a rectangle: x spans its live range in program positions, y its bytes in the arena
(offset .. offset + bytes). A buffer that took over a dying operand's block in place has the donor's
colour, a hatch and an arrow label (``%5 <- %0``), so a chain of in-place reuses reads as one colour
moving right. A dashed line marks the peak. matplotlib is optional (``pip install 'dslc[plot]'``);
it is imported here only, with the Agg canvas: no display is needed.
"""

from __future__ import annotations

from typing import Any

from compiler.passes.plan import BufferRow, MemoryPlan
from runtime.errors import DSLError

FIGSIZE = (10.0, 5.0)  # inches
DPI = 100  # so the PNG is 1000 x 500 pixels
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "bytes"))


def figure_pixels() -> tuple[int, int]:
    """Width and height of the PNG that ``plot_memory_plan`` writes."""
    return round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI)


def _amount(n: float, unit: str) -> str:
    return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"


def _unit(n: int) -> tuple[int, str]:
    return next((scale, name) for scale, name in _UNITS if n >= scale or scale == 1)


def _chain_roots(rows: list[BufferRow]) -> dict[str, str]:
    """Each buffer's first donor: the buffer that owned the block before in-place hand-overs."""
    by_name = {r.name: r for r in rows}
    roots: dict[str, str] = {}
    for r in rows:
        root, seen = r, {r.name}
        while root.reused_from in by_name and root.reused_from not in seen:
            root = by_name[root.reused_from]
            seen.add(root.name)
        roots[r.name] = root.name
    return roots


def plot_memory_plan(plan: MemoryPlan, path: str, title: str = "memory plan") -> None:
    """Write ``plan`` as a PNG to ``path`` (``FIGSIZE`` at ``DPI``)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise DSLError("plotting needs matplotlib: pip install 'dslc[plot]'") from None

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    ax: Any = fig.add_subplot(1, 1, 1)
    rows = [r for r in plan.buffers if r.in_arena]  # donated arguments' and results' memory is not arena
    scale, unit = _unit(max(plan.peak_bytes, 1))
    roots = _chain_roots(rows)
    palette = _palette(len(set(roots.values())))
    colour = {root: palette[i] for i, root in enumerate(dict.fromkeys(roots.values()))}
    x_max = 1.0
    for r in rows:
        start, end = r.live
        width = max(end - start, 0.6)  # a buffer written and read by one kernel is still visible
        reused = r.reused_from is not None
        ax.add_patch(
            Rectangle(
                (start, r.offset / scale),
                width,
                r.bytes / scale,
                facecolor=colour[roots[r.name]],
                edgecolor="black",
                linewidth=0.6,
                hatch="//" if reused else None,
                alpha=0.85,
            )
        )
        if r.bytes >= 0.04 * max(plan.peak_bytes, 1):
            label = f"{r.name} \u2190 {r.reused_from}" if reused else r.name
            ax.text(
                start + width / 2,
                (r.offset + r.bytes / 2) / scale,
                label,
                ha="center",
                va="center",
                fontsize=8,
            )
        x_max = max(x_max, start + width)
    peak = plan.peak_bytes / scale
    ax.axhline(peak, color="red", linestyle="--", linewidth=1.2)
    ax.text(0, peak, f" peak {_amount(peak, unit)}", color="red", va="bottom", fontsize=9)
    if not rows:
        ax.text(
            0.5, 0.5, "no arena buffers: every intermediate is fused", transform=ax.transAxes, ha="center"
        )
    ax.set_xlim(-0.5, x_max + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # program positions are op indices
    ax.set_ylim(0, peak * 1.3 if peak else 1.0)  # headroom above the peak line for the legend
    ax.set_xlabel("program position (op index of the kernel that writes / last reads the buffer)")
    ax.set_ylabel(f"arena offset ({unit})")
    naive = plan.naive_bytes / scale
    ax.set_title(f"{title}: peak {_amount(peak, unit)}, naive {_amount(naive, unit)}", fontsize=10)
    ax.legend(
        handles=[
            Patch(facecolor="lightgray", edgecolor="black", label="buffer (colour: one block)"),
            Patch(
                facecolor="lightgray",
                edgecolor="black",
                hatch="//",
                label="reuses its donor's block in place",
            ),
        ],
        loc="upper right",
        fontsize=8,
    )
    fig.savefig(path, dpi=DPI, format="png")


def _palette(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]
