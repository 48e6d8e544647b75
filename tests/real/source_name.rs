//! The source's file name keys hipcc's and hipRTC's results (`common::source_name`), with this
//! machine's AMD compilers; NVIDIA: tests/it/source_name.rs.

use hipjit::compiler::CompilerKind;

use crate::common::source_name::check;
use crate::in_memory_headers::{config, gfx90a};

#[test]
fn hipcc_results_are_keyed_by_the_source_name() {
    check(CompilerKind::Hipcc, config, gfx90a(), true);
}

#[test]
fn hiprtc_results_are_keyed_by_the_source_name() {
    // comgr names every program alike (`common::source_name::check`).
    check(CompilerKind::HipRtc, config, gfx90a(), false);
}
