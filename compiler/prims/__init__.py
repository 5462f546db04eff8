"""The closed set of primitives, one definition each, and the registry that names them.

``REGISTRY`` maps the IR name (``add`` for ``"dsl.add"``) to the ``Primitive`` object. Property sets
(``ELEMENTWISE`` ...) answer "what kind of op is this" without comparing names.
"""

from __future__ import annotations

from compiler.prims import (
    contraction,
    control,
    dynamic,
    elementwise,
    gather,
    movement,
    random,
    reduction,
    scan,
    source,
)
from compiler.prims.base import AttrType, Kind, Memory, Primitive

_MODULES = (elementwise, reduction, movement, contraction, source, control, dynamic, random, gather, scan)

REGISTRY: dict[str, Primitive] = {}
for _module in _MODULES:
    for _obj in vars(_module).values():
        if isinstance(_obj, Primitive):
            assert _obj.name not in REGISTRY, f"two primitives named {_obj.name}"
            REGISTRY[_obj.name] = _obj


def by_kind(kind: Kind) -> frozenset[Primitive]:
    return frozenset(p for p in REGISTRY.values() if p.kind is kind)


ELEMENTWISE = by_kind(Kind.ELEMENTWISE)
REDUCTIONS = by_kind(Kind.REDUCTION)
MOVEMENT = by_kind(Kind.MOVEMENT)
CONTRACTIONS = by_kind(Kind.CONTRACTION)
SOURCES = by_kind(Kind.SOURCE)
CONTROL = by_kind(Kind.CONTROL)  # ops holding regions: loops and branches
SCATTERS = by_kind(Kind.SCATTER)  # updates at data-dependent positions: kernels of their own
SCANS = by_kind(Kind.SCAN)  # cumulative sums and products: a serial walk along one axis per line


__all__ = [
    "REGISTRY",
    "ELEMENTWISE",
    "REDUCTIONS",
    "MOVEMENT",
    "CONTRACTIONS",
    "SOURCES",
    "CONTROL",
    "AttrType",
    "Kind",
    "Memory",
    "Primitive",
    "contraction",
    "control",
    "elementwise",
    "movement",
    "reduction",
    "source",
]
