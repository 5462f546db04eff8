#!/usr/bin/env bash
# One call's worth of GPU checks on a lent NVIDIA machine, run from the
# repository root: the CUDA suite on the GPU, the PTX tests, then bench_cuda.py. Logs and results go
# to $OUT (default ./gpu_out). Uses the machine's own Python stack (numba, numba-cuda, torch), except
# the wheels carried in .whl/ (installed into /tmp/site, ahead on the path): numba-cuda 0.30.4 fails to
# import under that machine's numpy 2.5 (np.row_stack is gone), so carry numpy 2.4: `pip download
# --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl
# numpy==2.4.6` (.whl/ is git-ignored: copy it to the machine with the tree).
# Steps: lease and lease2 (the 15-minute plan in two calls), env, suite, checks, ptx, plans, bench, bench_quick, gpu, gpu_cpu, graphs, columns, shuffle,
# scatter (default: env suite plans bench). None of issue 27's steps has run on a GPU yet; their times
# are estimates and each is bounded by its timeouts:
# - checks (~3 min): every GPU-only test of the paths the simulator cannot run, in one pytest call:
#   CUDA graphs (tests/test_cuda_graphs.py), warp-shuffle reductions (test_cuda_shuffle.py), the sorted
#   scatter's multi-block sort (test_cuda_scatter.py);
# - graphs, shuffle, scatter: those tests again (skipped with TIMINGS_ONLY=1), then each one's A/B
#   (benchmarks/cuda_graphs.py: host cost per call; cuda_shuffle.py: shuffles against the tree;
#   cuda_scatter.py: embedding gradients against PyTorch), ~2-4 minutes each;
# - columns (~3 min): layer norm's column reductions in the band, after it in one kernel with an output
#   each, or a kernel each (cuda_plans.FORMS), and softmax + xent with rows up to 8192;
# - gpu and gpu_cpu (issue 27's table: bench_gpu.py, the six suite programs against JAX, PyTorch eager
#   and torch.compile): at most 5 minutes each (--budget-s stops starting programs after 200 s and the
#   table is rewritten after each).
# The suite (tests/cuda_sim on the GPU, ~2-3 min warm) runs the new simulator files too: sim_fuzz
# (random programs and gradients), sim_precision (TF32 and transposed cuBLAS results), sim_shuffle.
# Also new since the last lease and checked by `suite` only on a GPU (2026-11-26, session 8): float
# products as libdevice's mul.rn (no fused multiply-adds) and exactmath's log1p, so dsl.random gives
# the CPU's bits (sim_random; sim_fuzz compares target-independent programs with the CPU bit for bit);
# results computed in the memory of the value they update (results_in_place: sim_gather_scatter).
# Session 9 (2026-11-26): a scatter stored over its dying base launches no copy (sim_gather_scatter);
# sim_fuzz draws dsl.numpy's library steps (cumsum, arg-reductions, moments, einsum ...) on CUDA.
# Issue 27's next lease (15 device minutes; carry .whl): `bash benchmarks/gpu_session.sh env lease`, then at
# once on the warm machine `bash benchmarks/gpu_session.sh lease2` (the 2026-11-27 lease took 30 s to start,
# 404 s and 227 s for its two calls: benchmarks/results/2026-11-27-gpu-lease.md; lease b 35 s, 486 s and
# 129 s: 2026-11-27-gpu-lease-b.md). New since that lease and
# checked only there: graphs on by default, every call's device arrays from the pool, unrolled elementwise
# loops (DSL_CUDA_UNROLL). Session 16 (2026-11-27, no lease): bands of one-element rows without barriers,
# a call's dispatch 4-5x cheaper on the CPU (benchmarks/call_overhead.py), mutated arguments' chains in
# their own memory; lease2 now profiles a graph call's host time (graphs_profile.txt). Session 19 (after
# lease b): unrolled loops' loads pinned first (runtime/cuda_intrinsics.py), a wave of blocks for a loss band
# (lease2's A/Bs), device arrays' signatures from their attributes, test_sorted_scatter's oracle drops.
# Session 21: graphs read arguments that stay put in place and hand their results out (sim_graphs on the
# GPU in `lease`; lease2's A/B against DSL_CUDA_STAGE_ALL=1); band kernels' launch bounds hold them to 64
# registers (lease2's A/B against DSL_CUDA_BAND_BLOCKS=0).
#
#     bash benchmarks/gpu_session.sh [STEP ...]
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 DSL_CACHE_DIR=/tmp/dslc_cache NUMBA_CACHE_DIR=/tmp/numba_cache
PY=${PY:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
steps=${*:-env suite plans bench}

for step in $steps; do
    echo "=== $step ($(date +%T))"
    case $step in
    env)
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
        $PY -c "import sys, numpy, numba, llvmlite, scipy; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'llvmlite', llvmlite.__version__, 'scipy', scipy.__version__)"
        $PY -m pip list 2>/dev/null | grep -i -E "numba|cuda-bindings|cuda-core|torch |pytest|hypothesis"
        $PY -c "from runtime.devices import cuda_available; print('cuda_available', cuda_available())"
        ;;
    suite) # the CUDA suite (tests/cuda_sim) on the GPU, as tests/test_cuda_sim.py runs it
        (cd tests && DSL_TARGET=cuda NUMBA_ENABLE_CUDASIM=0 timeout 300 $PY -m pytest cuda_sim \
            -o python_files='sim_*.py' -p no:cacheprovider -W ignore::RuntimeWarning -n 8 -q -rfE \
            --maxfail 40 2>&1) | tee "$OUT/suite.log" | tail -60
        ;;
    checks) # issue 27's GPU-only tests in one call (the header)
        timeout 300 $PY -m pytest tests/test_cuda_graphs.py tests/test_cuda_shuffle.py tests/test_cuda_scatter.py \
            -n 8 -q -rfEs -p no:randomly 2>&1 | tee "$OUT/checks.log" | tail -40
        ;;
    ptx)
        timeout 300 $PY -m pytest tests/test_cuda_ptx.py tests/test_cuda_sim.py -n 8 -q -rfE 2>&1 \
            | tee "$OUT/ptx.log" | tail -30
        ;;
    plans) # intermediates for target=cuda against XLA's temp bytes on this GPU (issue 26, 27)
        timeout 200 $PY benchmarks/cuda_plans.py --sizes gpu,cpu --out "$OUT/cuda_plans.md" 2>&1 \
            | tee "$OUT/plans.log" | tail -16
        ;;
    bench)
        timeout 400 $PY benchmarks/bench_cuda.py --out "$OUT/cuda.md" 2>&1 | tee "$OUT/bench.log" | tail -40
        ;;
    columns) # a band's column reductions in the band, after it in one kernel with an output each, or in a
        # kernel each (cuda_plans.FORMS: auto, apart, band), timed (issue 26, 27)
        timeout 200 $PY benchmarks/cuda_plans.py --sizes gpu,cpu --only layer --time --out "$OUT/columns.md" 2>&1 \
            | tee "$OUT/columns.log" | tail -12
        timeout 150 $PY benchmarks/cuda_plans.py --sizes gpu --only softmax --time --row-max 8192 \
            --out "$OUT/columns_softmax.md" 2>&1 | tee -a "$OUT/columns.log" | tail -8
        ;;
    graphs) # CUDA graphs (issue 27): graphs against eager bit for bit, then the host cost per call
        [ "${TIMINGS_ONLY:-0}" = 1 ] ||
            timeout 180 $PY -m pytest tests/test_cuda_graphs.py -n 4 -q -rfEs -p no:randomly 2>&1 \
                | tee "$OUT/graphs.log" | tail -30
        timeout 150 $PY benchmarks/cuda_graphs.py --out "$OUT/graphs.md" 2>&1 | tee -a "$OUT/graphs.log" | tail -12
        ;;
    shuffle) # block reductions as warp shuffles against the shared-memory tree (issue 27): GPU tests, A/B
        [ "${TIMINGS_ONLY:-0}" = 1 ] ||
            timeout 200 $PY -m pytest tests/test_cuda_shuffle.py tests/test_cuda_ptx.py -k shuffle -n 4 -q -rfEs \
                -p no:randomly 2>&1 | tee "$OUT/shuffle.log" | tail -20
        timeout 300 $PY benchmarks/cuda_shuffle.py --out "$OUT/shuffle.md" 2>&1 | tee -a "$OUT/shuffle.log" | tail -12
        ;;
    scatter) # the sorted scatter's radix sort (issue 27): embedding gradients (100k and 1M tokens) against
        # PyTorch's embedding backward and index_add_ (atomics, deterministic), bits checked against the
        # walk, dslc's GPU time by kernel (count, sums, scan, place, marks, segments) (~2 minutes)
        [ "${TIMINGS_ONLY:-0}" = 1 ] ||
            timeout 120 $PY -m pytest tests/test_cuda_scatter.py -n 2 -q -rfEs -p no:randomly 2>&1 | tee "$OUT/scatter.log" | tail -8
        timeout 240 $PY benchmarks/cuda_scatter.py --out "$OUT/scatter.md" 2>&1 | tee -a "$OUT/scatter.log" | tail -40
        ;;
    bench_quick)
        timeout 240 $PY benchmarks/bench_cuda.py --quick --out "$OUT/cuda_quick.md" 2>&1 \
            | tee "$OUT/bench_quick.log" | tail -40
        ;;
    gpu | gpu_cpu) # bench_gpu.py at one size: compiles 3 programs at once first, then times each alone
        size=$([ "$step" = gpu ] && echo gpu || echo cpu)
        timeout 300 $PY benchmarks/bench_gpu.py --sizes "$size" --rounds 2 --warm-jobs 3 --budget-s 200 \
            --child-timeout 150 --out "$OUT/$step.md" 2>&1 | tee "$OUT/$step.log" | grep -v '^{' | tail -60
        ;;
    lease) # a 15-minute lease in two calls, `env lease` (~8 min) then `lease2` (~5 min) on the warm machine (at
        # most 8 files back each): the correctness checks at once, then the GPU size's timings alone. (The
        # 2026-11-27 lease b also compiled bench_gpu's programs beside the checks: that starved the suite,
        # which passed 57% of its tests in 280 s, and finished none of the compiles.)
        (cd tests && DSL_TARGET=cuda NUMBA_ENABLE_CUDASIM=0 timeout 250 $PY -m pytest cuda_sim \
            -o python_files='sim_*.py' -p no:cacheprovider -W ignore::RuntimeWarning -n 11 -q -rfE \
            --maxfail 60 > "$OUT/suite.log" 2>&1) &
        timeout 250 $PY -m pytest tests/test_cuda_graphs.py tests/test_cuda_shuffle.py tests/test_cuda_scatter.py \
            -n 4 -q -rfEs -p no:randomly > "$OUT/checks.log" 2>&1 &
        wait
        for f in suite checks; do tail -n 3 "$OUT/$f.log"; done
        grep -E "FAILED|ERROR" "$OUT/suite.log" "$OUT/checks.log" | head -30
        echo "=== bench_gpu, gpu size ($(date +%T))"
        timeout 230 $PY benchmarks/bench_gpu.py --sizes gpu --rounds 2 --budget-s 190 --child-timeout 90 \
            --out "$OUT/gpu.md" > "$OUT/bench.log" 2>&1
        grep -v '^{' "$OUT/bench.log" | grep -v -i warn | tail -40
        ;;
    lease2) # the lease's second call (~6 min): the CPU size (graphs on by default), graphs against eager and where a
        # graph call's host time goes (cProfile: graphs_profile.txt; its output goes to a file, since a
        # pipe into `head` ended the 2026-11-27 lease b's run before it wrote the profile)
        echo "=== bench_gpu, cpu size ($(date +%T))"
        timeout 120 $PY benchmarks/bench_gpu.py --sizes cpu --rounds 2 --budget-s 85 --child-timeout 50 \
            --out "$OUT/gpu_cpu.md" > "$OUT/bench_cpu.log" 2>&1
        grep -v '^{' "$OUT/bench_cpu.log" | grep -v -i warn | head -24
        echo "=== graphs timings ($(date +%T))"
        timeout 90 $PY benchmarks/cuda_graphs.py --repeats 30 --rounds 3 --out "$OUT/graphs.md" --profile 100 \
            --profile-out "$OUT/graphs_profile.txt" > "$OUT/graphs.log" 2>&1
        grep -v -i warn "$OUT/graphs.log" | head -14
        # the A/Bs of sessions 19-21's kernels (the default: `lease`'s gpu.md): the unrolled loops' pinned
        # loads against the plain loop, and the band kernels' launch bounds (64 registers, a wave of 4
        # blocks an SM) against none (DSL_CUDA_SMS=43, the wave's A/B before the bounds, is left out)
        echo "=== A/B ($(date +%T))"
        for ab in DSL_CUDA_UNROLL=1 DSL_CUDA_BAND_BLOCKS=0; do
            env $ab timeout 75 $PY benchmarks/bench_gpu.py --sizes gpu --programs chain,layer --peers jax \
                --rounds 2 --child-timeout 40 --out "$OUT/ab.md" > /dev/null 2>&1
            echo "$ab"; grep -E "^\| (elementwise|layer)" "$OUT/ab.md" | head -4
        done
        # session 21 at the CPU size: graphs reading arguments in place and handing results out against
        # staging them all, and the band kernels' launch bounds (64 registers) against none
        for ab in DSL_CUDA_STAGE_ALL=1 DSL_CUDA_BAND_BLOCKS=0; do
            env $ab timeout 55 $PY benchmarks/bench_gpu.py --sizes cpu --programs softmax,layer \
                --peers jax --rounds 2 --child-timeout 25 --out "$OUT/ab.md" > /dev/null 2>&1
            echo "$ab (cpu size)"; grep -E "^\| (softmax|layer)" "$OUT/ab.md" | head -4
        done
        rm -f "$OUT/ab.json"
        ;;
    *) echo "unknown step $step" ;;
    esac
done
