//! What a cache lookup saw of the filesystem, recorded as it looks, so that a later process
//! can tell by `stat` alone whether the same lookup would see the same thing
//! ([`crate::jit::hit_memo`]), by the one rule that lets a `stat` stand for a file
//! ([`crate::fs::stat::FileStat::proves_same_as`]: the same fields on the same mount).
//!
//! While a [`Recording`] is open on a thread, every filesystem query on the lookup's path
//! (the compiler searches and identities, the per-user memos, the header manifests, the cache
//! entries, hip-sys's installation discovery) adds an [`Observation`]: the path, whether
//! symbolic links were followed, and what was there at that moment (the `stat` fields and file
//! type, the error, or the path a `realpath(3)` gave). The values are the ones the lookup
//! itself acted on, taken from its own system call or the `fstat` of the descriptor it read
//! from, never a second look, so a change between two looks cannot leave a record of one
//! state beside a result of another. Recordings nest: what a compiler's search records is
//! kept with the compiler found ([`crate::jit::Jit`]'s in-process compilers) and added to every
//! later request that uses it, as if the request had searched itself.
//!
//! Work whose outcome `stat` cannot confirm later (a compiler identity computed rather than
//! recalled, a compiler library loaded, the user and group databases asked) calls
//! [`unrecordable`]: the recording's [`Observed::complete`] is then `false`, and nothing is
//! remembered from it.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::fs::stat::{FileStat, Stat};

/// What one query saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// A file: its `stat` fields and type ([`type_code`]).
    Present(FileStat, u8),
    /// An error: its `errno`, 0 for "any error" (a query that does not tell errors apart).
    Missing(i32),
    /// `realpath(3)` of the path gave this path (raw bytes).
    Resolved(Vec<u8>),
}

/// One query: the path (raw bytes), whether a symbolic link at its end was followed, and what
/// it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observation {
    pub(crate) path: Vec<u8>,
    pub(crate) follow: bool,
    pub(crate) seen: Seen,
}

/// 1 regular file, 2 directory, 3 symbolic link, 4 anything else.
pub(crate) fn type_code(s: Stat) -> u8 {
    if s.is_file() {
        1
    } else if s.is_dir() {
        2
    } else if s.is_symlink() {
        3
    } else {
        4
    }
}

fn seen_of(result: &std::io::Result<Stat>) -> Seen {
    match result {
        Ok(m) => Seen::Present(m.fields, type_code(*m)),
        Err(e) => Seen::Missing(errno(e)),
    }
}

#[derive(Default)]
struct Frame {
    observed: Vec<Observation>,
    incomplete: bool,
}

thread_local! {
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// Adds what a query of `path` saw to the open recording, if any.
fn push(path: &Path, follow: bool, seen: impl FnOnce() -> Seen) {
    FRAMES.with(|f| {
        if let Some(top) = f.borrow_mut().last_mut() {
            top.observed.push(Observation {
                path: path.as_os_str().as_bytes().to_vec(),
                follow,
                seen: seen(),
            });
        }
    });
}

/// The `errno` of `e`, 0 when it has none.
fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// An open recording on this thread; [`Recording::finish`] ends it. Dropped without
/// `finish` (an early return), it ends and adds nothing to the recording around it.
pub(crate) struct Recording {
    depth: usize,
    done: bool,
}

/// What a finished [`Recording`] saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observed {
    /// The queries, in order.
    pub(crate) observed: Vec<Observation>,
    /// `false` when a query could not be recorded.
    pub(crate) complete: bool,
}

impl Recording {
    /// Opens a recording on this thread, inside the one open already, if any.
    pub(crate) fn start() -> Recording {
        let depth = FRAMES.with(|f| {
            let mut f = f.borrow_mut();
            f.push(Frame::default());
            f.len()
        });
        Recording { depth, done: false }
    }

    /// Ends the recording and returns what it saw; what it saw is also added to the recording
    /// around it.
    pub(crate) fn finish(mut self) -> Observed {
        self.done = true;
        FRAMES.with(|f| {
            let mut f = f.borrow_mut();
            f.truncate(self.depth);
            let frame = f.pop().unwrap_or_default();
            if let Some(outer) = f.last_mut() {
                outer.observed.extend(frame.observed.iter().cloned());
                outer.incomplete |= frame.incomplete;
            }
            Observed {
                observed: frame.observed,
                complete: !frame.incomplete,
            }
        })
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.done {
            FRAMES.with(|f| {
                let mut f = f.borrow_mut();
                f.truncate(self.depth.saturating_sub(1));
                // What the inner recording saw is not added: the one around it cannot be
                // complete.
                if let Some(outer) = f.last_mut() {
                    outer.incomplete = true;
                }
            });
        }
    }
}

/// Adds what an earlier recording saw to the open one (a compiler found by an earlier
/// request, used by this one).
pub(crate) fn replay(observed: &Observed) {
    FRAMES.with(|f| {
        if let Some(top) = f.borrow_mut().last_mut() {
            top.observed.extend(observed.observed.iter().cloned());
            top.incomplete |= !observed.complete;
        }
    });
}

/// Marks the open recording incomplete: a query was made that cannot be recorded.
pub(crate) fn unrecordable() {
    FRAMES.with(|f| {
        if let Some(top) = f.borrow_mut().last_mut() {
            top.incomplete = true;
        }
    });
}

/// Records the result of a query of `path` made by the caller (`follow`: symbolic links at
/// its end followed).
pub(crate) fn note(path: &Path, follow: bool, result: &std::io::Result<Stat>) {
    push(path, follow, || seen_of(result));
}

/// Records a query of `path` that failed with `error` (`follow`: as for [`note`]).
pub(crate) fn note_error(path: &Path, follow: bool, error: &std::io::Error) {
    push(path, follow, || Seen::Missing(errno(error)));
}

/// Records the `stat` (symbolic links followed) a caller already has: fields and
/// [`type_code`]; `None`: the query failed, with any error.
pub(crate) fn note_stat(path: &Path, stat: Option<(FileStat, u8)>) {
    push(path, true, || match stat {
        Some((s, t)) => Seen::Present(s, t),
        None => Seen::Missing(0),
    });
}

/// Whether a recording is open on this thread.
pub(crate) fn recording() -> bool {
    FRAMES.with(|f| !f.borrow().is_empty())
}

/// `stat(2)` ([`crate::fs::stat::stat`]), recorded.
pub(crate) fn metadata(path: impl AsRef<Path>) -> std::io::Result<Stat> {
    let path = path.as_ref();
    let r = crate::fs::stat::stat(path);
    note(path, true, &r);
    r
}

/// `lstat(2)` (a symbolic link at the end not followed; [`crate::fs::stat::lstat`]),
/// recorded.
pub(crate) fn symlink_metadata(path: impl AsRef<Path>) -> std::io::Result<Stat> {
    let path = path.as_ref();
    let r = crate::fs::stat::lstat(path);
    note(path, false, &r);
    r
}

/// `Path::is_file`, recorded.
pub(crate) fn is_file(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_file())
}

/// `Path::is_dir`, recorded.
pub(crate) fn is_dir(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_dir())
}

/// `Path::exists`, recorded.
pub(crate) fn exists(path: &Path) -> bool {
    metadata(path).is_ok()
}

/// Where `path` leads ([`resolve`]: the path `std::fs::canonicalize` gives), recorded.
pub(crate) fn canonicalize(path: impl AsRef<Path>) -> std::io::Result<PathBuf> {
    let path = path.as_ref();
    let r = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in a path"))
        .and_then(|c| resolve(&c))
        .map(|p| PathBuf::from(std::ffi::OsString::from_vec(p)));
    note_resolved(path, &r);
    r
}

fn note_resolved(path: &Path, r: &std::io::Result<PathBuf>) {
    push(path, true, || match r {
        Ok(p) => Seen::Resolved(p.as_os_str().as_bytes().to_vec()),
        Err(e) => Seen::Missing(errno(e)),
    });
}

/// `std::fs::read_dir` of a directory whose listing the caller reads whole, recorded as the
/// directory's `stat` (an entry added or removed changes its times; [`crate::jit::hit_memo`]
/// trusts only times older than its margin).
pub(crate) fn read_dir(path: impl AsRef<Path>) -> std::io::Result<std::fs::ReadDir> {
    let path = path.as_ref();
    let r = std::fs::read_dir(path);
    if recording() {
        match &r {
            Ok(_) => note(path, true, &crate::fs::stat::stat(path)),
            Err(e) => note_error(path, true, e),
        }
    }
    r
}

/// The [`hip_sys::discovery::Observer`] that records hip-sys's installation discovery.
///
/// hip-sys hands over `std`'s metadata, which holds no mount identity: the file is `stat`ed
/// again for it, and that identity kept only when the second `stat` agrees with the first in
/// every field (else the observation has none, and never holds). The discovery decides by
/// existence, type and permissions alone, never by content, so what it decided from the first
/// `stat` it decides alike from a file with the second's fields.
pub(crate) fn from_hip_sys(q: hip_sys::discovery::Query<'_>) {
    match q {
        hip_sys::discovery::Query::Metadata(path, r) => {
            if !recording() {
                return;
            }
            let first = r.as_ref().map(crate::fs::stat::of_metadata);
            let seen = match (first, crate::fs::stat::stat(path)) {
                (Ok(first), Ok(again))
                    if again.fields.without_mount_identity() == first.fields
                        && again.mode == first.mode =>
                {
                    Ok(again)
                }
                (first, _) => first.map_err(|e| std::io::Error::from_raw_os_error(errno(e))),
            };
            note(path, true, &seen);
        }
        hip_sys::discovery::Query::Canonical(path, r) => note_resolved(path, r),
    }
}

/// Whether `o` still holds: the same query now sees the same thing.
#[cfg(test)]
pub(crate) fn holds(o: &Observation) -> bool {
    let Ok(path) = std::ffi::CString::new(o.path.as_slice()) else {
        return false;
    };
    let seen = match &o.seen {
        Seen::Present(s, t) => SeenRef::Present(*s, *t),
        Seen::Missing(e) => SeenRef::Missing(*e),
        Seen::Resolved(p) => SeenRef::Resolved(p),
    };
    holds_at(&path, o.follow, &seen)
}

/// What an observation saw, borrowed from the bytes it is read from ([`Seen`] without its
/// allocation).
pub(crate) enum SeenRef<'a> {
    /// [`Seen::Present`].
    Present(FileStat, u8),
    /// [`Seen::Missing`].
    Missing(i32),
    /// [`Seen::Resolved`].
    Resolved(&'a [u8]),
}

/// [`holds`] of the observation of `path` (`follow`: a link at its end followed) that saw
/// `seen`: one `statx` of the NUL-terminated path, no allocation (a `Resolved` observation:
/// [`resolve`]).
pub(crate) fn holds_at(path: &std::ffi::CStr, follow: bool, seen: &SeenRef<'_>) -> bool {
    match seen {
        SeenRef::Resolved(p) => resolve(path).is_ok_and(|now| now == *p),
        seen => {
            let now = crate::fs::stat::stat_c(path, follow);
            match (seen, now) {
                (SeenRef::Missing(0), Err(_)) => true,
                (SeenRef::Missing(e), Err(now)) => now.raw_os_error() == Some(*e),
                // The stat-trust rule ([`FileStat::proves_same_as`]).
                (SeenRef::Present(s, t), Ok(now)) => {
                    s.proves_same_as(&now.fields) && type_code(now) == *t
                }
                _ => false,
            }
        }
    }
}

/// Where `path` leads now (every symbolic link followed), as `realpath(3)` answers: the
/// kernel's own resolution, read back from `/proc/self/fd` after one `open(O_PATH)` (three
/// system calls, where `realpath` reads each component as a link: a dozen for a toolkit's
/// nvcc); `realpath` itself when `/proc` does not answer, or answers with something other
/// than an absolute path (a file deleted since it was opened reads `... (deleted)`).
///
/// Errors: the `open`'s (the path cannot be resolved), or `realpath`'s.
pub(crate) fn resolve(path: &std::ffi::CStr) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let link = proc_fd_link(std::os::fd::AsRawFd::as_raw_fd(&fd));
    if let Ok(p) = rustix::fs::readlinkat(rustix::fs::CWD, link.as_str(), Vec::new()) {
        let p = p.into_bytes();
        if p.first() == Some(&b'/') && !p.ends_with(b" (deleted)") {
            return Ok(p);
        }
    }
    std::fs::canonicalize(Path::new(OsStr::from_bytes(path.to_bytes())))
        .map(|p| p.into_os_string().into_vec())
}

/// `/proc/self/fd/<fd>`, the digits written by hand: a fresh process's hit through the memo
/// resolves a path or two, and the formatting machinery is code it need not run.
fn proc_fd_link(fd: i32) -> String {
    let mut link = String::with_capacity(24);
    link.push_str("/proc/self/fd/");
    let (mut digits, mut at, mut n) = ([0u8; 10], 10, fd.unsigned_abs());
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if fd < 0 {
        link.push('-');
    }
    link.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    link
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fd_links_spell_the_descriptor_in_decimal() {
        assert_eq!(proc_fd_link(0), "/proc/self/fd/0");
        assert_eq!(proc_fd_link(7), "/proc/self/fd/7");
        assert_eq!(proc_fd_link(1024), "/proc/self/fd/1024");
        assert_eq!(proc_fd_link(i32::MAX), "/proc/self/fd/2147483647");
    }

    #[test]
    fn an_observation_without_a_mount_identity_does_not_hold_and_is_not_remembered() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, b"1").unwrap();
        let r = Recording::start();
        assert!(is_file(&a));
        let seen = r.finish();
        assert!(seen.observed.iter().all(holds));
        let mut bare = seen.observed[0].clone();
        let Seen::Present(s, t) = bare.seen else {
            panic!("{bare:?}")
        };
        bare.seen = Seen::Present(s.without_mount_identity(), t);
        assert!(!holds(&bare));
        let old = Observed {
            observed: vec![bare],
            complete: true,
        };
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        assert!(crate::jit::hit_memo::unremembered(&old, later)
            .unwrap()
            .contains("no unique identity"));
    }

    #[test]
    fn nested_recordings_add_to_the_outer_one_and_an_abandoned_one_marks_it_incomplete() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, b"1").unwrap();
        let outer = Recording::start();
        let inner = Recording::start();
        assert!(is_file(&a));
        let seen = inner.finish();
        assert_eq!(seen.observed.len(), 1);
        assert!(!exists(&d.path().join("b")));
        let abandoned = Recording::start();
        let _ = metadata(&a);
        drop(abandoned);
        let all = outer.finish();
        assert_eq!(all.observed.len(), 2, "{all:?}");
        assert!(!all.complete);
        assert!(all.observed.iter().all(holds));
        // Nothing is recorded outside a recording.
        let _ = metadata(&a);
        assert!(FRAMES.with(|f| f.borrow().is_empty()));
    }

    #[test]
    fn an_observation_stops_holding_when_the_file_changes_or_appears() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, b"1").unwrap();
        let r = Recording::start();
        assert!(is_file(&a));
        assert!(!exists(&d.path().join("b")));
        assert_eq!(canonicalize(&a).unwrap(), a.canonicalize().unwrap());
        let seen = r.finish();
        assert!(seen.complete);
        assert!(seen.observed.iter().all(holds));
        std::fs::write(d.path().join("b"), b"").unwrap();
        assert!(!holds(&seen.observed[1]));
        let moved = d.path().join("a2");
        std::fs::write(&moved, b"2").unwrap();
        std::fs::rename(&moved, &a).unwrap();
        assert!(!holds(&seen.observed[0]));
    }
}
