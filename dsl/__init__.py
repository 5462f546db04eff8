"""dslc: a Python array DSL with an optimizing compiler.

import dsl
import dsl.numpy as dnp

@dsl.compile
def f(x, w):
    return dnp.tanh(x @ w).sum()
"""

from dsl import methods as _methods
from dsl import nn, numpy, random
from dsl.array import Array
from dsl.batching import vmap
from dsl.compile import CallError, Compiled, Lowered, compile
from dsl.control import cond, fori_loop, scan, while_loop
from dsl.errors import (
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
from dsl.jacobians import jacfwd, jacrev, jvp
from dsl.transforms import check_grads, grad, hessian, stop_gradient, value_and_grad, vjp

_methods.install(Array)  # operators and methods, once dsl.numpy and dsl.nn exist

float32 = numpy.float32
float64 = numpy.float64
int32 = numpy.int32
int64 = numpy.int64
bool_ = numpy.bool_

__all__ = [
    "Array",
    "CallError",
    "Compiled",
    "DSLError",
    "DeviceError",
    "IRParseError",
    "IndexingError",
    "InplaceError",
    "MissingError",
    "ReadOnlyError",
    "Lowered",
    "ShapeError",
    "CastingError",
    "DTypeError",
    "TraceError",
    "TransformError",
    "VerificationError",
    "bool_",
    "check_grads",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "stop_gradient",
    "value_and_grad",
    "vjp",
    "vmap",
    "compile",
    "cond",
    "fori_loop",
    "scan",
    "while_loop",
    "float32",
    "float64",
    "int32",
    "int64",
    "nn",
    "numpy",
    "random",
]
