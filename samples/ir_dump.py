"""Show every IR stage of a small program, and the generated Numba source.

Run: python samples/ir_dump.py          (or set DSL_DUMP_IR=<dir> to get the stages as files)
"""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp


@dsl.compile
def normalize_rows(x, eps):
    centered = x - x.mean(axis=1, keepdims=True)
    scale = dnp.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
    out = centered / scale
    out[:, 0] = 0.0  # an in-place write: traced, functionalized, and marked in the IR
    return out


def main() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    lowered = normalize_rows.lower(x, 1e-5)
    for stage in lowered.stages():
        print(f"// ===== stage: {stage} =====")
        print(lowered.ir(stage))
    print("# ===== generated Numba source =====")
    print(lowered.source())
    print(normalize_rows(x, 1e-5))


if __name__ == "__main__":
    main()
