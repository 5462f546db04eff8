"""CPU backend: fusion, buffer planning, generated kernels and the executable's call semantics."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pytest
from helpers import driver_calls, parallel_loops

from compiler.codegen import build_cpu_executable
from compiler.interpreter import interpret
from compiler.ir.core import Block, Function, Op, Value
from compiler.ir.types import DType, TensorType
from compiler.passes.fuse import GroupKind, fuse
from compiler.passes.plan import ALIGNMENT, plan_buffers
from compiler.pipeline import Options, plan_program
from compiler.prims import REGISTRY
from runtime.errors import DSLError, ShapeError

F32, F64, I32, I64 = DType.f32, DType.f64, DType.i32, DType.i64
RNG = np.random.default_rng(1)


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSL_CACHE_DIR", str(tmp_path_factory.mktemp("dslc_cache")))
        yield


class Builder:
    """A few lines to write a test function: ``b.op("add", x, y)`` appends an op, returns its value."""

    def __init__(self, *param_types: TensorType) -> None:
        self.params = [Value(t) for t in param_types]
        self.ops: list[Op] = []

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        self.ops.append(Op.create(REGISTRY[name], list(operands), attrs))
        return self.ops[-1].result

    def const(self, value: Any, dtype: DType = F32) -> Value:
        return self.op("constant", value=np.asarray(value, dtype=dtype.np))

    def function(self, *results: Value, **attrs: Any) -> Function:
        body = Block(tuple(self.params), tuple(self.ops), tuple(results))
        return Function("f", body, attrs=attrs)


def T(*shape: int, dtype: DType = F32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def rand(shape: Sequence[int], dtype: DType = F32) -> np.ndarray:
    if dtype.is_int:
        return RNG.integers(-5, 6, size=tuple(shape)).astype(dtype.np)
    return RNG.standard_normal(tuple(shape)).astype(dtype.np)


def check(func: Function, args: list[np.ndarray], rtol: float = 1e-5) -> tuple[np.ndarray, ...]:
    executable, *_ = build_cpu_executable(plan_program(func))
    got = executable(*args)
    for g, w in zip(got, interpret(func, args), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
    return got


# ---- fusion and planning ----------------------------------------------------------------------


def chain_of_eight() -> Function:
    b = Builder(T(64, 33), T(33))
    x, bias = b.params
    v = b.op("mul", x, b.op("broadcast", b.const(2.0), shape=(64, 33)))
    v = b.op("add", v, b.op("broadcast", bias, shape=(64, 33)))
    v = b.op("exp", b.op("neg", b.op("abs", v)))  # bounded: sin below stays well conditioned
    v = b.op("mul", b.op("sin", v), x)
    return b.function(b.op("sub", b.op("tanh", v), x))


def test_elementwise_chain_is_one_kernel_without_buffers() -> None:
    func = chain_of_eight()
    executable, program, fusion, plan = build_cpu_executable(plan_program(func))
    assert len(fusion.groups) == 1 and fusion.groups[0].kind is GroupKind.LOOP
    assert plan.buffers == [] and plan.peak_bytes == 0
    # the eight elementwise intermediates: an eager NumPy run makes neither the scalar full size nor
    # the bias's broadcast (a view)
    assert plan.naive_bytes == 8 * func.params[0].type.nbytes
    assert program.source.count("def k") == 1
    args = [rand((64, 33)), rand((33,))]
    (got,) = executable(*args)
    np.testing.assert_allclose(got, interpret(func, args)[0], rtol=1e-5, atol=1e-6)


def test_same_shape_chain_uses_one_flat_loop() -> None:
    b = Builder(T(8, 16), T(8, 16))
    x, y = b.params
    func = b.function(b.op("exp", b.op("add", b.op("mul", x, y), y)))
    _, program, _, _ = build_cpu_executable(plan_program(func))
    assert "for i in range(128):" in program.source and "p0_f[i]" in program.source


def test_expensive_broadcast_source_is_materialized() -> None:
    b = Builder(T(5), T(4, 5))
    c, x = b.params
    func = b.function(b.op("add", b.op("broadcast", b.op("exp", c), shape=(4, 5)), x))
    fusion = fuse(func)
    assert [g.kind for g in fusion.groups] == [GroupKind.LOOP, GroupKind.LOOP]
    assert [len(g.ops) for g in fusion.groups] == [1, 2]  # exp alone; broadcast + add fused
    check(func, [rand((5,)), rand((4, 5))])


def test_index_maps_read_by_several_kernels_are_inlined_into_each() -> None:
    b = Builder(T(4, 6), T(6))
    x, bias = b.params
    wide = b.op("broadcast", bias, shape=(4, 6))  # read by two reductions: recomputed, not stored
    two = b.op("broadcast", b.const(2.0), shape=(4, 6))
    rows = b.op("reduce_sum", b.op("mul", b.op("add", x, wide), two), axes=(1,))
    cols = b.op("reduce_max", b.op("sub", x, b.op("mul", wide, two)), axes=(0,))
    func = b.function(rows, cols)
    fusion = fuse(func)
    assert len(fusion.groups) == 2 and all(g.produces(wide) for g in fusion.groups)
    assert fusion.materialized == {rows, cols}
    assert plan_buffers(func, fusion).buffers == []
    check(func, [rand((4, 6)), rand((6,))])


def test_value_used_in_place_and_later_is_stored_by_its_first_kernel() -> None:
    b = Builder(T(6, 7))
    y = b.op("exp", b.params[0])
    z = b.op("add", y, b.op("broadcast", b.const(1.0), shape=(6, 7)))
    s = b.op("reduce_sum", b.op("mul", y, z), axes=(0, 1))
    func = b.function(s, z)
    fusion = fuse(func)
    assert len(fusion.groups) == 1  # exp, add and the reduction prologue: one loop
    assert set(fusion.groups[0].outputs) == {s, z}
    check(func, [rand((6, 7))])


def test_kernels_equal_up_to_buffer_names_are_one_function() -> None:
    b = Builder(T(32, 16), T(16, 16), T(16, 16), T(16, 16))
    h, *ws = b.params
    for w in ws:  # three layers of one shape: three matmul and three tanh kernels
        h = b.op("tanh", b.op("matmul", h, w))
    func = b.function(b.op("matmul", h, ws[0]))
    _, program, fusion, _ = build_cpu_executable(plan_program(func))
    assert len(fusion.groups) == 7
    # one tanh function (each tanh stored in place over its matmul's result), called three times;
    # the matmuls are four calls of the runtime's gemm_rows: two slots of the kernel table
    assert program.source.count("def k") == 1
    assert [name for name, _ in driver_calls(program.source)] == ["gemm_rows_serial", "k1_tanh"] * 3 + [
        "gemm_rows_serial"
    ]
    assert [name for name, _ in program.kernel_slots] == ["gemm_rows_serial", "k1_tanh"]
    check(func, [rand((32, 16))] + [rand((16, 16)) * 0.3 for _ in ws])


def test_a_value_stored_in_place_is_written_through_its_operands_array() -> None:
    b = Builder(T(64, 32), T(32, 32), T(32, 16))
    x, w1, w2 = b.params
    h = b.op("tanh", b.op("matmul", x, w1))  # stored over the matmul's result (which dies there)
    func = b.function(b.op("matmul", h, w2))
    _, program, fusion, plan = build_cpu_executable(plan_program(func))
    (row,) = [r for r in plan.buffers if r.reused_from]
    assert row.value is h
    (header,) = [line for line in program.source.splitlines() if line.startswith("def k1_tanh(")]
    assert header == "def k1_tanh(p0):"  # one array: LLVM sees loads and stores of the same base
    check(func, [rand((64, 32)), rand((32, 32)) * 0.3, rand((32, 16))])


def test_plan_offsets_are_aligned_and_skip_results_and_empty_values() -> None:
    b = Builder(T(3, 5), T(0, 4))
    x, e = b.params
    t = b.op("transpose", b.op("exp", x), perm=(1, 0))  # %1: exp is inlined, the matmul reads %1
    m = b.op("matmul", t, b.op("neg", x))  # %3 reads %1 and %2
    empty = b.op("sin", e)  # %4: zero-size, read by two reductions (a libm op: not recomputed)
    total = b.op("add", b.op("reduce_sum", empty, axes=(0,)), b.op("reduce_max", empty, axes=(0,)))
    func = b.function(m, total)
    fusion = fuse(func, contract_transposes=False)  # the transpose gets a buffer of its own
    plan = plan_buffers(func, fusion, inplace=False)  # the reference plan: one slot per buffer
    assert empty in fusion.materialized
    assert [row.name for row in plan.buffers] == ["%1", "%2", "%5", "%6"]
    assert all(row.offset % ALIGNMENT == 0 and row.reused_from is None for row in plan.buffers)
    assert plan.peak_bytes >= sum(row.bytes for row in plan.buffers)
    eager = [op.result for op in func.ops if op.result not in (m, total, t)]  # NumPy's x.T is a view
    assert plan.naive_bytes == sum(v.type.nbytes for v in eager)
    assert plan.buffers[0].live == (1, 3) and plan.offsets[t] == plan.buffers[0].offset
    assert "%6" in str(plan) and "peak" in str(plan)
    check(func, [rand((3, 5)), rand((0, 4))])


# ---- reductions and matmul --------------------------------------------------------------------


@pytest.mark.parametrize("prim", ["reduce_sum", "reduce_max"])
def test_reductions_over_every_axis_subset(prim: str) -> None:
    b = Builder(T(3, 4, 5, dtype=F64))
    x = b.op("sin", b.params[0])  # a fused prologue
    subsets = [axes for r in range(4) for axes in combinations(range(3), r)]
    func = b.function(*(b.op(prim, x, axes=axes) for axes in subsets))
    check(func, [rand((3, 4, 5), F64)], rtol=1e-12)


def test_big_groups_run_in_parallel_and_agree() -> None:
    n = 1 << 16
    b = Builder(T(4, n // 4), T(n // 4, 4))
    x, y = b.params
    full = b.op("reduce_sum", b.op("neg", x), axes=(0, 1))  # chunked partial sums
    rows = b.op("reduce_sum", x, axes=(1,))  # outer kept axis: prange over rows
    cols = b.op("reduce_sum", y, axes=(0,))  # outer reduced axis: chunks of rows into partial results
    scaled = b.op("mul", x, x)  # a big flat loop
    func = b.function(full, rows, cols, scaled)
    # each group's own kernel form (rows of x: one band)
    executable, program, _, _ = build_cpu_executable(plan_program(func, Options(row_fusion=False)))
    assert len(parallel_loops(program.source)) == 4
    args = [rand((4, n // 4)), rand((n // 4, 4))]
    for got, want in zip(executable(*args), interpret(func, args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4)


@pytest.mark.parametrize(
    ("a", "b", "dtype"),
    [
        ((33, 17), (17, 9), F32),
        ((2, 3, 8, 5), (2, 3, 5, 4), F64),
        ((4, 6, 3), (4, 3, 7), I32),
        ((40, 40), (40, 41), I64),  # big enough for the parallel integer loop
    ],
)
def test_matmul(a: tuple[int, ...], b: tuple[int, ...], dtype: DType) -> None:
    builder = Builder(T(*a, dtype=dtype), T(*b, dtype=dtype))
    func = builder.function(builder.op("matmul", *builder.params))
    got = check(func, [rand(a, dtype), rand(b, dtype)], rtol=1e-5 if dtype is F32 else 1e-12)
    assert got[0].dtype == dtype.np


# ---- executable semantics ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def writeback_program():
    """f(x, y, z): x += y (written back), z *= 2 (written back), returns sum(x + y)."""
    b = Builder(T(4), T(4), T(4))
    x, y, z = b.params
    new_x = b.op("add", x, y)
    total = b.op("reduce_sum", b.op("add", new_x, y), axes=(0,))
    new_z = b.op("mul", z, b.op("broadcast", b.const(2.0), shape=(4,)))
    func = b.function(total, new_x, new_z, **{"dsl.writeback": (0, 2)})
    return build_cpu_executable(plan_program(func))[0]


def test_writeback_updates_caller_arrays(writeback_program) -> None:
    x, y, z = np.arange(4, dtype=np.float32), np.ones(4, np.float32), np.full(4, 3.0, np.float32)
    results = writeback_program(x, y, z)
    assert len(results) == 1
    np.testing.assert_array_equal(x, [1, 2, 3, 4])
    np.testing.assert_array_equal(z, [6, 6, 6, 6])
    np.testing.assert_array_equal(y, [1, 1, 1, 1])
    assert results[0].shape == () and results[0] == 14


def test_writeback_errors_leave_caller_arrays_untouched(writeback_program) -> None:
    x, y, z = np.zeros(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32)
    z.flags.writeable = False
    with pytest.raises(DSLError, match="read-only"):
        writeback_program(x, y, z)
    np.testing.assert_array_equal(x, 0)
    with pytest.raises(DSLError, match="share memory"):
        writeback_program(x, x, np.ones(4, np.float32))
    np.testing.assert_array_equal(x, 0)
    with pytest.raises(ShapeError):
        writeback_program(x, np.ones(5, np.float32), np.ones(4, np.float32))


def test_zero_d_inputs_and_outputs() -> None:
    b = Builder(T(), T(3))
    s, x = b.params
    twice = b.op("add", s, s)
    total = b.op("reduce_sum", b.op("mul", x, b.op("broadcast", s, shape=(3,))), axes=(0,))
    func = b.function(twice, total, s)
    got = check(func, [np.array(1.5, np.float32), np.arange(3, dtype=np.float32)])
    assert [g.shape for g in got] == [(), (), ()]
    executable = build_cpu_executable(plan_program(func))[0]
    assert executable(2.0, [1, 1, 1])[0] == 4.0  # Python scalars and lists are accepted too


def test_non_contiguous_and_mistyped_inputs() -> None:
    b = Builder(T(4, 6), T(6, 3, dtype=F64))
    x, w = b.params
    func = b.function(b.op("exp", x), b.op("matmul", b.op("cast", x, dtype=F64), w))
    executable = build_cpu_executable(plan_program(func))[0]
    x64 = np.asfortranarray(rand((4, 6), F64))
    w_strided = rand((12, 3), F64)[::2]
    got = executable(x64, w_strided)
    want = interpret(func, [x64.astype(np.float32), np.ascontiguousarray(w_strided)])
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=1e-6)


def test_results_alias_nothing_and_arena_is_allocated_once() -> None:
    b = Builder(T(5))
    x = b.params[0]
    y = b.op("exp", b.op("neg", b.op("transpose", b.op("exp", x), perm=(0,))))
    func = b.function(x, x, y, y, b.op("neg", x))
    executable = build_cpu_executable(plan_program(func))[0]
    arena = executable.arena
    arg = rand((5,))
    first = executable(arg)
    second = executable(arg)
    assert executable.arena is arena and arena.nbytes > 0
    for i, a in enumerate(first + second):
        assert not np.shares_memory(a, arg) and not np.shares_memory(a, arena)
        for other in (first + second)[i + 1 :]:
            assert not np.shares_memory(a, other)
    for a, b_ in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b_)


def test_concurrent_calls_share_the_arena_safely() -> None:
    b = Builder(T(256))
    x = b.params[0]
    y = b.op("exp", b.op("transpose", b.op("sin", x), perm=(0,)))
    func = b.function(b.op("reduce_sum", b.op("mul", y, b.op("neg", y)), axes=(0,)))
    executable = build_cpu_executable(plan_program(func))[0]
    inputs = [rand((256,)) for _ in range(8)]
    expected = [executable(a)[0] for a in inputs]
    errors: list[int] = []

    def worker(k: int) -> None:
        for _ in range(200):
            if executable(inputs[k])[0] != expected[k]:
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
