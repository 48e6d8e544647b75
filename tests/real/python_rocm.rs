//! ROCm as Python packages hold it, with a real runtime: the HIP 5.4.22803 runtime of PyPI's
//! pytorch-triton-rocm 2.1.0 (hipRTC inside it, hsa-runtime, comgr; unpacked by
//! scripts/setup.sh at `$HIPJIT_CI_CACHE/rocm-5.4-triton`), laid out in a temporary virtual
//! environment as AMD's TheRock wheels lay out ROCm 7 (`site-packages/_rocm_sdk_core/lib`, the
//! runtime under its versioned soname only) and as PyTorch's ROCm wheels do (`torch/lib`), and
//! found by discovery alone: no `HIPJIT_HIP_LIBRARY`, `HIPJIT_HIPRTC_LIBRARY`, `HIP_PATH` or
//! `ROCM_PATH`, with Debian's HIP 5.2.3 installed on `PATH` and in the dynamic loader's cache
//! (the Python environment comes before both).
//!
//! The wheel's runtime names its dependencies by their unversioned names (`libhsa-runtime64.so`,
//! `libamd_comgr.so`, ...) with `RUNPATH $ORIGIN`, so they keep those names here; the runtime
//! itself is `libamdhip64.so.5` (TheRock's layout: no `libamdhip64.so` link) or `libamdhip64.so`
//! (PyTorch's). No device: the runtime loads, reports its version and `hipErrorNoDevice`.
//! Under Auto, Debian's hipcc compiles (the wheel's hipRTC 5.4 has no parity row).
//! Inside the sid root (scripts/sid-test.sh) glibc refuses to load it (it asks for an
//! executable stack), which the tests assert there instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::cli;
use crate::common::toolchain;

/// The wheel's files the runtime loads, and the name each gets beside it: the runtime's name is
/// the layout's; comgr also under its soname, which hipjit opens to ask its processors.
const DEPENDENCIES: &[(&str, &str)] = &[
    ("libhsa-runtime64.so", "libhsa-runtime64.so"),
    ("libamd_comgr.so", "libamd_comgr.so"),
    ("libamd_comgr.so", "libamd_comgr.so.2"),
    ("libnuma.so", "libnuma.so"),
    ("libelf.so", "libelf.so"),
    ("libdrm.so", "libdrm.so"),
    ("libdrm_amdgpu.so", "libdrm_amdgpu.so"),
    ("libtinfo.so", "libtinfo.so"),
];

/// A virtual environment under `home` (`pyvenv.cfg`, `lib/python3.11/site-packages`) whose
/// `package_lib` (below site-packages) holds the wheel's runtime as `runtime_name` and its
/// dependencies; returns the environment and the runtime's path there. Hard links (the cache
/// and the temporary directory share a filesystem here), else copies.
fn environment(home: &Path, package_lib: &str, runtime_name: &str) -> (PathBuf, PathBuf) {
    let rocm = toolchain::rocm_5_4();
    let venv = home.join("venv");
    let lib = venv.join("lib/python3.11/site-packages").join(package_lib);
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    let place = |from: &str, to: &str| {
        let (from, to) = (rocm.join("lib").join(from), lib.join(to));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    };
    place("libamdhip64.so", runtime_name);
    for (from, to) in DEPENDENCIES {
        place(from, to);
    }
    (venv, lib.join(runtime_name))
}

/// `hipjit <args>` ([`cli::hipjit`]) with `VIRTUAL_ENV=venv`, `PATH=/usr/bin:/bin` (Debian's
/// hipcc and hipconfig) and none of the variables that name a runtime, hipRTC or a root.
fn in_venv(home: &Path, venv: &Path, args: &[&str]) -> Command {
    let mut cmd = cli::hipjit(home, args);
    cmd.env("VIRTUAL_ENV", venv).env("PATH", "/usr/bin:/bin");
    for var in [
        "HIPJIT_HIP_LIBRARY",
        "HIPJIT_HIPRTC_LIBRARY",
        "HIPJIT_PYTHON",
        "HIP_PATH",
        "ROCM_PATH",
        "LD_LIBRARY_PATH",
        "HIP_PLATFORM",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// `hipjit doctor --json` in the environment, parsed.
fn doctor(home: &Path, venv: &Path) -> serde_json::Value {
    let o = in_venv(home, venv, &["doctor", "--json"]).output().unwrap();
    let (_, stdout, stderr) = cli::outcome(&o);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("doctor's JSON does not parse ({e}):\n{stdout}\n{stderr}"))
}

/// Asserts that doctor found the wheel's runtime at `runtime` by discovery (from the Python
/// package `package`) and hipRTC 5.4 in it, with the wheel's comgr.
fn assert_doctor_finds(report: &serde_json::Value, runtime: &Path, package: &str) {
    let in_use = &report["runtime_in_use"];
    let origin = format!("lib/ under Python package {package} of VIRTUAL_ENV");
    assert_eq!(in_use["path"], toolchain::utf8(runtime), "{in_use:#}");
    assert_eq!(in_use["found"], origin.as_str(), "{in_use:#}");
    assert_eq!(in_use["version"], "5.4.22803", "{in_use:#}");
    assert_eq!(in_use["version_code"], 50422803, "{in_use:#}");
    assert_eq!(
        in_use["device_error_name"], "hipErrorNoDevice",
        "{in_use:#}"
    );
    let listed = report["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == toolchain::utf8(runtime))
        .unwrap_or_else(|| panic!("{runtime:?} is not listed: {:#}", report["runtimes"]));
    assert_eq!(listed["soname"], "libamdhip64.so.5", "{listed:#}");
    assert_eq!(listed["version"], "5.4.22803", "{listed:#}");
    assert_eq!(listed["origin"], origin.as_str(), "{listed:#}");
    let hiprtc = &report["in_process"]["hiprtc"];
    assert_eq!(hiprtc["path"], toolchain::utf8(runtime), "{hiprtc:#}");
    assert_eq!(hiprtc["origin"], "beside the HIP runtime", "{hiprtc:#}");
    assert_eq!(hiprtc["major"], 5, "{hiprtc:#}");
    // The minor version, from the runtime's hipRuntimeGetVersion (the file's name has none):
    // Auto's parity table is keyed by it.
    assert_eq!(hiprtc["minor"], 4, "{hiprtc:#}");
    // The comgr the runtime loads (by its unversioned NEEDED name, with RUNPATH $ORIGIN).
    let lib = runtime.parent().unwrap();
    assert_eq!(
        hiprtc["comgr"],
        toolchain::utf8(&lib.join("libamd_comgr.so")),
        "{hiprtc:#}"
    );
    let parts = &report["python"]["parts"];
    assert_eq!(parts["runtime"]["from"], package, "{parts:#}");
    assert_eq!(parts["hiprtc"]["from"], package, "{parts:#}");
    assert_eq!(parts["comgr"]["from"], package, "{parts:#}");
}

/// `hipjit compile --compiler hiprtc --arch gfx90a --json saxpy.hip` in the environment: it
/// compiles through the wheel's hipRTC 5.4 (at `library`) into a gfx90a code object.
fn assert_compiles_through(home: &Path, venv: &Path, library: &Path) {
    let out = home.join("saxpy.hsaco");
    let saxpy = toolchain::saxpy();
    let o = in_venv(
        home,
        venv,
        &[
            "compile",
            "--compiler",
            "hiprtc",
            "--arch",
            "gfx90a",
            "--json",
            "-o",
            toolchain::utf8(&out),
            toolchain::utf8(&saxpy),
        ],
    )
    .output()
    .unwrap();
    let (ok, stdout, stderr) = cli::outcome(&o);
    assert!(ok, "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let compiler = &report["compiler"];
    assert_eq!(compiler["kind"], "hiprtc", "{compiler:#}");
    assert_eq!(compiler["path"], toolchain::utf8(library), "{compiler:#}");
    assert!(
        compiler["version"].as_str().unwrap().contains("9.0"),
        "hipRTC 5.4 reports hiprtcVersion 9.0: {compiler:#}"
    );
    let bytes = std::fs::read(&out).unwrap();
    let co = hipjit::code_object::CodeObject::from_bytes(
        &bytes,
        Some(&hipjit::target_id::TargetId::parse("gfx90a").unwrap()),
    )
    .unwrap();
    assert!(
        co.kernels().iter().any(|k| k.name == "saxpy"),
        "{:?}",
        co.kernels()
    );
}

/// `hipjit compile --arch gfx90a --json saxpy.hip` under Auto in the environment: the wheel's
/// hipRTC 5.4 has no parity row (measured: its code for gfx90a at -O3 differs from Debian's
/// hipcc 5.2.3's in every file of the parity corpus; docs/compilers.md), so Debian's hipcc
/// compiles, and the reason names the version.
fn assert_auto_takes_hipcc(home: &Path, venv: &Path) {
    let out = home.join("auto.hsaco");
    let saxpy = toolchain::saxpy();
    let o = in_venv(
        home,
        venv,
        &[
            "compile",
            "--arch",
            "gfx90a",
            "--json",
            "-o",
            toolchain::utf8(&out),
            toolchain::utf8(&saxpy),
        ],
    )
    .output()
    .unwrap();
    let (ok, stdout, stderr) = cli::outcome(&o);
    assert!(ok, "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let compiler = &report["compiler"];
    assert_eq!(compiler["kind"], "hipcc", "{compiler:#}");
    assert_eq!(
        compiler["reason"], "hipcc: parity of hipRTC 5.4 with hipcc is untested for gfx90a",
        "{compiler:#}"
    );
}

/// In the sid root (glibc 2.41+, whose `dlopen` refuses a library that asks for an
/// executable stack, as the wheel's HIP 5.4 runtime does): doctor lists the package's runtime
/// with the loader's refusal, and the runtime in use is the system's, the next in the order.
fn assert_refused_by_the_loader(report: &serde_json::Value, runtime: &Path, package: &str) {
    let listed = report["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == toolchain::utf8(runtime))
        .unwrap_or_else(|| panic!("{runtime:?} is not listed: {:#}", report["runtimes"]));
    let origin = format!("lib/ under Python package {package} of VIRTUAL_ENV");
    assert_eq!(listed["origin"], origin.as_str(), "{listed:#}");
    assert!(
        listed["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot enable executable stack")),
        "{listed:#}"
    );
    let in_use = &report["runtime_in_use"];
    assert_eq!(in_use["version"], "6.4.43484", "{in_use:#}");
    assert_eq!(report["python"]["copies"][0]["package"], package);
    assert!(
        report["python"]["parts"]["runtime"]["from"].is_null(),
        "{report:#}"
    );
}

/// The wheel's runtime laid out below site-packages as `package_lib/runtime_name`: found by
/// doctor and compiling through its hipRTC on this host; refused by the sid root's loader.
fn check_layout(package_lib: &str, runtime_name: &str, package: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (venv, runtime) = environment(tmp.path(), package_lib, runtime_name);
    let report = doctor(tmp.path(), &venv);
    match toolchain::test_env() {
        toolchain::TestEnv::Bookworm => {
            assert_doctor_finds(&report, &runtime, package);
            assert_compiles_through(tmp.path(), &venv, &runtime);
            assert_auto_takes_hipcc(tmp.path(), &venv);
        }
        toolchain::TestEnv::Sid => assert_refused_by_the_loader(&report, &runtime, package),
    }
}

#[test]
fn therock_layout_holding_the_hip_5_4_runtime_is_found_with_no_variable_and_compiles() {
    // TheRock's layout: the runtime under its versioned soname only.
    check_layout("_rocm_sdk_core/lib", "libamdhip64.so.5", "_rocm_sdk_core");
}

#[test]
fn torch_lib_layout_holding_the_hip_5_4_runtime_is_found_with_no_variable_and_compiles() {
    check_layout("torch/lib", "libamdhip64.so", "torch");
}

#[test]
fn without_the_environment_the_system_runtime_is_used() {
    // The same layout, VIRTUAL_ENV unset: the system's runtime again (Debian's HIP 5.2.3, or
    // 6.4.3 in the sid root), so the tests above do not pass because the wheel's runtime is
    // found whatever the environment.
    let tmp = tempfile::tempdir().unwrap();
    let (venv, runtime) = environment(tmp.path(), "_rocm_sdk_core/lib", "libamdhip64.so.5");
    let o = in_venv(tmp.path(), &venv, &["doctor", "--json"])
        .env_remove("VIRTUAL_ENV")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let in_use = &report["runtime_in_use"];
    assert_ne!(in_use["path"], toolchain::utf8(&runtime), "{in_use:#}");
    let system = match toolchain::test_env() {
        toolchain::TestEnv::Bookworm => "5.2.",
        toolchain::TestEnv::Sid => "6.4.",
    };
    assert!(
        in_use["version"]
            .as_str()
            .is_some_and(|v| v.starts_with(system)),
        "{in_use:#}"
    );
    assert!(report["python"]["environment"].is_null(), "{report:#}");
}
