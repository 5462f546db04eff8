"""Indexing with integer arrays on ``target="cuda"`` in the simulator: gathers read by loops, a
reduction and a row band; scatters (add with repeated indices, set keeping the last write, masked
writes, index_add_ into an argument); gradients of a cross-entropy with integer labels and of an
embedding lookup; in-place on and off; each against the CPU backend, bit for bit where the order of
the updates decides (itself checked against NumPy and JAX in tests/test_gather_scatter.py). The
scatter's two forms (``compiler/kernel/cuda/scatter.py``, no atomics in either): the walk, threads
owning elements going through every update in order, and the sorted form (a stable radix sort of the
update positions by row, then each row's segment in order), forced on tiny shapes by
``sorted_form`` and checked against NumPy bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
IDX = np.array([3, 0, -1, 3, 9, -7])  # repeated, negative, past both ends
V = RNG.standard_normal((len(IDX), 4))
INPLACE = pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
# Whole programs run with in-place on only (CI time): their in-place-off runs are the CPU's
# (tests/test_gather_scatter.py), and each CUDA kernel kind runs off in the sorted-scatter table.
IN_PLACE_ONLY = pytest.mark.parametrize("inplace", [True], ids=["inplace"])


def both(fn, *args, **kwargs):
    """``fn`` compiled for CUDA and for the CPU, on copies of ``args``."""
    on_gpu = dsl.compile(fn, target="cuda", **kwargs)(*[np.copy(a) for a in args])
    on_cpu = dsl.compile(fn, target="cpu", **kwargs)(*[np.copy(a) for a in args])
    return on_gpu, on_cpu


def same(got, want, rtol: float = 0.0) -> None:
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14 if rtol else 0.0)


def reads(x, i):
    return x[i] * 2.0, (x[:, i % 4] ** 2).sum(axis=0), dsl.nn.softmax(x[i], axis=-1), x[i, i % 4]


def writes(x, i, v):
    a = x * 1.0
    a[i] = v
    b = x.copy()
    b[b < 0] = 0.0
    f32 = x.astype(np.float32).at[i].add(v.astype(np.float32))
    return a, x.at[i].add(v), b, x.at[:, i % 4].add(1.0), f32, x.at[i].max(v), x.at[i].min(v), x.at[i].mul(v)


@IN_PLACE_ONLY
def test_reads_and_writes(inplace: bool) -> None:
    same(*both(reads, X, IDX, inplace=inplace), rtol=1e-12)  # (a softmax: the backends' exp differ)
    same(*both(writes, X, IDX, V, inplace=inplace))


def test_index_add_into_an_argument() -> None:
    def step(w, i, g):
        w.index_add_(0, i, g * -0.1)

    on_gpu, on_cpu = X.copy(), X.copy()
    dsl.compile(step, target="cuda")(on_gpu, IDX, V)
    dsl.compile(step, target="cpu")(on_cpu, IDX, V)
    same(on_gpu, on_cpu)


def merged_writes(x, y, a, b, v):
    x, y = x.copy(), y.copy()
    x[a, b] = v  # several index items: one merged position, out of range in one item dropped
    x[1, a[1:4]] += 2.0 * v[1:4]
    y[a[:3], :, b[:3]] = v[:3, None]
    return x, y


@IN_PLACE_ONLY
def test_writes_with_several_index_items_drop_as_the_cpu(inplace: bool) -> None:
    """``x[a, b] = v`` drops an update outside one of its axes on CUDA as on the CPU (both clamped it
    until 2026-11-27), its gradient too."""
    a, b, v = np.array([0, 5, -1, 2, -4]), np.array([1, 1, 9, -2, 0]), np.arange(5.0) + 1.0
    x, y = np.arange(12.0).reshape(3, 4), np.arange(24.0).reshape(3, 2, 4)
    same(*both(merged_writes, x, y, a, b, v, inplace=inplace))

    def total(x, y, a, b, v):
        return sum(dnp.sin(o).sum() for o in merged_writes(x, y, a, b, v))

    same(*both(dsl.grad(total, argnums=(0, 1, 4)), x, y, a, b, v, inplace=inplace), rtol=1e-12)


def loss(emb, out, tokens, targets):
    h = dnp.tanh(emb[tokens])
    logits = h @ out
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - dnp.log(dnp.sum(dnp.exp(logits - m), axis=1, keepdims=True))
    return -dnp.mean(dnp.take_along_axis(logp, targets[:, None], axis=1))


@IN_PLACE_ONLY
def test_gradients_of_an_embedding_and_a_cross_entropy(inplace: bool) -> None:
    tokens = RNG.integers(0, 7, 12)
    targets = (tokens + 1) % 7
    emb, out = RNG.standard_normal((7, 4)), RNG.standard_normal((4, 7))
    grad = dsl.value_and_grad(loss, argnums=(0, 1))
    on_gpu, on_cpu = both(grad, emb, out, tokens, targets, inplace=inplace)
    same((on_gpu[0], *on_gpu[1]), (on_cpu[0], *on_cpu[1]), rtol=1e-12)


def test_one_index_per_line_scatters_directly_as_the_cpu() -> None:
    """``take_along_axis`` with one index per line (``gather.UNIQUE``): its gradient's scatter is the
    direct form, a thread per update (it was the walk or a radix sort), along each axis, of 3-D
    arrays, and clamped indices, bit for bit as the CPU."""
    x3 = RNG.standard_normal((3, 5, 4))

    def f(x, x3, i):
        a = dnp.take_along_axis(x, (i[:5] % 4)[:, None], 1)
        b = dnp.take_along_axis(x, (i[:4] % 5)[None, :] - 7, 0)  # out of range: clamped
        c = dnp.take_along_axis(x3, (i[:12] % 5).reshape(3, 1, 4), 1)
        return (a * a).sum() + (b * 3.0).sum() + (c**3).sum()

    grad = dsl.value_and_grad(f, argnums=(0, 1))
    on_gpu, on_cpu = both(grad, X, x3, IDX.repeat(4))
    same((on_gpu[0], *on_gpu[1]), (on_cpu[0], *on_cpu[1]), rtol=1e-12)


@pytest.mark.parametrize("threads", [1, 8, 64], ids=["serial", "blocks-of-rows", "a-row-each"])
def test_scatter_blockings_match_numpy_bit_for_bit(monkeypatch, threads: int) -> None:
    """The follow kernel's thread blocks (``compiler/kernel/cuda/scatter.py``): a thread per line
    walking every update (``THREADS`` 1), threads owning blocks of rows with a shorter last block,
    and a thread per element: each is ``np.add.at``'s (and the other combines' serial loops') bits,
    as the CPU's, with many repeated indices along axis 0 (an embedding's gradient) and 1."""
    from compiler.kernel.cuda import scatter as cuda_scatter

    monkeypatch.setattr(cuda_scatter, "THREADS", threads)
    x0, x1 = RNG.standard_normal((7, 3)).astype(np.float32), RNG.standard_normal((2, 7, 2))
    i = RNG.integers(-9, 9, 40)  # repeated, negative, past both ends (dropped)
    v0, v1 = RNG.standard_normal((40, 3)).astype(np.float32), RNG.standard_normal((2, 40, 2))

    def f(x0, x1, i, v0, v1):
        return x0.at[i].add(v0), x1.at[:, i].add(v1), x0.at[i].set(v0), x1.at[:, i].max(v1)

    on_gpu, on_cpu = both(f, x0, x1, i, v0, v1)
    same(on_gpu, on_cpu)
    (c, u0), (_, u1) = kept(i, 7, v0), kept(i, 7, v1, 1)
    a0, a1, s0, m1 = x0.copy(), x1.copy(), x0.copy(), x1.copy()
    np.add.at(a0, c, u0)
    np.add.at(a1, (slice(None), c), u1)
    s0[c] = u0
    np.maximum.at(m1, (slice(None), c), u1)
    same(on_gpu, (a0, a1, s0, m1))


def mixed(x, i, j, r):
    a = x.copy()
    a[i, :, j] += 1.0  # array items apart: their axes first
    b = x.copy()
    b[:, x[0, :, 0] > 0] *= 3.0  # a traced mask after a slice: a where
    c = x.copy()
    c[i] += r[:, None, None]  # repeated rows: the last sum written
    return x[i, None, :, j], x[0, :, j], x[:, np.array([True, False, True])], a, b, c


@IN_PLACE_ONLY
def test_mixed_indexing_and_augmented_mask_writes(inplace: bool) -> None:
    x = RNG.standard_normal((4, 3, 5))
    i, j, r = np.array([0, 2, 2, 1]), np.array([1, 4, 4, 0]), RNG.standard_normal(4)
    on_gpu, on_cpu = both(mixed, x, i, j, r, inplace=inplace)
    same(on_gpu, on_cpu)
    same(on_gpu, mixed(x.copy(), i, j, r))


def sort_sizes(monkeypatch, tile: int, bits: int, chunk: int) -> None:
    """Every scatter with updates takes the sorted form (``compiler/kernel/cuda/scatter.py``: the
    weights of its choice zeroed), its radix sort (``sort.py``) over tiles of ``tile`` entries (a
    block of the simulator's 8 threads each), digits of at most ``bits`` bits, and the table scanned
    in chunks of ``chunk`` counters (a block each)."""
    from compiler.kernel.cuda import scatter, sort

    monkeypatch.setattr(scatter, "SORT_STEP", 0)
    monkeypatch.setattr(scatter, "LAUNCH_WORK", 0)
    monkeypatch.setattr(sort, "TILE", tile)
    monkeypatch.setattr(sort, "RADIX_BITS", bits)
    monkeypatch.setattr(sort, "SCAN_CHUNK", chunk)


@pytest.fixture
def sorted_form(monkeypatch):
    """The sorted form on sizes that take the simulator's tiny shapes over every path of the sort:
    tiles of 20 entries (3 a thread, the last threads of a block idle, a shorter last tile), digits
    of 2 bits (several passes), the table in chunks of 5 (several, the last shorter: the chunk sums
    kernel, then each chunk scanned from the totals before it)."""
    sort_sizes(monkeypatch, 20, 2, 5)


def kept(i: np.ndarray, n: int, v: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The rows on an axis of ``n`` where the updates ``v`` (the index's axes at ``axis``) at
    ``i`` land, and those updates: an index wraps once if negative; one still outside the axis
    is dropped (JAX's ``.at[]``)."""
    w = np.where(i < 0, i + n, i)
    inside = (w >= 0) & (w < n)
    return w[inside], v[(slice(None),) * axis + (inside,)]


def sorted_cases():
    """(name, function, arguments, NumPy's results): every scatter, float and int, 1-D and 2-D rows,
    the indexed axis first, in the middle and last, repeated indices past both ends, a 2-D index
    array, rows of 7 (two passes), 40 (three: the positions go back to the first array) and 1, and
    no updates at all."""
    f32, ints = RNG.standard_normal((7, 3)).astype(np.float32), RNG.integers(-50, 50, 7).astype(np.int32)
    i = RNG.integers(-9, 9, 40)  # repeated; -8 and -9 wrap once to below 0, 7 and 8 past the end: dropped
    v32, vi = RNG.standard_normal((40, 3)).astype(np.float32), RNG.integers(-50, 50, 40).astype(np.int32)
    mid, vmid = RNG.standard_normal((2, 7, 2)), RNG.standard_normal((2, 5, 8, 2))
    i2 = i.reshape(5, 8)
    wide, iw, vw = RNG.standard_normal((40, 2)), RNG.integers(-45, 45, 60), RNG.standard_normal((60, 2))
    one, i1, v1 = RNG.standard_normal((1, 3)), np.array([0, -1, 5, 0]), RNG.standard_normal((4, 3))
    none, v0 = np.zeros(0, np.int64), np.zeros((0, 3), np.float32)

    def at(ufunc, x, idx, v, axis=0):
        rows, v = kept(idx, x.shape[axis], v, axis)
        x = x.copy()
        ufunc.at(x, (slice(None),) * axis + (rows,), v)
        return x

    def put(x, idx, v, axis=0):
        rows, v = kept(idx, x.shape[axis], v, axis)
        x = x.copy()
        x[(slice(None),) * axis + (rows,)] = v
        return x

    return [
        ("add f32", lambda x, i, v: x.at[i].add(v), (f32, i, v32), at(np.add, f32, i, v32)),
        ("set f32", lambda x, i, v: x.at[i].set(v), (f32, i, v32), put(f32, i, v32)),
        ("mul f32", lambda x, i, v: x.at[i].mul(v), (f32, i, v32), at(np.multiply, f32, i, v32)),
        ("max f32", lambda x, i, v: x.at[i].max(v), (f32, i, v32), at(np.maximum, f32, i, v32)),
        ("min f32", lambda x, i, v: x.at[i].min(v), (f32, i, v32), at(np.minimum, f32, i, v32)),
        ("add i32 rows of one", lambda x, i, v: x.at[i].add(v), (ints, i, vi), at(np.add, ints, i, vi)),
        ("set i32 rows of one", lambda x, i, v: x.at[i].set(v), (ints, i, vi), put(ints, i, vi)),
        ("max i32 rows of one", lambda x, i, v: x.at[i].max(v), (ints, i, vi), at(np.maximum, ints, i, vi)),
        (
            "add, middle axis, 2-D index",
            lambda x, i, v: x.at[:, i].add(v),
            (mid, i2, vmid),
            at(np.add, mid, i2, vmid, axis=1),
        ),
        (
            "set, middle axis, 2-D index",
            lambda x, i, v: x.at[:, i].set(v),
            (mid, i2, vmid),
            put(mid, i2, vmid, axis=1),
        ),
        ("add, 40 rows", lambda x, i, v: x.at[i].add(v), (wide, iw, vw), at(np.add, wide, iw, vw)),
        ("set, 40 rows", lambda x, i, v: x.at[i].set(v), (wide, iw, vw), put(wide, iw, vw)),
        (
            "add, last axis",
            lambda x, i, v: x.at[:, i].add(v),
            (wide.T.copy(), iw, vw.T.copy()),
            at(np.add, wide.T.copy(), iw, vw.T.copy(), axis=1),
        ),
        ("add, one row", lambda x, i, v: x.at[i].add(v), (one, i1, v1), at(np.add, one, i1, v1)),
        ("add, no updates", lambda x, i, v: x.at[i].add(v), (f32, none, v0), f32),
    ]


@INPLACE
@pytest.mark.parametrize("case", [c[0] for c in sorted_cases()])
def test_sorted_scatters_match_numpy_bit_for_bit(sorted_form, inplace: bool, case: str) -> None:
    """The sorted form (a stable radix sort of the update positions by row, then a thread per
    element combining its row's segment in order) gives ``ufunc.at``'s bits and the last write of
    ``x[idx] = v``, as the CPU's serial loop does."""
    _, fn, args, want = next(c for c in sorted_cases() if c[0] == case)
    source = dsl.compile(fn, target="cuda", inplace=inplace).lower(*args).source()
    assert ("_segments(" in source) == (args[1].size > 0), "the sorted form was not taken"
    on_gpu, on_cpu = both(fn, *args, inplace=inplace)
    same(on_gpu, on_cpu)
    same(on_gpu, want)


def test_sorted_embedding_gradient(sorted_form) -> None:
    """The gradient of an embedding lookup and a cross-entropy with integer labels through the
    sorted form (the lookup's scatter-add), as on the CPU."""
    tokens = RNG.integers(0, 7, 30)
    targets = (tokens + 1) % 7
    emb, out = RNG.standard_normal((7, 4)), RNG.standard_normal((4, 7))
    grad = dsl.value_and_grad(loss, argnums=(0, 1))
    assert "_segments(" in dsl.compile(grad, target="cuda").lower(emb, out, tokens, targets).source()
    on_gpu, on_cpu = both(grad, emb, out, tokens, targets)
    same((on_gpu[0], *on_gpu[1]), (on_cpu[0], *on_cpu[1]), rtol=1e-12)


def test_sorted_scatter_in_a_loop_body(sorted_form) -> None:
    """A native loop's body scatters in the sorted form: its scratch is the body's (placed in the
    body's plan, under the loop's arena), as on the CPU."""
    x, i = RNG.standard_normal((7, 3)).astype(np.float32), RNG.integers(-9, 9, 20)
    v = RNG.standard_normal((20, 3)).astype(np.float32)

    def f(x, i, v):
        return dsl.fori_loop(0, 3, lambda k, a: a.at[i].add(v * a[0, 0]), x)

    assert "_segments(" in dsl.compile(f, target="cuda").lower(x, i, v).source()
    same(*both(f, x, i, v))


def test_sorted_scatter_with_wide_digits_and_many_chunks(monkeypatch) -> None:
    """Digits of 4 bits (16 counters a thread: more digits than the simulator's 8 threads, each
    thread taking several digits' tile counts) over tiles of 6 entries, the table in 10 chunks of 8
    counters (more than a block's threads: one adds up two chunk totals): bit for bit NumPy's
    ``np.add.at`` (and the last write of a set) with repeated, negative and past-the-end rows."""
    sort_sizes(monkeypatch, 6, 4, 8)
    x = RNG.standard_normal((200, 2))
    i = np.concatenate([RNG.integers(-210, 210, 26), [5, 5, -195, 5]])  # 8 bits of row: 2 passes
    v = RNG.standard_normal((30, 2))

    def f(x, i, v):
        return x.at[i].add(v), x.at[i].set(v)

    source = dsl.compile(f, target="cuda").lower(x, i, v).source()
    assert "_segments(" in source and "_sums(" in source, "the sorted form with chunk sums was not taken"
    on_gpu, on_cpu = both(f, x, i, v)
    same(on_gpu, on_cpu)
    (c, u), added, put = kept(i, 200, v), x.copy(), x.copy()
    np.add.at(added, c, u)
    put[c] = u
    same(on_gpu, (added, put))


@pytest.mark.parametrize("sorted_", [False, True], ids=["walk", "sorted"])
def test_scatter_results_computed_in_the_results_memory(sorted_: bool, request) -> None:
    """``results_in_place`` (tests/test_results_in_place.py, whose programs these are): an embedding
    gradient's zeroed base and a scattered, scaled, overwritten array live in the result's own
    device memory, where the last kernel runs in place; the values are the CPU's bit for bit."""
    from test_results_in_place import CASES

    if sorted_:
        request.getfixturevalue("sorted_form")
    for name in ("embedding gradient", "scatter, scale, write"):
        fn, args = CASES[name]
        assert dsl.compile(fn, target="cuda").lower(*args).memory_plan().in_result, name
        gpu, cpu = both(fn, *args)
        np.testing.assert_array_equal(np.asarray(gpu), cpu)
