"""The errors users catch: ``dsl.DSLError`` and its subclasses (defined in ``runtime.errors``)."""

from runtime.errors import (
    CastingError,
    DeviceError,
    DSLError,
    DTypeError,
    IndexingError,
    InplaceError,
    IRParseError,
    MissingError,
    ReadOnlyError,
    ShapeError,
    TraceError,
    TransformError,
    VerificationError,
)

__all__ = [
    "CastingError",
    "DSLError",
    "DTypeError",
    "DeviceError",
    "IRParseError",
    "InplaceError",
    "IndexingError",
    "MissingError",
    "ReadOnlyError",
    "ShapeError",
    "TraceError",
    "TransformError",
    "VerificationError",
]
