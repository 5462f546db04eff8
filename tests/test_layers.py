"""The code's layers (issue 26, ``docs/architecture.md``): a walk from ``@dsl.compile`` to a kernel
goes down ``dsl`` -> ``compiler`` (passes, then the printers in ``compiler/codegen``) -> ``runtime``
without coming back up. Read from the source's import statements (``ast``), lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def importers(layer: str) -> list[tuple[str, set[str]]]:
    return [
        (str(path.relative_to(ROOT)), imports(path))
        for path in sorted((ROOT / layer).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def below(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


@pytest.mark.parametrize(
    ("layer", "above", "allowed"),
    [
        ("runtime", ("compiler", "dsl"), ()),  # what generated modules import: no compiler needed
        # the command line traces Python files: it is a frontend, beside dsl (compiler/cli*.py)
        ("compiler", ("dsl",), ("compiler/cli.py", "compiler/cli_run.py")),
    ],
)
def test_no_layer_imports_one_above_it(layer: str, above: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    wrong = {
        path: sorted(n for n in names if any(below(n, a) for a in above))
        for path, names in importers(layer)
        if path not in allowed
    }
    assert not {p: n for p, n in wrong.items() if n}, "imports of a layer above"


def test_only_the_pipeline_calls_the_printers() -> None:
    """The passes decide; ``compiler/codegen`` prints what they decided. No pass, kernel builder or
    primitive imports a printer (or the pipeline that runs them)."""
    printers = ("compiler.codegen", "compiler.pipeline", "compiler.cli", "compiler.cli_run")
    callers = {"compiler/pipeline.py", "compiler/cli.py", "compiler/cli_run.py"}
    wrong = {
        path: sorted(n for n in names if any(below(n, p) for p in printers))
        for path, names in importers("compiler")
        if path not in callers and not path.startswith("compiler/codegen/")
    }
    assert not {p: n for p, n in wrong.items() if n}
