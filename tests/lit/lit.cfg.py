# lit configuration for dslc's IR tests: each .mlir file has RUN lines driving the dslc CLI,
# checked with FileCheck (the `filecheck` Python package, installed by the `test` extra).
import os
import shutil
import sys

import lit.formats

config.name = "dslc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "inputs"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(os.path.dirname(config.test_source_root)), os.environ.get("PYTHONPATH", "")]
)
for var in ("HOME", "DSL_CACHE_DIR", "NUMBA_CACHE_DIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%dslc", f"{sys.executable} -m compiler.cli"))
config.substitutions.append(("%python", sys.executable))
filecheck = shutil.which("filecheck") or shutil.which("FileCheck")
config.substitutions.append(("FileCheck", filecheck or "filecheck"))
