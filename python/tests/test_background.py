"""Compiles off the launch path: `Jit.compile_in_background` and `Jit.switching_kernel`,
against the fixture HIP runtime (its `scale` kernel, x[i] *= a, runs on the host) with real
hipcc compiles (a second or more each here, so the first launch comes long before the
specialised kernel is ready)."""

import time

import pytest

import hipjit
from conftest import SCALE, HostArray

SCALE_F64 = r"""#include <hip/hip_runtime.h>
extern "C" __global__ void scale(double* x, double a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def test_compile_in_background_returns_at_once_and_result_waits():
    jit = hipjit.get_jit()
    source = SCALE + "// background 1\n"
    started = time.perf_counter()
    pending = jit.compile_in_background(source, "gfx90a")
    submitted = time.perf_counter() - started
    compiled = pending.result(timeout=300)
    total = time.perf_counter() - started
    assert submitted < total / 10, (submitted, total)
    assert pending.ready() and pending.wait(0)
    assert compiled.origin == "compiler"
    assert [k.name for k in compiled.kernels] == ["scale"]
    assert [a.name for a in compiled.kernels[0].args] == ["x", "a", "n"]
    assert repr(pending) == "PendingCompile(ready)"
    # Published as compile() publishes: the in-process cache has it.
    assert jit.compile(source, "gfx90a").origin == "memory"
    # And a memory hit is ready at once.
    assert jit.compile_in_background(source, "gfx90a").ready()


def test_a_failed_background_compile_raises_from_result():
    pending = hipjit.get_jit().compile_in_background("this is not C++", "gfx90a")
    with pytest.raises(hipjit.CompileError) as e:
        pending.result(timeout=300)
    assert e.value.diagnostics


def test_bad_keywords_are_refused_at_once():
    jit = hipjit.get_jit()
    with pytest.raises(TypeError, match="flags"):
        jit.compile_in_background(SCALE, "gfx90a", flags="-Wall")
    with pytest.raises(ValueError, match="timeout"):
        jit.compile_in_background(SCALE, "gfx90a").wait(-1)


def test_switching_kernel_launches_the_fallback_then_the_specialised_kernel():
    jit = hipjit.get_jit()
    fallback = jit.kernel(SCALE, "scale")
    kernel = jit.switching_kernel(fallback, SCALE + "// specialised\n", defines={"N": 4})
    x = HostArray([1, 2, 3, 4])
    started = time.perf_counter()
    kernel(1, 4, x, 2.0, 4)
    first_launch = time.perf_counter() - started
    assert x.array.tolist() == [2, 4, 6, 8]
    # hipcc takes a second or more: the launch above did not wait for it.
    assert not kernel.switched and kernel.error is None
    assert repr(kernel) == "SwitchingKernel(scale, compiling, fallback)"
    assert kernel.wait(timeout=300)
    compile_time = time.perf_counter() - started
    assert first_launch < compile_time / 10, (first_launch, compile_time)
    assert kernel.switched and kernel.ready() and kernel.error is None
    assert kernel.current.key != fallback.key and kernel.fallback.key == fallback.key
    assert [a.name for a in kernel.current.args] == ["x", "a", "n"]
    kernel(1, 4, x, 2.0, 4)
    assert x.array.tolist() == [4, 8, 12, 16]
    assert repr(kernel) == "SwitchingKernel(scale, switched)"


def test_arguments_that_differ_keep_the_fallback_with_the_error():
    jit = hipjit.get_jit()
    fallback = jit.kernel(SCALE, "scale")
    kernel = jit.switching_kernel(fallback, SCALE_F64)
    assert not kernel.wait(timeout=300)
    assert isinstance(kernel.error, hipjit.LoadError)
    assert "not the fallback's" in str(kernel.error)
    assert kernel.current.key == fallback.key
    x = HostArray([1, 2])
    kernel(1, 2, x, 3.0, 2)
    assert x.array.tolist() == [3, 6]
