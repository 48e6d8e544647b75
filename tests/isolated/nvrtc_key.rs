//! NVRTC through a worker process gives the in-process result, key included. In a process of its
//! own: the header manifest of an NVRTC compile lists the toolkit headers opened while it ran by
//! any process (inotify; a superset, safe but another key), so the many tests of tests/it that
//! read the toolkit would change the key between the two compiles compared here.

use std::path::{Path, PathBuf};

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CompilerConfig};
use hipjit::cuda::target::SmTarget;
use hipjit::jit::{CacheLocation, Jit, JitOptions};

use crate::common::toolchain::{pypi_nvcc, SAXPY};

fn sm90() -> CompileOptions {
    CompileOptions::for_sm(SmTarget::new(90))
}

/// NVRTC with nvcc from PyPI, identities remembered under `home`, no cache.
fn jit(home: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Nvrtc),
        compiler_config: CompilerConfig {
            nvcc: Some(pypi_nvcc()),
            identity_dir: Some(home.join("identity")),
            ..CompilerConfig::default()
        },
        cache: CacheLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn nvrtc_through_a_worker_process_gives_the_in_process_result() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let in_process = jit(home)
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    let with_worker = |program: PathBuf| {
        Jit::new(JitOptions {
            compiler: Some(CompilerChoice::Nvrtc),
            compiler_config: CompilerConfig {
                nvcc: Some(pypi_nvcc()),
                identity_dir: Some(home.join("identity")),
                rtc_worker: Some(hipjit::compiler::worker::WorkerConfig {
                    program: Some(program),
                    ..Default::default()
                }),
                ..CompilerConfig::default()
            },
            cache: CacheLocation::Disabled,
            ..JitOptions::default()
        })
        .unwrap()
    };
    let c = with_worker(PathBuf::from(env!("CARGO_BIN_EXE_hipjit")))
        .compile(SAXPY, &sm90())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.key(),
        in_process.key(),
        "the worker is no part of the key"
    );
    assert_eq!(
        c.cubin().unwrap().elf(),
        in_process.cubin().unwrap().elf(),
        "the worker's cubin differs"
    );
    let err = with_worker(PathBuf::from("/nonexistent/hipjit"))
        .compile(SAXPY, &sm90())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/hipjit"), "{err}");
}
