"""DLPack capsules and __dlpack__ objects as pointer arguments (fixture runtime: device memory
is host memory). The capsules are made here with ctypes as a producer would (dlpack.h)."""

import ctypes

import numpy as np
import pytest

import hipjit
from conftest import SCALE


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_uint8 * 4),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


PyCapsule_New = ctypes.pythonapi.PyCapsule_New
PyCapsule_New.restype = ctypes.py_object
PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.restype = ctypes.c_int
PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

KEEP = []


def capsule(array, device_type=10, device_id=0, byte_offset=0, name=b"dltensor", deleted=None):
    shape = (ctypes.c_int64 * 1)(array.size)
    m = DLManagedTensor()
    m.dl_tensor.data = array.ctypes.data
    m.dl_tensor.device = DLDevice(device_type, device_id)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype[:] = [2, 32, 1, 0]
    m.dl_tensor.shape = shape
    m.dl_tensor.byte_offset = byte_offset
    m.deleter = DELETER(lambda p: deleted.append(p) if deleted is not None else None)
    KEEP.extend([shape, m, array])
    return PyCapsule_New(ctypes.addressof(m), name, None)


@pytest.fixture(scope="module")
def scale():
    return hipjit.get_jit().kernel(SCALE, "scale")


def test_capsule_is_read_and_not_consumed(scale):
    a = np.arange(4, dtype=np.float32)
    c = capsule(a)
    scale(1, 4, c, 2.0, 4)
    assert a.tolist() == [0, 2, 4, 6]
    # Still named "dltensor": its owner may import it, its deleter runs when it is destroyed.
    assert PyCapsule_IsValid(c, b"dltensor") == 1


def test_byte_offset_is_added(scale):
    a = np.ones(4, dtype=np.float32)
    scale(1, 2, capsule(a, byte_offset=8), 3.0, 2)
    assert a.tolist() == [1, 1, 3, 3]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(device_type=1), r"the DLPack tensor is in CPU memory; the kernel runs on a ROCm device"),
        (dict(device_type=2), r"the DLPack tensor is in CUDA memory; the kernel runs on a ROCm device"),
        (dict(device_id=1), r"the DLPack tensor is on device 1; the kernel is loaded on device 0"),
        (dict(name=b"used_dltensor"), r"the DLPack capsule was already consumed"),
        (dict(name=b"other"), r'a capsule named "other" is not a DLPack tensor'),
    ],
)
def test_capsule_refusals_name_the_argument(scale, kwargs, message):
    a = np.ones(1, dtype=np.float32)
    with pytest.raises(ValueError, match=r"scale\(\) argument 0 \(x: float\*\): " + message):
        scale(1, 1, capsule(a, **kwargs), 2.0, 1)


def test_object_with_dlpack_method(scale):
    a = np.ones(2, dtype=np.float32)

    class Producer:
        def __dlpack__(self, stream=None):
            return capsule(a)

    scale(1, 2, Producer(), 4.0, 2)
    assert a.tolist() == [4, 4]
