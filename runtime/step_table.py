"""What the table driver of a big program calls from Python (``compiler/codegen/cpu/steps.py``).

The table driver passes its native loop the data addresses of its arrays in one ``uint64`` array,
instead of the arrays as parameters: Numba's wrapper that unboxes array parameters compiles in time
quadratic in their number (200 arrays: 13 s), while reading an address from Python costs well under
a microsecond per array per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def data_addresses(*arrays: Any) -> np.ndarray:
    """The address of each array's first element, and one slot more (0) that the native loop fills
    with the address of a kernel's scratch block. The arrays must stay alive while the addresses
    are used (the caller holds them)."""
    out = np.zeros(len(arrays) + 1, np.uint64)
    out[:-1] = [a.__array_interface__["data"][0] for a in arrays]
    return out
