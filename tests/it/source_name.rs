//! The source's file name keys nvcc's and NVRTC's results (`common::source_name`); AMD:
//! tests/real/source_name.rs.

use hipjit::compiler::CompilerKind;

use crate::common::source_name::check;
use crate::in_memory_headers::{config, sm90};

#[test]
fn nvcc_results_are_keyed_by_the_source_name() {
    check(CompilerKind::Nvcc, config, sm90(), true);
}

#[test]
fn nvrtc_results_are_keyed_by_the_source_name() {
    check(CompilerKind::Nvrtc, config, sm90(), true);
}
