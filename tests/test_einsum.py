"""``dnp.einsum`` (issue 29, item 4): subscripts against ``np.einsum`` on the reference interpreter
(explicit and implicit outputs, ellipses, diagonals, broadcasting, dtypes, the sublist form, NumPy's
dispatch) and on the CPU backend, gradients against ``jax.numpy.einsum`` in float64, the lowering
(matmuls, no outer product summed, no masked diagonal), the contraction order against
``np.einsum_path``, and the errors at the user's line."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_same, interpret_fn, trace

import dsl
import dsl.numpy as dnp
from compiler.pipeline import Options, run_passes
from compiler.prims.base import Kind
from dsl import einsum as einsum_module

jax.config.update("jax_enable_x64", True)

HERE = re.escape(__file__.rsplit("/", 1)[-1])
rng = np.random.default_rng(4)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


# subscripts -> operands (float64 unless the case is about dtypes)
CASES: list[tuple[str, tuple[Any, ...]]] = [
    ("ij,jk->ik", (r(2, 3), r(3, 4))),
    ("ij,jk", (r(2, 3), r(3, 4))),
    ("ij,kj->ik", (r(2, 3), r(4, 3))),
    ("ji,jk->ik", (r(3, 2), r(3, 4))),
    ("ij,jk->ki", (r(2, 3), r(3, 4))),
    ("bij,bjk->bik", (r(2, 3, 4), r(2, 4, 5))),
    ("bhqd,bhkd->bhqk", (r(2, 3, 4, 5), r(2, 3, 6, 5))),
    ("bqhd,bkhd->bhqk", (r(2, 4, 3, 5), r(2, 6, 3, 5))),
    ("ijk,jil->kl", (r(2, 3, 4), r(3, 2, 5))),
    ("i,i", (r(3), r(3))),
    ("i,i->i", (r(3), r(3))),
    ("i,j->ij", (r(3), r(4))),
    ("ab,cd->abcd", (r(2, 3), r(4, 5))),
    ("ij,ij->ij", (r(2, 3), r(2, 3))),
    ("ij,ij->i", (r(2, 3), r(2, 3))),
    ("ij,j->i", (r(2, 3), r(3))),
    ("ij->ji", (r(2, 3),)),
    ("ij->", (r(2, 3),)),
    ("ij", (r(2, 3),)),
    ("ji", (r(2, 3),)),
    ("ii", (r(3, 3),)),
    ("ii->i", (r(3, 3),)),
    ("iji->j", (r(3, 2, 3),)),
    ("iii->i", (r(3, 3, 3),)),
    ("iij,jk->ik", (r(3, 3, 2), r(2, 4))),
    ("ij,ii->j", (r(2, 3), r(2, 2))),
    ("Ba,aB", (r(2, 3), r(3, 2))),
    ("bA", (r(2, 3),)),
    ("...ij,...jk->...ik", (r(5, 2, 3), r(3, 4))),
    ("ij...,j...->i...", (r(2, 3, 4), r(3, 1))),
    ("...,...", (r(2, 3), r(3))),
    ("i...->...", (r(2, 3, 4),)),
    ("...i,...i", (r(2, 3), r(4, 1, 3))),
    ("ij,jk", (r(2, 1), r(3, 4))),  # a size-1 axis broadcast against the other operand's
    ("ij,ij->ij", (r(1, 3), r(2, 1))),
    ("i,", (r(3), 2.5)),
    (",", (np.float64(2.0), r())),
    ("ij,jk,kl->il", (r(2, 3), r(3, 4), r(4, 5))),
    ("ij,jk,k->i", (r(5, 5), r(5, 5), r(5))),
    ("abc,cd,bd->a", (r(2, 3, 4), r(4, 5), r(3, 5))),
    ("i,i,i->i", (r(3), r(3), r(3))),
    ("i,j,k->ijk", (r(2), r(3), r(4))),
    ("ea,fb,abcd,gc,hd->efgh", (r(2, 3), r(2, 3), r(3, 3, 3, 3), r(2, 3), r(2, 3))),
    ("ab,bc,cd,de,ef->af", (r(2, 3), r(3, 4), r(4, 5), r(5, 6), r(6, 2))),
    ("i,i,j,j->", (r(3), r(3), r(4), r(4))),  # two disjoint groups: an outer product of scalars
    ("ij,jk", (r(2, 0), r(0, 4))),
    ("ij,jk", (r(2, 1), r(0, 4))),  # a size-1 axis broadcast against an empty one
]


@pytest.mark.parametrize(("subscripts", "operands"), CASES, ids=[c[0] or "scalars" for c in CASES])
def test_against_numpy(subscripts: str, operands: tuple[Any, ...]) -> None:
    got = interpret_fn(lambda *xs: dnp.einsum(subscripts, *xs), *operands)
    assert_same(got, np.asarray(np.einsum(subscripts, *operands)), rtol=1e-12)


@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal", ["einsum_path", (1, 2), (0, 1)]])
def test_every_optimize_gives_numpys_result(optimize: Any) -> None:
    a, b, c = r(2, 3), r(3, 4), r(4, 5)
    got = interpret_fn(lambda x, y, z: dnp.einsum("ij,jk,kl->il", x, y, z, optimize=optimize), a, b, c)
    assert_same(got, np.einsum("ij,jk,kl->il", a, b, c), rtol=1e-12)


@pytest.mark.parametrize(
    ("subscripts", "operands", "kwargs"),
    [
        ("ij,jk", (r(2, 3).astype(np.float32), r(3, 4).astype(np.float32)), {}),
        (
            "ij,jk",
            (rng.integers(-5, 5, (2, 3)).astype(np.int32), rng.integers(-5, 5, (3, 4)).astype(np.int32)),
            {},
        ),
        ("ij,ij->i", (rng.integers(-5, 5, (2, 3)).astype(np.int32), rng.integers(-5, 5, (2, 3))), {}),
        ("ij->i", (rng.integers(-5, 5, (2, 3)).astype(np.int32),), {}),
        ("ij,jk", (r(2, 3) > 0, r(3, 4) > 0), {}),
        ("i,i", (r(3) > 0, r(3) > 0), {}),
        ("ij,jk", (r(2, 3).astype(np.float32), rng.integers(-5, 5, (3, 4)).astype(np.int32)), {}),
        ("ij,jk", (r(2, 3).astype(np.float32), r(3, 4).astype(np.float32)), {"dtype": np.float64}),
        ("ii", (rng.integers(-5, 5, (3, 3)).astype(np.int32),), {"dtype": np.float32, "casting": "unsafe"}),
    ],
)
def test_dtypes_follow_numpy(subscripts: str, operands: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    want = np.einsum(subscripts, *operands, **kwargs)
    got = interpret_fn(lambda *xs: dnp.einsum(subscripts, *xs, **kwargs), *operands)
    assert_same(got, np.asarray(want), rtol=1e-5)


def test_sublist_form_and_numpy_dispatch() -> None:
    a, b = r(2, 3), r(3, 4)

    def f(x, y):
        return (
            dnp.einsum(x, [0, 1], y, [1, 2], [0, 2]),
            dnp.einsum(x, [Ellipsis, 1], y[:, 0], [1]),
            np.einsum("ij,jk->ki", x, y),  # NumPy's __array_function__ hands a traced array to dnp.einsum
            np.einsum(x, [0, 1], optimize=True),
        )

    want = (a @ b, a @ b[:, 0], (a @ b).T, np.einsum("ij", a))
    assert_same(interpret_fn(f, a, b), want, rtol=1e-12)


def test_on_the_cpu_backend() -> None:
    """One compiled program of several einsums, float32 and integer ones among them (BLAS and the
    integer matmul loop), and a gradient through a three-operand chain."""
    a, b, c = r(4, 5).astype(np.float32), r(5, 6).astype(np.float32), r(6).astype(np.float32)
    i, j = rng.integers(-5, 5, (2, 4, 3)).astype(np.int32), rng.integers(-5, 5, (2, 3, 4)).astype(np.int32)
    m = r(6, 6)

    def f(a, b, c, i, j, m):
        return (
            dnp.einsum("ij,jk,k->i", a, b, c),
            dnp.einsum("ik,jk->ij", a, b.T),
            dnp.einsum("bij,bjk->bki", i, j),
            dnp.einsum("ii->i", m),
            dnp.einsum("ij,ij->i", m, m),
        )

    want = (
        np.einsum("ij,jk,k->i", a, b, c),
        a @ b,
        np.einsum("bij,bjk->bki", i, j),
        np.diagonal(m).copy(),
        np.einsum("ij,ij->i", m, m),
    )
    assert_same(dsl.compile(f)(a, b, c, i, j, m), want, rtol=1e-5)
    x, y, z = r(3, 4), r(4, 5), r(5, 2)
    loss = lambda x, y, z: (dnp.einsum("ij,jk,kl->il", x, y, z) ** 2).sum()  # noqa: E731
    jax_loss = lambda x, y, z: (jnp.einsum("ij,jk,kl->il", x, y, z) ** 2).sum()  # noqa: E731
    got = dsl.compile(dsl.grad(loss, argnums=(0, 1, 2)))(x, y, z)
    want_grads = jax.grad(jax_loss, argnums=(0, 1, 2))(x, y, z)
    assert_same(got, tuple(np.asarray(w) for w in want_grads), rtol=1e-10)


def test_the_result_is_a_new_array() -> None:
    """As JAX's (NumPy returns a view of a single operand where it can): a write to the result
    leaves the operand alone."""

    def f(x):
        y = x * 1.0
        d = dnp.einsum("ii->i", y)
        d += 1.0
        return y, d

    m = r(3, 3)
    assert_same(dsl.compile(f)(m), (m, np.diagonal(m) + 1.0), rtol=1e-12)


# ---- gradients against JAX -------------------------------------------------------------------------------


# one of each kind: matmul pairs (plain, transposed, batched, attention-like), products, dot
# products per row, diagonals, broadcasting, ellipses, chains and an outer product of five
GRAD_SUBSCRIPTS = (
    "ij,kj->ik bqhd,bkhd->bhqk ijk,jil->kl i,j->ij ij,ij->i iji->j iij,jk->ik ij,ii->j "
    "...ij,...jk->...ik ij...,j...->i... ij,jk abc,cd,bd->a ea,fb,abcd,gc,hd->efgh"
).split()
GRAD_CASES = [c for c in CASES if c[0] in GRAD_SUBSCRIPTS and (c[0] != "ij,jk" or c[1][0].shape == (2, 1))]


@pytest.mark.parametrize(("subscripts", "operands"), GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_against_jax(subscripts: str, operands: tuple[Any, ...]) -> None:
    weights = np.asarray(np.sin(np.arange(np.size(np.einsum(subscripts, *operands))) + 1.0))
    shape = np.shape(np.einsum(subscripts, *operands))
    w = weights.reshape(shape)
    argnums = tuple(range(len(operands)))

    def loss(*xs):
        return dnp.sum(dnp.tanh(dnp.einsum(subscripts, *xs)) * w)

    def jax_loss(*xs):
        return jnp.sum(jnp.tanh(jnp.einsum(subscripts, *xs)) * w)

    got = interpret_fn(dsl.grad(loss, argnums=argnums), *operands)
    want = jax.grad(jax_loss, argnums=argnums)(*operands)
    assert_same(got, tuple(np.asarray(g) for g in want), rtol=1e-10)


def test_second_order_gradient_against_jax() -> None:
    x, y = r(2, 3), r(3, 2)

    def f(x, y):
        return dnp.sum(dnp.einsum("ij,jk,kl->il", x, y, x) ** 2)

    def jf(x, y):
        return jnp.sum(jnp.einsum("ij,jk,kl->il", x, y, x) ** 2)

    got = interpret_fn(dsl.hessian(f), x, y)
    assert_same(got, np.asarray(jax.hessian(jf)(x, y)), rtol=1e-10)


# ---- the lowering -----------------------------------------------------------------------------------------


def optimized_ops(subscripts: str, *shapes: tuple[int, ...], **kwargs: Any) -> list[Any]:
    args = [np.ones(s) for s in shapes]
    func, _, _ = trace(lambda *xs: dnp.einsum(subscripts, *xs, **kwargs), *args)
    return list(run_passes(func, Options(verify=True))["optimized"].ops)


def names(ops: list[Any]) -> list[str]:
    return [op.prim.name for op in ops]


def test_pairs_are_matmuls_with_no_outer_product_summed() -> None:
    assert names(optimized_ops("bhqd,bhkd->bhqk", (2, 3, 4, 5), (2, 3, 6, 5))) == ["transpose", "matmul"]
    assert names(optimized_ops("bij,bjk->bik", (2, 3, 4), (2, 4, 5))) == ["matmul"]
    # kept indices on both sides and one summed: a matmul of the merged axes, never a product of
    # all five indices
    ops = optimized_ops("abc,cde->abde", (2, 3, 4), (4, 5, 6))
    assert names(ops).count("matmul") == 1 and "mul" not in names(ops) and "reduce_sum" not in names(ops)
    # a dot product per row: the multiply fused into the reduction's prologue (no matmul of 1x1 blocks)
    assert names(optimized_ops("ij,ij->i", (50, 30), (50, 30))) == ["mul", "reduce_sum"]


def test_diagonal_is_a_strided_slice_not_a_mask() -> None:
    assert names(optimized_ops("ii->i", (4, 4))) == ["reshape", "slice"]
    ops = optimized_ops("iji->j", (3, 2, 3))
    assert "slice" in names(ops) and not {"iota", "mul", "select", "eq"} & set(names(ops))
    assert names(optimized_ops("ii", (4, 4))) == ["reshape", "slice", "reduce_sum"]


def _largest_intermediate(subscripts: str, shapes: list[tuple[int, ...]]) -> float:
    report = np.einsum_path(subscripts, *(np.empty(s) for s in shapes), optimize="greedy")[1]
    return float(re.search(r"Largest intermediate:\s+(\S+) elements", report).group(1))  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("subscripts", "shapes"),
    [
        ("ij,jk,k->i", [(40, 40), (40, 40), (40,)]),
        ("k,jk,ij->i", [(40,), (40, 40), (40, 40)]),
        ("ab,bc,cd,d->a", [(30, 30), (30, 30), (30, 30), (30,)]),
    ],
)
def test_contraction_order_keeps_intermediates_as_small_as_numpys_greedy_path(
    subscripts: str, shapes: list[tuple[int, ...]]
) -> None:
    """The chain contracted from the vector: matrix-vector products (matmuls), and no computed value
    larger than the largest intermediate of ``np.einsum_path``'s greedy path; left to right
    (``optimize=False``) builds a matrix product, larger."""
    largest = _largest_intermediate(subscripts, shapes)

    def computed(ops: list[Any]) -> list[int]:
        return [op.results[0].type.size for op in ops if op.prim.kind is not Kind.MOVEMENT]

    ops = optimized_ops(subscripts, *shapes)
    assert names(ops).count("matmul") == len(shapes) - 1
    assert max(computed(ops)) <= largest
    if subscripts[0] != "k":  # left to right from the vector is the good order already
        assert max(computed(optimized_ops(subscripts, *shapes, optimize=False))) > largest


def _random_subscripts(rand: random.Random, letters: str) -> tuple[str, list[tuple[int, ...]]]:
    sizes = {c: rand.choice([2, 3, 4, 5, 7, 8]) for c in letters}
    terms = ["".join(rand.sample(letters, rand.randint(1, 4))) for _ in range(rand.randint(3, 6))]
    every = "".join(terms)
    output = "".join(sorted(c for c in set(every) if rand.random() < 0.3))
    return ",".join(terms) + "->" + output, [tuple(sizes[c] for c in t) for t in terms]


def _sets(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[frozenset[int]], frozenset[int], Any]:
    parsed = einsum_module.parse(subscripts, shapes)
    return [frozenset(labels) for labels in parsed.inputs], frozenset(parsed.output), parsed.sizes


def _cost(path: list[tuple[int, ...]], sets: list[frozenset[int]], output: frozenset[int], sizes: Any) -> int:
    total = 0
    for step in path:
        kept = einsum_module._kept(sets, step, output)
        total += einsum_module._flops([sets[k] for k in step], kept, sizes)
        sets = [s for k, s in enumerate(sets) if k not in step] + [kept]
    return total


def test_greedy_path_is_numpys() -> None:
    rand = random.Random(7)
    for _ in range(200):
        subscripts, shapes = _random_subscripts(rand, "abcdefgh")
        every, output = subscripts.split("->")
        if set(every) - {","} == set(output):
            continue  # nothing summed: NumPy leaves it to its one loop (any pairwise order is as good)
        operands = [np.empty(s) for s in shapes]
        # NumPy's memory limit lifted (see greedy_path): a pairwise step wherever NumPy has one
        want = np.einsum_path(subscripts, *operands, optimize=("greedy", 10**12))[0][1:]
        assert einsum_module.greedy_path(*_sets(subscripts, shapes)) == [tuple(p) for p in want], subscripts


def test_optimal_path_costs_no_more_than_numpys_optimal_or_greedy() -> None:
    rand = random.Random(8)
    checked = 0
    for _ in range(200):
        subscripts, shapes = _random_subscripts(rand, "abcdef")
        every = subscripts.split("->")[0].replace(",", "")
        if any(every.count(c) == 1 and c not in subscripts.split("->")[1] for c in every):
            continue  # einsum sums an operand's own indices before choosing the order
        sets, output, sizes = _sets(subscripts, shapes)
        numpys = np.einsum_path(subscripts, *(np.empty(s) for s in shapes), optimize=("optimal", 10**12))[0][
            1:
        ]
        mine = _cost(einsum_module.optimal_path(sets, output, sizes), sets, output, sizes)
        assert mine <= _cost([tuple(p) for p in numpys], sets, output, sizes), subscripts
        assert mine <= _cost(einsum_module.greedy_path(sets, output, sizes), sets, output, sizes), subscripts
        checked += 1
    assert checked > 20


def test_optimal_path_is_every_order_checked() -> None:
    """On small chains the search's cost is the least over every pairwise order (brute force)."""
    rand = random.Random(9)
    for _ in range(30):
        subscripts, shapes = _random_subscripts(rand, "abcde")
        sets, output, sizes = _sets(subscripts, shapes)
        sets = [s & (output.union(*(t for j, t in enumerate(sets) if j != k))) for k, s in enumerate(sets)]
        if len(sets) > 5:
            continue

        def orders(n: int) -> Any:
            if n == 1:
                yield []
                return
            for pair in itertools.combinations(range(n), 2):
                for rest in orders(n - 1):
                    yield [pair, *rest]

        least = min(_cost(p, sets, output, sizes) for p in orders(len(sets)))
        assert _cost(einsum_module.optimal_path(sets, output, sizes), sets, output, sizes) == least


# ---- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda x: dnp.einsum("ij,jk", x), dsl.ShapeError, r"einsum 'ij,jk': 2 terms for 1 operands"),
        (
            lambda x: dnp.einsum("ijk", x),
            dsl.ShapeError,
            r"einsum 'ijk': operand 0 has 2 axes for the 3 subscripts",
        ),
        (lambda x: dnp.einsum("i", x), dsl.ShapeError, r"operand 0 has 2 axes for the 1 subscripts"),
        (lambda x: dnp.einsum("ij,ij", x, x.T), dsl.ShapeError, r"index 'i' has size 3 in one operand and 4"),
        (
            lambda x: dnp.einsum("ii", x),
            dsl.ShapeError,
            r"einsum 'ii': operand 0 repeats 'i' over axes of sizes 3 and 4",
        ),
        (lambda x: dnp.einsum("ij->k", x), dsl.ShapeError, r"output subscript 'k' appears in no input"),
        (lambda x: dnp.einsum("ij->ii", x), dsl.ShapeError, r"output subscript 'i' appears more than once"),
        (lambda x: dnp.einsum("i1", x), dsl.ShapeError, r"invalid subscript '1': subscripts must be letters"),
        (lambda x: dnp.einsum("i.j", x), dsl.ShapeError, r"'\.' is only allowed as the ellipsis"),
        (lambda x: dnp.einsum("...i->i", x), dsl.ShapeError, r"'\.\.\.' axes must appear in the output"),
        (lambda x: dnp.einsum("ij->i->j", x), dsl.ShapeError, r"'->' may appear only once"),
        (lambda x: dnp.einsum("ij", x, optimize="dp"), dsl.TraceError, r"optimize must be True, False"),
        (
            lambda x: dnp.einsum("ij,jk", x, x.T, optimize=[(0, 2)]),
            dsl.ShapeError,
            r"step \(0, 2\) does not name",
        ),
        (lambda x: dnp.einsum("ij", x, out=x), dsl.TraceError, r"out= is not supported"),
        (
            lambda x: dnp.einsum("ij", x, dtype=np.int32),
            TypeError,
            r"operand 0 cannot be cast from float64 to int32 under the rule 'safe'",
        ),
        (lambda x: dnp.einsum(x, [0, 99]), dsl.ShapeError, r"integers in \[0, 52\) and Ellipsis"),
    ],
)
def test_errors_name_the_subscripts_at_the_users_line(call: Any, error: type[Exception], phrase: str) -> None:
    with pytest.raises(error, match=rf"{HERE}:\d+: .*{phrase}"):
        dsl.compile(call)(r(3, 4))
