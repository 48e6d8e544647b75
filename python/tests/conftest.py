"""Shared set-up of hipjit's Python tests.

Before any test runs, this builds the fixture HIP runtime (tests/fixtures/fake_hip.c: one
pretend device gfx90a:sramecc+:xnack-, "device memory" that is host memory, a `scale` kernel
(x[i] *= a for i < n) run on the host, stream capture recorded) with cc and points
HIPJIT_HIP_LIBRARY at it, and gives the session its own cache root (HIPJIT_CACHE_DIR) and
compiler-identity directory, so that the process-wide runtime and Jit of hipjit are these.
Code objects are real: compiled by the hipcc installed here.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
WORK = Path(tempfile.mkdtemp(prefix="hipjit-pytest-"))


def build_fixture_runtime(directory: Path) -> Path:
    """Compiles the fixture HIP runtime into DIRECTORY/libamdhip64.so."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "libamdhip64.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-fvisibility=hidden", "-O1", "-Wall",
         "-D__HIP_PLATFORM_AMD__", "-o", str(out),
         str(FIXTURES / "fake_hip.c"), str(FIXTURES / "fake_hip_props.c")],
        check=True,
    )
    return out


FIXTURE_RUNTIME = build_fixture_runtime(WORK / "runtime")
os.environ["HIPJIT_HIP_LIBRARY"] = str(FIXTURE_RUNTIME)
os.environ["HIPJIT_CACHE_DIR"] = str(WORK / "cache")
os.environ["XDG_CACHE_HOME"] = str(WORK / "xdg")
# nvcc for the SM-target compiles: HIPJIT_NVCC, else the PyPI nvcc scripts/setup.sh installs.
if "HIPJIT_NVCC" not in os.environ:
    cache = Path(os.environ.get("HIPJIT_CI_CACHE", "/var/cache/hipjit-ci"))
    found = sorted(cache.glob("nvcc-venv/lib/python3*/site-packages/nvidia/cu*/bin/nvcc"))
    if found:
        os.environ["HIPJIT_NVCC"] = str(found[0])
# The platform is the fixture's (AMD), whatever HIP_PLATFORM the caller has.
os.environ.pop("HIP_PLATFORM", None)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(WORK, ignore_errors=True)


SCALE = r"""#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""

SAXPY = (REPO / "examples" / "kernels" / "saxpy.hip").read_text()


class HostArray:
    """Host memory presented as device memory through __cuda_array_interface__: the fixture
    runtime's device memory is host memory, so its kernels read and write it. `dtype`: the
    elements (float32 by default); `step`: present every step-th element (a strided view);
    `readonly`: the interface's read-only flag; `strides`: give the strides explicitly even
    when the view is contiguous."""

    def __init__(self, values, dtype=None, step=1, readonly=False, strides=False):
        import numpy as np

        self.array = np.asarray(values, dtype=dtype or np.float32)
        self.view = self.array[::step]
        self.readonly = readonly
        self.strides = strides

    @property
    def __cuda_array_interface__(self):
        v = self.view
        contiguous = v.flags.c_contiguous and not self.strides
        return {
            "data": (v.ctypes.data, self.readonly),
            "shape": v.shape,
            "strides": None if contiguous else v.strides,
            "typestr": v.dtype.str,
            "version": 3,
        }


def fixture_lib():
    """The fixture runtime as loaded in this process (the same handle hipjit opened)."""
    return ctypes.CDLL(str(FIXTURE_RUNTIME))


def fixture_log():
    lib = fixture_lib()
    lib.fixture_log.restype = ctypes.c_char_p
    return lib.fixture_log().decode().splitlines()


def fixture_stream():
    """A stream created by the fixture runtime (hipStreamCreateWithFlags), as an int."""
    lib = fixture_lib()
    lib.hipSetDevice(0)
    s = ctypes.c_void_p()
    assert lib.hipStreamCreateWithFlags(ctypes.byref(s), 1) == 0
    return s.value


def run_python(code: str, env=None, timeout=120):
    """Runs CODE in a fresh interpreter of this venv with this session's environment."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def tmp(tmp_path):
    return tmp_path
