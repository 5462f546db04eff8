"""Issue 29, items 4 and 5: the rest of NumPy built from existing primitives (``var std logaddexp
linalg.norm split pad round argmax ...``), the array methods and Paddle/PyTorch in-place names, and
errors that teach. Each function against NumPy forward, and its gradient against finite differences
in float64."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dsl

HERE = re.escape(__file__.rsplit("/", 1)[-1])


def test_boolean_mask_read_explains_the_shape_and_suggests_where() -> None:
    f = dsl.compile(lambda x: x[x > 0])
    with pytest.raises(
        dsl.TraceError, match=rf"{HERE}:\d+: x\[mask\] .* not known at trace time.*numpy.where"
    ):
        f(np.arange(4.0))
