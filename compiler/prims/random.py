"""``random_bits``: counter-based random numbers (Threefry-2x32, 20 rounds, as JAX's default PRNG).

A key is a ``tensor<2xi64>`` holding two unsigned 32-bit words (only the low 32 bits of each element
count): the IR has no unsigned types, and every value Threefry computes stays exact in ``int64``
(sums of two words < 2**33, a word shifted left by at most 31 < 2**63), so both backends compute
it with ordinary signed 64-bit arithmetic and a mask. The key words are JAX's ``key_data``.

``random_bits(key) {shape}`` is a source: its element at flat (C-order) position ``n`` is
``x0 * 2**32 + x1`` as a two's-complement ``int64``, where ``(x0, x1) = threefry2x32(key, (n >> 32,
n & 0xFFFFFFFF))``, which is JAX's ``random_bits(key, 64, shape)`` (``jax_threefry_partitionable``,
JAX's default since 0.5) seen as signed. Keys of shape ``(..., 2)`` draw ``shape`` for each key,
stacked in front (``vmap`` over keys). Its 32-bit bits are ``x0 ^ x1`` and a split key is
``(x0, x1)`` (``dsl/random.py`` takes them apart with ordinary integer ops). Each element depends on
the key and its own position only, so the op is an index map for fusion (``Kind.SOURCE``, inlined
into every reader, never stored): drawing costs no pass over memory of its own (a dropout is one
loop over its input). The same key gives the same bits on every backend and in any
call order.

The scalar lowering calls ``threefry2x32_bits``, written once below in plain Python and printed into
both backends' preludes (``helper_source``): under ``numba.njit(forceinline=True)`` on the CPU and
``cuda.jit(device=True, inline="always")`` on CUDA. The NumPy reference (``runtime/array_ops.py``) is
written apart, with ``uint32`` arrays that wrap by themselves, so the two check each other.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from compiler.ir.core import Op
from compiler.ir.types import DType, TensorType
from compiler.prims import mlir as ml
from compiler.prims.base import AttrType, EmitContext, Kind, Primitive, fail
from runtime.array_ops import THREEFRY_PARITY, THREEFRY_ROTATIONS
from runtime.array_ops import random_bits as random_bits_reference
from runtime.array_ops import threefry2x32 as threefry2x32

KEY_TYPE = TensorType((2,), DType.i64)


# ---- the scalar helper: the text both backends' generated code calls ---------------------------
# Plain int arithmetic on values < 2**63 (Numba types them int64; the CUDA simulator runs them as
# Python): literals only, no module globals, so the source runs unchanged wherever it is printed.


def threefry_rounds(x0, x1, r0, r1, r2, r3):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Four rounds: ``x0 += x1; x1 = rotl(x1, r) ^ x0`` for ``r`` in ``r0 .. r3``."""
    x0 = (x0 + x1) & 0xFFFFFFFF
    x1 = (((x1 << r0) | (x1 >> (32 - r0))) & 0xFFFFFFFF) ^ x0
    x0 = (x0 + x1) & 0xFFFFFFFF
    x1 = (((x1 << r1) | (x1 >> (32 - r1))) & 0xFFFFFFFF) ^ x0
    x0 = (x0 + x1) & 0xFFFFFFFF
    x1 = (((x1 << r2) | (x1 >> (32 - r2))) & 0xFFFFFFFF) ^ x0
    x0 = (x0 + x1) & 0xFFFFFFFF
    x1 = (((x1 << r3) | (x1 >> (32 - r3))) & 0xFFFFFFFF) ^ x0
    return x0, x1


def threefry2x32_bits(k0, k1, n):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Threefry-2x32 of the counter ``n`` (0 <= n < 2**63) under the key ``(k0, k1)`` (their low 32
    bits), both output words as one int64: ``x0 * 2**32 + x1`` modulo 2**64.

    Five groups of four rounds (``THREEFRY_ROTATIONS``, alternating), each followed by a key
    injection (the keys rotate: ``k1, k2, k0``, then ``k2, k0, k1``, ...). Written as a loop over
    the groups, whose constant trip count the compilers unroll (the PTX is the unrolled code's), so
    that the function stays small for Numba: CUDA inlines it into every reader at Numba's level,
    where the twenty rounds written out cost seconds per kernel to lower."""
    k0 = k0 & 0xFFFFFFFF
    k1 = k1 & 0xFFFFFFFF
    k2 = k0 ^ k1 ^ 0x1BD11BDA  # THREEFRY_PARITY
    x0 = ((n >> 32) + k0) & 0xFFFFFFFF
    x1 = ((n & 0xFFFFFFFF) + k1) & 0xFFFFFFFF
    ka, kb, kc = k1, k2, k0
    for i in range(5):
        if i % 2 == 0:
            x0, x1 = threefry_rounds(x0, x1, 13, 15, 26, 6)
        else:
            x0, x1 = threefry_rounds(x0, x1, 17, 29, 16, 24)
        x0 = (x0 + ka) & 0xFFFFFFFF
        x1 = (x1 + kb + i + 1) & 0xFFFFFFFF
        ka, kb, kc = kb, kc, ka
    high = x0 - ((x0 >> 31) << 32)  # x0 as a signed word: the shift below stays within int64
    return (high << 32) | x1


_HELPERS = (threefry_rounds, threefry2x32_bits)
HELPER = threefry2x32_bits.__name__  # the name generated code calls
DECORATORS = {  # (exactmath's helpers too)
    "cpu": '@numba.njit(forceinline=True, error_model="numpy")',
    # Numba-level inlining: a device function compiled on its own would ask the driver for the
    # device's compute capability, which compiling to PTX without a GPU has not got.
    "cuda": '@cuda.jit(device=True, inline="always")',
}


def helper_source(target: str) -> str:
    """The prelude text defining ``threefry2x32_bits`` (and its callees, first) for ``target``
    (``"cpu"`` or ``"cuda"``): the same code under the target's decorator."""
    blocks = []
    for f in _HELPERS:
        define, body = inspect.getsource(f).split("\n", 1)
        blocks.append(f"{DECORATORS[target]}\n{define.split('  #')[0]}\n{body}".rstrip())
    return "\n\n\n".join(blocks)


# ---- the primitive -----------------------------------------------------------------------------


def _shape_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    (key,) = types
    if key.dtype is not DType.i64 or key.shape[-1:] != (2,):
        raise fail(
            f"random_bits: the key must be a {KEY_TYPE} (two 32-bit words), or keys (..., 2), got {key}"
        )
    shape = tuple(int(d) for d in attrs["shape"])
    if any(d < 0 for d in shape):
        raise fail(f"random_bits: negative dimension in shape {shape}")
    return [TensorType(key.shape[:-1] + shape, DType.i64)]


def _flat_index(shape: Sequence[int], idx: Sequence[str]) -> str:
    """The C-order position of the element at ``idx`` (the counter)."""
    terms = [f"{i} * {math.prod(shape[k + 1 :])}" for k, i in enumerate(idx)]
    return " + ".join(terms) or "0"


def _emit(ctx: EmitContext, idx: Sequence[str]) -> str:
    keys = ctx.operand_types[0].rank - 1  # leading axes that pick a key (vmap over keys)
    k0, k1 = (ctx.read(0, [*idx[:keys], word]) for word in (0, 1))
    n = _flat_index(ctx.result_type.shape[keys:], idx[keys:])
    return f"{ctx.helper(HELPER)}({k0}, {k1}, np.int64({n}))"


def _mlir(b: ml.Builder, op: Op, xs: list[str], loc: str) -> str:
    """A ``linalg.generic`` computing Threefry in ``i32`` (``arith`` wraps; ``shrui`` is the logical
    shift the rotation needs) from the position's ``linalg.index``es and the key's two words."""
    out, key = op.result.type, op.operands[0].type
    keys = key.rank - 1  # leading axes that pick a key

    def body(bb: ml.Body, args: list[str], acc: str) -> str:
        at = [bb.emit(f"linalg.index {k} : index") for k in range(keys)]
        words = []
        for word in range(2):
            where = ", ".join([*at, bb.emit(f"arith.constant {word} : index")])
            words.append(
                bb.emit(f"arith.trunci {bb.emit(f'tensor.extract {xs[0]}[{where}] : {key}')} : i64 to i32")
            )
        n = bb.const(0, DType.i64)
        for k in range(keys, out.rank):
            index = bb.emit(f"arith.index_cast {bb.emit(f'linalg.index {k} : index')} : index to i64")
            stride = bb.const(math.prod(out.shape[k + 1 :]), DType.i64)
            n = bb.emit(f"arith.addi {n}, {bb.emit(f'arith.muli {index}, {stride} : i64')} : i64")
        high = bb.emit(f"arith.shrui {n}, {bb.const(32, DType.i64)} : i64")
        x0, x1 = _mlir_threefry(bb, words[0], words[1], bb.emit(f"arith.trunci {high} : i64 to i32"), n)
        wide0, wide1 = (bb.emit(f"arith.extui {x} : i32 to i64") for x in (x0, x1))
        shifted = bb.emit(f"arith.shli {wide0}, {bb.const(32, DType.i64)} : i64")
        return bb.emit(f"arith.ori {shifted}, {wide1} : i64")

    return ml.generic(b, out, [], body, loc=loc)


def _mlir_threefry(bb: ml.Body, k0: str, k1: str, x0: str, n: str) -> tuple[str, str]:
    """``threefry2x32`` as ``arith`` ops on ``i32`` (the same schedule as the NumPy reference)."""

    def i32(op: str, a: str, b: str) -> str:
        return bb.emit(f"arith.{op} {a}, {b} : i32")

    x1 = bb.emit(f"arith.trunci {n} : i64 to i32")
    ks = (k0, k1, i32("xori", i32("xori", k0, k1), bb.const(THREEFRY_PARITY, DType.i32)))
    x0, x1 = i32("addi", x0, ks[0]), i32("addi", x1, ks[1])
    for i in range(5):
        for r in THREEFRY_ROTATIONS[i % 2]:
            x0 = i32("addi", x0, x1)
            left = i32("shli", x1, bb.const(r, DType.i32))
            right = i32("shrui", x1, bb.const(32 - r, DType.i32))
            x1 = i32("xori", i32("ori", left, right), x0)
        x0 = i32("addi", x0, ks[(i + 1) % 3])
        x1 = i32("addi", i32("addi", x1, ks[(i + 2) % 3]), bb.const(i + 1, DType.i32))
    return x0, x1


def _batch(build: Any, op: Op, operands: Sequence[Any], batched: Sequence[bool], size: int) -> Any:
    """vmap over keys: the key's leading batch axis is one more key axis, one draw per key."""
    return build(random_bits, operands, {"shape": op.attrs["shape"]})


random_bits = Primitive(
    name="random_bits",
    kind=Kind.SOURCE,
    nargs=1,
    attrs={"shape": AttrType.INTS},
    shape_rule=_shape_rule,
    reference=random_bits_reference,
    emit=_emit,
    mlir=_mlir,
    differentiable=False,
    batch=_batch,
)
