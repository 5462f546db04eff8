"""``dsl.compile``: trace once per input signature, compile, cache, and run.

The signature of a call is the structure of its arguments, each array leaf's shape, dtype and layout
(C order or its strides: NumPy's reshape is a view or a copy depending on them; Python scalars count by
kind: they are weak, like NumPy's), the values of static arguments, and the target.
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from compiler.compilation import PRECISIONS
from compiler.ir.core import Block, Function, Location, Value
from compiler.ir.types import DType, TensorType, is_supported_numpy_dtype
from compiler.pipeline import Options, Program, compile_function
from dsl import ops, pytree, scalar_args, tracing
from dsl.array import Array, Storage, Strides, argument_shadow, argument_strides
from dsl.binding import Binder, CallError, Default, Layout, argnums_tuple
from dsl.errors import DSLError, TraceError
from runtime.cuda_executable import device_layout, is_device_array, is_plain_device_array
from runtime.devices import resolve_target
from runtime.errors import DeviceError

_SCALARS = (bool, int, float)
_WEAK_DTYPE = {bool: DType.i1, int: DType.i64, float: DType.f64}


def _leaf_type(leaf: Any, name: str) -> tuple[TensorType, bool]:
    """The IR type of one argument leaf and whether it is weak (a Python scalar)."""
    if isinstance(leaf, Array):  # a traced array: a transform traced inside another trace
        return leaf.type, leaf.weak
    if isinstance(leaf, np.ma.MaskedArray):  # its mask would be dropped: a wrong answer (JAX refuses too)
        raise tracing.user_error(
            CallError,
            f"argument '{name}' is a NumPy masked array, whose mask dslc would not see; pass "
            f"{name}.filled(value), or its data and mask as two arrays (e.g. for where=)",
        )
    if isinstance(leaf, np.ndarray) or isinstance(leaf, np.generic):
        # (another byte order is its dtype all the same: the executable converts it, as NumPy's ufuncs)
        dtype = leaf.dtype if leaf.dtype.isnative else leaf.dtype.newbyteorder("=")
        if not is_supported_numpy_dtype(dtype):
            raise tracing.user_error(
                CallError,
                f"argument '{name}' has dtype {leaf.dtype}, which dslc does not support; "
                "convert it to float32, float64, int32, int64 or bool",
            )
        if leaf.ndim > tracing.MAX_RANK:
            axes = f"argument '{name}' has {leaf.ndim} axes"
            raise tracing.user_error(CallError, f"{axes}: {tracing.TOO_MANY_AXES}")
        return TensorType(tuple(leaf.shape), DType.from_numpy(dtype)), False
    for kind in _SCALARS[::-1]:  # bool before int: bool is a subclass of int
        if type(leaf) is kind:
            return TensorType((), _WEAK_DTYPE[kind]), True
    if is_device_array(leaf):  # a GPU array (Numba, CuPy, PyTorch): typed by its interface
        _, dtype, shape, _ = device_layout(leaf)
        if not is_supported_numpy_dtype(dtype):
            raise tracing.user_error(
                CallError,
                f"argument '{name}' has dtype {dtype}, which dslc does not support; "
                "convert it to float32, float64, int32, int64 or bool",
            )
        return TensorType(shape, DType.from_numpy(dtype)), False
    raise tracing.user_error(
        CallError,
        f"argument '{name}' is of type {type(leaf).__name__}, which dslc cannot trace; pass NumPy arrays, "
        "Python numbers or tuples/lists/dicts of them, or mark the argument static (static_argnums)",
    )


def _symbol(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "fn"
    return clean if not clean[0].isdigit() else "f_" + clean


class Lowered:
    """A traced and compiled program, for inspection (``f.lower(...)``)."""

    def __init__(self, program: Program) -> None:
        self._program = program

    @property
    def program(self) -> Program:
        """The compiler's record of this program: IR per stage, plan, generated source, executable."""
        return self._program

    def stages(self) -> list[str]:
        return list(self._program.stage_text)

    def ir(self, stage: str = "optimized") -> str:
        try:
            return self._program.stage_text[stage]
        except KeyError:
            raise tracing.user_error(
                DSLError, f"no IR stage {stage!r}; this program has: {', '.join(self.stages())}"
            ) from None

    def memory_plan(self) -> Any:
        return self._program.memory_plan

    def source(self) -> str:
        return self._program.source

    def explain_inplace(self) -> str:
        return self._program.explain_inplace()

    def ptx(self, cc: tuple[int, int] = (9, 0)) -> str:
        """The PTX of every CUDA kernel of this program for compute capability ``cc`` (e.g. (8, 0)).

        Works without a GPU (NVVM from the ``cuda`` extra), whatever target the program was built for.
        """
        return self._program.ptx(cc)


class _Entry:
    """One compiled signature: runs the executable and rebuilds the result structure. The executable
    is built at the first call (compiling needs no device, running does: ``lower`` works anywhere)."""

    def __init__(self, program: Program, build: Callable[[Sequence[Any]], Any]):
        self.program = program
        self._run: Callable[..., tuple[Any, ...]] | None = None
        self.build = build
        self.check_scalars = scalar_args.call_check(program.stages["traced"])  # None: nothing to check

    @property
    def run(self) -> Callable[..., tuple[Any, ...]]:
        if self._run is None:
            try:
                self._run = self.program.executable
            except DeviceError as err:  # a CUDA program called where there is no GPU
                raise tracing.user_error(DeviceError, str(err)) from None
        return self._run

    def __call__(self, leaves: list[Any]) -> Any:
        if self.check_scalars is not None:
            self.check_scalars(leaves)
        run = self._run or self.run
        try:
            return self.build(run(*leaves))  # the executable checks mutated/donated arguments
        except OverflowError as err:
            if isinstance(err, DSLError):
                raise
            raise scalar_args.int64_overflow(leaves, self.program.stages["traced"].arg_names) or err from None


class Compiled:
    """A function compiled by ``dsl.compile``: call it like the original."""

    def __init__(
        self,
        fn: Callable[..., Any],
        target: str | None = None,
        static_argnums: int | Sequence[int] = (),
        donate_argnums: int | Sequence[int] = (),
        inplace: bool | None = None,
        strict_inplace: bool = False,
        static_argnames: str | Sequence[str] = (),
        precision: str = "highest",
    ) -> None:
        functools.update_wrapper(self, fn)
        if precision not in PRECISIONS:
            choices = ", ".join(map(repr, PRECISIONS))
            raise tracing.user_error(DeviceError, f"unknown precision {precision!r}; choose one of {choices}")
        self._fn = fn
        self._precision = precision
        self._target = target
        self._binder = Binder(fn, static_argnums, static_argnames)
        self._static_slots = getattr(fn, "dsl_static_slots", None)  # (looked up once: per call below)
        donate = argnums_tuple("donate_argnums", donate_argnums)
        self._binder.check_argnums("donate_argnums", donate)
        self._donate = donate
        self._strict_inplace = strict_inplace
        self._inplace = inplace
        self._cache: dict[Any, _Entry] = {}
        self._lock = threading.Lock()
        self.trace_count = 0  # how many times the Python function was traced (tests count on it)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A compiled method: bound to its instance as a plain function is (JAX's jit too)."""
        return self if obj is None else functools.partial(self, obj)

    # ---- calling -----------------------------------------------------------------------------

    @property
    def dsl_call_slots(self) -> Callable[[tuple[Any, ...], Layout], Any] | None:
        """A transform's body (``dsl.grad(f)``, ``dsl.vmap(f)``) traced by an enclosing transform
        takes the slots as they are, defaults not passed included (``trace_function``): rebound
        from values, a default would become a passed, traced argument (``vmap(grad(f))`` of an ``f``
        with ``axis=0``). None for a plain function."""
        inner = getattr(self._fn, "dsl_call_slots", None)
        if inner is None:
            return None

        def call(args: tuple[Any, ...], layout: Layout) -> Any:
            with tracing.strict_inplace(self._strict_inplace):
                return inner(args, layout)

        return call

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Layout]:
        """The call's slots; a transform's body may keep more of them Python values (``vmap``: a
        number not mapped)."""
        args, layout = self._binder.bind(args, kwargs)
        if self._static_slots is not None:
            layout = layout._replace(static=layout.static | self._static_slots(args, layout))
        return args, layout

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tracing.active():  # called while tracing (inside a transform or another compiled fn)
            with tracing.strict_inplace(self._strict_inplace):
                takes_slots = getattr(self._fn, "dsl_call_slots", None)  # a transform's body: bound here,
                if takes_slots is not None:  # so that this function's static arguments stay static
                    return takes_slots(*self._bind(args, kwargs))
                return self._fn(*args, **kwargs)
        args, layout = self._bind(args, kwargs)
        key, leaves = self._key(args, layout)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(key, args, layout)
        return entry(leaves)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and compile for these arguments without running."""
        args, layout = self._bind(args, kwargs)
        key, _ = self._key(args, layout)
        entry = self._cache.get(key) or self._compile(key, args, layout)
        return Lowered(entry.program)

    def _key(self, args: tuple[Any, ...], layout: Layout) -> tuple[tuple[Any, ...], list[Any]]:
        """The cache key of a call (its signature) and its array leaves, in IR parameter order."""
        parts: list[Any] = []
        if layout.keywords:  # which slots are passed by keyword is part of the signature
            parts.append(("keywords", layout.keywords))
        if layout.n_passed != layout.n_positional and getattr(self._fn, "dsl_keys_positions", False):
            parts.append(("passed", layout.n_passed))  # (vmap maps one passed by name over axis 0)
        leaves: list[Any] = []
        for i, a in enumerate(args):
            if isinstance(a, Default):
                parts.append(("default", i))  # the same default every call: its position suffices
            elif i in layout.static:
                try:
                    hash(a)
                except TypeError:
                    raise tracing.user_error(
                        CallError, f"static argument '{layout.name(i)}' must be hashable"
                    ) from None
                parts.append(("static", type(a), a))
            elif type(a) is np.ndarray:
                parts.append((a.shape, a.dtype, None if a.flags.c_contiguous else _leaf_strides(a)))
                leaves.append(a)
            else:
                try:
                    flat, treedef = pytree.flatten(a)
                except TypeError as err:  # (a dict whose keys do not sort)
                    raise tracing.user_error(CallError, f"argument '{layout.name(i)}': {err}") from None
                keys = [_fast_leaf_key(x) for x in flat]
                if None in keys:  # (names only where a leaf needs the full check: they cost)
                    names = pytree.leaf_paths(a, layout.name(i))
                    keys = [k or _leaf_key(x, n) for k, x, n in zip(keys, flat, names)]
                parts.append((treedef, tuple(keys)))
                leaves.extend(flat)
        return tuple(parts), leaves

    # ---- tracing and compiling -----------------------------------------------------------------

    def _compile(self, key: Any, args: tuple[Any, ...], layout: Layout) -> _Entry:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                try:
                    target = resolve_target(self._target)
                except DeviceError as err:
                    raise tracing.user_error(DeviceError, str(err)) from None
                if target == "cpu":
                    self._no_device_arrays(args, layout)
                donated = self._donated_leaves(args, layout)
                options = Options(
                    target=target,
                    donate_argnums=donated,
                    strict_inplace=self._strict_inplace,
                    precision=self._precision,
                )
                if self._inplace is not None:
                    options.inplace = self._inplace
                if getattr(self._fn, "dsl_grad_transform", False):  # autodiff runs as a pipeline pass
                    self.trace_count += 1
                    traced, options.grad, build = self._fn.forward(args, layout)  # type: ignore[attr-defined]
                    func = traced.func
                else:
                    func, out_tree, _, _ = self._trace(args, layout)
                    build = _unflattener(out_tree)
                program = compile_function(func, options)
                entry = _Entry(program, build)
                self._cache[key] = entry
                dump_dir = os.environ.get("DSL_DUMP_IR")
                if dump_dir:
                    program.dump(dump_dir)
        return entry

    def _no_device_arrays(self, args: tuple[Any, ...], layout: Layout) -> None:
        """A GPU array given to a CPU program is a mistake, not something to copy silently."""
        for i, a in enumerate(args):
            if i in layout.static or isinstance(a, Default):
                continue
            flat = pytree.flatten(a)[0]
            for leaf, name in zip(flat, pytree.leaf_paths(a, layout.name(i))):
                if is_device_array(leaf):
                    raise tracing.user_error(
                        CallError,
                        f"argument '{name}' is a GPU array, but this function compiles for the CPU; "
                        "use dsl.compile(..., target='cuda') (or pass NumPy arrays)",
                    )

    def _donated_leaves(self, args: tuple[Any, ...], layout: Layout) -> tuple[int, ...]:
        """``donate_argnums`` counts positional slots (negative ones from the last); the IR counts
        array leaves."""
        n = layout.n_positional
        donate = {d % n for d in self._donate if -n <= d < n}
        out, k = [], 0
        for i, a in enumerate(args):
            if i in layout.static or isinstance(a, Default):
                continue
            flat = pytree.flatten(a)[0]
            if i in donate:  # only arrays can be donated: a Python number has no memory to reuse
                out += [k + j for j, x in enumerate(flat) if isinstance(x, np.ndarray) or is_device_array(x)]
            k += len(flat)
        return tuple(out)

    def _trace(
        self, args: tuple[Any, ...], layout: Layout | None = None
    ) -> tuple[Function, pytree.TreeDef, list[int], list[str]]:
        """Trace for a call's slots (default: ``args`` passed by position, bound here)."""
        if layout is None:
            args, layout = self._bind(args, {})
        self.trace_count += 1
        t = trace_function(self._fn, args, layout)
        return t.func, t.out_tree, t.mutated, t.names


class Traced(NamedTuple):
    func: Function
    out_tree: pytree.TreeDef
    mutated: list[int]  # leaves written back (indices into params)
    names: list[str]  # one per leaf
    leaf_arg: list[int]  # the Python argument each leaf belongs to


FROZEN = "argument '{}' is being differentiated and can't be modified in place; modify a copy instead"


def trace_function(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    layout: Layout | None = None,
    frozen: frozenset[int] | set[int] = frozenset(),
) -> Traced:
    """Trace ``fn`` on abstract arrays shaped like ``args`` (NumPy arrays, Python numbers or traced
    arrays), the slots of a call laid out by ``layout`` (default: all positional, none static): one
    IR param per array leaf. The floating-point leaves of ``frozen`` arguments (those being
    differentiated) must not be modified in place."""
    if layout is None:
        layout = Layout(tuple(f"arg{i}" for i in range(len(args))), len(args), frozenset())
    params: list[Value] = []
    arrays: list[Array] = []
    names: list[str] = []
    leaf_arg: list[int] = []
    mutable: list[bool] = []
    # a transform's body (hessian's, vjp's) takes the slots as they are, defaults not passed included
    takes_slots = getattr(fn, "dsl_call_slots", None)
    outermost = not tracing.active()  # a nested trace may read its enclosing traces' arrays
    with tracing.tracing() as trace:
        traced_args = []
        for i, a in enumerate(args):
            if isinstance(a, Default):
                traced_args.append(a if takes_slots else a.value)
                continue
            if i in layout.static:
                traced_args.append(a)
                continue
            flat, treedef = pytree.flatten(a)
            leaf_arrays = []
            for leaf, name in zip(flat, pytree.leaf_paths(a, layout.name(i))):
                ttype, weak = _leaf_type(leaf, name)
                param = Value(ttype)
                arr = Array(Storage(param, arg_name=name), shadow=_leaf_shadow(leaf, ttype), weak=weak)
                if i in frozen and ttype.dtype.is_float:
                    arr._storage.frozen = FROZEN.format(name)
                params.append(param)
                arrays.append(arr)
                names.append(name)
                leaf_arg.append(i)
                mutable.append((isinstance(leaf, (np.ndarray, Array)) or is_device_array(leaf)) and not weak)
                leaf_arrays.append(arr)
            traced_args.append(pytree.unflatten(treedef, leaf_arrays))
        try:
            out = takes_slots(tuple(traced_args), layout) if takes_slots else layout.call(fn, traced_args)
        except ValueError as err:
            if not str(err).startswith("setting an array element with a sequence"):
                raise
            # NumPy's message for ``G[0] = x.sum()`` with ``G`` a NumPy array the function closes over
            raise TraceError(
                f"{tracing.traceback_location(err)}: a NumPy array cannot hold a traced array (NumPy: "
                f"{err}); its value is not known at trace time: pass the array you write into as an "
                "argument of the compiled function (it is then updated in place), or return the value"
            ) from None
        trace.loc_override = _function_location(fn)
        out_leaves, out_tree = pytree.flatten(out)
        results = [_result_value(x) for x in out_leaves]
        mutated = [k for k, arr in enumerate(arrays) if mutable[k] and arr._storage.value is not params[k]]
        writebacks = [arrays[k]._storage.value for k in mutated]
    where = _function_location(fn)
    func = Function(
        _symbol(getattr(fn, "__name__", "fn")),
        Block(tuple(params), tuple(trace.ops), tuple(results + writebacks)),
        tuple(names),
        {
            **({"dsl.writeback": tuple(mutated)} if mutated else {}),
            **scalar_args.narrowed_attrs(trace, params),
        },
        tuple(where for _ in params),
    )
    if outermost:  # (what a nested trace reads of its enclosing ones is defined once it is inlined)
        _check_defined(func.body, set(), where)
    return Traced(func, out_tree, mutated, names, leaf_arg)


def _check_defined(block: Block, outer: set[Value], where: Location) -> None:
    """Every value an op of ``block`` reads was defined before it in this trace (a parameter, an
    earlier op's result, or one of an enclosing block's): an array kept from another trace (appended
    to a list by an earlier compiled call, or inside a ``vmap`` or ``grad`` body) is a TraceError at
    the user's line, where it crashed the code generator."""
    defined = outer | set(block.args)
    for op in block.ops:
        if not defined.issuperset(op.operands):
            raise TraceError(
                f"{op.loc}: this reads an array traced elsewhere: one kept from another compiled "
                "call, or from inside a transform's function (vmap, grad, a loop body) after it "
                "returned. Pass it in as an argument, or return it from that function"
            )
        for region in op.regions:
            _check_defined(region, defined, op.loc)
        defined.update(op.results)
    if not defined.issuperset(block.results):
        raise TraceError(
            f"{where}: the function returns an array traced elsewhere (kept from another compiled "
            "call or from inside a transform's function); return arrays computed from its arguments"
        )


def _unflattener(out_tree: pytree.TreeDef) -> Callable[[Sequence[Any]], Any]:
    if out_tree == pytree.LEAF:
        return operator.itemgetter(0)
    return functools.partial(pytree.unflatten, out_tree)


def _function_location(fn: Callable[..., Any]) -> Location:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return Location(code.co_filename, code.co_firstlineno, 1) if code else Location("<unknown>", 0)


def _fast_leaf_key(leaf: Any) -> Any:
    """The signature of the common leaves, a NumPy array, a Numba device array or a Python number, without
    building its IR type (a call computes one per leaf: it is most of a call's host time); ``None``
    for the rest (``_leaf_key``). Its dtype and rank are checked when the signature is traced."""
    kind = type(leaf)
    if kind is np.ndarray:
        return (leaf.shape, leaf.dtype, None if leaf.flags.c_contiguous else _leaf_strides(leaf))
    if kind is float or kind is int or kind is bool:
        return kind
    if is_plain_device_array(leaf):  # (marked: a NumPy array's program may be a CPU one, which refuses it)
        strides = None if leaf.is_c_contiguous() else _leaf_strides(leaf)
        return ("device", leaf.shape, leaf.dtype, strides)
    return None


def _leaf_key(leaf: Any, name: str) -> tuple[Any, ...]:
    ttype, weak = _leaf_type(leaf, name)
    return (ttype, weak, _leaf_strides(leaf))


def _leaf_strides(leaf: Any) -> Strides:
    """An array argument's strides as the signature holds them (``dsl.array.argument_strides``);
    ``None`` (C order) for the rest."""
    if isinstance(leaf, np.ndarray):
        return argument_strides(leaf.shape, leaf.strides, leaf.itemsize)
    if is_device_array(leaf):
        _, dtype, shape, strides = device_layout(leaf)
        return argument_strides(shape, strides, dtype.itemsize)
    return None


def _leaf_shadow(leaf: Any, ttype: TensorType) -> np.ndarray:
    """The stride shadow of an argument's traced array: the caller's array's strides, so that its
    reshapes are views exactly where NumPy's are (a traced leaf keeps its own)."""
    if isinstance(leaf, Array):
        return leaf._shadow
    return argument_shadow(ttype.shape, ttype.dtype.np, _leaf_strides(leaf))


def _result_value(x: Any) -> Value:
    if isinstance(x, Array) or isinstance(x, (*_SCALARS, np.ndarray, np.generic)):
        return ops.asarray(x).value
    where = tracing.current().loc_override or tracing.user_location()  # the function's def line
    raise TraceError(
        f"{where}: the compiled function returned a {type(x).__name__}; return arrays, numbers, or "
        "tuples/lists/dicts of them"
    )


def compile(  # noqa: A001 (the public name is dsl.compile)
    fn: Callable[..., Any] | None = None,
    *,
    target: str | None = None,
    static_argnums: int | Sequence[int] = (),
    donate_argnums: int | Sequence[int] = (),
    inplace: bool | None = None,
    strict_inplace: bool = False,
    static_argnames: str | Sequence[str] = (),
    precision: str = "highest",
) -> Any:
    """Compile ``fn``; usable as ``@dsl.compile`` or ``@dsl.compile(target=..., ...)``.

    ``inplace=None`` follows ``DSL_NO_INPLACE`` (in-place on unless it is set).

    ``static_argnums`` counts positional arguments (negative ones from the last), ``static_argnames``
    names parameters (keyword-only ones and ``**kwargs`` keys included), as in JAX; the values of
    static arguments are part of the cache key and reach ``fn`` as the Python values given.

    A compiled function called inside another trace (a transform such as ``dsl.grad``, or another
    compiled function) is inlined, and its options apply to its own part of the trace, as JAX's
    nested ``jit`` does: its ``static_argnums``/``static_argnames`` stay static when a transform
    is applied to it directly (``dsl.grad(dsl.compile(f, static_argnums=1))``), and with
    ``strict_inplace=True`` an in-place request written in its lines that would need a copy still
    raises ``InplaceError``, whatever the outer program's own ``strict_inplace``. ``target``,
    ``donate_argnums``, ``inplace`` and ``precision`` belong to the program that runs: the outermost
    one.

    ``precision`` is that of float32 matmuls on a GPU: ``"highest"`` (full float32, as JAX's
    ``"highest"`` and PyTorch with TF32 off) or ``"tf32"`` (cuBLAS may use TensorFloat-32 tensor
    cores: faster, about 10 bits of mantissa in the products). The CPU computes in full float32
    either way.
    """
    options = dict(
        target=target,
        static_argnums=static_argnums,
        donate_argnums=donate_argnums,
        inplace=inplace,
        strict_inplace=strict_inplace,
        static_argnames=static_argnames,
        precision=precision,
    )
    if fn is None:
        return lambda f: Compiled(f, **options)  # type: ignore[arg-type]
    if isinstance(fn, Compiled):  # compiled again (``dslc compile`` of a decorated function): its
        if not static_argnums and not static_argnames:  # static arguments stay static
            options["static_argnums"] = fn._binder.static_argnums
            options["static_argnames"] = tuple(fn._binder.static_argnames)
        fn = fn._fn
    return Compiled(fn, **options)  # type: ignore[arg-type]
