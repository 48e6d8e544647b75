//! The `hipjit` command as the tests run it.

use std::path::Path;
use std::process::{Command, Output};

/// `hipjit <args>` with its cache root `home/cache` and per-user directory `home/xdg`
/// (`HIPJIT_CACHE_DIR`, `XDG_CACHE_HOME`) and no `HIPJIT_COMPILER` or `HIPJIT_CACHE_MAX_SIZE`
/// from the test's own environment; the caller adds the rest.
pub fn hipjit(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(args)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env_remove("HIPJIT_COMPILER")
        .env_remove("HIPJIT_CACHE_MAX_SIZE");
    cmd
}

/// `hipjit compile --compiler <compiler> --arch <arch> -o <out> <flags...> <source>`, as
/// [`hipjit`] sets it up.
pub fn compile(
    home: &Path,
    compiler: &str,
    arch: &str,
    out: &Path,
    flags: &[String],
    source: &Path,
) -> Command {
    let mut cmd = hipjit(
        home,
        &["compile", "--compiler", compiler, "--arch", arch, "-o"],
    );
    cmd.arg(out).args(flags).arg(source);
    cmd
}

/// The exit status's success, stdout and stderr of a finished command.
pub fn outcome(o: &Output) -> (bool, String, String) {
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
