"""PTX checks shared by the tests: every kernel of a program compiles for sm_80 and sm_90 (NVVM)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from compiler.codegen import compile_ptx, cuda_program
from compiler.ir.core import Function
from compiler.pipeline import Options, plan_program

ARCHS = ((8, 0), (9, 0))


def _availability() -> str | None:
    """``None`` when ``numba.cuda.compile_ptx`` works here, else why not."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "compile_ptx is not available while the CUDA simulator is on"
    try:
        from numba import cuda

        cuda.compile_ptx(lambda x: None, "void(float32[:])", cc=(9, 0))
    except Exception as err:  # numba-cuda or NVVM missing: the cuda extra is not installed
        return f"NVVM is not available ({type(err).__name__}: {err}); pip install 'dslc[cuda]'"
    return None


PTX_UNAVAILABLE = _availability() or ""
PTX_AVAILABLE = not PTX_UNAVAILABLE


def check_ptx(func: Function, what: str, inplace: bool = True) -> int:
    """Compile every kernel of ``func``'s CUDA program for each arch; returns the number of kernels."""
    program = cuda_program(plan_program(func, Options(target="cuda", inplace=inplace)))
    for cc in ARCHS:
        ptx = compile_ptx(program, cc)
        assert set(ptx) == {k.name for k in program.kernels}, what
        for name, text in ptx.items():
            assert f".target sm_{cc[0]}{cc[1]}" in text, f"{what}: {name}"
            assert re.search(r"\.entry\s+\S*" + re.escape(name), text), f"{what}: {name} has no entry"
    return len(program.kernels)


@dataclass(frozen=True)
class Assembled:
    """What sm_``cc``'s ptxas makes of a kernel's PTX (``assemble``)."""

    cubin_bytes: int
    registers: int  # a thread's
    spill_bytes: int  # spill stores


def assemble(ptx: str, cc: tuple[int, ...] = (9, 0)) -> Assembled:
    """``ptx`` assembled by ptxas through nvJitLink (the ``cuda`` extra's; no GPU needed)."""
    from cuda.bindings import nvjitlink

    options = [f"-arch=sm_{cc[0]}{cc[1]}", "-O3", "-verbose"]
    handle = nvjitlink.create(len(options), options)
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx.encode(), len(ptx), "kernel")
        nvjitlink.complete(handle)
        size = int(nvjitlink.get_linked_cubin_size(handle))
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    text = log.decode(errors="replace")
    (registers,) = re.findall(r"Used (\d+) registers", text)
    (spills,) = re.findall(r"(\d+) bytes spill stores", text)
    return Assembled(size, int(registers), int(spills))
