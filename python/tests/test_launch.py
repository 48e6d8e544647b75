"""Kernel launches from Python against the fixture HIP runtime (HIPJIT_HIP_LIBRARY): its
device memory is host memory and its `scale` kernel (x[i] *= a for i < n) runs on the host, so
a launch's arguments are checked by what the kernel computed. The code objects are real
(hipcc)."""

import ctypes

import numpy as np
import pytest

import hipjit
from conftest import SCALE, HostArray, fixture_log, fixture_stream


@pytest.fixture(scope="module")
def scale():
    return hipjit.get_jit().kernel(SCALE, "scale")


def test_kernel_is_loaded_on_the_fixture_device(scale):
    assert scale.name == "scale"
    assert scale.device == 0
    assert scale.target == "gfx90a:sramecc+:xnack-"
    assert [(a.name, a.ctype, a.kind) for a in scale.args] == [
        ("x", "float*", "pointer"),
        ("a", "float", "value"),
        ("n", "unsigned", "value"),
    ]
    assert repr(scale) == "Kernel(scale(float* x, float a, unsigned n), device=0, target='gfx90a:sramecc+:xnack-')"
    # A second request is the same loaded library: no second hipModuleLoadData.
    loads = sum("hipModuleLoadData" in line for line in fixture_log())
    again = hipjit.get_jit().kernel(SCALE, "scale")
    assert again.key == scale.key
    assert sum("hipModuleLoadData" in line for line in fixture_log()) == loads


def test_launch_on_cuda_array_interface_memory(scale):
    x = HostArray(range(8))
    scale(1, 8, x, 2.0, 8)
    assert x.array.tolist() == [0, 2, 4, 6, 8, 10, 12, 14]


def test_int_address_and_numpy_scalars(scale):
    a = np.arange(8, dtype=np.float32)
    scale(1, 8, a.ctypes.data, np.float32(0.5), np.uint32(4))
    assert a.tolist() == [0, 0.5, 1, 1.5, 4, 5, 6, 7]


def test_int_for_a_float_parameter_is_converted_as_c_does(scale):
    x = HostArray([1, 2, 3])
    scale(1, 3, x, 3, 3)
    assert x.array.tolist() == [3, 6, 9]


def test_grid_and_block_tuples_and_dynamic_shared_memory(scale):
    x = HostArray([1] * 4)
    scale((1, 1, 1), (4,), x, 2.0, 4, shared_mem=256)
    assert x.array.tolist() == [2] * 4
    assert "lds=256" in fixture_log()[-1]


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((HostArray([1]), 2.0), TypeError, r"scale\(\) takes 3 argument\(s\) \(x, a, n\), 2 given"),
        ((HostArray([1]), 2.0, 1.5), TypeError,
         r"scale\(\) argument 2 \(n: unsigned\): an integer parameter, given the float 1.5"),
        ((HostArray([1]), 2.0, -1), ValueError,
         r"scale\(\) argument 2 \(n: unsigned\): -1 is out of range \(0 to 4294967295\)"),
        ((HostArray([1]), 2.0, 1 << 32), ValueError, r"argument 2 \(n: unsigned\): 4294967296 is out of range"),
        ((HostArray([1]), "2", 1), TypeError,
         r"scale\(\) argument 1 \(a: float\): passed by value \(4 bytes\): expected int, float, a NumPy scalar or bytes; got str"),
        (([1.0], 2.0, 1), TypeError,
         r"scale\(\) argument 0 \(x: float\*\): expected device memory .* got list"),
        ((-5, 2.0, 1), ValueError, r"argument 0 \(x: float\*\): -5 is not a device address"),
        ((HostArray([1]), np.float64(2), 1), ValueError,
         r"argument 1 \(a: float\): 4 bytes expected, the NumPy float64 scalar has 8"),
        ((HostArray([1]), np.int32(2), 1), TypeError,
         r"argument 1 \(a: float\): a NumPy int32 scalar does not match the parameter's type"),
        ((HostArray([1]), 2.0, np.float32(1)), TypeError,
         r"argument 2 \(n: unsigned\): a NumPy float32 scalar does not match"),
        ((HostArray([1]), b"\x00\x00", 1), ValueError, r"argument 1 \(a: float\): 4 bytes expected, 2 given"),
        ((2.0, 2.0, 1), TypeError, r"argument 0 \(x: float\*\): expected device memory"),
    ],
)
def test_argument_mismatches_name_the_argument(scale, args, error, message):
    before = len(fixture_log())
    with pytest.raises(error, match=message):
        scale(1, 1, *args)
    # Refused before the runtime was called.
    assert not any("hipModuleLaunchKernel" in line for line in fixture_log()[before:])


def test_bytes_for_a_value_argument_are_passed_as_they_are(scale):
    x = HostArray([1, 2])
    scale(1, 2, x, np.float32(4).tobytes(), 2)
    assert x.array.tolist() == [4, 8]


@pytest.mark.parametrize(
    "grid, block, error, message",
    [
        (0, 1, ValueError, r"grid: 0 is not a dimension"),
        ((1, 2, 3, 4), 1, ValueError, r"grid: a tuple of 1 to 3 dimensions, got 4"),
        ("1", 1, TypeError, r"grid: expected an int or a tuple of 1 to 3 ints, got str"),
        # hipjit's own check, before the runtime: the caller's value is wrong.
        (1, 2048, ValueError,
         r"launch configuration: block.x = 2048 exceeds the device's maximum 1024"),
    ],
)
def test_launch_configuration_is_checked(scale, grid, block, error, message):
    with pytest.raises(error, match=message):
        scale(grid, block, HostArray([1]), 1.0, 1)


def test_launch_configuration_errors_are_not_compile_or_runtime_errors(scale):
    with pytest.raises(ValueError) as e:
        scale(1, 2048, HostArray([1]), 1.0, 1)
    assert not isinstance(e.value, hipjit.HipjitError)


@pytest.mark.parametrize(
    "shared_mem, error, message",
    [
        (-1, ValueError, r"shared_mem: -1 is out of range: expected bytes of dynamic shared memory from 0 to 4294967295"),
        (1 << 32, ValueError, r"shared_mem: 4294967296 is out of range"),
        (1.5, TypeError, r"shared_mem: expected an int \(bytes of dynamic shared memory, 0 to 4294967295\), got float"),
        (True, TypeError, r"shared_mem: expected an int .* got bool"),
    ],
)
def test_shared_mem_is_checked_naming_it(scale, shared_mem, error, message):
    with pytest.raises(error, match=message):
        scale(1, 1, HostArray([1]), 1.0, 1, shared_mem=shared_mem)


@pytest.mark.parametrize("handle", [-1, 3, 4095, 4097, 1 << 60, 1 << 64])
def test_a_raw_stream_handle_that_cannot_be_one_is_refused_by_name(scale, handle):
    before = len(fixture_log())
    with pytest.raises(ValueError, match=r"stream: -?\d+ is not a stream handle: expected 0 \(the default stream\)"):
        scale(1, 1, HostArray([1]), 1.0, 1, stream=handle)
    assert not any("hipModuleLaunchKernel" in line for line in fixture_log()[before:])


def test_explicit_stream_handle(scale):
    s = fixture_stream()
    x = HostArray([1, 1])
    scale(1, 2, x, 5.0, 2, stream=s)
    assert x.array.tolist() == [5, 5]
    assert fixture_log()[-1].endswith("stream=0x%x extra=(nil)" % s)
    with pytest.raises(TypeError, match="stream: expected None, an int handle, a torch.cuda.Stream or a CuPy stream; got str"):
        scale(1, 2, x, 5.0, 2, stream="default")


def test_stream_object_with_cuda_stream_or_ptr(scale):
    s = fixture_stream()

    class TorchLikeStream:
        cuda_stream = s

    class CupyLikeStream:
        ptr = s

    for stream in (TorchLikeStream(), CupyLikeStream()):
        x = HostArray([1])
        scale(1, 1, x, 7.0, 1, stream=stream)
        assert x.array.tolist() == [7]
        assert "stream=0x%x" % s in fixture_log()[-1]


def test_default_stream_without_torch_is_the_null_stream(scale):
    x = HostArray([1])
    scale(1, 1, x, 2.0, 1)
    assert "stream=(nil)" in fixture_log()[-1]


def test_unknown_kernel_name_lists_the_kernels():
    with pytest.raises(hipjit.LoadError, match="scale"):
        hipjit.get_jit().kernel(SCALE, "nope")


def test_device_that_does_not_exist():
    with pytest.raises(ValueError, match="device 3 does not exist: the runtime .* has 1 device"):
        hipjit.get_jit().kernel(SCALE, "scale", device=3)
    with pytest.raises(ValueError, match='device: "cpu" is not a GPU device'):
        hipjit.get_jit().kernel(SCALE, "scale", device="cpu")


def test_kernel_on_device_named_as_torch_does():
    k = hipjit.get_jit().kernel(SCALE, "scale", device="cuda:0")
    assert k.device == 0


# Pointer arguments checked against the pointee the source declares: before these checks a
# float64, int8, strided or read-only array passed for `float*` was launched on (with int8 the
# kernel wrote past the array).

NOT_FLOAT = r"pass an array of float32, or pass its address as an int to pass it unchecked"


@pytest.mark.parametrize(
    "dtype, held",
    [
        (np.float64, r"float64 \('<f8'\) \(8-byte elements\)"),
        (np.int8, r"int8 \('\|i1'\) \(1-byte elements\)"),
        (np.int32, r"int32 \('<i4'\) \(4-byte elements\)"),
        (np.float16, r"float16 \('<f2'\) \(2-byte elements\)"),
        (np.bool_, r"bool \('\|b1'\) \(1-byte elements\)"),
        (np.complex64, r"complex64 \('<c8'\) \(8-byte elements\)"),
    ],
)
def test_an_array_of_other_elements_than_the_pointee_is_refused_naming_both(scale, dtype, held):
    x = HostArray([1, 2, 3, 4], dtype=dtype)
    before = len(fixture_log())
    with pytest.raises(TypeError, match=(
            r"scale\(\) argument 0 \(x: float\*\): the __cuda_array_interface__ array holds "
            + held + r", and the kernel reads float \(4-byte elements\): " + NOT_FLOAT)):
        scale(1, 4, x, 2.0, 4)
    assert not any("hipModuleLaunchKernel" in line for line in fixture_log()[before:])
    assert x.array.tolist() == np.asarray([1, 2, 3, 4], dtype=dtype).tolist()


def test_a_strided_array_is_refused_naming_its_strides(scale):
    x = HostArray(range(8), step=2)
    before = len(fixture_log())
    with pytest.raises(ValueError, match=(
            r"scale\(\) argument 0 \(x: float\*\): the __cuda_array_interface__ array is not "
            r"contiguous \(strides \(8,\) for shape \(4,\), in bytes\), and the kernel reads its "
            r"elements one after another: pass a contiguous copy \(a C-contiguous copy\), or "
            r"pass its address as an int to pass it unchecked")):
        scale(1, 4, x, 2.0, 4)
    assert not any("hipModuleLaunchKernel" in line for line in fixture_log()[before:])
    assert x.array.tolist() == list(range(8))


def test_contiguous_strides_given_explicitly_are_accepted(scale):
    x = HostArray(np.ones((2, 3)), strides=True)
    assert x.__cuda_array_interface__["strides"] == (12, 4)
    scale(1, 6, x, 2.0, 6)
    assert x.array.tolist() == [[2, 2, 2], [2, 2, 2]]


def test_a_read_only_array_is_refused_for_a_pointer_the_kernel_may_write(scale):
    x = HostArray([1, 2], readonly=True)
    with pytest.raises(ValueError, match=(
            r"scale\(\) argument 0 \(x: float\*\): the __cuda_array_interface__ array is "
            r"read-only \(__cuda_array_interface__\['data'\]\[1\] is True\), and the kernel may "
            r"write through it \(it points to float, not const\): pass a writable array, declare "
            r"the parameter const, or pass its address as an int to pass it unchecked")):
        scale(1, 2, x, 2.0, 2)
    assert x.array.tolist() == [1, 2]


SUM = r"""#include <hip/hip_runtime.h>
extern "C" __global__ void sum(const float* __restrict__ x, float* out, const int4* q,
                               void* any, unsigned n) {
    if (threadIdx.x == 0) out[0] = x[0] + q[0].x + (any != nullptr) + n;
}
"""


@pytest.fixture(scope="module")
def sum_kernel():
    return hipjit.get_jit().kernel(SUM, "sum")


def test_read_only_arrays_are_taken_for_a_const_pointee_and_void_takes_any_elements(sum_kernel):
    before = len(fixture_log())
    sum_kernel(1, 1, HostArray([1], readonly=True), HostArray([0]),
               HostArray(range(8), dtype=np.int32, readonly=True),
               HostArray([1, 2], dtype=np.uint8), 1)
    assert any("hipModuleLaunchKernel sum" in line for line in fixture_log()[before:])
    with pytest.raises(ValueError, match=r"argument 1 \(out: float\*\): .* is read-only"):
        sum_kernel(1, 1, HostArray([1]), HostArray([0], readonly=True), HostArray([1, 2, 3, 4], dtype=np.int32), None, 1)


@pytest.mark.parametrize(
    "dtype, ok",
    [(np.int32, True), (np.uint32, True), (np.float32, False), (np.int64, False)],
)
def test_a_vector_pointee_takes_arrays_of_its_component(sum_kernel, dtype, ok):
    q = HostArray(range(8), dtype=dtype)
    args = (HostArray([1]), HostArray([0]), q, None, 1)
    if ok:
        sum_kernel(1, 1, *args)
    else:
        with pytest.raises(TypeError, match=(
                r"argument 2 \(q: const int4\*\): the __cuda_array_interface__ array holds "
                r".* and the kernel reads int4 \(16-byte elements\): pass an array of int32 or "
                r"uint32 \(4 per int4\)")):
            sum_kernel(1, 1, *args)


def test_an_int_address_is_passed_unchecked(scale):
    # The explicit way to pass memory as it is: its address.
    a = np.zeros(2, dtype=np.float64)
    before = len(fixture_log())
    scale(1, 1, a.ctypes.data, 2.0, 1)
    assert any("hipModuleLaunchKernel scale" in line for line in fixture_log()[before:])
