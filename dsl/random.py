"""Random numbers (``dsl.random``): JAX's counter-based Threefry-2x32 generator, with JAX's bits.

A key is an array of two integers, the two unsigned 32-bit words of JAX's ``key_data`` held in
``int64`` (the IR has no unsigned types): ``key(0)`` is ``[0, 0]``. Keys are values like any other:
pass them to a compiled function as arguments and split them for each use, as in JAX::

    key = dsl.random.key(0)
    key, sub = dsl.random.split(key)       # a concrete key splits at once, in NumPy
    loss = step(params, x, sub)            # inside: dsl.random.normal(sub, (128, 64)), dropout ...

Every draw is a function of the key and of each element's position only (the primitive
``random_bits``, compiler/prims/random.py), so the same key gives the same numbers on the CPU and on
CUDA, in any order, and a draw fuses into the kernel that reads it: ``dsl.nn.dropout`` costs no
pass over memory and its backward recomputes the mask instead of storing it.

The numbers are JAX's (the default PRNG ``threefry2x32`` with ``jax_threefry_partitionable``, its
default since JAX 0.5; checked against JAX 0.10.2), bit for bit for ``key``, ``split``, ``fold_in``,
``bits``, ``uniform`` on [0, 1), ``bernoulli`` and ``dropout`` (as Flax's
``Dropout``). ``uniform`` over another range scales with a multiply and an add, each rounded (XLA
fuses the two: an ulp apart at most); ``normal`` is JAX's transform, ``sqrt(2) * erfinv(u)`` with
XLA's polynomials for ``erfinv``, to within a few ulp: its uniforms are JAX's bit for bit, but XLA's
CPU code evaluates the polynomials (and its log1p's Cephes rational) with fused multiply-adds and
calls its own ``log`` (glibc's for float64; its own polynomial for float32), so ``erfinv`` differs in
the last bits (5% of float32 draws by at most 3 ulp, 11% of float64 ones by at most 30 ulp, measured
with JAX 0.10.2 on an AVX-512 host; with JAX's log1p and exact FMAs these polynomials give its bits
exactly). Matching them needs an exact ``fma`` primitive and XLA's ``log``; JAX's own normals differ
between its CPU and GPU backends for the same reason. dslc's do not: ``log1p`` is
``compiler/prims/exactmath.py``'s on both targets, and every float product rounds before the sum
that reads it on CUDA too (no fused multiply-add), so every draw has the same bits on the CPU and
on CUDA (tests/cuda_sim/sim_random.py, tests/test_cuda_ptx.py). Seeds are 64-bit:
``key(seed)`` is ``[seed >> 32, seed & 0xFFFFFFFF]`` as JAX computes it under ``jax_enable_x64``
(seeds in [0, 2**31) give the same key either way). A Python float ``p`` for ``bernoulli``
compares with float32 uniforms, as JAX's default does.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from compiler.ir.types import DType
from compiler.prims import elementwise as ew
from compiler.prims.random import KEY_TYPE, random_bits, random_bits_reference, threefry2x32_bits
from dsl import numpy as dnp
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import ShapeError

_WORD = 0xFFFFFFFF  # the low 32 bits
_MANTISSA = {DType.f32: 23, DType.f64: 52}  # explicit mantissa bits

Key = Any  # an (2,) integer array: a NumPy array or a traced one


def key(seed: Any) -> Key:
    """A key from an integer seed: a NumPy ``int64`` array ``[seed >> 32, seed & 0xFFFFFFFF]`` for a
    Python or NumPy integer, a traced one for a traced integer scalar; a seed of fewer than 64 bits
    (``np.int32(-5)``) is ``[0, seed & 0xFFFFFFFF]``, as JAX's."""
    if isinstance(seed, Array):
        if not seed.ir_dtype.is_int or seed.shape:
            raise tracing.user_error(ShapeError, f"a key's seed must be an integer scalar, got {seed}")
        narrow = seed.ir_dtype.np.itemsize < 8
        seed = ops.cast(seed, DType.i64)
        high = dnp.zeros_like(seed) if narrow else _word(ops.binary(ew.shift_right, seed, 32))
        return dnp.stack([high, _word(seed)])
    s = operator.index(seed)
    if isinstance(seed, np.integer) and seed.dtype.itemsize < 8:
        return np.array([0, s & _WORD], np.int64)  # JAX's: a 32-bit seed has no high word
    return np.array([(s >> 32) & _WORD, s & _WORD], np.int64)


def split(key: Key, num: int = 2) -> Key:
    """``num`` new keys, as an array of shape ``(num, 2)`` (``k1, k2 = split(key)``): key ``i`` is
    the two Threefry words of counter ``i``, as JAX's ``split``. Concrete keys split in NumPy."""
    num = operator.index(num)
    if not isinstance(key, Array):
        words = random_bits_reference(_concrete_key(key), (num,)).view(np.uint64)
        return np.stack([words >> np.uint64(32), words & np.uint64(_WORD)], axis=1).astype(np.int64)
    wide = _random_bits(key, (num,))
    return dnp.stack([_word(ops.binary(ew.shift_right, wide, 32)), _word(wide)], axis=1)


def fold_in(key: Key, data: Any) -> Key:
    """A new key from ``key`` and an integer ``data`` (JAX's ``fold_in``: ``fold_in(key, step)``
    draws per step in a loop): the two Threefry words of the counter ``data`` (its low 32 bits, as
    JAX's ``uint32`` conversion) under ``key``. A concrete key and integer fold in Python; a traced
    key or ``data`` (a loop counter) traces the same Threefry text (``threefry2x32_bits``) as
    integer ops; keys of shape ``(..., 2)`` fold each."""
    if not isinstance(key, Array) and not isinstance(data, Array):
        words = _concrete_key(key)
        wide = threefry2x32_bits(int(words[0]), int(words[1]), operator.index(data) & _WORD)
        return np.array([(wide >> 32) & _WORD, wide & _WORD], np.int64)
    k = ops.asarray(key)
    if k.shape[-1:] != KEY_TYPE.shape or not k.ir_dtype.is_int:
        raise tracing.user_error(
            ShapeError, f"a key is an integer array of shape (2,) (dsl.random.key), got {k.ir_dtype}{k.shape}"
        )
    n = ops.asarray(data)
    if n.shape or not n.ir_dtype.is_int:
        raise tracing.user_error(
            ShapeError, f"fold_in: data must be an integer scalar, got {n.ir_dtype}{n.shape}"
        )
    k = ops.cast(k, DType.i64)
    wide = threefry2x32_bits(k[..., 0], k[..., 1], _word(ops.cast(n, DType.i64)))
    return dnp.stack([_word(ops.binary(ew.shift_right, wide, 32)), _word(wide)], axis=-1)


def bits(key: Key, shape: Any = ()) -> Array:
    """32 random bits per element, as ``int64`` in [0, 2**32) (JAX's ``bits`` as ``uint32``)."""
    b = _random_bits(key, _shape(shape))
    return ops.binary(ew.xor, _word(ops.binary(ew.shift_right, b, 32)), _word(b))


def uniform(
    key: Key, shape: Any = (), dtype: Any = np.float32, minval: Any = 0.0, maxval: Any = 1.0
) -> Array:
    """Floats in ``[minval, maxval)``: random mantissa bits of a number in [1, 2), minus 1, scaled
    (JAX's construction: 23 of 32 bits for float32, 52 of 64 for float64)."""
    shape, d = _shape(shape), _float_dtype(dtype, "uniform")
    minval, maxval = ops.to_dtype(ops.asarray(minval), d), ops.to_dtype(ops.asarray(maxval), d)
    nmant = _MANTISSA[d]
    if d is DType.f32:
        mantissa = ops.binary(ew.shift_right, bits(key, shape), 32 - nmant)
    else:  # the 64 bits as a signed int: shift, then drop the copies of the sign bit
        mantissa = ops.binary(
            ew.and_, ops.binary(ew.shift_right, _random_bits(key, shape), 64 - nmant), 2**52 - 1
        )
    floats = dnp.multiply(ops.cast(mantissa, d), 2.0**-nmant)  # exact: (1 + m * 2**-n) - 1
    return dnp.maximum(minval, dnp.add(dnp.multiply(floats, dnp.subtract(maxval, minval)), minval))


def normal(key: Key, shape: Any = (), dtype: Any = np.float32) -> Array:
    """Standard normal samples: ``sqrt(2) * erfinv(u)`` for ``u`` uniform in (-1, 1), as JAX."""
    shape, d = _shape(shape), _float_dtype(dtype, "normal")
    lo = np.nextafter(np.array(-1.0, d.np), np.array(0.0, d.np))
    u = uniform(key, shape, d.np, lo, 1.0)
    return dnp.multiply(ops.constant(np.array(np.sqrt(2), d.np)), _erf_inv(u))


def bernoulli(key: Key, p: Any = 0.5, shape: Any = None) -> Array:
    """``True`` with probability ``p`` (a float or an array broadcast to ``shape``; ``shape`` defaults
    to ``p``'s): ``uniform(key, shape) < p`` in ``p``'s dtype, float32 for a Python float."""
    weak = isinstance(p, (int, float)) and not isinstance(p, np.generic)  # np.float64(0.3): float64
    p = ops.constant(np.float32(p)) if weak else ops.asarray(p)
    if not p.ir_dtype.is_float:
        raise tracing.user_error(ShapeError, f"bernoulli: p must be floating-point, got {p.ir_dtype}")
    shape = p.shape if shape is None else _shape(shape)
    if ops.broadcast_shapes(p.shape, shape) != shape:
        raise tracing.user_error(ShapeError, f"bernoulli: p of shape {p.shape} does not broadcast to {shape}")
    return dnp.less(uniform(key, shape, p.ir_dtype.np), p)


def dropout(key: Key, x: Any, rate: float) -> Array:
    """Zero each element of ``x`` with probability ``rate`` and scale the kept ones by
    ``1 / (1 - rate)`` (Flax's ``Dropout``: the same mask for the same key). The gradient flows
    through ``x`` (the mask is a constant of it); the mask is recomputed, never stored."""
    x = ops.asarray(x)
    if not 0.0 <= rate <= 1.0:
        raise tracing.user_error(ShapeError, f"dropout: rate must be in [0, 1], got {rate}")
    if rate == 0.0:
        return x
    if rate == 1.0:
        return dnp.zeros_like(x)
    keep_prob = 1.0 - rate
    keep = bernoulli(key, keep_prob, x.shape)
    return dnp.where(keep, dnp.divide(x, keep_prob), dnp.zeros_like(x))


# ---- helpers -----------------------------------------------------------------------------------


def _random_bits(key: Key, shape: tuple[int, ...]) -> Array:
    """The primitive: 64 random bits per element (as ``int64``) from a (2,) integer key."""
    k = ops.asarray(key)
    if k.shape != KEY_TYPE.shape or not k.ir_dtype.is_int:
        raise tracing.user_error(
            ShapeError, f"a key is an integer array of shape (2,) (dsl.random.key), got {k.ir_dtype}{k.shape}"
        )
    return ops.emit(random_bits, [ops.cast(k, DType.i64)], {"shape": shape})


def _word(x: Array) -> Array:
    return ops.binary(ew.and_, x, _WORD)


def _concrete_key(key: Any) -> np.ndarray:
    k = np.asarray(key)
    if k.shape != KEY_TYPE.shape or k.dtype.kind not in "iu":
        raise ShapeError(f"a key is an integer array of shape (2,) (dsl.random.key), got {k.dtype}{k.shape}")
    return k.astype(np.int64)


def _shape(shape: Any) -> tuple[int, ...]:
    return (operator.index(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def _float_dtype(dtype: Any, what: str) -> DType:
    d = ops.ir_dtype(dtype)
    if not d.is_float:
        raise tracing.user_error(ShapeError, f"{what} draws floating-point numbers, not {np.dtype(dtype)}")
    return d


# XLA's erf_inv (Giles, "Approximating the erfinv function"): polynomials in w = -log1p(-x*x),
# coefficients highest degree first. Float32: two pieces, split at w = 5.
_ERF_INV_F32 = (
    (5.0, 2.5, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)),
    (math.inf, 3.0, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)),
)  # fmt: skip
# Float64: three pieces (w < 6.25, < 16, else) of degrees 22, 18 and 16.
_ERF_INV_F64 = (
    (6.25, 3.125, (
        -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
        1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
        6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693, 1.6536545626831027356)),
    (16.0, 3.25, (
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
        3.0838856104922207635)),
    (math.inf, 5.0, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221)),
)  # fmt: skip


def _erf_inv(x: Array) -> Array:
    """``erfinv`` for |x| <= 1 (infinite at +-1), piece by piece as XLA evaluates it: each piece's
    polynomial in ``w - shift`` (the first piece) or ``sqrt(w) - shift`` (the others), chosen by
    ``w``. Every piece is evaluated and the right one selected, so the code is branch-free."""
    pieces = _ERF_INV_F32 if x.ir_dtype is DType.f32 else _ERF_INV_F64
    w = dnp.negative(dnp.log1p(dnp.multiply(x, dnp.negative(x))))
    result = None
    for k in reversed(range(len(pieces))):
        bound, shift, coefficients = pieces[k]
        t = dnp.subtract(w if k == 0 else dnp.sqrt(w), shift)
        p = ops.to_dtype(ops.asarray(coefficients[0]), x.ir_dtype)
        for c in coefficients[1:]:
            p = dnp.add(c, dnp.multiply(p, t))
        result = p if result is None else dnp.where(dnp.less(w, bound), p, result)
    assert result is not None
    return dnp.where(dnp.equal(dnp.abs(x), 1.0), dnp.multiply(x, math.inf), dnp.multiply(result, x))
