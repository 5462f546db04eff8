"""Pytrees: nested tuples, namedtuples, lists and dicts (and None) of leaves, flattened with a hashable
treedef. A treedef's children are its element 1 (element 2 for a dict, whose element 1 is the keys).
As in JAX, a dict's keys are sorted, an ``OrderedDict`` keeps its order and class, a ``defaultdict``
its default factory (a dict's treedef then has a fourth element, ``"ordered"`` or ``"default"``, and
a ``defaultdict``'s fifth is its factory)."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from dsl import tracing
from dsl.errors import TraceError

TreeDef = tuple[Any, ...]
LEAF: TreeDef = ("*",)
NONE: TreeDef = ("None",)


def flatten(tree: Any, leaves: list[Any] | None = None) -> tuple[list[Any], TreeDef]:
    """Leaves in order (dict keys sorted, as in JAX) and the structure to rebuild them."""
    out: list[Any] = [] if leaves is None else leaves
    return out, _flatten(tree, out)


def _flatten(tree: Any, out: list[Any]) -> TreeDef:
    kind = type(tree)  # (the exact containers, then leaves, first: a call flattens its arguments)
    if kind is tuple or kind is list:
        return ("tuple" if kind is tuple else "list", tuple([_flatten(x, out) for x in tree]))
    if kind is dict:
        keys = dict_keys(tree)
        return ("dict", tuple(keys), tuple([_flatten(tree[k], out) for k in keys]))
    if tree is None:
        return NONE
    if not isinstance(tree, (tuple, list, dict)):
        out.append(tree)
        return LEAF
    if _is_namedtuple(tree):  # rebuilt as its own class (JAX's pytree node)
        return ("namedtuple", tuple(_flatten(x, out) for x in tree), type(tree))
    if isinstance(tree, (tuple, list)):
        name = "tuple" if isinstance(tree, tuple) else "list"
        return (name, tuple(_flatten(x, out) for x in tree))
    keys = dict_keys(tree)
    children = tuple(_flatten(tree[k], out) for k in keys)
    if isinstance(tree, OrderedDict):
        return ("dict", tuple(keys), children, "ordered")
    if isinstance(tree, defaultdict):
        return ("dict", tuple(keys), children, "default", tree.default_factory)
    return ("dict", tuple(keys), children)


def dict_keys(tree: dict[Any, Any]) -> list[Any]:
    """A dict's keys in pytree order: an ``OrderedDict``'s own, else sorted (keys that do not sort,
    ``{1: a, "b": c}``: a ``TypeError`` saying so, as JAX's)."""
    for key in tree:
        if type(key) not in _PLAIN_KEYS:
            _check_key(key)
    if isinstance(tree, OrderedDict):
        return list(tree)
    try:
        return sorted(tree)
    except TypeError as err:
        raise TypeError(f"a dict's keys must sort, to flatten it in a fixed order ({err})") from None


_PLAIN_KEYS = {str, int}  # (the common keys: checked no further)


class UnhashableKeyError(TraceError, TypeError):
    """A traced array used as a dict key: unhashable, as JAX's arrays are (its ``==`` is elementwise)."""


def _check_key(key: Any) -> None:
    """A traced array is no key: its identity is a tracer's, meaningless once the trace ends."""
    from dsl.array import Array  # (dsl.array builds on this module through dsl.ops)

    if isinstance(key, tuple):  # (a tuple of hashables is a key: an array inside it is not)
        for item in key:
            _check_key(item)
        return
    if isinstance(key, Array):
        where = tracing.current().location() if tracing.active() else tracing.user_location()
        raise UnhashableKeyError(
            f"{where}: a traced array is a dict key; arrays are not hashable (as JAX's are not): key "
            "the dict by strings or ints, or return the arrays in a list or tuple"
        )


def unflatten(treedef: TreeDef, leaves: Any) -> Any:
    it = iter(leaves)
    return _build(treedef, it)


def _build(td: TreeDef, it: Iterator[Any]) -> Any:
    kind = td[0]
    if kind == "*":
        return next(it)
    if kind == "None":
        return None
    if kind == "dict":
        items = [(k, _build(sub, it)) for k, sub in zip(td[1], td[2])]
        if len(td) == 3:
            return dict(items)
        return OrderedDict(items) if td[3] == "ordered" else defaultdict(td[4], items)
    items = [_build(sub, it) for sub in td[1]]
    if kind == "namedtuple":
        return td[2](*items)
    return tuple(items) if kind == "tuple" else items


def _is_namedtuple(tree: Any) -> bool:
    return isinstance(tree, tuple) and hasattr(type(tree), "_fields")


def leaf_paths(tree: Any, prefix: str) -> list[str]:
    """A readable name per leaf: ``params['w']``, ``batch[0]`` (used in messages and IR arg names)."""
    names: list[str] = []
    _paths(tree, prefix, names.append)
    return names


def _paths(tree: Any, prefix: str, add: Callable[[str], None]) -> None:
    if tree is None:
        return
    if _is_namedtuple(tree):
        for field, x in zip(type(tree)._fields, tree, strict=True):
            _paths(x, f"{prefix}.{field}", add)
    elif isinstance(tree, (tuple, list)):
        for i, x in enumerate(tree):
            _paths(x, f"{prefix}[{i}]", add)
    elif isinstance(tree, dict):
        for k in dict_keys(tree):
            _paths(tree[k], f"{prefix}[{k!r}]", add)
    else:
        add(prefix)
