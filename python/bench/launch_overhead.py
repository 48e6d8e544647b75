"""Launch overhead of hipjit from Python, against CuPy's RawKernel, in one process on one GPU.

(a) hipjit and CuPy, both with CuPy arrays and an explicit CuPy stream: an empty kernel and a
    4-argument kernel (saxpy). (b) hipjit with torch tensors and stream=None (torch's current
    stream), with the Python-side costs it adds broken down.

Method: batches of 512 launches followed by a synchronize, only the launch calls timed
(time.perf_counter_ns around the batch), the contenders' batches alternating, 200 batches each;
the median per launch of each. Prints "BENCH ..." lines; exits 0 (the figures are reported, not
asserted).

Usage: python launch_overhead.py [--batches N]
"""

import argparse
import statistics
import time

import cupy
import torch

import hipjit

EMPTY = r'extern "C" __global__ void empty() {}'
SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
BATCH = 512


def per_launch_ns(fn, sync, batches):
    """Median ns per call of fn() over `batches` batches of BATCH calls."""
    out = []
    for _ in range(batches):
        t = time.perf_counter_ns()
        for _ in range(BATCH):
            fn()
        out.append((time.perf_counter_ns() - t) / BATCH)
        sync()
    return statistics.median(out)


def interleaved(contenders, sync, batches):
    """{name: median ns per launch}, the contenders' batches alternating."""
    samples = {name: [] for name in contenders}
    for _ in range(batches):
        for name, fn in contenders.items():
            t = time.perf_counter_ns()
            for _ in range(BATCH):
                fn()
            samples[name].append((time.perf_counter_ns() - t) / BATCH)
            sync()
    return {name: statistics.median(s) for name, s in samples.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=200)
    batches = p.parse_args().batches

    n = 1 << 10
    stream = cupy.cuda.Stream(non_blocking=True)
    x = cupy.ones(n, dtype=cupy.float32)
    y = cupy.zeros(n, dtype=cupy.float32)
    jit = hipjit.get_jit()
    h_empty = jit.kernel(EMPTY, "empty")
    h_saxpy = jit.kernel(SAXPY, "saxpy")
    c_empty = cupy.RawKernel(EMPTY, "empty")
    c_saxpy = cupy.RawKernel(SAXPY, "saxpy")
    a, nn = cupy.float32(2.0), cupy.uint32(n)
    # Warm-up: every path compiled, loaded and launched once.
    for f in (lambda: h_empty(1, 1, stream=stream), lambda: c_empty((1,), (1,), (), stream=stream),
              lambda: h_saxpy(4, 256, 2.0, x, y, n, stream=stream),
              lambda: c_saxpy((4,), (256,), (a, x, y, nn), stream=stream)):
        f()
    stream.synchronize()
    sync = stream.synchronize

    r = interleaved({
        "hipjit": lambda: h_empty(1, 1, stream=stream),
        "cupy": lambda: c_empty((1,), (1,), (), stream=stream),
    }, sync, batches)
    print("BENCH (a) empty kernel, CuPy stream: hipjit %.0f ns, CuPy RawKernel %.0f ns, ratio %.3f"
          % (r["hipjit"], r["cupy"], r["hipjit"] / r["cupy"]))
    r = interleaved({
        "hipjit": lambda: h_saxpy(4, 256, 2.0, x, y, n, stream=stream),
        "cupy": lambda: c_saxpy((4,), (256,), (a, x, y, nn), stream=stream),
    }, sync, batches)
    print("BENCH (a) saxpy, 4 arguments (2 CuPy arrays), CuPy stream: hipjit %.0f ns, CuPy "
          "RawKernel %.0f ns, ratio %.3f" % (r["hipjit"], r["cupy"], r["hipjit"] / r["cupy"]))
    # The same launch with the pointers and the stream as ints: hipjit without converting arrays.
    xp, yp, sp = x.data.ptr, y.data.ptr, stream.ptr
    r_raw = per_launch_ns(lambda: h_saxpy(4, 256, 2.0, xp, yp, n, stream=sp), sync, batches)
    print("BENCH (a) saxpy through hipjit with int pointers and an int stream: %.0f ns "
          "(CuPy array conversion costs %.0f ns a launch)" % (r_raw, r["hipjit"] - r_raw))

    # (b) torch tensors, stream=None.
    tx = torch.ones(n, device="cuda")
    ty = torch.zeros(n, device="cuda")
    tsync = torch.cuda.synchronize
    h_saxpy(4, 256, 2.0, tx, ty, n)
    tsync()
    t_none = per_launch_ns(lambda: h_saxpy(4, 256, 2.0, tx, ty, n), tsync, batches)
    ts = torch.cuda.current_stream().cuda_stream
    t_given = per_launch_ns(lambda: h_saxpy(4, 256, 2.0, tx, ty, n, stream=ts), tsync, batches)
    txp, typ = tx.data_ptr(), ty.data_ptr()
    t_ints = per_launch_ns(lambda: h_saxpy(4, 256, 2.0, txp, typ, n, stream=ts), tsync, batches)
    get_stream = torch._C._cuda_getCurrentRawStream
    c_stream = per_launch_ns(lambda: get_stream(0), lambda: None, batches)
    c_ptr = per_launch_ns(lambda: tx.data_ptr(), lambda: None, batches)
    c_dev = per_launch_ns(lambda: tx.get_device(), lambda: None, batches)
    print("BENCH (b) saxpy on torch tensors, stream=None: %.0f ns a launch" % t_none)
    print("BENCH (b) breakdown: explicit int stream %.0f ns (stream lookup %.0f ns; "
          "torch._C._cuda_getCurrentRawStream alone %.0f ns); int pointers and stream %.0f ns "
          "(two tensors converted %.0f ns; tensor.data_ptr() alone %.0f ns, tensor.get_device() "
          "alone %.0f ns)"
          % (t_given, t_none - t_given, c_stream, t_ints, t_given - t_ints, c_ptr, c_dev))


if __name__ == "__main__":
    main()
