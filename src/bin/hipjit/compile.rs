//! `hipjit compile` (arrives with the JIT).
use crate::output::CliError;
/// Arguments of `hipjit compile`.
#[derive(clap::Args, Debug)]
pub struct Args {}
/// Runs `hipjit compile`.
pub fn run(_a: &Args) -> Result<(), CliError> {
    Err(CliError::failed("not yet"))
}
