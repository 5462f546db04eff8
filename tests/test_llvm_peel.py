"""LLVM's loop peeling must not abort the process (``runtime/__init__.py: LLVM_PEEL_MAX_COUNT``).

The LLVM 22 of llvmlite 0.50 is built with assertions; peeling the last iterations of a loop more
than one at a time failed one ("when peeling the last iteration, the loop must be supported and
can only peel a single iteration") and killed the Python process. A concatenation whose pieces are
concatenations (NumPy's odd reflection past one period: every piece reflects the pieces before it)
gave such a loop. Run in a new process with an empty cache, so Numba compiles it and an abort is a
failed test, not a lost pytest worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import numpy as np, dsl, dsl.numpy as dnp
x = np.array([-2.0, -0.5])
got = dsl.compile(lambda x: dnp.pad(x, (5, 11), "reflect", reflect_type="odd"))(x)
np.testing.assert_array_equal(got, np.pad(x, (5, 11), "reflect", reflect_type="odd"))
print("same")
"""


def test_a_loop_llvm_would_peel_last_compiles_in_a_fresh_process(tmp_path: Path) -> None:
    env = {**os.environ, "DSL_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "same"
