"""Importing hipjit: nothing compiled or loaded, the API and exception classes in place."""

from conftest import run_python


def test_import_loads_no_runtime_and_starts_no_compiler():
    r = run_python(
        "import os, sys, hipjit\n"
        "maps = open('/proc/self/maps').read()\n"
        "print('hip' if 'libamdhip64' in maps else '-', 'cuda' if 'libcuda' in maps else '-')\n"
        "print('children', len(os.listdir('/proc/self/task')))\n"
    )
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "- -"
    # One thread: no compiler or runtime worker was started.
    assert second == "children 1"


def test_runtime_opens_on_first_use_and_prefers_hipjit_hip_library():
    r = run_python(
        "import hipjit\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libamdhip64' not in maps\n"
        "info = hipjit.runtime_info()\n"
        "print(info['platform'], info['found'], info['device_count'])\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "amd HIPJIT_HIP_LIBRARY 1"


def test_runtime_already_loaded_in_the_process_is_the_one_opened():
    # A framework that loaded its HIP runtime first (torch on ROCm ships its own): hipjit takes
    # that copy, not the one its search would find.
    r = run_python(
        "import ctypes, os, hipjit\n"
        "lib = os.environ.pop('HIPJIT_HIP_LIBRARY')\n"
        "ctypes.CDLL(lib)\n"
        "info = hipjit.runtime_info()\n"
        "print(info['found'], info['path'] == lib)\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "already loaded in the process True"


def test_exception_hierarchy():
    import hipjit

    assert issubclass(hipjit.HipjitError, Exception)
    for e in (hipjit.CompileError, hipjit.LoadError, hipjit.LaunchError):
        assert issubclass(e, hipjit.HipjitError)
    assert hipjit.CompileError.__module__ == "hipjit"


def test_public_names_have_docstrings():
    import hipjit

    for name in ("compile", "inspect", "get_jit", "runtime_info", "Jit", "Kernel", "Compiled",
                 "PendingCompile", "SwitchingKernel"):
        doc = getattr(hipjit, name).__doc__
        assert doc and len(doc) > 40, name
    assert hipjit.__version__ == "0.1.0"


def test_stubs_declare_every_public_name_with_the_same_keywords():
    import ast
    import inspect
    from pathlib import Path

    import hipjit

    stub = ast.parse((Path(hipjit.__file__).parent / "__init__.pyi").read_text())
    declared = {n.name: n for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for name in hipjit.__all__:
        if name != "__version__":
            assert name in declared, name
    for name in ("compile", "inspect"):
        stub_params = [a.arg for a in declared[name].args.args + declared[name].args.kwonlyargs]
        assert stub_params == list(inspect.signature(getattr(hipjit, name)).parameters), name
    methods = {f.name: f for f in declared["Jit"].body if isinstance(f, ast.FunctionDef)}
    for name in ("compile", "kernel", "compile_in_background", "switching_kernel"):
        f = methods[name]
        stub_params = [a.arg for a in f.args.args + f.args.kwonlyargs][1:]
        assert stub_params == list(inspect.signature(getattr(hipjit.Jit, name)).parameters)[1:], name
