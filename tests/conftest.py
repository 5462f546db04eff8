import os
import sys

# Every pass is verified in the test suite; the generated-module cache goes to a per-run folder.
os.environ.setdefault("DSL_VERIFY", "1")
# target="auto" means CUDA on a GPU machine: the suite tests the CPU backend unless a test asks for CUDA.
os.environ.setdefault("DSL_TARGET", "cpu")
sys.path.insert(0, os.path.dirname(__file__))
