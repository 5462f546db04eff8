"""``dnp.einsum`` on ``target="cuda"`` in the simulator (tiny shapes): one program of einsums (matmul
pairs plain, transposed, batched and attention-style, a per-row dot, a diagonal and a trace, an outer
product, a chain, ellipses, float32 and int32) against ``np.einsum``, and gradients through a chain,
a diagonal and a broadcast pair against the CPU backend, with in-place on and off."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(5)
A, B, V = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(2)
ARGS = {
    "a": A,
    "b": B,
    "v": V,
    "q": RNG.standard_normal((2, 3, 2, 4)),
    "k": RNG.standard_normal((2, 2, 2, 4)),
    "m": RNG.standard_normal((3, 3)),
    "f": RNG.standard_normal((2, 3, 4)).astype(np.float32),
    "g": RNG.standard_normal((4, 3)).astype(np.float32),
    "i": RNG.integers(-5, 5, (2, 3, 4)).astype(np.int32),
    "j": RNG.integers(-5, 5, (2, 4, 2)).astype(np.int32),
}
# subscripts and the names of their operands in ARGS
CASES = (
    ("ij,jk->ik", "ab"),
    ("ij,kj->ik", "aa"),
    ("bqhd,bkhd->bhqk", "qk"),
    ("ij,ij->i", "aa"),
    ("ii->i", "m"),
    ("ii", "m"),
    ("i,j->ij", "vv"),
    ("ij,jk,k->i", "abv"),
    ("...ij,...jk->...ik", "fg"),
    ("bij,bjk->bik", "ij"),
)


def program(*xs):
    named = dict(zip(ARGS, xs, strict=True))
    return tuple(dnp.einsum(subscripts, *(named[n] for n in names)) for subscripts, names in CASES)


def test_einsums_on_cuda() -> None:
    got = dsl.compile(program, target="cuda")(*ARGS.values())
    for (subscripts, names), g in zip(CASES, got, strict=True):
        want = np.einsum(subscripts, *(ARGS[n] for n in names))
        assert np.asarray(g).dtype == want.dtype, subscripts
        rtol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(np.asarray(g), want, rtol=rtol, atol=rtol, err_msg=subscripts)


def loss(a, b, v, m):
    chain = dnp.einsum("ij,jk,k->i", a, b, v)
    diagonal = dnp.einsum("ii->i", m)
    broadcast = dnp.einsum("ij,jk->ik", a[:, :1], b[:1])
    return (dnp.tanh(chain) * diagonal).sum() + (broadcast**2).sum()


@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_einsum_gradients_on_cuda(inplace: bool) -> None:
    grads = dsl.grad(loss, argnums=(0, 1, 2, 3))
    on_cpu = dsl.compile(grads, target="cpu")(A, B, V, ARGS["m"])
    on_gpu = dsl.compile(grads, target="cuda", inplace=inplace)(A, B, V, ARGS["m"])
    for g, c in zip(on_gpu, on_cpu, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(c), rtol=1e-10, atol=1e-12)
