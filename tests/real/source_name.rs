//! The source's file name keys hipcc's and hipRTC's results (`common::source_name`), with this
//! machine's AMD compilers; NVIDIA: tests/it/source_name.rs.

use hipjit::compiler::{CompileOptions, CompilerConfig, CompilerKind};
use hipjit::target_id::TargetId;

use crate::common::source_name::check;
use crate::common::toolchain::identity_home;

fn config() -> CompilerConfig {
    CompilerConfig {
        identity_dir: Some(identity_home().join("identity")),
        ..CompilerConfig::default()
    }
}

fn gfx90a() -> CompileOptions {
    CompileOptions::for_target(TargetId::parse("gfx90a").unwrap())
}

#[test]
fn hipcc_results_are_keyed_by_the_source_name() {
    check(CompilerKind::Hipcc, config, gfx90a(), true);
}

#[test]
fn hiprtc_results_are_keyed_by_the_source_name() {
    // comgr names every program alike (`common::source_name::check`).
    check(CompilerKind::HipRtc, config, gfx90a(), false);
}
