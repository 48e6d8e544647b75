//! The source's file name keys nvcc's and NVRTC's results (`common::source_name`); AMD:
//! tests/real/source_name.rs.

use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::cuda::target::SmTarget;

use crate::common::source_name::check;
use crate::common::toolchain::{identity_home, pypi_nvcc};

fn config() -> CompilerConfig {
    CompilerConfig {
        nvcc: Some(pypi_nvcc()),
        identity_dir: Some(identity_home().join("identity")),
        ..CompilerConfig::default()
    }
}

#[test]
fn nvcc_results_are_keyed_by_the_source_name() {
    check(
        CompilerKind::Nvcc,
        config,
        CompileOptions::for_sm(SmTarget::new(90)),
        true,
    );
}

#[test]
fn nvrtc_results_are_keyed_by_the_source_name() {
    check(
        CompilerKind::Nvrtc,
        config,
        CompileOptions::for_sm(SmTarget::new(90)),
        true,
    );
}
