"""Forward mode and Jacobians: ``jvp``, ``jacfwd``, ``jacrev``.

Each traces the user's function and asks the compiler for a function of its linear maps
(``compiler/forward.py``: the jvp by transposing the reverse sweep, the vjp for several cotangents),
then inlines that function into the current trace, as ``grad`` does (``dsl/transforms.py``): called on
NumPy arrays the result is a compiled program; inside another trace it is inlined there, so these
transforms nest with each other and with ``grad`` (``jacfwd(jacrev(f))`` is the Hessian).

``jacfwd`` and ``jacrev`` take one jvp along every basis vector of the inputs, or one vjp for every
basis vector of the outputs: one jvp (vjp) batched over the basis (``compiler/batching.py``), so the
program does not grow with the basis, or, for a small basis under ``vmap`` (the comment at
``VMAP_UNROLL_MAX``), one per basis element unrolled in the program, sharing one forward.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from compiler.batching import batch_function
from compiler.forward import jvp_function, vjp_function
from compiler.ir.core import Function
from compiler.ir.types import DType, TensorType
from compiler.prims import elementwise
from dsl import ops, pytree, tracing
from dsl.array import Array
from dsl.batching import inside_vmap
from dsl.binding import Binder, Default, Layout, argnums_of
from dsl.compile import Compiled, Traced, _leaf_type, trace_function
from dsl.errors import ShapeError, TransformError
from dsl.transforms import Inlined, _argnums, _inline_traced, _inner_binder, _leaves, _options, _unwrap
from runtime.errors import DSLError


def _one_hot(n: int, k: int, shape: tuple[int, ...], dtype: DType) -> Array:
    """Basis vector ``k`` of ``n`` elements, shaped ``shape``: an iota compared with ``k`` (its size
    does not grow with ``n`` as a dense constant's would)."""
    hot = ops.binary(elementwise.eq, ops.arange(n), k)
    return ops.reshape(ops.cast(hot, dtype), shape)


# jacfwd/jacrev take one jvp (vjp) batched over all the basis tangents (cotangents), through
# compiler/batching.py, instead of one per basis element: the program and its compile time then stay
# the same whatever the basis size, and alone it also runs faster (a Hessian of R^n -> R, n = 4 to 48:
# 1.4x to 3.5x, compile 7.5 s against 8.6 to 27 s). Under an enclosing vmap, a basis of at most
# VMAP_UNROLL_MAX elements stays unrolled: there the batched form's tangent matmuls have basis x
# batch rows where the forward values have batch rows, so the CPU's row-block regions
# (compiler/kernel/cpu/regions.py: members of one row count) cannot hold them, and every tangent goes
# through memory whole (per-example Hessians of the 6-layer MLP, batch 10,000: 61 ms against 33 ms
# unrolled; 2 layers, n = 3, 8, 24, batch 4,000: 1.6x to 2.1x slower, but compiled 1.6x to 5.3x faster).
VMAP_UNROLL_MAX = 16


def _batches_basis(size: int) -> bool:
    """Whether a basis of ``size`` elements is batched rather than unrolled (the comment above)."""
    if size <= 1:
        return False
    return size > VMAP_UNROLL_MAX if inside_vmap() else True


def _batched_basis(n: int, start: int, shape: tuple[int, ...], dtype: DType) -> Array:
    """Rows ``start`` to ``start + size`` of the ``n x n`` identity as ``n`` basis tangents shaped
    ``shape`` (``(n,) + shape``): an iota compared with a shifted iota."""
    size = 1
    for d in shape:
        size *= d
    rows = ops.reshape(ops.arange(n), (n, 1))
    cols = ops.binary(elementwise.add, ops.reshape(ops.arange(size), (1, size)), start)
    hot = ops.binary(elementwise.eq, rows, cols)
    return ops.reshape(ops.cast(hot, dtype), (n, *shape))


def _batched_joint(
    traced: Traced,
    joint: Function,
    n_seeds: int,
    size: int,
    leaves: list[Array],
    seeds: Callable[[], list[Array]],
) -> tuple[Inlined, list[bool]] | None:
    """``joint`` (params: the function's, then ``n_seeds`` seeds) batched over a leading axis of
    ``size`` on its seeds and inlined on ``leaves + seeds()``, with which of its results are batched
    (the others do not depend on a seed); None, before anything is traced, where a primitive of it
    cannot be batched over ``size`` (no batching rule: the caller unrolls the basis instead)."""
    flags = [False] * (len(joint.params) - n_seeds) + [True] * n_seeds
    try:
        func, batched = batch_function(joint, flags, size)
    except DSLError:
        return None
    return _inline_traced(traced, func, leaves + seeds()), batched


def _stacked(parts: list[Array], axis: int, shape: tuple[int, ...], dtype: DType) -> Array:
    """The raveled ``parts`` stacked along ``axis`` (0 or 1) and reshaped to ``shape``."""
    if not parts:
        return ops.full(shape, 0, dtype.np)
    flat = [ops.reshape(p, (-1,)) for p in parts]
    return ops.reshape(ops.stack(flat, axis), shape)


def _float_leaves(traced: Traced, nums: Sequence[int], name: str) -> tuple[int, ...]:
    """The IR params of arguments ``nums`` (in argnums order); all must be floating-point."""
    wrt = tuple(k for i in nums for k, arg in enumerate(traced.leaf_arg) if arg == i)
    for k in wrt:
        t = traced.func.params[k].type
        if not t.dtype.is_float:
            raise tracing.user_error(
                TransformError,
                f"{name}: argument '{traced.names[k]}' has dtype {t.dtype.np}; only floating-point "
                "arguments can be differentiated (pass it as float, or leave it out of argnums)",
            )
    return wrt


class _JacobianFn:
    """The body of ``jacfwd``/``jacrev``: traceable, its result one Jacobian per output leaf (shape
    ``out.shape + in.shape``) per argument leaf, structured as JAX structures them."""

    def __init__(self, f: Callable[..., Any], argnums: int | Sequence[int], forward: bool) -> None:
        functools.update_wrapper(self, _unwrap(f))  # the signature and names are f's
        self.f = f
        self.argnums = argnums_of("argnums", argnums, TransformError)  # a mistake: where it is written
        self.forward = forward
        self.name = "jacfwd" if forward else "jacrev"
        self.dsl_inner_binder = _inner_binder(f)
        self.binder = Binder(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dsl_call_slots(*self.binder.bind(args, kwargs))

    def dsl_call_slots(self, args: tuple[Any, ...], layout: Layout) -> Any:
        nums = _argnums(self.argnums, args, layout)
        traced = trace_function(self.f, args, layout, frozen=set(nums))
        wrt = _float_leaves(traced, nums, self.name)
        outputs = traced.func.results[: len(traced.func.results) - len(traced.mutated)]
        params = [traced.func.params[k].type for k in wrt]
        jac = self._jacobian if self.forward else self._jacobian_reverse
        blocks, write_back = jac(traced, wrt, [o.type for o in outputs], params, _leaves(args, layout))
        write_back()  # the function's own updates of non-differentiated arguments: once
        per_output = iter(blocks)
        arg_trees = {i: pytree.flatten(args[i])[1] for i in nums}
        jacobians = []
        for _ in outputs:
            row = iter(next(per_output))
            per_arg = [pytree.unflatten(arg_trees[i], row) for i in nums]
            jacobians.append(tuple(per_arg) if not isinstance(self.argnums, int) else per_arg[0])
        return pytree.unflatten(traced.out_tree, jacobians)

    def _jacobian(
        self,
        traced: Traced,
        wrt: tuple[int, ...],
        outputs: list[TensorType],
        params: list[TensorType],
        leaves: list[Array],
    ) -> tuple[list[list[Array]], Callable[[], None]]:
        """One jvp per element of each differentiated leaf; column ``e`` of block (o, k) is the jvp of
        output ``o`` along basis vector ``e`` of leaf ``k``."""
        total = sum(p.size for p in params)
        if _batches_basis(total):
            as_batched = self._jacobian_batched(traced, wrt, outputs, params, leaves, total)
            if as_batched is not None:
                return as_batched
        sets = [[k] for k, p in enumerate(params) for _ in range(p.size)]
        joint = jvp_function(traced.func, wrt, sets)
        basis = [_one_hot(p.size, e, p.shape, p.dtype) for p in params for e in range(p.size)]
        done = _inline_traced(traced, joint, leaves + basis)
        n = len(outputs)  # the function's values come first: JAX's jacfwd returns only the Jacobian
        tangents = [Array.fresh(v) for v in done.results[n:]]  # per set, one per output
        blocks = []
        for j, o in enumerate(outputs):
            row, start = [], 0
            for p in params:
                columns = [tangents[(start + e) * n + j] for e in range(p.size)]
                row.append(_stacked(columns, 1, o.shape + p.shape, o.dtype))
                start += p.size
            blocks.append(row)
        return blocks, done.write_back

    def _jacobian_reverse(
        self,
        traced: Traced,
        wrt: tuple[int, ...],
        outputs: list[TensorType],
        params: list[TensorType],
        leaves: list[Array],
    ) -> tuple[list[list[Array]], Callable[[], None]]:
        """One vjp per element of each floating-point output; row ``e`` of block (o, k) is the
        cotangent of leaf ``k`` for basis vector ``e`` of output ``o``."""
        for o in outputs:
            if not o.dtype.is_float:
                raise tracing.user_error(
                    TransformError,
                    f"jacrev needs a function with floating-point outputs, but one has dtype {o.dtype.np}",
                )
        total = sum(o.size for o in outputs)
        if _batches_basis(total):
            as_batched = self._jacobian_reverse_batched(traced, wrt, outputs, params, leaves, total)
            if as_batched is not None:
                return as_batched
        sets = [[j] for j, o in enumerate(outputs) for _ in range(o.size)]
        joint = vjp_function(traced.func, wrt, sets)
        basis = [_one_hot(o.size, e, o.shape, o.dtype) for o in outputs for e in range(o.size)]
        done = _inline_traced(traced, joint, leaves + basis)
        n, m = len(outputs), len(wrt)
        grads = [Array.fresh(v) for v in done.results[n:]]  # per set, one per differentiated leaf
        blocks, start = [], 0
        for o in outputs:
            rows = [[grads[(start + e) * m + k] for e in range(o.size)] for k in range(m)]
            blocks.append([_stacked(r, 0, o.shape + p.shape, p.dtype) for r, p in zip(rows, params)])
            start += o.size
        return blocks, done.write_back

    def _jacobian_batched(
        self,
        traced: Traced,
        wrt: tuple[int, ...],
        outputs: list[TensorType],
        params: list[TensorType],
        leaves: list[Array],
        total: int,
    ) -> tuple[list[list[Array]], Callable[[], None]] | None:
        """``_jacobian`` as one jvp batched over the ``total`` basis tangents of all the
        differentiated leaves: the tangent of output ``o`` is ``(total,) + o.shape``, its rows of leaf
        ``k`` transposed to the block ``o.shape + p.shape``."""
        joint = jvp_function(traced.func, wrt, [list(range(len(wrt)))])
        offsets = [sum(p.size for p in params[:k]) for k in range(len(params))]
        joined = _batched_joint(
            traced,
            joint,
            len(wrt),
            total,
            leaves,
            lambda: [_batched_basis(total, at, p.shape, p.dtype) for at, p in zip(offsets, params)],
        )
        if joined is None:
            return None
        done, batched = joined
        n = len(outputs)
        blocks = []
        for j, o in enumerate(outputs):
            t = Array.fresh(done.results[n + j])
            if not batched[n + j]:
                t = ops.broadcast_to(t, (total, *o.shape))
            t = ops.reshape(t, (total, o.size))
            row, start = [], 0
            for p in params:
                part = t[start : start + p.size] if len(params) > 1 else t
                row.append(ops.reshape(ops.transpose(part, (1, 0)), o.shape + p.shape))
                start += p.size
            blocks.append(row)
        return blocks, done.write_back

    def _jacobian_reverse_batched(
        self,
        traced: Traced,
        wrt: tuple[int, ...],
        outputs: list[TensorType],
        params: list[TensorType],
        leaves: list[Array],
        total: int,
    ) -> tuple[list[list[Array]], Callable[[], None]] | None:
        """``_jacobian_reverse`` as one vjp batched over the ``total`` basis cotangents of all the
        outputs: the cotangent of leaf ``k`` is ``(total,) + p.shape``, its rows of output ``o`` the
        block ``o.shape + p.shape``."""
        joint = vjp_function(traced.func, wrt, [list(range(len(outputs)))])
        offsets = [sum(o.size for o in outputs[:j]) for j in range(len(outputs))]
        joined = _batched_joint(
            traced,
            joint,
            len(outputs),
            total,
            leaves,
            lambda: [_batched_basis(total, at, o.shape, o.dtype) for at, o in zip(offsets, outputs)],
        )
        if joined is None:
            return None
        done, batched = joined
        n = len(outputs)
        grads = []
        for k, p in enumerate(params):
            g = Array.fresh(done.results[n + k])
            grads.append(g if batched[n + k] else ops.broadcast_to(g, (total, *p.shape)))
        blocks, start = [], 0
        for o in outputs:
            row = []
            for g, p in zip(grads, params, strict=True):
                part = g[start : start + o.size] if len(outputs) > 1 else g
                row.append(ops.reshape(part, o.shape + p.shape))
            blocks.append(row)
            start += o.size
        return blocks, done.write_back


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Compiled:
    """The Jacobian of ``f`` by forward mode: for each output leaf, shape ``out.shape + in.shape``
    (a tuple over ``argnums`` when it is a tuple; an argument's pytree for a pytree argument)."""
    return Compiled(_JacobianFn(f, argnums, forward=True), **_options(f))


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Compiled:
    """The Jacobian of ``f`` by reverse mode: as ``jacfwd``, one vjp per output element."""
    return Compiled(_JacobianFn(f, argnums, forward=False), **_options(f))


class _Jvp:
    """``f`` at given primals, with its tangents: traced on the dynamic primals' and the tangents'
    leaves. Static primals (static arguments of a compiled ``f``) and defaults not passed are fixed."""

    def __init__(self, f: Callable[..., Any], slots: tuple[Any, ...], layout: Layout) -> None:
        self.f = f
        self.layout = layout
        self.fixed = {i: a for i, a in enumerate(slots) if i in layout.static or isinstance(a, Default)}

    def __call__(self, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        given = iter(primals)
        slots = tuple(
            self.fixed[i] if i in self.fixed else next(given) for i in range(len(self.layout.names))
        )
        traced = trace_function(self.f, slots, self.layout, frozen=set(range(len(slots))))
        wrt = tuple(k for k, p in enumerate(traced.func.params) if p.type.dtype.is_float)
        joint = jvp_function(traced.func, wrt, [list(range(len(wrt)))])
        leaves = _leaves(slots, self.layout)
        flat_tangents = pytree.flatten(tuple(tangents))[0]
        seeds = [ops.cast(ops.asarray(flat_tangents[k]), leaves[k].type.dtype) for k in wrt]
        done = _inline_traced(traced, joint, leaves + seeds)
        done.write_back()  # an integer argument modified in place: as the eager program does
        n = len(done.results) // 2
        out = pytree.unflatten(traced.out_tree, [Array.fresh(v) for v in done.results[:n]])
        tangent_out = pytree.unflatten(traced.out_tree, [Array.fresh(v) for v in done.results[n:]])
        return out, tangent_out


def _check_tangents(primals: tuple[Any, ...], tangents: tuple[Any, ...], layout: Layout) -> None:
    """Tangents must match the primals as JAX checks them: tree structure, shapes, and dtypes (a
    Python number is cast to its primal's floating-point dtype; an integer primal's tangent is
    ignored)."""
    p_flat, p_tree = pytree.flatten(primals)
    t_flat, t_tree = pytree.flatten(tangents)
    if p_tree != t_tree:
        raise tracing.user_error(
            TransformError,
            "dsl.jvp: primals and tangents must have the same tree structure; the primals have "
            f"{len(p_flat)} leaves ({pytree.unflatten(p_tree, ['*'] * len(p_flat))}), the tangents "
            f"{len(t_flat)} ({pytree.unflatten(t_tree, ['*'] * len(t_flat))})",
        )
    names = [n for i, a in enumerate(primals) for n in pytree.leaf_paths(a, f"primals[{i}]")]
    for p, t, name in zip(p_flat, t_flat, names):
        ptype, _ = _leaf_type(p, name)
        ttype, weak = _leaf_type(t, name.replace("primals", "tangents", 1))
        if ptype.shape != ttype.shape:
            raise tracing.user_error(
                ShapeError,
                f"dsl.jvp: {name} has shape {ptype.shape} but its tangent has shape {ttype.shape}; "
                "a tangent has its primal's shape",
            )
        if ptype.dtype.is_float and ttype.dtype != ptype.dtype and not weak:
            raise tracing.user_error(
                TransformError,
                f"dsl.jvp: {name} has dtype {ptype.dtype.np} but its tangent has dtype {ttype.dtype.np}; "
                "a tangent has its primal's dtype",
            )


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(f(*primals), J t)``: ``f``'s value and its derivative along ``tangents`` (forward mode).

    ``primals`` and ``tangents`` are tuples or lists of the same structure, each tangent shaped and
    typed as its primal (a Python number is taken in its primal's dtype). The outputs' tangents have
    their structure; an integer output's tangent is zero, and an integer primal's tangent is ignored.
    Called on NumPy arrays it compiles and runs; inside a trace it is inlined, so it nests with
    ``grad`` and the other transforms. ``f`` runs once: a non-differentiated (integer) argument it
    modifies in place is written once; modifying a floating-point one raises ``InplaceError``.
    """
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise tracing.user_error(
                TransformError,
                f"dsl.jvp: {what} must be a tuple or a list (one entry per argument of f), "
                f"got a {type(value).__name__}",
            )
    primals, tangents = tuple(primals), tuple(tangents)
    binder = Binder(_SignatureOf(f))
    slots, layout = binder.bind(primals, {})
    dynamic = [i for i, a in enumerate(slots) if i not in layout.static and not isinstance(a, Default)]
    if len(tangents) != len(primals):
        raise tracing.user_error(
            TransformError,
            f"dsl.jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal",
        )
    dyn_primals = tuple(primals[i] for i in dynamic)
    dyn_tangents = tuple(tangents[i] for i in dynamic)
    _check_tangents(dyn_primals, dyn_tangents, layout)
    body = _Jvp(f, slots, layout)
    if tracing.active():
        return body(dyn_primals, dyn_tangents)
    run = Compiled(_named(body, f), **_options(f))
    return run(dyn_primals, dyn_tangents)


class _SignatureOf:
    """A callable with ``f``'s signature and static arguments, to bind the primals as ``f``'s call."""

    def __init__(self, f: Callable[..., Any]) -> None:
        functools.update_wrapper(self, _unwrap(f))
        self.dsl_inner_binder = _inner_binder(f)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("only bound, never called")


def _named(body: _Jvp, f: Callable[..., Any]) -> Callable[[tuple[Any, ...], tuple[Any, ...]], Any]:
    """``body`` as a function of (primals, tangents) named after ``f`` (the program's name)."""

    def jvp_of(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
        return body(primals, tangents)

    jvp_of.__name__ = f"jvp_{getattr(_unwrap(f), '__name__', 'fn')}"
    return jvp_of
