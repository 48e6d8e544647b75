"""hipjit's Python package on a machine with a GPU, torch and CuPy (run by scripts/h200.sh on
the NVIDIA H200; the same tests would run on a ROCm machine with torch's ROCm build). Every
test here needs a GPU: this folder is not collected by the suite that runs without one
(python/tests)."""

import pytest
import torch

if not torch.cuda.is_available():
    raise pytest.UsageError("python/gpu_tests needs a GPU that torch can use")

SAXPY = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# y[i] = y[i] + 1, slowly enough (a spin of `spins` iterations per element) that a read on
# another stream that is not ordered after it would see the old values.
SLOW_INC = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void slow_inc(float* y, unsigned n, unsigned spins) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = y[i];
    for (unsigned k = 0; k < spins; ++k) v = v * 1.0000001f;
    y[i] = (v != v) ? 0.0f : y[i] + 1.0f;
}
"""
