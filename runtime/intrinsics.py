"""LLVM intrinsics that generated CPU kernels and drivers call by name.

``fmuladd(a, b, c)`` is ``a * b + c`` as a multiply and an add that LLVM may contract (the
``contract`` fast-math flag on both, as ``llvm.fmuladd``): one fused multiply-add (one rounding)
where the target has FMA units, a multiply and an add otherwise. Numba never contracts
``a * b + c`` by itself (that needs ``fastmath={"contract"}`` on the whole kernel, which would also
change the rounding of the user's own arithmetic against NumPy's), so the polynomials of the float32
math helpers (``compiler/prims/vecmath.py``) call this for each Horner step: their error bounds hold
either way (a fused step rounds once instead of twice), and on an FMA machine the vectorized
``tanh`` takes 0.59 instead of 0.77 ns per element on the 2-core CI machine (AVX2;
benchmarks/results/notes.md, float32 math helpers).

``call_kernel(address, "f4:2,i8", a, n)`` calls the Numba-compiled kernel whose native entry point
is at ``address`` (a run-time integer) with the arguments ``a, n``, in Numba's calling convention,
and raises what the kernel raises. The driver of a generated module calls its kernels this way
instead of by name: a call by name makes Numba link the kernel's LLVM module into the driver's and
generate machine code for all of it again, in one process (``runtime/precompile.py`` builds the
table of addresses; ``python benchmarks/compile_phases.py`` times a cold first call's phases).
The string literal is the signature the address was compiled for (``signature_string``:
``dtype:ndim`` per C-contiguous array, ``dtype`` per scalar); the call does not type if the
arguments passed differ, so a driver and its table cannot disagree on the ABI.

``buffer_view(base, offset, shape, np.float32)`` is the C-contiguous array of that shape and type
whose data starts ``offset`` bytes into the C-contiguous array ``base`` (the arena, or a donated
argument), sharing ``base``'s memory: what ``base.reshape(-1).view(np.uint8)[offset:...].view(
np.float32).reshape(shape)`` gives, built directly. Numba lowers ``.view`` by compiling a helper per
call site, which made the views a large part of the driver's compile.

Under ``NUMBA_DISABLE_JIT`` (modules run as plain Python) ``fmuladd_function`` gives the unfused
NumPy expression instead, ``call_kernel_function`` a call of the Python function the table then holds
in place of the address, and ``buffer_view_function`` the NumPy view.
"""

from __future__ import annotations

import math
import types as types_module
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.callconv import excinfo_t
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic


@intrinsic
def fmuladd(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` for three floats of one type, fused where the target has FMA."""
    if not isinstance(a, types.Float) or not (a == b == c):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        # ``contract`` on both instructions lets the backend fuse them; the loop vectorizer's cost
        # model sees a plain multiply and add (an ``llvm.fmuladd`` call made it interleave less).
        product = builder.fmul(args[0], args[1], flags=("contract",))
        return builder.fadd(product, args[2], flags=("contract",))

    return a(a, b, c), codegen


def fmuladd_python(a: Any, b: Any, c: Any) -> Any:
    return a * b + c


def fmuladd_function() -> Any:
    """What a generated module binds as ``fma``: the intrinsic, or NumPy when Numba's JIT is off."""
    return fmuladd_python if numba.config.DISABLE_JIT else fmuladd  # type: ignore[attr-defined]


FLAT = -1  # a signature's ndim for "any C-contiguous array, passed as its flat 1-D view"


def signature_string(signature: Any) -> str:
    """``"f4:2,f4:*,i8"``: per argument, a C-contiguous array's ``dtype:ndim`` (``*`` for ``FLAT``)
    or a scalar's ``dtype`` (``ndim`` None), dtypes as NumPy's type codes."""
    import numpy as np

    def rank(ndim: int | None) -> str:
        return "" if ndim is None else ":*" if ndim == FLAT else f":{ndim}"

    return ",".join(np.dtype(dtype).str[1:] + rank(ndim) for dtype, ndim in signature)


def _matches(expected: str, t: Any) -> bool:
    """Whether a typed argument is what one entry of a signature string asks for."""
    dtype, _, rank = expected.partition(":")
    if isinstance(t, types.Array):
        ok_rank = rank == "*" or rank == str(t.ndim)
        return t.layout == "C" and ok_rank and numba.np.numpy_support.as_dtype(t.dtype).str[1:] == dtype
    if isinstance(t, (types.Number, types.Boolean)):
        return not rank and numba.np.numpy_support.as_dtype(t).str[1:] == dtype
    return False


def _flat_view(context: Any, builder: Any, t: Any, value: Any) -> Any:
    """The 1-D view of a C-contiguous array value, over the same data (borrowed: no reference)."""
    flat_type = types.Array(t.dtype, 1, "C")
    source = context.make_array(t)(context, builder, value=value)
    out = context.make_array(flat_type)(context, builder)
    context.populate_array(
        out,
        data=source.data,
        shape=[source.nitems],
        strides=[source.itemsize],
        itemsize=source.itemsize,
        meminfo=source.meminfo,
        parent=source.parent,
    )
    return out._getvalue()


@intrinsic(prefer_literal=True)
def call_kernel(typingctx: Any, address: Any, signature: Any, *args: Any) -> Any:
    """Call the native kernel at ``address`` (compiled for ``signature``) with ``args``; an array
    whose entry is ``dtype:*`` is passed as its flat 1-D view."""
    if len(args) == 1 and isinstance(args[0], types.StarArgTuple):
        args = tuple(args[0].types)
    if not isinstance(address, types.Integer) or not isinstance(signature, types.StringLiteral):
        return None
    argtys = tuple(types.unliteral(t) for t in args)  # literal sizes pass as their plain types
    expected = signature.literal_value.split(",") if signature.literal_value else []
    if len(expected) != len(argtys) or not all(_matches(e, t) for e, t in zip(expected, argtys)):
        return None  # typing fails: the table's entry was compiled for other arguments
    flat = [e.endswith(":*") for e in expected]
    calltys = tuple(types.Array(t.dtype, 1, "C") if f else t for f, t in zip(flat, argtys))

    def codegen(context: Any, builder: Any, sig: Any, llargs: Any) -> Any:
        conv = context.call_conv
        values = cgutils.unpack_tuple(builder, llargs[2], len(argtys))
        values = [_flat_view(context, builder, t, v) if f else v for f, t, v in zip(flat, argtys, values)]
        callee = builder.inttoptr(llargs[0], conv.get_function_type(types.none, calltys).as_pointer())
        retty = conv.get_return_type(types.none).pointee
        ret = cgutils.alloca_once(builder, retty)
        builder.store(cgutils.get_null_value(retty), ret)
        excinfo = cgutils.alloca_once(builder, ir.PointerType(excinfo_t), name="excinfo")
        packed = conv._get_arg_packer(calltys).as_arguments(builder, values)
        code = builder.call(callee, [ret, excinfo, *packed])
        status = conv._get_return_status(builder, code, builder.load(excinfo))
        with cgutils.if_unlikely(builder, status.is_error):  # what Numba does after a call by name
            conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(address, signature, types.StarArgTuple(argtys)), codegen


def call_kernel_python(kernel: Any, signature: str, *args: Any) -> None:
    """``call_kernel`` as plain Python: the table holds the kernel itself; ``dtype:*`` arrays flat."""
    flat = [entry.endswith(":*") for entry in signature.split(",")] if signature else []
    kernel(*(a.reshape(-1) if f else a for f, a in zip(flat, args, strict=True)))


@numba.njit(nogil=True, cache=True)
def copy_flat(dst: Any, src: Any) -> None:  # pragma: no cover - compiled
    """``dst[:] = src`` for two 1-D arrays of one size: a loop's carries, copied by the driver. A
    call: Numba compiles a slice assignment of two ``buffer_view``s in a driver in about 12 s each
    (its overlap checks and broadcasting, typed for every view), this loop once per dtype."""
    for k in range(dst.shape[0]):
        dst[k] = src[k]


def call_kernel_function() -> Any:
    """What a generated module binds as ``call_kernel``: the intrinsic, or a plain call of the table's
    Python function when Numba's JIT is off."""
    return call_kernel_python if numba.config.DISABLE_JIT else call_kernel  # type: ignore[attr-defined]


def _view_type(shape: Any, dtype: Any) -> tuple[Any, list[Any]] | None:
    """The array type of a view of ``shape`` (a tuple of integers) and ``dtype``, and the shape's
    element types; None if they are not that."""
    extents = list(getattr(shape, "types", [None])) if isinstance(shape, types.BaseTuple) else [None]
    if not all(isinstance(t, types.Integer) for t in extents):
        return None
    if not isinstance(dtype, (types.NumberClass, types.DType)):
        return None
    return types.Array(dtype.dtype, len(extents), "C"), extents


def _contiguous(context: Any, builder: Any, result: Any, at: Any, meminfo: Any, parent: Any) -> Any:
    """The C-contiguous array value of type ``result`` whose data starts at the byte pointer
    ``at[0]``, its shape the tuple value ``at[1]`` (of the integer types ``at[2]``)."""
    start, shape, extents = at
    out = context.make_array(result)(context, builder)
    intp = context.get_value_type(types.intp)
    itemsize = numba.np.numpy_support.as_dtype(result.dtype).itemsize  # (LLVM's ABI query is slow)
    given = cgutils.unpack_tuple(builder, shape, result.ndim)
    dims = [context.cast(builder, given[k], extents[k], types.intp) for k in range(result.ndim)]
    strides: list[Any] = []
    step = ir.Constant(intp, itemsize)
    for d in reversed(dims):
        strides.insert(0, step)
        step = builder.mul(step, d)
    context.populate_array(
        out,
        data=builder.bitcast(start, out.data.type),
        shape=dims,
        strides=strides,
        itemsize=ir.Constant(intp, itemsize),
        meminfo=meminfo,
        parent=parent,
    )
    return out._getvalue()


@intrinsic
def buffer_view(typingctx: Any, base: Any, offset: Any, shape: Any, dtype: Any) -> Any:
    """A C-contiguous ``dtype`` array of ``shape`` over ``base``'s memory from byte ``offset``."""
    if not isinstance(base, types.Array) or base.layout != "C" or not isinstance(offset, types.Integer):
        return None
    typed = _view_type(shape, dtype)
    if typed is None:
        return None
    result, extents = typed

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        source = context.make_array(base)(context, builder, value=args[0])
        start = builder.gep(builder.bitcast(source.data, ir.IntType(8).as_pointer()), [args[1]])
        view = _contiguous(context, builder, result, (start, args[2], extents), source.meminfo, source.parent)
        return impl_ret_borrowed(context, builder, result, view)

    return result(base, offset, shape, dtype), codegen


def buffer_view_python(base: Any, offset: int, shape: tuple[int, ...], dtype: Any) -> Any:
    import numpy as np

    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return base.reshape(-1).view(np.uint8)[offset : offset + size].view(dtype).reshape(shape)


def buffer_view_function() -> Any:
    """What a generated module binds as ``buffer_view``: the intrinsic, or NumPy when the JIT is off."""
    return buffer_view_python if numba.config.DISABLE_JIT else buffer_view  # type: ignore[attr-defined]


@intrinsic
def data_address(typingctx: Any, array: Any) -> Any:
    """The address of ``array``'s first element, as a ``uint64`` (what ``array_at`` takes back)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _address(context, builder, array, args[0])

    return types.uint64(array), codegen


def _address(context: Any, builder: Any, array_type: Any, value: Any) -> Any:
    """The data address of the array ``value`` (of ``array_type``), as a 64-bit integer."""
    return builder.ptrtoint(
        context.make_array(array_type)(context, builder, value=value).data, ir.IntType(64)
    )


@intrinsic
def array_at(typingctx: Any, address: Any, shape: Any, dtype: Any) -> Any:
    """The C-contiguous ``dtype`` array of ``shape`` whose data is at ``address`` (an integer from
    ``data_address``): a view that owns nothing, valid while the array it came from lives."""
    typed = _view_type(shape, dtype)
    if not isinstance(address, types.Integer) or typed is None:
        return None
    result, extents = typed

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        start = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return _contiguous(context, builder, result, (start, args[1], extents), None, None)

    return result(address, shape, dtype), codegen


@intrinsic
def keep_alive(typingctx: Any, array: Any) -> Any:
    """Nothing, at run time; a use of ``array`` at this point of the code, so Numba frees it no
    earlier. A kernel calls it after ``parallel_for`` on each scratch array only its chunks use:
    they reach it by address, which Numba does not see, and it would free the array after its last
    use it does see (the ``fill_frame``), before the chunks run."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return context.get_dummy_value()

    return types.none(array), codegen


@intrinsic
def fill_frame(typingctx: Any, frame: Any, *arrays: Any) -> Any:
    """``frame[k] = data_address(arrays[k])`` for each array: the frame a chunk function reads (one
    call, so the kernel or driver that calls ``parallel_for`` stays short to compile)."""
    if len(arrays) == 1 and isinstance(arrays[0], types.StarArgTuple):
        arrays = tuple(arrays[0].types)
    ok = isinstance(frame, types.Array) and frame.dtype == types.uint64 and frame.ndim == 1
    if not ok or not arrays or not all(isinstance(a, types.Array) for a in arrays):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        slots = context.make_array(frame)(context, builder, value=args[0]).data
        values = cgutils.unpack_tuple(builder, args[1], len(arrays))
        for k, (array, value) in enumerate(zip(arrays, values)):
            at = builder.gep(slots, [ir.Constant(ir.IntType(64), k)])
            builder.store(_address(context, builder, array, value), at)
        return context.get_dummy_value()

    return types.none(frame, types.StarArgTuple(arrays)), codegen


def keep_alive_python(array: Any) -> None:
    pass


def fill_frame_python(frame: Any, *arrays: Any) -> None:
    for k, array in enumerate(arrays):
        frame[k] = data_address_python(array)


def data_address_python(array: Any) -> int:
    return int(array.ctypes.data)


def array_at_python(address: int, shape: tuple[int, ...], dtype: Any) -> Any:
    import ctypes
    import math

    import numpy as np

    count = math.prod(shape)
    memory = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(int(address))
    return np.frombuffer(memory, dtype, count).reshape(shape)


def frame_functions() -> tuple[Any, Any, Any]:
    """What a generated module binds as ``array_at``, ``keep_alive`` and ``fill_frame``: the
    intrinsics, or their plain-Python forms when Numba's JIT is off."""
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        return array_at_python, keep_alive_python, fill_frame_python
    return array_at, keep_alive, fill_frame


def _quiet(ufunc: Any) -> Any:
    def call(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return ufunc(*args)

    return call


def math_module() -> Any:
    """What a generated module binds as ``math``: the module itself, which Numba compiles to the
    libm calls (NaN outside a function's domain, inf at a pole), or, when the JIT is off, the same
    names computing what the compiled code computes. Python's own ``math`` raises "math domain
    error" at ``sin(inf)`` or ``log(-1)`` where the compiled module gives NaN."""
    if not numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        return math
    from scipy import special

    names = {name: getattr(math, name) for name in dir(math) if not name.startswith("_")}
    ufuncs = {
        "copysign": np.copysign,
        "erf": special.erf,
        "erfc": special.erfc,
        "floor": np.floor,
        "fmod": np.fmod,
    }
    for name in ("sin", "cos", "tan", "exp", "expm1", "log", "log1p", "sqrt", "tanh", "atan", "asin", "acos"):
        ufuncs[name] = getattr(np, {"atan": "arctan", "asin": "arcsin", "acos": "arccos"}.get(name, name))
    for name in ("sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "atan2", "hypot"):
        ufuncs[name] = getattr(np, name)  # NumPy 2's names (asinh: arcsinh; atan2: arctan2)
    names.update({name: _quiet(ufunc) for name, ufunc in ufuncs.items()})
    return types_module.SimpleNamespace(**names)
