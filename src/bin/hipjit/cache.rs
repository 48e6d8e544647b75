//! `hipjit cache` (arrives with the JIT).
use crate::output::CliError;
/// Arguments of `hipjit cache`.
#[derive(clap::Args, Debug)]
pub struct Args {}
/// Runs `hipjit cache`.
pub fn run(_a: &Args) -> Result<(), CliError> {
    Err(CliError::failed("not yet"))
}
