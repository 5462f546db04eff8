"""A band's column reductions in its rows (partial rows per block, ``band_columns="band"``) or after
them as column kernels that re-read the band's inputs (``"kernel"``; ``"auto"``: the rows pass's cost
model, ``compiler/passes/rows.py``), those that share inputs in one kernel with an output each
(``rows.reductions_together``; "apart": ``sibling_reductions=False``, a kernel each): the same bits in
every form, close to the CPU's (whose sums add in another order) and to NumPy's. Layer norm forward
and backward, softmax + cross-entropy, a band with a column loss, a band with three column
reductions (two reducers); rows past ``BLOCK_REDUCE_MIN`` (made small here) take the column kernel
(split into row chunks when ``COLUMN_ROWS`` is small), fewer take the serial one."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from sim_bands import layer_norm_loss, layer_norm_numpy, xent_loss

import dsl
import dsl.numpy as dnp
from compiler.compilation import TARGETS
from compiler.kernel.cuda import bands, loops
from compiler.pipeline import option_defaults

RNG = np.random.default_rng(11)
FORMS = {  # Options for each form
    "band": {"band_columns": "band"},
    "kernel": {"band_columns": "kernel"},
    "auto": {"band_columns": "auto"},
    "apart": {"band_columns": "kernel", "sibling_reductions": False},
}


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def flat(values) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for v in values if isinstance(values, tuple | list) else (values,):
        out += flat(v) if isinstance(v, tuple | list) else [np.asarray(v)]
    return out


def results(fn, args, form: str) -> tuple[list[np.ndarray], str]:
    with option_defaults(**FORMS[form]):
        compiled = dsl.compile(fn, target="cuda")
        source = compiled.lower(*args).source()
        return flat(compiled(*[np.copy(a) for a in args])), source


def column_kernels(source: str) -> int:
    return len(set(re.findall(r"def (k\d+_reduce_[a-z]+)(?:_1)?\(", source)))


def check_forms(fn, args, after: int, together: int | None = None) -> dict[str, str]:
    """Every form gives the same bits, close to the CPU's; ``after`` column kernels follow the band
    in the "apart" form, ``together`` (default ``min(after, 1)``) in the "kernel" form (none in the
    "band" form)."""
    got, sources = {}, {}
    for form in FORMS:
        got[form], sources[form] = results(fn, args, form)
        assert "_rows(" in sources[form]
    together = min(after, 1) if together is None else together
    for form, want in (("band", 0), ("kernel", together), ("apart", after)):
        assert column_kernels(sources[form]) == want, sources[form]
    on_cpu = flat(dsl.compile(fn, target="cpu")(*[np.copy(a) for a in args]))
    for form in list(FORMS)[1:]:
        for a, b in zip(got["band"], got[form], strict=True):
            np.testing.assert_array_equal(a, b)
    for a, c in zip(got["band"], on_cpu, strict=True):
        np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(c)))))
    return sources


@pytest.mark.parametrize("rows, width, column_rows", [(6, 20, 512), (12, 8, 512), (12, 8, 4)])
def test_layer_norm(rows: int, width: int, column_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """gamma's and beta's gradients: serial kernels (6 rows), column kernels (from 12 rows here) of
    one chunk, and of three chunks of 4 rows (a partial row per chunk, a second pass in order)."""
    monkeypatch.setattr(loops, "BLOCK_REDUCE_MIN", 10)  # a GPU's 128, small for the simulator
    monkeypatch.setattr(loops, "COLUMN_ROWS", column_rows)
    args = (f32(rows, width), 1 + 0.1 * f32(width), 0.1 * f32(width), f32(rows, width))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    sources = check_forms(fn, args, after=2)
    got, _ = results(fn, args, "kernel")
    for a, w in zip(got, layer_norm_numpy(*args), strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.max(np.abs(w)))))
    column = rows >= loops.BLOCK_REDUCE_MIN
    assert ("(COLS, LANES)" in sources["kernel"]) == column, sources["kernel"]
    assert ("_reduce_sum_2(" in sources["kernel"]) == (column and column_rows < rows // 2), sources["kernel"]


def test_softmax_cross_entropy() -> None:
    """Its loss is a full reduction (a register per thread in the band): it stays in every form."""
    z = f32(6, 10)
    onehot = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, 6)]
    check_forms(dsl.value_and_grad(xent_loss), (z, onehot), after=0)


def test_a_band_with_a_column_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loss per column (the squared centred values summed over the rows) beside the rows' own
    results: the column kernel recomputes the centred values from ``x`` and the stored row means."""

    def fn(x, y):
        c = x - x.mean(axis=-1, keepdims=True)
        p = dnp.exp(c - c.max(axis=-1, keepdims=True))
        return p / p.sum(axis=-1, keepdims=True) * y, (c * c).sum(axis=0)

    monkeypatch.setattr(loops, "BLOCK_REDUCE_MIN", 10)
    check_forms(fn, (f32(12, 9), f32(12, 9)), after=1)


def test_kept_rows_past_shared_memory_are_computed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """With shared memory for two of layer norm's three kept rows (a GPU block's 8 row slots of 20
    float32 each), the one-pass form keeps the third in a global row per block slot; the default
    computes ``x - mean`` again in its readers instead (the same bits)."""
    monkeypatch.setattr(bands, "SHARED_BYTES", 2 * 8 * 20 * 4)
    args = (f32(6, 20), 1 + 0.1 * f32(20), 0.1 * f32(20), f32(6, 20))
    sources = check_forms(dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2)), args, after=2)
    assert re.search(r"v\d+_row\[", sources["band"]), sources["band"]
    assert not re.search(r"v\d+_row\[", sources["auto"]), sources["auto"]


@pytest.mark.parametrize("rows, column_rows", [(12, 512), (12, 4), (6, 512)])
def test_three_column_reductions_in_one_kernel(
    rows: int, column_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two column sums and a column max after a band's rows, all reading ``y``: one kernel with three
    accumulators (two float64, one float32) and, in chunks, three partial rows per chunk; each
    output the bits of its own kernel ("apart"), and NumPy's."""

    def fn(x, y):
        c = x - x.mean(axis=-1, keepdims=True)
        p = c / (c * c).sum(axis=-1, keepdims=True)
        return p / p.max(axis=-1, keepdims=True), (c * y).sum(axis=0), y.sum(axis=0), (x * y).max(axis=0)

    monkeypatch.setattr(loops, "BLOCK_REDUCE_MIN", 10)
    monkeypatch.setattr(loops, "COLUMN_ROWS", column_rows)
    x, y = f32(rows, 9), f32(rows, 9)
    sources = check_forms(fn, (x, y), after=3)
    assert ("_2(" in sources["kernel"]) == (rows >= 10 and column_rows < rows // 2), sources["kernel"]
    got, _ = results(fn, (x, y), "kernel")
    c = x.astype(np.float64) - x.mean(axis=-1, keepdims=True)
    p = c / (c * c).sum(axis=-1, keepdims=True)
    want = [p / p.max(axis=-1, keepdims=True), (c * y).sum(0), y.sum(0), (x * y).max(0)]
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows, column_rows", [(12, 512), (6, 512)])
def test_layer_norm_without_a_band(rows: int, column_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows longer than the target's ``row_max`` (made 4 here: a GPU's rows past 4096) form no band:
    gamma's and beta's gradients are column reductions outside bands, one kernel with two outputs
    (one pass over ``dy``) with the bits of a kernel each ("apart") and close to NumPy's. (In
    chunks, at this size, the schedule pass orders them apart: both partials at once would raise
    the planned peak; the chunked form with several outputs runs in the band tests above.)"""
    monkeypatch.setitem(TARGETS, "cuda", dataclasses.replace(TARGETS["cuda"], row_max=4))
    monkeypatch.setattr(loops, "BLOCK_REDUCE_MIN", 10)
    monkeypatch.setattr(loops, "COLUMN_ROWS", column_rows)
    args = (f32(rows, 20), 1 + 0.1 * f32(20), 0.1 * f32(20), f32(rows, 20))
    fn = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    (together, source), (apart, separate) = (results(fn, args, form) for form in ("auto", "apart"))
    assert "_rows(" not in source and column_kernels(separate) == column_kernels(source) + 1, source
    for a, b, w in zip(together, apart, layer_norm_numpy(*args), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.max(np.abs(w)))))
