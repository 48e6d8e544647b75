//! Re-emits hip-sys's API probe as cfg flags of the hipjit crate.
//!
//! hip-sys (`links = "hipjit_hip_sys"`) publishes its probe as links metadata; cargo hands it
//! to this script as `DEP_HIPJIT_HIP_SYS_*`: `PROBED_CFGS` (every `hip_api_*` flag hip-sys
//! knows, declared here with `rustc-check-cfg`) and `CFGS` (those the header set of the build
//! declares, enabled here), so `#[cfg(hip_api_library_enumerate_kernels)]` means the same in
//! both crates. Cargo reruns this script whenever hip-sys's build script output changes.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let list = |key: &str| -> Vec<String> {
        std::env::var(format!("DEP_HIPJIT_HIP_SYS_{key}"))
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let probed = list("PROBED_CFGS");
    if probed.is_empty() {
        // hip-sys always publishes its probe; without it no cfg could be trusted.
        eprintln!("error: hipjit: DEP_HIPJIT_HIP_SYS_PROBED_CFGS is missing: hip-sys's build script did not run");
        std::process::exit(1);
    }
    for cfg in &probed {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }
    for cfg in list("CFGS") {
        if probed.contains(&cfg) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
