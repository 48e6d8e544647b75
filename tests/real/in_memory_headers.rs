//! In-memory headers with this machine's AMD compilers: hipcc (written into its build
//! directory), hipRTC (handed natively), hipRTC in a worker process. NVIDIA:
//! tests/it/in_memory_headers.rs.

use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::target_id::TargetId;

use crate::common::in_memory_headers::check;
use crate::common::toolchain::identity_home;

pub(crate) fn gfx90a() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

/// The environment's compilers, the identities remembered under the tests' home (also
/// tests/real/source_name.rs's).
pub(crate) fn config() -> CompilerConfig {
    CompilerConfig {
        identity_dir: Some(identity_home().join("identity")),
        ..CompilerConfig::default()
    }
}

#[test]
fn hipcc_finds_in_memory_headers_and_keys_them_by_contents() {
    check(CompilerKind::Hipcc, config, gfx90a());
}

#[test]
fn hiprtc_finds_in_memory_headers_and_keys_them_by_contents() {
    check(CompilerKind::HipRtc, config, gfx90a());
}

#[cfg(feature = "cli")]
#[test]
fn a_hiprtc_worker_finds_in_memory_headers() {
    check(
        CompilerKind::HipRtc,
        || CompilerConfig {
            rtc_worker: Some(hipjit::compiler::WorkerConfig {
                program: Some(env!("CARGO_BIN_EXE_hipjit").into()),
                ..Default::default()
            }),
            ..config()
        },
        gfx90a(),
    );
}

/// As tests/it/in_memory_headers.rs's NVRTC check: a quoted `#include` of an in-memory header
/// naming no in-memory header is never served stale from the current directory.
#[test]
fn hiprtc_never_serves_code_from_an_unkeyed_file_beside_an_in_memory_header() {
    crate::common::in_memory_headers::cwd_file_is_never_served_stale(
        CompilerKind::HipRtc,
        config(),
        gfx90a(),
    );
}
