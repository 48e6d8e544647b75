//! `hipjit doctor`.
use crate::output::CliError;
/// Arguments of `hipjit doctor`.
#[derive(clap::Args, Debug)]
pub struct Args {}
/// Arguments of the hidden `probe-runtime`.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {}
/// Runs `hipjit doctor`.
pub fn run(_a: &Args) -> Result<(), CliError> {
    Err(CliError::failed("not yet"))
}
/// Runs `hipjit probe-runtime`.
pub fn probe_runtime(_a: &ProbeArgs) -> Result<(), CliError> {
    Err(CliError::failed("not yet"))
}
