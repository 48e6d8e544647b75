"""hipjit.compile and hipjit.inspect against the real hipcc here (Debian's HIP 5.2.3)."""

import json
import threading
from pathlib import Path
import time

import pytest

import hipjit
from conftest import SAXPY, run_python


def test_compile_reads_kernels_arguments_and_resources():
    c = hipjit.compile(SAXPY, "gfx90a", compiler="hipcc")
    assert c.targets == ["gfx90a"]
    assert len(c.key) == 64
    (k,) = c.kernels
    assert k.name == "saxpy"
    got = [(a.index, a.name, a.ctype, a.kind, a.offset, a.size) for a in k.args]
    assert got == [
        (0, "a", "float", "value", 0, 4),
        (1, "x", "const float* __restrict__", "pointer", 8, 8),
        (2, "y", "float* __restrict__", "pointer", 16, 8),
        (3, "n", "unsigned int", "value", 24, 4),
    ]
    # hipcc 5.2.3 on gfx90a: wave64, no LDS, no scratch, no spills (measured).
    assert (k.wavefront_size, k.lds_bytes, k.scratch_bytes) == (64, 0, 0)
    assert k.sgpr_spill_count == 0 and k.vgpr_spill_count == 0
    assert k.sgpr_count > 0 and k.vgpr_count > 0
    # No __launch_bounds__: clang records its default flat work-group size, 1024.
    assert k.max_threads_per_block == 1024
    assert c.code_object.startswith(b"\x7fELF")
    assert c.code_object_version == 4
    assert "hipcc" in c.compiler
    assert repr(c).startswith("Compiled(key='")
    assert "saxpy(float a, const float* __restrict__ x" in repr(k)


def test_second_compile_is_a_memory_hit_and_a_fresh_process_a_disk_hit():
    src = SAXPY + "\n// variant for the hit test\n"
    first = hipjit.compile(src, "gfx90a")
    assert first.origin == "compiler" and not first.is_hit
    again = hipjit.compile(src, "gfx90a")
    assert again.origin == "memory" and again.key == first.key
    r = run_python(
        "import sys, hipjit\n"
        "c = hipjit.compile(sys.argv[0] if False else %r, 'gfx90a')\n"
        "print(c.origin, c.key)\n" % src
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["disk", first.key]


def test_defines_and_options_change_the_key():
    src = "extern \"C\" __global__ void k(int* x) { x[0] = N; }\n"
    a = hipjit.compile(src, "gfx90a", defines={"N": 1})
    b = hipjit.compile(src, "gfx90a", defines=["N=2"])
    c = hipjit.compile(src, "gfx90a", defines={"N": 1}, opt=1)
    assert len({a.key, b.key, c.key}) == 3


def test_include_dir_header_edit_recompiles(tmp):
    inc = tmp / "include"
    inc.mkdir()
    (inc / "val.h").write_text("#define VAL 1\n")
    src = '#include "val.h"\nextern "C" __global__ void k(int* x) { x[0] = VAL; }\n'
    jit = hipjit.Jit(cache_dir=tmp / "cache")
    first = jit.compile(src, "gfx90a", include_dirs=[inc])
    (inc / "val.h").write_text("#define VAL 2\n")
    fresh = hipjit.Jit(cache_dir=tmp / "cache")
    second = fresh.compile(src, "gfx90a", include_dirs=[inc])
    assert second.origin == "compiler"
    assert second.key != first.key
    assert second.code_object != first.code_object


def test_compile_error_carries_parsed_diagnostics():
    with pytest.raises(hipjit.CompileError) as e:
        hipjit.compile('extern "C" __global__ void f(int* x) {\n  x[0] = ;\n}\n', "gfx90a",
                       compiler="hipcc")
    err = e.value
    assert "kernel.hip:2:10: error: expected expression" in str(err)
    (d,) = [d for d in err.diagnostics if d["severity"] == "error"]
    assert (d["file"], d["line"], d["column"]) == ("kernel.hip", 2, 10)
    assert d["message"] == "expected expression"
    assert d["excerpt"][0] == "  x[0] = ;"
    assert "error: expected expression" in err.log
    assert err.command[0].endswith("hipcc")
    assert isinstance(err, hipjit.HipjitError)


@pytest.mark.parametrize(
    "compiler,arch,program",
    [("nvcc", "sm_90", "nvcc"), ("nvrtc", "sm_90", None), ("hiprtc", "gfx90a", None)],
)
def test_compile_error_of_every_compiler_carries_diagnostics_log_and_command(
        compiler, arch, program):
    # hipRTC 5.2.3 lives inside Debian's libamdhip64.so.5 (the process's runtime here is the
    # fixture): a fresh interpreter names it.
    r = run_python(
        "import json, hipjit\n"
        "src = 'extern \"C\" __global__ void k(float* x) {\\n  x[0] = undefined_thing;\\n}\\n'\n"
        "try:\n"
        "    hipjit.compile(src, %r, compiler=%r)\n"
        "except hipjit.CompileError as e:\n"
        "    print(json.dumps({'d': e.diagnostics, 'log': e.log, 'command': e.command}))\n"
        % (arch, compiler),
        env={"HIPJIT_HIPRTC_LIBRARY": "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"},
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    errors = [d for d in got["d"] if d["severity"] == "error"]
    assert [(d["file"], d["line"]) for d in errors] == [("kernel.hip", 2)], got
    assert "undefined_thing" in errors[0]["message"]
    assert "undefined_thing" in got["log"]
    if program is None:
        assert got["command"] == []
    else:
        assert Path(got["command"][0]).name == program
        assert any("sm_90" in a for a in got["command"])


def test_target_the_compiler_does_not_know_is_a_compile_error():
    with pytest.raises(hipjit.CompileError, match="does not support gfx942"):
        hipjit.compile(SAXPY, "gfx942", compiler="hipcc")


def test_bad_arguments_name_the_keyword():
    with pytest.raises(ValueError, match=r"arch: \"gfx9000x\""):
        hipjit.compile(SAXPY, "gfx9000x")
    with pytest.raises(TypeError, match="arch: expected a target name"):
        hipjit.compile(SAXPY, 90)
    with pytest.raises(TypeError, match="source: expected str or bytes, got int"):
        hipjit.compile(3, "gfx90a")
    with pytest.raises(ValueError, match="opt: 7 is not an optimisation level"):
        hipjit.compile(SAXPY, "gfx90a", opt=7)
    with pytest.raises(ValueError, match="std: unknown C\\+\\+ standard \"c\\+\\+98\""):
        hipjit.compile(SAXPY, "gfx90a", std="c++98")
    with pytest.raises(TypeError, match="defines: expected a dict"):
        hipjit.compile(SAXPY, "gfx90a", defines=5)
    with pytest.raises(TypeError, match="include_dirs: expected a list of directories, got one str"):
        hipjit.compile(SAXPY, "gfx90a", include_dirs="/tmp")
    # Options refused before any compiler ran are the caller's argument errors.
    with pytest.raises(ValueError, match='flags: compiler flag "-o" is not accepted for hipcc'):
        hipjit.compile(SAXPY, "gfx90a", flags=["-o", "x"], compiler="hipcc")
    with pytest.raises(ValueError, match=r'defines: define name "1X" is not a C identifier'):
        hipjit.compile(SAXPY, "gfx90a", defines=["1X"])


def test_inspect_bytes_path_and_bundle(tmp):
    c = hipjit.compile(SAXPY, ["gfx90a", "gfx906"])
    assert c.targets == ["gfx90a", "gfx906"]
    elf = c.code_objects[1]
    i = hipjit.inspect(elf)
    assert (i.container, i.target, i.code_object_version) == ("elf", "gfx906", 4)
    assert [k.name for k in i.kernels] == ["saxpy"]
    # From a file; metadata alone gives no parameter names or C types.
    p = tmp / "saxpy.hsaco"
    p.write_bytes(elf)
    (a0, a1, _, _) = hipjit.inspect(p).kernels[0].args
    assert (a0.name, a0.ctype, a0.kind, a0.size) == (None, None, "value", 4)
    assert (a1.kind, a1.value_kind, a1.address_space) == ("pointer", "global_buffer", "global")


def test_inspect_refuses_what_is_not_a_code_object(tmp):
    with pytest.raises(
        hipjit.HipjitError,
        match=r'not an AMDGPU code object or offload bundle: the input is text \(starting "hello, world"\)',
    ):
        hipjit.inspect(b"hello, world")
    with pytest.raises(hipjit.HipjitError, match="missing.hsaco"):
        hipjit.inspect(tmp / "missing.hsaco")
    with pytest.raises(TypeError, match="expected a path"):
        hipjit.inspect(3.5)


def test_compile_releases_the_gil():
    # While hipcc runs (about a second), another Python thread keeps running.
    src = SAXPY + "\n// GIL test %f\n" % time.time()
    done = threading.Event()
    ticks = 0

    def work():
        hipjit.compile(src, "gfx90a")
        done.set()

    t = threading.Thread(target=work)
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.002)
    t.join()
    assert ticks >= 20, ticks


def test_jit_with_its_own_cache_and_repr(tmp):
    jit = hipjit.Jit(cache_dir=[tmp / "w", tmp / "r"])
    assert [str(p) for p in jit.cache_dirs] == [str(tmp / "w"), str(tmp / "r")]
    assert "Jit(compiler=" in repr(jit)
    assert hipjit.Jit(cache_dir=False).cache_dirs == []
    assert hipjit.get_jit() is hipjit.get_jit()
    with pytest.raises(ValueError, match="compiler: \"icc\""):
        hipjit.Jit(compiler="icc")


def test_sm_target_compiles_a_cubin_with_nvcc():
    # nvcc from PyPI (scripts/setup.sh): no GPU needed to compile.
    c = hipjit.compile(SAXPY, "sm_90", compiler="nvcc")
    assert c.targets == ["sm_90"]
    assert c.compiler.startswith("nvcc ")
    assert c.code_object_version is None
    (k,) = c.kernels
    # A cubin records sizes only; the kinds, names and types come from the source.
    got = [(a.name, a.ctype, a.kind, a.size) for a in k.args]
    assert got == [
        ("a", "float", "value", 4),
        ("x", "const float* __restrict__", "pointer", 8),
        ("y", "float* __restrict__", "pointer", 8),
        ("n", "unsigned int", "value", 4),
    ]
    # A cubin records registers per thread (as vgpr_count), static shared memory and the
    # stack frame (saxpy has neither), but no SGPR or spill figures, nor (without
    # __launch_bounds__) a block size: None, not 0.
    assert k.vgpr_count > 0 and (k.lds_bytes, k.scratch_bytes) == (0, 0)
    unknown = ("sgpr_count", "sgpr_spill_count", "vgpr_spill_count", "max_threads_per_block")
    assert {f: getattr(k, f) for f in unknown} == dict.fromkeys(unknown)
    assert f"sgpr=None, vgpr={k.vgpr_count}, lds=0 B, scratch=0 B, spills=None" in repr(k)
    i = hipjit.inspect(c.code_object)
    assert (i.container, i.target) == ("cubin", "sm_90")
    assert [a.kind for a in i.kernels[0].args] == ["unknown"] * 4
    assert {f: getattr(i.kernels[0], f) for f in unknown} == dict.fromkeys(unknown)
    # Both say the same of a cubin's code object version.
    assert i.code_object_version is None
    assert "code_object_version=None" in repr(i)
    with pytest.raises(ValueError, match=r'arch: "sm_9": '):
        hipjit.compile(SAXPY, "sm_9")


def test_cubin_block_size_from_launch_bounds_is_reported():
    src = ('extern "C" __global__ void __launch_bounds__(256) k(float* x) {\n'
           '  x[threadIdx.x] = 1.0f;\n}\n')
    c = hipjit.compile(src, "sm_90", compiler="nvcc")
    assert c.kernels[0].max_threads_per_block == 256
    assert hipjit.inspect(c.code_object).kernels[0].max_threads_per_block == 256


@pytest.mark.parametrize("opt,flag", [("s", "-Os"), ("z", "-Oz")])
@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])
def test_size_optimisation_for_an_sm_target_is_refused_by_name(opt, flag, compiler):
    with pytest.raises(ValueError) as e:
        hipjit.compile(SAXPY, "sm_90", opt=opt, compiler=compiler)
    assert str(e.value) == (
        f"opt: opt_level {flag} applies to AMDGPU code objects only, not to the SM target sm_90")
    assert not isinstance(e.value, hipjit.CompileError)


def test_compiler_choice_per_call_and_its_reason():
    # hipRTC 5.2.3 lives inside Debian's libamdhip64.so.5; the process's runtime here is the
    # fixture, so hipRTC is named explicitly.
    r = run_python(
        "import hipjit\n"
        "src = open(%r).read()\n"
        "a = hipjit.compile(src, 'gfx90a', compiler='hiprtc')\n"
        "b = hipjit.compile(src, 'gfx90a', compiler='hipcc')\n"
        "c = hipjit.compile(src, 'sm_90', compiler='nvrtc')\n"
        "for x in (a, b, c):\n"
        "    print(x.compiler.split()[0], [k.name for k in x.kernels], x.compiler_reason != '')\n"
        "print(a.key != b.key, hipjit.get_jit().compiler)\n"
        % str(Path(__file__).resolve().parents[2] / "examples" / "kernels" / "saxpy.hip"),
        env={"HIPJIT_HIPRTC_LIBRARY": "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "hiprtc ['saxpy'] True",
        "hipcc ['saxpy'] True",
        "nvrtc ['saxpy'] True",
        "True auto",
    ]
    with pytest.raises(ValueError, match=r'compiler: "icc" is not a compiler choice'):
        hipjit.compile(SAXPY, "gfx90a", compiler="icc")


def test_a_flag_refused_under_hiprtc_names_hiprtc():
    with pytest.raises(ValueError) as e:
        hipjit.compile(SAXPY, "gfx90a", flags=["-o", "x"], compiler="hiprtc")
    assert 'flags: compiler flag "-o" is not accepted for hipRTC' in str(e.value)
    assert "hipcc" not in str(e.value)
    assert not isinstance(e.value, hipjit.CompileError)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"flags": "-Wall"}, TypeError,
         r"flags: expected a list of str, one flag per item, got the str '-Wall': wrap it in a list \(\['-Wall'\]\)"),
        ({"flags": ["-Wall", 3]}, TypeError, r"flags\[1\]: expected a str \(one compiler flag\), got int"),
        ({"flags": 5}, TypeError, r"flags: expected a list of str, one flag per item, got int"),
        ({"std": 17}, TypeError, r"std: expected a C\+\+ standard \(\"c\+\+17\", \"c\+\+20\"...\), got int"),
        ({"compiler": 1}, TypeError, r'compiler: expected "auto", "hipcc", "hiprtc", "nvcc" or "nvrtc", got int'),
        ({"fast_math": 1}, TypeError, r"fast_math: expected True or False, got int"),
    ],
)
def test_keyword_types_are_checked_by_hipjit_naming_the_keyword(kwargs, error, message):
    with pytest.raises(error, match=message):
        hipjit.compile(SAXPY, "gfx90a", **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"cache_dir": ""}, ValueError, r"cache_dir: an empty path names no directory"),
        ({"cache_dir": ["/tmp", ""]}, ValueError, r"cache_dir\[1\]: an empty path names no directory"),
        ({"max_cache_bytes": -1}, ValueError, r"max_cache_bytes: -1 is out of range: expected bytes from 0 to"),
        ({"max_cache_bytes": "1G"}, TypeError, r"max_cache_bytes: expected an int \(bytes, 0 to \d+\), got str"),
        ({"extra_signature": 5}, TypeError, r"extra_signature: expected bytes, a bytearray or a str, got int"),
        ({"compiler": 5}, TypeError, r"compiler: expected"),
    ],
)
def test_jit_arguments_are_checked_naming_the_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        hipjit.Jit(**kwargs)


def test_ctrl_c_interrupts_a_hipcc_compile_kills_it_and_leaves_nothing(tmp):
    """SIGINT while hipcc compiles: KeyboardInterrupt comes before the compile would have
    ended, the compiler is killed, its build directory removed and nothing is published."""
    private_tmp = tmp / "tmpdir"
    private_tmp.mkdir()
    cache = tmp / "cache"
    code = r"""
import glob, os, signal, sys, threading, time
import hipjit

SRC = open(os.environ["SRC_FILE"]).read()
tmpdir = os.environ["TMPDIR"]
fired = []
# A process started with SIGINT ignored (a background job of a non-interactive shell, as a CI
# runner may start the suite) gets no KeyboardInterrupt from Python: install its handler.
signal.signal(signal.SIGINT, signal.default_int_handler)

def descendants(pid):
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open("/proc/%s/stat" % d).read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            parent[int(d)] = (int(fields[1]), fields[0], stat.split("(", 1)[1].rsplit(")", 1)[0])
    out, frontier = [], [pid]
    while frontier:
        q = frontier.pop()
        for p, (pp, state, comm) in parent.items():
            if pp == q and p not in [o[0] for o in out]:
                out.append((p, state, comm))
                frontier.append(p)
    return out

def fire():
    # Once the compile's build directory exists, wait for clang to run (at most 1 s: on a
    # busy machine a scan of /proc can miss it), then interrupt.
    while not os.listdir(tmpdir):
        time.sleep(0.005)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if any("clang" in c for _, _, c in descendants(os.getpid())):
            break
        time.sleep(0.005)
    fired.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=fire, daemon=True).start()
jit = hipjit.Jit(compiler="hipcc")
try:
    jit.compile(SRC, "gfx90a", defines={"CTRL_C": 1})
    print("COMPLETED")
except KeyboardInterrupt:
    print("INTERRUPTED after %.3f s" % (time.monotonic() - fired[0]))
print("RUNNING", [d for d in descendants(os.getpid()) if d[1] != "Z"])
print("LEFT", sorted(os.listdir(tmpdir)))
"""
    src_file = tmp / "saxpy.hip"
    src_file.write_text(SAXPY)
    r = run_python(code, env={"TMPDIR": str(private_tmp), "HIPJIT_CACHE_DIR": str(cache),
                              "SRC_FILE": str(src_file)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("INTERRUPTED after "), r.stdout + r.stderr
    print(lines[0])
    assert lines[1] == "RUNNING []", r.stdout
    assert lines[2] == "LEFT []", r.stdout
    published = [p for p in cache.rglob("*.hjc")]
    assert published == [], published
