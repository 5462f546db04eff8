"""The errors users catch: ``dsl.DSLError`` and its subclasses (defined in ``runtime.errors``)."""

from runtime.errors import (
    DeviceError,
    DSLError,
    InplaceError,
    IRParseError,
    ReadOnlyError,
    ShapeError,
    TraceError,
    VerificationError,
)


class IndexingError(ShapeError, IndexError):
    """Bad indexing of a traced array (out of range, wrong index type, too many indices)."""


class DTypeError(TraceError, TypeError):
    """An operation NumPy does not define for its operands' dtypes (``x & 1`` on floats, ``-x`` on
    bools): a ``TypeError``, as NumPy raises."""


class TransformError(TraceError, TypeError):
    """A transform (grad, value_and_grad, hessian) cannot take this function or these arguments:
    a non-scalar output, an integer argument to differentiate, bad ``argnums``."""


__all__ = [
    "DSLError",
    "DTypeError",
    "DeviceError",
    "IRParseError",
    "InplaceError",
    "IndexingError",
    "ReadOnlyError",
    "ShapeError",
    "TraceError",
    "TransformError",
    "VerificationError",
]
