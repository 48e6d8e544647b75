"""The CuPy path of hipjit against a stand-in `cupy` module (CuPy is not installed on this
machine; scripts/h200.sh runs python/gpu_tests with the real CuPy): `cupy.ndarray` with the
`.data` memory pointer (`ptr`, `device_id`) hipjit reads. Runs in a fresh interpreter."""

from conftest import SCALE, run_python

BODY = r'''
import sys, types
import numpy as np
cupy = types.ModuleType("cupy")
class MemoryPointer:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id
class ndarray:
    def __init__(self, values, device_id=0):
        self.host = np.asarray(values, dtype=np.float32)
        self.data = MemoryPointer(self.host.ctypes.data, device_id)
cupy.ndarray = ndarray
sys.modules["cupy"] = cupy
import hipjit
k = hipjit.get_jit().kernel(%r, "scale")
a = ndarray([1, 2, 3])
k(1, 3, a, 4.0, 3)
print(a.host.tolist())
try:
    k(1, 3, ndarray([1], device_id=2), 4.0, 1)
except ValueError as e:
    print(e)
''' % SCALE


def test_cupy_arrays_are_pointer_arguments_with_their_device_checked():
    r = run_python(BODY)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "[4.0, 8.0, 12.0]",
        "scale() argument 0 (x: float*): the CuPy array is on device 2; the kernel is loaded on device 0",
    ]
