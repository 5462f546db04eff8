"""Time to compile the CUDA kernels of primitive registry programs to PTX (no GPU needed): the CUDA
frontend's share of a program's first call. Each named primitive's registry program
(``tests/test_prims_registry.py``) is planned for ``target="cuda"`` and every kernel compiled by
``compile_ptx`` for one architecture.

    python benchmarks/ptx_compile_time.py [NAME ...] [--cc 9.0]

Default names: ``random_bits log1p cbrt exp add``. A figure is one compile in a fresh process (Numba
caches nothing of ``compile_ptx``); run twice to see the machine's noise.

``--suite``: the names are programs of the CPU suite (``suite_programs.BUILDERS``, e.g. "layer norm";
default all six), compiled for ``target="cuda"``; with ``DSL_CUDA_UNROLL=1`` beside the default,
the compile-time cost of unrolled loops. ``--gpu-sizes``: at issue 27's GPU sizes
(``cuda_plans.GPU_BUILDERS``) instead.

``--registers`` (with ``--suite``): each kernel's registers a thread and spill bytes as sm_90's ptxas
gives them (nvJitLink, the ``cuda`` extra's: no GPU needed), and the blocks of its threads an SM
holds as those registers allow: the launch bounds' effect (``DSL_CUDA_BAND_BLOCKS=0`` beside the
default: none).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests")]

import test_prims_registry as registry  # noqa: E402
from cuda_ptx import assemble, cuda_program  # noqa: E402

from compiler.codegen import compile_ptx  # noqa: E402
from compiler.pipeline import Options, plan_program  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 8.0 or 9.0")
    parser.add_argument("--suite", action="store_true", help="the names are the CPU suite's programs")
    parser.add_argument("--gpu-sizes", action="store_true", help="--suite at issue 27's GPU sizes")
    parser.add_argument("--registers", action="store_true", help="--suite: each kernel's registers (sm_90)")
    args = parser.parse_args()
    cc = tuple(int(p) for p in args.cc.split("."))
    if args.suite:
        suite(args.names, cc, args.gpu_sizes, args.registers)
        return
    args.names = args.names or ["random_bits", "log1p", "cbrt", "exp", "add"]
    print("| primitive | kernels | seconds to PTX |\n|---|---:|---:|")
    for name in args.names:
        func, _ = registry.build(name, registry.TABLE[name].cases())
        program = cuda_program(plan_program(func, Options(target="cuda", inplace=True)))
        start = time.perf_counter()
        ptx = compile_ptx(program, cc)
        print(f"| {name} | {len(ptx)} | {time.perf_counter() - start:.1f} |")


def suite(names: list[str], cc: tuple[int, ...], gpu_sizes: bool = False, registers: bool = False) -> None:
    """``--suite``: each named program of the CPU suite (or at the GPU sizes) compiled for CUDA, then
    all its kernels to PTX; with ``registers``, each kernel's registers instead of the time."""
    sys.path.insert(0, HERE)
    import cuda_plans
    import suite_programs

    import dsl

    builders = cuda_plans.GPU_BUILDERS if gpu_sizes else suite_programs.BUILDERS
    if registers:
        print("| program | kernel | registers | spill bytes | blocks of 256 an SM (registers) |")
        print("|---|---|---:|---:|---:|")
    else:
        print("| program | kernels | seconds to PTX |\n|---|---:|---:|")
    for name in names or list(builders):
        program = builders[name]()
        inner = getattr(program.dslc, "_fn", program.dslc)
        compiled = dsl.compile(lambda *a, f=inner: f(*a), target="cuda")
        generated = compiled.lower(*program.args).program.generated
        start = time.perf_counter()
        ptx = compile_ptx(generated, cc)
        if not registers:
            print(f"| {name} | {len(ptx)} | {time.perf_counter() - start:.1f} |", flush=True)
            continue
        for kernel, text in ptx.items():
            done = assemble(text, cc)
            blocks = 65536 // (256 * (-(-done.registers // 8) * 8))  # (registers go out 8 a thread at a time)
            print(f"| {name} | {kernel} | {done.registers} | {done.spill_bytes} | {blocks} |", flush=True)


if __name__ == "__main__":
    main()
