"""Runs the lit/FileCheck IR tests in tests/lit as part of the pytest suite."""

import os
import shutil
import subprocess
import sys

import pytest

LIT_DIR = os.path.join(os.path.dirname(__file__), "lit")


def test_lit_suite() -> None:
    if shutil.which("filecheck") is None and shutil.which("FileCheck") is None:
        pytest.skip("FileCheck not installed: pip install 'dslc[test]'")
    proc = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-v", LIT_DIR],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
