//! In-memory headers with nvcc and NVRTC from PyPI (scripts/setup.sh installs them): nvcc
//! (written into its build directory), NVRTC (handed natively), NVRTC in a worker process.
//! AMD: tests/real/in_memory_headers.rs.

use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::cuda::target::SmTarget;

use crate::common::in_memory_headers::check;
use crate::common::toolchain::{identity_home, pypi_nvcc};

pub(crate) fn sm90() -> CompileOptions {
    CompileOptions::for_sm(SmTarget::new(90))
}

/// nvcc from PyPI and the identities remembered under the tests' home (also
/// tests/it/source_name.rs's).
pub(crate) fn config() -> CompilerConfig {
    CompilerConfig {
        nvcc: Some(pypi_nvcc()),
        identity_dir: Some(identity_home().join("identity")),
        ..CompilerConfig::default()
    }
}

#[test]
fn nvcc_finds_in_memory_headers_and_keys_them_by_contents() {
    check(CompilerKind::Nvcc, config, sm90());
}

#[test]
fn nvrtc_finds_in_memory_headers_and_keys_them_by_contents() {
    check(CompilerKind::Nvrtc, config, sm90());
}

#[cfg(feature = "cli")]
#[test]
fn an_nvrtc_worker_finds_in_memory_headers() {
    check(
        CompilerKind::Nvrtc,
        || CompilerConfig {
            rtc_worker: Some(hipjit::compiler::WorkerConfig {
                program: Some(env!("CARGO_BIN_EXE_hipjit").into()),
                ..Default::default()
            }),
            ..config()
        },
        sm90(),
    );
}

/// A quoted `#include` of an in-memory header naming no in-memory header is never read from
/// the process's current directory, where NVRTC 13.5 looks it up first and nothing keys it
/// (`common::in_memory_headers::cwd_file_is_never_served_stale`).
#[test]
fn nvrtc_never_serves_code_from_an_unkeyed_file_beside_an_in_memory_header() {
    crate::common::in_memory_headers::cwd_file_is_never_served_stale(
        CompilerKind::Nvrtc,
        config(),
        sm90(),
    );
}
