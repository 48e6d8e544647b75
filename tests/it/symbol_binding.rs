//! Binding entry points through `hipGetProcAddress` with the headers' HIP version, and the
//! sanity check of device properties, against fixture HIP runtimes (tests/fixtures/fake_hip.c,
//! fake_hip_proc_address.c, fake_hip_props.c) compiled here with `cc`: stand-ins for HIP 6.x
//! runtimes, which export both device-properties layouts (the unversioned
//! `hipGetDeviceProperties` keeps the 5.x one) and `hipGetProcAddress`, with a pretend gfx90a
//! device. The real HIP 6.4.3 runtime's binding is asserted in tests/real/runtime.rs.

use std::path::{Path, PathBuf};

use hipjit::runtime::{DevicePropertiesEntry, Runtime, SymbolBinding};

use crate::common::fixture_lib;

const SID_HIP: &str = "/var/cache/hipjit-ci/sid-root/usr/include/hip";

/// 100 * major + minor of the headers this test binary's hip-sys was built from (the version
/// a program built against them hands `hipGetProcAddress`).
fn header_version() -> i32 {
    (hipjit::sys::HIP_VERSION_MAJOR * 100 + hipjit::sys::HIP_VERSION_MINOR) as i32
}

/// A directory holding only `hip -> <sid root>/usr/include/hip` (the sid root's libc headers
/// need glibc 2.38).
fn sid_hip_view(dir: &Path) -> PathBuf {
    assert!(
        Path::new(SID_HIP).join("hip_runtime_api.h").exists(),
        "the sid root's HIP 6.4 headers are missing ({SID_HIP}): see ENVIRONMENT.md"
    );
    let inc = dir.join("include");
    std::fs::create_dir_all(&inc).unwrap();
    let link = inc.join("hip");
    if !link.exists() {
        std::os::unix::fs::symlink(SID_HIP, &link).unwrap();
    }
    inc
}

/// The HIP 6.x-shaped fixture (both layouts, `hipGetProcAddress`) built with `defines`.
fn both_layouts(name: &str, defines: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fixture-runtimes")
        .join(name);
    let inc = sid_hip_view(&dir);
    let flags: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = dir.join("libamdhip64.so");
    fixture_lib::hip_runtime_both_layouts(&out, &flags, None, &inc);
    out
}

fn load(path: &Path) -> Runtime {
    Runtime::load_from(path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

/// The entry point headers of `version` call for `hipGetDeviceProperties`.
fn entry_for(version: i32) -> DevicePropertiesEntry {
    if version >= 600 {
        DevicePropertiesEntry::R0600
    } else {
        DevicePropertiesEntry::R0000
    }
}

fn assert_fixture_gfx90a(rt: &Runtime) {
    let dev = rt.device(0).unwrap();
    let p = dev.properties();
    assert_eq!(p.name, "hipjit fixture device");
    assert_eq!(p.arch_name, "gfx90a:sramecc+:xnack-");
    assert_eq!(p.wavefront_size, 64);
    assert_eq!(p.compute_units, 104);
    assert_eq!(p.lds_per_block, 65536);
    assert_eq!(p.max_threads_per_block, 1024);
    assert_eq!(p.max_grid_dims, [2147483647, 65536, 65536]);
    assert_eq!(p.total_global_mem, 64 << 30);
    assert_eq!(p.l2_cache_bytes, 8388608);
}

#[test]
fn proc_address_binds_with_the_headers_version() {
    let path = both_layouts("proc-address", &[]);
    let rt = load(&path);
    let v = header_version();
    assert_eq!(
        rt.symbol_binding(),
        SymbolBinding::ProcAddress { hip_version: v }
    );
    let log = fixture_lib::log(&path);
    // The unversioned name with the headers' version, as the header's own call is bound.
    for name in [
        "hipGetDeviceProperties",
        "hipModuleLaunchKernel",
        "hipGetErrorName",
        "hipLibraryLoadData",
    ] {
        let line = format!("hipGetProcAddress {name} {v}");
        assert!(log.contains(&line), "no {line:?} in {log:?}");
    }
    assert!(
        !log.iter()
            .any(|l| l.starts_with("hipGetProcAddress hipGetDevicePropertiesR0600")),
        "{log:?}"
    );
    assert_eq!(rt.device_properties_entry(), entry_for(v));
    // The layout read is the one the entry point writes: every property right.
    assert_fixture_gfx90a(&rt);
}

#[test]
fn a_refusing_proc_address_falls_back_to_dlsym_after_one_call() {
    // A real runtime without a GPU (HIP 6.4.3) answers hipErrorNoDevice to every lookup.
    let path = both_layouts("proc-address-refuses", &["PROC_ADDRESS_REFUSES=100"]);
    let rt = load(&path);
    let v = header_version();
    assert_eq!(
        rt.symbol_binding(),
        SymbolBinding::DlsymAfterRefusal {
            hip_version: v,
            code: 100
        }
    );
    assert_eq!(
        rt.symbol_binding().to_string(),
        format!("dlsym (hipGetProcAddress with hipVersion {v} returned hipErrorNoDevice (100))")
    );
    let log = fixture_lib::log(&path);
    let asked: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("hipGetProcAddress "))
        .collect();
    assert_eq!(asked.len(), 1, "{log:?}");
    // dlsym of what the headers would call: the unversioned name keeps the 5.x layout.
    assert_eq!(rt.device_properties_entry(), entry_for(v));
    assert_fixture_gfx90a(&rt);
}

#[test]
fn a_runtime_without_proc_address_is_bound_by_dlsym() {
    // HIP 6.x headers turn fake_hip_props.c's definition into hipGetDevicePropertiesR0600
    // only: with 5.x headers the unversioned name is missing, and the 6.0 layout is read
    // through the entry point that writes it.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-runtimes/r0600-only");
    let inc = sid_hip_view(&dir);
    let out = dir.join("libamdhip64.so");
    fixture_lib::hip_runtime(&out, &["-I", inc.to_str().unwrap()]);
    let rt = load(&out);
    assert_eq!(rt.symbol_binding(), SymbolBinding::Dlsym);
    assert_eq!(rt.device_properties_entry(), DevicePropertiesEntry::R0600);
    assert_fixture_gfx90a(&rt);
}

#[test]
fn a_layout_skew_is_a_named_error_not_wrong_properties() {
    // hipGetProcAddress hands back the entry point of the other layout than the version
    // names: what hipjit reads is not what the runtime wrote.
    let path = both_layouts("proc-address-skew", &["PROC_ADDRESS_SKEW"]);
    let rt = load(&path);
    let e = rt.device(0).unwrap_err();
    assert!(e.is_device_properties_skew(), "{e}");
    assert_eq!(e.name(), "DevicePropertiesSkew");
    assert_eq!(e.call(), rt.device_properties_entry().symbol());
    assert!(
        e.message()
            .contains("the device properties fail the sanity check"),
        "{e}"
    );
}

#[test]
fn an_impossible_warp_size_is_refused() {
    let path = both_layouts("warp-size", &["WARP_SIZE=1760000"]);
    let rt = load(&path);
    let e = rt.device(0).unwrap_err();
    assert!(e.is_device_properties_skew(), "{e}");
    assert!(
        e.to_string()
            .contains("warpSize = 1760000 (expected 32 or 64)"),
        "{e}"
    );
}
