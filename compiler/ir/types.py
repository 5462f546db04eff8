"""IR types: element dtypes and ranked tensor types with static shapes."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class DType(enum.Enum):
    """The element types of the IR. The value is the MLIR spelling."""

    f32 = "f32"
    f64 = "f64"
    i32 = "i32"
    i64 = "i64"
    i1 = "i1"

    @property
    def np(self) -> np.dtype:
        return _TO_NUMPY[self]

    @property
    def itemsize(self) -> int:
        return int(_TO_NUMPY[self].itemsize)

    @property
    def is_float(self) -> bool:
        return self in (DType.f32, DType.f64)

    @property
    def is_int(self) -> bool:
        return self in (DType.i32, DType.i64)

    @property
    def is_bool(self) -> bool:
        return self is DType.i1

    @staticmethod
    def from_numpy(dt: object) -> DType:
        """Map a NumPy dtype (or anything ``np.dtype`` accepts) to a DType; ``None`` if unsupported."""
        found = _FROM_NUMPY.get(np.dtype(dt))  # type: ignore[call-overload]
        if found is None:
            supported = ", ".join(str(d) for d in _FROM_NUMPY)
            raise TypeError(f"unsupported dtype {np.dtype(dt)}; dslc supports {supported}")  # type: ignore[call-overload]
        return found

    def __str__(self) -> str:
        return self.value


_TO_NUMPY: dict[DType, np.dtype] = {
    DType.f32: np.dtype(np.float32),
    DType.f64: np.dtype(np.float64),
    DType.i32: np.dtype(np.int32),
    DType.i64: np.dtype(np.int64),
    DType.i1: np.dtype(np.bool_),
}
_FROM_NUMPY: dict[np.dtype, DType] = {v: k for k, v in _TO_NUMPY.items()}


def is_supported_numpy_dtype(dt: np.dtype) -> bool:
    return dt in _FROM_NUMPY


@dataclass(frozen=True)
class TensorType:
    """``tensor<2x3xf32>``; a scalar is the 0-d ``tensor<f32>``."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"


@dataclass(frozen=True)
class MemRefType:
    """A buffer type of the bufferized stage: ``memref<2x3xf32>``."""

    shape: tuple[int, ...]
    dtype: DType

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"memref<{dims}{self.dtype}>"
