"""Small programs the CLI lit tests compile (``dslc compile tests/lit/Inputs/model.py:FUNC``)."""

import dsl
import dsl.numpy as dnp


def mlp(x, w1, w2):
    h = dnp.tanh(x @ w1)
    return (h @ w2).sum(axis=-1)


def loss(x, w):
    return (dnp.tanh(x @ w) ** 2).mean()


def mismatched(x, y):
    return x @ y


def undefined_name(x):
    return x + missing_variable  # noqa: F821


@dsl.compile
def scaled(x):
    return x * 2.0 + 1.0


@dsl.compile(static_argnums=(1,))
def repeated(x, n):
    for _ in range(n):  # a Python loop over a static argument
        x = x * 2.0
    return x
