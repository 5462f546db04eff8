"""The CPU kernel of a SCATTER group (``compiler/prims/gather.py``): the base copied into the result
(nothing to copy when the result is stored over its dying base, in place), then one serial loop nest
over the updates in row-major order, each combined into the element its index names (``landing``:
wrapped once if negative; an update outside the axis is dropped). Serial
on purpose: repeated indices then combine in one fixed order, the order of the NumPy reference
(``runtime.array_ops.scatter_add``), and the loop costs one pass over the updates."""

from __future__ import annotations

from compiler.kernel.cpu.loops import KernelSpec, store
from compiler.kernel.cpu.records import Kernel
from compiler.kernel.emit import subscript, typed
from compiler.kernel.ir import Access, If, Line, Stmt, nest
from compiler.prims.gather import landing, split_index


def scatter_kernel(spec: KernelSpec) -> Kernel | None:
    root = spec.group.root
    x, v, idx = root.operands
    out = root.result
    if out.type.size == 0:
        return None
    axis = int(root.attrs["axis"])
    reducer = root.prim.reducer
    assert reducer is not None, f"{root.prim.name} has no combine"
    px, pv, pi, po = (spec.param(a) for a in (x, v, idx, out))
    body: list[Stmt] = []
    if po != px:  # not in place: the base first
        ii = tuple(f"i{d}" for d in range(out.type.rank))
        body += nest(ii, out.type.shape, [store(Access(po, ii), subscript(px, ii), (Access(px, ii),))])
    if v.type.size:
        u = tuple(f"u{d}" for d in range(v.type.rank))
        lead, at, trail = split_index(u, axis, idx.type.rank)
        dest = Access(po, (*lead, "j", *trail))
        update = Access(pv, u)
        n = x.type.shape[axis]
        combined = typed(reducer.combine(subscript(po, dest.index), subscript(pv, u)), out.type.dtype)
        per_update: list[Stmt] = [
            Line(f"j = {subscript(pi, tuple(at))}", (Access(pi, tuple(at)),)),
            Line(f"j = {landing('j', n)}"),  # (n: dropped)
            If(f"j < {n}", [Line(f"{subscript(po, dest.index)} = {combined}", (dest, update), (dest,))]),
        ]
        body += nest(u, v.type.shape, per_update)
    return spec.define(body)
