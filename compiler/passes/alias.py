"""Alias analysis: which values share storage, and who owns each storage.

A storage class is one set of bytes over the whole program. Values of one class occupy those bytes
either at the same time (a view and its base) or one after another (an argument and the new value
written back into it); the in-place pass, with liveness, makes sure the latter never overlap.
Classes are found with union-find:

- a view (``prim.memory.view_of = k``, e.g. reshape) shares storage with its operand ``k``;
- a write-back result shares storage with its argument: the new value of argument ``i`` lives in the
  caller's array ``i``. Unless it already shares storage with another argument (``x <- y``, or the
  same value written back twice): then it keeps that storage and the write-back is a copy, because
  two caller arrays are never one storage;
- a returned value lives in fresh result memory, allocated per call, and so does everything sharing
  storage with it (the base of a returned view). A returned value that already shares storage with
  an argument keeps the argument's storage: the backend copies it out at return;
- every other value is its own arena class.

Each class holds at most one argument, so its owner follows from that argument alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.verify import WRITEBACK

Owner = Literal["arena", "caller", "caller-mutable", "result"]

STORAGE_ATTR = "dsl.storage"
ARG_STORAGE_ATTR = "dsl.arg_storage"
OWNERS_ATTR = "dsl.storage_owners"


@dataclass
class AliasInfo:
    """``storage``: class id per value (params and op results, nested regions included), numbered in
    order of first appearance, params first. ``owner``: who owns each class's bytes.

    ``caller``: an argument the program must not overwrite. ``caller-mutable``: an argument the
    program writes (a write-back target) or may overwrite (donated). ``result``: fresh per call,
    handed to the caller. ``arena``: the program's scratch memory.
    """

    storage: dict[Value, int]
    owner: dict[int, Owner]

    def same_storage(self, a: Value, b: Value) -> bool:
        return self.storage[a] == self.storage[b]

    def may_overwrite(self, v: Value) -> bool:
        """Whether the program may write into ``v``'s storage: not if the caller still owns it."""
        return self.owner[self.storage[v]] != "caller"


class _UnionFind:
    def __init__(self, values: Iterator[Value]) -> None:
        self.parent = {v: v for v in values}

    def find(self, v: Value) -> Value:
        while self.parent[v] is not v:
            self.parent[v] = self.parent[self.parent[v]]  # path halving keeps later finds short
            v = self.parent[v]
        return v

    def union(self, keep: Value, other: Value) -> None:
        self.parent[self.find(other)] = self.find(keep)


def analyze_aliases(func: Function, donate_argnums: tuple[int, ...] = ()) -> AliasInfo:
    """Storage classes and their owners for ``func``; ``donate_argnums`` may be overwritten."""
    for i in donate_argnums:
        if not 0 <= i < len(func.params):
            raise ValueError(f"donate_argnums: {i} is not an argument index of @{func.name}")
    sets = _UnionFind(_values_in_order(func.body))
    for op in func.walk():
        k = op.prim.memory.view_of
        if k is not None:
            for r in op.results:
                sets.union(op.operands[k], r)
    writeback = tuple(int(i) for i in func.attrs.get(WRITEBACK, ()))
    _join_writebacks(func, writeback, sets)
    numbering: dict[Value, int] = {}
    storage = {v: numbering.setdefault(sets.find(v), len(numbering)) for v in _values_in_order(func.body)}
    return AliasInfo(storage, _owners(func, storage, set(writeback) | set(donate_argnums), len(writeback)))


def _join_writebacks(func: Function, writeback: tuple[int, ...], sets: _UnionFind) -> None:
    """Put each written-back value into its argument's storage, unless it shares another's."""
    holds_param = {sets.find(p) for p in func.params}
    written = func.results[len(func.results) - len(writeback) :]
    for index, value in zip(writeback, written):
        param = func.params[index]
        if sets.find(value) not in holds_param:
            sets.union(param, value)


def _owners(
    func: Function, storage: dict[Value, int], mutable: set[int], n_writeback: int
) -> dict[int, Owner]:
    owner: dict[int, Owner] = {}
    for i, p in enumerate(func.params):
        owner[storage[p]] = "caller-mutable" if i in mutable else "caller"
    for v in func.results[: len(func.results) - n_writeback]:
        owner.setdefault(storage[v], "result")
    for cls in storage.values():
        owner.setdefault(cls, "arena")
    return owner


def _values_in_order(block: Block) -> Iterator[Value]:
    """Block arguments, then each op's results followed by the values of its regions."""
    yield from block.args
    for op in block.ops:
        yield from op.results
        for region in op.regions:
            yield from _values_in_order(region)


def annotate_aliases(func: Function, donate_argnums: tuple[int, ...] = ()) -> Function:
    """``dsl.storage = N`` on each op (its result's class), ``dsl.arg_storage`` on the function.

    ``dsl.storage_owners`` lists each class's owner, in class order, so a dump shows what the
    in-place pass will be told.
    """
    info = analyze_aliases(func, donate_argnums)
    owners = " ".join(info.owner[c] for c in range(len(info.owner)))
    attrs = {
        **func.attrs,
        ARG_STORAGE_ATTR: tuple(info.storage[p] for p in func.params),
        OWNERS_ATTR: owners,
    }
    return func.replace_body(_annotate_block(func.body, info), attrs=attrs)


def _annotate_block(block: Block, info: AliasInfo) -> Block:
    ops = []
    for op in block.ops:
        attrs: dict[str, Any] = dict(op.attrs)
        classes = tuple(info.storage[r] for r in op.results)
        if len(classes) == 1:
            attrs[STORAGE_ATTR] = classes[0]
        elif classes:
            attrs[STORAGE_ATTR] = classes
        regions = tuple(_annotate_block(region, info) for region in op.regions)
        ops.append(Op(op.prim, op.operands, attrs, op.results, op.loc, regions))
    return Block(block.args, tuple(ops), block.results)
