"""How the Python arguments of a call become the argument slots of a compiled function.

A call is bound against the function's signature, as Python binds it, and laid out as slots: one per
positional parameter (a default the caller did not pass included) and per ``*args`` element, in
order, then one per keyword-only parameter and per ``**kwargs`` entry. The rest of ``dsl.compile``
counts slots: static and donated arguments, array leaves, the names in messages. ``Layout.call``
hands the slots back to the function the way Python expects them: the positional ones by position,
the others by keyword.

As in JAX, ``static_argnums`` counts positional slots (negative ones from the last positional
slot) and ``static_argnames`` names parameters, keyword-only ones and ``**kwargs`` keys included;
a positional parameter passed by keyword is still its positional slot. A transform of a compiled
function (``dsl.grad(dsl.compile(f, static_argnums=1))``) keeps that function's static arguments:
the transform's body names the inner function's binder as ``dsl_inner_binder``.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from dsl import tracing
from dsl.errors import DSLError, TraceError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_PASSING = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}  # a wrapper's, passing all


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """The signature a call of ``fn`` is bound against: ``fn``'s own, or, where ``fn`` passes its
    arguments through (it takes ``*args``, perhaps ``**kwargs``, and no named parameter) to the
    function it names as ``__wrapped__`` (``functools.wraps``, dslc's transforms), that function's,
    followed as far as such wrappers go. ``inspect.signature`` follows ``__wrapped__`` always, so a
    decorator whose wrapper takes its own parameters (``def wrapper(x, scale)`` around ``f(x)``)
    would be bound against ``f``'s: Python calls the wrapper with the wrapper's. Raises as
    ``inspect.signature``."""
    for _ in range(100):  # (a cycle of __wrapped__ ends somewhere)
        own = inspect.signature(fn, follow_wrapped=False)
        wrapped = getattr(fn, "__wrapped__", None)
        kinds = {p.kind for p in own.parameters.values()}
        if wrapped is None or inspect.Parameter.VAR_POSITIONAL not in kinds or kinds - _PASSING:
            return own
        fn = wrapped
    return own


class CallError(TraceError, TypeError):
    """A compiled function (or a traced array's method) was called with arguments it cannot take."""


class Default(NamedTuple):
    """A parameter's default value the caller did not pass: handed to the function untraced."""

    value: Any


class Layout(NamedTuple):
    """The slots of one call: their names, how many are positional, which are static."""

    names: tuple[str, ...]  # one per slot: the parameter's name, 'args[k]' or the **kwargs key
    n_positional: int  # slots [0, n_positional) are passed by position, the rest by keyword
    static: frozenset[int]
    # how many of the positional slots the caller passed by position (the rest: defaults, and
    # parameters the caller named): vmap's in_axes has one entry per argument passed, as JAX's
    n_args: int = -1

    @property
    def n_passed(self) -> int:
        return self.n_positional if self.n_args < 0 else self.n_args

    @property
    def keywords(self) -> tuple[str, ...]:
        return self.names[self.n_positional :]

    def name(self, i: int) -> str:
        return self.names[i] if i < len(self.names) else f"arg{i}"

    def call(self, fn: Callable[..., Any], slots: Sequence[Any]) -> Any:
        n = self.n_positional
        return fn(*slots[:n], **dict(zip(self.names[n:], slots[n:], strict=True)))


def argnums_of(what: str, nums: Any, error: type[DSLError] | None = None) -> int | tuple[int, ...]:
    """``nums`` (``static_argnums``, ``donate_argnums``, a transform's ``argnums``) as an int or a
    tuple of ints, as JAX reads them (NumPy integers too); anything else, a name or a float, raises
    ``error`` (``CallError`` by default) at the user's line, saying what goes there instead."""
    if _is_index(nums):
        return operator.index(nums)
    bad = nums
    if isinstance(nums, Iterable) and not isinstance(nums, str):
        items = tuple(nums)
        wrong = [i for i in items if not _is_index(i)]
        if not wrong:
            return tuple(operator.index(i) for i in items)
        bad = wrong[0]
    hint = {
        "static_argnums": "; name parameters with static_argnames instead",
        "argnums": " (0 is the first argument)",
    }.get(what, "")
    raise tracing.user_error(
        error or CallError,
        f"{what} takes an int or a tuple of ints, the positions of positional arguments, but got "
        f"{type(bad).__name__} {bad!r}{hint}",
    )


def _is_index(x: Any) -> bool:
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def argnums_tuple(what: str, nums: Any, error: type[DSLError] | None = None) -> tuple[int, ...]:
    """``argnums_of``, an int as a tuple of one."""
    checked = argnums_of(what, nums, error)
    return (checked,) if isinstance(checked, int) else checked


def _indices(nums: int | Sequence[int]) -> tuple[int, ...]:
    return argnums_tuple("static_argnums", nums)


class Binder:
    """Binds calls of ``fn`` (see the module docstring); one per compiled function."""

    def __init__(
        self,
        fn: Callable[..., Any],
        static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (),
    ) -> None:
        self.fn = fn
        self.inner: Binder | None = getattr(fn, "dsl_inner_binder", None)
        self.static_argnums = _indices(static_argnums)
        self.static_argnames = frozenset(
            (static_argnames,) if isinstance(static_argnames, str) else static_argnames
        )
        try:
            self.signature: inspect.Signature | None = signature_of(fn)
        except (TypeError, ValueError):
            self.signature = None
        self._layouts: dict[tuple[int, int, tuple[str, ...]], Layout] = {}
        params = list(self.signature.parameters.values()) if self.signature else []
        kinds = {p.kind for p in params}
        self._positional_names = tuple(p.name for p in params if p.kind in _POSITIONAL)
        # a plain positional call of every parameter needs no binding: its layout is fixed
        simple = self.signature is not None and kinds <= set(_POSITIONAL)
        self.fast_arity = len(params) if simple else -1
        self.positional = self.layout(tuple(p.name for p in params), len(params)) if simple else None
        # ... nor one that leaves trailing defaults out: per count given, the defaults' slots and layout
        self._fast_tails: dict[int, tuple[tuple[Default, ...], Layout]] = {}
        if simple:
            names = tuple(p.name for p in params)
            for k in range(sum(p.default is inspect.Parameter.empty for p in params), len(params)):
                tail = tuple(Default(p.default) for p in params[k:])
                self._fast_tails[k] = (tail, self.layout(names, len(params), k))
        # ... nor a positional call of ``f(a, *rest)`` (a layout per count, made on first use)
        varargs = bool(params) and params[-1].kind is inspect.Parameter.VAR_POSITIONAL
        plain = varargs and {p.kind for p in params[:-1]} <= set(_POSITIONAL)
        self._star = params[-1].name if plain else None
        self._fixed = tuple(p.name for p in params[:-1]) if plain else ()
        self._star_layouts: dict[int, Layout] = {}
        self._check_static(kinds)

    def _check_static(self, kinds: set[Any]) -> None:
        """Static arguments that no call can have are a mistake at decoration time (as in JAX)."""
        self.check_argnums("static_argnums", self.static_argnums)
        if self.signature is None:
            return
        if inspect.Parameter.VAR_KEYWORD not in kinds:
            unknown = sorted(self.static_argnames - set(self.signature.parameters))
            if unknown:
                raise tracing.user_error(
                    CallError,
                    f"static_argnames names {', '.join(map(repr, unknown))}, which {self._fn_name()} has no "
                    "parameter called",
                )

    def check_argnums(self, what: str, nums: tuple[int, ...]) -> None:
        """``static_argnums`` or ``donate_argnums`` that are not ints, or name a position no call can
        have, or (donated) an argument that is static: a CallError at decoration time (a typo would
        otherwise do nothing, or fail deep inside a call). ``nums`` as ``argnums_tuple`` gives them."""
        if what != "static_argnums":
            self._check_not_static(what, nums)
        if not self._fixed_positions():
            return
        n = len(self._positional_names)
        if any(not -n <= i < n for i in nums):
            raise tracing.user_error(
                CallError, f"{what}={nums} but {self._fn_name()} takes {n} positional argument(s)"
            )

    def _fixed_positions(self) -> bool:
        """Whether every call has the same positional parameters (a known signature, no ``*args``)."""
        return self.signature is not None and inspect.Parameter.VAR_POSITIONAL not in {
            p.kind for p in self.signature.parameters.values()
        }

    def _check_not_static(self, what: str, nums: tuple[int, ...]) -> None:
        """A donated argument cannot be static (as in JAX): a static argument reaches the function as
        its Python value, with no buffer to give away."""
        names = self._positional_names
        n = len(names)
        fixed = self._fixed_positions()

        def position(i: int) -> int:  # (negative positions count from the last only when it is known)
            return i % n if fixed and -n <= i < n else i

        static = {position(i) for i in self.static_argnums}
        static |= {k for k, name in enumerate(names) if name in self.static_argnames}
        both = sorted({position(i) for i in nums} & static)
        if both:
            k = both[0]
            name = f"argument '{names[k]}'" if 0 <= k < n else f"argument {k}"
            raise tracing.user_error(
                CallError,
                f"{name} of {self._fn_name()} is both static (static_argnums/static_argnames) and in "
                f"{what}: a static argument is a Python value with no buffer to donate; drop it from one",
            )

    def _unexpected_keyword(self, kwargs: dict[str, Any]) -> str | None:
        """Python's first complaint about a call with a keyword no parameter takes (``inspect``'s
        ``bind`` reports a missing argument first, which hides the misspelt keyword)."""
        assert self.signature is not None
        params = self.signature.parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return None
        unexpected = [k for k in kwargs if k not in params]
        return f"got an unexpected keyword argument {unexpected[0]!r}" if unexpected else None

    def _fn_name(self) -> str:
        return getattr(self.fn, "__name__", "function")

    def layout(self, names: tuple[str, ...], n_positional: int, n_args: int = -1) -> Layout:
        """The layout of slots ``names``, the first ``n_positional`` of them positional, ``n_args`` of
        those passed by position (-1: all) (cached: one per shape of call)."""
        key = (n_positional, n_args, names[n_positional:])
        layout = self._layouts.get(key)
        if layout is None:
            static = {i % n_positional for i in self.static_argnums if -n_positional <= i < n_positional}
            static |= {i for i, name in enumerate(names) if name in self.static_argnames}
            if self.inner is not None:
                static |= self.inner.layout(names, n_positional, n_args).static
            layout = self._layouts[key] = Layout(names, n_positional, frozenset(static), n_args)
        return layout

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Layout]:
        """The slots of this call and their layout; a call the signature refuses raises ``CallError``
        naming the caller's line."""
        if self.positional is not None and not kwargs:
            if len(args) == self.fast_arity:
                return args, self.positional
            fast = self._fast_tails.get(len(args))
            if fast is not None:
                return args + fast[0], fast[1]
        if self._star is not None and not kwargs and len(args) >= len(self._fixed):
            layout = self._star_layouts.get(len(args))
            if layout is None:
                rest = (f"{self._star}[{k}]" for k in range(len(args) - len(self._fixed)))
                n = len(args)
                layout = self._star_layouts[n] = self.layout((*self._fixed, *rest), n, n)
            return args, layout
        if self.signature is None:
            if kwargs:
                raise tracing.user_error(
                    CallError, f"{self._fn_name()}: keyword arguments need a function with a signature"
                )
            return args, self.layout(tuple(f"arg{i}" for i in range(len(args))), len(args))
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            problem = self._unexpected_keyword(kwargs) or err
            raise tracing.user_error(CallError, f"{self._fn_name()}(): {problem}") from None
        given = set(bound.arguments)
        bound.apply_defaults()
        positional: list[tuple[str, Any]] = []
        keyword: list[tuple[str, Any]] = []
        for name, param in self.signature.parameters.items():
            value = bound.arguments[name]
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                positional += [(f"{name}[{k}]", v) for k, v in enumerate(value)]
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                keyword += list(value.items())
            else:  # a default the caller did not pass stays a Python value (as in JAX), untraced
                slot = (name, value if name in given else Default(value))
                (positional if param.kind in _POSITIONAL else keyword).append(slot)
        slots = positional + keyword
        names = tuple(name for name, _ in slots)
        return tuple(v for _, v in slots), self.layout(names, len(positional), len(args))
