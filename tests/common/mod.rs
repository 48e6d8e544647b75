//! Setup shared by the integration tests (`mod common;` in each): stand-in compiler
//! installations and the `Jit` that uses one, the toolchains scripts/setup.sh installs. Each test binary uses some of it.
#![allow(dead_code)]

pub mod cli;
pub mod installation;
pub mod strace;
pub mod toolchain;

/// The name libtest runs the test `name` of the module `module` under (pass `module_path!()`):
/// the module's path without the crate's name, then `name`; for `--exact` when a test runs
/// another test of its binary in a child process.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}
