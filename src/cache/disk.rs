//! The disk cache: one file per key, published atomically, verified on every read.
//!
//! # Roots
//! `HIPJIT_CACHE_DIR` is a colon-separated list of directories: the first is written, the rest
//! are read-only lookups (a shared cache on a cluster filesystem). Unset or empty, the one root
//! is `$XDG_CACHE_HOME/hipjit`, else `~/.cache/hipjit`. The written root is created with mode
//! 0700, and tagged as a cache directory ([`super::tag`]) only when hipjit created it.
//!
//! # Who may write: the trust model
//! A root that exists and is not a directory (a regular file, a dangling link) is an error
//! ([`CacheError::NotADirectory`]), never a silent miss. A root that is a symbolic link must
//! itself be owned by this user or the superuser.
//!
//! A *private* root (the default) belongs to one user: the root, every directory in it and
//! every entry must be owned by this user and not writable by group or others; an entry in a
//! directory writable by others is bad. Directories hipjit creates there are 0700. A root of
//! mode 0700 or narrower ([`Root::closed`]) lets nobody else reach its directories, so a
//! lookup there checks the entry alone; [`DiskCache::verify`] checks the directories too.
//!
//! A *shared* root is declared by a file named [`SHARED_MARKER`] (`HIPJIT_SHARED`) in it,
//! owned by the root directory's owner or by the superuser (a marker dropped by anyone else who
//! can write there declares nothing). It is shared with the root directory's group and nobody
//! else: a shared root writable by others is refused, and an entry owned by a user outside that
//! group (nor this user, nor the superuser) or writable by others is bad (never served).
//! Directories hipjit creates there are `2775` (group-writable, set-group-ID so that what is
//! made inside keeps the root's group), set with `chmod` after `mkdir` so that the umask
//! cannot narrow them; entries are readable by all (0644). Entries of a private root are 0600.
//!
//! # Layout and publishing
//! `<root>/v1/<first two hex digits>/<key>.hjc`: [`ENTRY_MAGIC`], the [`CACHE_FORMAT_VERSION`]
//! (`u32` LE), the metadata length (`u64` LE), the metadata ([`EntryMeta`], MessagePack, fields
//! by position), the entry's checksum (16 bytes: the XXH3-128 of every byte before it,
//! little-endian), then the
//! artefacts back to back in the order the metadata lists them. The checksum covers the whole
//! entry: the header and metadata directly, each artefact through the size and sha256 the
//! metadata records for it (as ccache's entries end in an XXH3-128 checksum; a checksum guards
//! against corruption, the file's owner and mode against tampering). An entry is written to a
//! temporary file in `<root>/v1/tmp` (same filesystem), fsynced, then linked to its name
//! without replacing anything (`link(2)`, or `renameat2(RENAME_NOREPLACE)`), and the directory
//! is fsynced. A single file is published and replaced atomically by `rename(2)` on local
//! filesystems and on NFS, unlike a directory. An existing valid entry is never overwritten;
//! an invalid one in the written root is replaced by `rename(2)`; what sits at an entry path
//! and is not a regular file (a dangling or planted link, a directory, a FIFO) is removed
//! first (never followed), so that no key can be kept from publishing.
//!
//! Only key-named paths are entries: `<root>/v1/<xx>/<key>.hjc` with `<xx>` a real directory
//! (not a link) named after the key's first two hex digits. `list`, `verify`, `clear` and
//! `prune` see nothing else, never follow a link, and `clear`/`prune` remove only entries.
//!
//! The per-key compile lock ([`DiskCache::lock`]) is waited for at most a given time (the
//! JIT: the compile timeout); after that the caller compiles without it and says so.
//!
//! # Size cap
//! The written root has a size cap: `DEFAULT_MAX_BYTES` (5 GiB, as ccache's 5 GB default)
//! unless `HIPJIT_CACHE_MAX_SIZE` ([`MAX_SIZE_ENV`]: a size as `hipjit cache prune --max-size`
//! takes it, `500M`, `20G`, or `unlimited`) or the caller
//! (`JitOptions::max_cache_bytes`, [`DiskCache::with_max_bytes`]) sets another. After a write
//! that takes the root past its cap, the least recently used entries are removed until it
//! holds at most 90% of the cap ([`DiskCache::prune`]'s order), so that a full root is listed
//! again only after another tenth of the cap was written, not at every write. What a
//! [`DiskCache`] wrote since it last listed the root is added to that listing's total; the
//! first write of a process lists the root (25,000 entries: about 0.1 s on ext4 with the
//! directories cached, measured with `find`, against the compile of seconds that precedes
//! a write). Other processes' writes are seen at the next listing, so a root may pass
//! its cap by what several processes write between their listings (each at most a tenth of
//! the cap).
//!
//! # Reading
//! An entry is opened without following a link and without blocking, checked to be a regular
//! file of at most `ENTRY_LIMIT` bytes on the open descriptor ([`crate::fs::read`]), then
//! read. A reader checks magic, format version, the checksum of the header and metadata (a
//! changed byte anywhere in the recorded command, options, headers or artefact list is a bad
//! entry), the key in the metadata, the total length and the size and sha256 of each
//! artefact, over the bytes read. A bad entry is a miss: in the written root it is reported
//! and will be replaced by the next write; in a read-only root it is skipped and reported. A hit in the written root sets the file's modification time, which the size cap
//! uses for least-recently-used pruning: on the descriptor already open, and only when it is
//! at least [`LRU_GRANULARITY`] (an hour) away from now, so pruning's order is exact to within
//! an hour and most hits write nothing.
//!
//! A hit reads the metadata only as far as it serves (`cache::hit_entry`: the key,
//! the compiler command and the artefact list, the other fields stepped over), with every
//! check above. So `hipjit cache verify`, which decodes it whole, may report bad an entry whose
//! other fields do not decode (hipjit never writes one) that a hit serves, its artefacts
//! matching their sha256 sums; and [`DiskCache::put`] replaces an entry that either read
//! refuses.
//!
//! A read is four system calls: `open`, one `fstat` of the descriptor (kind, size, owner,
//! mode, time), one `read` of the size it gave, `close`: no `read` looks for the end, since
//! entries are renamed into place whole, never written in place, and verified by their own
//! checksum, sha256 sums and key (bytes appended after the `fstat` are not read).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::key::{hex, sha256, CacheKey, TrackedHeader, CACHE_FORMAT_VERSION};
use crate::compiler::{CompileOptions, CompilerIdentity};
use crate::fs;

/// The environment variable listing cache roots.
pub const CACHE_DIR_ENV: &str = "HIPJIT_CACHE_DIR";
/// The environment variable setting the written root's size cap: a size ([`parse_size`]) or
/// `unlimited`.
pub const MAX_SIZE_ENV: &str = "HIPJIT_CACHE_MAX_SIZE";
/// The written root's size cap when nothing sets one: 5 GiB (ccache's default is 5 GB).
pub const DEFAULT_MAX_BYTES: u64 = 5 << 30;
/// A file of this name in a root declares the root shared between users.
pub const SHARED_MARKER: &str = "HIPJIT_SHARED";
/// The first bytes of every entry file.
pub const ENTRY_MAGIC: &[u8; 8] = b"HIPJITCE";
/// How old a temporary file in `<root>/v1/tmp` must be for [`DiskCache::clear`] and
/// [`DiskCache::prune`] to remove it: one hour.
pub const STALE_TEMPORARY: Duration = Duration::from_secs(3600);
/// How recent an entry's least-recently-used mark (its modification time) must be for a hit
/// to leave it alone: one hour. A hit in the written root sets the mark only when it is
/// older than that (or more than that in the future), so that most hits write nothing; the
/// order [`DiskCache::prune`] removes entries in is exact to within this granularity (an
/// entry used a minute ago may count as used up to an hour earlier).
pub const LRU_GRANULARITY: Duration = Duration::from_secs(3600);
/// The largest entry file read (bytes): a code object of at most
/// [`fs::read::CODE_OBJECT_LIMIT`] and its dumps. A bigger file is a bad entry.
pub const ENTRY_LIMIT: u64 = 2 * fs::read::CODE_OBJECT_LIMIT;
pub(crate) use crate::fs::cache_root::LAYOUT_DIR;
const ENTRY_EXT: &str = "hjc";
/// Magic, format version, metadata length: the bytes before the metadata.
pub(super) const PREFIX_LEN: usize = 8 + 4 + 8;
/// The checksum after the metadata.
pub(super) const CHECKSUM_LEN: usize = 16;

/// Size and sha256 of one artefact in an entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtefactMeta {
    /// `code-object` (hipcc's output), `llvm-ir.bc`, `isa.s`; `cubin` (nvcc's output, on HIP's
    /// NVIDIA platform).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
}

/// The metadata record of an entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    /// [`CACHE_FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// The key, hex.
    pub key: String,
    /// The compiler command line.
    pub command: Vec<String>,
    /// The compiler.
    pub compiler: CompilerIdentity,
    /// The options compiled with.
    pub options: CompileOptions,
    /// The headers hashed into the key.
    pub tracked_headers: Vec<TrackedHeader>,
    /// The non-system headers the compiler read (its dependency list), for
    /// [`DiskCache::verify`].
    pub dependencies: Vec<PathBuf>,
    /// When written, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The artefacts, in file order.
    pub artefacts: Vec<ArtefactMeta>,
}

/// A verified entry read from disk.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its key.
    pub key: CacheKey,
    /// Its file.
    pub path: PathBuf,
    /// Its metadata.
    pub meta: EntryMeta,
    data: Vec<u8>,
    offsets: Vec<(usize, usize)>,
}

impl Entry {
    /// The bytes of the artefact called `name`, when the entry has one. `meta` is public and
    /// may have been edited since the read: an artefact it lists that the file did not hold is
    /// `None`.
    pub fn artefact(&self, name: &str) -> Option<&[u8]> {
        let i = self.meta.artefacts.iter().position(|a| a.name == name)?;
        let &(start, len) = self.offsets.get(i)?;
        self.data.get(start..start.checked_add(len)?)
    }
}

/// A held cross-process compile lock ([`DiskCache::lock`]); released on drop.
#[derive(Debug)]
pub struct KeyLock {
    _file: File,
}

/// What [`DiskCache::lock`] got.
#[derive(Debug)]
pub enum LockOutcome {
    /// The lock, held until dropped.
    Held(KeyLock),
    /// Another process held it for the whole wait (a compile longer than the wait, a stopped
    /// process, another user): the caller compiles without it.
    TimedOut {
        /// The lock file.
        path: PathBuf,
    },
    /// No lock can be had here (a lock directory that cannot be made, a filesystem without
    /// `flock`): the caller compiles without it. Holds the reason.
    Unavailable(String),
}

/// One cache root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The directory.
    pub path: PathBuf,
    /// Whether hipjit writes here (only the first root).
    pub writable: bool,
    /// Whether it holds [`SHARED_MARKER`].
    pub shared: bool,
    /// The group a shared root is shared with (the root directory's group); `None` for a
    /// private root or one that does not exist.
    pub group: Option<u32>,
    /// Whether the root is closed to everyone but this user: a private root whose directory
    /// grants group and others nothing (mode `0700` or narrower, so no ACL entry grants
    /// anything either), owned by this user. Nobody else (but the superuser) can reach inside,
    /// so the directories in it need no check of their own when an entry is read.
    pub closed: bool,
}

/// An entry found bad while reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadEntry {
    /// Its file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
    /// Whether it is in the written root (and will be replaced) or a read-only one (skipped).
    pub writable_root: bool,
}

/// The outcome of [`DiskCache::get`].
#[derive(Debug, Default)]
pub struct Lookup {
    /// The first valid entry, when any root has one.
    pub entry: Option<Entry>,
    /// Bad entries met on the way.
    pub bad: Vec<BadEntry>,
}

/// Disk cache errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// No cache directory could be determined.
    #[error("no cache directory: set HIPJIT_CACHE_DIR, XDG_CACHE_HOME or HOME")]
    NoRoot,
    /// A cache root is the empty path, which would be the current directory without saying
    /// so: name a directory (`.` for the current one).
    #[error("cache root {index} is an empty path: name a directory (`.` for the current one)")]
    EmptyRoot {
        /// Its position in the list of roots (0: the written one).
        index: usize,
    },
    /// A root or entry is owned by another user or writable by others, and the root is not
    /// declared shared.
    #[error("refusing cache path {}: {reason} (declare the root shared with a file named HIPJIT_SHARED in it)", path.display())]
    Unsafe {
        /// The root or entry.
        path: PathBuf,
        /// Owner or mode problem.
        reason: String,
    },
    /// A cache root exists and is not a directory (nor a link to one).
    #[error("cache root {} is a {kind}, not a directory", path.display())]
    NotADirectory {
        /// The root.
        path: PathBuf,
        /// What it is (`regular file`, `FIFO`...; `dangling symbolic link`).
        kind: &'static str,
    },
    /// A root's format directory (`<root>/v1`) exists and is not a real directory (a symbolic
    /// link, a regular file...): it is never followed, listed or cleared.
    #[error("cache directory {} is a {kind}, not a directory; refusing to read or remove anything through it", path.display())]
    LayoutNotADirectory {
        /// The format directory.
        path: PathBuf,
        /// What it is (`symbolic link`, `regular file`...).
        kind: &'static str,
    },
    /// A filesystem operation failed.
    #[error("cache I/O on {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The metadata could not be encoded.
    #[error("cannot encode cache metadata: {0}")]
    Encode(String),
    /// `HIPJIT_CACHE_MAX_SIZE` is neither a size nor `unlimited`.
    #[error("{MAX_SIZE_ENV}={value:?}: {reason} (or `unlimited`)")]
    BadMaxSize {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A write was asked of a cache opened read-only ([`DiskCache::open_read_only`]).
    #[error("the cache roots were opened read-only (for inspection): nothing is written to {}", path.display())]
    ReadOnly {
        /// The root that would have been written.
        path: PathBuf,
    },
}

/// Entry count and size of one root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootStats {
    /// The root.
    pub root: Root,
    /// Entry files.
    pub entries: u64,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// One entry file as listed (not verified).
#[derive(Clone, Debug)]
pub struct EntrySummary {
    /// The root holding it.
    pub root: PathBuf,
    /// Its file.
    pub path: PathBuf,
    /// Its key, when the file name is one.
    pub key: Option<CacheKey>,
    /// File size in bytes.
    pub bytes: u64,
    /// Last use (modification time).
    pub last_used: SystemTime,
}

/// What [`DiskCache::verify`] found for one entry.
#[derive(Clone, Debug)]
pub struct VerifiedEntry {
    /// The entry file.
    pub path: PathBuf,
    /// `Err(reason)` when the entry is bad or of another format.
    pub status: Result<(), String>,
    /// The cache format of an entry another hipjit wrote ([`CACHE_FORMAT_VERSION`] differs):
    /// not damage, never served (its key is of that format); `clear` removes it.
    pub other_format: Option<u32>,
    /// Headers the compiler read (its dependency list) that are not tracked in the key and lie outside the
    /// compiler's installation and the system directories (`/usr`, `/opt/rocm*`): editing them
    /// would not change the key.
    pub untracked: Vec<PathBuf>,
}

/// What [`DiskCache::prune`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries removed.
    pub removed: u64,
    /// Bytes freed.
    pub bytes_freed: u64,
    /// Bytes left in the written root.
    pub bytes_left: u64,
}

/// Where the written root's size cap came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapSource {
    /// Nothing set one: `DEFAULT_MAX_BYTES`.
    Default,
    /// `HIPJIT_CACHE_MAX_SIZE` ([`MAX_SIZE_ENV`]).
    Env,
    /// The caller ([`DiskCache::with_max_bytes`], `JitOptions::max_cache_bytes`).
    Caller,
}

impl CapSource {
    /// `default`, `HIPJIT_CACHE_MAX_SIZE` or `caller`, as `hipjit cache stats --json` and
    /// `hipjit doctor --json` report it.
    pub fn as_str(self) -> &'static str {
        match self {
            CapSource::Default => "default",
            CapSource::Env => MAX_SIZE_ENV,
            CapSource::Caller => "caller",
        }
    }
}

/// The written root's size cap `HIPJIT_CACHE_MAX_SIZE` sets, read through `var`: `None` for
/// `unlimited`; `DEFAULT_MAX_BYTES` when the variable is unset or empty.
///
/// Errors: [`CacheError::BadMaxSize`] for a value that is neither a size ([`parse_size`]) nor
/// `unlimited`.
pub fn max_bytes_from_env(
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(Option<u64>, CapSource), CacheError> {
    let Some(value) = var(MAX_SIZE_ENV).filter(|v| !v.is_empty()) else {
        return Ok((Some(DEFAULT_MAX_BYTES), CapSource::Default));
    };
    let bad = |reason: String| CacheError::BadMaxSize {
        value: value.to_string_lossy().into_owned(),
        reason,
    };
    let text = value.to_str().ok_or_else(|| bad("not UTF-8".to_owned()))?;
    if text.trim().eq_ignore_ascii_case("unlimited") {
        return Ok((None, CapSource::Env));
    }
    Ok((Some(parse_size(text).map_err(bad)?), CapSource::Env))
}

/// A size in bytes: a whole or decimal number, with an optional `K`, `M`, `G` or `T` suffix
/// (binary units: 1K = 1024 bytes; `KB`, `KiB` and lower case accepted), e.g. `500M`, `2G`,
/// `1.5G`.
///
/// Errors: the text, in words, for anything else or a size above `u64::MAX`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid size '{text}': expected bytes or a number with a K, M, G or T suffix (binary units), e.g. 500M or 2G"
        )
    };
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, shift) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 10),
        Some('m') => (&body[..body.len() - 1], 20),
        Some('g') => (&body[..body.len() - 1], 30),
        Some('t') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let num = num.trim();
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(1u64 << shift)
            .ok_or_else(|| format!("invalid size '{text}': larger than {} bytes", u64::MAX));
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    let v = f * (1u64 << shift) as f64;
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(v as u64)
}

/// The content-addressed disk cache (see the module documentation).
#[derive(Clone, Debug)]
pub struct DiskCache {
    roots: Vec<Root>,
    max_bytes: Option<u64>,
    cap_from: CapSource,
    /// The written root's size at its last listing plus what this cache (and its clones)
    /// wrote since; `None` until the first write after opening lists it.
    usage: std::sync::Arc<parking_lot::Mutex<Option<u64>>>,
}

impl DiskCache {
    /// Opens the roots named by `HIPJIT_CACHE_DIR`, or the default root, with the size cap
    /// of `HIPJIT_CACHE_MAX_SIZE` (`max_bytes_from_env`).
    ///
    /// Errors: as [`DiskCache::open`]; [`CacheError::NoRoot`] when neither the variable nor
    /// `XDG_CACHE_HOME`/`HOME` is set; [`CacheError::BadMaxSize`].
    pub fn from_env() -> Result<DiskCache, CacheError> {
        let roots = roots_from_env(|k| std::env::var_os(k)).ok_or(CacheError::NoRoot)?;
        DiskCache::open(&roots)?.with_max_bytes_from_env()
    }

    /// Opens `roots`: the first is created (mode 0700) when missing and written; the others
    /// are read when they exist. The written root's size cap is `DEFAULT_MAX_BYTES`
    /// (`HIPJIT_CACHE_MAX_SIZE` is not read: [`DiskCache::with_max_bytes_from_env`]).
    ///
    /// Errors: [`CacheError::EmptyRoot`] for an empty path (it would silently be the current
    /// directory), [`CacheError::Io`] creating the first root, [`CacheError::Unsafe`] when a
    /// root is owned by another user or writable by group/others and not declared shared.
    pub fn open(roots: &[PathBuf]) -> Result<DiskCache, CacheError> {
        Self::open_roots(roots, true)
    }

    /// [`DiskCache::open`] (`write_first`) or [`DiskCache::open_read_only`].
    fn open_roots(roots: &[PathBuf], write_first: bool) -> Result<DiskCache, CacheError> {
        if let Some(index) = roots.iter().position(|p| p.as_os_str().is_empty()) {
            return Err(CacheError::EmptyRoot { index });
        }
        let mut out = Vec::new();
        for (i, path) in roots.iter().enumerate() {
            out.push(open_root(path, write_first && i == 0)?);
        }
        if out.is_empty() {
            return Err(CacheError::NoRoot);
        }
        Ok(DiskCache {
            roots: out,
            max_bytes: Some(DEFAULT_MAX_BYTES),
            cap_from: CapSource::Default,
            usage: Default::default(),
        })
    }

    /// Opens `roots` for reading only, as tools that inspect the cache need
    /// (`hipjit cache explain`): nothing is created or written in any of them (no root, no
    /// `TAG_FILE`, no entry, lock or mark of use); a root that does not exist
    /// reads as empty. Every root is `writable: false`; [`DiskCache::put`],
    /// [`DiskCache::clear`] and [`DiskCache::prune`] return [`CacheError::ReadOnly`] and
    /// [`DiskCache::lock`] `LockOutcome::Unavailable`.
    ///
    /// Errors: as [`DiskCache::open`], but for creating the first root.
    pub fn open_read_only(roots: &[PathBuf]) -> Result<DiskCache, CacheError> {
        Self::open_roots(roots, false)
    }

    /// Whether the first root is written ([`DiskCache::open`]); `false` for a cache opened
    /// with [`DiskCache::open_read_only`].
    pub fn is_writable(&self) -> bool {
        self.roots.first().is_some_and(|r| r.writable)
    }

    /// The written root, or [`CacheError::ReadOnly`].
    fn written_root(&self) -> Result<&Root, CacheError> {
        match self.roots.first() {
            Some(r) if r.writable => Ok(r),
            Some(r) => Err(CacheError::ReadOnly {
                path: r.path.clone(),
            }),
            None => Err(CacheError::NoRoot),
        }
    }

    /// Sets the written root's size cap in bytes (see the module documentation): after a
    /// write that takes the root past it, least recently used entries are removed until the
    /// root holds at most 90% of it. `None` or `Some(u64::MAX)`: no cap.
    pub fn with_max_bytes(mut self, max_bytes: Option<u64>) -> Self {
        self.max_bytes = max_bytes.filter(|&m| m != u64::MAX);
        self.cap_from = CapSource::Caller;
        self
    }

    /// Sets the written root's size cap `HIPJIT_CACHE_MAX_SIZE` gives, else
    /// `DEFAULT_MAX_BYTES` (`max_bytes_from_env`).
    ///
    /// Errors: [`CacheError::BadMaxSize`].
    pub fn with_max_bytes_from_env(mut self) -> Result<Self, CacheError> {
        let (max, from) = max_bytes_from_env(|k| std::env::var_os(k))?;
        self.max_bytes = max;
        self.cap_from = from;
        Ok(self)
    }

    /// The written root's size cap in bytes (`None`: no cap), and where it came from.
    pub fn max_bytes(&self) -> (Option<u64>, CapSource) {
        (self.max_bytes, self.cap_from)
    }

    /// The roots, written one first.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// The path of `key`'s entry in `root`.
    pub fn entry_path(root: &Path, key: &CacheKey) -> PathBuf {
        let mut file = key.to_hex();
        let dir = root.join(LAYOUT_DIR).join(&file[..2]);
        file.push('.');
        file.push_str(ENTRY_EXT);
        dir.join(file)
    }

    /// Looks `key` up in each root in order; the first valid entry wins.
    pub fn get(&self, key: &CacheKey) -> Lookup {
        self.lookup(key, true)
    }

    /// [`DiskCache::get`] without marking the entry used (its modification time, which
    /// pruning goes by, is left alone): for tools that inspect the cache
    /// (`hipjit cache explain`).
    pub fn peek(&self, key: &CacheKey) -> Lookup {
        self.lookup(key, false)
    }

    fn lookup(&self, key: &CacheKey, mark_used: bool) -> Lookup {
        let (entry, bad) = self.lookup_with(key, mark_used, Entry::from_bytes);
        Lookup { entry, bad }
    }

    /// [`DiskCache::get`] for a hit that serves the entry's artefacts: read and verified as
    /// any entry (the checksum of its header and metadata, its key, each artefact's size and
    /// sha256), its metadata decoded only as far as the key, the command and the artefact
    /// list ([`super::hit_entry`]).
    pub(crate) fn get_hit(
        &self,
        key: &CacheKey,
    ) -> (Option<super::hit_entry::HitEntry>, Vec<BadEntry>) {
        self.lookup_with(key, true, |data, path, key| {
            super::hit_entry::HitEntry::from_bytes(data, path, key.ok_or("no key")?)
        })
    }

    /// The first entry for `key` that `parse` accepts, over the roots in order, and the bad
    /// entries met on the way; `mark_used`: the least-recently-used mark set on a hit.
    fn lookup_with<E>(
        &self,
        key: &CacheKey,
        mark_used: bool,
        parse: impl Fn(Vec<u8>, &Path, Option<&CacheKey>) -> Result<E, String>,
    ) -> (Option<E>, Vec<BadEntry>) {
        let mut bad = Vec::new();
        for root in &self.roots {
            let path = Self::entry_path(&root.path, key);
            match read_entry_open(&path, Some(key), root, Dirs::UnlessClosed, &parse) {
                Ok((entry, file, modified)) => {
                    if root.writable && mark_used {
                        // Least-recently-used bookkeeping, on the descriptor already open
                        // (`futimens`), and only when the mark is older than
                        // [`LRU_GRANULARITY`]; a failure (an entry of another user in a
                        // shared root) only skews pruning.
                        let now = SystemTime::now();
                        if needs_mark(modified, now) {
                            let _ = file.set_modified(now);
                        }
                    }
                    return (Some(entry), bad);
                }
                Err(ReadError::Missing) => {}
                Err(ReadError::Bad(reason)) => {
                    tracing::warn!(path = %path.display(), %reason, "bad hipjit cache entry");
                    bad.push(BadEntry {
                        path,
                        reason,
                        writable_root: root.writable,
                    })
                }
            }
        }
        (None, bad)
    }

    /// Writes an entry for `key` into the written root, unless a valid one is there already
    /// (then nothing is written). Returns the entry's path and whether this call published it.
    /// Prunes afterwards when a size cap is set.
    ///
    /// Errors: [`CacheError::Io`], [`CacheError::Encode`]; [`CacheError::ReadOnly`] for a
    /// cache opened with [`DiskCache::open_read_only`].
    pub fn put(
        &self,
        key: &CacheKey,
        meta: EntryMeta,
        artefacts: &[(&str, &[u8])],
    ) -> Result<(PathBuf, bool), CacheError> {
        self.put_gated(key, meta, artefacts, || true)
            .map(|p| p.expect("an open gate publishes"))
    }

    /// [`DiskCache::put`], but with the entry written and fsynced under its temporary name
    /// first, then published only when `gate` (called then, once, unless a valid entry is
    /// there already) says so: a header manifest written while its entry is (concurrently)
    /// written, and published only once the entry is. `Ok(None)` when the gate was shut
    /// (nothing published; the temporary file removed).
    ///
    /// Errors: as [`DiskCache::put`].
    pub(crate) fn put_gated(
        &self,
        key: &CacheKey,
        meta: EntryMeta,
        artefacts: &[(&str, &[u8])],
        gate: impl FnOnce() -> bool,
    ) -> Result<Option<(PathBuf, bool)>, CacheError> {
        let root = self.written_root()?;
        let path = Self::entry_path(&root.path, key);
        // Kept only when both reads accept it: an entry the hit's own read refuses while the
        // full read accepts it (metadata hipjit does not write, e.g. bytes after it) would
        // otherwise make every later request a compile, and never be replaced.
        let existing = read_entry_open(&path, Some(key), root, Dirs::UnlessClosed, |data, p, k| {
            super::hit_entry::HitEntry::from_bytes(data.clone(), p, k.ok_or("no key")?)?;
            Entry::from_bytes(data, p, k)
        });
        if existing.is_ok() {
            return Ok(Some((path, false)));
        }
        let phase = crate::phases::start("publishing: entry: encoding");
        let bytes = encode_entry(key, meta, artefacts)?;
        phase.end();
        let phase = crate::phases::start("publishing: entry: temporary file written, fsynced");
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| CacheError::Io { path: p, source }
        };
        let dir = path.parent().unwrap_or(&root.path).to_path_buf();
        let tmp_dir = root.path.join(LAYOUT_DIR).join("tmp");
        for d in [&dir, &tmp_dir] {
            create_dirs(&root.path, d, root.shared).map_err(io(d))?;
        }
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", key.to_hex()))
            .tempfile_in(&tmp_dir)
            .map_err(io(&tmp_dir))?;
        {
            let tmp_path = tmp.path().to_path_buf();
            let tmp_io = || io(&tmp_path);
            let f = tmp.as_file_mut();
            f.write_all(&bytes).map_err(tmp_io())?;
            if root.shared {
                f.set_permissions(std::fs::Permissions::from_mode(0o644))
                    .map_err(tmp_io())?;
            }
            f.sync_all().map_err(tmp_io())?;
        }
        phase.end();
        if !gate() {
            return Ok(None);
        }
        let phase = crate::phases::start("publishing: entry: linked, directory fsynced");
        // What sits at the entry path and is not a regular file (a dangling or planted
        // symbolic link, a directory) belongs to the written root: it goes, so that this key
        // can be published at all (a rename cannot replace a directory, and `link` refuses any
        // existing name).
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            remove_entry_path(&path)?;
        }
        let published = match existing {
            Err(ReadError::Missing) => match tmp.persist_noclobber(&path) {
                Ok(_) => true,
                // Another process published first: keep theirs when it is a file (a bad one is
                // replaced by the next write).
                Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                        false
                    } else {
                        remove_entry_path(&path)?;
                        e.file
                            .persist_noclobber(&path)
                            .map_err(|e| io(&path)(e.error))?;
                        true
                    }
                }
                Err(e) => return Err(io(&path)(e.error)),
            },
            // A bad entry: replace it atomically.
            _ => {
                tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
                true
            }
        };
        if let Ok(d) = File::open(&dir) {
            d.sync_all().map_err(io(&dir))?;
        }
        phase.end();
        if let Some(max) = self.max_bytes {
            let _phase = crate::phases::start("publishing: entry: size cap");
            self.keep_under_cap(max, bytes.len() as u64)?;
        }
        Ok(Some((path, published)))
    }

    /// An unnamed temporary file in the written root's `v1/tmp` (same filesystem as the
    /// entries; removed when closed, and by the kernel when the process dies): room for what
    /// [`super::bundle::import`] checks before it publishes anything.
    ///
    /// Errors: [`CacheError::Io`]; [`CacheError::ReadOnly`] for a cache opened with
    /// [`DiskCache::open_read_only`].
    pub(super) fn staging_file(&self) -> Result<File, CacheError> {
        let root = self.written_root()?;
        let tmp_dir = root.path.join(LAYOUT_DIR).join("tmp");
        let io = |source| CacheError::Io {
            path: tmp_dir.clone(),
            source,
        };
        create_dirs(&root.path, &tmp_dir, root.shared).map_err(io)?;
        tempfile::tempfile_in(&tmp_dir).map_err(io)
    }

    /// Takes the cross-process compile lock of `key` in the written root (`flock(2)` on
    /// `<root>/v1/locks/<key>.lock`), waiting at most `wait` for it: the JIT holds it while it
    /// compiles a missing key, so processes asking for the same key at once compile it once.
    /// The lock only saves work; correctness rests on the atomic publish, so a wait that runs
    /// out (`LockOutcome::TimedOut`: the holder is stopped, slow, or another user) or a lock
    /// that cannot be had (`LockOutcome::Unavailable`) lets the caller compile anyway.
    /// Released when the returned guard drops (or the process dies).
    #[doc(hidden)]
    pub fn lock(&self, key: &CacheKey, wait: Duration) -> LockOutcome {
        use std::os::fd::AsRawFd;
        let root = match self.written_root() {
            Ok(r) => r,
            Err(e) => return LockOutcome::Unavailable(e.to_string()),
        };
        let dir = root.path.join(LAYOUT_DIR).join("locks");
        if let Err(e) = create_dirs(&root.path, &dir, root.shared) {
            return LockOutcome::Unavailable(format!("{}: {e}", dir.display()));
        }
        let path = dir.join(format!("{}.lock", key.to_hex()));
        let file = match std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(if root.shared { 0o664 } else { 0o600 })
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) => return LockOutcome::Unavailable(format!("{}: {e}", path.display())),
        };
        let deadline = std::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is involved.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return LockOutcome::Held(KeyLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                _ => return LockOutcome::Unavailable(format!("{}: {e}", path.display())),
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return LockOutcome::TimedOut { path };
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Lists the entry files of every root (not verified), written root first.
    ///
    /// Errors: [`CacheError::LayoutNotADirectory`] when a root's format directory is not a real
    /// directory (a symbolic link is never followed); [`CacheError::Io`] when it cannot be read.
    pub fn list(&self) -> Result<Vec<EntrySummary>, CacheError> {
        let mut out = Vec::new();
        for root in &self.roots {
            out.extend(list_root(&root.path)?);
        }
        Ok(out)
    }

    /// Entry count and bytes per root.
    ///
    /// Errors: as [`DiskCache::list`].
    pub fn stats(&self) -> Result<Vec<RootStats>, CacheError> {
        self.roots
            .iter()
            .map(|root| {
                let entries = list_root(&root.path)?;
                Ok(RootStats {
                    root: root.clone(),
                    entries: entries.len() as u64,
                    bytes: entries.iter().map(|e| e.bytes).sum(),
                })
            })
            .collect()
    }

    /// Reads and verifies every entry of every root, and flags untracked headers.
    ///
    /// Errors: as [`DiskCache::list`].
    pub fn verify(&self) -> Result<Vec<VerifiedEntry>, CacheError> {
        let mut out = Vec::new();
        for root in &self.roots {
            for e in list_root(&root.path)? {
                // Every rule, the directory's included: a closed root may be opened up later.
                let read = read_entry(&e.path, e.key.as_ref(), root, Dirs::Always);
                let (status, untracked) = match read {
                    Ok(entry) => (Ok(()), untracked_headers(&entry.meta)),
                    Err(ReadError::Missing) => (Err("vanished while verifying".into()), vec![]),
                    Err(ReadError::Bad(r)) => (Err(r), vec![]),
                };
                let other_format = status.as_ref().err().and_then(|_| entry_format(&e.path));
                out.push(VerifiedEntry {
                    path: e.path,
                    status,
                    untracked,
                    other_format,
                });
            }
        }
        Ok(out)
    }

    /// Removes every entry of the written root, and its stale temporary files (older than
    /// `STALE_TEMPORARY`: a younger one may be an entry another process is writing); returns
    /// how many entries were removed.
    ///
    /// Errors: [`CacheError::LayoutNotADirectory`] (nothing is removed) when the root's format
    /// directory is not a real directory; [`CacheError::Io`] for a file that could not be
    /// removed.
    pub fn clear(&self) -> Result<u64, CacheError> {
        let root = self.written_root()?;
        let mut n = 0;
        for e in list_root(&root.path)? {
            remove_entry_path(&e.path)?;
            n += 1;
        }
        for f in stale_temporaries(&root.path) {
            remove(&f)?;
        }
        Ok(n)
    }

    /// After a write of `written` bytes: lists the written root when it may be past `max`
    /// (the first write, or the last listing's total plus what was written since is past it),
    /// and prunes it to 90% of `max` when it is (see the module documentation).
    fn keep_under_cap(&self, max: u64, written: u64) -> Result<(), CacheError> {
        let mut usage = self.usage.lock();
        if let Some(u) = *usage {
            let now = u.saturating_add(written);
            if now <= max {
                *usage = Some(now);
                return Ok(());
            }
        }
        let root = self.written_root()?;
        let entries = list_root(&root.path)?;
        let total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= max {
            *usage = Some(total);
            return Ok(());
        }
        let report = prune_listed(root, entries, max - max / 10)?;
        *usage = Some(report.bytes_left);
        Ok(())
    }

    /// Removes least recently used entries of the written root until it holds at most
    /// `max_bytes`, and temporary files older than `STALE_TEMPORARY`.
    ///
    /// Errors: as [`DiskCache::clear`].
    pub fn prune(&self, max_bytes: u64) -> Result<PruneReport, CacheError> {
        let root = self.written_root()?;
        let report = prune_listed(root, list_root(&root.path)?, max_bytes)?;
        *self.usage.lock() = Some(report.bytes_left);
        Ok(report)
    }
}

/// Removes least recently used entries of `entries` (the listing of `root`) until they hold
/// at most `max_bytes`, and `root`'s temporary files older than `STALE_TEMPORARY`.
fn prune_listed(
    root: &Root,
    mut entries: Vec<EntrySummary>,
    max_bytes: u64,
) -> Result<PruneReport, CacheError> {
    entries.sort_by_key(|e| e.last_used);
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    let mut report = PruneReport::default();
    for e in entries {
        if total <= max_bytes {
            break;
        }
        remove_entry_path(&e.path)?;
        total -= e.bytes;
        report.removed += 1;
        report.bytes_freed += e.bytes;
    }
    report.bytes_left = total;
    for f in stale_temporaries(&root.path) {
        let _ = std::fs::remove_file(f);
    }
    Ok(report)
}

/// The bytes of an entry file for `key` (see the module documentation for the layout):
/// `meta` with its format version, key and artefact list filled in, then `artefacts` (name
/// and bytes) back to back. What [`DiskCache::put`] writes and the remote tier stores.
///
/// Errors: [`CacheError::Encode`] when the metadata does not encode.
pub fn encode_entry(
    key: &CacheKey,
    mut meta: EntryMeta,
    artefacts: &[(&str, &[u8])],
) -> Result<Vec<u8>, CacheError> {
    meta.format_version = CACHE_FORMAT_VERSION;
    meta.key = key.to_hex();
    meta.artefacts = artefacts
        .iter()
        .map(|(name, bytes)| ArtefactMeta {
            name: name.to_string(),
            size: bytes.len() as u64,
            sha256: hex(&sha256(bytes)),
        })
        .collect();
    let meta_bytes = rmp_serde::to_vec(&meta).map_err(|e| CacheError::Encode(e.to_string()))?;
    let total = PREFIX_LEN
        + meta_bytes.len()
        + CHECKSUM_LEN
        + artefacts.iter().map(|a| a.1.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(meta_bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&meta_bytes);
    let checksum = entry_checksum(&out);
    out.extend_from_slice(&checksum);
    for (_, bytes) in artefacts {
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// The checksum of an entry: the XXH3-128 of its header and metadata (`head`: every byte
/// before the checksum), little-endian. The artefacts are covered through the size and sha256
/// the metadata records for each, so that a read hashes every byte once. XXH3 rather than
/// sha256: the metadata lists every header a compile read (75 KB for a source including
/// `hip_runtime.h` with hipcc 5.2.3), which sha256 takes about 80 µs to hash here and XXH3
/// about 5 µs, on every hit.
pub(super) fn entry_checksum(head: &[u8]) -> [u8; CHECKSUM_LEN] {
    xxhash_rust::xxh3::xxh3_128(head).to_le_bytes()
}

/// The roots named by `HIPJIT_CACHE_DIR` (empty items ignored), else the default root; `None`
/// when nothing can be determined.
pub fn roots_from_env(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<Vec<PathBuf>> {
    if let Some(v) = var(CACHE_DIR_ENV) {
        let roots: Vec<PathBuf> = std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !roots.is_empty() {
            return Some(roots);
        }
    }
    let base = match var("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(var("HOME").filter(|v| !v.is_empty())?).join(".cache"),
    };
    Some(vec![base.join("hipjit")])
}

/// The temporary files of `<root>/v1/tmp` last modified more than `STALE_TEMPORARY` ago:
/// left by a process that died while writing an entry.
fn stale_temporaries(root: &Path) -> Vec<PathBuf> {
    let Some(cutoff) = SystemTime::now().checked_sub(STALE_TEMPORARY) else {
        return Vec::new();
    };
    let Ok(Some(layout)) = layout_dir(root) else {
        return Vec::new();
    };
    let tmp = layout.join("tmp");
    if !std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|f| {
            f.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < cutoff)
        })
        .map(|f| f.path())
        .collect()
}

fn remove(path: &Path) -> Result<(), CacheError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CacheError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The key-named entries of `root`: `<root>/v1/<xx>/<key>.hjc` where `<xx>` is a real
/// directory (a symbolic link is not followed) named after the key's first two hex digits.
/// Anything else is not an entry and is never listed, read or removed. An entry may be a
/// non-regular file (a symbolic link, directory or FIFO planted there): it is listed (size 0
/// unless a regular file) so that `verify` reports it and `clear` removes it.
///
/// `<root>/v1` itself must be a real directory: a symbolic link there (or anything else that is
/// not a directory) is an error, never followed, so that nothing outside the root is listed or
/// removed. A missing one holds no entries.
fn list_root(root: &Path) -> Result<Vec<EntrySummary>, CacheError> {
    let mut out = Vec::new();
    let Some(layout) = layout_dir(root)? else {
        return Ok(out);
    };
    for sub in std::fs::read_dir(&layout)
        .map_err(|source| CacheError::Io {
            path: layout.clone(),
            source,
        })?
        .filter_map(Result::ok)
    {
        let name = sub.file_name();
        let Some(prefix) = name
            .to_str()
            .filter(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        else {
            continue;
        };
        if !sub.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let file_name = f.file_name();
            let Some(key) = file_name
                .to_str()
                .and_then(|n| n.strip_suffix(&format!(".{ENTRY_EXT}")))
                .and_then(|k| k.parse::<CacheKey>().ok())
                .filter(|k| k.to_hex().starts_with(prefix))
            else {
                continue;
            };
            // Not followed: a link is listed as itself.
            let Ok(m) = std::fs::symlink_metadata(f.path()) else {
                continue;
            };
            out.push(EntrySummary {
                root: root.to_path_buf(),
                path: f.path(),
                key: Some(key),
                bytes: if m.is_file() { m.len() } else { 0 },
                last_used: m.modified().unwrap_or(UNIX_EPOCH),
            });
        }
    }
    Ok(out)
}

/// `<root>/v1` when it is a real directory (checked with `lstat`: a symbolic link is not
/// followed), `None` when it does not exist, an error naming it when it is anything else.
fn layout_dir(root: &Path) -> Result<Option<PathBuf>, CacheError> {
    let layout = root.join(LAYOUT_DIR);
    match std::fs::symlink_metadata(&layout) {
        Ok(m) if m.is_dir() => Ok(Some(layout)),
        Ok(m) => Err(CacheError::LayoutNotADirectory {
            kind: fs::read::kind_name(m.file_type()),
            path: layout,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CacheError::Io {
            path: layout,
            source,
        }),
    }
}

/// Whether a hit at `now` sets the least-recently-used mark of an entry last marked
/// `modified`: when the mark is at least [`LRU_GRANULARITY`] away from `now`, either way (a
/// mark in the future, from a clock set back or a copied file, is put right too).
fn needs_mark(modified: SystemTime, now: SystemTime) -> bool {
    let apart = match now.duration_since(modified) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    apart >= LRU_GRANULARITY
}

/// Removes an entry path of the written root whatever it is, never following a link: a file
/// or link is unlinked, a directory removed with its contents (`remove_dir_all` does not follow
/// links inside either).
fn remove_entry_path(path: &Path) -> Result<(), CacheError> {
    let r = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CacheError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Creates `dir`, a directory below `root`, and its missing parents below `root`, each with
/// the root's mode set explicitly (`chmod` after `mkdir`, so the umask cannot narrow it):
/// `2775` in a shared root (group-writable; set-group-ID so that everything made inside
/// keeps the root's group), `0700` in a private one. Directories met on the way must be real
/// directories (a symbolic link is refused) and, in a private root, not writable by group or
/// others.
///
/// Errors: the OS error, or an `Other` error naming the directory and what is wrong with it.
fn create_dirs(root: &Path, dir: &Path, shared: bool) -> std::io::Result<()> {
    let rel = dir.strip_prefix(root).map_err(|_| {
        std::io::Error::other(format!("{} is not under {}", dir.display(), root.display()))
    })?;
    let mode = if shared { 0o2775 } else { 0o700 };
    let mut cur = root.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {
                if !shared && m.mode() & 0o022 != 0 {
                    return Err(std::io::Error::other(format!(
                        "{} is writable by group or others (mode {:o}) in a private cache root",
                        cur.display(),
                        m.mode() & 0o7777
                    )));
                }
            }
            Ok(m) => {
                return Err(std::io::Error::other(format!(
                    "{} is a {}, not a directory",
                    cur.display(),
                    fs::read::kind_name(m.file_type())
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match std::fs::DirBuilder::new().mode(mode).create(&cur) {
                    Ok(()) => {
                        std::fs::set_permissions(&cur, std::fs::Permissions::from_mode(mode))?
                    }
                    // Made by another process meanwhile: theirs has the same mode.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens one root of [`DiskCache::open`]: creates it when it is the written one and missing,
/// then applies the trust rules (see the module documentation). One `lstat` of the root
/// answers both "does it exist" and "what is it" (a `stat` follows only a root that is a
/// symbolic link), then one `lstat` of [`SHARED_MARKER`] and, in a written root this call
/// created (the only one tagged, [`super::tag`]), of the cache directory tag: every check of
/// the root made once.
///
/// A read-only root that does not exist or cannot be reached is kept, unchecked: nothing can
/// be read from it. The written root must be reachable ([`CacheError::Io`] otherwise).
fn open_root(path: &Path, writable: bool) -> Result<Root, CacheError> {
    let unchecked = || Root {
        path: path.to_path_buf(),
        writable,
        shared: false,
        group: None,
        closed: false,
    };
    let mut link = std::fs::symlink_metadata(path);
    // Whether this call made the root: only then is it tagged (a directory that was there may
    // hold anything, e.g. `HIPJIT_CACHE_DIR=$HOME`, which a tag would keep out of backups).
    let created = writable && matches!(&link, Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    if created {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(|source| CacheError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        link = std::fs::symlink_metadata(path);
    }
    let link = match link {
        Ok(m) => m,
        // The written root must be reachable: say why it is not.
        Err(source) if writable => {
            return Err(CacheError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
        // A read-only root that does not exist, or cannot be reached (a directory above it
        // not searchable), holds nothing this process can read.
        Err(_) => return Ok(unchecked()),
    };
    let unsafe_root = |reason: String| CacheError::Unsafe {
        path: path.to_path_buf(),
        reason,
    };
    let me = crate::fs::user::uid();
    // A root that is a symbolic link must itself be owned by this user or the superuser
    // (whoever owns the link decides where the cache is); then the directory it names counts.
    let dir = if link.file_type().is_symlink() {
        if link.uid() != me && link.uid() != 0 {
            return Err(unsafe_root(format!(
                "a symbolic link owned by uid {}, neither this user (uid {me}) nor the superuser",
                link.uid()
            )));
        }
        match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CacheError::NotADirectory {
                    path: path.to_path_buf(),
                    kind: "dangling symbolic link",
                })
            }
            Err(e) => return Err(unsafe_root(e.to_string())),
        }
    } else {
        link
    };
    if !dir.is_dir() {
        return Err(CacheError::NotADirectory {
            path: path.to_path_buf(),
            kind: fs::read::kind_name(dir.file_type()),
        });
    }
    // Declared shared by a regular file [`SHARED_MARKER`] owned by the root directory's owner
    // or the superuser: a marker anyone else dropped into a directory they can write declares
    // nothing, so it cannot make another user's root trusted.
    let shared = std::fs::symlink_metadata(path.join(SHARED_MARKER))
        .is_ok_and(|marker| marker.is_file() && (marker.uid() == dir.uid() || marker.uid() == 0));
    if shared {
        // Shared with its group, nobody else.
        if dir.mode() & 0o002 != 0 {
            return Err(unsafe_root(format!(
                "a shared root is shared with its group only, and this one is writable by \
                 others (mode {:o}): chmod o-w it",
                dir.mode() & 0o7777
            )));
        }
    } else {
        check_meta(dir.uid(), dir.mode(), me).map_err(unsafe_root)?;
    }
    if created {
        crate::fs::cache_root::ensure(path);
    }
    Ok(Root {
        path: path.to_path_buf(),
        writable,
        shared,
        group: shared.then_some(dir.gid()),
        // `check_meta` passed: owned by this user.
        closed: !shared && dir.mode() & 0o077 == 0,
    })
}

/// Whether user `uid` belongs to group `gid` (as its primary group or a listed member).
fn user_in_group(uid: u32, gid: u32) -> bool {
    // The user and group databases may be remote (NSS): what they said cannot be checked by
    // `stat`, so a lookup that asked is not remembered by the hit memo.
    crate::fs::observe::unrecordable();
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: getpwuid_r fills `pwd` with pointers into `buf`, which outlives their use.
    let (primary, name) = unsafe {
        let mut pwd = std::mem::zeroed::<libc::passwd>();
        let mut out = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut out);
        if rc != 0 || out.is_null() {
            return false;
        }
        (
            pwd.pw_gid,
            std::ffi::CStr::from_ptr(pwd.pw_name).to_bytes().to_vec(),
        )
    };
    if primary == gid {
        return true;
    }
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: getgrgid_r fills `grp` with pointers into `buf`; gr_mem is a NULL-terminated
    // array of NUL-terminated names inside it.
    unsafe {
        let mut grp = std::mem::zeroed::<libc::group>();
        let mut out = std::ptr::null_mut();
        let rc = libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut out);
        if rc != 0 || out.is_null() || grp.gr_mem.is_null() {
            return false;
        }
        let mut p = grp.gr_mem;
        while !(*p).is_null() {
            if std::ffi::CStr::from_ptr(*p).to_bytes() == name.as_slice() {
                return true;
            }
            p = p.add(1);
        }
    }
    false
}

/// The trust rule for an entry file of `root`: in a private root, owned by this user and not
/// writable by group or others, in a directory not writable by group or others; in a shared
/// root, owned by a member of the root's group (or the superuser) and not writable by others.
///
/// With [`Dirs::UnlessClosed`] (lookups) the directory's check is skipped in a
/// [`Root::closed`] root, saving an `lstat` of every read: nobody but this user and the
/// superuser can reach inside such a root, so nobody else can make or replace anything in its
/// directories, whatever their modes. Nor would it serve them anything: what another user
/// could place there (through a descriptor kept from before the root was closed) is a file
/// of theirs, refused by the owner check on the open descriptor, or one of this user's
/// entries moved to another key's name, refused by the key inside it.
/// [`DiskCache::verify`] checks every directory ([`Dirs::Always`]): a closed root may be
/// opened up later, and then its lookups check the directories again.
fn check_entry(
    m: &crate::fs::stat::Stat,
    path: &Path,
    root: &Root,
    dirs: Dirs,
) -> Result<(), String> {
    let me = crate::fs::user::uid();
    if !root.shared {
        check_meta(m.uid, m.mode, me)?;
        if root.closed && dirs == Dirs::UnlessClosed {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            let d = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
            if d.mode() & 0o022 != 0 {
                return Err(format!(
                    "its directory {} is writable by group or others (mode {:o}) in a private root",
                    dir.display(),
                    d.mode() & 0o7777
                ));
            }
        }
        return Ok(());
    }
    if m.mode & 0o002 != 0 {
        return Err(format!("writable by others (mode {:o})", m.mode & 0o7777));
    }
    let Some(gid) = root.group else {
        return Ok(());
    };
    if m.uid == me || m.uid == 0 || user_in_group(m.uid, gid) {
        Ok(())
    } else {
        Err(format!(
            "owned by uid {}, who is not in the shared root's group (gid {gid})",
            m.uid
        ))
    }
}

/// Owned (`uid`) by user `me` and not writable by group or others (`mode`).
fn check_meta(uid: u32, mode: u32, me: u32) -> Result<(), String> {
    if uid != me {
        return Err(format!("owned by uid {uid}, not this user (uid {me})"));
    }
    if mode & 0o022 != 0 {
        return Err(format!(
            "writable by group or others (mode {:o})",
            mode & 0o7777
        ));
    }
    Ok(())
}

/// Whether an entry read checks its directory in a [`Root::closed`] root ([`check_entry`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dirs {
    Always,
    UnlessClosed,
}

/// The cache format an entry file's header names, when it is a hipjit entry of a format other
/// than [`CACHE_FORMAT_VERSION`]: its first 12 bytes, read without blocking.
fn entry_format(path: &Path) -> Option<u32> {
    use std::io::Read;
    let (mut f, _) = crate::fs::read::open_regular_nofollow(path, u64::MAX, "cache entry").ok()?;
    let mut head = [0u8; 12];
    f.read_exact(&mut head).ok()?;
    format_of(&head).filter(|&v| v != CACHE_FORMAT_VERSION)
}

/// The cache format an entry's first 12 bytes name ([`ENTRY_MAGIC`], then the version as `u32`
/// LE); `None` when they are not a hipjit entry's.
pub(super) fn format_of(head: &[u8]) -> Option<u32> {
    let version = head.get(8..12)?;
    (head.get(..8)? == ENTRY_MAGIC)
        .then(|| u32::from_le_bytes([version[0], version[1], version[2], version[3]]))
}

enum ReadError {
    Missing,
    Bad(String),
}

fn read_entry(
    path: &Path,
    key: Option<&CacheKey>,
    root: &Root,
    dirs: Dirs,
) -> Result<Entry, ReadError> {
    read_entry_open(path, key, root, dirs, Entry::from_bytes).map(|(entry, _, _)| entry)
}

/// [`read_entry`], also returning the entry's open file and its modification time (for the
/// least-recently-used mark of [`DiskCache::get`], set on the descriptor already open).
///
/// The system calls of a read: `open` (without following a link, without blocking), one
/// `fstat` on the descriptor (kind, size, owner and mode: no race with a rename), one `read`
/// of the size it gave, `close`. No `read` looks for the end: entries are written whole to a
/// temporary file and renamed into place, never written in place, and what is read is
/// verified by its own sha256 sums and key, so bytes appended after the `fstat` (by whoever
/// could write the file) are not read and cannot make a forged entry pass; a file that shrank
/// reads short and is a bad entry.
fn read_entry_open<E>(
    path: &Path,
    key: Option<&CacheKey>,
    root: &Root,
    dirs: Dirs,
    parse: impl Fn(Vec<u8>, &Path, Option<&CacheKey>) -> Result<E, String>,
) -> Result<(E, File, SystemTime), ReadError> {
    // Opened without blocking and checked on the descriptor: a FIFO or device planted at an
    // entry's path is a bad entry, not a hang.
    let (f, m) = match fs::read::open_regular_nofollow_stat(path, ENTRY_LIMIT, "a cache entry") {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Err(ReadError::Missing),
        Err(e) => return Err(ReadError::Bad(format!("cannot open: {}", e.reason()))),
    };
    let bad = ReadError::Bad;
    check_entry(&m, path, root, dirs).map_err(bad)?;
    let data = fs::read::read_known_size(&f, path, m.len())
        .map_err(|e| bad(format!("cannot read: {}", e.reason())))?;
    let modified = m.modified();
    let entry = parse(data, path, key).map_err(bad)?;
    Ok((entry, f, modified))
}

impl Entry {
    /// Parses and verifies the bytes of an entry file (see the module documentation for the
    /// layout): magic, format version, the checksum of the header and metadata, the metadata,
    /// the key it holds (equal to `key` when given), each artefact's size and sha256, and no
    /// trailing bytes. `path` is recorded as the entry's file.
    ///
    /// Errors: a message saying what is wrong and where (a bad entry).
    pub fn from_bytes(
        mut data: Vec<u8>,
        path: &Path,
        key: Option<&CacheKey>,
    ) -> Result<Entry, String> {
        let (meta_end, body) = frame(&data)?;
        let meta: EntryMeta = rmp_serde::from_slice(&data[PREFIX_LEN..meta_end])
            .map_err(|e| format!("metadata does not decode: {e}"))?;
        if let Some(key) = key {
            check_key(&meta.key, key)?;
        }
        let key = meta
            .key
            .parse()
            .map_err(|e: super::key::BadKey| e.to_string())?;
        let offsets = place_artefacts(
            &data,
            body,
            meta.artefacts
                .iter()
                .map(|a| (a.name.as_str(), a.size, a.sha256.as_str())),
        )?;
        data.drain(..body);
        Ok(Entry {
            key,
            path: path.to_path_buf(),
            meta,
            data,
            offsets,
        })
    }
}

/// The metadata's end and the artefacts' start in the bytes of an entry file, once its magic,
/// format version, metadata length and checksum are checked (see the module documentation).
///
/// Errors: a message saying what is wrong (a bad entry).
pub(super) fn frame(data: &[u8]) -> Result<(usize, usize), String> {
    let Some(version) = format_of(data).filter(|_| data.len() >= PREFIX_LEN) else {
        return Err(format!(
            "not a hipjit cache entry ({} bytes, no {:?} magic)",
            data.len(),
            String::from_utf8_lossy(ENTRY_MAGIC)
        ));
    };
    if version != CACHE_FORMAT_VERSION {
        return Err(format!(
            "cache format version {version}, expected {CACHE_FORMAT_VERSION}"
        ));
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&data[12..20]);
    let meta_len = u64::from_le_bytes(len8);
    let meta_end = (PREFIX_LEN as u64)
        .checked_add(meta_len)
        .filter(|&e| {
            e.checked_add(CHECKSUM_LEN as u64)
                .is_some_and(|s| s <= data.len() as u64)
        })
        .ok_or_else(|| {
            format!(
                "metadata length {meta_len} and the checksum run past the end ({} bytes)",
                data.len()
            )
        })? as usize;
    let body = meta_end + CHECKSUM_LEN;
    let checksum = entry_checksum(&data[..meta_end]);
    if checksum[..] != data[meta_end..body] {
        return Err(format!(
            "checksum mismatch: the header and metadata hash to {}, the entry records {} \
             (corrupted after it was written)",
            hex(&checksum),
            hex(&data[meta_end..body])
        ));
    }
    Ok((meta_end, body))
}

/// Errors unless the key an entry's metadata holds (hex) is `key`.
pub(super) fn check_key(recorded: &str, key: &CacheKey) -> Result<(), String> {
    if recorded != key.to_hex() {
        return Err(format!("holds key {recorded}, expected {key}"));
    }
    Ok(())
}

/// Where each artefact lies in the entry's artefacts (offset from `body`, length), checked
/// against the (name, size, sha256 hex) the metadata records, in file order, with no bytes
/// after the last.
///
/// Errors: a message naming the artefact that runs past the end or whose sha256 differs, or
/// the trailing bytes (a bad entry).
pub(super) fn place_artefacts<'a>(
    data: &[u8],
    body: usize,
    artefacts: impl Iterator<Item = (&'a str, u64, &'a str)>,
) -> Result<Vec<(usize, usize)>, String> {
    let mut offsets = Vec::new();
    let mut at = body as u64;
    for (name, size, sha) in artefacts {
        let end = at
            .checked_add(size)
            .filter(|&e| e <= data.len() as u64)
            .ok_or_else(|| {
                format!(
                    "artefact {name} ({size} bytes) runs past the end of the file ({} bytes)",
                    data.len()
                )
            })?;
        let digest = hex(&sha256(&data[at as usize..end as usize]));
        if digest != sha {
            return Err(format!(
                "artefact {name} has sha256 {digest}, recorded {sha}"
            ));
        }
        offsets.push((at as usize - body, size as usize));
        at = end;
    }
    if at != data.len() as u64 {
        return Err(format!(
            "{} trailing bytes after the artefacts",
            data.len() as u64 - at
        ));
    }
    Ok(offsets)
}

fn untracked_headers(meta: &EntryMeta) -> Vec<PathBuf> {
    let compiler_root = meta
        .compiler
        .path
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    meta.dependencies
        .iter()
        .filter(|d| {
            let canon = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
            let system = ["/usr/", "/opt/rocm", "/lib/", "/lib64/"].iter().any(|p| {
                canon.to_string_lossy().starts_with(p) || d.to_string_lossy().starts_with(p)
            });
            let in_compiler = compiler_root
                .as_ref()
                .is_some_and(|r| r != Path::new("/") && canon.starts_with(r));
            let tracked = meta
                .tracked_headers
                .iter()
                .any(|h| h.path == **d || std::fs::canonicalize(&h.path).is_ok_and(|c| c == canon));
            !(system || in_compiler || tracked)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(value: Option<&str>) -> impl Fn(&str) -> Option<OsString> + '_ {
        move |k| (k == "HIPJIT_CACHE_MAX_SIZE").then(|| value.map(OsString::from))?
    }

    #[test]
    fn the_size_cap_is_5_gib_unless_the_variable_sets_one() {
        let five_gib = 5 * 1024 * 1024 * 1024;
        assert_eq!(
            max_bytes_from_env(env(None)).unwrap(),
            (Some(five_gib), CapSource::Default)
        );
        assert_eq!(
            max_bytes_from_env(env(Some(""))).unwrap(),
            (Some(five_gib), CapSource::Default)
        );
        assert_eq!(
            max_bytes_from_env(env(Some("20G"))).unwrap(),
            (Some(20 * 1024 * 1024 * 1024), CapSource::Env)
        );
        assert_eq!(
            max_bytes_from_env(env(Some("Unlimited"))).unwrap(),
            (None, CapSource::Env)
        );
        let err = max_bytes_from_env(env(Some("lots")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HIPJIT_CACHE_MAX_SIZE=\"lots\"") && err.contains("unlimited"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(cache.max_bytes(), (Some(five_gib), CapSource::Default));
        let cache = cache.with_max_bytes(Some(u64::MAX));
        assert_eq!(cache.max_bytes(), (None, CapSource::Caller));
    }
}
