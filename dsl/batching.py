"""``vmap``: a function of one example mapped over a batch axis of its arguments.

The function is traced once on single examples (a batched argument without its mapped axis); the
compiler rebuilds that trace over a leading batch axis (``compiler/batching.py``: each primitive's
batching rule), and the result is inlined into the current trace, as ``grad`` inlines its joint
function, so ``vmap`` nests with the other transforms (``vmap(jacfwd(jacrev(u)))``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.batching import batch_function
from dsl import ops, pytree, tracing
from dsl.array import Array
from dsl.binding import Binder, Default, Layout
from dsl.compile import Compiled, trace_function
from dsl.errors import ShapeError, TransformError
from dsl.transforms import _inner_binder, _leaves, _options, _unwrap, inline

Axis = int | None

_depth = 0  # how many vmaps are tracing their function now


def inside_vmap() -> bool:
    """Whether a ``vmap`` is tracing its function (``jacfwd``/``jacrev`` pick their basis form by it)."""
    return _depth > 0


def _moved(x: Array, src: int, dst: int) -> Array:
    """``np.moveaxis(x, src, dst)`` as a transpose (nothing when the axis stays)."""
    if src == dst:
        return x
    perm = [a for a in range(x.ndim) if a != src]
    perm.insert(dst, src)
    return ops.transpose(x, tuple(perm))


def _leaf_axes(spec: Any, tree: Any, what: str) -> list[Axis]:
    """``spec`` (an int, None, or a pytree prefix of ``tree``'s) as one axis per leaf of ``tree``."""
    n = len(pytree.flatten(tree)[0])
    if spec is None or isinstance(spec, int):
        return [spec] * n
    if isinstance(spec, (tuple, list)) and isinstance(tree, (tuple, list)) and len(spec) == len(tree):
        return [a for s, t in zip(spec, tree) for a in _leaf_axes(s, t, what)]
    if isinstance(spec, dict) and isinstance(tree, dict) and set(spec) == set(tree):
        # (in the tree's own leaf order: an OrderedDict's is its insertion order)
        return [a for k in pytree.dict_keys(tree) for a in _leaf_axes(spec[k], tree[k], what)]
    raise tracing.user_error(
        TransformError,
        f"vmap: {what} {spec!r} does not match the structure of the arguments (an int or None for "
        "each argument, or a tuple/list/dict of them shaped as the argument)",
    )


def _member(x: Any, axis: int) -> np.ndarray:
    """An example of one member of ``x`` mapped over ``axis`` to trace the function on: its shape,
    dtype and strides (``x``'s without the mapped axis), so that its reshapes are views exactly
    where NumPy's would be on ``x[..., i, ...]`` (a member of a Fortran-ordered batch is not C
    ordered). A traced ``x`` has its stride shadow's strides, in elements."""
    strides = x._shadow.strides if isinstance(x, Array) else x.strides
    unit = x._shadow.itemsize if isinstance(x, Array) else x.itemsize
    dtype = np.dtype(x.dtype)
    shape = x.shape[:axis] + x.shape[axis + 1 :]
    kept = [s // unit * dtype.itemsize for k, s in enumerate(strides) if k != axis]
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, kept, writeable=False)


class _VmapFn:
    """The body of ``vmap``: traceable, and compiled when called on NumPy arrays."""

    # Its trace depends on which positional parameters a call passes by name (``_axes``): part of
    # the signature (``Compiled._key``; elsewhere by position or by name is one signature).
    dsl_keys_positions = True

    def __init__(self, f: Callable[..., Any], in_axes: Any, out_axes: Any) -> None:
        functools.update_wrapper(self, _unwrap(f))
        self.f = f
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.dsl_inner_binder = _inner_binder(f)
        self.binder = Binder(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dsl_call_slots(*self.binder.bind(args, kwargs))

    def _axes(self, args: tuple[Any, ...], layout: Layout) -> list[Axis]:
        """One mapped axis (or None) per array leaf, in IR parameter order; keyword arguments are
        mapped over axis 0, as in JAX."""
        n = layout.n_passed  # positional slots past it: defaults, and parameters passed by name
        spec = self.in_axes
        if isinstance(spec, list):
            spec = tuple(spec)
        if isinstance(spec, tuple) and len(spec) != n:
            raise tracing.user_error(
                TransformError,
                f"vmap: in_axes has {len(spec)} entries but the function was called with {n} "
                "positional arguments",
            )
        axes: list[Axis] = []
        for i, a in enumerate(args):
            if i in layout.static or isinstance(a, Default):
                continue
            entry = spec[i] if isinstance(spec, tuple) and i < n else spec if i < n else 0
            axes += _leaf_axes(entry, a, "in_axes")
        return axes

    def dsl_static_slots(self, args: tuple[Any, ...], layout: Layout) -> frozenset[int]:
        """The slots ``f`` gets as Python values: a Python number not mapped (``in_axes`` None for it)
        reaches ``f`` as itself, as in JAX (``vmap(f, in_axes=(0, None))(x, 2)``: ``f(row, 2)``)."""
        spec = tuple(self.in_axes) if isinstance(self.in_axes, list) else self.in_axes
        return frozenset(
            i
            for i, a in enumerate(args[: layout.n_passed])
            if isinstance(a, (int, float, bool))
            and (spec is None or (isinstance(spec, tuple) and i < len(spec) and spec[i] is None))
        )

    def dsl_call_slots(self, args: tuple[Any, ...], layout: Layout) -> Any:
        layout = layout._replace(static=layout.static | self.dsl_static_slots(args, layout))
        leaves = _leaves(args, layout)
        axes = self._axes(args, layout)
        size = _batch_size(leaves, axes)
        axes = [None if a is None else a % leaves[k].ndim for k, a in enumerate(axes)]
        examples = iter(x if a is None else _member(x, a) for x, a in zip(leaves, axes))
        slots = tuple(
            a
            if i in layout.static or isinstance(a, Default)
            else pytree.unflatten(pytree.flatten(a)[1], [next(examples) for _ in pytree.flatten(a)[0]])
            for i, a in enumerate(args)
        )
        global _depth
        _depth += 1
        try:
            traced = trace_function(self.f, slots, layout)
        finally:
            _depth -= 1
        func, batched = batch_function(traced.func, [a is not None for a in axes], size)
        since = len(tracing.current().ops)
        inputs = [x if a is None else _moved(x, a, 0) for x, a in zip(leaves, axes)]
        outs = [Array.fresh(v) for v in inline(func, [x.value for x in inputs])]
        n_public = len(outs) - len(traced.mutated)
        out_leaves = pytree.unflatten(traced.out_tree, list(range(n_public)))
        out_axes = _leaf_axes(self.out_axes, out_leaves, "out_axes")
        results = [_mapped_out(outs[j], batched[j], a, size) for j, a in enumerate(out_axes)]
        for k, j in zip(traced.mutated, range(n_public, len(outs))):  # in-place updates of arguments
            if batched[j] and axes[k] is None:
                raise tracing.user_error(
                    TransformError,
                    f"vmap: the function modifies argument '{traced.names[k]}' in place with a value that "
                    "differs per example, but that argument is not mapped (its in_axes is None)",
                )
            new = outs[j] if axes[k] is None else _mapped_out(outs[j], batched[j], axes[k], size)
            leaves[k].write(new.value, "write-back", since)
        return pytree.unflatten(traced.out_tree, results)


def _batch_size(leaves: list[Array], axes: list[Axis]) -> int:
    sizes = {}
    for x, a in zip(leaves, axes):
        if a is None:
            continue
        if not -x.ndim <= a < x.ndim:
            raise tracing.user_error(
                ShapeError, f"vmap: in_axes {a} is out of range for an argument of shape {x.shape}"
            )
        sizes[x.shape[a]] = x.shape
    if not sizes:
        raise tracing.user_error(TransformError, "vmap needs at least one mapped argument (in_axes not None)")
    if len(sizes) > 1:
        raise tracing.user_error(
            ShapeError, f"vmap got inconsistent sizes for the mapped axes: {sorted(sizes)}"
        )
    return next(iter(sizes))


def _mapped_out(x: Array, batched: bool, axis: Axis, size: int) -> Array:
    """A result with its batch axis at ``axis`` (an unbatched result is the same for every example)."""
    if axis is None:
        if batched:
            raise tracing.user_error(
                TransformError, "vmap: out_axes is None for a result that differs per example"
            )
        return x
    if not batched:
        x = ops.broadcast_to(x, (size,) + x.shape)
    if not -x.ndim <= axis < x.ndim:  # JAX's ValueError: the axis must exist in the stacked result
        raise tracing.user_error(
            ShapeError,
            f"vmap: out_axes {axis} is out of range for a result of shape {x.shape[1:]} per example "
            f"(stacked: {x.ndim} axes)",
        )
    return _moved(x, 0, axis % x.ndim)


def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Compiled:
    """``f`` mapped over axis ``in_axes`` of its arguments, results stacked along ``out_axes``.

    ``in_axes``: an int or None for every argument, or a tuple with one entry per positional
    argument, each an int, None (not mapped) or a pytree of them shaped as the argument (as in JAX).
    """
    return Compiled(_VmapFn(f, in_axes, out_axes), **_options(f))
