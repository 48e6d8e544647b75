//! Re-emits hip-sys's API probe as cfg flags of the hipjit crate.
//!
//! hip-sys (`links = "hipjit_hip_sys"`) publishes its probe as links metadata; cargo hands it
//! to this script as `DEP_HIPJIT_HIP_SYS_*`: `PROBED_CFGS` (every `hip_api_*` flag hip-sys
//! knows, declared here with `rustc-check-cfg`) and `CFGS` (those the header set of the build
//! declares, enabled here), so `#[cfg(hip_api_library_enumerate_kernels)]` means the same in
//! both crates. Cargo reruns this script whenever hip-sys's build script output changes.
//!
//! With feature `testing` it also builds the testing runtime (`hipjit::testing`): the C HIP
//! runtime `tests/fixtures/fake_hip.c` compiled with `HIPJIT_TESTING` into a shared library in
//! OUT_DIR, whose path reaches the crate as `HIPJIT_TESTING_RUNTIME` (it is embedded with
//! `include_bytes!`). The compiler is the one the `cc` crate finds; it runs without a shell.

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
    #[cfg(feature = "testing")]
    build_testing_runtime();
}

/// Compiles the testing runtime into `$OUT_DIR/hipjit-testing/libamdhip64.so`.
#[cfg(feature = "testing")]
fn build_testing_runtime() {
    use std::path::PathBuf;
    let src = "tests/fixtures/fake_hip.c";
    println!("cargo::rerun-if-changed={src}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out_dir.join("hipjit-testing");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: hipjit: cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    let out = dir.join("libamdhip64.so");
    let compiler = cc::Build::new().get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args([
        "-shared",
        "-fPIC",
        "-O1",
        "-fvisibility=hidden",
        "-DHIPJIT_TESTING",
    ])
    .arg("-o")
    .arg(&out)
    .arg(src);
    match cmd.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "error: hipjit: compiling the testing runtime failed ({:?}, {}):\n{}",
                cmd,
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!(
                "error: hipjit: cannot run the C compiler {:?} for the testing runtime: {e} \
                 (feature `testing` needs a C compiler: set CC or install gcc)",
                compiler.path()
            );
            std::process::exit(1);
        }
    }
    println!("cargo::rustc-env=HIPJIT_TESTING_RUNTIME={}", out.display());
}
