//! The process's effective user ID, which the ownership checks of the disk cache
//! (`disk`) and of the remembered compiler identities compare files against.
//!
//! Read with `geteuid(2)` once per process, at the first check, and kept: a hit makes several
//! such checks, and each `geteuid` is a system call. A process that changes its effective
//! user afterwards (`seteuid`, a daemon dropping privileges) is still judged as the first:
//! such a process should make its first `Jit` after the change.

use std::sync::OnceLock;

static EUID: OnceLock<u32> = OnceLock::new();

/// The effective user ID (`geteuid(2)`), read once per process.
pub(crate) fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    *EUID.get_or_init(|| unsafe { libc::geteuid() })
}
