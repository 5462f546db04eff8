"""The error hierarchy users catch (re-exported as ``dsl.*``).

It lives in ``runtime`` because it is the bottom layer: ``dsl`` and ``compiler`` both import it (the
compiler raises ``TransformError`` for reverse mode through a ``while``), and ``runtime`` itself
raises ``DeviceError`` and call-time errors without importing ``compiler``.
"""

from __future__ import annotations


class DSLError(Exception):
    """Base class of every error dslc raises on purpose."""


class TraceError(DSLError):
    """The traced Python function did something that cannot be traced (e.g. ``if`` on an array)."""


class MissingError(TraceError, AttributeError):
    """A NumPy function or array method dslc does not have (``dnp.sort``, ``x.foo``): an
    ``AttributeError`` (``hasattr`` is False), naming the user's line and what to write instead."""


class ShapeError(DSLError, ValueError):
    """Shapes, dtypes or attributes of an operation do not fit together."""


class IndexingError(ShapeError, IndexError):
    """Bad indexing of a traced array (out of range, wrong index type, too many indices)."""


class CastingError(ShapeError, TypeError):
    """An in-place write of a result whose dtype the casting rule does not let into the array
    (``i32 += f32``): a ``TypeError``, as NumPy's ``UFuncTypeError``, and a ``ShapeError``."""


class DTypeError(TraceError, TypeError):
    """An operation NumPy does not define for its operands' dtypes (``x & 1`` on floats, ``-x`` on
    bools): a ``TypeError``, as NumPy raises."""


class TransformError(TraceError, TypeError):
    """A transform (grad, value_and_grad, hessian) cannot take this function or these arguments:
    a non-scalar output, an integer argument to differentiate, bad ``argnums``."""


class InplaceError(DSLError):
    """An in-place operation that cannot be honoured."""


class ReadOnlyError(InplaceError, ValueError):
    """A write into a read-only array: a ``broadcast_to`` view, or a read-only argument the program
    modifies in place. A ``ValueError``, as NumPy's "assignment destination is read-only"."""


class DeviceError(DSLError):
    """The requested device is not usable."""


class IRParseError(DSLError):
    """IR text could not be parsed; the message carries line and column."""

    def __init__(self, message: str, line: int = 0, col: int = 0, filename: str = "<ir>") -> None:
        self.line = line
        self.col = col
        self.filename = filename
        super().__init__(f"{filename}:{line}:{col}: {message}")


class VerificationError(DSLError):
    """The IR broke an invariant: names the op and its location. Means a compiler bug or bad IR text."""
