"""Vectorizable float32 ``exp``, ``tanh`` and ``log`` for the CPU target.

Numba lowers ``math.exp`` and friends to one libm call per element (llvmlite's LLVM has no SVML
patch), which stops LLVM's loop vectorizer: ``exp`` over 4096x1000 f32 took 8.1 ms as a parallel
Numba loop on the 2-core CI machine, 2.3 ms as one NumPy call. These are the same functions written
with arithmetic, compares and bit casts only: branch-free (both sides computed, then selected), so a
fused loop that calls them vectorizes (2.1 ms for that ``exp``, on both cores, fused with its
neighbours). Every generated CPU module that names one of them gets its source in the prelude
(``helper_source``) under ``numba.njit(forceinline=True)``: the module's text, which
content-addresses the compiled cache, then includes the helper's code. A kernel calls the helper by
name, and LLVM inlines it there (``forceinline`` is LLVM's ``alwaysinline``: left to LLVM's cost
model, the calls stayed in an attention softmax's row band, whose loops then ran scalar, 0.12 ->
0.9 ms). Not Numba's ``inline="always"``: that copies the helper's Numba IR into every call site and
runs Numba's passes over the copies, which doubled the compile time of the kernels using them (the
transformer block's heaviest row kernel 0.79 -> 0.42 s, the MLP step's softmax band 0.85 -> 0.39 s)
for the same machine code.

Accuracy (float32, checked over dense grids against float64 NumPy in tests/test_vecmath.py):
``exp_f32`` < 1 ulp (Cephes ``expf``: Cody-Waite reduction by ln 2, degree-6 polynomial), denormal
results and 0 / inf at the ends exact like NumPy's; ``tanh_f32`` <= 2 ulp (Cephes ``tanhf``: odd
polynomial below 0.625, ``1 - 2 / (exp(2|x|) + 1)`` above; 1.33 ulp at most over every float32 in
[0, 10), checked once: benchmarks/results/notes.md); ``log_f32`` <= 1 ulp (Cephes ``logf``:
mantissa in [sqrt(1/2), sqrt(2)), degree-9 polynomial). NaN in, NaN out; +-inf and signed zero as
in C99. The CUDA target spells these names as ``math.exp`` etc. (``SCALAR_HELPERS``): the GPU has
its own vectorized libdevice.

The scaling by 2**n is split into two factors so results that are denormal (down to exp(-103.97))
round once, like libm, instead of flushing to zero.

Each polynomial step is ``fma(a, b, c)``: ``a * b + c`` as one fused multiply-add where the machine
has FMA (``runtime/intrinsics.py``; the prelude binds it). Numba would otherwise issue a multiply and
an add for each step (``tanh`` 0.77 -> 0.59 ns per element on 2 cores of the CI machine:
benchmarks/results/notes.md, float32 math helpers); the bounds above hold either way.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import numpy as np

from runtime.intrinsics import fmuladd_python as fma  # the generated prelude binds the intrinsic

# Names whose float32 lowering calls a helper here (the prims' ``emit`` spell them for f32 operands).
F32_MATH = ("exp_f32", "tanh_f32", "log_f32")


def exp_poly_f32(r):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    """``e**r`` for ``|r| <= ln(2) / 2``: Cephes ``expf``'s degree-6 polynomial."""
    p = np.float32(1.9875691500e-4)
    p = fma(p, r, np.float32(1.3981999507e-3))
    p = fma(p, r, np.float32(8.3334519073e-3))
    p = fma(p, r, np.float32(4.1665795894e-2))
    p = fma(p, r, np.float32(1.6666665459e-1))
    p = fma(p, r, np.float32(5.0000001201e-1))
    return p * (r * r) + r + np.float32(1.0)  # not fused: exp within 0.97 ulp (fused: 1.006)


def exp_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    hi = np.float32(88.72284)  # above: inf (exp(88.7228) is the largest float32)
    lo = np.float32(-103.972084)  # below: 0 (rounds to zero, as libm does)
    xc = x if x < hi else hi  # NaN -> hi; the result is re-selected at the end
    xc = xc if xc > lo else lo
    fx = np.floor(xc * np.float32(1.44269504088896341) + np.float32(0.5))
    r = fma(fx, np.float32(-0.693359375), xc)  # Cody-Waite: ln 2 = C1 + C2, C1 exact in 8 bits
    r = fma(fx, np.float32(2.12194440e-4), r)
    p = exp_poly_f32(r)
    # 2**n as two factors, their bits built in float32 (exact: small integers times 2**23) so the
    # vector lanes stay 32 bits wide (Numba widens int32 arithmetic to int64).
    n1 = np.floor(fx * np.float32(0.5))
    s1 = np.int32((n1 + np.float32(127.0)) * np.float32(8388608.0)).view(np.float32)
    s2 = np.int32((fx - n1 + np.float32(127.0)) * np.float32(8388608.0)).view(np.float32)
    y = p * s1 * s2
    y = y if x < hi else np.float32(np.inf)
    y = y if x > lo else np.float32(0.0)
    return y if x == x else x


def tanh_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    a = abs(x)  # on |x|, the sign copied back at the end (which keeps -0.0 and the symmetry exact)
    z = a * a
    small = np.float32(-5.70498872745e-3)
    small = fma(small, z, np.float32(2.06390887954e-2))
    small = fma(small, z, np.float32(-5.37397155531e-2))
    small = fma(small, z, np.float32(1.33314422036e-1))
    small = fma(small, z, np.float32(-3.33332819422e-1))
    small = fma(small * z, a, a)  # NaN stays NaN, and this is the side a NaN takes below
    # exp(2|x|) for |x| < 9.5 (above, tanh rounds to 1): no range ends to handle, one scale factor.
    a2 = a + a
    a2 = a2 if a2 < np.float32(19.0) else np.float32(19.0)
    # n = round(a2 / ln 2) by adding 1.5 * 2**23 + 127: the sum's low mantissa bits are then n + 127,
    # and shifted up by 23 they are the bits of 2**n (one add and a shift, not a floor and a convert).
    t = fma(a2, np.float32(1.44269504088896341), np.float32(12583039.0))
    fx = t - np.float32(12583039.0)
    r = fma(fx, np.float32(-0.693359375), a2)
    r = fma(fx, np.float32(2.12194440e-4), r)
    e = exp_poly_f32(r) * np.int32(np.float32(t).view(np.int32) << np.int32(23)).view(np.float32)
    big = np.float32(1.0) - np.float32(2.0) / (e + np.float32(1.0))
    y = big if a >= np.float32(0.625) else small
    return math.copysign(y, x)


def log_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    tiny = x < np.float32(1.17549435e-38)  # denormal (or <= 0): scale into the normal range first
    xs = x * np.float32(8388608.0) if tiny else x
    bits = np.float32(xs).view(np.int32)
    e = np.int32((bits >> np.int32(23)) & np.int32(0xFF)) - np.int32(126)
    e = e - np.int32(23) if tiny else e
    m = np.int32((bits & np.int32(0x7FFFFF)) | np.int32(0x3F000000)).view(np.float32)  # [0.5, 1)
    low = m < np.float32(0.707106781186547524)
    e = e - np.int32(1) if low else e
    m = (m + m - np.float32(1.0)) if low else (m - np.float32(1.0))
    z = m * m
    p = np.float32(7.0376836292e-2)
    p = fma(p, m, np.float32(-1.1514610310e-1))
    p = fma(p, m, np.float32(1.1676998740e-1))
    p = fma(p, m, np.float32(-1.2420140846e-1))
    p = fma(p, m, np.float32(1.4249322787e-1))
    p = fma(p, m, np.float32(-1.6668057665e-1))
    p = fma(p, m, np.float32(2.0000714765e-1))
    p = fma(p, m, np.float32(-2.4999993993e-1))
    p = fma(p, m, np.float32(3.3333331174e-1))
    fe = np.float32(e)
    y = p * m * z
    y = fma(fe, np.float32(-2.12194440e-4), y)
    y = y - np.float32(0.5) * z
    y = m + y
    y = fma(fe, np.float32(0.693359375), y)
    y = y if x < np.float32(np.inf) else x  # +inf
    y = y if x > np.float32(0.0) else (np.float32(-np.inf) if x == np.float32(0.0) else np.float32(np.nan))
    return y if x == x else x


# Float max/min reductions: NumPy's NaN-propagating compare-and-select does not vectorize as a loop
# recurrence (LLVM needs no-NaNs flags for a float max reduction), so the CPU target reduces integer
# keys instead: the float's bits mapped to a signed integer with the same order (negative floats get
# their magnitude bits flipped, so -0.0 < +0.0 and -inf is the lowest), NaN mapped to the extreme
# that wins (max: the highest integer, min: the lowest, both the bits of a NaN). An integer max is a
# plain ``smax`` reduction that LLVM vectorizes: a row max of 4096x1000 f32 takes 0.28 ms on the
# 2-core CI machine, 2.96 ms as the float loop, 0.55 ms as ``np.max``.


def max_key_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    b = np.float32(x).view(np.int32)
    k = b if b >= np.int32(0) else b ^ np.int32(0x7FFFFFFF)
    return k if x == x else np.int32(0x7FFFFFFF)


def min_key_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    b = np.float32(x).view(np.int32)
    k = b if b >= np.int32(0) else b ^ np.int32(0x7FFFFFFF)
    return k if x == x else np.int32(-0x80000000)


def from_key_f32(k):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.int32(k if k >= 0 else k ^ np.int32(0x7FFFFFFF)).view(np.float32)


def max_key_f64(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    b = np.float64(x).view(np.int64)
    k = b if b >= np.int64(0) else b ^ np.int64(0x7FFFFFFFFFFFFFFF)
    return k if x == x else np.int64(0x7FFFFFFFFFFFFFFF)


def min_key_f64(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    b = np.float64(x).view(np.int64)
    k = b if b >= np.int64(0) else b ^ np.int64(0x7FFFFFFFFFFFFFFF)
    return k if x == x else np.int64(-0x8000000000000000)


def from_key_f64(k):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.int64(k if k >= 0 else k ^ np.int64(0x7FFFFFFFFFFFFFFF)).view(np.float64)


_FUNCTIONS: dict[str, Callable[..., object]] = {
    f.__name__: f
    for f in (
        exp_poly_f32,
        exp_f32,
        tanh_f32,
        log_f32,
        max_key_f32,
        min_key_f32,
        from_key_f32,
        max_key_f64,
        min_key_f64,
        from_key_f64,
    )
}
HELPERS = tuple(_FUNCTIONS)  # every helper name, in the order a prelude defines them (callees first)
# The helpers each helper calls (declared, so a prelude is built without reading the helpers' text;
# tests/test_vecmath.py checks the list against the calls in their source).
CALLS: dict[str, tuple[str, ...]] = {"exp_f32": ("exp_poly_f32",), "tanh_f32": ("exp_poly_f32",)}
# The helpers whose polynomial steps call ``fma`` (a prelude defining one binds ``fma`` too).
FMA = frozenset({"exp_poly_f32", "exp_f32", "tanh_f32", "log_f32"})


def with_callees(names: set[str]) -> set[str]:
    """``names`` and every helper they call, directly or through another helper."""
    found, todo = set(names), list(names)
    while todo:
        for callee in CALLS.get(todo.pop(), ()):
            if callee not in found:
                found.add(callee)
                todo.append(callee)
    return found


def helper_source(names: set[str]) -> str:
    """The prelude text defining the helpers in ``names`` (and those they call) for a CPU module
    (in a fixed order, callees first, so the text, and with it the module's hash, is deterministic)."""
    sources = {name: inspect.getsource(f) for name, f in _FUNCTIONS.items()}
    names = with_callees(names)
    blocks = []
    for name in HELPERS:
        if name in names:
            define, body = sources[name].split("\n", 1)
            define = define.split("  #")[0]  # the lint comments stay here
            blocks.append(f'@numba.njit(forceinline=True, error_model="numpy")\n{define}\n{body}'.rstrip())
    return "\n\n\n".join(blocks)
