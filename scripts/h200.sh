#!/usr/bin/env bash
# hipjit on HIP's NVIDIA platform, end to end on a machine with an NVIDIA GPU (the H200 device
# machine): the checks and benchmarks of examples/nvidia_e2e.rs and examples/nvidia_graphs.rs
# (prepared launches, capture and graphs), the kernel library of
# examples/downstream (softmax-demo: generate, compile with defines and an include directory,
# size from occupancy, load, launch on a stream between events, check every element), then a
# PyTorch stream handed to a cdylib built from hipjit (examples/torch_stream) through ctypes;
# on a machine with two or more GPUs, several GPUs in one process (examples/nvidia_multi_gpu.rs:
# saxpy on both from one Jit, a 1 GiB peer copy with its bandwidth, an event from GPU 0's
# stream waited on by GPU 1's, drop order), skipped with a SKIP line when fewer than two; then
# the Python package (its wheel from .device-bin unpacked into a directory on PYTHONPATH, beside
# the machine's torch, CuPy and pytest): python/gpu_tests with pytest (saxpy on torch
# tensors, a non-default current stream, torch.cuda.graph capturing 100 launches replayed 10
# times, a load refused inside a global capture, CuPy arrays, DLPack), the launch-overhead
# comparison with CuPy (python/bench/launch_overhead.py) and a compile off the launch path
# (Jit.switching_kernel: the first launch, on the fallback, against the background compile).
#
# Every NVIDIA check (nvidia_e2e, nvidia_graphs, softmax-demo, the PyTorch stream, several GPUs)
# runs twice, once with each NVIDIA compiler: HIPJIT_COMPILER=nvrtc, then HIPJIT_COMPILER=nvcc
# (nvidia_e2e checks that the compiler named compiled its kernels). nvidia_compilers times
# NVRTC against nvcc through Jit::load itself, and the in-process cold compile against raw
# NVRTC (again with TMPDIR in the working directory); scripts/nvrtc-names.py times NVRTC
# itself under a constant program name against a new one each compile.
#
# The machine needs the NVIDIA driver, nvcc (HIPJIT_NVCC, default /usr/local/cuda/bin/nvcc) and
# python3 with torch, CuPy and pytest; no Rust, no registry, no maturin. Build the binaries and
# the wheel where Rust is (scripts/build-device-bin.sh puts them in .device-bin/), carry that
# folder, then run:
#
#   scripts/h200.sh [BIN_DIR]        # BIN_DIR defaults to .device-bin
#
# HIPJIT_H200_ONLY=TEXT[|TEXT...] runs only the steps whose title contains one of the TEXTs
# (e.g. `nvidia_e2e` or `nvidia_e2e|switching_kernel`), for a
# quick check of one part within the device time; the full run is what the README reports.
#
# The whole output also goes to $OUT/h200.log (or /tmp/h200.log when OUT is unset). Exits
# non-zero when any check fails; a failing step is reported with a "FAIL step:" line and the
# steps after it still run.
set -euo pipefail

bin="${1:-.device-bin}"
log="${OUT:-/tmp}/h200.log"
export HIPJIT_NVCC="${HIPJIT_NVCC:-/usr/local/cuda/bin/nvcc}"
HIPJIT_CACHE_DIR="$(mktemp -d)"
export HIPJIT_CACHE_DIR
export HIPJIT_E2E_CACHE="$HIPJIT_CACHE_DIR/e2e"
unset HIP_PLATFORM

# CuPy's RawModule (NVRTC + cuModuleLoadData) on the 4 KiB source nvidia_compilers times: 7
# fresh processes, each source distinct and CuPy's disk cache in a new directory, median printed;
# like nvidia_compilers' children, each creates its CUDA context before the clock starts.
cupy_cold() {
    local i
    for i in 1 2 3 4 5 6 7; do
        CUPY_CACHE_DIR="$(mktemp -d)" python3 - "$i" <<'PY'
import sys, time
import cupy
cupy.cuda.Device(0).use()
cupy.zeros(1).sum().item()  # the context exists before the clock starts, as for hipjit
src = "// run %s\nextern \"C\" __global__ void four_k(float* x) { x[threadIdx.x] += 1.0f; }\n" % sys.argv[1]
while len(src) < 4096:
    src += "// padding to make the source 4 KiB long, as a generated kernel would be\n"
src = src[:4096]
t = time.perf_counter()
k = cupy.RawModule(code=src).get_function("four_k")
print("COLD_MS %.3f" % ((time.perf_counter() - t) * 1e3))
PY
    done | awk '/^COLD_MS/ { print $2 }' | sort -n |
        awk '{ v[NR] = $1 } END { printf "BENCH CuPy RawModule cold compile + load, 4 KiB source, median of %d fresh processes: %.1f ms\n", NR, v[int((NR + 1) / 2)] }'
}

# torch_stream COMPILER: a torch stream handed to the cdylib built from hipjit.
torch_stream() {
    HIP_PLATFORM=nvidia HIPJIT_COMPILER="$1" python3 - "$bin/libhipjit_torch_stream.so" <<'PY'
import ctypes, sys, torch
lib = ctypes.CDLL(sys.argv[1])
f = lib.hipjit_torch_scale_add
f.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_float]
f.restype = ctypes.c_int
n = 1 << 20
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream
    rc = f(stream, x.data_ptr(), n, 2.0)
    y = x.cpu()  # read back on the same stream, after hipjit's kernel
want = torch.arange(n, dtype=torch.float32) * 3  # x * 2 + i with x = i
bad = int((y != want).sum())
ok = rc == 0 and bad == 0
print(("PASS" if ok else "FAIL"),
      f"PyTorch borrowed stream: rc {rc}, stream {stream:#x} (not the default stream: {stream != 0}), "
      f"{n} elements, {bad} wrong")
sys.exit(0 if ok else 1)
PY
}

# background_compile COMPILER: a specialised saxpy compiled on the background pool while its
# fallback is launched (Jit.switching_kernel): the first launch's time against the compile's
# (and load's), then the switch, each result checked element by element. Needs $pydir.
background_compile() {
    HIPJIT_COMPILER="$1" PYTHONPATH="$pydir" python3 - <<'PY'
import sys, time, torch, hipjit
SAXPY = r'''#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
jit = hipjit.get_jit()
fallback = jit.kernel(SAXPY, "saxpy")
n = 1 << 20
x = torch.ones(n, device="cuda")
y = torch.zeros(n, device="cuda")
torch.cuda.synchronize()
t = time.perf_counter()
k = jit.switching_kernel(fallback, SAXPY + "// specialised %d\n" % time.time_ns(), defines={"N": n})
k((n + 255) // 256, 256, 2.0, x, y, n)
first = time.perf_counter() - t
on_fallback = not k.switched
switched = k.wait(timeout=300)
compiled = time.perf_counter() - t
k((n + 255) // 256, 256, 2.0, x, y, n)
bad = int((y.cpu() != 4.0).sum())
ok = on_fallback and switched and k.error is None and bad == 0
print("BENCH background compile: first launch (fallback) %.3f ms, compile + load %.1f ms (ratio %.5f)"
      % (first * 1e3, compiled * 1e3, first / compiled))
print(("PASS" if ok else "FAIL"), f"switching kernel: first launch on the fallback {on_fallback}, "
      f"switched {switched}, error {k.error!r}, {bad} wrong of {n}")
sys.exit(0 if ok else 1)
PY
}

# hipjit's wheel from $bin unpacked into a directory put on PYTHONPATH. Not a venv: on the
# device machine pytest and CuPy are installed where a venv made with --system-site-packages
# does not see them (the first run found neither).
python_package() {
    pydir="$(mktemp -d)/site"
    python3 -m pip install -q --no-index --no-deps --target "$pydir" "$bin"/hipjit-*.whl || {
        pydir=""
        return 1
    }
}

failed=()

# step TITLE COMMAND...: prints "== TITLE", runs COMMAND, and records a failure without
# stopping, so that one failing check does not hide the others' results.
step() {
    local title="$1" rc=0
    shift
    if [ -n "${HIPJIT_H200_ONLY:-}" ]; then
        local only wanted=0
        local -a texts
        IFS='|' read -ra texts <<<"$HIPJIT_H200_ONLY"
        for only in "${texts[@]}"; do
            [[ -n "$only" && "$title" == *"$only"* ]] && wanted=1
        done
        ((wanted)) || return 0
    fi
    echo "== $title"
    "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL step: $title (exit status $rc)"
        failed+=("$title")
    fi
}

run_all() {
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$HIPJIT_NVCC" --version | tail -n 2
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    echo "TMPDIR ${TMPDIR:-unset}; working directory $PWD; $(nproc) CPUs"
    df -hT "${TMPDIR:-/tmp}" . | sed 's/^/  /'

    local compiler
    for compiler in nvrtc nvcc; do
        step "hipjit checks and benchmarks (examples/nvidia_e2e.rs), HIPJIT_COMPILER=$compiler" \
            env HIPJIT_COMPILER=$compiler "$bin/nvidia_e2e"
        step "prepared launches, stream capture and graphs (examples/nvidia_graphs.rs), HIPJIT_COMPILER=$compiler" \
            env HIPJIT_COMPILER=$compiler "$bin/nvidia_graphs"
        step "a kernel library on hipjit (examples/downstream, softmax-demo), HIPJIT_COMPILER=$compiler" \
            env HIP_PLATFORM=nvidia HIPJIT_COMPILER=$compiler "$bin/softmax-demo"
    done

    step "NVRTC against nvcc (examples/nvidia_compilers.rs)" "$bin/nvidia_compilers"
    # NVRTC itself by program name: a constant name, a new name each compile, with and
    # without a CUDA context, and each cubin checked to hold its own source's constant.
    local nvrtc_lib="${HIPJIT_NVRTC_LIBRARY:-$(dirname "$HIPJIT_NVCC")/../lib64/libnvrtc.so.13}"
    step "NVRTC by program name (scripts/nvrtc-names.py)" \
        python3 scripts/nvrtc-names.py "$nvrtc_lib" "$(dirname "$HIPJIT_NVCC")/../include" --cuda
    # The in-process cold comparison again with the temporary directory (where hipjit names
    # NVRTC's program) on the working directory's filesystem instead of TMPDIR's.
    step "the in-process NVRTC cold compile, TMPDIR in the working directory (examples/nvidia_compilers.rs cold)" \
        env TMPDIR="$(mkdir -p .tmp-nvrtc && cd .tmp-nvrtc && pwd)" "$bin/nvidia_compilers" cold
    step "CuPy RawModule, the same 4 KiB source: cold compile + load in fresh processes" cupy_cold

    for compiler in nvrtc nvcc; do
        step "PyTorch stream borrowed by a hipjit cdylib (examples/torch_stream), HIPJIT_COMPILER=$compiler" \
            torch_stream "$compiler"
    done

    local pydir=""
    step "the Python package: the wheel installed into a directory on PYTHONPATH" python_package
    if [ -n "$pydir" ]; then
        step "the Python package: import time" \
            env PYTHONPATH="$pydir" python3 python/bench/import_time.py
        step "the Python package: python/gpu_tests (pytest)" \
            env PYTHONPATH="$pydir" python3 -m pytest -p no:cacheprovider -q -ra python/gpu_tests
        step "the Python package: launch overhead against CuPy" \
            env PYTHONPATH="$pydir" python3 python/bench/launch_overhead.py
        for compiler in nvrtc nvcc; do
            step "the Python package: a compile off the launch path (Jit.switching_kernel), HIPJIT_COMPILER=$compiler" \
                background_compile "$compiler"
        done
    fi

    local gpus
    gpus="$(nvidia-smi -L | grep -c '^GPU ' || true)"
    if [ "$gpus" -lt 2 ]; then
        echo "== several GPUs in one process (examples/nvidia_multi_gpu.rs)"
        echo "SKIP several GPUs: $gpus GPU(s) on this machine, 2 needed (saxpy on both, 1 GiB peer copy, cross-GPU event, drop order not run)"
    else
        # No NVLink multicast (NVLS) objects: NCCL's use of them is off, hipjit creates none.
        for compiler in nvrtc nvcc; do
            step "several GPUs in one process (examples/nvidia_multi_gpu.rs), HIPJIT_COMPILER=$compiler" \
                env NCCL_NVLS_ENABLE=0 HIPJIT_COMPILER=$compiler "$bin/nvidia_multi_gpu"
        done
    fi

    if [ "${#failed[@]}" -eq 0 ]; then
        echo "== all passed"
    else
        echo "== ${#failed[@]} step(s) failed:"
        printf '   %s\n' "${failed[@]}"
        return 1
    fi
}

set -o pipefail
run_all 2>&1 | tee "$log"
