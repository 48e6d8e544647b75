//! Auto's memo: for each (source, options) that [`super::compilers`] weighs for an in-process
//! compiler, whether the process compiler must compile it instead (steps 4 and 5 of the rule,
//! `selection`), and the failures of the in-process compiler remembered per
//! user.
//!
//! In a process, each [`super::Jit`] keeps its decisions by the request's name (below), so
//! that the source is scanned once however often a request asks for its compiler (the
//! effective options, the check of the options and the key each ask); at most
//! [`MAX_DECISIONS`] are kept. A request the in-process compiler failed on is also written
//! to a file of its name under `auto/` beside the compiler identities
//! ([`crate::compiler::identity::identity_dir`]), mode 0600, read only when owned by the user
//! and writable by nobody else: a fresh process (the `hipjit compile` command) reads it before
//! it would try the in-process compiler, and takes the process compiler without a failed
//! attempt. That file is read on the way to a disk hit only when the hit memo
//! (`hit_memo`) did not serve it, and then once per request and process (a failed
//! `open` for most sources), and not at all by a memo that found no `auto/` when it first looked
//! (a user for whom nothing was ever remembered: one `stat` per [`super::Jit`]).
//!
//! The name is the XXH3-128 of the format, the in-process compiler's name and major.minor version,
//! the process compiler's name, the source and the options (without the code object version,
//! which the runtime's answer fills in, and the metadata checks, which compile nothing). A
//! collision of two names could only send a source to the process compiler, which compiles
//! every source the in-process compiler does: it costs time, never a result.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::compiler::selection::RtcVersion;
use crate::compiler::CompileOptions;

/// The memo file's format, part of each file's name and of its first bytes. 2: the name holds
/// the in-process compiler's minor version beside its major (a file of format 1 has a name no
/// request of format 2 looks for, and its bytes are not read as this format's).
const FORMAT: u32 = 2;

/// The first bytes of a memo file.
const MAGIC: &[u8; 4] = b"HJAF";

/// How many decisions a [`super::Jit`] keeps in memory: past it, they are all forgotten (and
/// made again, each from a scan and a failed `open`).
pub const MAX_DECISIONS: usize = 4096;

/// The name of one request's decision.
pub(crate) type Name = u128;

/// Auto's decisions of one [`super::Jit`].
#[derive(Debug, Default)]
pub(crate) struct AutoMemo {
    /// Where failures are remembered per user (`auto/` in it); `None` without a per-user
    /// directory.
    dir: Option<PathBuf>,
    /// The reason to take the process compiler, or `None` to take the in-process one.
    decisions: Mutex<HashMap<Name, Option<String>>>,
    /// Whether `auto/` was there when first looked for: where it was not (no failure ever
    /// remembered for this user), no request of this memo looks for its file.
    any_remembered: std::sync::OnceLock<bool>,
}

impl AutoMemo {
    /// A memo whose failures live under `dir` (the per-user directory of the compiler
    /// identities), if any.
    pub(crate) fn new(dir: Option<PathBuf>) -> AutoMemo {
        AutoMemo {
            dir,
            decisions: Mutex::default(),
            any_remembered: std::sync::OnceLock::new(),
        }
    }

    /// The name of a request: `compilers` names the in-process compiler, its version and the
    /// process compiler.
    pub(crate) fn name(
        compilers: (&str, RtcVersion, &str),
        source: &[u8],
        options: &CompileOptions,
    ) -> Name {
        let mut o = options.clone();
        o.code_object_version = None;
        o.checks = Default::default();
        let options = rmp_serde::to_vec(&o).unwrap_or_default();
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let (rtc, version, process) = compilers;
        // The minor version: `u32::MAX` when not known (no version says it).
        let minor = version.minor.unwrap_or(u32::MAX);
        for part in [
            &FORMAT.to_le_bytes()[..],
            rtc.as_bytes(),
            &version.major.to_le_bytes(),
            &minor.to_le_bytes(),
            process.as_bytes(),
            source,
            &options,
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.digest128()
    }

    /// The decision for `name` unless made before in this process: the reason `scanned`
    /// gives (what the source needs, step 4), else the reason `remembered` makes of the
    /// in-process compiler's error remembered per user (step 5), else `None` (the in-process
    /// compiler). The per-user file is read only when `scanned` gives nothing.
    pub(crate) fn decision(
        &self,
        name: Name,
        scanned: impl FnOnce() -> Option<String>,
        remembered: impl FnOnce(String) -> String,
    ) -> Option<String> {
        if let Some(d) = self.decisions.lock().get(&name) {
            return d.clone();
        }
        let d = scanned().or_else(|| {
            let dir = self.dir.as_deref()?;
            let any = *self
                .any_remembered
                .get_or_init(|| crate::fs::observe::is_dir(&dir.join("auto")));
            any.then(|| recall(dir, name)).flatten().map(remembered)
        });
        self.keep(name, d.clone());
        d
    }

    /// Records that the in-process compiler failed on `name`: in this process the process
    /// compiler is taken for it, with `reason`; when `error` is given (a failure of the source,
    /// not of the machine), it is remembered per user too.
    pub(crate) fn failed(&self, name: Name, reason: String, error: Option<&str>) {
        self.keep(name, Some(reason));
        if let (Some(dir), Some(error)) = (&self.dir, error) {
            remember(dir, name, error);
        }
    }

    fn keep(&self, name: Name, decision: Option<String>) {
        let mut decisions = self.decisions.lock();
        if decisions.len() >= MAX_DECISIONS {
            decisions.clear();
        }
        decisions.insert(name, decision);
    }
}

fn memo_file(dir: &Path, name: Name) -> PathBuf {
    dir.join("auto").join(format!("{name:032x}.fail"))
}

/// The error remembered for `name` in `dir`, if any: [`MAGIC`], [`FORMAT`] (`u32`, little
/// endian), the name (16 bytes, little endian), then the error's text.
fn recall(dir: &Path, name: Name) -> Option<String> {
    let bytes = crate::compiler::identity::read_private(&memo_file(dir, name))?;
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let rest = rest.strip_prefix(FORMAT.to_le_bytes().as_slice())?;
    let rest = rest.strip_prefix(name.to_le_bytes().as_slice())?;
    Some(String::from_utf8_lossy(rest).into_owned())
}

fn remember(dir: &Path, name: Name, error: &str) {
    let mut b = Vec::with_capacity(24 + error.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&FORMAT.to_le_bytes());
    b.extend_from_slice(&name.to_le_bytes());
    b.extend_from_slice(error.as_bytes());
    let file = memo_file(dir, name);
    crate::compiler::identity::write_private_bytes(&file, &b, false);
    if let Some(failures) = file.parent() {
        prune(failures, MAX_FAILURES);
    }
}

/// How many failures are remembered per user: past it, the oldest quarter (by modification
/// time) is removed, and a request whose failure was removed tries the in-process compiler
/// once more. Each is a few hundred bytes, one per (source, options) the in-process compiler
/// failed on.
pub const MAX_FAILURES: usize = 4096;

/// Removes the oldest failures of `failures` down to three quarters of `max` when there are
/// more than `max`; errors are ignored (another process may prune at once). Runs at each
/// failure remembered, after a failed compile: a directory listing is nothing beside it.
fn prune(failures: &Path, max: usize) {
    let Ok(rd) = std::fs::read_dir(failures) else {
        return;
    };
    let files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "fail"))
        .collect();
    if files.len() <= max {
        return;
    }
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let t = std::fs::symlink_metadata(&p)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            (t, p)
        })
        .collect();
    files.sort();
    for (_, p) in &files[..files.len() - max * 3 / 4] {
        let _ = std::fs::remove_file(p);
    }
}

/// The file in which the failure of the in-process compiler on a request is remembered under
/// `dir` (the per-user directory), for tests that look at it.
#[doc(hidden)]
pub fn remembered_failures(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("auto"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "fail"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::amdgpu::TargetId;

    fn v(major: u32, minor: u32) -> RtcVersion {
        RtcVersion {
            major,
            minor: Some(minor),
        }
    }

    fn options() -> CompileOptions {
        CompileOptions::for_target(TargetId::parse("gfx942").unwrap())
    }

    #[test]
    fn names_differ_by_source_options_and_compilers_but_not_by_code_object_version() {
        let c = ("hipRTC", v(6, 4), "hipcc");
        let n = AutoMemo::name(c, b"a", &options());
        assert_ne!(n, AutoMemo::name(c, b"b", &options()));
        assert_ne!(n, AutoMemo::name(c, b"a", &options().define("X", "1")));
        assert_ne!(
            n,
            AutoMemo::name(("hipRTC", v(7, 4), "hipcc"), b"a", &options())
        );
        assert_ne!(
            n,
            AutoMemo::name(("hipRTC", v(6, 2), "hipcc"), b"a", &options())
        );
        let unknown = RtcVersion {
            major: 6,
            minor: None,
        };
        assert_ne!(
            n,
            AutoMemo::name(("hipRTC", unknown, "hipcc"), b"a", &options())
        );
        let mut v5 = options();
        v5.code_object_version = Some(5);
        assert_eq!(n, AutoMemo::name(c, b"a", &v5));
    }

    #[test]
    fn a_failure_is_remembered_per_user_and_read_by_a_fresh_memo() {
        let dir = tempfile::tempdir().unwrap();
        let n = AutoMemo::name(("hipRTC", v(6, 4), "hipcc"), b"src", &options());
        let first = AutoMemo::new(Some(dir.path().to_path_buf()));
        assert_eq!(first.decision(n, || None, |e| e), None);
        first.failed(n, "retried".into(), Some("error: x"));
        assert_eq!(first.decision(n, || None, |e| e), Some("retried".into()));
        let fresh = AutoMemo::new(Some(dir.path().to_path_buf()));
        assert_eq!(
            fresh.decision(n, || None, |e| format!("remembered: {e}")),
            Some("remembered: error: x".into())
        );
        // Made once a process: not scanned again.
        assert_eq!(
            fresh.decision(n, || panic!("scanned twice"), |e| e),
            Some("remembered: error: x".into())
        );
        assert_eq!(remembered_failures(dir.path()).len(), 1);
        // A failure of the machine, not the source, is kept in the process only.
        let m = AutoMemo::name(("hipRTC", v(6, 4), "hipcc"), b"other", &options());
        first.failed(m, "retried".into(), None);
        assert_eq!(remembered_failures(dir.path()).len(), 1);
    }

    /// A file of format 1 (the same layout, its name hashed without the minor version) is
    /// not read as this format's, even under this format's name.
    #[test]
    fn a_failure_remembered_in_the_previous_format_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let n = AutoMemo::name(("hipRTC", v(6, 4), "hipcc"), b"src", &options());
        let mut old = Vec::new();
        old.extend_from_slice(MAGIC);
        old.extend_from_slice(&1u32.to_le_bytes());
        old.extend_from_slice(&n.to_le_bytes());
        old.extend_from_slice(b"error: x");
        let file = memo_file(dir.path(), n);
        crate::compiler::identity::write_private_bytes(&file, &old, false);
        assert_eq!(recall(dir.path(), n), None);
        remember(dir.path(), n, "error: x");
        assert_eq!(recall(dir.path(), n), Some("error: x".into()));
    }

    #[test]
    fn past_the_cap_the_oldest_failures_go() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..9u128 {
            remember(dir.path(), n, "error: x");
            let t =
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + n as u64);
            let f = std::fs::File::options()
                .write(true)
                .open(memo_file(dir.path(), n))
                .unwrap();
            f.set_modified(t).unwrap();
        }
        prune(&dir.path().join("auto"), 8);
        let left: Vec<Name> = (0..9)
            .filter(|n| recall(dir.path(), *n).is_some())
            .collect();
        assert_eq!(left, vec![3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn a_memo_file_of_another_name_or_writable_by_others_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let n = AutoMemo::name(("hipRTC", v(6, 4), "hipcc"), b"src", &options());
        remember(dir.path(), n, "error: x");
        let file = memo_file(dir.path(), n);
        let other = memo_file(dir.path(), n ^ 1);
        std::fs::copy(&file, &other).unwrap();
        assert_eq!(recall(dir.path(), n ^ 1), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(recall(dir.path(), n), None);
    }
}
