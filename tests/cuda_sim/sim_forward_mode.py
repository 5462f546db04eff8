"""Forward mode and batching on ``target="cuda"``: a jvp, a Jacobian and per-example Hessians
(``vmap(jacfwd(jacrev(u)))``, its matmuls over all the examples' rows), and the jvp and vmap of a
``while`` in a ``fori_loop`` (the batched while selecting per example) and of a scan (one native
scan), against the CPU backend. Tiny shapes: the simulator runs every thread in Python."""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp

rng = np.random.default_rng(5)
W1, B1, W2 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 1))


def u(x):
    return (dnp.tanh(x @ W1 + B1) @ W2).sum()


def both(transform, *args):
    return transform(dsl.compile(u, target="cuda"))(*args), transform(dsl.compile(u, target="cpu"))(*args)


def test_jvp_and_jacobian_match_the_cpu() -> None:
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    gpu, cpu = both(lambda f: lambda x, t: dsl.jvp(f, (x,), (t,)), x, t)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)
    gpu, cpu = both(lambda f: dsl.jacrev(dsl.jacfwd(f)), x)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)


def test_per_example_hessians_match_the_cpu() -> None:
    xs = rng.standard_normal((4, 3))
    gpu, cpu = both(lambda f: dsl.vmap(dsl.jacfwd(dsl.jacrev(f))), xs)
    assert gpu.shape == (4, 3, 3)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)


def grown(x):
    """A fori_loop whose step runs a while until the carry's sum passes a bound rising with the
    counter: a trip count per step and, under vmap, per example."""

    def step(i, c):
        c = dsl.while_loop(lambda d: d.sum() < 2.0 + i, lambda d: d * 1.25 + x * x, c)
        return dnp.tanh(c) * 0.9

    return dsl.fori_loop(0, 2, step, x * 1.0)


def on_both(transform, *args):
    f = lambda target: transform(dsl.compile(grown, target=target))(*args)  # noqa: E731
    return f("cuda"), f("cpu")


def test_jvp_through_a_while_in_a_for_matches_the_cpu() -> None:
    x, t = np.array([0.3, 0.2, 0.4]), rng.standard_normal(3)
    gpu, cpu = on_both(lambda f: lambda x, t: dsl.jvp(f, (x,), (t,)), x, t)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)


def test_vmap_of_a_while_with_a_trip_count_per_example_matches_the_cpu() -> None:
    xs = np.array([[0.05, 0.1, 0.02], [0.3, 0.2, 0.4], [1.0, 0.9, 1.1]])
    gpu, cpu = on_both(dsl.vmap, xs)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12)


def rnn(w, c, seq):
    """A scan with a carry and a ys row per step over a sequence, reading the weight ``w``."""

    def step(c, s):
        c = dnp.tanh(c * 0.5 + s @ w)
        return c, c * c + s

    c, ys = dsl.scan(step, c, seq, reverse=True)
    return c.sum() + ys


def test_vmap_of_a_scan_matches_the_cpu() -> None:
    """The scan batched natively (the sequence's batch on the scanned operand's axis 1, the carry
    and the rows batched), its gradient per example too."""
    w, seqs, c = rng.standard_normal((3, 3)) * 0.4, rng.standard_normal((4, 5, 3)), rng.standard_normal(3)

    def run(target, transform):
        return transform(dsl.compile(rnn, target=target))(w, c, seqs)

    def values(f):
        return dsl.vmap(f, in_axes=(None, None, 0))

    def grads(f):
        return dsl.vmap(dsl.grad(lambda w, c, s: f(w, c, s).sum()), in_axes=(None, None, 0))

    program = values(dsl.compile(rnn, target="cuda")).lower(w, c, seqs).ir("optimized")
    assert program.count('"dsl.scan"') == 1
    for transform in (values, grads):
        gpu, cpu = run("cuda", transform), run("cpu", transform)
        np.testing.assert_allclose(gpu, cpu, rtol=1e-12)
