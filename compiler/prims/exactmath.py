"""Float math both targets compile from one text, so the CPU and CUDA give the same bits.

``log1p`` (float32 and float64) is computed here rather than by the targets' libraries: glibc's
``log1pf`` and libdevice's ``__nv_log1pf`` differ in the last bit for some inputs, and
``dsl.random.normal`` (``erfinv`` of a uniform, through ``log1p``) promises the same bits on the CPU
and on CUDA for the same key (``../shared/api.md``). The functions are ports of FreeBSD's
``s_log1p.c`` / ``s_log1pf.c`` as musl keeps them (under 1 ulp; tests/test_exactmath.py checks dense
grids against NumPy), written branch-free (both sides computed, then selected) so a CPU loop that
calls them vectorizes. Their notice: "Copyright (C) 1993 by Sun Microsystems, Inc. All rights
reserved. Developed at SunPro, a Sun Microsystems, Inc. business. Permission to use, copy, modify,
and distribute this software is freely granted, provided that this notice is preserved."

The same bits need the same roundings: every operation rounds once, as written. A product that
feeds a sum is where targets part: NVVM contracts ``a * b + c`` into one fused multiply-add unless
told otherwise (numba-cuda passes no ``-fma=0``), Numba's CPU code never does. So every product here
is ``mul_f32(a, b)`` / ``mul_f64(a, b)``, which the CUDA prelude binds to libdevice's ``fmul_rn`` /
``dmul_rn`` (``mul.rn``, which the PTX assembler never fuses) and the CPU prelude to
``operator.mul``; the ``mul`` primitive spells float products the same way, so user arithmetic too
rounds on the GPU as NumPy and the CPU round it. Bit casts are named too (``f32_bits`` ...): NumPy
views on the CPU and in the simulator, libdevice's ``float_as_int`` family on a GPU (a scalar
``.view`` in a CUDA kernel asks the driver for the device while compiling, which PTX-only builds
without a GPU have not got).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable

import numpy as np

from compiler.prims import random

# Bound per target by the preludes (``BINDINGS``); here, for the tests that call these as Python.
mul_f32 = mul_f64 = operator.mul


def f32_bits(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.float32(x).view(np.int32)


def f32_from_bits(i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.int32(i).view(np.float32)


def f64_bits(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.float64(x).view(np.int64)


def f64_from_bits(i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    return np.int64(i).view(np.float64)


def log1p_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    one = np.float32(1.0)
    # 1 + x below sqrt(2) and above sqrt(1/2): f = x, k = 0. Elsewhere reduce 1 + x = 2**k * (1 + f),
    # on a safe argument (x <= -1, inf and NaN take 1 there; they are selected at the end).
    near = (x >= np.float32(-0.2928932011127472)) & (x < np.float32(0.4142136573791504))
    xs = x if (x > np.float32(-1.0)) & (x < np.float32(np.inf)) else one
    u = xs + one
    # int32 throughout (Numba widens int32 sums to int64, whose conversion to float does not vectorize)
    iu = np.int32(f32_bits(u) + np.int32(0x3F800000 - 0x3F3504F3))
    k = np.int32((iu >> np.int32(23)) - np.int32(0x7F))
    c = (one - (u - xs)) if k >= np.int32(2) else (xs - (u - one))  # log(1 + x) - log(u), over u
    c = c / u if k < np.int32(25) else np.float32(0.0)
    f = f32_from_bits(np.int32((iu & np.int32(0x7FFFFF)) + np.int32(0x3F3504F3))) - one  # u < sqrt(2)
    f = x if near else f
    c = np.float32(0.0) if near else c
    dk = np.float32(0.0) if near else np.float32(k)
    s = f / (np.float32(2.0) + f)
    z = mul_f32(s, s)
    w = mul_f32(z, z)
    t1 = mul_f32(w, np.float32(0.40000972151756287) + mul_f32(w, np.float32(0.24279078841209412)))
    t2 = mul_f32(z, np.float32(0.6666666269302368) + mul_f32(w, np.float32(0.2849878668785095)))
    hfsq = mul_f32(mul_f32(np.float32(0.5), f), f)
    y = mul_f32(s, hfsq + (t2 + t1)) + (mul_f32(dk, np.float32(9.05800061445916e-06)) + c)
    y = y - hfsq + f + mul_f32(dk, np.float32(0.6931381225585938))
    y = x if abs(x) < np.float32(5.960464477539063e-08) else y  # |x| < 2**-24 (and +-0): x
    y = y if x > np.float32(-1.0) else (np.float32(-np.inf) if x == np.float32(-1.0) else np.float32(np.nan))
    return y if x < np.float32(np.inf) else x  # +inf and NaN


def log1p_f64(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    one = np.float64(1.0)
    near = (x > np.float64(-0.292893648147583)) & (x < np.float64(0.4142136573791504))
    xs = x if (x > np.float64(-1.0)) & (x < np.float64(np.inf)) else one
    u = xs + one
    bits = f64_bits(u)
    hu = (bits >> np.int64(32)) + np.int64(0x3FF00000 - 0x3FE6A09E)  # the high word
    k = np.int32((hu >> np.int64(20)) - np.int64(0x3FF))  # (an int64's conversion to float: scalar)
    c = (one - (u - xs)) if k >= np.int32(2) else (xs - (u - one))
    c = c / u if k < np.int32(54) else np.float64(0.0)
    hu = (hu & np.int64(0x000FFFFF)) + np.int64(0x3FE6A09E)
    f = f64_from_bits((hu << np.int64(32)) | (bits & np.int64(0xFFFFFFFF))) - one
    f = x if near else f
    c = np.float64(0.0) if near else c
    dk = np.float64(0.0) if near else np.float64(k)
    s = f / (np.float64(2.0) + f)
    z = mul_f64(s, s)
    w = mul_f64(z, z)
    t1 = mul_f64(w, np.float64(0.2222219843214978396) + mul_f64(w, np.float64(0.1531383769920937332)))
    t1 = mul_f64(w, np.float64(0.3999999999940941908) + t1)  # w * (Lg2 + w * (Lg4 + w * Lg6))
    t2 = mul_f64(w, np.float64(0.1818357216161805012) + mul_f64(w, np.float64(0.1479819860511658591)))
    t2 = mul_f64(z, np.float64(0.6666666666666735130) + mul_f64(w, np.float64(0.2857142874366239149) + t2))
    hfsq = mul_f64(mul_f64(np.float64(0.5), f), f)
    y = mul_f64(s, hfsq + (t2 + t1)) + (mul_f64(dk, np.float64(1.90821492927058770002e-10)) + c)
    y = y - hfsq + f + mul_f64(dk, np.float64(6.93147180369123816490e-01))
    y = x if abs(x) < np.float64(1.1102230246251565e-16) else y  # |x| < 2**-53 (and +-0): x
    y = y if x > np.float64(-1.0) else (np.float64(-np.inf) if x == np.float64(-1.0) else np.float64(np.nan))
    return y if x < np.float64(np.inf) else x


def cbrt_f32(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    # musl's cbrtf (FreeBSD's s_cbrtf.c): a 5-bit estimate from the exponent's bits, then two Newton
    # steps in float64; rounding the 47-bit result to float32 is correct in round-to-nearest.
    ax = abs(x)
    small = ax < np.float32(1.1754943508222875e-38)  # zero or subnormal: scaled by 2**24 first
    hx = f32_bits(mul_f32(ax, np.float32(16777216.0)) if small else ax)
    hx = np.int32(hx // np.int32(3) + (np.int32(642849266) if small else np.int32(709958130)))
    t = np.float64(f32_from_bits(hx))
    xd = np.float64(ax)
    r = mul_f64(mul_f64(t, t), t)
    t = mul_f64(t, xd + xd + r) / (xd + r + r)
    r = mul_f64(mul_f64(t, t), t)
    t = mul_f64(t, xd + xd + r) / (xd + r + r)
    y = np.float32(t)
    y = y if x >= np.float32(0.0) else -y
    y = y if ax < np.float32(np.inf) else x + x  # inf and NaN are their own cube roots
    return x if ax == np.float32(0.0) else y  # so are the zeros, signs kept


def cbrt_f64(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    # musl's cbrt (FreeBSD's s_cbrt.c): a 5-bit estimate from the exponent's bits, a polynomial to
    # 23 bits, rounded away from zero to 23 bits, then one Newton step: error < 0.667 ulps.
    ax = abs(x)
    small = ax < np.float64(2.2250738585072014e-308)  # zero or subnormal: scaled by 2**54 first
    hx = f64_bits(mul_f64(ax, np.float64(18014398509481984.0)) if small else ax) >> np.int64(32)
    hx = hx // np.int64(3) + (np.int64(696219795) if small else np.int64(715094163))
    t = f64_from_bits(hx << np.int64(32))
    safe = ax if ax > np.float64(0.0) else np.float64(1.0)
    r = mul_f64(mul_f64(t, t), t / safe)
    p = np.float64(1.87595182427177009643) + mul_f64(
        r, np.float64(-1.88497979543377169875) + mul_f64(r, np.float64(1.621429720105354466140))
    )
    q = mul_f64(
        mul_f64(mul_f64(r, r), r),
        np.float64(-0.758397934778766047437) + mul_f64(r, np.float64(0.145996192886612446982)),
    )
    t = mul_f64(t, p + q)
    t = f64_from_bits((f64_bits(t) + np.int64(0x80000000)) & np.int64(-0x40000000))  # ~0x3fffffff
    s = mul_f64(t, t)  # exact
    r = safe / s
    r = (r - t) / ((t + t) + r)
    y = t + mul_f64(t, r)
    y = y if x >= np.float64(0.0) else -y
    y = y if ax < np.float64(np.inf) else x + x  # inf and NaN are their own cube roots
    return x if ax == np.float64(0.0) else y  # so are the zeros, signs kept


def ipow(a, b):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201 - compiled by Numba
    # An integer power wrapping as NumPy's (the low bits of the exact power): square-and-multiply in
    # uint64. Numba's own integer ** computes exponents past 65536 as math.pow in float64 (the
    # minimum of int64, 0 of int32). A negative b gives 1 (the pow primitive's callers never pass one).
    result = np.uint64(1)
    base = np.uint64(a)
    e = np.int64(b)
    while e > np.int64(0):
        if e & np.int64(1):
            result = result * base
        base = base * base
        e = e >> np.int64(1)
    return np.int64(result)


# The helpers a module defines from this text, callees first; ``CALLS``: what each calls of them.
_FUNCTIONS: dict[str, Callable[..., object]] = {
    f.__name__: f
    for f in (f32_bits, f32_from_bits, f64_bits, f64_from_bits, log1p_f32, log1p_f64, cbrt_f32, cbrt_f64)
    + (ipow,)
}
HELPERS = tuple(_FUNCTIONS)
INTEGER_HELPERS = frozenset({"ipow"})  # integer math only: a bare ``*`` there has nothing to fuse
CALLS: dict[str, tuple[str, ...]] = {
    "log1p_f32": ("f32_bits", "f32_from_bits", "mul_f32"),
    "log1p_f64": ("f64_bits", "f64_from_bits", "mul_f64"),
    "cbrt_f32": ("f32_bits", "f32_from_bits", "mul_f32", "mul_f64"),
    "cbrt_f64": ("f64_bits", "f64_from_bits", "mul_f64"),
}
# Names a target binds to its own spelling instead of defining them from this text: target -> name ->
# spelling (the CUDA simulator runs kernels as Python, where libdevice's functions are stubs).
BINDINGS: dict[str, dict[str, str]] = {
    "cpu": {"mul_f32": "operator.mul", "mul_f64": "operator.mul"},
    "cuda": {
        "mul_f32": "libdevice.fmul_rn",
        "mul_f64": "libdevice.dmul_rn",
        "f32_bits": "libdevice.float_as_int",
        "f32_from_bits": "libdevice.int_as_float",
        "f64_bits": "libdevice.double_as_longlong",
        "f64_from_bits": "libdevice.longlong_as_double",
    },
    "sim": {"mul_f32": "operator.mul", "mul_f64": "operator.mul"},
}


def with_callees(names: set[str]) -> set[str]:
    """``names`` and what they call (helpers and bound names)."""
    return set(names).union(*(CALLS.get(name, ()) for name in names))


def helper_source(target: str, names: set[str]) -> str:
    """The prelude text defining the helpers in ``names`` and their callees for ``target`` (``"cpu"``
    or ``"cuda"``), in a fixed order: each helper from its source here under the target's decorator,
    then the target's own spellings (``BINDINGS``) assigned over them, which the compiled helpers see
    (Numba resolves a global when it compiles a kernel that calls it). CUDA's text assigns the
    simulator's spellings instead under ``SIM``, where the NumPy bit casts stay."""
    names = with_callees(names)
    blocks = []
    for name in HELPERS:
        if name in names:
            define, body = inspect.getsource(_FUNCTIONS[name]).split("\n", 1)
            blocks.append(f"{random.DECORATORS[target]}\n{define.split('  #')[0]}\n{body}".rstrip())

    def assign(spellings: dict[str, str], indent: str = "") -> list[str]:
        return [f"{indent}{name} = {spellings[name]}" for name in sorted(spellings) if name in names]

    if target == "cuda":
        sim = assign(BINDINGS["sim"], "    ") or ["    pass"]
        lines = ["if SIM:", *sim, "else:", *assign(BINDINGS["cuda"], "    ")]
    else:
        lines = assign(BINDINGS["cpu"])
    if any(line.strip().startswith(tuple(names)) for line in lines):
        blocks.append("\n".join(lines))
    return "\n\n\n".join(blocks)
