"""hipjit: just-in-time compiled HIP and CUDA kernels from Python.

Compile HIP C++ source (hipcc or hipRTC on AMD, nvcc or NVRTC on NVIDIA) through hipjit's
content-addressed cache, load it on a GPU and launch it on torch tensors, CuPy arrays, objects
with ``__cuda_array_interface__`` and DLPack capsules, on torch's current stream::

    import torch, hipjit

    SAXPY = r'''
    extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }'''
    saxpy = hipjit.get_jit().kernel(SAXPY, "saxpy")   # compiled for the current device, loaded
    x = torch.ones(1 << 20, device="cuda")
    y = torch.full_like(x, 2.0)
    saxpy((x.numel() + 255) // 256, 256, 3.0, x, y, x.numel())   # on torch's current stream
    assert bool((y == 5.0).all())

Importing this package compiles and loads nothing: the GPU runtime is opened on first use
(preferring a copy already loaded in the process, such as torch's), the compiler when the first
``Jit`` is made. One abi3 wheel serves CPython 3.9 and later with the GIL (free-threaded builds
are not supported).
"""

from ._hipjit import (
    ArgInfo,
    Compiled,
    CompileError,
    HipjitError,
    Inspected,
    Jit,
    Kernel,
    KernelInfo,
    LaunchError,
    LoadError,
    PendingCompile,
    SwitchingKernel,
    __version__,
    compile,
    get_jit,
    inspect,
    runtime_info,
)

__all__ = [
    "ArgInfo",
    "Compiled",
    "CompileError",
    "HipjitError",
    "Inspected",
    "Jit",
    "Kernel",
    "KernelInfo",
    "LaunchError",
    "LoadError",
    "PendingCompile",
    "SwitchingKernel",
    "__version__",
    "compile",
    "get_jit",
    "inspect",
    "runtime_info",
]
