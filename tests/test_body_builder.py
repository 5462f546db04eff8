"""The body builder's records (compiler/kernel/emit.py, compiler/kernel/ir.py): which of the
iteration's variables each statement uses (a primitive's expressions: ``emit.Var``s spelled into
code; a load's or store's index: its ``Access``), which decides a CPU loop's flat form and the
indices a GPU thread computes; which index entries are names used as they are (integers,
variables, temporaries: anything else gets an index temporary); and which expressions are already
of their dtype (literals and casts: not cast again). Each is recorded where it is made, never read
back from the generated text."""

from __future__ import annotations

import numpy as np

import dsl
import dsl.numpy as dnp
from compiler.ir.core import Op, Value
from compiler.ir.types import DType, TensorType
from compiler.kernel.cuda.records import index_stmts, linear, store
from compiler.kernel.emit import BodyBuilder, ConstantPool
from compiler.kernel.ir import Access, Expr, Line, variables
from compiler.prims import elementwise as ew
from compiler.prims import movement as mv
from compiler.prims import random, source

F32 = DType.f32
IDX = ("i0", "i1")


def _builder(*ops: Op) -> tuple[BodyBuilder, list[tuple[Value, tuple[str, ...]]]]:
    loads: list[tuple[Value, tuple[str, ...]]] = []

    def load(v: Value, at: tuple[str, ...]) -> str:
        loads.append((v, at))
        return f"p{len(loads) - 1}[{', '.join(at)}]"

    return BodyBuilder({op.result: op for op in ops}, load, ConstantPool()), loads


def _arg(*shape: int, dtype: DType = F32) -> Value:
    return Value(TensorType(shape, dtype))


def test_an_elementwise_chain_uses_no_index_variable() -> None:
    x, y = _arg(4, 8), _arg(4, 8)
    mul = Op.create(ew.mul, [x, y])
    add = Op.create(ew.add, [mul.result, x])
    builder, loads = _builder(mul, add)
    builder.value_at(add.result, IDX)
    assert builder.index_uses == set()
    assert builder.variables == {"i0", "i1"}
    assert loads == [(x, IDX), (y, IDX)]  # handed on whole: the loads are at the iteration's index


def test_an_iota_uses_its_dimension_and_is_already_of_its_dtype() -> None:
    iota = Op.create(source.iota, [], {"shape": (4, 8), "dimension": 1, "dtype": DType.i64})
    builder, _ = _builder(iota)
    builder.value_at(iota.result, IDX)
    assert builder.index_uses == {"i1"}
    assert builder.lines == ["t0 = np.int64(i1)"]  # the cast it asked for is not cast again


def test_a_broadcast_passes_variables_on_to_its_loads_without_spelling_them() -> None:
    row = _arg(8)
    col = _arg(4, 1)
    b_row = Op.create(mv.broadcast, [row], {"shape": (4, 8)})
    b_col = Op.create(mv.broadcast, [col], {"shape": (4, 8)})
    add = Op.create(ew.add, [b_row.result, b_col.result])
    builder, loads = _builder(b_row, b_col, add)
    builder.value_at(add.result, IDX)
    assert builder.index_uses == set()  # the loads' own records (their Access) hold i0 and i1
    assert loads == [(row, ("i1",)), (col, ("i0", "0"))]  # the stretched axis: the integer 0
    assert all(type(e) is str for _, at in loads for e in at)


def test_a_broadcast_of_a_scalar_uses_no_variable() -> None:
    s = _arg()
    b = Op.create(mv.broadcast, [s], {"shape": (4, 8)})
    builder, loads = _builder(b)
    builder.value_at(b.result, IDX)
    assert builder.index_uses == set() and loads == [(s, ())]


def test_index_expressions_get_temporaries_names_and_integers_do_not() -> None:
    x = _arg(4, 16)
    sl = Op.create(mv.slice_, [x], {"start": (0, 2), "limit": (4, 16), "stride": (1, 2)})
    builder, loads = _builder(sl)
    builder.value_at(sl.result, ("i0", "i1"))
    assert builder.lines == ["k0 = (2 + i1 * 2)", "t0 = p0[i0, k0]"]
    assert loads == [(x, ("i0", "k0"))]
    assert builder.index_uses == {"i1"} and [Line(t).uses for t in builder.lines] == [{"i1"}, set()]


def test_a_constant_is_a_literal_not_cast_again_and_a_mismatched_one_is() -> None:
    one = Op.create(source.constant, [], {"value": np.array(1.0, np.float32)})
    as64 = Op.create(ew.cast, [one.result], {"dtype": DType.f64})
    builder, _ = _builder(one, as64)
    builder.value_at(as64.result, ())
    assert builder.lines == ["t0 = np.float32(1.0)", "t1 = np.float64(t0)"]
    assert builder.index_uses == set()


def test_a_constant_array_subscript_uses_every_variable() -> None:
    table = Op.create(source.constant, [], {"value": np.arange(32, dtype=np.float32).reshape(4, 8)})
    builder, _ = _builder(table)
    builder.value_at(table.result, IDX)
    assert builder.index_uses == {"i0", "i1"}


def test_a_cpu_loop_is_flat_unless_an_expression_uses_the_index() -> None:
    x = np.ones((4, 8), np.float32)
    chain = dsl.compile(lambda x: x * 2.0 + 1.0).lower(x).source()
    assert "for i in range(32):" in chain and "p0_f = p0.reshape(32)" in chain
    ramp = dsl.compile(lambda x: dnp.arange(8, dtype=np.float32) * 2.0).lower(x).source()
    assert "for i0 in range(8):" in ramp and "np.int64(i0)" in ramp and "for i in" not in ramp


def test_statements_record_the_variables_their_text_and_indices_use() -> None:
    """A statement's uses: its text's record (an ``Expr``: a primitive's expression) and its loads'
    and stores' index expressions (a name, or an ``Expr`` such as a flat offset, which leaves out
    the axes of one element)."""
    offset = linear(("i0", "i1", "i2"), (4, 1, 8))
    assert offset == "i0 * 8 + i2" and offset.uses == {"i0", "i2"}
    ramp = Line(Expr("t0 = np.int64(i3)", {"i3"}))
    load = Line("t1 = p0[g]", (Access("p0", ("g",)),))
    assert ramp.uses == {"i3"} and load.uses == {"g"}
    stored = store(Access("p1", (offset,)), "t1")
    assert stored.uses == {"i0", "i2"} and variables([ramp, load, stored]) == {"i0", "i2", "i3", "g"}


def test_a_gpu_thread_computes_only_the_indices_its_statements_use() -> None:
    x = _arg(8)
    b = Op.create(mv.broadcast, [x], {"shape": (4, 8)})
    iota = Op.create(source.iota, [], {"shape": (4, 8), "dimension": 0, "dtype": DType.f32})
    add = Op.create(ew.add, [b.result, iota.result])
    builder, _ = _builder(b, iota, add)
    builder.value_at(add.result, IDX)
    body = [Line(text) for text in builder.lines]
    assert variables(body) == {"i0"}  # the load's i1 is its Access's (none recorded here)
    decomposition = [("i0", "g // 8"), ("i1", "g % 8")]
    assert [s.text for s in index_stmts(body, decomposition)] == ["i0 = g // 8"]
    body.append(Line("p1[g] = t2", (), (Access("p1", (linear(IDX, (4, 8)),)),)))
    assert [s.text for s in index_stmts(body, decomposition)] == ["i0 = g // 8", "i1 = g % 8"]


def test_variables_passed_on_to_a_read_are_the_loads_to_record() -> None:
    """random_bits over a batch of keys passes its leading index on to the key's read; on a flat
    buffer a size-1 axis drops out of the offset (``linear``), so no statement uses ``i1``."""
    key = _arg(3, 1, 2, dtype=DType.i64)
    bits = Op.create(random.random_bits, [key], {"shape": ()})
    places: dict[int, Access] = {}

    def load(v: Value, at: tuple[str, ...]) -> str:
        places[len(builder.lines)] = Access("p0", (linear(at, v.type.shape),))
        return f"p0[{places[len(builder.lines)].index[0]}]"

    builder = BodyBuilder({bits.result: bits}, load, ConstantPool())
    builder.value_at(bits.result, IDX)
    body = [Line(t, (places[k],) if k in places else ()) for k, t in enumerate(builder.lines)]
    assert builder.lines[0] == "t0 = p0[i0 * 2 + 0]"
    assert variables(body) == {"i0", "0", "1"}  # the integers are the key words' axis
