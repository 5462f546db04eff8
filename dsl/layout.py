"""NumPy's memory layout of a new array, for the stride shadows of ``dsl.array``.

NumPy lays out most new arrays after their inputs, not in C order ("order K"): ``exp`` of a
Fortran-ordered array is Fortran-ordered, so a later ``reshape`` of it is a copy, not a view. dslc
decides view or copy from each array's shadow, so a computed array's shadow must have the strides
NumPy would give it. The rules differ by how NumPy allocates the result, and each is ported from
NumPy's C source (``numpy/_core/src``), ambiguities and tie-breaks included:

- ``ufunc_order``: ufuncs and reductions allocate through the iterator (``nditer_constr.c``,
  ``npyiter_find_best_axis_ordering``): axes sorted by absolute stride over all operands, ignoring
  the axes an operand broadcasts along (stride 0 there, as its unit axes); where operands disagree C
  order wins.
- ``like_order``: ``astype`` (and ``np.empty_like``, ``np.copy``) keep a C- or F-contiguous
  prototype's order, else sort its axes by absolute stride, broadcast axes (stride 0) innermost
  (``ctors.c``, ``PyArray_NewLikeArrayWithShape``).
- ``concatenate_order``: ``concatenate`` sorts over all its inputs, ignoring unit axes
  (``shape.c``, ``PyArray_CreateMultiSortedStridePerm``).

A layout is an axis order, outermost first; ``shadow`` makes the contiguous shadow with that order.
Its strides are positive (NumPy's K order uses absolute strides) and in elements over one byte, as
every computed array's shadow. Only these shadows change: the IR keeps logical values, and results
still come back to the caller as fresh C-ordered arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Order = tuple[int, ...]  # axes from outermost (largest stride) to innermost

_ONE_BYTE = np.zeros(1, dtype=np.uint8)


def shadow(shape: tuple[int, ...], order: Order | None = None) -> np.ndarray:
    """A contiguous shadow of ``shape`` whose axes are laid out in ``order`` (C order if ``None``)."""
    strides = [0] * len(shape)
    acc = 1
    for axis in reversed(order if order is not None else range(len(shape))):
        strides[axis] = acc
        acc *= max(shape[axis], 1)
    return np.lib.stride_tricks.as_strided(_ONE_BYTE, shape, tuple(strides))


def _insertion_sort(ndim: int, stays_before: Callable[[int, int], bool | None]) -> tuple[int, ...]:
    """NumPy's stable insertion sort of the axes (starting from ``0, 1, ...``). ``stays_before(a, b)``
    says whether axis ``a``, already sorted, stays before axis ``b``, being placed: True, False, or
    None where no operand can tell (then ``b`` is compared with the axis before ``a``)."""
    perm = list(range(ndim))
    for i0 in range(1, ndim):
        axis, pos = perm[i0], i0
        for i1 in range(i0 - 1, -1, -1):
            verdict = stays_before(perm[i1], axis)
            if verdict is None:
                continue
            if verdict:
                break
            pos = i1
        perm[pos + 1 : i0 + 1] = perm[pos:i0]
        perm[pos] = axis
    return tuple(perm)


def ufunc_order(operands: Sequence[np.ndarray]) -> Order:
    """The iterator's order for operands of one (broadcast) shape: a ufunc's or reduction's result.

    The iterator sorts its axes from innermost out (it starts from reversed C order), so this runs
    the same insertion sort over the reversed axes and reverses the answer."""
    ndim = operands[0].ndim if operands else 0
    strides = [
        [0 if n == 1 else abs(s) for n, s in zip(op.shape, op.strides, strict=True)] for op in operands
    ]

    def stays_inside(inner: int, placed: int) -> bool | None:
        # In the iterator's list (innermost first), ``inner`` stays inside ``placed`` unless every
        # operand that can tell has ``placed``'s stride strictly below ``inner``'s.
        verdict = None
        for st in strides:
            s_inner, s_placed = st[ndim - 1 - inner], st[ndim - 1 - placed]
            if s_inner and s_placed:
                if s_inner <= s_placed:
                    return True  # one operand for keeping the order settles it (C order wins)
                verdict = False
        return verdict

    reversed_perm = _insertion_sort(ndim, stays_inside)
    return tuple(ndim - 1 - p for p in reversed(reversed_perm))


def like_order(prototype: np.ndarray) -> Order:
    """``np.empty_like(prototype)``'s order (order K): C or F if ``prototype`` is contiguous in it,
    else axes by decreasing absolute stride, ties kept in axis order."""
    ndim = prototype.ndim
    if prototype.flags.c_contiguous:
        return tuple(range(ndim))
    if prototype.flags.f_contiguous:
        return tuple(reversed(range(ndim)))
    return tuple(sorted(range(ndim), key=lambda a: (-abs(prototype.strides[a]), a)))


def concatenate_order(inputs: Sequence[np.ndarray]) -> Order:
    """``np.concatenate``'s order over its inputs (unit axes ignored; C order wins a conflict)."""
    ndim = inputs[0].ndim

    def stays_outside(outer: int, placed: int) -> bool | None:
        verdict = None
        for x in inputs:
            if x.shape[outer] != 1 and x.shape[placed] != 1:
                if abs(x.strides[placed]) <= abs(x.strides[outer]):
                    return True
                verdict = False
        return verdict

    return _insertion_sort(ndim, stays_outside)
