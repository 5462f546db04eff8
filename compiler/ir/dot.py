"""The dataflow graph of a function in Graphviz DOT (``dslc compile ... --emit dot``).

Ops are boxes labelled with the primitive, the result type and the user's source line; arguments
and results are distinct shapes; each edge is one SSA value (``%3``) from its producer to a reader.
Given a ``FusionPlan``, each kernel with more than one op is a cluster, so what fuses is visible.
Render with ``dot -Tsvg graph.dot -o graph.svg``.
"""

from __future__ import annotations

import os

from compiler.ir.core import UNKNOWN_LOC, Function, Location, Op, Value
from compiler.passes.fuse import FusionPlan


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _where(loc: Location) -> str:
    return "" if loc == UNKNOWN_LOC else f"{os.path.basename(loc.file)}:{loc.line}"


def function_to_dot(func: Function, fusion: FusionPlan | None = None) -> str:
    """DOT text for ``func``; node ids: ``arg{i}``, ``op{k}``, ``result{i}``."""
    producer: dict[Value, str] = {}
    names: dict[Value, str] = {}
    lines = [
        f"digraph {_quote(func.name)} {{",
        "  rankdir=TB;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for i, v in enumerate(func.params):
        name = func.arg_names[i] if i < len(func.arg_names) and func.arg_names[i] else f"arg{i}"
        producer[v], names[v] = f"arg{i}", f"%arg{i}"
        label = f"{name}\n{v.type}"
        lines.append(f"  arg{i} [shape=invhouse, style=filled, fillcolor=lightblue, label={_quote(label)}];")
    op_ids: dict[Op, str] = {}
    for k, op in enumerate(func.ops):
        op_ids[op] = f"op{k}"
        for j, r in enumerate(op.results):
            producer[r], names[r] = f"op{k}", f"%{k}" if len(op.results) == 1 else f"%{k}#{j}"
    clustered = _clusters(func, fusion, op_ids, lines)
    for op in func.ops:
        if op not in clustered:
            lines.append(f"  {_op_node(op, op_ids[op])}")
    for op in func.ops:
        for v in dict.fromkeys(op.operands):
            lines.append(f"  {producer[v]} -> {op_ids[op]} [label={_quote(names[v])}];")
    for i, v in enumerate(func.results):
        lines.append(
            f"  result{i} [shape=house, style=filled, fillcolor=palegreen, label={_quote(f'result {i}')}];"
        )
        lines.append(f"  {producer[v]} -> result{i} [label={_quote(names[v])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _op_node(op: Op, node: str) -> str:
    types = ", ".join(str(r.type) for r in op.results)
    label = "\n".join(x for x in (op.prim.name, types, _where(op.loc)) if x)
    return f"{node} [shape=box, label={_quote(label)}];"


def _clusters(func: Function, fusion: FusionPlan | None, op_ids: dict[Op, str], lines: list[str]) -> set[Op]:
    """One ``subgraph cluster_N`` per fused kernel of two or more ops; returns the ops placed."""
    if fusion is None:
        return set()
    members: dict[int, list[Op]] = {}
    for op in func.ops:
        group = fusion.group_of.get(op)
        if group is not None:
            members.setdefault(group.index, []).append(op)
    placed: set[Op] = set()
    for group in fusion.groups:
        ops = members.get(group.index, [])
        if len(ops) < 2:
            continue
        lines.append(f"  subgraph cluster_{group.index} {{")
        lines.append(f"    label={_quote(f'kernel {group.index} ({group.kind.value})')}; style=dashed;")
        lines += [f"    {_op_node(op, op_ids[op])}" for op in ops]
        lines.append("  }")
        placed.update(ops)
    return placed
