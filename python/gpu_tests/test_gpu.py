"""hipjit from Python on a GPU with torch and CuPy: results checked element by element."""

import pytest
import torch

import hipjit
from conftest import SAXPY, SLOW_INC


def blocks(n, block=256):
    return (n + block - 1) // block


@pytest.fixture(scope="module")
def saxpy():
    return hipjit.get_jit().kernel(SAXPY, "saxpy")


def test_saxpy_on_torch_tensors(saxpy):
    n = (1 << 20) + 3
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.full((n,), 2.0, device="cuda")
    saxpy(blocks(n), 256, 3.0, x, y, n)
    want = 3.0 * torch.arange(n, dtype=torch.float32) + 2.0
    got = y.cpu()
    assert torch.equal(got, want), int((got != want).sum())
    assert [a.name for a in saxpy.args] == ["a", "x", "y", "n"]


def test_launch_on_a_non_default_current_stream_is_ordered_with_torch_work():
    inc = hipjit.get_jit().kernel(SLOW_INC, "slow_inc")
    n = 1 << 20
    side = torch.cuda.Stream()
    assert side.cuda_stream != 0
    with torch.cuda.stream(side):
        y = torch.zeros(n, device="cuda")          # torch work on `side`
        inc(blocks(n), 256, y, n, 20000)           # stream=None: torch's current stream, `side`
        y.mul_(3.0)                                 # torch work after it on `side`
        got = y.cpu()                               # read back on `side`
    assert torch.equal(got, torch.full((n,), 3.0)), int((got != 3.0).sum())


def test_torch_graph_captures_100_hipjit_launches_replayed_10_times(saxpy):
    n = 1 << 16
    x = torch.ones(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    # Compiled, loaded and launched once before the capture (torch's rule for warm-up).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        saxpy(blocks(n), 256, 1.0, x, y, n)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    y.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(100):
            saxpy(blocks(n), 256, 1.0, x, y, n)   # recorded on torch's capture stream
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), torch.zeros(n)), "a captured launch ran during the capture"
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), torch.full((n,), 1000.0))


def test_load_inside_a_global_capture_is_refused_by_name(saxpy):
    n = 256
    x = torch.ones(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    saxpy(1, 256, 1.0, x, y, n)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):   # capture_error_mode="global" by default
        with pytest.raises(hipjit.LoadError) as e:
            hipjit.get_jit().kernel(SAXPY + "\n// a source not loaded yet\n", "saxpy")
        saxpy(1, 256, 1.0, x, y, n)   # the capture goes on
    assert "refused by hipjit before the call" in str(e.value)
    assert "hipModuleLoadData" in str(e.value)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), torch.full((n,), 2.0))


def test_tensor_on_the_cpu_is_refused(saxpy):
    x = torch.ones(4)
    y = torch.zeros(4, device="cuda")
    with pytest.raises(ValueError, match=r"saxpy\(\) argument 1 \(x: const float\*\): the tensor is on the CPU"):
        saxpy(1, 4, 1.0, x, y, 4)


def test_tensors_of_other_elements_strided_or_cupy_int8_are_refused(saxpy):
    y = torch.zeros(8, device="cuda")
    label = r"saxpy\(\) argument 1 \(x: const float\*\): "
    with pytest.raises(TypeError, match=label + r"the tensor holds torch.float64 \(8-byte elements\)"):
        saxpy(1, 8, 1.0, torch.ones(8, device="cuda", dtype=torch.float64), y, 8)
    with pytest.raises(ValueError, match=label + r"the tensor is not contiguous \(strides \(2,\) for shape \(8,\)"):
        saxpy(1, 8, 1.0, torch.ones(16, device="cuda")[::2], y, 8)
    cupy = pytest.importorskip("cupy")
    with pytest.raises(TypeError, match=label + r"the CuPy array holds int8 \(1-byte elements\)"):
        saxpy(1, 8, 1.0, cupy.ones(8, dtype=cupy.int8), y, 8)
    assert torch.equal(y.cpu(), torch.zeros(8))


def test_cupy_arrays_as_arguments(saxpy):
    cupy = pytest.importorskip("cupy")
    n = 100_003
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    saxpy(blocks(n), 256, 2.0, x, y, n, stream=stream)
    stream.synchronize()
    want = 2.0 * cupy.arange(n, dtype=cupy.float32) + 1.0
    assert bool((y == want).all())
    # The same memory through __cuda_array_interface__ and DLPack.
    class Cai:
        __cuda_array_interface__ = y.__cuda_array_interface__
    saxpy(blocks(n), 256, 1.0, x, Cai(), n, stream=stream.ptr)
    saxpy(blocks(n), 256, 1.0, x, y.__dlpack__(), n, stream=stream)
    stream.synchronize()
    assert bool((y == 4.0 * cupy.arange(n, dtype=cupy.float32) + 1.0).all())


def test_torch_dlpack_capsule(saxpy):
    n = 1000
    x = torch.ones(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    cap = torch.utils.dlpack.to_dlpack(y)
    saxpy(blocks(n), 256, 5.0, x, cap, n)
    assert torch.equal(y.cpu(), torch.full((n,), 5.0))
    # Not consumed: torch can still import it.
    assert torch.equal(torch.utils.dlpack.from_dlpack(cap).cpu(), torch.full((n,), 5.0))
