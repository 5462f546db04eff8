import os
import sys

# Every pass is verified in the test suite; the generated-module cache goes to a per-run folder.
os.environ.setdefault("DSL_VERIFY", "1")
sys.path.insert(0, os.path.dirname(__file__))
