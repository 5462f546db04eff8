"""Function transforms: ``grad``, ``value_and_grad``, ``vjp``, ``hessian``, ``stop_gradient``,
``check_grads``.

A transform traces the user's function into IR (``trace_function``) and asks the compiler for the
joint forward+backward function (``compiler.autodiff.grad_function``). Called on NumPy arrays, the
result is a compiled program whose ``grad`` stage is that joint function. Called inside another
trace (``grad(grad(f))``, or inside a compiled function), the joint function is inlined into the
outer trace, so the outer transform differentiates it again: nesting works to any order.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from compiler.autodiff import GradSpec, grad_function
from compiler.ir.core import Function, Op, Value, clone_ops
from compiler.prims import elementwise
from dsl import ops, pytree, tracing
from dsl.array import Array, copy_keeping_strides
from dsl.binding import Binder, Default, Layout, argnums_of, argnums_tuple
from dsl.compile import Compiled, Traced, trace_function
from dsl.errors import ShapeError, TransformError
from runtime.cuda_executable import is_device_array


def _unwrap(f: Callable[..., Any]) -> Callable[..., Any]:
    return f._fn if isinstance(f, Compiled) else f


def _inner_binder(f: Callable[..., Any]) -> Binder | None:
    """A compiled ``f`` keeps its own static arguments under a transform applied to it (its other
    options apply when it is called inside the transform's trace: see ``dsl.compile``)."""
    return f._binder if isinstance(f, Compiled) else None


def _argnums(argnums: int | Sequence[int], args: Sequence[Any], layout: Layout) -> tuple[int, ...]:
    """``argnums`` as positional slot indices; each must be an argument that was passed and is traced."""
    nargs = layout.n_positional
    nums = argnums_tuple("argnums", argnums, TransformError)
    for i in nums:
        if not -nargs <= i < nargs:
            raise tracing.user_error(
                TransformError, f"argnums {argnums!r} is out of range for a function of {nargs} arguments"
            )
    nums = tuple(i % nargs for i in nums)
    for i in nums:
        name = layout.name(i)
        if i in layout.static:
            raise tracing.user_error(
                TransformError,
                f"argnums {argnums!r} includes argument '{name}', which is static (static_argnums or "
                "static_argnames): a static argument is a Python value and has no gradient; leave it "
                "out of argnums, or make it a traced argument",
            )
        if isinstance(args[i], Default):
            raise tracing.user_error(
                TransformError,
                f"argnums {argnums!r} includes argument '{name}', which was not passed (its default is "
                "a Python value and has no gradient); pass it to differentiate with respect to it",
            )
    return nums


def _check_differentiable(traced: Traced, wrt: tuple[int, ...]) -> None:
    """``grad`` needs a real scalar output and floating-point arguments to differentiate; the error
    names the line that computed the output (or the argument)."""
    func = traced.func
    for k in wrt:
        t = func.params[k].type
        if not t.dtype.is_float:
            raise tracing.user_error(
                TransformError,
                f"grad: argument '{traced.names[k]}' has dtype {t.dtype.np}; only floating-point arguments "
                "can be differentiated (pass it as float, or leave it out of argnums)",
            )
    out = func.results[0]
    if out.type.shape != () or not out.type.dtype.is_float:
        where = next(
            (op.loc for op in func.ops if out in op.results), func.arg_locs[0] if func.arg_locs else None
        )
        raise TransformError(
            f"{where}: grad needs a function returning a real scalar, but it returns an array of shape "
            f"{out.type.shape} and dtype {out.type.dtype.np}; reduce it (e.g. .sum()), or use dsl.vjp"
        )


def inline(func: Function, inputs: Sequence[Value]) -> list[Value]:
    """Append ``func``'s ops to the current trace reading ``inputs`` (used once per traced func)."""
    trace = tracing.current()
    mapping = dict(zip(func.params, inputs, strict=True))
    for op in func.ops:
        if op.regions:  # a loop's body may read the parameters too: copied with them replaced
            trace.ops += clone_ops([op], mapping)
            continue
        trace.ops.append(
            Op(op.prim, tuple(mapping.get(v, v) for v in op.operands), op.attrs, op.results, op.loc)
        )
    return [mapping.get(v, v) for v in func.results]


def _leaves(args: Sequence[Any], layout: Layout) -> list[Array]:
    """The traced leaves of a call's slots, in IR parameter order (as ``trace_function`` makes them)."""
    out = []
    for i, a in enumerate(args):
        if i not in layout.static and not isinstance(a, Default):
            out += [ops.asarray(x) for x in pytree.flatten(a)[0]]
    return out


class Inlined(NamedTuple):
    """A traced function inlined into the current trace: its public results and its write-backs."""

    results: list[Value]
    write_back: Callable[[], None]  # applies the function's in-place updates of its arguments: once


def _inline_traced(traced: Traced, func: Function, arrays: list[Array]) -> Inlined:
    """Inline ``func`` (``traced.func`` or its joint function: write-backs last) on ``arrays``."""
    since = len(tracing.current().ops)
    outs = inline(func, [a.value for a in arrays])
    n_public = len(outs) - len(traced.mutated)

    def write_back() -> None:  # the function modified these (non-differentiated) inputs
        for k, new in zip(traced.mutated, outs[n_public:]):
            arrays[k].write(new, "write-back", since)

    return Inlined(outs[:n_public], write_back)


class GradFn:
    """The body of ``grad``/``value_and_grad``: traceable, and known to ``Compiled`` so that a
    top-level gradient gets a real ``grad`` stage in the pipeline."""

    dsl_grad_transform = True

    def __init__(self, f: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, keep_value: bool):
        functools.update_wrapper(self, _unwrap(f))  # the signature and names are f's
        self.f = f  # a Compiled f stays one: its options apply to its own trace
        self.argnums = argnums_of("argnums", argnums, TransformError)  # a mistake: where grad is written
        self.has_aux = has_aux
        self.keep_value = keep_value
        self.dsl_inner_binder = _inner_binder(f)
        self.binder = Binder(self)

    def forward(self, args: tuple[Any, ...], layout: Layout) -> tuple[Traced, GradSpec, Any]:
        """Trace the forward function on a call's slots; returns it, what to differentiate, and the
        result builder."""
        nums = _argnums(self.argnums, args, layout)
        traced = trace_function(self.f, args, layout, frozen=set(nums))
        aux_tree = self._aux_tree(traced.out_tree)
        n_aux = _count(aux_tree)
        wrt = tuple(k for i in nums for k, arg in enumerate(traced.leaf_arg) if arg == i)  # argnums order
        _check_differentiable(traced, wrt)
        arg_trees = {i: pytree.flatten(args[i])[1] for i in nums}
        spec = GradSpec(wrt, self.keep_value, n_aux)
        return traced, spec, functools.partial(self._build, nums, arg_trees, aux_tree)

    def _aux_tree(self, tree: pytree.TreeDef) -> pytree.TreeDef:
        """The structure of the auxiliary output (the first leaf is always the differentiated value)."""
        if not self.has_aux:
            if tree != pytree.LEAF:
                raise tracing.user_error(
                    TransformError, "grad needs a function returning one scalar (or use has_aux=True)"
                )
            return pytree.NONE
        if tree[0] != "tuple" or len(tree[1]) != 2 or tree[1][0] != pytree.LEAF:
            raise tracing.user_error(
                TransformError, "with has_aux=True the function must return a pair (scalar output, aux)"
            )
        return tree[1][1]

    def _build(
        self, nums: tuple[int, ...], arg_trees: dict[int, Any], aux_tree: Any, outs: Sequence[Any]
    ) -> Any:
        outs = list(outs)
        value = outs.pop(0) if self.keep_value else None
        n_aux = _count(aux_tree)
        aux = pytree.unflatten(aux_tree, outs[:n_aux])
        grads_flat = iter(outs[n_aux:])
        per_arg = [pytree.unflatten(arg_trees[i], grads_flat) for i in nums]
        grads = tuple(per_arg) if not isinstance(self.argnums, int) else per_arg[0]
        if self.keep_value:
            return ((value, aux) if self.has_aux else value), grads
        return (grads, aux) if self.has_aux else grads

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dsl_call_slots(*self.binder.bind(args, kwargs))

    def dsl_call_slots(self, args: tuple[Any, ...], layout: Layout) -> Any:
        """Inside a trace: trace, differentiate and inline the joint function."""
        result, write_back = self.inline(args, layout)
        write_back()
        return result

    def inline(self, args: tuple[Any, ...], layout: Layout) -> tuple[Any, Callable[[], None]]:
        """Inline the joint function of a call into the current trace: its result, and the write-backs
        of the arguments the function modifies, to apply once (``hessian`` inlines several)."""
        traced, spec, build = self.forward(args, layout)
        joint = grad_function(traced.func, spec)
        done = _inline_traced(traced, joint, _leaves(args, layout))
        return build([Array.fresh(v) for v in done.results]), done.write_back


def _count(tree: pytree.TreeDef) -> int:
    if tree == pytree.LEAF:
        return 1
    if tree[0] == "None":
        return 0
    children = tree[2] if tree[0] == "dict" else tree[1]
    return sum(_count(c) for c in children)


def _options(f: Callable[..., Any]) -> dict[str, Any]:
    """The options of a compiled ``f`` that a program built from it runs with (its target)."""
    return {"target": f._target} if isinstance(f, Compiled) else {}


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Compiled:
    """The gradient of scalar ``f`` w.r.t. ``argnums`` (only those: no work for other arguments).

    ``argnums`` counts positional arguments; keyword arguments are not differentiated (as in JAX).
    """
    return Compiled(GradFn(f, argnums, has_aux, keep_value=False), **_options(f))


def value_and_grad(
    f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Compiled:
    """``(value, grads)``, or ``((value, aux), grads)`` with ``has_aux``."""
    return Compiled(GradFn(f, argnums, has_aux, keep_value=True), **_options(f))


def stop_gradient(x: Any) -> Array:
    """``x`` itself, but no gradient flows through it."""
    return ops.unary(elementwise.stop_gradient, x)


class _VjpForward:
    """The forward of ``dsl.vjp``: ``f`` with its floating-point arguments frozen, so that modifying
    one in place raises ``InplaceError`` at trace time, before anything runs or is written."""

    def __init__(self, f: Callable[..., Any]) -> None:
        functools.update_wrapper(self, _unwrap(f))
        self.f = f
        self.dsl_inner_binder = _inner_binder(f)
        self.binder = Binder(self)

    def __call__(self, *args: Any) -> Any:
        return self.dsl_call_slots(*self.binder.bind(args, {}))

    def dsl_call_slots(self, slots: tuple[Any, ...], layout: Layout) -> Any:
        traced = trace_function(self.f, slots, layout, frozen=set(range(len(slots))))
        done = _inline_traced(traced, traced.func, _leaves(slots, layout))
        done.write_back()  # a modified integer argument: as the eager program does
        return pytree.unflatten(traced.out_tree, [Array.fresh(v) for v in done.results])


class _VjpFn:
    """The backward of ``dsl.vjp``: the primals' cotangents for a cotangent of the output. It never
    writes into the primals (the forward did that already, once). Static primals (static arguments
    of a compiled ``f``) and defaults not passed are fixed here (a static primal's cotangent is
    ``None``); the other primals and the cotangent are its arguments."""

    def __init__(self, f: Callable[..., Any], slots: Sequence[Any], layout: Layout, n_primals: int) -> None:
        self.f = f
        self.layout = layout
        self.n_primals = n_primals
        self.fixed = {i: a for i, a in enumerate(slots) if i in layout.static or isinstance(a, Default)}

    def __call__(self, *args: Any) -> Any:
        given, ct = iter(args[:-1]), args[-1]
        slots = tuple(
            self.fixed.get(i) if i in self.fixed else next(given) for i in range(len(self.layout.names))
        )
        traced = trace_function(self.f, slots, self.layout, frozen=set(range(len(slots))))
        wrt = tuple(k for k, p in enumerate(traced.func.params) if p.type.dtype.is_float)
        joint = grad_function(traced.func, GradSpec(wrt, cotangent_param=True))
        leaves = _leaves(slots, self.layout)
        outs = inline(joint, [a.value for a in leaves] + [s.value for s in _seeds(traced, ct)])
        grads = iter(Array.fresh(v) for v in outs[: len(wrt)])
        flat = iter(
            next(grads) if k in wrt else ops.full(leaves[k].shape, 0, leaves[k].dtype)
            for k in range(len(leaves))
        )
        return tuple(
            None if i in self.layout.static else pytree.unflatten(pytree.flatten(slots[i])[1], flat)
            for i in range(self.n_primals)
        )


def _seeds(traced: Traced, ct: Any) -> list[Array]:
    """The cotangent ``ct`` of ``dsl.vjp``'s output, one seed per floating-point output leaf (as the
    joint function takes them), each cast to its leaf's dtype; ``ct`` has the output's structure
    (JAX's rule; the leaves of integer outputs are not read, as JAX's ``float0``)."""
    leaves, tree = pytree.flatten(ct)
    if tree != traced.out_tree:
        raise tracing.user_error(
            TransformError,
            f"vjp_fn: the cotangent must have the structure of the function's output, "
            f"{_structure(traced.out_tree)}, but it is {_structure(tree)}",
        )
    results = traced.func.results[: len(leaves)]
    for k, (c, r) in enumerate(zip(leaves, results, strict=True)):
        if not r.type.dtype.is_float or isinstance(c, (int, float)):  # (a Python number: weak)
            continue
        a = ops.asarray(c)
        shape, dtype = tuple(a.shape), a.ir_dtype
        if shape != r.type.shape or dtype is not r.type.dtype:  # (JAX's ValueError; it was cast or broadcast)
            raise tracing.user_error(
                ShapeError if shape != r.type.shape else TransformError,
                f"vjp_fn: cotangent {k} has shape {shape} and dtype {dtype.np}, but the output it belongs "
                f"to has shape {r.type.shape} and dtype {r.type.dtype.np}",
            )
    return [
        ops.cast(ops.asarray(c), r.type.dtype)
        for c, r in zip(leaves, results, strict=True)
        if r.type.dtype.is_float
    ]


def _structure(tree: pytree.TreeDef) -> str:
    """A pytree's structure for messages: ``(*, {'s': *})``."""
    return repr(pytree.unflatten(tree, iter(lambda: _LEAF, None)))


class _Leaf:
    def __repr__(self) -> str:
        return "*"


_LEAF = _Leaf()


def _snapshot(tree: Any) -> Any:
    """A copy of the arrays of ``tree`` (numbers are values already)."""
    flat, treedef = pytree.flatten(tree)
    return pytree.unflatten(treedef, [_copy_leaf(x) for x in flat])


def _copy_leaf(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return copy_keeping_strides(x)  # traced as the caller's array was (its reshapes too)
    if is_device_array(x):  # Numba, CuPy or PyTorch: copied into a Numba device array
        from numba import cuda

        src = cuda.as_cuda_array(x)
        copy = cuda.device_array(src.shape, src.dtype)
        copy.copy_to_device(src)
        return copy
    return x


def vjp(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(f(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one gradient per primal.

    As in JAX, ``vjp_fn`` differentiates at the primals' values when ``vjp`` was called: changing
    the caller's arrays afterwards does not change its result (the primals are copied). ``f`` runs
    once, in ``vjp``: an integer argument it modifies in place is written then, and ``vjp_fn``
    writes nothing. Modifying a floating-point (differentiated) argument raises ``InplaceError``
    before anything runs.
    """
    body = _VjpForward(f)
    forward = Compiled(body, **_options(f))
    slots, layout = body.binder.bind(primals, {})
    saved = [
        _snapshot(a) for i, a in enumerate(slots) if i not in layout.static and not isinstance(a, Default)
    ]
    out = forward(*primals)  # traced (and the leaf rule checked) before it runs and writes
    backward = Compiled(_VjpFn(f, slots, layout, len(primals)), **_options(f))
    return out, lambda ct: backward(*saved, ct)


class _HessianFn:
    def __init__(self, f: Callable[..., Any], argnums: int | Sequence[int]) -> None:
        functools.update_wrapper(self, _unwrap(f))
        self.f = f
        self.argnums = argnums_of("argnums", argnums, TransformError)
        self.dsl_inner_binder = _inner_binder(f)
        self.binder = Binder(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dsl_call_slots(*self.binder.bind(args, kwargs))

    def dsl_call_slots(self, args: tuple[Any, ...], layout: Layout) -> Any:
        nums = _argnums(self.argnums, args, layout)
        trees = [pytree.flatten(args[i]) for i in nums]
        xs = [ops.asarray(x) for leaves, _ in trees for x in leaves]  # every differentiated leaf
        # the inner gradient sees the call's slots as the outer one does: static arguments and
        # defaults not passed stay Python values
        inner = layout._replace(
            static=layout.static | {k for k, a in enumerate(args) if isinstance(a, Default)}
        )
        # one reverse-over-reverse sweep per row: (leaf, element), or one sweep when all are empty
        rows = [(k, j) for k, x in enumerate(xs) for j in range(x.size)] or [(-1, 0)]
        swept: list[list[Array]] = []
        write_back = None

        def component_of(k: int, j: int) -> Callable[..., Any]:
            # (a pass-through ``(*a, **kw)``: bound against f's signature, ``binding.signature_of``)
            @functools.wraps(_unwrap(self.f))  # f's signature: names in messages are the user's
            def component(*a: Any, **kw: Any) -> Any:
                slots = a + tuple(kw[name] for name in layout.keywords)
                g, inner_write_back = GradFn(self.f, nums, False, False).inline(slots, inner)
                inner_write_back()
                flat = pytree.flatten(g)[0]
                return ops.reshape(flat[k], (-1,))[j] if k >= 0 else ops.sum(flat[0])

            return component

        for k, j in rows:
            row, row_write_back = GradFn(component_of(k, j), nums, False, False).inline(args, layout)
            swept.append(pytree.flatten(row)[0])
            # every row reads the arguments as given and the function's own in-place updates of
            # non-differentiated arguments happen once, as in the eager program: after all rows
            write_back = write_back or row_write_back
        assert write_back is not None
        write_back()

        def block(k: int, m: int) -> Array:
            """d2f / dx_k dx_m, shaped ``xs[k].shape + xs[m].shape``."""
            parts = [r[m] for r, (kk, _) in zip(swept, rows) if kk == k]
            shape = xs[k].shape + xs[m].shape
            return ops.reshape(ops.stack(parts, 0), shape) if parts else ops.full(shape, 0.0, xs[m].dtype)

        return self._nest(trees, block)

    def _nest(self, trees: list[tuple[list[Any], pytree.TreeDef]], block: Callable[[int, int], Array]) -> Any:
        """JAX's layout: per argnum (a tuple for a tuple), its structure of rows, each per argnum
        its structure of blocks."""
        starts = list(itertools.accumulate([len(leaves) for leaves, _ in trees], initial=0))

        def per_argnum(leaf: Callable[[int], Any]) -> Any:
            parts = [
                pytree.unflatten(tree, [leaf(starts[a] + i) for i in range(len(leaves))])
                for a, (leaves, tree) in enumerate(trees)
            ]
            return parts[0] if isinstance(self.argnums, int) else tuple(parts)

        return per_argnum(lambda k: per_argnum(lambda m: block(k, m)))


def hessian(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Compiled:
    """The dense Hessian of scalar ``f`` w.r.t. ``argnums`` (an int or a tuple of ints), laid out as
    JAX's: for an array argument ``x``, shape ``x.shape + x.shape``; for a tuple of argnums, the
    nested tuple of blocks ``H[a][b]``; for a pytree argument, its structure of structures.

    A non-differentiated argument that ``f`` modifies in place is updated once, as by one call of
    ``f``, and every row of the Hessian is taken at the arguments' values before that update.
    """
    return Compiled(_HessianFn(f, argnums), **_options(f))


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    order: int = 1,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Compare reverse-mode derivatives of ``f`` (up to ``order`` 1 or 2) with central finite
    differences in float64 along random directions; raises ``AssertionError`` on a mismatch."""
    rng = np.random.default_rng(seed)
    args64 = [np.asarray(a, dtype=np.float64) for a in args]
    weights = rng.standard_normal(np.shape(Compiled(_unwrap(f))(*args64)))

    def scalar(*a: Any) -> Any:
        return ops.sum(ops.binary(elementwise.mul, f(*a), np.asarray(weights)))

    _check_first_order(scalar, args64, eps, rtol, rng)
    if order >= 2:
        directions = [rng.standard_normal(a.shape) for a in args64]

        def directional(*a: Any) -> Any:
            gs = GradFn(scalar, tuple(range(len(a))), False, False)(*a)
            terms = [ops.sum(ops.binary(elementwise.mul, g, d)) for g, d in zip(gs, directions)]
            return functools.reduce(lambda p, q: ops.binary(elementwise.add, p, q), terms)

        _check_first_order(directional, args64, eps, rtol, rng)


def _check_first_order(
    fn: Callable[..., Any], args: list[np.ndarray], eps: float, rtol: float, rng: Any
) -> None:
    value = Compiled(fn)
    grads = grad(fn, tuple(range(len(args))))(*args)
    v = [rng.standard_normal(a.shape) for a in args]
    plus = float(value(*[a + eps * d for a, d in zip(args, v)]))
    minus = float(value(*[a - eps * d for a, d in zip(args, v)]))
    numeric = (plus - minus) / (2 * eps)
    analytic = sum(float(np.sum(g * d)) for g, d in zip(grads, v))
    scale = max(1.0, abs(numeric), abs(analytic))
    if abs(numeric - analytic) > rtol * scale * 10 + 1e-7 * scale:
        raise AssertionError(
            f"check_grads: reverse mode gives {analytic!r}, central differences give {numeric!r}"
        )
