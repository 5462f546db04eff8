"""Run the real ``mlir-opt`` on our IR text: the printer promises text that MLIR parses and verifies."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable

import pytest

SPLIT = "\n// -----\n"  # mlir-opt --split-input-file's separator between modules
SKIP_REASON = "mlir-opt not installed: apt-get install mlir-22-tools"


def find_mlir_opt() -> str | None:
    """``mlir-opt`` on PATH, else ``mlir-opt-22``, else the newest ``/usr/lib/llvm-*/bin/mlir-opt``."""
    for name in ("mlir-opt", "mlir-opt-22"):
        found = shutil.which(name)
        if found:
            return found
    candidates = glob.glob("/usr/lib/llvm-*/bin/mlir-opt")
    versions = {path: int(m.group(1)) for path in candidates if (m := re.search(r"llvm-(\d+)/", path))}
    preferred = sorted(candidates, key=lambda path: (versions.get(path) != 22, -versions.get(path, 0)))
    return next((path for path in preferred if os.access(path, os.X_OK)), None)


def mlir_opt_or_skip() -> str:
    path = find_mlir_opt()
    if path is None:
        pytest.skip(SKIP_REASON)
    return path


def run_mlir_opt(text: str, *flags: str) -> str:
    """``mlir-opt --allow-unregistered-dialect FLAGS`` on ``text`` (stdin); its output, asserting success."""
    path = mlir_opt_or_skip()
    proc = subprocess.run(
        [path, "--allow-unregistered-dialect", *flags], input=text, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (
        f"mlir-opt rejected the IR (exit {proc.returncode}):\n{proc.stderr}\n--- input ---\n{text}"
    )
    return proc.stdout


_VERIFIED: set[bytes] = set()  # digests of the texts mlir-opt verified in this process


def check_all_with_mlir_opt(texts: Iterable[str]) -> None:
    """mlir-opt on each of ``texts`` (each a module), in one process (``--split-input-file``): a
    process per text cost ~70 ms each, minutes over the suite. A text verified before in this
    process is not sent again. Where mlir-opt rejects the batch, each text runs alone, so the
    failure shows the text it rejected."""
    digests = {hashlib.sha1(t.encode()).digest(): t for t in texts}
    new = {d: t for d, t in digests.items() if d not in _VERIFIED}
    if not new:
        return
    try:
        run_mlir_opt(SPLIT.join(new.values()), "--split-input-file")
    except AssertionError:
        for text in new.values():
            run_mlir_opt(text)
        raise
    _VERIFIED.update(new)


def check_with_mlir_opt(text: str) -> None:
    """Assert that mlir-opt parses and verifies ``text``; the failure message carries mlir-opt's stderr."""
    run_mlir_opt(text)
