//! The disk cache: one file per key, published atomically, verified on every read.
//!
//! # Roots
//! `HIPJIT_CACHE_DIR` is a colon-separated list of directories: the first is written, the rest
//! are read-only lookups (a shared cache on a cluster filesystem). Unset or empty, the one root
//! is `$XDG_CACHE_HOME/hipjit`, else `~/.cache/hipjit`. The written root is created with mode
//! 0700.
//!
//! # Who may write
//! A root, or an entry file, that is owned by another user or writable by group or others is
//! refused, unless the root is declared shared: a file named [`SHARED_MARKER`]
//! (`HIPJIT_SHARED`) in the root directory declares it, when the marker is owned by the root
//! directory's owner or by the superuser (a marker dropped by anyone else who can write there
//! declares nothing). Entries written into a shared root are
//! readable by all (0644); entries of a private root are 0600.
//!
//! # Layout and publishing
//! `<root>/v1/<first two hex digits>/<key>.hjc`: [`ENTRY_MAGIC`], the [`CACHE_FORMAT_VERSION`]
//! (`u32` LE), the metadata length (`u64` LE), the metadata ([`EntryMeta`], MessagePack), then
//! the artefacts back to back in the order the metadata lists them. An entry is written to a
//! temporary file in `<root>/v1/tmp` (same filesystem), fsynced, then linked to its name
//! without replacing anything (`link(2)`, or `renameat2(RENAME_NOREPLACE)`), and the directory
//! is fsynced. A single file is published and replaced atomically by `rename(2)` on local
//! filesystems and on NFS, unlike a directory. An existing valid entry is never overwritten;
//! an invalid one in the written root is replaced by `rename(2)`.
//!
//! # Reading
//! A reader checks magic, format version, the key in the metadata, the total length and the
//! size and sha256 of each artefact. A bad entry is a miss: in the written root it is
//! reported and will be replaced by the next write; in a read-only root it is skipped and
//! reported. A hit in the written root sets the file's modification time, which the size cap
//! uses for least-recently-used pruning.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::key::{hex, sha256, CacheKey, TrackedHeader, CACHE_FORMAT_VERSION};
use crate::compiler::{CompileOptions, CompilerIdentity};
use crate::file_read;

/// The environment variable listing cache roots.
pub const CACHE_DIR_ENV: &str = "HIPJIT_CACHE_DIR";
/// A file of this name in a root declares the root shared between users.
pub const SHARED_MARKER: &str = "HIPJIT_SHARED";
/// The first bytes of every entry file.
pub const ENTRY_MAGIC: &[u8; 8] = b"HIPJITCE";
/// How old a temporary file in `<root>/v1/tmp` must be for [`DiskCache::clear`] and
/// [`DiskCache::prune`] to remove it: one hour.
pub const STALE_TEMPORARY: Duration = Duration::from_secs(3600);
/// The largest entry file read (bytes): a code object of at most
/// [`file_read::CODE_OBJECT_LIMIT`] and its dumps. A bigger file is a bad entry.
pub const ENTRY_LIMIT: u64 = 2 * file_read::CODE_OBJECT_LIMIT;
const LAYOUT_DIR: &str = "v1";
const ENTRY_EXT: &str = "hjc";
const HEADER_LEN: usize = 8 + 4 + 8;

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

/// One cache root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The directory.
    pub path: PathBuf,
    /// Whether hipjit writes here (only the first root).
    pub writable: bool,
    /// Whether it holds [`SHARED_MARKER`].
    pub shared: bool,
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
    /// A root or entry is owned by another user or writable by others, and the root is not
    /// declared shared.
    #[error("refusing cache path {}: {reason} (declare the root shared with a file named HIPJIT_SHARED in it)", path.display())]
    Unsafe {
        /// The root or entry.
        path: PathBuf,
        /// Owner or mode problem.
        reason: String,
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
    /// `Err(reason)` when the entry is bad.
    pub status: Result<(), String>,
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

/// The content-addressed disk cache (see the module documentation).
#[derive(Debug)]
pub struct DiskCache {
    roots: Vec<Root>,
    max_bytes: Option<u64>,
}

impl DiskCache {
    /// Opens the roots named by `HIPJIT_CACHE_DIR`, or the default root.
    ///
    /// Errors: as [`DiskCache::open`]; [`CacheError::NoRoot`] when neither the variable nor
    /// `XDG_CACHE_HOME`/`HOME` is set.
    pub fn from_env() -> Result<DiskCache, CacheError> {
        let roots = roots_from_env(|k| std::env::var_os(k)).ok_or(CacheError::NoRoot)?;
        DiskCache::open(&roots)
    }

    /// Opens `roots`: the first is created (mode 0700) when missing and written; the others
    /// are read when they exist.
    ///
    /// Errors: [`CacheError::Io`] creating the first root, [`CacheError::Unsafe`] when a root
    /// is owned by another user or writable by group/others and not declared shared.
    pub fn open(roots: &[PathBuf]) -> Result<DiskCache, CacheError> {
        let mut out = Vec::new();
        for (i, path) in roots.iter().enumerate() {
            let writable = i == 0;
            if writable && !path.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(path)
                    .map_err(|source| CacheError::Io {
                        path: path.clone(),
                        source,
                    })?;
            }
            let shared = declared_shared(path);
            if path.exists() {
                if let Err(reason) = check_owner(path, shared) {
                    return Err(CacheError::Unsafe {
                        path: path.clone(),
                        reason,
                    });
                }
            }
            out.push(Root {
                path: path.clone(),
                writable,
                shared,
            });
        }
        if out.is_empty() {
            return Err(CacheError::NoRoot);
        }
        Ok(DiskCache {
            roots: out,
            max_bytes: None,
        })
    }

    /// Sets a size cap in bytes for the written root: after each write, least recently used
    /// entries are removed until the root fits.
    pub fn with_max_bytes(mut self, max_bytes: Option<u64>) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The roots, written one first.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// The path of `key`'s entry in `root`.
    pub fn entry_path(root: &Path, key: &CacheKey) -> PathBuf {
        let hex = key.to_hex();
        root.join(LAYOUT_DIR)
            .join(&hex[..2])
            .join(format!("{hex}.{ENTRY_EXT}"))
    }

    /// Looks `key` up in each root in order; the first valid entry wins.
    pub fn get(&self, key: &CacheKey) -> Lookup {
        let mut lookup = Lookup::default();
        for root in &self.roots {
            let path = Self::entry_path(&root.path, key);
            match read_entry(&path, Some(key), root.shared) {
                Ok(entry) => {
                    if root.writable {
                        // Least-recently-used bookkeeping; failure only skews pruning.
                        if let Ok(f) = File::open(&path) {
                            let _ = f.set_modified(SystemTime::now());
                        }
                    }
                    lookup.entry = Some(entry);
                    return lookup;
                }
                Err(ReadError::Missing) => {}
                Err(ReadError::Bad(reason)) => {
                    tracing::warn!(path = %path.display(), %reason, "bad hipjit cache entry");
                    lookup.bad.push(BadEntry {
                        path,
                        reason,
                        writable_root: root.writable,
                    })
                }
            }
        }
        lookup
    }

    /// Writes an entry for `key` into the written root, unless a valid one is there already
    /// (then nothing is written). Returns the entry's path and whether this call published it.
    /// Prunes afterwards when a size cap is set.
    ///
    /// Errors: [`CacheError::Io`], [`CacheError::Encode`].
    pub fn put(
        &self,
        key: &CacheKey,
        mut meta: EntryMeta,
        artefacts: &[(&str, &[u8])],
    ) -> Result<(PathBuf, bool), CacheError> {
        let root = &self.roots[0];
        let path = Self::entry_path(&root.path, key);
        let existing = read_entry(&path, Some(key), root.shared);
        if existing.is_ok() {
            return Ok((path, false));
        }
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
        let meta_bytes =
            rmp_serde::to_vec_named(&meta).map_err(|e| CacheError::Encode(e.to_string()))?;
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| CacheError::Io { path: p, source }
        };
        let dir = path.parent().unwrap_or(&root.path).to_path_buf();
        let tmp_dir = root.path.join(LAYOUT_DIR).join("tmp");
        let mode = if root.shared { 0o777 } else { 0o700 };
        for d in [&dir, &tmp_dir] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(d)
                .map_err(io(d))?;
        }
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", key.to_hex()))
            .tempfile_in(&tmp_dir)
            .map_err(io(&tmp_dir))?;
        {
            let tmp_path = tmp.path().to_path_buf();
            let tmp_io = || io(&tmp_path);
            let f = tmp.as_file_mut();
            let mut header = Vec::with_capacity(HEADER_LEN);
            header.extend_from_slice(ENTRY_MAGIC);
            header.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
            header.extend_from_slice(&(meta_bytes.len() as u64).to_le_bytes());
            f.write_all(&header).map_err(tmp_io())?;
            f.write_all(&meta_bytes).map_err(tmp_io())?;
            for (_, bytes) in artefacts {
                f.write_all(bytes).map_err(tmp_io())?;
            }
            if root.shared {
                f.set_permissions(std::fs::Permissions::from_mode(0o644))
                    .map_err(tmp_io())?;
            }
            f.sync_all().map_err(tmp_io())?;
        }
        let published = match existing {
            Err(ReadError::Missing) => match tmp.persist_noclobber(&path) {
                Ok(_) => true,
                // Another process published first: keep theirs.
                Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => false,
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
        if let Some(max) = self.max_bytes {
            self.prune(max)?;
        }
        Ok((path, published))
    }

    /// Takes the cross-process compile lock of `key` in the written root (`flock(2)` on
    /// `<root>/v1/locks/<key>.lock`), blocking until it is free: the JIT holds it while it
    /// compiles a missing key, so processes asking for the same key at once compile it once.
    /// The lock only saves work; correctness rests on the atomic publish. `None` when the lock
    /// cannot be taken (a filesystem without locks): the caller compiles anyway. Released
    /// when the returned guard drops (or the process dies).
    pub fn lock(&self, key: &CacheKey) -> Option<KeyLock> {
        use std::os::fd::AsRawFd;
        let root = &self.roots[0];
        let dir = root.path.join(LAYOUT_DIR).join("locks");
        let mode = if root.shared { 0o777 } else { 0o700 };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(&dir)
            .ok()?;
        let path = dir.join(format!("{}.lock", key.to_hex()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is involved.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Some(KeyLock { _file: file });
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return None;
            }
        }
    }

    /// Lists the entry files of every root (not verified), written root first.
    pub fn list(&self) -> Vec<EntrySummary> {
        let mut out = Vec::new();
        for root in &self.roots {
            out.extend(list_root(&root.path));
        }
        out
    }

    /// Entry count and bytes per root.
    pub fn stats(&self) -> Vec<RootStats> {
        self.roots
            .iter()
            .map(|root| {
                let entries = list_root(&root.path);
                RootStats {
                    root: root.clone(),
                    entries: entries.len() as u64,
                    bytes: entries.iter().map(|e| e.bytes).sum(),
                }
            })
            .collect()
    }

    /// Reads and verifies every entry of every root, and flags untracked headers.
    pub fn verify(&self) -> Vec<VerifiedEntry> {
        let mut out = Vec::new();
        for root in &self.roots {
            for e in list_root(&root.path) {
                let read = read_entry(&e.path, e.key.as_ref(), root.shared);
                let (status, untracked) = match read {
                    Ok(entry) => (Ok(()), untracked_headers(&entry.meta)),
                    Err(ReadError::Missing) => (Err("vanished while verifying".into()), vec![]),
                    Err(ReadError::Bad(r)) => (Err(r), vec![]),
                };
                out.push(VerifiedEntry {
                    path: e.path,
                    status,
                    untracked,
                });
            }
        }
        out
    }

    /// Removes every entry of the written root, and its stale temporary files (older than
    /// [`STALE_TEMPORARY`]: a younger one may be an entry another process is writing); returns
    /// how many entries were removed.
    ///
    /// Errors: [`CacheError::Io`] for a file that could not be removed.
    pub fn clear(&self) -> Result<u64, CacheError> {
        let root = &self.roots[0];
        let mut n = 0;
        for e in list_root(&root.path) {
            remove(&e.path)?;
            n += 1;
        }
        for f in stale_temporaries(&root.path) {
            remove(&f)?;
        }
        Ok(n)
    }

    /// Removes least recently used entries of the written root until it holds at most
    /// `max_bytes`, and temporary files older than [`STALE_TEMPORARY`].
    ///
    /// Errors: [`CacheError::Io`] for a file that could not be removed.
    pub fn prune(&self, max_bytes: u64) -> Result<PruneReport, CacheError> {
        let root = &self.roots[0];
        let mut entries = list_root(&root.path);
        entries.sort_by_key(|e| e.last_used);
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut report = PruneReport::default();
        for e in entries {
            if total <= max_bytes {
                break;
            }
            remove(&e.path)?;
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

/// The temporary files of `<root>/v1/tmp` last modified more than [`STALE_TEMPORARY`] ago:
/// left by a process that died while writing an entry.
fn stale_temporaries(root: &Path) -> Vec<PathBuf> {
    let Some(cutoff) = SystemTime::now().checked_sub(STALE_TEMPORARY) else {
        return Vec::new();
    };
    std::fs::read_dir(root.join(LAYOUT_DIR).join("tmp"))
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

fn list_root(root: &Path) -> Vec<EntrySummary> {
    let mut out = Vec::new();
    let layout = root.join(LAYOUT_DIR);
    for sub in std::fs::read_dir(&layout)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        if sub.file_name() == "tmp" {
            continue;
        }
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let path = f.path();
            if path.extension().and_then(|e| e.to_str()) != Some(ENTRY_EXT) {
                continue;
            }
            let Ok(m) = f.metadata() else { continue };
            let key = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok());
            out.push(EntrySummary {
                root: root.to_path_buf(),
                path,
                key,
                bytes: m.len(),
                last_used: m.modified().unwrap_or(UNIX_EPOCH),
            });
        }
    }
    out
}

/// Checks that `path` is owned by this user (root-owned paths are refused too) and not
/// writable by group or others, unless `shared`.
/// Whether `root` is declared shared: it holds a regular file [`SHARED_MARKER`] owned by the
/// root directory's owner or by the superuser. A marker anyone else dropped into a directory
/// they can write declares nothing, so it cannot make another user's root trusted.
fn declared_shared(root: &Path) -> bool {
    match (
        std::fs::metadata(root),
        std::fs::symlink_metadata(root.join(SHARED_MARKER)),
    ) {
        (Ok(dir), Ok(marker)) => {
            marker.is_file() && (marker.uid() == dir.uid() || marker.uid() == 0)
        }
        _ => false,
    }
}

fn check_owner(path: &Path, shared: bool) -> Result<(), String> {
    if shared {
        return Ok(());
    }
    let m = std::fs::metadata(path).map_err(|e| e.to_string())?;
    check_meta(&m)
}

fn check_meta(m: &std::fs::Metadata) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return Err(format!(
            "owned by uid {}, not this user (uid {me})",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "writable by group or others (mode {:o})",
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

enum ReadError {
    Missing,
    Bad(String),
}

fn read_entry(path: &Path, key: Option<&CacheKey>, shared: bool) -> Result<Entry, ReadError> {
    // Opened without blocking and checked on the descriptor: a FIFO or device planted at an
    // entry's path is a bad entry, not a hang.
    let (f, size) = match file_read::open_regular(path, ENTRY_LIMIT, "a cache entry") {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Err(ReadError::Missing),
        Err(e) => return Err(ReadError::Bad(format!("cannot open: {}", e.reason()))),
    };
    let bad = ReadError::Bad;
    if !shared {
        let m = f.metadata().map_err(|e| bad(e.to_string()))?;
        check_meta(&m).map_err(bad)?;
    }
    let mut data = Vec::new();
    data.try_reserve_exact(size as usize)
        .map_err(|e| bad(format!("cannot reserve {size} bytes: {e}")))?;
    f.take(ENTRY_LIMIT + 1)
        .read_to_end(&mut data)
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    if data.len() as u64 > ENTRY_LIMIT {
        return Err(bad(format!(
            "grew past hipjit's limit of {ENTRY_LIMIT} bytes for a cache entry while read"
        )));
    }
    Entry::from_bytes(data, path, key).map_err(bad)
}

impl Entry {
    /// Parses and verifies the bytes of an entry file (see the module documentation for the
    /// layout): magic, format version, metadata, the key it holds (equal to `key` when given),
    /// each artefact's size and sha256, and no trailing bytes. `path` is recorded as the
    /// entry's file.
    ///
    /// Errors: a message saying what is wrong and where (a bad entry).
    pub fn from_bytes(
        mut data: Vec<u8>,
        path: &Path,
        key: Option<&CacheKey>,
    ) -> Result<Entry, String> {
        let bad = |s: String| s;
        if data.len() < HEADER_LEN || &data[..8] != ENTRY_MAGIC {
            return Err(bad(format!(
                "not a hipjit cache entry ({} bytes, no {:?} magic)",
                data.len(),
                String::from_utf8_lossy(ENTRY_MAGIC)
            )));
        }
        let version = u32::from_le_bytes([data[8], data[9], data[10], data[11]]);
        if version != CACHE_FORMAT_VERSION {
            return Err(bad(format!(
                "cache format version {version}, expected {CACHE_FORMAT_VERSION}"
            )));
        }
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&data[12..20]);
        let meta_len = u64::from_le_bytes(len8);
        let meta_end = (HEADER_LEN as u64)
            .checked_add(meta_len)
            .filter(|&e| e <= data.len() as u64)
            .ok_or_else(|| {
                bad(format!(
                    "metadata length {meta_len} runs past the end ({} bytes)",
                    data.len()
                ))
            })? as usize;
        let meta: EntryMeta = rmp_serde::from_slice(&data[HEADER_LEN..meta_end])
            .map_err(|e| bad(format!("metadata does not decode: {e}")))?;
        if let Some(key) = key {
            if meta.key != key.to_hex() {
                return Err(bad(format!("holds key {}, expected {key}", meta.key)));
            }
        }
        let key = meta
            .key
            .parse()
            .map_err(|e: super::key::BadKey| bad(e.to_string()))?;
        let mut offsets = Vec::new();
        let mut at = meta_end as u64;
        for a in &meta.artefacts {
            let end = at
                .checked_add(a.size)
                .filter(|&e| e <= data.len() as u64)
                .ok_or_else(|| {
                    bad(format!(
                        "artefact {} ({} bytes) runs past the end of the file ({} bytes)",
                        a.name,
                        a.size,
                        data.len()
                    ))
                })?;
            let digest = hex(&sha256(&data[at as usize..end as usize]));
            if digest != a.sha256 {
                return Err(bad(format!(
                    "artefact {} has sha256 {digest}, recorded {}",
                    a.name, a.sha256
                )));
            }
            offsets.push((at as usize - meta_end, a.size as usize));
            at = end;
        }
        if at != data.len() as u64 {
            return Err(bad(format!(
                "{} trailing bytes after the artefacts",
                data.len() as u64 - at
            )));
        }
        data.drain(..meta_end);
        Ok(Entry {
            key,
            path: path.to_path_buf(),
            meta,
            data,
            offsets,
        })
    }
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
