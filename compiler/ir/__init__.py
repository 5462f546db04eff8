"""The IR: types, values, ops, functions, and their MLIR text form."""

from compiler.ir.core import UNKNOWN_LOC, Block, Function, Location, Op, Value
from compiler.ir.types import DType, MemRefType, TensorType

__all__ = ["UNKNOWN_LOC", "Block", "DType", "Function", "Location", "MemRefType", "Op", "TensorType", "Value"]
