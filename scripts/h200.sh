#!/usr/bin/env bash
# hipjit on HIP's NVIDIA platform, end to end on a machine with an NVIDIA GPU (the H200 device
# machine): the checks and benchmarks of examples/nvidia_e2e.rs, the kernel library of
# examples/downstream (softmax-demo: generate, compile with defines and an include directory,
# size from occupancy, load, launch on a stream between events, check every element), then a
# PyTorch stream handed to a cdylib built from hipjit (examples/torch_stream) through ctypes.
#
# The machine needs the NVIDIA driver, nvcc (HIPJIT_NVCC, default /usr/local/cuda/bin/nvcc) and
# python3 with torch; no Rust. Build the binaries where Rust is (scripts/build-device-bin.sh
# puts them in .device-bin/), carry that folder, then run:
#
#   scripts/h200.sh [BIN_DIR]        # BIN_DIR defaults to .device-bin
#
# The whole output also goes to $OUT/h200.log (or /tmp/h200.log when OUT is unset). Exits
# non-zero when any check fails.
set -euo pipefail

bin="${1:-.device-bin}"
log="${OUT:-/tmp}/h200.log"
export HIPJIT_NVCC="${HIPJIT_NVCC:-/usr/local/cuda/bin/nvcc}"
HIPJIT_CACHE_DIR="$(mktemp -d)"
export HIPJIT_CACHE_DIR
export HIPJIT_E2E_CACHE="$HIPJIT_CACHE_DIR/e2e"
unset HIP_PLATFORM

run_all() {
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$HIPJIT_NVCC" --version | tail -n 2
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

    echo "== hipjit checks and benchmarks (examples/nvidia_e2e.rs)"
    "$bin/nvidia_e2e"

    echo "== a kernel library on hipjit (examples/downstream, softmax-demo)"
    HIP_PLATFORM=nvidia "$bin/softmax-demo"

    echo "== PyTorch stream borrowed by a hipjit cdylib (examples/torch_stream)"
    HIP_PLATFORM=nvidia python3 - "$bin/libhipjit_torch_stream.so" <<'PY'
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
    echo "== all passed"
}

set -o pipefail
run_all 2>&1 | tee "$log"
