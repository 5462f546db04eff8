"""``dnp.einsum``: Einstein summation with NumPy 2's semantics, built from the primitives the rest of
the compiler already optimizes, so it has no primitive (and no vjp) of its own.

- An operand's own indices: a repeated index is the diagonal (the repeated axes side by side, merged
  by a reshape and read by a strided slice: no mask, no copy where the axes are adjacent); an index
  no other operand and not the output has is summed at once; a size-1 axis against a longer one of
  the same index (broadcasting) is dropped from that operand (it multiplies every element alike).
- A pair of operands: one ``matmul`` of the operands transposed to ``[batch, kept, summed]`` and
  ``[batch, summed, kept]`` and reshaped to matrices (the indices both keep are its batch axes), so
  the outer product of the kept indices is never built to be summed; a multiply and a sum where
  each side keeps nothing of its own (a dot product per batch element, fused as a reduction's
  prologue); a broadcast multiply where nothing is summed (an outer or elementwise product).
- Three or more operands: contracted pairwise in the order ``optimize`` names: ``"greedy"`` (the
  default, and ``True``) is ``np.einsum_path``'s greedy choice (the pair whose result shrinks the
  operands most, then the fewest operations), ``"optimal"`` the fewest operations over every order
  (up to ``OPTIMAL_LIMIT`` operands, greedy beyond), ``False`` left to right, and a list as
  ``np.einsum_path`` returns it that path itself.

The result is a new array, also where NumPy's is a view of the operand (``einsum('ii->i', a)``).
"""

from __future__ import annotations

import itertools
import math
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.prims import reduction
from dsl import numpy as dnp
from dsl import ops, tracing
from dsl.array import Array
from dsl.errors import DSLError, DTypeError, ShapeError, TraceError

Labels = tuple[int, ...]  # an operand's index per axis: a letter's code point, or an ellipsis axis
ELLIPSIS = 256  # the label of the k-th axis of the operands' broadcast ellipsis is ELLIPSIS + k
OPTIMAL_LIMIT = 8  # "optimal" searches every order (3**n subsets) up to this many operands
Path = list[tuple[int, ...]]  # np.einsum_path's form: positions contracted, the result appended


@dataclass(frozen=True)
class Subscripts:
    """Parsed subscripts: each operand's labels (its ellipsis expanded to the axes it covers), the
    output's, and every label's size (broadcast: a size-1 axis takes the size other operands give)."""

    text: str
    inputs: tuple[Labels, ...]
    output: Labels
    sizes: Mapping[int, int]


def _name(label: int) -> str:
    return chr(label) if label < ELLIPSIS else "..."


def _error(text: str, message: str, cls: type[DSLError] = ShapeError) -> DSLError:
    return tracing.user_error(cls, f"einsum {text!r}: {message}")


# ---- parsing ----------------------------------------------------------------------------------------


def _term(text: str, term: str) -> list[int | None]:
    """One term's labels in order, ``None`` where its ellipsis stands."""
    before, dots, after = term.partition("...")
    out: list[int | None] = []
    for part, tail in ((before, bool(dots)), (after, False)):
        for c in part:
            if c == ".":
                raise _error(text, "'.' is only allowed as the ellipsis '...', once per term")
            if not (c.isascii() and c.isalpha()):
                raise _error(text, f"invalid subscript {c!r}: subscripts must be letters (a-z, A-Z)")
            out.append(ord(c))
        if tail:
            out.append(None)
    return out


def parse(text: str, shapes: Sequence[tuple[int, ...]]) -> Subscripts:
    """The subscripts ``text`` for operands of ``shapes``; a ShapeError naming ``text`` if they do
    not fit (NumPy's checks: count, rank, sizes, output indices)."""
    spec = text.replace(" ", "")
    if spec.count("->") > 1:
        raise _error(text, "'->' may appear only once")
    lhs, arrow, rhs = spec.partition("->")
    terms = [_term(text, t) for t in lhs.split(",")]
    if len(terms) != len(shapes):
        raise _error(text, f"{len(terms)} terms for {len(shapes)} operands")
    # Each ellipsis covers the axes its operand's letters leave; together they broadcast.
    ellipses: list[tuple[int, ...]] = []
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        letters = sum(1 for t in term if t is not None)
        if letters > len(shape) or (None not in term and letters != len(shape)):
            raise _error(text, f"operand {k} has {len(shape)} axes for the {letters} subscripts of its term")
        start = term.index(None) if None in term else 0
        ellipses.append(shape[start : start + len(shape) - letters] if None in term else ())
    rank = max((len(e) for e in ellipses), default=0)
    inputs = []
    for term, ell in zip(terms, ellipses, strict=True):
        labels: list[int] = []
        for t in term:
            labels.extend(range(ELLIPSIS + rank - len(ell), ELLIPSIS + rank) if t is None else [t])
        inputs.append(tuple(labels))
    sizes = _sizes(text, inputs, shapes)
    every = [label for labels in inputs for label in labels]
    if arrow:
        out_term = _term(text, rhs)
        output: list[int] = []
        for t in out_term:
            output.extend(range(ELLIPSIS, ELLIPSIS + rank) if t is None else [t])
        if rank and None not in out_term:
            raise _error(text, "the operands' '...' axes must appear in the output: add '...' to it")
        for label in output:
            if label not in sizes:
                raise _error(text, f"output subscript {_name(label)!r} appears in no input")
            if output.count(label) > 1:
                raise _error(text, f"output subscript {_name(label)!r} appears more than once")
    else:  # NumPy's implicit output: the ellipsis, then the letters seen once, in alphabetical order
        once = sorted(label for label in set(every) if label < ELLIPSIS and every.count(label) == 1)
        output = list(range(ELLIPSIS, ELLIPSIS + rank)) + once
    return Subscripts(text, tuple(inputs), tuple(output), sizes)


def _sizes(text: str, inputs: Sequence[Labels], shapes: Sequence[tuple[int, ...]]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for k, (labels, shape) in enumerate(zip(inputs, shapes, strict=True)):
        own: dict[int, int] = {}
        for label, n in zip(labels, shape, strict=True):
            if own.setdefault(label, n) != n:
                raise _error(
                    text, f"operand {k} repeats {_name(label)!r} over axes of sizes {own[label]} and {n}"
                )
            seen = sizes.setdefault(label, n)
            if seen != n and 1 not in (seen, n):
                raise _error(
                    text, f"index {_name(label)!r} has size {seen} in one operand and {n} in operand {k}"
                )
            sizes[label] = n if seen == 1 else seen  # 1 broadcasts to any size, 0 included
    return sizes


# ---- contraction order ----------------------------------------------------------------------------


def _size(labels: frozenset[int], sizes: Mapping[int, int]) -> int:
    return math.prod(sizes[label] for label in labels)


def _kept(sets: Sequence[frozenset[int]], chosen: Sequence[int], output: frozenset[int]) -> frozenset[int]:
    """The labels of the result of contracting ``chosen``: those the output or another operand has."""
    others = output.union(*(s for k, s in enumerate(sets) if k not in chosen))
    return frozenset().union(*(sets[k] for k in chosen)) & others


def _flops(sets: Sequence[frozenset[int]], kept: frozenset[int], sizes: Mapping[int, int]) -> int:
    """``np.einsum_path``'s operation count of contracting ``sets`` into ``kept``."""
    involved = frozenset().union(*sets)
    return _size(involved, sizes) * (max(1, len(sets) - 1) + (involved != kept))


def _pair_key(
    sets: Sequence[frozenset[int]], pair: tuple[int, int], output: frozenset[int], sizes: Mapping[int, int]
) -> tuple[int, int]:
    """How good contracting ``pair`` is (smaller is better): how much its result outgrows its two
    operands, then its operation count. It stays valid while neither operand is contracted (only
    labels of the contracted pair leave the others' union)."""
    i, j = pair
    kept = _kept(sets, pair, output)
    grown = _size(kept, sizes) - _size(sets[i], sizes) - _size(sets[j], sizes)
    return grown, _flops([sets[i], sets[j]], kept, sizes)


def greedy_path(sets: Sequence[frozenset[int]], output: frozenset[int], sizes: Mapping[int, int]) -> Path:
    """``np.einsum_path(..., optimize="greedy")``: repeatedly the pair (sharing an index, if any pair
    does) whose result outgrows its operands least, then the one of fewest operations; ties go to
    the first candidate in NumPy's order (pairs of the first step, then pairs with each new result).
    NumPy's memory limit is left out: where no pair fits under it NumPy runs its one-loop einsum
    over the rest, which has no counterpart here (a pairwise step is never worse)."""
    current = list(sets)
    path: Path = []
    candidates: list[tuple[tuple[int, int], tuple[int, int]]] = []
    fresh: Iterable[tuple[int, int]] = itertools.combinations(range(len(current)), 2)
    while len(current) > 1:
        candidates += [
            (_pair_key(current, p, output, sizes), p) for p in fresh if current[p[0]] & current[p[1]]
        ]
        if not candidates:  # only outer products left: any pair
            pairs = itertools.combinations(range(len(current)), 2)
            candidates = [(_pair_key(current, p, output, sizes), p) for p in pairs]
        best = min(candidates, key=lambda c: c[0])[1]
        kept = _kept(current, best, output)
        current = [s for k, s in enumerate(current) if k not in best] + [kept]
        moved = [(i - sum(b < i for b in best), j - sum(b < j for b in best)) for _, (i, j) in candidates]
        candidates = [
            (key, m) for (key, p), m in zip(candidates, moved, strict=True) if not set(p) & set(best)
        ]
        fresh = ((i, len(current) - 1) for i in range(len(current) - 1))
        path.append(best)
    return path


def optimal_path(sets: Sequence[frozenset[int]], output: frozenset[int], sizes: Mapping[int, int]) -> Path:
    """The pairwise order of fewest operations (the sum of each step's ``_flops``), found over every
    split of every subset of the operands (3**n work: used up to ``OPTIMAL_LIMIT`` operands)."""
    n = len(sets)
    if n > OPTIMAL_LIMIT:
        return greedy_path(sets, output, sizes)

    def labels_of(group: frozenset[int]) -> frozenset[int]:  # a group's result: what outside it needs
        outside = output.union(*(sets[k] for k in range(n) if k not in group))
        return frozenset().union(*(sets[k] for k in group)) & outside

    best: dict[frozenset[int], tuple[int, Any]] = {frozenset([k]): (0, k) for k in range(n)}
    for size in range(2, n + 1):
        for members in itertools.combinations(range(n), size):
            group, first, rest = frozenset(members), members[0], members[1:]
            for left_size in range(size - 1):  # each split once: the first member on the left
                for others in itertools.combinations(rest, left_size):
                    left = frozenset((first, *others))
                    right = group - left
                    step = _flops([labels_of(left), labels_of(right)], labels_of(group), sizes)
                    cost = best[left][0] + best[right][0] + step
                    if group not in best or cost < best[group][0]:
                        best[group] = (cost, (left, right))
    path: Path = []
    order: list[Any] = list(range(n))  # what each position holds: an operand or a contracted group

    def emit(group: frozenset[int]) -> Any:
        node = best[group][1]
        if isinstance(node, int):
            return node
        left, right = (emit(part) for part in node)
        i, j = sorted((order.index(left), order.index(right)))
        path.append((i, j))
        del order[j], order[i]
        order.append(group)
        return group

    emit(frozenset(range(n)))
    return path


def _path(
    text: str, optimize: Any, sets: Sequence[frozenset[int]], output: frozenset[int], sizes: Mapping[int, int]
) -> Path:
    if optimize is False or optimize is None:  # NumPy's one step over all operands: left to right
        return [tuple(range(len(sets)))]
    if optimize is True or optimize == "greedy":
        return greedy_path(sets, output, sizes)
    if optimize == "optimal":
        return optimal_path(sets, output, sizes)
    if isinstance(optimize, (list, tuple)):
        steps = list(optimize[1:] if optimize and optimize[0] == "einsum_path" else optimize)
        return [tuple(int(k) for k in step) for step in steps]
    raise _error(
        text, f"optimize must be True, False, 'greedy', 'optimal' or a path, not {optimize!r}", TraceError
    )


# ---- one operand ----------------------------------------------------------------------------------


@dataclass
class Term:
    """An operand on the way: its array and the label of each of its axes."""

    array: Array
    labels: Labels


def _diagonal(term: Term) -> Term:
    """Each repeated label's diagonal: its axes side by side (a transpose, none if they are adjacent),
    merged by a reshape and read with the stride that steps along the diagonal."""
    x, labels = term.array, list(term.labels)
    for label in dict.fromkeys(labels):
        axes = [a for a, m in enumerate(labels) if m == label]
        if len(axes) == 1:
            continue
        first, n, r = axes[0], x.shape[axes[0]], len(axes)
        perm = [a for a in range(len(labels)) if a not in axes[1:]]
        perm[first : first + 1] = axes
        x = ops.transpose(x, perm)
        x = ops.reshape(x, x.shape[:first] + (n**r,) + x.shape[first + r :])
        step = (n**r - 1) // (n - 1) if n > 1 else 1  # 1 + n + ... + n**(r-1)
        x = x[(slice(None),) * first + (slice(None, None, step),)]
        labels = [m for a, m in enumerate(labels) if a not in axes[1:]]
    return Term(x, tuple(labels))


def _sum(term: Term, labels: Sequence[int]) -> Term:
    axes = tuple(a for a, m in enumerate(term.labels) if m in labels)
    if not axes:
        return term
    # reduce_sum itself, not dnp.sum: an int32 einsum stays int32, as NumPy's
    out = ops.reduce(reduction.reduce_sum, term.array, axes)
    return Term(out, tuple(m for m in term.labels if m not in labels))


def _squeeze_broadcast(term: Term, sizes: Mapping[int, int]) -> Term:
    """Drop size-1 axes whose label another operand makes longer (their one element multiplies every
    element of that index alike)."""
    keep = [a for a, m in enumerate(term.labels) if term.array.shape[a] == sizes[m]]
    if len(keep) == len(term.labels):
        return term
    shape = tuple(term.array.shape[a] for a in keep)
    return Term(ops.reshape(term.array, shape), tuple(term.labels[a] for a in keep))


def _arrange(term: Term, order: Sequence[int]) -> Array:
    """``term``'s array with its axes in ``order`` (labels it has), a transposed view."""
    return ops.transpose(term.array, [term.labels.index(m) for m in order])


# ---- two operands ----------------------------------------------------------------------------------


def _contract(a: Term, b: Term, kept: frozenset[int], sizes: Mapping[int, int]) -> Term:
    """``a`` times ``b`` summed over their shared labels not in ``kept`` (and each one's own labels
    not in ``kept``), as a matmul, a multiply-and-sum or a broadcast multiply."""
    a = _sum(a, [m for m in a.labels if m not in b.labels and m not in kept])
    b = _sum(b, [m for m in b.labels if m not in a.labels and m not in kept])
    # The shared labels in the larger operand's order: if either is reshaped from a transposed
    # (so copied) array, it is the smaller.
    larger = a if a.array.size >= b.array.size else b
    shared = [m for m in larger.labels if m in a.labels and m in b.labels]
    batch = [m for m in shared if m in kept]
    summed = [m for m in shared if m not in kept]
    rows = [m for m in a.labels if m not in b.labels]
    cols = [m for m in b.labels if m not in a.labels]

    def dims(labels: Sequence[int]) -> tuple[int, ...]:
        return tuple(sizes[m] for m in labels)

    labels = tuple(batch + rows + cols)
    if not summed or (not rows and not cols):
        # Nothing summed: the product itself (an outer or elementwise one); nothing kept of either
        # side's own: a dot product per batch element, the multiply fused into the sum's prologue.
        ones_a, ones_b = (1,) * len(cols), (1,) * len(rows)
        left = ops.reshape(_arrange(a, batch + rows + summed), dims(batch + rows) + ones_a + dims(summed))
        right = ops.reshape(_arrange(b, batch + cols + summed), dims(batch) + ones_b + dims(cols + summed))
        return _sum(Term(dnp.multiply(left, right), labels + tuple(summed)), summed)
    m, n, k = (math.prod(dims(group)) for group in (rows, cols, summed))
    left = ops.reshape(_arrange(a, batch + rows + summed), dims(batch) + (m, k))
    right = ops.reshape(_arrange(b, batch + summed + cols), dims(batch) + (k, n))
    return Term(ops.reshape(ops.matmul(left, right), dims(labels)), labels)


# ---- einsum ---------------------------------------------------------------------------------------------


def _split_arguments(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """The subscripts and operands of ``einsum("ij,jk", a, b)`` or of NumPy's interleaved form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (integers 0-51 stand for A-Z, a-z; ``...`` for the
    ellipsis), whose subscripts are spelled out as letters."""
    if not args:
        raise tracing.user_error(TraceError, "einsum needs subscripts and at least one operand")
    if isinstance(args[0], str):
        return args[0], list(args[1:])
    letters = string.ascii_uppercase + string.ascii_lowercase

    def spell(sublist: Any) -> str:
        try:
            return "".join("..." if s is Ellipsis else letters[int(s)] for s in sublist)
        except (TypeError, ValueError, IndexError):
            raise tracing.user_error(
                ShapeError, f"einsum: a sublist holds integers in [0, 52) and Ellipsis, not {sublist!r}"
            ) from None

    operands, terms = list(args[0::2]), [spell(s) for s in args[1::2]]
    output = ""
    if len(operands) > len(terms):  # a trailing sublist is the output's
        output = "->" + spell(operands.pop())
    return ",".join(terms) + output, operands


def einsum(
    *operands: Any,
    out: Any = None,
    dtype: Any = None,
    order: str = "K",
    casting: str = "safe",
    optimize: Any = "greedy",
) -> Array:
    """``np.einsum(subscripts, *operands)``. ``dtype``/``casting`` as NumPy's; ``order`` is accepted
    (the result is C-ordered); ``out`` is not (use the result). See the module's docstring."""
    del order
    if out is not None:
        raise tracing.user_error(
            TraceError, "einsum: out= is not supported in a compiled function; use the result"
        )
    text, given = _split_arguments(operands)
    arrays = [dnp.asarray(x) for x in given]  # NumPy converts Python numbers to (strong) arrays
    subs = parse(text, [x.shape for x in arrays])
    arrays = _common_dtype(text, arrays, dtype, casting)
    work = ops.DType.i64 if arrays[0].ir_dtype.is_bool else arrays[0].ir_dtype  # bools: and/or as 0/1
    terms = [
        _prepare(Term(ops.cast(x, work), labels), subs, k)
        for k, (x, labels) in enumerate(zip(arrays, subs.inputs))
    ]
    term = _contract_all(text, terms, optimize, frozenset(subs.output), subs.sizes)
    result = _arrange(term, subs.output)
    if arrays[0].ir_dtype.is_bool:
        result = dnp.not_equal(result, 0)
    return ops.new_storage(result)


def _prepare(term: Term, subs: Subscripts, k: int) -> Term:
    """Operand ``k`` before any contraction: its diagonals taken, its broadcast axes dropped, and the
    labels no other operand and not the output has summed."""
    term = _squeeze_broadcast(_diagonal(term), subs.sizes)
    elsewhere = frozenset(subs.output).union(*(s for j, s in enumerate(subs.inputs) if j != k))
    return _sum(term, [m for m in term.labels if m not in elsewhere])


def _contract_all(
    text: str, terms: list[Term], optimize: Any, output: frozenset[int], sizes: Mapping[int, int]
) -> Term:
    """The operands contracted along the path ``optimize`` gives, down to one term of ``output``'s labels."""
    sets = [frozenset(t.labels) for t in terms]
    for step in _path(text, optimize, sets, output, sizes):
        if any(not 0 <= k < len(terms) for k in step) or len(set(step)) != len(step):
            raise _error(
                text, f"the contraction path's step {step} does not name operands 0 to {len(terms) - 1}"
            )
        chosen = [terms[k] for k in step]
        kept = _kept(sets, step, output)
        result = chosen[0]
        for i in range(1, len(chosen)):  # a step of more than two: left to right
            later = kept.union(*(t.labels for t in chosen[i + 1 :]))
            result = _contract(result, chosen[i], later, sizes)
        result = _sum(result, [m for m in result.labels if m not in kept])
        terms = [t for k, t in enumerate(terms) if k not in step] + [result]
        sets = [s for k, s in enumerate(sets) if k not in step] + [kept]
    if len(terms) != 1:
        raise _error(text, f"the contraction path leaves {len(terms)} operands; it must end with one")
    return terms[0]


def _common_dtype(text: str, arrays: list[Array], dtype: Any, casting: str) -> list[Array]:
    """The operands in NumPy's result dtype, or in ``dtype`` where they cast to it under ``casting``."""
    if dtype is None:
        target = ops.result_dtype(*arrays)
    else:
        try:
            target = ops.DType.from_numpy(dtype)
        except TypeError as err:
            raise _error(text, str(err)) from None
        for k, x in enumerate(arrays):
            if not ops.can_cast(x.ir_dtype, target, casting):
                raise _error(
                    text,
                    f"operand {k} cannot be cast from {x.dtype} to {target.np} under the rule {casting!r}",
                    DTypeError,
                )
    return [ops.cast(x, target) for x in arrays]
