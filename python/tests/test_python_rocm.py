"""ROCm held by the interpreter's own packages, as AMD's TheRock wheels install ROCm 7.

A virtual environment made here (never activated: VIRTUAL_ENV unset) holds
`site-packages/_rocm_sdk_core/lib/libamdhip64.so.7`: the fixture HIP runtime
(tests/fixtures/fake_hip.c) built with that soname and no unversioned link, standing in for
TheRock's runtime, which no registry here offers. It sees this session's hipjit through a
`.pth` file. Its interpreter's `hipjit.runtime_info()` finds that runtime with no variable set:
the package takes `sys.prefix` as the environment whose packages are searched.
"""

import json
import os
import subprocess
import sys

from conftest import FIXTURES


def test_the_runtime_in_the_interpreters_rocm_sdk_core_is_found_with_no_variable(tmp):
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    lib = site / "_rocm_sdk_core" / "lib"
    lib.mkdir(parents=True)
    runtime = lib / "libamdhip64.so.7"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-fvisibility=hidden", "-O1", "-Wall",
         "-D__HIP_PLATFORM_AMD__", "-Wl,-soname,libamdhip64.so.7", "-o", str(runtime),
         str(FIXTURES / "fake_hip.c"), str(FIXTURES / "fake_hip_props.c")],
        check=True,
    )
    assert not (lib / "libamdhip64.so").exists()
    # This session's hipjit (and its dependencies) seen from the new environment.
    parents = [p for p in sys.path if p.endswith("site-packages")]
    (site / "session.pth").write_text("\n".join(parents) + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HIPJIT_HIP_LIBRARY", "VIRTUAL_ENV", "HIPJIT_PYTHON", "HIP_PATH",
                        "ROCM_PATH", "LD_LIBRARY_PATH")}
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import hipjit, json; print(json.dumps(dict(hipjit.runtime_info())))"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["path"] == str(runtime), info
    assert info["found"] == "lib/ under Python package _rocm_sdk_core of VIRTUAL_ENV", info
    # The fixture's default hipRuntimeGetVersion (70253211).
    assert info["version"] == "7.2.53211", info
