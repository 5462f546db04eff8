"""What to say when a NumPy name has no ``dsl.numpy`` counterpart: a table of the NumPy functions
users reach for that dslc lacks, each with the nearest thing to write instead, and otherwise the
closest ``dsl.numpy`` names (difflib). Used by ``dsl.numpy``'s module ``__getattr__`` (``dnp.foo``)
and by NumPy's dispatch on traced arrays (``np.foo(x)``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

_SORTING = "sorting is not supported in compiled functions; max, min, argmax and argmin are"
_DATA_SHAPE = (
    "its result's shape depends on the values, which are not known at trace time; "
    "dsl.numpy.where(cond, x, 0) keeps the shape"
)
_FACTORIZATION = "matrix factorizations are not supported; dsl.numpy.linalg has norm"

ALTERNATIVES: dict[str, str] = {
    "sort": _SORTING,
    "argsort": _SORTING,
    "median": _SORTING,
    "percentile": _SORTING,
    "quantile": _SORTING,
    "partition": _SORTING,
    "unique": _DATA_SHAPE,
    "nonzero": _DATA_SHAPE,
    "argwhere": _DATA_SHAPE,
    "flatnonzero": _DATA_SHAPE,
    "extract": _DATA_SHAPE,
    "compress": _DATA_SHAPE,
    "clamp": "dsl.numpy.clip",
    "solve": _FACTORIZATION,
    "inv": _FACTORIZATION,
    "det": _FACTORIZATION,
    "svd": _FACTORIZATION,
    "eig": _FACTORIZATION,
    "eigh": _FACTORIZATION,
    "cholesky": _FACTORIZATION,
    "qr": _FACTORIZATION,
}


def message(name: str, namespace: str, available: Iterable[str]) -> str:
    """Why ``namespace.name`` does not exist and what to write instead."""
    head = f"{namespace} has no function {name!r}"
    if name in ALTERNATIVES:
        return f"{head}: {ALTERNATIVES[name]}"
    public = sorted(n for n in available if not n.startswith("_"))
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
    if close:
        return f"{head}; did you mean {', '.join(f'{namespace}.{c}' for c in close)}?"
    return f"{head} (dir({namespace}) lists what it has)"
