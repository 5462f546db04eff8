# lit configuration for dslc's IR tests: each .mlir file has RUN lines driving the dslc CLI,
# checked with FileCheck (the `filecheck` Python package, installed by the `test` extra).
import os
import shutil
import sys

import lit.formats

config.name = "dslc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "inputs", "Inputs", "Output"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(os.path.dirname(config.test_source_root)), os.environ.get("PYTHONPATH", "")]
)
for var in ("HOME", "DSL_CACHE_DIR", "NUMBA_CACHE_DIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# The `dslc` console script installed next to this Python, else the module: the same code either way.
script = os.path.join(os.path.dirname(sys.executable), "dslc")
dslc = script if os.access(script, os.X_OK) else f"{sys.executable} -m compiler.cli"
config.substitutions.append(("%dslc", dslc))
config.substitutions.append(("%python", sys.executable))
filecheck = shutil.which("filecheck") or shutil.which("FileCheck")
config.substitutions.append(("FileCheck", filecheck or "filecheck"))

# Optional tools: tests that need one say `REQUIRES: mlir-opt` or `REQUIRES: matplotlib`.
sys.path.insert(0, os.path.join(os.path.dirname(config.test_source_root)))
from mlir_tools import find_mlir_opt  # noqa: E402

mlir_opt = find_mlir_opt()
if mlir_opt:
    config.available_features.add("mlir-opt")
    config.substitutions.append(("%mlir-opt", mlir_opt))
try:
    import matplotlib  # noqa: F401

    config.available_features.add("matplotlib")
except ImportError:
    pass
