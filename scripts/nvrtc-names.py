"""NVRTC's compile time and output by program name, on the machine's NVRTC: the same kind of
source compiled under one constant name and under a new name each time, with and without a
CUDA context in the process; each pair of sources differs in one constant, and the check is
that each cubin holds its own constant (no result of an earlier program served under its
name). Usage: python3 scripts/nvrtc-names.py LIBNVRTC INCLUDE_DIR [--cuda]"""
import ctypes, os, struct, sys, tempfile, time

lib, inc = sys.argv[1], sys.argv[2]
if "--cuda" in sys.argv:
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
n = ctypes.CDLL(lib)


def compile(src, name, opts):
    p = ctypes.c_void_p()
    assert n.nvrtcCreateProgram(ctypes.byref(p), src.encode(), name.encode(), 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t = time.perf_counter()
    rc = n.nvrtcCompileProgram(p, len(opts), arr)
    dt = time.perf_counter() - t
    assert rc == 0, rc
    sz = ctypes.c_size_t()
    n.nvrtcGetCUBINSize(p, ctypes.byref(sz))
    buf = ctypes.create_string_buffer(sz.value)
    n.nvrtcGetCUBIN(p, buf)
    n.nvrtcDestroyProgram(ctypes.byref(p))
    return buf.raw, dt * 1e3


major, minor = ctypes.c_int(), ctypes.c_int()
n.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
opts = ["-arch=sm_90", "-std=c++17", "-default-device", "-I" + inc]
pad = "".join("// padding line %d of a generated kernel\n" % i for i in range(60))


def src(c, tag):
    return ('#include <cuda_fp16.h>\n// %s\nextern "C" __global__ void k(float* x) '
            '{ x[threadIdx.x] = %s; }\n' % (tag, c)) + pad


one, two = struct.pack("<f", 1.5), struct.pack("<f", 2.5)
d = tempfile.mkdtemp()
compile(src("0.5f", "warm"), "warm.cu", opts)
ok = True
for mode in ["constant", "new", "constant", "new", "relative"]:
    ts = []
    for i in range(5):
        if mode == "constant":
            name = os.path.join(d, "k.cu")
        elif mode == "relative":
            name = "k.cu"
        else:
            name = os.path.join(d, "k%d_%d.cu" % (i, time.time_ns()))
        a, ta = compile(src("1.5f", "%d %s" % (i, mode)), name, opts)
        b, tb = compile(src("2.5f", "%d %s" % (i, mode)), name, opts)
        good = one in a and two in b and two not in a and one not in b
        ok &= good
        ts += [ta, tb]
    ts.sort()
    print("NVRTC %d.%d, %s name%s: median %.1f ms (%s), outputs %s" % (
        major.value, minor.value, mode, " (CUDA context)" if "--cuda" in sys.argv else "",
        ts[len(ts) // 2], " ".join("%.1f" % t for t in ts), "right" if good else "WRONG"))
print("PASS" if ok else "FAIL", "each cubin holds its own source's constant")
sys.exit(0 if ok else 1)
