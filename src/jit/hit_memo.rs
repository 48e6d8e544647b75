//! The hit memo: where a request's disk hit was found, remembered per user with everything the
//! lookup saw of the filesystem, so that a fresh process serves the same request with one
//! file read and those `stat`s instead of the compiler search, the identity check, the key and
//! the header manifest check.
//!
//! A disk hit found the long way ([`super::Jit`]'s lookup) is recorded as it runs
//! (`file_observe`): every `stat`, `realpath` and file opened by the compiler search
//! and identity (also those of an earlier request in the process, kept with the compiler
//! found), the per-user memos, the manifest and the entries, with what each saw. The memo file
//! is named by the sha256 of everything else the lookup reads: the source, the options, the
//! HIP runtime in use, the [`super::Jit`]'s configuration (compiler choice and settings, extra
//! signature, runtime code object versions, cache roots), the whole environment, the working
//! directory, and the effective user (as the lookup's ownership checks read it). It holds the
//! observations, the result key, the compiler used and the effective options. A later request with the same name whose every
//! observation still holds (`fs::observe::holds`) takes the entry of that key
//! straight from the disk cache (read and verified as any hit); anything else, or no memo,
//! looks up the long way (and remembers again on a hit).
//!
//! An observation of a file holds only by the stat-trust rule
//! ([`crate::fs::stat::FileStat::proves_same_as`]; the README's "What a hit trusts"): the same
//! fields on the same mount, known by an identity the kernel never gives another mount, so that
//! a file system image swapped for another at one path, its files' fields alike, is a miss.
//! A memo is written only when the observations can be trusted by `stat`: every file seen has
//! a mount identity (none where the kernel gives no unique mount ID: then no memo is written,
//! and every hit takes the long way) and was
//! last changed (modification and status change times) at least [`MIN_AGE`] before, so that a
//! change within the same timestamp tick of a coarse filesystem clock cannot go unseen; the
//! lookup found its hit at the first look, without a stale manifest or a bad entry; and every
//! query of the lookup was recorded. A compiler found by an earlier request of the process is
//! used by a later one as it was found: that request is remembered only when the process's
//! environment, working directory and HIP runtime are what they were when the compiler was
//! found (`process_context`). The memos live
//! beside the compiler identities ([`crate::compiler::identity::identity_dir`]) under `hits/`,
//! written with mode 0600, read only when owned by the user and writable by nobody else
//! (`identity::read_private`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::compiled::CompilerUsed;
use crate::cache::key::CacheKey;
use crate::compiler::identity::{self, CompilerKind};
use crate::compiler::CompileOptions;
use crate::digest::Record;
use crate::fs;
use crate::fs::observe::{Observation, Observed, Seen};
use crate::fs::stat::FileStat;

/// The memo's format: [`encode`] writes it. 3: each file's mount identity.
const FORMAT: u32 = 3;

/// The first bytes of a memo file.
const MAGIC: &[u8; 4] = b"HJHM";

/// How long before the memo is written every file seen must have last changed.
pub const MIN_AGE: Duration = Duration::from_secs(2);

struct Memo {
    request: [u8; 32],
    observed: Vec<Observation>,
    key: [u8; 32],
    compiler_kind: CompilerKind,
    compiler_path: Vec<u8>,
    compiler_version: String,
    compiler_reason: String,
    /// The effective options, as [`request_name`] encodes options (MessagePack).
    options: Vec<u8>,
}

/// What a memo gives: the result key, the compiler used and the effective options.
pub(crate) struct Recalled {
    pub(crate) key: CacheKey,
    pub(crate) compiler: CompilerUsed,
    pub(crate) options: CompileOptions,
}

/// The options of a request in the bytes [`request_name`] and the memo hold them as.
pub(crate) fn options_bytes(options: &CompileOptions) -> Option<Vec<u8>> {
    rmp_serde::to_vec(options).ok()
}

/// The name of one request: the sha256 of its inputs and of the process's (see the module
/// documentation). `jit` is the [`super::Jit`]'s configuration in bytes, `options` the
/// request's [`options_bytes`], `context` its [`process_context`] (which holds the HIP
/// runtime in use).
pub(crate) fn request_name(
    jit: &[u8],
    source: &[u8],
    options: &[u8],
    context: &[u8; 32],
) -> [u8; 32] {
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
    item(options);
    item(context);
    // The user the lookup's ownership checks judge files against (read once per process).
    item(&crate::fs::user::uid().to_le_bytes());
    r.finish()
}

/// The sha256 of what a lookup reads of the process besides files: every environment
/// variable in the order the environment holds them (a variable set twice is read by its
/// first occurrence, so order matters; `TMPDIR` as the process was given it, not the
/// private directory the command points it at, [`crate::compiler::tmpdir_as_given`]), the working directory, and the HIP runtime in use
/// (`runtime`). `None` when the working directory cannot be read.
pub(crate) fn process_context(runtime: Option<&Path>) -> Option<[u8; 32]> {
    let mut r = Record::new();
    r.bytes(runtime.map_or(b"\0none".as_slice(), |p| p.as_os_str().as_bytes()));
    for (k, v) in std::env::vars_os() {
        // The command's own temporary directory, new in every run, stands for the TMPDIR it
        // was given (compilers run in build directories of their own whatever it is).
        let v = if k == "TMPDIR" {
            match crate::compiler::tmpdir_as_given(&v) {
                Some(given) => given.to_owned(),
                None => continue,
            }
        } else {
            v
        };
        r.bytes(k.as_bytes());
        r.bytes(v.as_bytes());
    }
    r.bytes(std::env::current_dir().ok()?.as_os_str().as_bytes());
    Some(r.finish())
}

fn memo_file(dir: &Path, name: &[u8; 32]) -> PathBuf {
    let hex = crate::digest::hex(name);
    dir.join("hits").join(format!("{}.hit", &hex[..40]))
}

/// The memo of request `name` in `dir`, when every observation in it still holds; `options`
/// are the request's, `options_bytes` their [`options_bytes`] (the effective options are
/// decoded only when they differ).
pub(crate) fn recall(
    dir: &Path,
    name: &[u8; 32],
    options: &CompileOptions,
    options_bytes: &[u8],
) -> Option<Recalled> {
    let bytes = identity::read_private(&memo_file(dir, name))?;
    let memo = decode(&bytes)?;
    if memo.request != *name {
        return None;
    }
    if !memo.observed.iter().all(fs::observe::holds) {
        return None;
    }
    let options = if memo.options == options_bytes {
        options.clone()
    } else {
        rmp_serde::from_slice(&memo.options).ok()?
    };
    Some(Recalled {
        key: CacheKey(memo.key),
        compiler: CompilerUsed {
            kind: memo.compiler_kind,
            path: PathBuf::from(std::ffi::OsStr::from_bytes(&memo.compiler_path)),
            version: memo.compiler_version,
            reason: memo.compiler_reason,
        },
        options,
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
        Seen::Present(s, _) if s.mount == crate::fs::stat::NO_MOUNT_IDENTITY => Some(format!(
            "the mount of {} has no unique identity (the kernel gives none before Linux 6.8): \
             its stat proves nothing",
            String::from_utf8_lossy(&o.path)
        )),
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
    let Some(options) = options_bytes(options) else {
        return;
    };
    let memo = Memo {
        request: *name,
        observed,
        key: key.0,
        compiler_kind: compiler.kind,
        compiler_path: compiler.path.as_os_str().as_bytes().to_vec(),
        compiler_version: compiler.version.clone(),
        compiler_reason: compiler.reason.clone(),
        options,
    };
    let file = memo_file(dir, name);
    identity::write_private_bytes(&file, &encode(&memo), false);
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
    let memo = decode(&bytes)?;
    Some(
        memo.observed
            .into_iter()
            .map(|o| PathBuf::from(std::ffi::OsStr::from_bytes(&o.path)))
            .collect(),
    )
}

/// A memo's bytes: [`MAGIC`], [`FORMAT`] (`u32`), the request name and the key (32 bytes
/// each), the compiler's kind (one byte: [`kind_code`]), path, version and reason, the
/// options, the number of observations (`u32`) and each observation: its path, whether a link
/// at its end was followed (one byte), and what it saw: `1` a file (size, modification and
/// change times as seconds and nanoseconds, inode, device, mount identity: `u64`/`i64` each;
/// then the
/// [`crate::fs::observe`] type code, one byte), `2` an error (its `errno`, `i32`), `3` a
/// resolved path. Byte strings are a `u32` length and the bytes; integers little-endian.
/// Written and read by hand, not with serde: a fresh process's hit runs this code once, and
/// serde's decoding was most of the code that hit first ran.
fn encode(m: &Memo) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + m.observed.len() * 96);
    let bytes = |b: &mut Vec<u8>, v: &[u8]| {
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        b.extend_from_slice(v);
    };
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&FORMAT.to_le_bytes());
    b.extend_from_slice(&m.request);
    b.extend_from_slice(&m.key);
    b.push(m.compiler_kind.wire_code());
    bytes(&mut b, &m.compiler_path);
    bytes(&mut b, m.compiler_version.as_bytes());
    bytes(&mut b, m.compiler_reason.as_bytes());
    bytes(&mut b, &m.options);
    b.extend_from_slice(&(m.observed.len() as u32).to_le_bytes());
    for o in &m.observed {
        bytes(&mut b, &o.path);
        b.push(u8::from(o.follow));
        match &o.seen {
            Seen::Present(s, t) => {
                b.push(1);
                for v in [s.size, s.mtime.0 as u64, s.mtime.1 as u64, s.ctime.0 as u64]
                    .into_iter()
                    .chain([s.ctime.1 as u64, s.ino, s.dev, s.mount])
                {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b.push(*t);
            }
            Seen::Missing(e) => {
                b.push(2);
                b.extend_from_slice(&e.to_le_bytes());
            }
            Seen::Resolved(p) => {
                b.push(3);
                bytes(&mut b, p);
            }
        }
    }
    b
}

/// The memo in `b`, `None` unless it is one of this [`FORMAT`], whole, with nothing after it.
fn decode(b: &[u8]) -> Option<Memo> {
    let mut r = Cursor(b);
    if r.take(4)? != MAGIC || r.u32()? != FORMAT {
        return None;
    }
    let request = r.array()?;
    let key = r.array()?;
    let compiler_kind = CompilerKind::from_wire_code(r.u8()?)?;
    let compiler_path = r.bytes()?.to_vec();
    let compiler_version = String::from_utf8(r.bytes()?.to_vec()).ok()?;
    let compiler_reason = String::from_utf8(r.bytes()?.to_vec()).ok()?;
    let options = r.bytes()?.to_vec();
    let n = r.u32()? as usize;
    // Each observation takes at least 10 bytes: a count past that is not believed.
    let mut observed = Vec::with_capacity(n.min(r.0.len() / 10));
    for _ in 0..n {
        let path = r.bytes()?.to_vec();
        let follow = match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let seen = match r.u8()? {
            1 => {
                let mut v = [0u64; 8];
                for x in &mut v {
                    *x = r.u64()?;
                }
                Seen::Present(
                    FileStat {
                        size: v[0],
                        mtime: (v[1] as i64, v[2] as i64),
                        ctime: (v[3] as i64, v[4] as i64),
                        ino: v[5],
                        dev: v[6],
                        mount: v[7],
                    },
                    r.u8()?,
                )
            }
            2 => Seen::Missing(r.u32()? as i32),
            3 => Seen::Resolved(r.bytes()?.to_vec()),
            _ => return None,
        };
        observed.push(Observation { path, follow, seen });
    }
    r.0.is_empty().then_some(Memo {
        request,
        observed,
        key,
        compiler_kind,
        compiler_path,
        compiler_version,
        compiler_reason,
        options,
    })
}

/// Reads a memo's fields off the front of a byte slice; `None` when it ends first.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    mount: 1,
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
    fn a_memo_reads_back_as_written_and_a_cut_or_lengthened_one_is_refused() {
        let mut observed = vec![seen_at(990)];
        observed.push(Observation {
            path: b"/lib/libnvrtc.so.13".to_vec(),
            follow: false,
            seen: Seen::Missing(2),
        });
        observed.push(Observation {
            path: b"/usr/local/cuda".to_vec(),
            follow: true,
            seen: Seen::Resolved(b"/opt/cuda-13.0".to_vec()),
        });
        observed.push(Observation {
            path: vec![0xff, b'/', 0x80],
            follow: true,
            seen: Seen::Present(
                FileStat {
                    size: u64::MAX,
                    mtime: (-1, 999_999_999),
                    ctime: (i64::MIN, 0),
                    ino: u64::MAX - 1,
                    dev: 1 << 40,
                    mount: u64::MAX - 2,
                },
                4,
            ),
        });
        let memo = Memo {
            request: [7; 32],
            observed: observed.clone(),
            key: [9; 32],
            compiler_kind: CompilerKind::Nvrtc,
            compiler_path: b"/opt/cuda/lib64/libnvrtc.so.13".to_vec(),
            compiler_version: "NVRTC 13.0".into(),
            compiler_reason: "HIPJIT_COMPILER=nvrtc".into(),
            options: options_bytes(&CompileOptions::default()).unwrap(),
        };
        let bytes = encode(&memo);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.request, memo.request);
        assert_eq!(back.key, memo.key);
        assert_eq!(back.observed, observed);
        assert_eq!(back.compiler_kind, CompilerKind::Nvrtc);
        assert_eq!(back.compiler_path, memo.compiler_path);
        assert_eq!(back.compiler_version, memo.compiler_version);
        assert_eq!(back.compiler_reason, memo.compiler_reason);
        assert_eq!(back.options, memo.options);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        // Another format's memo (the serde-written format 1 began with a MessagePack array).
        let mut other = bytes.clone();
        other[4] = 1;
        assert!(decode(&other).is_none());
        // A count of observations far past the bytes: refused, not allocated.
        let mut huge = encode(&Memo {
            observed: Vec::new(),
            ..memo
        });
        let n = huge.len() - 4;
        huge[n..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).is_none());
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
