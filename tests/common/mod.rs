//! Setup shared by the integration tests (`mod common;` in each): stand-in compiler
//! installations and the `Jit` that uses one, the toolchains scripts/setup.sh installs. Each test binary uses some of it.
#![allow(dead_code)]

pub mod cli;
pub mod installation;
pub mod strace;
pub mod toolchain;
