"""The functions, methods and in-place names of ``tests/test_numpy_breadth.py`` on the CUDA backend
(tiny shapes): one program of the new dsl.numpy functions against NumPy, gradients of the scans,
norms and logaddexp, in-place methods through a view, and a shape-changing in-place method."""

from __future__ import annotations

import numpy as np
import pytest
import test_numpy_breadth as breadth
from helpers import assert_same

import dsl
import dsl.numpy as dnp


def test_program_of_new_functions_on_cuda() -> None:
    args = breadth.BREADTH_ARGS
    with np.errstate(all="ignore"):
        want = breadth.breadth_reference(*args)
    assert_same(dsl.compile(breadth.breadth_program, target="cuda")(*args), want, rtol=1e-12)


@pytest.mark.parametrize(
    "name", ["cumsum", "cumprod_with_a_zero", "logaddexp", "norm_axis", "pad_reflect", "std"]
)
def test_gradient_on_cuda(name: str) -> None:
    fn, ref, x = breadth.GRADS[name]
    got = dsl.compile(dsl.grad(fn), target="cuda")(x)
    np.testing.assert_allclose(got, breadth._numeric_grad(ref, x), rtol=1e-6, atol=1e-7)


def test_inplace_methods_on_cuda() -> None:
    def step(p, g):
        p.sub_(g, alpha=0.1)
        p[0].clip_(max=0.0)
        p[1:, ::2].rsqrt_()
        p.round_(3)
        q = p[1:] * 1.0
        q.reshape_((4, 2))
        q[0] = -1.0
        return q

    p, g = breadth.P34.copy(), breadth.M34.copy()
    want = breadth.P34 - 0.1 * breadth.M34
    want[0] = np.minimum(want[0], 0.0)
    with np.errstate(all="ignore"):
        want[1:, ::2] = 1 / np.sqrt(want[1:, ::2])
    want = np.round(want, 3)
    q = want[1:].reshape(4, 2).copy()
    q[0] = -1.0
    got = dsl.compile(step, target="cuda")(p, g)
    np.testing.assert_allclose(np.asarray(got), q, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(p, want, rtol=1e-12, equal_nan=True)


def test_argmax_and_round_edges_on_cuda() -> None:
    f = dsl.compile(
        lambda t, e: (dnp.argmax(t, 1), t.argmin(0), dnp.round(e), dnp.rint(e.astype(np.float32))),
        target="cuda",
    )
    got = f(breadth.TIES, breadth.EDGE)
    with np.errstate(all="ignore"):
        want = (
            np.argmax(breadth.TIES, 1),
            breadth.TIES.argmin(0),
            np.round(breadth.EDGE),
            np.rint(breadth.EDGE.astype(np.float32)),
        )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)
        np.testing.assert_array_equal(np.signbit(np.asarray(g)), np.signbit(w))


def test_composed_functions_on_cuda() -> None:
    """``dsl/numpy_compose.py``'s functions (``breadth.COMPOSED``) in one program on CUDA."""
    names = sorted(breadth.COMPOSED)
    args = [a for name in names for a in breadth.COMPOSED[name][2]]

    def program(*flat):
        it = iter(flat)
        return tuple(breadth.COMPOSED[n][0](*[next(it) for _ in breadth.COMPOSED[n][2]]) for n in names)

    with np.errstate(all="ignore"):
        want = tuple(breadth.COMPOSED[n][1](*breadth.COMPOSED[n][2]) for n in names)
    got = dsl.compile(program, target="cuda")(*args)
    for name, g, w in zip(names, got, want, strict=True):
        assert_same(g, w, rtol=1e-5 if name.endswith("f32") or name == "float_power" else 1e-12)
