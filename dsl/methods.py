"""Operators and methods of the traced ``Array``: NumPy's, plus Paddle/PyTorch-style in-place ones.

In-place methods (``add_``, ``x += y``, ``x[i] = v`` ...) compute the new value out of place, check
that it fits the array (no broadcasting the target, NumPy's ``same_kind`` casting rule), write it
through ``Array.write`` and return the array itself, so ``x.scale_(2.0) is x``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import numpy as np

from dsl import gather, nn, numpy_missing, ops, tracing
from dsl import numpy as dnp
from dsl.array import Array
from dsl.binding import CallError
from dsl.errors import DTypeError, MissingError, ShapeError, TraceError


def _inplace(request: str, compute: Callable[..., Any], casting: str = "same_kind") -> Callable[..., Array]:
    def method(self: Array, *args: Any, **kwargs: Any) -> Array:
        since = len(tracing.current().ops)
        new = ops.fit(ops.asarray(compute(self, *args, **kwargs)), self, casting, request)
        self.write(new.value, request, since)
        return self

    method.__name__ = request
    method.__doc__ = f"In place: ``x.{request}(...)`` stores the result in ``x`` and returns ``x``."
    return method


def _swap(f: Callable[[Any, Any], Array]) -> Callable[[Any, Any], Array]:
    return lambda self, other: f(other, self)


def _out_of_place(inplace: Callable[..., Array]) -> Callable[..., Array]:
    """PyTorch's out-of-place form of an in-place method (``index_add`` of ``index_add_``): it writes
    a fresh copy of ``x`` that only its result sees, so the write is no user request
    (``tracing.FUNCTIONAL_WRITES``)."""

    def method(x: Array, *args: Any, **kwargs: Any) -> Array:
        trace = tracing.current()
        before, trace.functional = trace.functional, True
        try:
            return inplace(ops.new_storage(x), *args, **kwargs)
        finally:
            trace.functional = before

    return method


def _scale(x: Array, scale: Any = 1.0, bias: Any = 0.0, bias_after_scale: bool = True) -> Array:
    """Paddle's ``scale_``: ``x * scale + bias`` (or ``(x + bias) * scale``)."""
    if isinstance(bias, (int, float)) and bias == 0:
        return dnp.multiply(x, scale)
    return (
        dnp.add(dnp.multiply(x, scale), bias) if bias_after_scale else dnp.multiply(dnp.add(x, bias), scale)
    )


def _fill(x: Array, value: Any) -> Array:
    return ops.broadcast_to(ops.to_dtype(ops.assigned(value, x.ir_dtype), x.ir_dtype), x.shape)


def _copy_from(x: Array, src: Any) -> Array:
    return ops.cast(ops.broadcast_to(src, x.shape), x.ir_dtype)  # like torch's copy_: any cast


BINARY = {
    "add": dnp.add,
    "sub": dnp.subtract,
    "mul": dnp.multiply,
    "truediv": dnp.divide,
    "floordiv": dnp.floor_divide,
    "mod": dnp.remainder,
    "pow": dnp.power,
    "matmul": dnp.matmul,
    "and": dnp.bitwise_and,
    "or": dnp.bitwise_or,
    "xor": dnp.bitwise_xor,
    "lshift": dnp.left_shift,
    "rshift": dnp.right_shift,
}
COMPARE = {
    "lt": dnp.less,
    "le": dnp.less_equal,
    "gt": dnp.greater,
    "ge": dnp.greater_equal,
    "eq": dnp.equal,
    "ne": dnp.not_equal,
}
AUGMENTED = {"iadd": ("+=", dnp.add), "isub": ("-=", dnp.subtract), "imul": ("*=", dnp.multiply)}
AUGMENTED["itruediv"] = ("/=", dnp.divide)
AUGMENTED["ifloordiv"] = ("//=", dnp.floor_divide)
AUGMENTED["imod"] = ("%=", dnp.remainder)
AUGMENTED["iand"] = ("&=", dnp.bitwise_and)
AUGMENTED["ior"] = ("|=", dnp.bitwise_or)
AUGMENTED["ixor"] = ("^=", dnp.bitwise_xor)
AUGMENTED["ilshift"] = ("<<=", dnp.left_shift)
AUGMENTED["irshift"] = (">>=", dnp.right_shift)
AUGMENTED["ipow"] = ("**=", dnp.power)
AUGMENTED["imatmul"] = ("@=", dnp.matmul)  # NumPy's: the product must keep x's shape (y square)


def _add_scaled(sign: int) -> Callable[..., Array]:
    """PyTorch's ``add(y, alpha=1)`` / ``sub(y, alpha=1)``: ``x + alpha * y`` / ``x - alpha * y``."""

    def compute(x: Array, y: Any, alpha: Any = 1) -> Array:
        term = y if isinstance(alpha, (int, float)) and alpha == 1 else dnp.multiply(y, alpha)
        return dnp.add(x, term) if sign > 0 else dnp.subtract(x, term)

    return compute


def _rsqrt(x: Any) -> Array:
    return dnp.reciprocal(dnp.sqrt(x))


def _frac(x: Any) -> Array:
    """PyTorch's ``frac``: ``x - trunc(x)`` (the sign of ``x``)."""
    return dnp.subtract(x, dnp.trunc(x))


def _round(x: Any, decimals: int = 0) -> Array:
    return dnp.round(x, decimals)


def _divide(x: Any, y: Any, rounding_mode: str | None = None) -> Array:
    """PyTorch's ``div``: true division, or with ``rounding_mode`` ``"floor"`` (``//``, NumPy's
    ``floor_divide``) or ``"trunc"`` (toward zero: C's integer division, ``trunc(x / y)`` for floats)."""
    if rounding_mode is None:
        return dnp.divide(x, y)
    if rounding_mode == "floor":
        return dnp.floor_divide(x, y)
    if rounding_mode == "trunc":
        if ops.result_dtype(x, y).is_float:
            return dnp.trunc(dnp.divide(x, y))
        return dnp.floor_divide(dnp.subtract(x, dnp.fmod(x, y)), y)  # exact: y divides x - fmod(x, y)
    raise tracing.user_error(
        CallError, f"div: rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}"
    )


# Each computes the new value; ``_inplace`` checks it fits and writes it (NumPy's same_kind casting:
# a bool result, from a comparison or a logical op, is stored as 0 and 1 in a numeric array).
INPLACE: dict[str, Callable[..., Array]] = {
    "add_": _add_scaled(1),
    "sub_": _add_scaled(-1),
    "subtract_": _add_scaled(-1),  # PyTorch's subtract takes alpha too
    "mul_": dnp.multiply,
    "multiply_": dnp.multiply,
    "div_": _divide,
    "divide_": _divide,
    "floor_divide_": dnp.floor_divide,
    "remainder_": dnp.remainder,
    "mod_": dnp.remainder,
    "pow_": dnp.power,
    "exp_": dnp.exp,
    "expm1_": dnp.expm1,
    "log_": dnp.log,
    "log1p_": dnp.log1p,
    "sqrt_": dnp.sqrt,
    "rsqrt_": _rsqrt,
    "reciprocal_": dnp.reciprocal,
    "square_": dnp.square,
    "sin_": dnp.sin,
    "cos_": dnp.cos,
    "tan_": dnp.tan,
    "tanh_": dnp.tanh,
    "abs_": dnp.abs,
    "neg_": dnp.negative,
    "negative_": dnp.negative,
    "sign_": dnp.sign,
    "floor_": dnp.floor,
    "ceil_": dnp.ceil,
    "trunc_": dnp.trunc,
    "frac_": _frac,
    "round_": _round,
    "relu_": nn.relu,
    "sigmoid_": nn.sigmoid,
    "clip_": dnp.clip,
    "clamp_": dnp.clip,
    "nan_to_num_": dnp.nan_to_num,
    "tril_": dnp.tril,
    "cumsum_": dnp.cumsum,
    "cumprod_": dnp.cumprod,
    "triu_": dnp.triu,
    "scale_": _scale,
    "zero_": lambda x: _fill(x, 0),
    "fill_": _fill,
    "logical_and_": dnp.logical_and,
    "logical_or_": dnp.logical_or,
    "logical_xor_": dnp.logical_xor,
    "logical_not_": dnp.logical_not,
    "bitwise_and_": dnp.bitwise_and,
    "bitwise_or_": dnp.bitwise_or,
    "bitwise_xor_": dnp.bitwise_xor,
    "bitwise_not_": dnp.invert,
    # comparisons in place (PyTorch's and Paddle's names): 1 where true, 0 elsewhere, in x's dtype
    "eq_": dnp.equal,
    "ne_": dnp.not_equal,
    "lt_": dnp.less,
    "le_": dnp.less_equal,
    "gt_": dnp.greater,
    "ge_": dnp.greater_equal,
    "equal_": dnp.equal,
    "not_equal_": dnp.not_equal,
    "less_than_": dnp.less,
    "less_equal_": dnp.less_equal,
    "greater_than_": dnp.greater,
    "greater_equal_": dnp.greater_equal,
    "masked_fill_": gather.masked_fill,
}

# NumPy ufuncs and functions called on traced arrays dispatch to dsl.numpy by name.
_UFUNC_NAMES = {"true_divide": "divide", "absolute": "abs"}


def _not_on_traced(name: str, namespace: Any, label: str) -> TraceError:
    why = numpy_missing.message(name, label, vars(namespace))
    return tracing.user_error(  # type: ignore[return-value]
        TraceError, f"numpy.{name} is not supported on traced arrays: {why}"
    )


_UFUNC_METHODS = {
    "reduce": {
        "add": "sum",
        "multiply": "prod",
        "maximum": "max",
        "minimum": "min",
        "logical_and": "all",
        "logical_or": "any",
    },
    "accumulate": {"add": "cumsum", "multiply": "cumprod"},
}


def _array_ufunc(self: Array, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``np.exp(x, out=x)`` and the like: the ``dsl.numpy`` function of the ufunc's name, keywords and
    all (``dsl/numpy_keywords.py``); ``np.add.reduce(x)`` is ``sum`` (over axis 0 unless given),
    ``np.add.accumulate`` ``cumsum``, and so for the other ufuncs with a reduction in ``dsl.numpy``."""
    if method == "__call__":
        name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
        fn = getattr(dnp, name, None)
        if fn is None:
            raise _not_on_traced(ufunc.__name__, dnp, "dsl.numpy")
        return fn(*inputs, **kwargs)
    name = _UFUNC_METHODS.get(method, {}).get(ufunc.__name__, "")
    if not name or len(inputs) > 2:
        raise tracing.user_error(
            TraceError,
            f"numpy.{ufunc.__name__}.{method}(...) is not supported on traced arrays"
            + ("; pass the axis and other options by keyword" if name else "")
            + " (dsl.numpy has sum, prod, max, min, all, any, cumsum and cumprod)",
        )
    if len(inputs) == 1:
        kwargs.setdefault("axis", 0)  # a ufunc's reduce and accumulate default to the first axis
    return getattr(dnp, name)(*inputs, **kwargs)


def _array_function(self: Array, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    linalg = func.__module__ is not None and func.__module__.endswith("linalg")
    namespace, label = (dnp.linalg, "dsl.numpy.linalg") if linalg else (dnp, "dsl.numpy")
    fn = getattr(namespace, func.__name__, None)
    if fn is None:
        raise _not_on_traced(func.__name__, namespace, label)
    return fn(*args, **kwargs)


def install(cls: type[Array]) -> None:
    """Attach every operator and method to ``Array`` (called once when ``dsl.array`` loads)."""
    for name, f in BINARY.items():
        setattr(cls, f"__{name}__", f)
        setattr(cls, f"__r{name}__", _swap(f))
    setattr(cls, "__divmod__", dnp.divmod)  # noqa: B010 (a tuple result: not in BINARY's type)
    setattr(cls, "__rdivmod__", lambda x, y: dnp.divmod(y, x))  # noqa: B010
    for name, f in COMPARE.items():
        setattr(cls, f"__{name}__", f)
    for name, (request, op) in AUGMENTED.items():
        setattr(cls, f"__{name}__", _inplace(request, op))
    for name, compute in INPLACE.items():
        setattr(cls, name, _inplace(name, compute))
    for name, value in _plain_methods().items():
        setattr(cls, name, value)
    setattr(cls, "__getattr__", _missing_attribute)  # noqa: B010


def _missing_attribute(self: Array, name: str) -> Any:
    """``x.foo`` that ``Array`` lacks: a ``MissingError`` (an ``AttributeError``) at the user's line,
    with the close names it has (private and special names: the plain ``AttributeError``)."""
    if name.startswith("_"):
        raise AttributeError(f"'Array' object has no attribute {name!r}")
    close = difflib.get_close_matches(name, [n for n in dir(type(self)) if not n.startswith("_")], n=3)
    hint = f"; did you mean {', '.join(f'x.{c}' for c in close)}?" if close else " (see dir(x))"
    raise tracing.user_error(MissingError, f"a traced array has no attribute {name!r}{hint}")


def _reshape(self: Array, *shape: Any, order: str = "C") -> Array:
    return ops.reshape(self, shape[0] if len(shape) == 1 else shape, order)


def _transpose(self: Array, *axes: Any) -> Array:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = tuple(axes[0])
    return ops.transpose(self, axes or None)


def _positive(self: Array) -> Array:
    """``+x``: a new array in NumPy, not ``x``, laid out as a ufunc's result (bools have no loop)."""
    if self.ir_dtype.is_bool:
        raise tracing.user_error(DTypeError, "ufunc 'positive' did not contain a loop for bool values")
    return ops.new_storage(self, ops.ufunc_shadow([self]))


def _reducer(fn: Callable[..., Array]) -> Callable[..., Array]:
    def method(self: Array, axis: Any = None, keepdims: bool = False, **options: Any) -> Array:
        return fn(self, axis, keepdims, **options)  # sum's and mean's dtype=

    return method


def _rebinding(request: str, compute: Callable[..., Array]) -> Callable[..., Array]:
    """Paddle's shape-changing in-place methods (``reshape_``, ``squeeze_``, ``unsqueeze_``,
    ``flatten_``, ``transpose_``): ``x`` itself becomes the view ``compute`` makes of it (``x``'s
    storage, one more view step), so that writes through ``x`` still reach its base and every other
    view of that storage, as in Paddle. No element is written. A reshape NumPy could only make as a
    copy (of a transposed or strided ``x``) raises, as NumPy's ``x.shape = ...`` does."""

    def method(self: Array, *args: Any, **kwargs: Any) -> Array:
        view = compute(self, *args, **kwargs)
        if view._storage is not self._storage:
            raise tracing.user_error(
                ShapeError,
                f"{request}: incompatible shape for in-place modification: this array's elements are "
                f"not laid out as a view of shape {view.shape} needs (NumPy's x.shape = ... raises here "
                "too); use x = x.reshape(...), which copies",
            )
        self._steps, self._shadow, self._type = view._steps, view._shadow, view._type
        self._view_value, self._view_version = None, -1
        return self

    method.__name__ = request
    method.__doc__ = f"In place: ``x.{request}(...)`` gives ``x`` the new shape and returns ``x``."
    return method


def _unsqueeze(self: Array, axis: Any) -> Array:
    return dnp.expand_dims(self, axis)


def _flatten_view(self: Array, *args: Any, **kwargs: Any) -> Array:
    """The axes ``start`` to ``stop`` (inclusive) as one (PyTorch's and Paddle's flatten)."""
    start_axis, stop_axis = _flatten_axes(args, kwargs)
    if self.ndim == 0:
        return ops.reshape(self, (1,))
    (start,), (stop,) = ops.normalize_axes(start_axis, self.ndim), ops.normalize_axes(stop_axis, self.ndim)
    if start > stop:
        raise tracing.user_error(
            ShapeError, f"flatten: start axis {start_axis} comes after stop axis {stop_axis}"
        )
    return ops.reshape(self, self.shape[:start] + (-1,) + self.shape[stop + 1 :])


# the axes flatten joins, by Paddle's keywords and by PyTorch's
_FLATTEN_KEYWORDS = (("start_axis", "stop_axis"), ("start_dim", "end_dim"))


def _flatten_axes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``(start, stop)`` of ``x.flatten(start, stop)``, by position or by either library's keywords
    (one of them), 0 and -1 where not given."""
    names = next((pair for pair in _FLATTEN_KEYWORDS if kwargs.keys() & set(pair)), _FLATTEN_KEYWORDS[0])
    bound = dict(zip(names, args, strict=False))
    if len(args) > 2 or kwargs.keys() - set(names) or bound.keys() & kwargs.keys():
        given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        raise tracing.user_error(
            CallError,
            f"flatten({given}): takes the first and last axis to join, by position or as Paddle's "
            "start_axis=, stop_axis= or PyTorch's start_dim=, end_dim=",
        )
    bound.update(kwargs)
    return bound.get(names[0], 0), bound.get(names[1], -1)


def _flatten(self: Array, *args: Any, **kwargs: Any) -> Array:
    """NumPy's ``x.flatten(order='C')`` (a copy), or PyTorch's and Paddle's ``x.flatten(start, stop)``
    (axes ``start`` to ``stop`` as one; here a copy too, as NumPy's)."""
    if not ("order" in kwargs or (args and isinstance(args[0], str))):
        return ops.new_storage(_flatten_view(self, *args, **kwargs))
    order = kwargs["order"] if "order" in kwargs else args[0]
    if order not in ("C", "A", "K", "F") or len(args) + len(kwargs) != 1:
        raise tracing.user_error(
            ShapeError, f"flatten: order must be one of 'C', 'F', 'A' or 'K' (alone), not {order!r}"
        )
    return ops.new_storage(dnp.ravel(ops.transpose(self) if order == "F" else self))


def _permute(self: Array, *dims: Any) -> Array:
    return _transpose(self, *dims)


def _t(self: Array) -> Array:
    """PyTorch's ``x.t()``: the transpose of a matrix (a vector or scalar itself)."""
    if self.ndim > 2:
        raise tracing.user_error(ShapeError, f"t() expects an array of at most 2 dimensions, got {self.ndim}")
    return ops.transpose(self)


def _expand(self: Array, *shape: Any) -> Array:
    """PyTorch's ``x.expand(*sizes)``: a broadcast view; -1 keeps an axis's size."""
    sizes = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    lead = len(sizes) - self.ndim
    return dnp.broadcast_to(self, tuple(self.shape[i - lead] if d == -1 else d for i, d in enumerate(sizes)))


def _variance(fn: Callable[..., Array]) -> Callable[..., Array]:
    """``x.var()`` / ``x.std()``: NumPy's (``ddof=0`` by default); PyTorch's and Paddle's ``unbiased``
    (and ``dim``/``keepdim``) are accepted by name."""

    def method(
        self: Array,
        axis: Any = None,
        dtype: Any = None,
        ddof: float = 0,
        keepdims: bool = False,
        *,
        correction: float | None = None,
        unbiased: bool | None = None,
        dim: Any = None,
        keepdim: bool | None = None,
    ) -> Array:
        if unbiased is not None:
            ddof = 1 if unbiased else 0
        axis = dim if dim is not None else axis
        keepdims = keepdim if keepdim is not None else keepdims
        return fn(self, axis, dtype, ddof, keepdims, correction=correction)

    return method


def _fill_numpy(self: Array, value: Any) -> None:
    """NumPy's ``x.fill(value)``: in place, returning None."""
    self.fill_(value)  # type: ignore[attr-defined]


def _plain_methods() -> dict[str, Any]:
    return {
        "copy_": _inplace("copy_", _copy_from, casting="unsafe"),
        "__neg__": dnp.negative,
        "__pos__": _positive,
        "__abs__": dnp.abs,
        "__invert__": dnp.invert,
        "__array_ufunc__": _array_ufunc,
        "__array_function__": _array_function,
        "reshape": _reshape,
        "transpose": _transpose,
        "sum": _reducer(dnp.sum),
        "mean": _reducer(dnp.mean),
        "max": _reducer(dnp.max),
        "min": _reducer(dnp.min),
        "any": _reducer(dnp.any),
        "all": _reducer(dnp.all),
        "var": _variance(dnp.var),
        "std": _variance(dnp.std),
        "argmax": dnp.argmax,
        "argmin": dnp.argmin,
        "cumsum": dnp.cumsum,
        "cumprod": dnp.cumprod,
        "prod": dnp.prod,
        "astype": dnp.astype,
        "copy": ops.new_storage,
        # copy.copy(x) / copy.deepcopy(x): a new array, as NumPy's (Python's default copied the
        # object, sharing x's storage, and the tracer failed on it)
        "__copy__": ops.new_storage,
        "__deepcopy__": lambda x, memo=None: ops.new_storage(x),
        "clip": dnp.clip,
        "clamp": dnp.clip,
        "round": dnp.round,
        "__round__": lambda x, ndigits=None: dnp.round(x, 0 if ndigits is None else ndigits),
        "ravel": dnp.ravel,
        "repeat": dnp.repeat,  # NumPy's (each element repeated), not PyTorch's tiling
        "take": dnp.take,
        "diagonal": dnp.diagonal,
        "trace": dnp.trace,
        "flatten": _flatten,
        "squeeze": dnp.squeeze,
        "unsqueeze": _unsqueeze,
        "swapaxes": dnp.swapaxes,
        "permute": _permute,
        "t": _t,
        "expand": _expand,
        "flip": dnp.flip,
        "dot": dnp.dot,
        "norm": dnp.linalg.norm,
        "fill": _fill_numpy,
        "scale": _scale,
        "reshape_": _rebinding("reshape_", _reshape),
        "squeeze_": _rebinding("squeeze_", dnp.squeeze),
        "unsqueeze_": _rebinding("unsqueeze_", _unsqueeze),
        "flatten_": _rebinding("flatten_", _flatten_view),
        "transpose_": _rebinding("transpose_", _transpose),
        "t_": _rebinding("t_", _t),
        "index_add_": gather.index_add_,
        "scatter_": gather.scatter_,
        "index_add": _out_of_place(gather.index_add_),
        "scatter": _out_of_place(gather.scatter_),
        **{name: fn for name, fn in METHODS.items()},
    }


# The out-of-place forms of the in-place methods and the functions PyTorch and Paddle users call as
# methods: ``x.exp()``, ``x.add(y, alpha=2)``, ``x.logical_not()`` ...; each is its dsl.numpy function.
METHODS: dict[str, Callable[..., Array]] = {
    name.removesuffix("_"): fn
    for name, fn in INPLACE.items()
    if name not in ("zero_", "fill_", "clip_", "scale_", "round_", "cumsum_", "cumprod_")
}
METHODS.update(
    {
        "maximum": dnp.maximum,
        "minimum": dnp.minimum,
        "matmul": dnp.matmul,
        "logaddexp": dnp.logaddexp,
        "isnan": dnp.isnan,
        "isinf": dnp.isinf,
        "isfinite": dnp.isfinite,
        "softmax": nn.softmax,
        "log_softmax": nn.log_softmax,
        "logsumexp": nn.logsumexp,
    }
)
