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


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32 * 2), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def capsule(array, device_type=10, device_id=0, byte_offset=0, name=b"dltensor", deleted=None,
            dtype=(2, 32, 1), strides=None, flags=None):
    """A capsule of ARRAY (1-D) as a producer makes one: `dtype` (code, bits, lanes),
    `strides` in elements (None: compact), `flags` (a versioned capsule when given)."""
    shape = (ctypes.c_int64 * 1)(array.size)
    m = DLManagedTensor() if flags is None else DLManagedTensorVersioned()
    if flags is not None:
        m.version[:] = [1, 0]
        m.flags = flags
        name = b"dltensor_versioned" if name == b"dltensor" else name
    m.dl_tensor.data = array.ctypes.data
    m.dl_tensor.device = DLDevice(device_type, device_id)
    m.dl_tensor.ndim = 1
    code, bits, lanes = dtype
    m.dl_tensor.dtype[:] = [code, bits, lanes & 0xFF, lanes >> 8]
    m.dl_tensor.shape = shape
    if strides is not None:
        s = (ctypes.c_int64 * 1)(strides)
        m.dl_tensor.strides = s
        KEEP.append(s)
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


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(dtype=(2, 64, 1)), TypeError,
         r"the DLPack tensor holds float64 \(8-byte elements\), and the kernel reads float "
         r"\(4-byte elements\): pass an array of float32"),
        (dict(dtype=(0, 8, 1)), TypeError, r"the DLPack tensor holds int8 \(1-byte elements\)"),
        (dict(dtype=(4, 16, 1)), TypeError, r"the DLPack tensor holds bfloat16 \(2-byte elements\)"),
        (dict(strides=2), ValueError,
         r"the DLPack tensor is not contiguous \(strides \(2,\) for shape \(2,\), in "
         r"elements\)"),
        (dict(flags=1), ValueError,
         r"the DLPack tensor is read-only \(its DLPack flags have DLPACK_FLAG_BITMASK_READ_ONLY\), "
         r"and the kernel may write through it \(it points to float, not const\)"),
    ],
)
def test_capsules_of_other_elements_strided_or_read_only_are_refused(scale, kwargs, error, message):
    a = np.ones(2, dtype=np.float32)
    with pytest.raises(error, match=r"scale\(\) argument 0 \(x: float\*\): " + message):
        scale(1, 2, capsule(a, **kwargs), 2.0, 2)
    assert a.tolist() == [1, 1]


def test_a_writable_versioned_capsule_and_unit_strides_are_taken(scale):
    a = np.ones(2, dtype=np.float32)
    scale(1, 2, capsule(a, flags=0, strides=1), 3.0, 2)
    assert a.tolist() == [3, 3]
