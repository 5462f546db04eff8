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
    "tensordot": "dsl.numpy.einsum, or dsl.numpy.matmul (or dot) with transpose and reshape",
    "inner": "dsl.numpy.matmul(a, b.T), or dsl.numpy.sum(a * b, axis=-1)",
    "vdot": "dsl.numpy.sum(a * b)",
    "kron": "dsl.numpy.outer and reshape",
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
    "fmax": "dsl.numpy.maximum (it propagates NaN) with dsl.numpy.where(dsl.numpy.isnan(x), y, x)",
    "fmin": "dsl.numpy.minimum (it propagates NaN) with dsl.numpy.where(dsl.numpy.isnan(x), y, x)",
    "nansum": "dsl.numpy.sum(dsl.numpy.where(dsl.numpy.isnan(x), 0, x))",
    "nanmean": "dsl.numpy.sum(dsl.numpy.where(dsl.numpy.isnan(x), 0, x)) / dsl.numpy.sum(~isnan(x))",
    "nanmax": "dsl.numpy.max(dsl.numpy.where(dsl.numpy.isnan(x), -dsl.numpy.inf, x))",
    "nanmin": "dsl.numpy.min(dsl.numpy.where(dsl.numpy.isnan(x), dsl.numpy.inf, x))",
    "average": "dsl.numpy.sum(w * x) / dsl.numpy.sum(w), or dsl.numpy.mean",
    "tile": "dsl.numpy.broadcast_to of a reshaped array, then reshape",
    "repeat": "dsl.numpy.broadcast_to(x[:, None], (n, k)).reshape(-1)",
    "roll": "dsl.numpy.concatenate([x[-k:], x[:-k]])",
    "diag": "x * dsl.numpy.eye(n) (and a sum over one axis for the diagonal of a matrix)",
    "diagonal": "dsl.numpy.sum(x * dsl.numpy.eye(n), axis=-1)",
    "trace": "dsl.numpy.sum(x * dsl.numpy.eye(n))",
    "cross": "slices and products: a[1] * b[2] - a[2] * b[1], ...",
    "isclose": "dsl.numpy.abs(a - b) <= atol + rtol * dsl.numpy.abs(b)",
    "allclose": "dsl.numpy.all(dsl.numpy.abs(a - b) <= atol + rtol * dsl.numpy.abs(b))",
    "atleast_2d": "dsl.numpy.reshape or x[None]",
    "column_stack": "dsl.numpy.stack(arrays, axis=1)",
    "dstack": "dsl.numpy.stack(arrays, axis=-1)",
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
