"""Every CUDA kernel generated for the test programs and the samples compiles to PTX for sm_80 and
sm_90 through NVVM from the pip wheels (no GPU, no driver: ``numba.cuda.compile_ptx``).

Programs: each primitive's registry program (all its cases), each differentiable primitive's
forward+backward program, and training-style programs at realistic sizes (so every reduction
strategy and the tiled matmul appear). ``tests/test_samples.py`` checks every program the samples
compile the same way, while they run.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import test_prims_registry as registry
import test_vjp_rules as rules
from cuda_ptx import ARCHS, PTX_AVAILABLE, PTX_UNAVAILABLE, Assembled, assemble, check_ptx

import dsl
import dsl.numpy as dnp
from compiler.codegen import compile_ptx
from compiler.ir.core import Function, Op, Value
from compiler.ir.verify import verify
from compiler.pipeline import option_defaults

if not PTX_AVAILABLE:
    pytest.skip(PTX_UNAVAILABLE, allow_module_level=True)


def optimized(fn, *args) -> Function:
    return dsl.compile(fn, target="cpu").lower(*args)._program.stages["optimized"]


@pytest.mark.parametrize("name", registry.ARRAY_PRIMS)
def test_forward_programs(name: str) -> None:
    func, _ = registry.build(name, registry.TABLE[name].cases())
    check_ptx(func, name)


@pytest.mark.parametrize("name", rules.DIFFERENTIABLE)
def test_backward_programs(name: str) -> None:
    params_all, ops_all, results = [], [], []
    for case in rules.cases_of(name):
        params, ops, out = rules.forward(name, case)
        ct = Value(out.type)
        emitted: list[Op] = []
        diff = rules.diff_operands(case, params)
        grads = rules.reverse_sweep(ops, [(out, ct)], [params[k] for k in diff], emitted)
        params_all += params + [ct]
        ops_all += ops + emitted
        results += [out] + [g for g in grads if g is not None]
    func = rules.program(params_all, ops_all, results)
    verify(func)
    check_ptx(func, f"{name} backward", inplace=False)


def _f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_training_programs_at_size() -> None:
    def layer_norm(x, g, b):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return ((x - mu) / dnp.sqrt(var + 1e-5) * g + b).sum()

    def xent(logits, y):
        return -(dsl.nn.log_softmax(logits) * y).sum(axis=1).mean()

    def attention(q, k, v):
        s = dsl.nn.softmax(q @ dnp.transpose(k, (0, 2, 1)) / 8.0, axis=-1)
        return (s @ v).sum()

    def heads(x, wq, wo):  # split heads read in place, the merge written in place (strided views)
        q = dnp.transpose((x @ wq).reshape(2, 64, 4, 16), (0, 2, 1, 3))
        a = dsl.nn.softmax(q @ dnp.transpose(q, (0, 1, 3, 2)) / 4.0, axis=-1) @ q
        return (dnp.transpose(a, (0, 2, 1, 3)).reshape(128, 64) @ wo).sum()

    x, g, b = _f32(1024, 512), _f32(512), _f32(512)
    n = check_ptx(optimized(dsl.value_and_grad(layer_norm, argnums=(0, 1, 2)), x, g, b), "layer norm")
    n += check_ptx(optimized(dsl.grad(xent), _f32(1024, 10), _f32(1024, 10)), "softmax xent")
    n += check_ptx(optimized(dsl.grad(attention, argnums=(0, 1, 2)), *[_f32(4, 128, 64)] * 3), "attention")
    n += check_ptx(optimized(lambda a: (a.sum(), a.max(axis=0)), _f32(1 << 20, 4)), "split reduction")
    n += check_ptx(
        optimized(dsl.grad(heads, argnums=(0, 1, 2)), _f32(128, 64), _f32(64, 64), _f32(64, 64)), "heads"
    )
    assert n > 10


def test_embedding_gradient_scatter_spreads_over_row_blocks() -> None:
    """An embedding's gradient (1000 x 64 from 300 tokens: few enough for the walk, not the sorted
    form of tests/test_cuda_scatter.py): the scatter-add's follow kernel has a thread per block of
    rows of a line (64 lines, at most ``THREADS`` threads: here one element each), not a thread per
    line walking every token (64 threads: the form before), and compiles for both archs."""

    def loss(emb, tokens, w):
        return (dnp.tanh(emb[tokens]) * w).sum()

    tokens = np.random.default_rng(0).integers(0, 1000, 300)
    program = dsl.compile(dsl.grad(loss), target="cuda").lower(_f32(1000, 64), tokens, _f32(300, 64))
    generated = program.program.generated
    walks = [k.name for k in generated.kernels if "for u in range(300)" in k.text]
    assert len(walks) == 1, [k.name for k in generated.kernels]
    grid = re.search(re.escape(walks[0]) + r"\[_grid\((\d+)\)", generated.source)
    assert grid and 64 * 500 <= int(grid.group(1)) <= 1 << 16, grid  # 64 000: a thread per element
    for cc in ARCHS:
        assert walks[0] in compile_ptx(generated, cc)


def test_a_label_per_row_gradient_scatters_directly() -> None:
    """Cross-entropy with integer labels at 4096x1000: ``take_along_axis`` with one index per row
    names each element once (``gather.UNIQUE``), so its gradient's scatter-add is one direct kernel,
    a thread per label; it was the sorted form, 16 kernels of a radix sort (6 kernel functions and
    158 KB of PTX now, 21 and 960 KB before; NVVM 4.5 s against 18.5 s on the 2-core VM)."""

    def loss(z, y):
        return -dnp.take_along_axis(dsl.nn.log_softmax(z, axis=1), y[:, None], 1).mean()

    labels = np.arange(4096) % 1000
    generated = dsl.compile(dsl.value_and_grad(loss), target="cuda").lower(_f32(4096, 1000), labels)
    generated = generated.program.generated
    scatters = [k.name for k in generated.kernels if "scatter" in k.name]
    assert len(scatters) == 1 and "u = (t // 1) % 4096" in generated.source, [
        k.name for k in generated.kernels
    ]
    assert not any("sort" in k.name or "count" in k.name for k in generated.kernels)
    grid = re.search(re.escape(scatters[0]) + r"\[_grid\((\d+)\)", generated.source)
    assert grid and int(grid.group(1)) == 4096, grid
    for cc in ARCHS:
        assert scatters[0] in compile_ptx(generated, cc)


def _band_programs() -> list[tuple[str, object, tuple[np.ndarray, ...]]]:
    """Programs whose CUDA plan has bands, one per band kernel form (``compiler/kernel/cuda/bands.py``)."""

    def layer_norm_loss(x, g, b, r):
        mu = x.mean(axis=-1, keepdims=True)
        c = x - mu
        return ((c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b) * r).sum()

    def xent(z, y):
        s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
        return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]

    def inner_axes(x, w):  # a row reduction keeping an inner axis; sums over axes 0 and (0, 2)
        e = dnp.exp(x - x.max(axis=2, keepdims=True)) * w
        return e.sum(axis=0), e.sum(axis=(0, 2)), (e * x).sum()

    ln = dsl.value_and_grad(layer_norm_loss, argnums=(0, 1, 2))
    return [
        ("layer norm 4096x1024", ln, (_f32(4096, 1024), _f32(1024), _f32(1024), _f32(4096, 1024))),
        ("layer norm, rows of 4096", ln, (_f32(64, 4096), _f32(4096), _f32(4096), _f32(64, 4096))),
        ("layer norm, narrow rows", ln, (_f32(256, 3), _f32(3), _f32(3), _f32(256, 3))),
        ("softmax xent 4096x1000 (a tail)", dsl.value_and_grad(xent), (_f32(4096, 1000), _f32(4096, 1000))),
        ("softmax xent, rows of 8192", dsl.value_and_grad(xent), (_f32(64, 8192), _f32(64, 8192))),
        ("inner axes", inner_axes, (_f32(64, 3, 5), _f32(64, 3, 5))),
    ]


@pytest.mark.parametrize("what", [p[0] for p in _band_programs()])
def test_band_kernels(what: str) -> None:
    """Each band kernel form compiles for sm_80 and sm_90 (the kernels, their partials' combines and
    tails), and its static shared memory fits a block's 48 KiB (the layer norm with rows of 4096
    computes one of its three kept rows again where it is read: ``rows.rows_in_fast_memory``)."""
    _, fn, args = next(p for p in _band_programs() if p[0] == what)
    program = dsl.compile(fn, target="cuda").lower(*args).program.generated
    bands = [k.name for k in program.kernels if k.name.endswith("_rows")]
    assert bands, [k.name for k in program.kernels]
    for cc in ARCHS:
        ptx = compile_ptx(program, cc)
        assert set(ptx) == {k.name for k in program.kernels}
        for name in bands:
            shared = re.findall(r"\.shared \.align \d+ \.b8 \S+\[(\d+)\]", ptx[name])
            assert shared and sum(map(int, shared)) <= 48 * 1024, (name, shared)


@pytest.mark.parametrize("form, kernels", [("band", 0), ("kernel", 2), ("apart", 4)])
def test_band_column_reductions_in_both_forms(form: str, kernels: int) -> None:
    """Layer norm's gamma and beta gradients in the band (partial rows per block, combined after it)
    or after it (``band_columns="kernel"``: one column kernel of 8 row chunks with both outputs and
    its second pass; "apart", ``sibling_reductions=False``: a column kernel and a second pass each):
    every kernel compiles for sm_80 and sm_90."""
    from compiler.pipeline import option_defaults

    _, fn, args = _band_programs()[0]
    options = (
        {"band_columns": "kernel", "sibling_reductions": False} if form == "apart" else {"band_columns": form}
    )
    with option_defaults(**options):
        program = dsl.compile(fn, target="cuda").lower(*args).program.generated
    columns = [
        k.name for k in program.kernels if "(COLS, LANES)" in program.source and "_reduce_sum" in k.name
    ]
    assert len(columns) == kernels, [k.name for k in program.kernels]
    for cc in ARCHS:
        assert set(compile_ptx(program, cc)) == {k.name for k in program.kernels}


@pytest.mark.parametrize("rows", [64, 4096])
def test_reductions_with_several_outputs(rows: int) -> None:
    """Layer norm with rows past CUDA's ``row_max`` (no band): gamma's and beta's gradients are one
    kernel with two outputs (``rows.reductions_together``), serial (64 rows) or by columns in
    chunks (4096 rows: 4 chunks, partials per output, a second pass with both): PTX for sm_80 and
    sm_90."""
    from compiler.compilation import CUDA_ROW_MAX

    _, ln, _ = _band_programs()[0]
    width = 2 * CUDA_ROW_MAX
    args = (_f32(rows, width), _f32(width), _f32(width), _f32(rows, width))
    program = dsl.compile(ln, target="cuda").lower(*args).program.generated
    bodies = {k.name: program.source.split(f"def {k.name}(")[1].split("\n\n\n")[0] for k in program.kernels}
    merged = [name for name, body in bodies.items() if "acc1 = " in body]  # two accumulators
    assert len(merged) == (1 if rows == 64 else 2) and "_rows" not in program.source, merged
    assert all(name.endswith(("_1", "_2")) for name in merged) == (rows == 4096), merged
    for cc in ARCHS:
        assert set(compile_ptx(program, cc)) == set(bodies)


def test_a_column_reduction_of_one_chunk() -> None:
    """A column sum of 300 rows (fewer than two chunks of ``COLUMN_ROWS``): one kernel whose blocks
    stride down every row and write the outputs, no partials and no second pass."""
    x = _f32(300, 64)
    program = dsl.compile(lambda x, w: (x * w).sum(axis=0), target="cuda").lower(x, x).program.generated
    assert [k.name for k in program.kernels] == ["k0_reduce_sum"] and "(COLS, LANES)" in program.source
    assert program.plan.peak_bytes == 0, str(program.plan)
    for cc in ARCHS:
        assert set(compile_ptx(program, cc)) == {"k0_reduce_sum"}


def _shuffles_and_barriers(
    fn, args, shuffle: bool, monkeypatch: pytest.MonkeyPatch
) -> dict[str, tuple[int, int]]:
    """Per kernel of ``fn``'s CUDA program for sm_90: its ``shfl.sync.down`` and ``bar.sync``
    instructions, block reduces as shuffles (``DSL_CUDA_SHUFFLE=1``) or as the tree."""
    monkeypatch.setenv("DSL_CUDA_SHUFFLE", "1" if shuffle else "0")
    program = dsl.compile(fn, target="cuda").lower(*args).program.generated
    return {
        name: (len(re.findall(r"shfl\.sync\.down", text)), len(re.findall(r"bar\.sync", text)))
        for name, text in compile_ptx(program, (9, 0)).items()
    }


@pytest.mark.parametrize(
    "what, fn, x, words",
    [
        ("sum f32 (float64 partials)", lambda x: x.sum(axis=1), _f32(64, 3000), 2),
        ("max f32", lambda x: x.max(axis=1), _f32(64, 3000), 1),
        ("sum f64", lambda x: x.sum(axis=1), _f32(64, 3000).astype(np.float64), 2),
        ("split sum f32", lambda x: x.sum(), _f32(1 << 17), 2),
    ],
)
def test_block_reductions_are_warp_shuffles(what, fn, x, words, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of ``TPB`` threads reduces by shuffles, log2(32) steps in each warp and log2(TPB/32)
    over the warps' results (a 64-bit value: two 32-bit shuffles a step), with two barriers (after
    the warps' results, after the block's) beside the kernel's own one after its result is read:
    no barrier per halving step, as the tree has (one before and one after each of log2(TPB) steps),
    and no tree left in the PTX (Numba drops the simulator's branch)."""
    from compiler.kernel.cuda.sizes import GPU

    steps = GPU.TPB.bit_length() - 1
    shuffled = _shuffles_and_barriers(fn, (x,), True, monkeypatch)
    tree = _shuffles_and_barriers(fn, (x,), False, monkeypatch)
    assert set(shuffled) == set(tree) and shuffled, what
    for name in shuffled:
        assert shuffled[name] == (steps * words, 3), (what, name, shuffled[name])
        assert tree[name] == (0, steps + 2), (what, name, tree[name])


@pytest.mark.parametrize(
    "what", ["layer norm 4096x1024", "layer norm, narrow rows", "softmax xent 4096x1000 (a tail)"]
)
def test_band_row_reductions_are_warp_shuffles(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A band's row reductions (rows of 256 threads, of 4 threads sharing a warp) shuffle, with fewer
    barriers than the tree's."""
    _, fn, args = next(p for p in _band_programs() if p[0] == what)
    shuffled = _shuffles_and_barriers(fn, args, True, monkeypatch)
    tree = _shuffles_and_barriers(fn, args, False, monkeypatch)
    bands = [name for name in shuffled if name.endswith("_rows")]
    assert bands, list(shuffled)
    for name in bands:
        assert shuffled[name][0] > 0 and tree[name][0] == 0, (name, shuffled[name], tree[name])
        assert shuffled[name][1] < tree[name][1], (name, shuffled[name], tree[name])


def test_float_products_are_not_fused_into_sums() -> None:
    """NVVM contracts ``a * b + c`` into one fused multiply-add unless the product is libdevice's
    ``mul.rn`` (compiler/prims/exactmath.py): the CPU rounds the product and the sum apart, so
    without it the GPU's bits differ from the CPU's and NumPy's, ``dsl.random.normal`` and
    ``uniform`` over a range included (api.md: the same bits on both targets). No kernel of these
    programs has an ``fma`` instruction; each has its products as ``mul.rn``."""
    x = _f32(4096)
    programs = {
        "a * b + c": (lambda a, b, c: a * b + c, (x, x, x)),
        "float64 polynomial": (lambda a: (a * 0.5 + 1.0) * a - 2.0, (x.astype(np.float64),)),
        "random draws": (
            lambda k: (dsl.random.normal(k, (64, 64)), dsl.random.uniform(k, (9,), minval=-2.0, maxval=3.0)),
            (dsl.random.key(0),),
        ),
        "log1p": (lambda a: dnp.log1p(a) + dnp.log1p(a.astype(np.float64)), (x,)),
    }
    for what, (fn, args) in programs.items():
        generated = dsl.compile(fn, target="cuda").lower(*args).program.generated
        for cc in ARCHS:
            for name, text in compile_ptx(generated, cc).items():
                assert "fma." not in text, f"{what}: {name} fuses a product into a sum"
        assert "mul.rn." in "".join(compile_ptx(generated, (9, 0)).values()), what


def _global_memory_order(fn, args, unroll: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Per kernel of ``fn``'s CUDA program for sm_90: its global loads and stores and its float
    arithmetic in PTX order (``l``, ``s`` and ``a``), elementwise loops unrolled by ``unroll``
    (``DSL_CUDA_UNROLL``)."""
    monkeypatch.setenv("DSL_CUDA_UNROLL", str(unroll))
    program = dsl.compile(fn, target="cuda").lower(*args).program.generated
    token = {"ld": "l", "st": "s"}
    op = re.compile(r"^\s*(ld|st|(?!mov|cvt)[a-z]+)\.(?:global|(?:[a-z]+\.)*f(?:32|64))\b", re.M)
    return {
        name: "".join(token.get(m, "a") for m in op.findall(text))
        for name, text in compile_ptx(program, (9, 0)).items()
    }


@pytest.mark.parametrize(
    "what, fn, loads",
    [
        ("the suite's chain", lambda x: dnp.maximum((x * 1.5 + 0.5) * x - 2.0, 0.0) / (x * x + 1.0), 1),
        ("two inputs, broadcast", lambda x: dnp.tanh(x * x[:1]) + 1.0, 2),
        ("in place", lambda x: x.__iadd__(dnp.cos(x)), 1),
    ],
)
def test_elementwise_loops_keep_four_loads_in_flight(what, fn, loads, monkeypatch) -> None:
    """An elementwise kernel's thread runs 4 iterations of its grid-stride loop at once: all their
    loads at the loop's position come before any arithmetic (a thread has 4 loads of each input in
    flight, and no branch of an earlier iteration's arithmetic, such as a float division's slow path,
    holds a later load back in ptxas), and all loads before the first store, where the plain loop
    stores each element before it loads the next. (The loads first but not pinned, LLVM sank each to
    its first use: the chain's PTX ran load, divide, load, divide.)"""
    x = _f32(64, 1000)
    unrolled = _global_memory_order(fn, (x,), 4, monkeypatch)
    plain = _global_memory_order(fn, (x,), 1, monkeypatch)
    assert len(unrolled) == len(plain) == 1, (what, unrolled)
    (order,) = unrolled.values()
    assert order.startswith("llll"), (what, order)
    assert order.replace("a", "").startswith("l" * 4 * loads + "s"), (what, order)
    (plain_order,) = plain.values()
    assert not plain_order.replace("a", "").startswith("l" * 2 * loads), (what, plain_order)


@pytest.mark.parametrize("axis", [0, 1, None], ids=["columns", "rows", "all"])
def test_reduction_loops_keep_four_loads_in_flight(axis, monkeypatch) -> None:
    """A reduction kernel's loop runs 4 iterations at once too: their loads before any arithmetic
    (the column kernel of layer norm's gradients loaded one iteration, divided, then loaded the next);
    the plain loop loads, then computes."""
    x = _f32(512, 300)

    def fn(x):
        return (x / (1.5 + x * x)).sum(axis=axis)

    with option_defaults(row_fusion=False):
        unrolled = _global_memory_order(fn, (x,), 4, monkeypatch)
        plain = _global_memory_order(fn, (x,), 1, monkeypatch)
    first = [order for name, order in unrolled.items() if "reduce" in name][0]
    assert first.startswith("llll"), (axis, unrolled)
    assert not [order for name, order in plain.items() if "reduce" in name][0].startswith("ll"), plain


def test_band_row_loops_keep_four_loads_in_flight(monkeypatch) -> None:
    """A band's row loops (``bands._row_loop``) run 4 of a thread's elements of the row at once:
    layer norm's first member, the row's sum, loads 4 elements before it adds (the plain loop loads
    one, adds it, loads the next)."""

    def loss(x, g, b, r):
        mu = x.mean(axis=-1, keepdims=True)
        c = x - mu
        var = (c * c).mean(axis=-1, keepdims=True)
        return ((c / dnp.sqrt(var + 1e-5) * g + b) * r).sum()

    x, g = _f32(64, 1024), _f32(1024)
    fn = dsl.value_and_grad(loss, argnums=(0, 1, 2))
    unrolled = _global_memory_order(fn, (x, g, g, x), 4, monkeypatch)
    plain = _global_memory_order(fn, (x, g, g, x), 1, monkeypatch)
    (band,) = [order for name, order in unrolled.items() if name.endswith("_rows")]
    assert band.startswith("llllaaaa"), band
    (plain_band,) = [order for name, order in plain.items() if name.endswith("_rows")]
    assert plain_band.startswith("la"), plain_band


def _assembled(ptx: str) -> Assembled:
    """``ptx`` assembled by sm_90's ptxas (``cuda_ptx.assemble``), or the test skipped without it."""
    pytest.importorskip("cuda.bindings.nvjitlink", reason="nvJitLink (the cuda extra's ptxas)")
    return assemble(ptx)


@pytest.mark.parametrize("what", [p[0] for p in _band_programs()])
def test_band_kernels_fit_four_blocks_an_sm(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A band kernel's launch bounds ask an SM to hold 4 of its blocks of 256 threads
    (``bands.BAND_BLOCKS``, where shared memory allows): ptxas then holds each thread to 64
    registers, and every band form fits with no spill. Without bounds (``DSL_CUDA_BAND_BLOCKS=0``)
    layer norm's band at 4096x1024 took 130 registers, one block an SM (2026-11-28)."""
    _, fn, args = next(p for p in _band_programs() if p[0] == what)
    program = dsl.compile(fn, target="cuda").lower(*args).program.generated
    ptx = compile_ptx(program, (9, 0))
    for kernel in program.kernels:
        if kernel.name.endswith("_rows"):
            assert re.search(r"\.maxntid 256, 1, 1\s+\.minnctapersm 4", ptx[kernel.name]), kernel.name
            assembled = _assembled(ptx[kernel.name])
            registers, spills = assembled.registers, assembled.spill_bytes
            assert registers <= 64 and spills == 0, (kernel.name, registers, spills)
    if what == "layer norm 4096x1024":
        monkeypatch.setenv("DSL_CUDA_BAND_BLOCKS", "0")
        unbounded = dsl.compile(fn, target="cuda").lower(*args).program.generated
        (band,) = [k.name for k in unbounded.kernels if k.name.endswith("_rows")]
        text = compile_ptx(unbounded, (9, 0))[band]
        assert ".minnctapersm" not in text and _assembled(text).registers > 64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_pinned_loads_assemble_for_every_dtype(dtype) -> None:
    """An unrolled loop's loads pass through ``runtime/cuda_intrinsics.pin``'s inline assembly, which
    NVVM takes as text: ptxas must accept it for every register class (NVVM alone, as the other PTX
    tests run, would not notice a wrong one; a GPU would, when it loads the kernel)."""
    x = np.ones(5000, dtype)
    fn = (lambda x: ~x) if dtype is np.bool_ else (lambda x: x * 3 + 1)
    generated = dsl.compile(fn, target="cuda").lower(x).program.generated
    assert "_pin(" in generated.source
    for name, ptx in compile_ptx(generated, (9, 0)).items():
        assert _assembled(ptx).cubin_bytes > 0, name


def test_a_band_of_one_element_rows_has_no_barriers() -> None:
    """Two outputs of one vector (siblings: no producer fuses them into one loop) are a band whose
    rows are one element: a thread owns its row, so the kernel has no ``bar.sync`` (it had one after
    each member, holding every warp to its block's slowest); a 2-D band keeps its barriers."""
    x = _f32(4096)
    for what, fn in (("two outputs", lambda x: (x * 2.0, x + 1.0)), ("three", lambda x: (x - 1, x * x, -x))):
        program = dsl.compile(fn, target="cuda").lower(x).program.generated
        ptx = compile_ptx(program, (9, 0))
        assert any("_rows" in name for name in ptx), (what, list(ptx))
        assert not any("bar.sync" in text for text in ptx.values()), what
    rows = _f32(64, 256)
    softmax = dsl.compile(lambda z: dsl.nn.softmax(z, axis=-1), target="cuda").lower(rows).program.generated
    assert any("bar.sync" in text for name, text in compile_ptx(softmax, (9, 0)).items() if "_rows" in name)
