"""CUDA block reductions as warp shuffles (``BlockReduce`` strategy "shuffle", issue 27).

Here, without a GPU: the printed shuffle combines a block's values in the pairs of a halving tree,
each warp's first, then the warps' (run as Python threads, one per GPU thread, with a warp
shuffle that waits for its 32 lanes, as the hardware's does), for groups narrower than a warp (a
band's rows of ``CT`` threads), of one warp and of several; bool accumulators keep the tree, and
``DSL_CUDA_SHUFFLE=0`` keeps it for every dtype. On a GPU (skipped elsewhere): every reduction
strategy and band form with shuffles against the tree, close, and bit for bit the same on a second
run. ``tests/test_cuda_ptx.py`` checks the PTX (shuffles, and no barrier per halving step).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import dsl
import dsl.numpy as dnp
from compiler.codegen.cuda.printer import print_cuda
from compiler.ir.types import DType
from compiler.kernel.cuda.loops import block_reduce, block_strategy
from compiler.kernel.ir import BlockReduce
from compiler.prims import reduction
from compiler.prims.base import Reducer
from runtime.devices import cuda_available

BLOCK = 256  # threads of the emulated block (GPU.TPB)
# a combine that builds the nesting of its operands: the result shows the exact order of combines
PAIRS = Reducer(lambda acc, x: f"({acc}, {x})", lambda d: 0, mlir_combine=None)


def _halving(values: list[Any]) -> Any:
    """The halving tree's result: element ``l`` combined with ``l + s``, ``s`` = n/2 ... 1."""
    while len(values) > 1:
        half = len(values) // 2
        values = [(values[i], values[i + half]) for i in range(half)]
    return values[0]


def _run_block(strategy: str, width: int) -> list[Any]:
    """The printed block reduce of ``strategy`` over groups of ``width`` threads, run by ``BLOCK``
    Python threads (``sm``: the shared array afterwards). Thread ``t`` starts from the leaf ``t``."""
    reduce = BlockReduce("acc", "sm", "lane", str(width), DType.f64, PAIRS, strategy=strategy)
    source = "def body(tid, lane, acc, sm):\n" + "\n".join(print_cuda([reduce], 1))
    block = threading.Barrier(BLOCK, timeout=20)
    warps = [threading.Barrier(32, timeout=20) for _ in range(BLOCK // 32)]
    posted: list[Any] = [None] * BLOCK
    me = threading.local()

    def shfl_down_sync(mask: int, value: Any, delta: int) -> Any:
        """Lane ``l + delta``'s value (the caller's own past the warp), once all 32 lanes posted."""
        assert mask == 0xFFFFFFFF
        tid = me.tid
        posted[tid] = value
        warps[tid // 32].wait()
        got = posted[tid + delta] if tid % 32 + delta < 32 else value
        warps[tid // 32].wait()
        return got

    cuda = SimpleNamespace(shfl_down_sync=shfl_down_sync, syncthreads=block.wait)
    scope: dict[str, Any] = {"cuda": cuda, "SIM": False, "np": SimpleNamespace(float64=lambda x: x)}
    exec(source, scope)
    sm: list[Any] = [None] * BLOCK
    errors: list[BaseException] = []

    def thread(tid: int) -> None:
        me.tid = tid
        try:
            scope["body"](tid, tid % width, tid, sm)
        except BaseException as err:  # a lane that never reached a shuffle breaks its warp's barrier
            errors.append(err)
            block.abort()
            for w in warps:
                w.abort()

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(BLOCK)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    return sm


@pytest.mark.parametrize("width", [4, 16, 32, 64, 256])
def test_shuffle_combines_warps_then_the_warps_results(width: int) -> None:
    """Each group's result lands in its first slot (where the callers read it): its warps' halving
    trees (a group narrower than a warp: its own lanes only), then the halving tree of those."""
    sm = _run_block("shuffle", width)
    for base in range(0, BLOCK, width):
        leaves = list(range(base, base + width))
        warps = [_halving(leaves[w : w + 32]) for w in range(0, width, 32)]
        assert sm[base] == _halving(warps), (width, base)


@pytest.mark.parametrize("width", [4, 64])
def test_tree_combines_in_halving_order(width: int) -> None:
    sm = _run_block("tree", width)
    for base in range(0, BLOCK, width):
        assert sm[base] == _halving(list(range(base, base + width)))


def test_the_strategy_is_the_kernel_builders() -> None:
    """Shuffles for 32- and 64-bit accumulators; bools keep the tree (numba-cuda shuffles numbers
    only); ``DSL_CUDA_SHUFFLE=0`` keeps the tree for all."""
    sums = reduction.reduce_sum.reducer
    assert sums is not None
    assert [block_strategy(d) for d in (DType.f32, DType.f64, DType.i32, DType.i64)] == ["shuffle"] * 4
    assert block_strategy(DType.i1) == "tree"
    assert block_reduce("acc", DType.f64, sums).strategy == "shuffle"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DSL_CUDA_SHUFFLE", "0")
        assert block_reduce("acc", DType.f64, sums).strategy == "tree"


# ---- on a GPU ----------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(
    not cuda_available(), reason="needs a usable NVIDIA GPU: the CUDA simulator has no warp shuffles"
)
RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _layer_norm_loss(x, g, b, r):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    return ((c / dnp.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b) * r).sum()


def _xent(z, y):
    s = z - dsl.stop_gradient(z.max(axis=-1, keepdims=True))
    return -(y * (s - dnp.log(dnp.exp(s).sum(axis=-1, keepdims=True)))).sum() / z.shape[0]


def _programs() -> dict[str, tuple[Any, tuple[np.ndarray, ...]]]:
    """One program per block reduce: the "block" and "split" strategies in float32 (float64
    accumulators), float64, int64 and int32 (max: an int32 accumulator), band row reductions of
    256, 128 and 4 threads per row (groups of several warps, two per block, narrower than a warp),
    and a band's full reduction over its rows."""
    ln = dsl.value_and_grad(_layer_norm_loss, argnums=(0, 1, 2))
    ints = RNG.integers(-1000, 1000, (64, 3000))
    return {
        "block sum f32": (lambda x: x.sum(axis=1), (_f32(64, 3000),)),
        "block max f32": (lambda x: x.max(axis=1), (_f32(64, 3000),)),
        "block sum f64": (lambda x: x.sum(axis=1), (_f32(64, 3000).astype(np.float64),)),
        "block sum i64": (lambda x: x.sum(axis=1), (ints,)),
        "block max i32": (lambda x: x.max(axis=1), (ints.astype(np.int32),)),
        "split sum f32": (lambda x: x.sum(), (_f32(1 << 20),)),
        "split max f32": (lambda x: x.max(), (_f32(1 << 20),)),
        "layer norm 4096x1024": (ln, (_f32(4096, 1024), _f32(1024), _f32(1024), _f32(4096, 1024))),
        "layer norm rows of 100": (ln, (_f32(512, 100), _f32(100), _f32(100), _f32(512, 100))),
        "layer norm rows of 3": (ln, (_f32(512, 3), _f32(3), _f32(3), _f32(512, 3))),
        "softmax xent": (dsl.value_and_grad(_xent), (_f32(4096, 1000), _f32(4096, 1000))),
    }


def _host(x: Any) -> list[np.ndarray]:
    leaves = list(x) if isinstance(x, tuple | list) else [x]
    out: list[np.ndarray] = []
    for a in leaves:
        out += (
            _host(a)
            if isinstance(a, tuple | list)
            else [np.asarray(a.copy_to_host() if hasattr(a, "copy_to_host") else a)]
        )
    return out


def _compiled(
    fn: Any, args: tuple[np.ndarray, ...], shuffle: bool, patch: pytest.MonkeyPatch
) -> tuple[Any, str]:
    patch.setenv("DSL_CUDA_SHUFFLE", "1" if shuffle else "0")
    compiled = dsl.compile(fn, target="cuda")
    return compiled, compiled.lower(*args).source()


@gpu
@pytest.mark.parametrize("name", list(_programs()))
def test_shuffle_against_tree_on_the_gpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, args = _programs()[name]
    shuffled, source = _compiled(fn, args, True, monkeypatch)
    tree, tree_source = _compiled(fn, args, False, monkeypatch)
    assert "cuda.shfl_down_sync" in source and "cuda.shfl_down_sync" not in tree_source
    first = _host(shuffled(*args))
    again = _host(shuffled(*args))
    want = _host(tree(*args))
    for a, b, w in zip(first, again, want, strict=True):
        np.testing.assert_array_equal(a, b)  # the same bits run to run
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(a, w)
        else:
            scale = max(1.0, float(np.max(np.abs(w))))
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5 * scale)
