"""Every primitive in the registry, from a table, against its NumPy reference and the CPU backend.

For each primitive the table lists cases (shapes incl. 0-d, size-1 and empty; every accepted
dtype) and shape-rule violations. One function per primitive holds all its cases, so each
primitive costs one compile. A primitive missing from the table fails ``test_table_covers_registry``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from compiler.codegen import build_cpu_executable
from compiler.interpreter import interpret
from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.pipeline import plan_program
from compiler.prims import CONTROL, REGISTRY
from compiler.prims.base import numpy_attrs
from runtime.errors import ShapeError

F32, F64, I32, I64, I1 = DType.f32, DType.f64, DType.i32, DType.i64, DType.i1
ALL = (F32, F64, I32, I64, I1)
SHAPES = ((), (1,), (3, 4), (2, 1, 5), (0, 3))
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSL_CACHE_DIR", str(tmp_path_factory.mktemp("dslc_cache")))
        yield


# ---- input data -------------------------------------------------------------------------------


def data(shape: tuple[int, ...], dtype: DType, domain: str = "any") -> np.ndarray:
    """Random values of ``dtype``; ``domain`` keeps them where the op is defined in both backends."""
    return np.asarray(_values(shape, dtype, domain))  # 0-d cases must be arrays, not NumPy scalars


def _values(shape: tuple[int, ...], dtype: DType, domain: str) -> np.ndarray:
    if dtype.is_bool:
        return RNG.random(shape) < 0.5
    if dtype.is_int:
        ranges = {
            "any": (-9, 10),
            "exponent": (0, 4),
            "nonzero": (1, 10),
            "small": (-3, 4),
            "count": (-3, 70),
        }
        lo, hi = ranges.get(domain, (-9, 10))  # shift counts: negative, in range and past 32 and 64 bits
        return RNG.integers(lo, hi, size=shape).astype(dtype.np)
    x = RNG.standard_normal(shape) * 2
    if domain == "nan" and x.size:
        x.flat[0] = np.nan  # NaN positions must agree (and NaN propagates through max/min)
    return x.astype(dtype.np)


# Where float functions have their edges: signed zeros, infinities, NaN, subnormals, halves (rounding),
# integers, values past float32's range and near float64's.
SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -2.5e-310, 1e-40, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5)
SPECIALS += (3.0, -7.0, 1e30, -4e38, 1e300)


def special_operands(nargs: int, dtype: DType) -> list[np.ndarray]:
    """``SPECIALS`` in ``dtype`` (for two operands: every pair of them, as a column against a row)."""
    with np.errstate(over="ignore"):
        v = np.asarray(SPECIALS, dtype=np.float64).astype(dtype.np)
    if nargs == 1:
        return [v]
    return [np.broadcast_to(v[:, None], (v.size, v.size)).copy(), np.broadcast_to(v, (v.size, v.size)).copy()]


@dataclass
class Case:
    operands: list[np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)
    broadcast_from: tuple[int, ...] | None = None  # operand 0 arrives with this shape, broadcast in IR
    through: str | None = None  # operand 0 first goes through this elementwise op (a fused producer)


@dataclass
class Entry:
    cases: Callable[[], list[Case]]
    bad: list[tuple[list[TensorType], dict[str, Any]]]


def T(shape: tuple[int, ...], dtype: DType = F32) -> TensorType:
    return TensorType(shape, dtype)


# ---- elementwise ------------------------------------------------------------------------------


def accepted(name: str, attrs: dict[str, Any] | None = None) -> list[DType]:
    """The dtypes the shape rule accepts (asked of the rule itself, so new dtypes get tested)."""
    prim = REGISTRY[name]
    ok = []
    for d in ALL:
        try:
            prim.infer([T((2,), d)] * (prim.nargs or 1), attrs or {})
            ok.append(d)
        except ShapeError:
            pass
    return ok


def elementwise(name: str, domains: tuple[str, ...] = ("any",)) -> Entry:
    """Cases over every accepted dtype, cycling shapes; one broadcast-fed case; one fused-producer case."""
    nargs = REGISTRY[name].nargs or 1

    def cases() -> list[Case]:
        out = []
        dtypes = accepted(name)
        # Every accepted dtype on a real shape, then the edge shapes (0-d, size 1, empty) spread over them.
        pairs = [(d, SHAPES[2 + i % 2]) for i, d in enumerate(dtypes)]
        pairs += [
            (dtypes[j % len(dtypes)], shape) for j, shape in enumerate((SHAPES[0], SHAPES[1], SHAPES[4]))
        ]
        for i, (d, shape) in enumerate(pairs):
            dom = [domains[min(k, len(domains) - 1)] for k in range(nargs)]
            if i % 2 and d.is_float:
                dom[0] = "nan"
            out.append(Case([data(shape, d, dom[k]) for k in range(nargs)]))
        for d in dtypes:  # the IEEE edge values, every pair of them for two operands: signed zeros too
            if d.is_float:
                out.append(Case(special_operands(nargs, d)))
        d = dtypes[0]
        operands = [data((3, 4), d, domains[min(k, len(domains) - 1)]) for k in range(nargs)]
        out.append(Case([operands[0][1]] + operands[1:], broadcast_from=(4,)))
        out.append(Case(operands, through="copy" if d.is_bool else "neg"))
        return out

    bad: list[tuple[list[TensorType], dict[str, Any]]] = [([T((2,))] * (nargs + 1), {})]
    if nargs == 2:
        bad.append(([T((2, 3)), T((3, 2))], {}))
        bad.append(([T((2,), F32), T((2,), F64)], {}))
    missing = [d for d in ALL if d not in accepted(name)]
    if missing:
        bad.append(([T((2,), missing[0])] * nargs, {}))
    return Entry(cases, bad)


def select_cases() -> list[Case]:
    out = []
    for i, d in enumerate(ALL):
        shape = SHAPES[i % len(SHAPES)]
        out.append(Case([data(shape, I1), data(shape, d), data(shape, d)]))
    out.append(Case([data((4,), I1), data((3, 4), F32), data((3, 4), F32)], broadcast_from=(4,)))
    return out


def cast_cases() -> list[Case]:
    out = []
    for i, src in enumerate(ALL):
        for j, dst in enumerate(ALL):
            shape = SHAPES[(i + j) % len(SHAPES)]
            out.append(Case([data(shape, src)], {"dtype": dst}))  # finite floats: int casts are defined
    return out


# ---- reductions, matmul -----------------------------------------------------------------------

AXES_3D = ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2))


def reduction(name: str) -> Entry:
    def cases() -> list[Case]:
        dtypes = accepted(name, {"axes": (0,)})
        out = [Case([data((2, 3, 4), dtypes[i % len(dtypes)])], {"axes": ax}) for i, ax in enumerate(AXES_3D)]
        out += [Case([data((), d)], {"axes": ()}) for d in dtypes[:2]]
        out += [Case([data((0, 3), F32)], {"axes": (0,)}), Case([data((3, 0), I32)], {"axes": (0, 1)})]
        out.append(Case([data((3, 5), F64, "nan")], {"axes": (1,)}, through="neg"))
        out.append(Case([data((4,), F32)], {"axes": (0, 1)}, broadcast_from=(4,)))
        return out

    bad = [([T((2, 3))], {"axes": (2,)}), ([T((2, 3))], {"axes": (1, 0)}), ([T((2,))], {})]
    return Entry(cases, bad)


def matmul_cases() -> list[Case]:
    shapes = [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 2)), ((2, 1, 3, 2), (2, 1, 2, 2)), ((2, 0), (0, 3))]
    out = []
    for i, d in enumerate((F32, F64, I32, I64)):
        for a, b in (shapes[i], shapes[(i + 1) % len(shapes)]):
            out.append(Case([data(a, d), data(b, d)]))
    out.append(Case([data((0, 2), F32), data((2, 3), F32)]))
    return out


MATMUL_BAD = [
    ([T((2, 3)), T((2, 3))], {}),
    ([T((3,)), T((3,))], {}),
    ([T((2, 2, 3)), T((3, 3, 2))], {}),
    ([T((2, 2), I1), T((2, 2), I1)], {}),
]

# ---- movement, sources ------------------------------------------------------------------------


def slice_attrs(start, limit, stride) -> dict[str, Any]:
    return {"start": tuple(start), "limit": tuple(limit), "stride": tuple(stride)}


def broadcast_cases() -> list[Case]:
    return [
        Case([data((3,), F32)], {"shape": (2, 3)}),
        Case([data((), I64)], {"shape": (2, 2)}),
        Case([data((3, 1), I1)], {"shape": (2, 3, 4)}),
        Case([data((1,), I32)], {"shape": (0,)}),
        Case([data((), F64)], {"shape": ()}),
        Case([data((3, 1), F64)], {"shape": (3, 5)}, through="neg"),  # expensive source: materialized
    ]


def reshape_cases() -> list[Case]:
    return [
        Case([data((3, 4), F32)], {"shape": (2, 6)}),
        Case([data((12,), I32)], {"shape": (3, 1, 4)}),
        Case([data((3, 1, 4), I1)], {"shape": (1, 3, 4, 1)}),
        Case([data((), F64)], {"shape": (1, 1)}),
        Case([data((0, 3), I64)], {"shape": (3, 0)}),
        Case([data((2, 6), F32)], {"shape": (4, 3)}, through="neg"),
    ]


def transpose_cases() -> list[Case]:
    return [
        Case([data((3, 4), F32)], {"perm": (1, 0)}),
        Case([data((2, 3, 4), I64)], {"perm": (2, 0, 1)}),
        Case([data((), I1)], {"perm": ()}),
        Case([data((0, 2), F64)], {"perm": (1, 0)}),
        Case([data((2, 1, 3), I32)], {"perm": (1, 2, 0)}, through="neg"),
    ]


def slice_cases() -> list[Case]:
    return [
        Case([data((5, 6), F32)], slice_attrs((1, 0), (4, 6), (1, 2))),
        Case([data((7,), I32)], slice_attrs((6,), (-1,), (-2,))),
        Case([data((4, 3), I1)], slice_attrs((2, 0), (2, 3), (1, 1))),
        Case([data((), F64)], slice_attrs((), (), ())),
        Case([data((6, 4), I64)], slice_attrs((5, 3), (0, -1), (-2, -1)), through="neg"),
    ]


def pad_cases() -> list[Case]:
    return [
        Case([data((2, 3), F32), data((), F32)], {"low": (1, 0), "high": (2, 1)}),
        Case([data((3,), I32), data((), I32)], {"low": (0,), "high": (0,)}),
        Case([data((0, 2), I1), data((), I1)], {"low": (1, 0), "high": (0, 1)}),
        Case([data((), F64), data((), F64)], {"low": (), "high": ()}),
        Case([data((2, 2), I64), data((), I64)], {"low": (2, 1), "high": (0, 3)}, through="neg"),
    ]


def concatenate_cases() -> list[Case]:
    return [
        Case([data((2, 3), F32), data((1, 3), F32)], {"axis": 0}),
        Case([data((2, 1), I32), data((2, 0), I32), data((2, 2), I32)], {"axis": 1}),
        Case([data((3,), I1)], {"axis": 0}),
        Case([data((0, 2), F64), data((0, 2), F64)], {"axis": 1}),
        Case([data((2,), I64), data((3,), I64)], {"axis": 0}, through="neg"),
    ]


def update_slice_cases() -> list[Case]:
    return [
        Case([data((4, 5), F32), data((2, 3), F32)], slice_attrs((1, 1), (3, 4), (1, 1))),
        Case([data((7,), I32), data((3,), I32)], slice_attrs((0,), (7,), (3,))),
        Case([data((6,), I64), data((3,), I64)], slice_attrs((5,), (-1,), (-2,))),
        Case([data((3, 2), I1), data((0, 2), I1)], slice_attrs((1, 0), (1, 2), (1, 1))),
        Case([data((), F64), data((), F64)], slice_attrs((), (), ())),
        Case([data((3, 3), F64), data((1, 3), F64)], slice_attrs((2, 0), (3, 3), (1, 1)), through="neg"),
    ]


def starts(*values: int, dtype: DType = I64) -> list[np.ndarray]:
    """The 0-d integer start operands of a dynamic slice."""
    return [np.array(v, dtype.np) for v in values]


def dynamic_slice_cases() -> list[Case]:
    return [
        Case([data((5, 6), F32), *starts(1, 2)], {"sizes": (2, 3)}),
        Case([data((7,), I32), *starts(9)], {"sizes": (3,)}),  # past the end: the last window
        Case([data((7,), F32), *starts(-9)], {"sizes": (3,)}),  # before the start: the first
        Case([data((4, 3), I1), *starts(-2, dtype=I32), *starts(1)], {"sizes": (2, 3)}),  # at 2
        Case([data((), F64)], {"sizes": ()}),
        Case([data((0, 3), I64), *starts(0, 1)], {"sizes": (0, 2)}),
        Case([data((6, 4), F64), *starts(3, 0)], {"sizes": (2, 4)}, through="neg"),
    ]


def dynamic_update_slice_cases() -> list[Case]:
    return [
        Case([data((4, 5), F32), data((2, 3), F32), *starts(1, 1)]),
        Case([data((7,), I32), data((3,), I32), *starts(6)]),  # clamped to 4
        Case([data((6,), I64), data((3,), I64), *starts(-5, dtype=I32)]),  # from the end: at 1
        Case([data((3, 2), I1), data((0, 2), I1), *starts(1, 0)]),
        Case([data((), F64), data((), F64)]),
        Case([data((3, 3), F64), data((1, 3), F64), *starts(2, 0)], through="neg"),
    ]


def ints(values: Any, dtype: DType = I64) -> np.ndarray:
    return np.asarray(values, dtype.np)


def gather_cases() -> list[Case]:
    """Negative indices wrap once, out-of-range ones clamp (both ends); repeated; multi-axis and 0-d
    index arrays; an empty one."""
    return [
        Case([data((5, 3), F32), ints([4, 0, -1, 9, -7, 2, 2])], {"axis": 0}),
        Case([data((2, 6), I32), ints([[1, 5], [-2, 0]], I32)], {"axis": 1}),
        Case([data((4, 2, 3), F64), ints(3)], {"axis": 1}),
        Case([data((3,), I1), ints([2, 2, 0])], {"axis": 0}),
        Case([data((3, 4), I64), ints(np.zeros((0,), np.int64))], {"axis": 0}),
        Case([data((6, 2), F64), ints([5, 1, 1])], {"axis": 0}, through="neg"),
    ]


def scatter_cases(bools: bool, nans: bool = False) -> Callable[[], list[Case]]:
    """Repeated indices (accumulated or the last kept), negative and out-of-range ones, an axis past
    the first, a 0-d and an empty index array, a dying base (``through``: computed in place)."""

    def cases() -> list[Case]:
        out = [
            Case([data((5, 3), F32), data((6, 3), F32), ints([4, 0, -1, 9, 4, 4])], {"axis": 0}),
            Case([data((2, 6), I32), data((2, 2, 2), I32), ints([[1, 5], [-2, 1]], I32)], {"axis": 1}),
            Case([data((4, 3), F64), data((4,), F64), ints(-8)], {"axis": 1}),
            Case([data((3, 4), I64), data((0, 4), I64), ints(np.zeros((0,), np.int64))], {"axis": 0}),
            Case([data((6, 2), F64), data((3, 2), F64), ints([5, 1, 1])], {"axis": 0}, through="neg"),
        ]
        if bools:
            out.append(Case([data((3,), I1), data((4,), I1), ints([2, 0, 2, 1])], {"axis": 0}))
        if nans:  # NaN wins; signed zeros as reduce_max / reduce_min order them
            zeros = np.array([0.0, -0.0, np.nan, 1.0, -0.0, 0.0], np.float32)
            x = np.array([-0.0, 0.0, 2.0], np.float32)
            out.append(Case([x, zeros, ints([0, 1, 2, 2, 0, 1])], {"axis": 0}))
        return out

    return cases


def scan_cases() -> list[Case]:
    """Every axis both ways, every accepted dtype, size-1 and empty axes, a fused producer."""
    out = [
        Case([data((2, 3, 4), (F32, F64, I32, I64)[k % 4])], {"axis": a, "reverse": r})
        for k, (a, r) in enumerate((a, r) for a in range(3) for r in (False, True))
    ]
    out += [
        Case([data((5,), F32)], {"axis": 0, "reverse": False}),
        Case([data((1, 3), I64)], {"axis": 0, "reverse": True}),
    ]
    out += [
        Case([data((0, 3), F32)], {"axis": 1, "reverse": False}),
        Case([data((3, 0), F64)], {"axis": 1, "reverse": True}),
    ]
    return out + [Case([data((3, 5), F64)], {"axis": 1, "reverse": True}, through="neg")]


SCAN_BAD = [
    ([T((2, 3))], {"axis": 2, "reverse": False}),
    ([T((2,), I1)], {"axis": 0, "reverse": False}),
    ([T((2, 3))], {"axis": 0}),
]

SCATTER_BAD = [
    ([T((4, 3)), T((2, 3)), T((3,), I64)], {"axis": 0}),  # updates of the wrong shape
    ([T((4, 3)), T((2, 3)), T((2,), F32)], {"axis": 0}),  # float indices
    ([T((4, 3)), T((2, 3), F64), T((2,), I64)], {"axis": 0}),  # updates of another dtype
    ([T((4, 3)), T((4, 2)), T((2,), I64)], {"axis": 2}),
]

CONSTANTS = [
    np.arange(12, dtype=np.float32).reshape(3, 4) / 3,
    np.full((2, 2), 1.5),
    np.array(7, np.int32),
    np.array([True, False, True]),
    np.zeros((0, 2), np.int64),
    np.array([np.inf, -np.inf, np.nan], np.float32),
]


def source_cases(attr_sets: list[dict[str, Any]]) -> Callable[[], list[Case]]:
    return lambda: [Case([], attrs) for attrs in attr_sets]


IOTAS = [
    {"shape": (3, 4), "dimension": 1, "dtype": I32},
    {"shape": (5,), "dimension": 0, "dtype": F64},
    {"shape": (2, 0), "dimension": 0, "dtype": I64},
    {"shape": (2, 3, 2), "dimension": 1, "dtype": F32},
]


def random_bits_cases() -> list[Case]:
    """Keys with words past 32 bits and negative (only the low 32 bits count); every edge shape."""
    keys = [np.array([0, 42]), np.array([-1, 1 << 40]), np.array([7, -9])]
    shapes = ((3, 4), (), (1,), (2, 1, 5), (0, 3))
    out = [Case([keys[i % len(keys)]], {"shape": s}) for i, s in enumerate(shapes)]
    batched = np.stack([keys[0], keys[1], keys[2]])  # a key per row (vmap over keys)
    out += [Case([batched], {"shape": (2, 2)}), Case([batched.reshape(3, 1, 2)], {"shape": ()})]
    return out + [Case([keys[1]], {"shape": (2, 3)}, through="neg")]


DOMAINS = {
    "log": ("any",),  # negatives give NaN on both sides: NaN positions are compared
    "pow": ("small", "exponent"),  # (integer division and fmod by zero are defined: 0, as NumPy)
    "shift_left": ("any", "count"),
    "shift_right": ("any", "count"),
}
ELEMENTWISE_NAMES = (
    "neg abs sign exp log log1p expm1 sqrt sin cos tan tanh erf erfc logistic add sub mul div pow max min "
    "floor fmod eq ne lt le gt ge and or xor not shift_left shift_right copy stop_gradient "
    "asin acos atan sinh cosh asinh acosh atanh log2 log10 atan2 hypot cbrt copysign"
).split()

TABLE: dict[str, Entry] = {name: elementwise(name, DOMAINS.get(name, ("any",))) for name in ELEMENTWISE_NAMES}
TABLE |= {
    "select": Entry(select_cases, [([T((2,), F32)] * 3, {}), ([T((2,), I1), T((2,)), T((3,))], {})]),
    "cast": Entry(cast_cases, [([T((2,))], {"dtype": "f32"}), ([T((2,))], {})]),
    "reduce_sum": reduction("reduce_sum"),
    "reduce_max": reduction("reduce_max"),
    "reduce_min": reduction("reduce_min"),
    "matmul": Entry(matmul_cases, MATMUL_BAD),
    "broadcast": Entry(broadcast_cases, [([T((3,))], {"shape": (2, 4)}), ([T((2, 3))], {"shape": (3,)})]),
    "reshape": Entry(reshape_cases, [([T((3, 4))], {"shape": (5, 2)}), ([T((4,))], {"shape": (-1, -4)})]),
    "transpose": Entry(transpose_cases, [([T((3, 4))], {"perm": (0, 0)}), ([T((3, 4))], {"perm": (1,)})]),
    "slice": Entry(
        slice_cases,
        [([T((4,))], slice_attrs((0,), (4,), (0,))), ([T((4,))], slice_attrs((2,), (6,), (1,)))],
    ),
    "pad": Entry(
        pad_cases,
        [
            ([T((2,)), T((), F64)], {"low": (1,), "high": (0,)}),
            ([T((2,)), T(())], {"low": (-1,), "high": (0,)}),
        ],
    ),
    "concatenate": Entry(
        concatenate_cases, [([T((2, 3)), T((2, 4))], {"axis": 0}), ([T((2,)), T((2,))], {"axis": 1})]
    ),
    "update_slice": Entry(
        update_slice_cases,
        [
            ([T((4,)), T((3,))], slice_attrs((0,), (2,), (1,))),
            ([T((4,)), T((2,), I32)], slice_attrs((0,), (2,), (1,))),
        ],
    ),
    "dynamic_slice": Entry(
        dynamic_slice_cases,
        [
            ([T((4,)), T((), I64)], {"sizes": (5,)}),
            ([T((4,)), T((), F32)], {"sizes": (2,)}),
            ([T((4, 3)), T((), I64)], {"sizes": (1, 1)}),
        ],
    ),
    "dynamic_update_slice": Entry(
        dynamic_update_slice_cases,
        [
            ([T((4,)), T((2,), I32), T((), I64)], {}),
            ([T((4,)), T((5,)), T((), I64)], {}),
            ([T((4,)), T((2,))], {}),
        ],
    ),
    "gather": Entry(
        gather_cases,
        [
            ([T((4, 3)), T((2,), F32)], {"axis": 0}),
            ([T((4, 3)), T((2,), I64)], {"axis": 2}),
            ([T((0, 3)), T((2,), I64)], {"axis": 0}),
        ],
    ),
    "scatter_add": Entry(scatter_cases(bools=False), SCATTER_BAD),
    "scatter": Entry(scatter_cases(bools=True), SCATTER_BAD),
    "cumulative_sum": Entry(scan_cases, SCAN_BAD),
    "cumulative_prod": Entry(scan_cases, SCAN_BAD),
    "scatter_mul": Entry(scatter_cases(bools=False), SCATTER_BAD),
    "scatter_max": Entry(scatter_cases(bools=False, nans=True), SCATTER_BAD),
    "scatter_min": Entry(scatter_cases(bools=False, nans=True), SCATTER_BAD),
    "constant": Entry(
        source_cases([{"value": v} for v in CONSTANTS]),
        [([], {"value": 3.0}), ([T((1,))], {"value": np.ones(1)})],
    ),
    "random_bits": Entry(
        random_bits_cases,
        [([T((3,), I64)], {"shape": (2,)}), ([T((2,), I32)], {"shape": (2,)}), ([T((2,), I64)], {})]
        + [([T((), I64)], {"shape": (2,)}), ([T((2, 3), I64)], {"shape": ()})],
    ),
    "iota": Entry(
        source_cases(IOTAS),
        [
            ([], {"shape": (2,), "dimension": 1, "dtype": I32}),
            ([], {"shape": (2,), "dimension": 0, "dtype": I1}),
        ],
    ),
}


# ---- building and checking --------------------------------------------------------------------


def build(name: str, cases: list[Case]) -> tuple[Function, list[np.ndarray]]:
    """One function computing every case: each case's operands are params, its result a result."""
    prim = REGISTRY[name]
    params: list[Value] = []
    args: list[np.ndarray] = []
    ops: list[Op] = []
    results: list[Value] = []
    for case in cases:
        operands = []
        for k, array in enumerate(case.operands):
            v = Value(TensorType(array.shape, DType.from_numpy(array.dtype)))
            params.append(v)
            args.append(array)
            if k == 0 and case.broadcast_from is not None:
                shape = case.operands[1].shape if len(case.operands) > 1 else (3,) + array.shape
                ops.append(Op.create(REGISTRY["broadcast"], [v], {"shape": shape}))
                v = ops[-1].result
            if k == 0 and case.through is not None:
                ops.append(Op.create(REGISTRY[case.through], [v]))
                v = ops[-1].result
            operands.append(v)
        ops.append(Op.create(prim, operands, case.attrs))
        results.append(ops[-1].result)
    return Function(f"test_{name}", Block(tuple(params), tuple(ops), tuple(results))), args


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    )
    if want.dtype.kind == "f":
        rtol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=what)
        zeros = (got == 0) & (want == 0)
        np.testing.assert_array_equal(
            np.signbit(got[zeros]), np.signbit(want[zeros]), err_msg=f"{what}: zero signs"
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# The primitives on arrays. The region ops (loops, branches) hold blocks: tests/test_control_flow.py and
# tests/test_ir_regions.py check them against jax.lax, the interpreter, mlir-opt and the CUDA simulator.
ARRAY_PRIMS = sorted(name for name, p in REGISTRY.items() if p not in CONTROL)


def test_table_covers_registry() -> None:
    missing = sorted(set(ARRAY_PRIMS) - set(TABLE))
    assert not missing, f"primitives without a test table entry: {missing}"


@pytest.mark.parametrize("name", ARRAY_PRIMS)
def test_shape_rule_violations_raise(name: str) -> None:
    entry = TABLE[name]
    assert entry.bad, f"{name}: list at least one shape-rule violation"
    for types, attrs in entry.bad:
        with pytest.raises(ShapeError):
            REGISTRY[name].infer(types, attrs)


@pytest.mark.parametrize("name", ARRAY_PRIMS)
def test_primitive_against_numpy_and_cpu(name: str) -> None:
    cases = TABLE[name].cases()
    func, args = build(name, cases)
    prim = REGISTRY[name]
    for case, result in zip(cases, func.results, strict=True):
        if case.broadcast_from is None and case.through is None:
            with np.errstate(all="ignore"):
                raw = np.asarray(prim.reference(*case.operands, **numpy_attrs(case.attrs)))
            # The shape rule agrees with NumPy itself, not only with the interpreter's cast of it.
            assert result.type.shape == raw.shape, (
                f"{name}{case.attrs}: rule {result.type} vs NumPy {raw.shape}"
            )
            assert result.type.dtype.np == raw.dtype, (
                f"{name}{case.attrs}: rule {result.type} vs NumPy {raw.dtype}"
            )
    want = interpret(func, args)
    executable, *_ = build_cpu_executable(plan_program(func))
    with np.errstate(all="ignore"):
        got = executable(*args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_same(g, w, f"{name} case {i}: {cases[i].attrs} {[a.shape for a in cases[i].operands]}")
