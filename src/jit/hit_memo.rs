//! The hit memo: where a request's disk hit was found, remembered per user with everything the
//! lookup saw of the filesystem, so that a fresh process serves the same request with one
//! file read and those `stat`s instead of the compiler search, the identity check, the key and
//! the header manifest check.
//!
//! A disk hit found the long way ([`super::Jit`]'s lookup) is recorded as it runs
//! ([`crate::file_observe`]): every `stat`, `realpath` and file opened by the compiler search
//! and identity (also those of an earlier request in the process, kept with the compiler
//! found), the per-user memos, the manifest and the entries, with what each saw. The memo file
//! is named by the sha256 of everything else the lookup reads: the source, the options, the
//! HIP runtime in use, the [`super::Jit`]'s configuration (compiler choice and settings, extra
//! signature, runtime code object versions, cache roots), the whole environment, the working
//! directory, and the effective user (as the lookup's ownership checks read it). It holds the
//! observations, the result key, the compiler used and the effective options. A later request with the same name whose every
//! observation still holds ([`crate::file_observe::holds`]) takes the entry of that key
//! straight from the disk cache (read and verified as any hit); anything else, or no memo,
//! looks up the long way (and remembers again on a hit).
//!
//! A memo is written only when the observations can be trusted by `stat`: every file seen was
//! last changed (modification and status change times) at least [`MIN_AGE`] before, so that a
//! change within the same timestamp tick of a coarse filesystem clock cannot go unseen; the
//! lookup found its hit at the first look, without a stale manifest or a bad entry; and every
//! query of the lookup was recorded. A compiler found by an earlier request of the process is
//! used by a later one as it was found: that request is remembered only when the process's
//! environment, working directory and HIP runtime are what they were when the compiler was
//! found ([`process_context`]). The memos live
//! beside the compiler identities ([`crate::compiler::identity::identity_dir`]) under `hits/`,
//! owned by the user, mode 0600, read only when so.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::compiled::CompilerUsed;
use crate::cache::key::{CacheKey, Record};
use crate::compiler::identity::{self, CompilerKind};
use crate::compiler::CompileOptions;
use crate::file_observe::{self, Observation, Observed, Seen};

/// The memo's format.
const FORMAT: u32 = 1;

/// How long before the memo is written every file seen must have last changed.
pub const MIN_AGE: Duration = Duration::from_secs(2);

#[derive(Serialize, Deserialize)]
struct Memo {
    format: u32,
    #[serde(with = "serde_bytes")]
    request: Vec<u8>,
    observed: Vec<Observation>,
    #[serde(with = "serde_bytes")]
    key: Vec<u8>,
    compiler_kind: CompilerKind,
    #[serde(with = "serde_bytes")]
    compiler_path: Vec<u8>,
    compiler_version: String,
    compiler_reason: String,
    options: CompileOptions,
}

/// What a memo gives: the result key, the compiler used and the effective options.
pub(crate) struct Recalled {
    pub(crate) key: CacheKey,
    pub(crate) compiler: CompilerUsed,
    pub(crate) options: CompileOptions,
}

/// The name of one request: the sha256 of its inputs and of the process's (see the module
/// documentation). `jit` is the [`super::Jit`]'s configuration in bytes.
/// `context` is the request's [`process_context`] (which holds the HIP runtime in use).
pub(crate) fn request_name(
    jit: &[u8],
    source: &[u8],
    options: &CompileOptions,
    context: &[u8; 32],
) -> Option<[u8; 32]> {
    let mut r = Record::new();
    let mut item = |b: &[u8]| r.bytes(b);
    item(&FORMAT.to_le_bytes());
    item(env!("CARGO_PKG_VERSION").as_bytes());
    // The formats the lookup reads and the keys it derives: a build that changes one bumps it.
    item(&crate::cache::key::CACHE_FORMAT_VERSION.to_le_bytes());
    item(&identity::MEMO_FORMAT.to_le_bytes());
    item(&crate::compiler::library_search::FORMAT.to_le_bytes());
    item(jit);
    item(source);
    item(&rmp_serde::to_vec(options).ok()?);
    item(context);
    // The user the lookup's ownership checks judge files against (read once per process).
    item(&crate::effective_user::uid().to_le_bytes());
    Some(r.finish())
}

/// The sha256 of what a lookup reads of the process besides files: every environment
/// variable in the order the environment holds them (a variable set twice is read by its
/// first occurrence, so order matters), the working directory, and the HIP runtime in use
/// (`runtime`). `None` when the working directory cannot be read.
pub(crate) fn process_context(runtime: Option<&Path>) -> Option<[u8; 32]> {
    let mut r = Record::new();
    r.bytes(runtime.map_or(b"\0none".as_slice(), |p| p.as_os_str().as_bytes()));
    for (k, v) in std::env::vars_os() {
        r.bytes(k.as_bytes());
        r.bytes(v.as_bytes());
    }
    r.bytes(std::env::current_dir().ok()?.as_os_str().as_bytes());
    Some(r.finish())
}

fn memo_file(dir: &Path, name: &[u8; 32]) -> PathBuf {
    let hex = crate::cache::key::hex(name);
    dir.join("hits").join(format!("{}.hit", &hex[..40]))
}

/// The memo of request `name` in `dir`, when every observation in it still holds.
pub(crate) fn recall(dir: &Path, name: &[u8; 32]) -> Option<Recalled> {
    let bytes = identity::read_private(&memo_file(dir, name))?;
    let memo: Memo = rmp_serde::from_slice(&bytes).ok()?;
    if memo.format != FORMAT || memo.request != name {
        return None;
    }
    if !memo.observed.iter().all(file_observe::holds) {
        return None;
    }
    Some(Recalled {
        key: CacheKey(memo.key.try_into().ok()?),
        compiler: CompilerUsed {
            kind: memo.compiler_kind,
            path: PathBuf::from(std::ffi::OsStr::from_bytes(&memo.compiler_path)),
            version: memo.compiler_version,
            reason: memo.compiler_reason,
        },
        options: memo.options,
    })
}

/// Why `observed` cannot be remembered at `now`, if it cannot.
pub(crate) fn unremembered(observed: &Observed, now: SystemTime) -> Option<String> {
    if !observed.complete {
        return Some("a query of the lookup was not recorded".into());
    }
    let edge = now.checked_sub(MIN_AGE)?;
    let edge = edge.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    let edge = (edge.as_secs() as i64, edge.subsec_nanos() as i64);
    observed.observed.iter().find_map(|o| match &o.seen {
        Seen::Present(s, _) if s.mtime >= edge || s.ctime >= edge => Some(format!(
            "{} changed less than {} s ago",
            String::from_utf8_lossy(&o.path),
            MIN_AGE.as_secs()
        )),
        _ => None,
    })
}

/// Remembers request `name` in `dir`: its observations, result key, compiler and effective
/// options, unless [`unremembered`] says why not, or the process context (`runtime` in use)
/// is no longer `context`, the one the name was made with (another thread changed the
/// environment or the working directory meanwhile); logged at debug level.
#[allow(clippy::too_many_arguments)]
pub(crate) fn remember(
    dir: &Path,
    name: &[u8; 32],
    context: &[u8; 32],
    runtime: Option<&Path>,
    observed: Observed,
    key: &CacheKey,
    compiler: &CompilerUsed,
    options: &CompileOptions,
) {
    if process_context(runtime).as_ref() != Some(context) {
        tracing::debug!(%key, "hit not remembered: the environment or working directory changed during the lookup");
        return;
    }
    if let Some(why) = unremembered(&observed, SystemTime::now()) {
        tracing::debug!(%key, reason = %why, "hit not remembered");
        return;
    }
    // The same query made twice (a compiler's search replayed by each use) is checked once.
    let mut observed = observed.observed;
    observed.sort_by(|a, b| (&a.path, a.follow).cmp(&(&b.path, b.follow)));
    observed.dedup();
    let memo = Memo {
        format: FORMAT,
        request: name.to_vec(),
        observed,
        key: key.0.to_vec(),
        compiler_kind: compiler.kind,
        compiler_path: compiler.path.as_os_str().as_bytes().to_vec(),
        compiler_version: compiler.version.clone(),
        compiler_reason: compiler.reason.clone(),
        options: options.clone(),
    };
    let file = memo_file(dir, name);
    identity::write_private_as(&file, &memo, false);
    if let Some(hits) = file.parent() {
        prune(hits, MAX_MEMOS);
    }
}

/// How many memos are kept: past it, the oldest quarter (by modification time) is removed.
/// Each is a few KiB; one is written per request and environment (a variable that differs
/// per job names a memo per job).
pub const MAX_MEMOS: usize = 4096;

/// Removes the oldest memos of `hits` down to three quarters of `max` when there are more than
/// `max` (temporary files older than a minute too); errors are ignored (another process may
/// prune at once).
fn prune(hits: &Path, max: usize) {
    let Ok(rd) = std::fs::read_dir(hits) else {
        return;
    };
    // Names only (no `stat`) unless there is something to remove: this runs at every memo
    // written.
    let now = SystemTime::now();
    let modified = |p: &Path| {
        std::fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    let mut memos: Vec<PathBuf> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.as_bytes();
        if name.starts_with(b".tmp-") {
            let p = e.path();
            if now
                .duration_since(modified(&p))
                .is_ok_and(|age| age > Duration::from_secs(60))
            {
                let _ = std::fs::remove_file(p);
            }
        } else if name.ends_with(b".hit") {
            memos.push(e.path());
        }
    }
    if memos.len() <= max {
        return;
    }
    let mut memos: Vec<(SystemTime, PathBuf)> =
        memos.into_iter().map(|p| (modified(&p), p)).collect();
    memos.sort();
    for (_, p) in &memos[..memos.len() - max * 3 / 4] {
        let _ = std::fs::remove_file(p);
    }
}

/// The paths a memo file's observations name (for tests that compare them with what a lookup
/// really touched).
#[doc(hidden)]
pub fn observed_paths(memo: &Path) -> Option<Vec<PathBuf>> {
    let bytes = std::fs::read(memo).ok()?;
    let memo: Memo = rmp_serde::from_slice(&bytes).ok()?;
    Some(
        memo.observed
            .into_iter()
            .map(|o| PathBuf::from(std::ffi::OsStr::from_bytes(&o.path)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::identity::FileStat;

    fn seen_at(secs: i64) -> Observation {
        Observation {
            path: b"/x".to_vec(),
            follow: true,
            seen: Seen::Present(
                FileStat {
                    size: 1,
                    mtime: (secs, 0),
                    ctime: (secs, 0),
                    ino: 1,
                    dev: 1,
                },
                1,
            ),
        }
    }

    #[test]
    fn files_changed_within_the_margin_or_an_incomplete_recording_are_not_remembered() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let old = Observed {
            observed: vec![seen_at(990)],
            complete: true,
        };
        assert_eq!(unremembered(&old, now), None);
        let edge = Observed {
            observed: vec![seen_at(990), seen_at(998)],
            complete: true,
        };
        assert!(unremembered(&edge, now)
            .unwrap()
            .contains("changed less than 2 s ago"));
        let incomplete = Observed {
            observed: vec![seen_at(990)],
            complete: false,
        };
        assert!(unremembered(&incomplete, now)
            .unwrap()
            .contains("not recorded"));
    }

    #[test]
    fn pruning_keeps_the_newest_three_quarters() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..8u64 {
            let p = d.path().join(format!("{i}.hit"));
            std::fs::write(&p, b"").unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        std::fs::write(d.path().join("other"), b"").unwrap();
        prune(d.path(), 8);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 9);
        prune(d.path(), 4);
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["5.hit", "6.hit", "7.hit", "other"]);
    }
}
