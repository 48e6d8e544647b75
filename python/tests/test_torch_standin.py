"""The torch paths of hipjit against a stand-in `torch` module (torch is not installed on this
machine; scripts/h200.sh runs the same paths with the real torch on an NVIDIA GPU). The stand-in
has what hipjit reads: `torch.Tensor` (`get_device()`, `data_ptr()`, `dtype`, `element_size()`,
`is_contiguous()`, `stride()`, `shape`), `torch.cuda.is_initialized`,
`torch.cuda.current_device` and `torch._C._cuda_getCurrentRawStream`, whose stream is a real
stream of the fixture runtime. Each test runs in a fresh interpreter (hipjit remembers torch's
functions once it has seen them)."""

import shutil
import subprocess

from conftest import FIXTURE_RUNTIME, SCALE, WORK, run_python

STANDIN = r'''
import ctypes, os, sys, types
import numpy as np
lib = ctypes.CDLL(os.environ["HIPJIT_HIP_LIBRARY"])
lib.fixture_log.restype = ctypes.c_char_p
def log():
    return lib.fixture_log().decode().splitlines()
def new_stream():
    lib.hipSetDevice(0)
    s = ctypes.c_void_p()
    assert lib.hipStreamCreateWithFlags(ctypes.byref(s), 1) == 0
    return s.value
STREAM = new_stream()
torch = types.ModuleType("torch")
class dtype:
    def __init__(self, name):
        self.name = name
    def __str__(self):
        return "torch." + self.name
class Tensor:
    def __init__(self, values, device=0, dtype_name="float32", step=1):
        self.base = np.asarray(values, dtype=dtype_name)
        self.array = self.base[::step]
        self.device_index = device
        self.dtype = dtype(dtype_name)
        self.shape = self.array.shape
    def get_device(self):
        return self.device_index
    def data_ptr(self):
        return self.array.ctypes.data
    def element_size(self):
        return self.array.itemsize
    def is_contiguous(self):
        return self.array.flags.c_contiguous
    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)
torch.Tensor = Tensor
torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0)
current = {"stream": STREAM}
torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: current["stream"])
sys.modules["torch"] = torch
import hipjit
SCALE = %r
''' % SCALE


def run(body, env=None):
    r = run_python(STANDIN + body, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_stream_none_is_torchs_current_stream_and_tensors_are_arguments():
    out = run(
        "k = hipjit.get_jit().kernel(SCALE, 'scale')\n"
        "t = Tensor([1, 2, 3])\n"
        "k(1, 3, t, 2.0, 3)\n"
        "print(t.array.tolist())\n"
        "print(log()[-1].endswith('stream=0x%x extra=(nil)' % STREAM))\n"
    )
    assert out.split("\n")[:2] == ["[2.0, 4.0, 6.0]", "True"]


def test_tensor_on_the_cpu_or_another_device_is_refused():
    out = run(
        "k = hipjit.get_jit().kernel(SCALE, 'scale')\n"
        "for dev in (-1, 1):\n"
        "    try:\n"
        "        k(1, 1, Tensor([1], device=dev), 2.0, 1)\n"
        "    except ValueError as e:\n"
        "        print(e)\n"
    )
    assert out.splitlines() == [
        "scale() argument 0 (x: float*): the tensor is on the CPU; the kernel runs on device 0",
        "scale() argument 0 (x: float*): the tensor is on cuda:1; the kernel is loaded on device 0",
    ]


def test_tensor_of_other_elements_or_not_contiguous_is_refused():
    out = run(
        "k = hipjit.get_jit().kernel(SCALE, 'scale')\n"
        "for t in (Tensor([1, 2], dtype_name='float64'), Tensor([1, 2], dtype_name='int32'),\n"
        "          Tensor([1, 2, 3, 4], step=2)):\n"
        "    try:\n"
        "        k(1, 2, t, 2.0, 2)\n"
        "    except (TypeError, ValueError) as e:\n"
        "        print(type(e).__name__, e)\n"
        "    print(t.base.tolist())\n"
    )
    assert out.splitlines() == [
        "TypeError scale() argument 0 (x: float*): the tensor holds torch.float64 (8-byte "
        "elements), and the kernel reads float (4-byte elements): pass an array of float32, or "
        "pass its address as an int to pass it unchecked",
        "[1.0, 2.0]",
        "TypeError scale() argument 0 (x: float*): the tensor holds torch.int32 (4-byte "
        "elements), and the kernel reads float (4-byte elements): pass an array of float32, or "
        "pass its address as an int to pass it unchecked",
        "[1, 2]",
        "ValueError scale() argument 0 (x: float*): the tensor is not contiguous (strides (2,) "
        "for shape (2,), in elements), and the kernel reads its elements one after another: "
        "pass a contiguous copy (tensor.contiguous()), or pass its address as an int to pass it "
        "unchecked",
        "[1.0, 2.0, 3.0, 4.0]",
    ]


def test_load_during_a_global_capture_of_torchs_stream_is_refused_by_name():
    out = run(
        "k = hipjit.get_jit().kernel(SCALE, 'scale')\n"
        "assert lib.hipStreamBeginCapture(ctypes.c_void_p(STREAM), 0) == 0\n"
        "mark = len(log())\n"
        "again = hipjit.get_jit().kernel(SCALE, 'scale')  # loaded before: no load, allowed\n"
        "try:\n"
        "    hipjit.get_jit().kernel(SCALE + '// another source\\n', 'scale')\n"
        "except hipjit.LoadError as e:\n"
        "    print(e)\n"
        "t = Tensor([1, 2])\n"
        "k(1, 2, t, 3.0, 2)  # recorded into the graph, not run\n"
        "print(t.array.tolist())\n"
        "print([l for l in log()[mark:] if 'hipModuleLoadData' in l])\n"
        "g = ctypes.c_void_p()\n"
        "print('end', lib.hipStreamEndCapture(ctypes.c_void_p(STREAM), ctypes.byref(g)))\n"
    )
    lines = out.splitlines()
    assert "hipModuleLoadData" in lines[0]
    assert "refused by hipjit before the call" in lines[0]
    assert "the stream it would use is capturing" in lines[0]
    assert lines[1:] == ["[1.0, 2.0]", "[]", "end 0"]


def test_default_device_is_torchs_current_device():
    out = run("print(hipjit.get_jit().kernel(SCALE, 'scale').device)\n")
    assert out.strip() == "0"


def torch_hip_library(directory, runtime):
    """A stand-in for torch's libtorch_hip.so: a library that calls the HIP runtime RUNTIME
    (linked against it, found through its rpath)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "stub.c").write_text(
        "extern int hipModuleLaunchKernel();\nint torch_stub(void) { return hipModuleLaunchKernel(); }\n")
    out = directory / "libtorch_hip.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(directory / "stub.c"),
                    "-L", str(runtime.parent), "-lamdhip64", "-Wl,-rpath," + str(runtime.parent)],
                   check=True)
    return out


LAUNCH_AFTER_TORCH_LOADS = (
    "k = hipjit.get_jit().kernel(SCALE, 'scale')\n"
    "k(1, 1, Tensor([1]), 2.0, 1)  # torch's HIP library not loaded yet: nothing to compare\n"
    "ctypes.CDLL(%r)\n"
    "try:\n"
    "    k(1, 1, Tensor([1]), 2.0, 1)\n"
    "    print('launched')\n"
    "except hipjit.LaunchError as e:\n"
    "    print(e)\n"
)


def test_launch_on_torchs_stream_refused_when_torch_calls_another_runtime_copy():
    # hipjit opened its runtime first; then "torch" loads its HIP library, which calls its own
    # copy of libamdhip64.
    other = WORK / "torch-lib"
    other.mkdir(exist_ok=True)
    shutil.copy(FIXTURE_RUNTIME, other / "libamdhip64.so")
    torch_lib = torch_hip_library(WORK / "torch-other", other / "libamdhip64.so")
    out = run(LAUNCH_AFTER_TORCH_LOADS % str(torch_lib))
    assert out.startswith(
        "refused: hipjit opened the HIP runtime %s and torch calls another copy, %s; a stream of "
        "torch's copy is not a stream of hipjit's." % (FIXTURE_RUNTIME, other / "libamdhip64.so")), out


def test_launch_on_torchs_stream_allowed_when_torch_calls_hipjits_copy():
    torch_lib = torch_hip_library(WORK / "torch-same", FIXTURE_RUNTIME)
    assert run(LAUNCH_AFTER_TORCH_LOADS % str(torch_lib)).strip() == "launched"
