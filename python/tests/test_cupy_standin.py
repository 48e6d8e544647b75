"""The CuPy path of hipjit against a stand-in `cupy` module (CuPy is not installed on this
machine; scripts/h200.sh runs python/gpu_tests with the real CuPy): `cupy.ndarray` with the
`.data` memory pointer (`ptr`, `device_id`), `dtype` (a NumPy dtype), `flags.c_contiguous`,
`shape` and `strides` hipjit reads. Runs in a fresh interpreter."""

from conftest import SCALE, run_python

BODY = r'''
import sys, types
import numpy as np
cupy = types.ModuleType("cupy")
class MemoryPointer:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id
class ndarray:
    def __init__(self, values, device_id=0, dtype=np.float32, step=1):
        self.base = np.asarray(values, dtype=dtype)
        self.host = self.base[::step]
        self.data = MemoryPointer(self.host.ctypes.data, device_id)
        self.dtype, self.flags = self.host.dtype, self.host.flags
        self.shape, self.strides = self.host.shape, self.host.strides
cupy.ndarray = ndarray
sys.modules["cupy"] = cupy
import hipjit
k = hipjit.get_jit().kernel(%r, "scale")
a = ndarray([1, 2, 3])
k(1, 3, a, 4.0, 3)
print(a.host.tolist())
for bad in (ndarray([1], device_id=2), ndarray([1, 2], dtype=np.int8),
            ndarray([1, 2, 3, 4], step=2)):
    try:
        k(1, 1, bad, 4.0, 1)
    except (TypeError, ValueError) as e:
        print(type(e).__name__, e)
print(ndarray([1, 2, 3, 4], step=2).base.tolist())
''' % SCALE


def test_cupy_arrays_are_pointer_arguments_with_their_device_checked():
    r = run_python(BODY)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "[4.0, 8.0, 12.0]",
        "ValueError scale() argument 0 (x: float*): the CuPy array is on device 2; the kernel is loaded on device 0",
        "TypeError scale() argument 0 (x: float*): the CuPy array holds int8 (1-byte elements), "
        "and the kernel reads float (4-byte elements): pass an array of float32, or pass its "
        "address as an int to pass it unchecked",
        "ValueError scale() argument 0 (x: float*): the CuPy array is not contiguous (strides "
        "(8,) for shape (2,), in bytes), and the kernel reads its elements one after another: "
        "pass a contiguous copy (cupy.ascontiguousarray(a)), or pass its address as an int to "
        "pass it unchecked",
        "[1.0, 2.0, 3.0, 4.0]",
    ]
