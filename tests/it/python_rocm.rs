//! ROCm 7 as AMD's TheRock wheels install it, with fixture libraries (no registry here offers
//! those wheels: ENVIRONMENT.md): a virtual environment whose
//! `site-packages/_rocm_sdk_core/lib` holds a runtime and a hipRTC under TheRock's names only
//! (`libamdhip64.so.7`, `libhiprtc.so.7`, each with that soname, no unversioned link), and
//! whose `bin/hipcc` is TheRock's wrapper beside the real `_rocm_sdk_devel/bin/hipcc`. The
//! fixtures are tests/fixtures/fake_hip.c and fake_hiprtc.c built by `cc`
//! ([`crate::common::fixture_lib`]). tests/real/python_rocm.rs does the same with a real HIP 5.4
//! runtime.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hipjit::compiler::discovery::find_hipcc;
use hipjit::compiler::hiprtc::HipRtc;
use hipjit::runtime::Runtime;

use crate::common::{self, fixture_lib};

/// A virtual environment at `venv` with TheRock's layout: the fixture runtime as
/// `_rocm_sdk_core/lib/libamdhip64.so.7`, the fixture hipRTC as `libhiprtc.so.7` beside it
/// (sonames set to those names), `_rocm_sdk_devel/bin/hipcc` and the wrapper `bin/hipcc`.
/// Returns the `_rocm_sdk_core/lib` directory.
fn therock_venv(venv: &Path) -> PathBuf {
    let site = venv.join("lib/python3.12/site-packages");
    let lib = site.join("_rocm_sdk_core/lib");
    fixture_lib::hip_runtime(
        &lib.join("libamdhip64.so.7"),
        &["-Wl,-soname,libamdhip64.so.7"],
    );
    fixture_lib::cc_shared(
        &lib.join("libhiprtc.so.7"),
        &["-Wl,-soname,libhiprtc.so.7"],
        &[&common::fixture("fake_hiprtc.c")],
    );
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    let devel_bin = site.join("_rocm_sdk_devel/bin");
    std::fs::create_dir_all(&devel_bin).unwrap();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    for (file, text) in [
        (devel_bin.join("hipcc"), "#!/bin/sh\necho real\n"),
        (
            venv.join("bin/hipcc"),
            "#!/usr/bin/python3\nimport sys\nfrom rocm_sdk._cli import hipcc\nsys.exit(hipcc())\n",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    lib
}

#[test]
fn therock_7_runtime_and_hiprtc_are_found_by_their_versioned_sonames_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let lib = therock_venv(&venv);
    assert!(!lib.join("libamdhip64.so").exists() && !lib.join("libhiprtc.so").exists());
    // A child process: nothing loaded yet (a runtime already in the process comes first).
    let mut cmd = common::child_test(module_path!(), "child_finds_the_virtual_environments_rocm");
    for var in [
        "HIPJIT_HIP_LIBRARY",
        "HIPJIT_HIPRTC_LIBRARY",
        "HIPJIT_PYTHON",
        "HIP_PATH",
        "ROCM_PATH",
        "LD_LIBRARY_PATH",
    ] {
        cmd.env_remove(var);
    }
    let out = common::child_stdout(cmd.env("VIRTUAL_ENV", &venv).spawn().unwrap());
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name}= in the child's output:\n{out}"))
            .to_owned()
    };
    let origin = "Python package _rocm_sdk_core of VIRTUAL_ENV";
    assert_eq!(
        field("runtime"),
        lib.join("libamdhip64.so.7").display().to_string()
    );
    assert_eq!(field("runtime_found"), format!("lib/ under {origin}"));
    // The fixture's default hipRuntimeGetVersion.
    assert_eq!(field("runtime_version"), "7.2.53211");
    assert_eq!(
        field("hiprtc"),
        lib.join("libhiprtc.so.7").display().to_string()
    );
    assert_eq!(field("hiprtc_found"), origin);
    assert_eq!(
        field("hiprtc_beside"),
        lib.join("libhiprtc.so.7").display().to_string()
    );
    assert_eq!(field("hiprtc_beside_found"), "beside the HIP runtime");
}

/// Run by [`therock_7_runtime_and_hiprtc_are_found_by_their_versioned_sonames_alone`] with
/// `VIRTUAL_ENV` set: loads the runtime with no variable but `VIRTUAL_ENV` (no `PATH`, so no
/// system installation) and hipRTC with the process environment, and prints what was found.
#[test]
#[ignore = "run by therock_7_runtime_and_hiprtc_are_found_by_their_versioned_sonames_alone in a child process"]
fn child_finds_the_virtual_environments_rocm() {
    let venv = std::env::var_os("VIRTUAL_ENV").expect("VIRTUAL_ENV is set by the parent");
    let env = move |name: &str| (name == "VIRTUAL_ENV").then(|| venv.clone());
    let rt = Runtime::load_with_env(&env).unwrap();
    // libtest prints the test's name without a line break before its output.
    println!();
    println!("runtime={}", rt.path().display());
    println!("runtime_found={}", rt.found());
    println!("runtime_version={}", rt.version().unwrap());
    let rtc = HipRtc::open(None).unwrap();
    println!("hiprtc={}", rtc.path().display());
    println!("hiprtc_found={}", rtc.found());
    let beside = HipRtc::open(Some(rt.path())).unwrap();
    println!("hiprtc_beside={}", beside.path().display());
    println!("hiprtc_beside_found={}", beside.found());
}

#[test]
fn a_virtual_environments_hipcc_wrapper_is_resolved_to_the_real_compiler() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    therock_venv(&venv);
    let real = venv.join("lib/python3.12/site-packages/_rocm_sdk_devel/bin/hipcc");
    let opt = tmp.path().join("opt");
    // Activated (VIRTUAL_ENV and the environment's bin/ first on PATH), and only on PATH.
    let path = OsString::from(venv.join("bin"));
    let activated = {
        let (venv, path) = (venv.clone().into_os_string(), path.clone());
        move |name: &str| match name {
            "VIRTUAL_ENV" => Some(venv.clone()),
            "PATH" => Some(path.clone()),
            _ => None,
        }
    };
    let on_path = move |name: &str| (name == "PATH").then(|| path.clone());
    assert_eq!(find_hipcc(None, &activated, &opt).unwrap(), real);
    assert_eq!(find_hipcc(None, &on_path, &opt).unwrap(), real);
    // The installation roots agree: the devel package, not the environment.
    let roots = hipjit::sys::discovery::install_roots_in(&on_path, &opt);
    assert_eq!(
        roots[0].root,
        venv.join("lib/python3.12/site-packages/_rocm_sdk_devel"),
        "{roots:?}"
    );
}
