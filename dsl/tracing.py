"""The tracing context: records ops while the user's function runs on abstract arrays.

Each op gets the location of the user's own line: the first frame on the stack that is not inside
dslc's packages. Errors raised while an op is built are re-raised with that location in front.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from types import CodeType, FrameType
from typing import Any

from compiler.ir.core import Block, Location, Op, Value
from compiler.ir.types import DType
from compiler.prims import elementwise
from compiler.prims.base import Build, Primitive
from runtime.errors import DSLError, ShapeError, TraceError

INPLACE_ATTR = "dsl.inplace"  # on ops that realize a user's in-place request; value: the request
# on such ops when the request was made inside a function compiled with strict_inplace=True: a copy
# is an error for it even when the program that runs it (a transform of it, an outer compiled
# function) is not strict
STRICT_ATTR = "dsl.strict_inplace"
# Writes that are not in-place requests: JAX's ``x.at[idx].set(v)`` (``dsl/gather.py``) scatters into a
# fresh copy of ``x`` that only the new array it returns ever sees, so nothing of the user's is
# overwritten; its ops carry no mark (a copy forced on it is no failure of the user's, the plan's own).
# ``Trace.functional`` says the same of every write while it is set (``x.index_add(...)``, the
# out-of-place form PyTorch gives its ``index_add_``: ``dsl/methods.py``).
FUNCTIONAL_WRITES = frozenset({"at"})

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE_DIRS = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("dsl", "compiler", "runtime"))


def _is_internal(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIRS) or filename.startswith("<frozen")


_POSITIONS: dict[CodeType, list[tuple[int | None, ...]]] = {}


def _column(frame: FrameType) -> int:
    """1-based column of the expression running in ``frame`` (0 when Python does not know)."""
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
    i = frame.f_lasti // 2
    col = positions[i][2] if 0 <= i < len(positions) else None
    return col + 1 if col is not None else 0


def user_location() -> Location:
    """The innermost stack frame that belongs to the user's code."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            return Location(code.co_filename, frame.f_lineno or 0, _column(frame))
        frame = frame.f_back
    return Location("<unknown>", 0, 0)


def traceback_location(err: BaseException) -> Location:
    """The innermost frame of ``err``'s traceback that belongs to the user's code."""
    found = Location("<unknown>", 0, 0)
    tb = err.__traceback__
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            found = Location(tb.tb_frame.f_code.co_filename, tb.tb_lineno, 0)
        tb = tb.tb_next
    return found


def user_error(cls: type[DSLError], message: str) -> DSLError:
    """An error whose message starts with the user's ``file:line``."""
    return cls(f"{user_location()}: {message}")


class LiftCarry(Exception):  # noqa: N818 (a signal, not an error)
    """Raised where a loop's or branch's body writes into an array of an enclosing block
    (``Array.write``): the loop traces its body again with that array's storage as one more carry
    (``dsl/control.py``), so the write has eager semantics."""

    def __init__(self, storage: Any) -> None:
        super().__init__("an array of an enclosing block written in a body")
        self.storage = storage


# The most axes an array may have: the CPU kernels nest a loop per axis, and Python compiles at most 20
# nested blocks (NumPy allows 64).
MAX_RANK = 20
TOO_MANY_AXES = (
    f"arrays of more than {MAX_RANK} axes are not supported (the kernels nest a loop per axis); "
    "reshape to fewer axes first"
)


class Trace:
    """The ops recorded so far for one function being traced."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.loc_override: Location | None = None  # set while the tracer itself emits (results)
        # weak integer values converted to a narrower dtype (``ops.note_narrowing``): each call checks
        # that the Python ints behind them fit it
        self.narrowed: dict[Value, DType] = {}
        # weak float values (Python float arguments) stored into integer arrays (``ops.assigned``):
        # each call checks that the floats behind them convert (not NaN, in range), as NumPy's do
        self.assigned_floats: dict[Value, DType] = {}
        self.strict = False  # inside a function compiled with strict_inplace=True
        self.functional = False  # writes now are into a fresh copy, not requests (``FUNCTIONAL_WRITES``)
        # the values defined inside the loop and branch bodies recorded here (``dsl/control.py``):
        # no op of this trace may read one
        self.sealed: set[Value] = set()
        # in the trace of a body: the values defined in it (its block arguments, its ops' results)
        self.local: set[Value] | None = None
        # the int64 0 every dynamic window starts at on an axis it spans (``dynamic_index.view``):
        # one value, so two views of the same window have the same start operands
        self.index_zero: Value | None = None

    def emit(
        self, prim: Primitive, operands: Sequence[Value], attrs: Mapping[str, Any] | None = None
    ) -> Value:
        return self.emit_op(prim, operands, attrs).result

    def emit_op(
        self,
        prim: Primitive,
        operands: Sequence[Value],
        attrs: Mapping[str, Any] | None = None,
        regions: tuple[Block, ...] = (),
    ) -> Op:
        """Record ``prim`` at the user's line (an op holding regions, a loop or branch, too)."""
        loc = self.location()
        if self.sealed and not self.sealed.isdisjoint(operands):
            raise TraceError(
                f"{loc}: this reads an array computed inside the body of a loop or branch "
                "(dsl.fori_loop, scan, while_loop, cond) after that body: only what the body returns "
                "leaves it. Return it from the body (as part of the carry), and write arrays from "
                "outside a body only through its carry"
            )
        try:
            op = Op.create(prim, list(operands), attrs or {}, loc, regions)
        except DSLError as err:
            raise type(err)(f"{loc}: {err}") from None
        if any(len(r.type.shape) > MAX_RANK for r in op.results):
            raise ShapeError(f"{loc}: {TOO_MANY_AXES}")
        self.ops.append(op)
        if self.local is not None:
            self.local.update(op.results)
        return op

    def owns(self, value: Value) -> bool:
        """Whether ``value`` may be written over here: not a value of an enclosing block seen from a
        body (a body changes arrays only through what it returns), nor one sealed in a body."""
        if value in self.sealed:
            return False
        if self.local is None or value in self.local:
            return True
        return any(value in op.results for op in self.ops)  # ops appended without emit (inlined)

    def location(self) -> Location:
        """Where the user's code is now (the location the next op gets)."""
        return self.loc_override or user_location()

    def is_request(self, request: str) -> bool:
        """Whether a write named ``request`` now is a user's in-place request (``FUNCTIONAL_WRITES``)."""
        return request not in FUNCTIONAL_WRITES and not self.functional

    def copy_before(self, value: Value, since: int, loc: Location) -> Value:
        """An explicit copy of ``value`` (made at ``loc``) recorded before the ops from ``since`` on,
        which read it instead of ``value``: an equal value, so what they compute is unchanged."""
        op = Op.create(elementwise.copy, [value], {}, loc)
        rest = [
            o.with_operands(tuple(op.result if v is value else v for v in o.operands))
            if value in o.operands
            else o
            for o in self.ops[since:]
        ]
        self.ops[since:] = [op, *rest]
        if self.local is not None:
            self.local.add(op.result)
        return op.result

    def mark_inplace(self, value: Value, request: str, since: int) -> Value:
        """Mark the op (recorded after ``since``) that computed ``value`` as the user's in-place
        ``request``; if ``value`` existed before the request, record an explicit marked copy. A
        functional write (``FUNCTIONAL_WRITES``) is no request: ``value`` as it is, unmarked."""
        if not self.is_request(request):
            return value
        for i in range(len(self.ops) - 1, since - 1, -1):
            op = self.ops[i]
            if op.results and op.results[0] is value and not op.regions:  # a loop's result: copied
                attrs = {**op.attrs, **self._request_attrs(request)}
                self.ops[i] = Op(op.prim, op.operands, attrs, op.results, op.loc)
                return value
        return self.emit(elementwise.copy, [value], self._request_attrs(request))

    def emit_inplace(self, request: str) -> Build:
        """A builder for the write-back ops of ``request`` (they carry the in-place mark too)."""

        def build(prim: Primitive, operands: Sequence[Value], attrs: Mapping[str, Any]) -> Value:
            return self.emit(prim, operands, {**attrs, **self._request_attrs(request)})

        return build

    def _request_attrs(self, request: str) -> dict[str, Any]:
        if not self.is_request(request):
            return {}
        return {INPLACE_ATTR: request, STRICT_ATTR: True} if self.strict else {INPLACE_ATTR: request}


_state = threading.local()


def active() -> bool:
    """Whether a trace is being recorded on this thread (a compiled function called inside one
    is inlined instead of run)."""
    return getattr(_state, "trace", None) is not None


def current() -> Trace:
    trace = getattr(_state, "trace", None)
    if trace is None:
        raise user_error(
            DSLError,
            "dsl arrays can only be used inside a function being compiled by dsl.compile: put this "
            "code in a function decorated with @dsl.compile (or transformed by dsl.grad, dsl.vmap ...) "
            "and call that",
        )
    return trace


class strict_inplace:
    """Context manager: in-place requests recorded inside are strict if ``strict`` (or if they
    already were: a strict function stays strict about what it calls)."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict

    def __enter__(self) -> None:
        self.trace = current()
        self.outer = self.trace.strict
        self.trace.strict = self.outer or self.strict

    def __exit__(self, *exc: object) -> None:
        self.trace.strict = self.outer


class tracing:
    """Context manager installing a fresh ``Trace`` for this thread (nests: inner traces stack)."""

    def __init__(self) -> None:
        self.trace = Trace()

    def __enter__(self) -> Trace:
        self.outer = getattr(_state, "trace", None)
        _state.trace = self.trace
        return self.trace

    def __exit__(self, *exc: object) -> None:
        _state.trace = self.outer
