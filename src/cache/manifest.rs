//! Header manifests: what a compile read, so that a lookup can tell whether the same compile
//! would read the same bytes now (ccache's direct mode; the key design is in
//! `key`).
//!
//! A [`Manifest`] lists
//! * every file the compiler read (from its dependency output) outside the directories its
//!   identity covers ([`crate::compiler::CompilerIdentity::covered`]): its base (a `-I`
//!   directory by index; the compiler's installation root ([`INSTALLATION`]) for a header of
//!   the installation, [`crate::compiler::CompilerIdentity::installation_name`]; or none for
//!   an absolute path), its name relative to that base, its stat fields ([`FileStat`]) and its
//!   sha256. An absolute name holding `..` (clang's `/usr/bin/../lib/gcc/...` for the C++
//!   headers, which depends on where clang is installed) is recorded with the `..` resolved
//!   when that names the same file as the path resolved by the system (no symbolic link on
//!   the way), so that the same system header reached from two installations has one name;
//! * every directory searched: for each search directory (the `-I` directories, then the
//!   absolute ones: `-I`/`-isystem` in extra flags, `CPATH`, `CPLUS_INCLUDE_PATH`,
//!   `C_INCLUDE_PATH`, and the directories hipjit hands the compiler itself
//!   (`crate::compiler::Backend::own_search_dirs`: NVRTC's CUDA toolkit headers); an absolute
//!   one by its path, or relative to the installation root when it is one of the
//!   installation's header directories), the directories below it on the way to each name
//!   looked up there, and the directory of every file read, each with **the names looked up
//!   in it** ([`DirRecord::looked_up`], the names rule of `record`). A directory is recorded
//!   by its stat fields and the sha256 of which of those names it holds (and whether each is a
//!   directory), or as absent; a file of any other name added to it changes nothing. Where a
//!   file read names a header by a macro (`#include MACRO`, `__has_include(MACRO)`), the names
//!   cannot be known: the directories then are those searched up to where a header was found
//!   (each search directory's top level, for each header found at `sub/dir/x.h` its `sub` and
//!   `sub/dir`, and the directory of every file read), each by its whole listing.
//!
//! Checking ([`Manifest::current`]) stats each file and directory, reuses the recorded hash
//! when the recorded stat proves the file unchanged, and hashes or lists only the others. A
//! stat proves that only under the stat-trust rule ([`FileStat::proves_same_as`], written in
//! `stat` and the README's "What a hit trusts"): the same fields on the same
//! mount, known by an identity the kernel never gives another mount. A manifest from another
//! machine (the remote tier) has its mount identities removed when it is read
//! ([`Manifest::from_another_node`]): each of its files is hashed.
//!
//! Recording (`record`) refuses to vouch for a compile during which a file changed: a file
//! or directory whose modification or change time is at or after the compile's start makes
//! the result unpublishable ("too new", ccache's rule), as does a file whose content differs
//! from what the lookup before the compile hashed. The start is read from the filesystem's own
//! clock ([`filesystem_now`]: the modification time of a file written just before the compiler
//! starts), which is coarser than the wall clock and lags it by up to one tick; comparing
//! stamps of one clock leaves only writes within that tick before the start as false alarms.
//! A file stamped in whole seconds (nanoseconds 0) is too new from the start's second on.
//! Files on a network filesystem are stamped by the server's clock, which this rule trusts to
//! agree with the local one.
//!
//! Stored as the artefact [`MANIFEST_ARTEFACT`] (MessagePack) of the disk-cache entry named by
//! the direct key, replaced after each published compile.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::digest::Sha256;

use crate::compiler::include_names::IncludeNames;
use crate::compiler::{CompilerIdentity, Dependency};
use crate::fs::stat::hash_file;
use crate::fs::stat::{FileStat, StatByDir, NO_MOUNT_IDENTITY};

/// The name of the manifest artefact in the entry of a direct key.
pub const MANIFEST_ARTEFACT: &str = "manifest";

/// The base of a file or directory recorded relative to the compiler's installation root
/// ([`crate::compiler::CompilerIdentity::root`]), in [`FileRecord::include_dir`].
pub const INSTALLATION: u32 = u32::MAX;

/// A manifest file bigger than this is refused (a real one is a few hundred records).
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

/// A file the compiler read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The `-I` directory (index into the options' include directories) it is relative to,
    /// [`INSTALLATION`] for the compiler's installation root, or `None`: `name` is absolute.
    pub include_dir: Option<u32>,
    /// Its name relative to the base (raw bytes).
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    /// Its stat fields when recorded (they stand for `sha256` only as
    /// [`FileStat::proves_same_as`] says).
    pub stat: FileStat,
    /// sha256 of its contents.
    #[serde(with = "serde_bytes")]
    pub sha256: [u8; 32],
}

/// A directory searched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirRecord {
    /// The base, as [`FileRecord::include_dir`].
    pub include_dir: Option<u32>,
    /// Its name relative to the base (raw bytes; empty: the base itself).
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    /// Its stat fields when recorded (`None`: it did not exist).
    pub stat: Option<FileStat>,
    /// sha256 of its sorted listing ([`listing`]), restricted to the names of
    /// `looked_up` when that is given (`None`: it did not exist).
    #[serde(with = "serde_bytes")]
    pub listing: Option<[u8; 32]>,
    /// The names a compile could have looked up in it (`record`'s names rule), sorted:
    /// `listing` is then of those entries alone, so that a file of any other name added
    /// beside them changes nothing. `None`: the whole listing (a computed `#include` or
    /// `__has_include` somewhere, whose names are not known).
    pub looked_up: Option<Vec<serde_bytes::ByteBuf>>,
}

/// 0 for an absolute name, `u32::MAX` for the installation root, `i + 1` for `-I` directory
/// `i` (as hashed into the result key).
fn base_of(include_dir: Option<u32>) -> u32 {
    match include_dir {
        None => 0,
        Some(INSTALLATION) => u32::MAX,
        Some(i) => i + 1,
    }
}

impl FileRecord {
    /// 0 for an absolute name, `u32::MAX` for the installation root, `i + 1` for `-I`
    /// directory `i` (as hashed into the result key).
    pub fn base(&self) -> u32 {
        base_of(self.include_dir)
    }
}

impl DirRecord {
    /// As [`FileRecord::base`].
    pub fn base(&self) -> u32 {
        base_of(self.include_dir)
    }
}

/// The files read by one compile and the directories searched for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Files, sorted by (base, name).
    pub files: Vec<FileRecord>,
    /// Directories, sorted by (base, name).
    pub dirs: Vec<DirRecord>,
}

/// A manifest that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("bad header manifest: {0}")]
pub struct BadManifest(pub String);

/// The path of `name` relative to `-I` directory `include_dir`, or to `installation` (the
/// compiler's installation root) for [`INSTALLATION`] (absolute when `None`); `None` for an
/// index out of range, or the installation base without a root.
pub(crate) fn resolve(
    include_dir: Option<u32>,
    name: &[u8],
    include_dirs: &[PathBuf],
    installation: &Path,
) -> Option<PathBuf> {
    let name = Path::new(OsStr::from_bytes(name));
    match include_dir {
        None => Some(name.to_path_buf()),
        Some(i) => {
            let base = if i == INSTALLATION {
                if installation.as_os_str().is_empty() {
                    return None;
                }
                installation
            } else {
                include_dirs.get(i as usize)?.as_path()
            };
            Some(if name.as_os_str().is_empty() {
                base.to_path_buf()
            } else {
                base.join(name)
            })
        }
    }
}

/// A directory's entries, sorted: each name (raw bytes) and whether it is a directory (a
/// symbolic link to one counts as one; a dangling one is left out).
pub type Listing = Vec<(Vec<u8>, bool)>;

/// A directory's listing. `None` when it cannot be listed.
pub fn listing(dir: &Path) -> Option<Listing> {
    listing_checked(dir).map(|(l, _)| l)
}

/// [`listing`], and whether an entry is a symbolic link whose target does not exist (left
/// out; see [`listing_of_checked`]).
fn listing_checked(dir: &Path) -> Option<(Listing, bool)> {
    let mut dangling = false;
    let mut names: Vec<(Vec<u8>, bool)> = crate::fs::observe::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let link = e.file_type().is_ok_and(|t| t.is_symlink());
            let is_dir = if link {
                // A dangling link is no entry the preprocessor can find.
                match crate::fs::observe::metadata(e.path()) {
                    Ok(m) => m.is_dir(),
                    Err(_) => {
                        dangling = true;
                        return None;
                    }
                }
            } else {
                e.file_type().is_ok_and(|t| t.is_dir())
            };
            Some((e.file_name().as_bytes().to_vec(), is_dir))
        })
        .collect();
    names.sort();
    Some((names, dangling))
}

/// The entries of `dir` named in `names` (single components) that exist, as [`listing`]
/// gives them: each name and whether it is a directory (a symbolic link to one counts as one;
/// a dangling one is left out). `None` when `dir` is not a directory.
pub fn listing_of(dir: &Path, names: &[serde_bytes::ByteBuf]) -> Option<Listing> {
    listing_of_checked(dir, names).map(|(l, _)| l)
}

/// [`listing_of`], and whether a name is a symbolic link whose target does not exist: left
/// out (the preprocessor finds nothing there), but the directory's stat cannot vouch for it,
/// since its target may appear anywhere.
fn listing_of_checked(dir: &Path, names: &[serde_bytes::ByteBuf]) -> Option<(Listing, bool)> {
    if !crate::fs::observe::is_dir(dir) {
        return None;
    }
    let mut dangling = false;
    let mut out: Listing = names
        .iter()
        .filter_map(|n| {
            let path = dir.join(OsStr::from_bytes(n));
            crate::fs::observe::symlink_metadata(&path).ok()?;
            match crate::fs::observe::metadata(&path) {
                Ok(m) => Some((n.to_vec(), m.is_dir())),
                Err(_) => {
                    dangling = true;
                    None
                }
            }
        })
        .collect();
    out.sort();
    Some((out, dangling))
}

/// A stat no directory has: recorded for one whose listing its stat cannot vouch for (a
/// dangling symbolic link among its names), so that every lookup lists it again.
const UNSETTLED: FileStat = FileStat {
    size: u64::MAX,
    mtime: (0, 0),
    ctime: (0, 0),
    ino: 0,
    dev: 0,
    mount: NO_MOUNT_IDENTITY,
};

/// sha256 of a listing ([`listing`]): each name with `d` for a directory and `f` for
/// anything else.
pub(crate) fn hash_listing(names: &[(Vec<u8>, bool)]) -> [u8; 32] {
    let mut h = Sha256::new();
    for (n, d) in names {
        h.update((n.len() as u64).to_le_bytes());
        h.update(n);
        h.update(if *d { b"d" } else { b"f" });
    }
    h.finish()
}

/// sha256 of a directory's listing ([`listing`]). `None` when it cannot be listed.
pub fn listing_hash(dir: &Path) -> Option<[u8; 32]> {
    listing(dir).map(|names| hash_listing(&names))
}

/// The artefact of a published result entry holding the listings of the directories its
/// manifest records below `-I` directories ([`DirListings`]), so that `hipjit cache explain`
/// can name the entries added to or removed from one since (a header put beside the source).
/// Entries written before it existed, or whose listings ran past [`MAX_LISTED_NAMES`], lack
/// some or all: the directory is then named without its entries.
pub const DIR_LISTINGS_ARTEFACT: &str = "dir-listings";

/// The most entry names one compile keeps in [`DIR_LISTINGS_ARTEFACT`] (a directory that
/// would pass it is left out whole): a project's directories hold a few dozen.
pub const MAX_LISTED_NAMES: usize = 4096;

/// The listing of one recorded directory ([`DIR_LISTINGS_ARTEFACT`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirListing {
    /// Its base, as [`DirRecord::include_dir`].
    pub include_dir: Option<u32>,
    /// Its name below the base, as [`DirRecord::name`].
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    /// Its entries when recorded, as [`listing`] gives them.
    #[serde(with = "crate::fs::byte_strings::pairs")]
    pub entries: Listing,
}

/// The listings kept for a compile ([`DIR_LISTINGS_ARTEFACT`]), in manifest order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirListings(pub Vec<DirListing>);

impl DirListings {
    /// The listing of the directory `name` below `include_dir`, when kept.
    pub fn get(&self, include_dir: Option<u32>, name: &[u8]) -> Option<&DirListing> {
        self.0
            .iter()
            .find(|l| l.include_dir == include_dir && l.name == name)
    }

    /// Encodes them (MessagePack), as stored in [`DIR_LISTINGS_ARTEFACT`].
    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).unwrap_or_default()
    }

    /// Decodes a [`DIR_LISTINGS_ARTEFACT`]; `None` when it does not decode.
    pub fn from_bytes(bytes: &[u8]) -> Option<DirListings> {
        rmp_serde::from_slice(bytes).ok()
    }
}

/// A directory's stat fields and listing hash now, the listing restricted to `looked_up`
/// when given (`None`s when absent or not listable).
pub(crate) fn dir_state(
    path: &Path,
    looked_up: Option<&[serde_bytes::ByteBuf]>,
) -> (Option<FileStat>, Option<[u8; 32]>) {
    let (stat, names) = dir_state_listed(path, looked_up);
    (stat, names.map(|n| hash_listing(&n)))
}

/// A directory's stat fields and listing ([`listing`], or [`listing_of`] its `looked_up`
/// names) now (`None`s when absent or not listable).
pub(crate) fn dir_state_listed(
    path: &Path,
    looked_up: Option<&[serde_bytes::ByteBuf]>,
) -> (Option<FileStat>, Option<Listing>) {
    match crate::fs::observe::metadata(path) {
        Ok(m) if m.is_dir() => {
            let (listing, dangling) = match looked_up {
                Some(names) => listing_of_checked(path, names),
                None => listing_checked(path),
            }
            .unzip();
            // A dangling link's target may appear anywhere, which the stat does not see.
            let stat = if dangling == Some(true) {
                UNSETTLED
            } else {
                m.fields
            };
            (Some(stat), listing)
        }
        Ok(m) => (Some(m.fields), None),
        Err(_) => (None, None),
    }
}

impl Manifest {
    /// Decodes a manifest artefact.
    ///
    /// Errors: [`BadManifest`] for bytes over [`MAX_MANIFEST_BYTES`] or that do not decode.
    pub fn from_bytes(bytes: &[u8]) -> Result<Manifest, BadManifest> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(BadManifest(format!(
                "{} bytes, more than the limit of {MAX_MANIFEST_BYTES}",
                bytes.len()
            )));
        }
        rmp_serde::from_slice(bytes).map_err(|e| BadManifest(e.to_string()))
    }

    /// This manifest as read from another machine (the remote tier): every stat without its
    /// mount identity ([`FileStat::without_mount_identity`]), so that none proves a file
    /// unchanged ([`FileStat::proves_same_as`]) and each file is hashed and each directory
    /// listed by the lookup ([`Manifest::current`]). Another node's mount identities mean
    /// nothing here (a node booted alike numbers its mounts alike), and its stats may match
    /// files here whose bytes differ.
    pub fn from_another_node(mut self) -> Manifest {
        for f in &mut self.files {
            f.stat = f.stat.without_mount_identity();
        }
        for d in &mut self.dirs {
            d.stat = d.stat.map(FileStat::without_mount_identity);
        }
        self
    }

    /// Encodes it (MessagePack).
    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).unwrap_or_default()
    }

    /// The same files and directories as they are now, with `include_dirs` as the options'
    /// include directories and `installation` as the compiler's installation root
    /// ([`crate::compiler::CompilerIdentity::root`], the base of [`INSTALLATION`] records): a
    /// record whose stat proves the file unchanged ([`FileStat::proves_same_as`]) keeps its
    /// hash; any other is hashed (listed) again.
    /// `None` when a recorded file cannot be read now (removed, or an include directory index
    /// out of range): the manifest cannot match.
    pub fn current(&self, include_dirs: &[PathBuf], installation: &Path) -> Option<Manifest> {
        self.clone().into_current(include_dirs, installation)
    }

    /// [`Manifest::into_current`], and whether any record's stat differed from the one
    /// recorded, its mount identity included (its hash or listing computed again: a file
    /// touched, linked or copied over, a file system mounted again
    /// with the same bytes gives the same result key, but is hashed again at every lookup
    /// until the manifest is refreshed: [`Manifest::settled`]).
    pub fn into_current_checked(
        self,
        include_dirs: &[PathBuf],
        installation: &Path,
    ) -> Option<(Manifest, bool)> {
        let before: Vec<Option<FileStat>> = self
            .files
            .iter()
            .map(|f| Some(f.stat))
            .chain(self.dirs.iter().map(|d| d.stat))
            .collect();
        let now = self.into_current(include_dirs, installation)?;
        let changed = now
            .files
            .iter()
            .map(|f| Some(f.stat))
            .chain(now.dirs.iter().map(|d| d.stat))
            .ne(before);
        Some((now, changed))
    }

    /// This manifest to be stored again after a lookup found stats that changed and contents
    /// that did not ([`Manifest::into_current_checked`]): each record as now, except that a
    /// stat whose modification or change time is at or after `start` (a file that may still
    /// be changing within the filesystem's clock tick) is replaced by one that no file has,
    /// so that the next lookup hashes that file again rather than trust its stat.
    pub fn settled(mut self, start: SystemTime) -> Manifest {
        let unsettled = UNSETTLED;
        for f in &mut self.files {
            if too_new(f.stat.mtime, start) || too_new(f.stat.ctime, start) {
                f.stat = unsettled;
            }
        }
        for d in &mut self.dirs {
            if d.stat
                .is_some_and(|st| too_new(st.mtime, start) || too_new(st.ctime, start))
            {
                d.stat = Some(unsettled);
            }
        }
        self
    }

    /// [`Manifest::current`], giving back `self` unchanged (no copy) when every stat proves its
    /// file or directory unchanged, the case of every cache hit. Files are stat'ed a directory
    /// at a time ([`StatByDir`]).
    pub fn into_current(self, include_dirs: &[PathBuf], installation: &Path) -> Option<Manifest> {
        let mut by_dir = StatByDir::new();
        let mut file_stats = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let path = resolve(f.include_dir, &f.name, include_dirs, installation)?;
            let st = by_dir.stat(&path)?;
            if !st.is_file() {
                return None;
            }
            file_stats.push((path, st.fields));
        }
        let mut dir_stats = Vec::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let path = resolve(d.include_dir, &d.name, include_dirs, installation)?;
            let now = by_dir.stat(&path).map(|s| s.fields);
            dir_stats.push((path, now));
        }
        // The stat-trust rule: [`FileStat::proves_same_as`].
        let dir_unchanged = |d: &DirRecord, now: &Option<FileStat>| {
            FileStat::proves_same_as_opt(d.stat.as_ref(), now.as_ref())
                && (now.is_some() || d.listing.is_none())
        };
        let unchanged = self
            .files
            .iter()
            .zip(&file_stats)
            .all(|(f, (_, now))| f.stat.proves_same_as(now))
            && self
                .dirs
                .iter()
                .zip(&dir_stats)
                .all(|(d, (_, now))| dir_unchanged(d, now));
        if unchanged {
            return Some(self);
        }
        let mut files = Vec::with_capacity(self.files.len());
        for (f, (path, stat)) in self.files.into_iter().zip(file_stats) {
            let sha256 = if f.stat.proves_same_as(&stat) {
                f.sha256
            } else {
                hash_file(&path).ok()?
            };
            files.push(FileRecord {
                include_dir: f.include_dir,
                name: f.name,
                stat,
                sha256,
            });
        }
        let mut dirs = Vec::with_capacity(self.dirs.len());
        for (d, (path, now)) in self.dirs.into_iter().zip(dir_stats) {
            let (stat, listing) = if now.is_some() && dir_unchanged(&d, &now) {
                (d.stat, d.listing)
            } else {
                dir_state(&path, d.looked_up.as_deref())
            };
            dirs.push(DirRecord {
                include_dir: d.include_dir,
                name: d.name,
                stat,
                listing,
                looked_up: d.looked_up,
            });
        }
        Some(Manifest { files, dirs })
    }

    /// The hash of `(base, name)` in this manifest, if listed.
    fn hash_of(&self, include_dir: Option<u32>, name: &[u8]) -> Option<[u8; 32]> {
        self.files
            .iter()
            .find(|f| f.include_dir == include_dir && f.name == name)
            .map(|f| f.sha256)
    }
}

/// What `record` found.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The manifest of the compile.
    pub manifest: Manifest,
    /// Why the result must not be published (a file changed during the compile), if so.
    pub unpublishable: Option<String>,
    /// The files recorded, for the entry's metadata: (name as text, path, sha256 hex).
    pub headers: Vec<crate::cache::key::TrackedHeader>,
    /// The listings of the directories recorded below `-I` directories, for
    /// [`DIR_LISTINGS_ARTEFACT`].
    pub listings: DirListings,
}

pub use crate::fs::stat::filesystem_now;

/// Whether a timestamp (s, ns) is at or after `start`; one stamped in whole seconds (ns 0) is
/// compared by its second.
fn too_new(ts: (i64, i64), start: SystemTime) -> bool {
    let Ok(start) = start.duration_since(UNIX_EPOCH) else {
        return true;
    };
    if ts.1 == 0 {
        return ts.0 >= start.as_secs() as i64;
    }
    let t = Duration::new(ts.0.max(0) as u64, ts.1.clamp(0, 999_999_999) as u32);
    t >= start
}

/// The search directories of a compile: the `-I` directories by index, then absolute ones
/// (`extra_search`: `-I`/`-isystem` in extra flags, `CPATH` and the like).
fn search_dirs(include_dirs: &[PathBuf], extra_search: &[PathBuf]) -> Vec<(Option<u32>, PathBuf)> {
    include_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| (Some(i as u32), d.clone()))
        .chain(extra_search.iter().map(|d| (None, d.clone())))
        .collect()
}

/// Builds the manifest of a compile of `source` that read `deps`, started at `started`, with
/// the options' `include_dirs` and the absolute `extra_search` directories; files in
/// directories `compiler` covers are left out (but scanned for the names they look up).
///
/// The names rule: the names a compile could have looked up are those the source and every
/// file read ask for ([`crate::compiler::include_names::scan`]: `#include`, `#include_next`,
/// `#import`, `__has_include`), and the name below each search directory holding it of every
/// file read (a header reached through a macro). Each is looked up in every search directory,
/// a quoted one also in the directory of the file asking for it, and each directory on the way
/// records the single name looked up in it ([`DirRecord::looked_up`]). A computed name
/// anywhere, or a file too big to scan, falls back to whole listings (see the module
/// documentation). `looked_up` is the manifest as the lookup before the compile saw it
/// (a file it hashed that now hashes differently makes the result unpublishable).
///
/// A file that cannot be read any more makes the result unpublishable (it is left out of the
/// manifest).
pub fn record(
    source: &[u8],
    deps: &[Dependency],
    include_dirs: &[PathBuf],
    extra_search: &[PathBuf],
    compiler: &CompilerIdentity,
    started: SystemTime,
    looked_up: Option<&Manifest>,
) -> Recorded {
    let mut unpublishable: Option<String> = None;
    let mut files: Vec<FileRecord> = Vec::new();
    let mut headers = Vec::new();
    // Each search directory as the base of its records and its name there: a `-I` directory
    // by index; an absolute one in the installation's header directories by its place below
    // the installation root; any other by its absolute path.
    let search: Vec<(Option<u32>, PathBuf)> = search_dirs(include_dirs, extra_search)
        .into_iter()
        .map(|(base, dir)| match base {
            Some(i) => (Some(i), PathBuf::new()),
            None => match compiler.installation_name(&dir) {
                Some(rel) => (Some(INSTALLATION), rel.to_path_buf()),
                None => (None, dir),
            },
        })
        .collect();
    // The names rule: the names looked up in every search directory (those the source and
    // every file read ask for, and every name below a search directory a file read was found
    // by), the quoted names each file read asks for, looked up beside it first, and the first
    // computed name met (then every directory is keyed by its whole listing).
    let mut names = NamesLookedUp::default();
    names.scan(source, None);
    // The directories of the whole-listing rule (a computed name somewhere).
    let mut dir_names: Vec<(Option<u32>, Vec<u8>)> = search
        .iter()
        .map(|(base, name)| (*base, name.as_os_str().as_bytes().to_vec()))
        .collect();
    let mut seen = std::collections::HashSet::new();
    let phase = crate::phases::start("header manifest: files read, scanned, hashed");
    let read = read_all(deps, compiler);
    for (d, read) in deps.iter().zip(read) {
        if d.include_dir.is_none() && compiler.covers(&d.path) {
            // Keyed by the compiler's identity; what it asks for is looked up in the search
            // directories before the installation's own (a `-I` header shadowing it).
            match read.names {
                Some(found) => names.add(&found, None),
                None => names.unreadable(&d.path),
            }
            continue;
        }
        // Its base and its name below it: a `-I` directory, the installation root, or none.
        let (include_dir, name_path): (Option<u32>, PathBuf) = match d.include_dir {
            Some(i) => (Some(i as u32), d.name.clone()),
            None => match compiler.installation_name(&d.path) {
                Some(rel) => (Some(INSTALLATION), rel.to_path_buf()),
                None => (None, system_name(&d.path)),
            },
        };
        let name = name_path.as_os_str().as_bytes().to_vec();
        if !seen.insert((include_dir, name.clone())) {
            continue;
        }
        let (m, digest) = match (read.meta, read.digest) {
            (Some(m), Some(digest)) if m.is_file() && read.names.is_some() => (m, digest),
            (Some(m), digest) if m.is_file() => match digest {
                // Too big to scan: hashed as it streams, its names unknown.
                Some(h) => {
                    names.unreadable(&d.path);
                    (m, h)
                }
                None => {
                    unpublishable.get_or_insert_with(|| {
                        format!("{} cannot be read after the compile", d.path.display())
                    });
                    continue;
                }
            },
            _ => {
                unpublishable.get_or_insert_with(|| {
                    format!("{} cannot be read after the compile", d.path.display())
                });
                continue;
            }
        };
        let parent = name_path
            .parent()
            .map(|p| (include_dir, p.as_os_str().as_bytes().to_vec()));
        if let Some(found) = read.names {
            names.add(&found, parent.clone());
        }
        let stat = m.fields;
        if too_new(stat.mtime, started) || too_new(stat.ctime, started) {
            unpublishable.get_or_insert_with(|| {
                format!(
                    "{} was modified during the compile (include file too new)",
                    d.path.display()
                )
            });
        }
        if let Some(before) = looked_up.and_then(|l| l.hash_of(include_dir, &name)) {
            if before != digest {
                unpublishable.get_or_insert_with(|| {
                    format!("{} changed during the compile", d.path.display())
                });
            }
        }
        // Every name that could have found it: its name below each search directory holding
        // it. Nested search directories (the toolkit's `include` and `include/cccl`) give a
        // header several names (`cccl/nv/x.h`, `nv/x.h`), and which one the `#include` spelled
        // is not known (NVRTC's opens name the file, not the spelling; a depfile names the
        // path, and a computed `#include` names nothing), so each is looked up everywhere.
        let mut spellings: Vec<PathBuf> = d
            .include_dir
            .map(|_| d.name.clone())
            .into_iter()
            .chain(
                include_dirs
                    .iter()
                    .chain(extra_search)
                    .filter_map(|s| d.path.strip_prefix(s).ok().map(Path::to_path_buf)),
            )
            .filter(|rel| !rel.as_os_str().is_empty())
            .collect();
        spellings.sort();
        spellings.dedup();
        for rel in spellings {
            let mut prefix = PathBuf::new();
            let parts: Vec<_> = rel.components().collect();
            for c in parts.iter().take(parts.len().saturating_sub(1)) {
                prefix.push(c);
                for (base, name) in &search {
                    dir_names.push((*base, name.join(&prefix).as_os_str().as_bytes().to_vec()));
                }
            }
            names.everywhere.insert(rel.as_os_str().as_bytes().to_vec());
        }
        if let (Some(parent), Some(file_name)) = (&parent, name_path.file_name()) {
            // It is there, by this name, whichever name found it.
            names
                .beside
                .entry(parent.clone())
                .or_default()
                .insert(file_name.as_bytes().to_vec());
        }
        dir_names.extend(parent);
        headers.push(crate::cache::key::TrackedHeader {
            include: name_path.to_string_lossy().into_owned(),
            path: d.path.clone(),
            sha256: crate::digest::hex(&digest),
        });
        files.push(FileRecord {
            include_dir,
            name,
            stat,
            sha256: digest,
        });
    }
    phase.end();
    let _phase = crate::phases::start("header manifest: directories");
    // Each directory to record, with the names looked up in it (`None`: its whole listing).
    let recorded: Vec<(DirName, Option<Vec<serde_bytes::ByteBuf>>)> = if names.computed.is_some() {
        dir_names.sort();
        dir_names.dedup();
        dir_names.into_iter().map(|d| (d, None)).collect()
    } else {
        names
            .by_directory(&search, include_dirs, &compiler.root)
            .into_iter()
            .map(|(d, n)| {
                (
                    d,
                    Some(n.into_iter().map(serde_bytes::ByteBuf::from).collect()),
                )
            })
            .collect()
    };
    let _phase = crate::phases::start("header manifest: directories: stat and listing");
    let mut dirs = Vec::with_capacity(recorded.len());
    let mut listings = Vec::new();
    let mut listed_names = 0;
    for ((base, name), looked_up) in recorded {
        let Some(path) = resolve(base, &name, include_dirs, &compiler.root) else {
            continue;
        };
        let below_include_dir = matches!(base, Some(i) if i != INSTALLATION);
        let (stat, listing) = match dir_state_listed(&path, looked_up.as_deref()) {
            (stat, Some(entries)) => {
                let hash = hash_listing(&entries);
                if below_include_dir && listed_names + entries.len() <= MAX_LISTED_NAMES {
                    listed_names += entries.len();
                    listings.push(DirListing {
                        include_dir: base,
                        name: name.clone(),
                        entries,
                    });
                }
                (stat, Some(hash))
            }
            (stat, None) => (stat, None),
        };
        if let Some(s) = &stat {
            if too_new(s.mtime, started) || too_new(s.ctime, started) {
                unpublishable.get_or_insert_with(|| {
                    format!("directory {} changed during the compile", path.display())
                });
            }
        }
        dirs.push(DirRecord {
            include_dir: base,
            name,
            stat,
            listing,
            looked_up,
        });
    }
    files.sort_by(|a, b| (a.include_dir, &a.name).cmp(&(b.include_dir, &b.name)));
    Recorded {
        manifest: Manifest { files, dirs },
        unpublishable,
        headers,
        listings: DirListings(listings),
    }
}

/// The largest file `record` reads whole to scan for the names it looks up (a bigger one is
/// hashed as it streams, and its names count as unknown).
const MAX_SCANNED_BYTES: u64 = 64 << 20;

/// The contents of `path` when it is a regular file of at most [`MAX_SCANNED_BYTES`].
/// What [`record`] reads of one file the compiler read: for a file of the compiler's
/// installation, the names it asks for alone; for any other, its `stat` (taken before it is
/// read), the names it asks for (`None`: unreadable, or too big to scan) and its sha256 (of
/// the bytes scanned, or streamed for a file too big to scan; `None`: unreadable).
#[derive(Default)]
struct Read {
    meta: Option<crate::fs::stat::Stat>,
    names: Option<Arc<IncludeNames>>,
    digest: Option<[u8; 32]>,
}

/// A file's names and sha256 as [`read_one`] read them, with its `stat` from before the read:
/// remembered per process ([`READS`]) and taken again, without reading the file, while its
/// `stat` proves it unchanged ([`FileStat::proves_same_as`]).
struct ReadBefore {
    stat: FileStat,
    names: Option<Arc<IncludeNames>>,
    digest: Option<[u8; 32]>,
}

/// The files the header manifests of this process read (a compile including `hip_runtime.h`
/// with hipcc 5.2.3: 286 files, 3.8 MB, each scanned and hashed, 20 to 40 ms here), by path.
/// A file is remembered only when its modification and change times are a second or more
/// before the read (a change within the timestamps' granularity would not change them).
static READS: OnceLock<Mutex<HashMap<PathBuf, ReadBefore>>> = OnceLock::new();

/// The most files [`READS`] holds; past it, it starts again empty.
const MAX_REMEMBERED_READS: usize = 8192;

fn read_one(d: &Dependency, compiler: &CompilerIdentity) -> Read {
    let covered = d.include_dir.is_none() && compiler.covers(&d.path);
    let started = SystemTime::now();
    let meta = crate::fs::observe::metadata(&d.path).ok();
    let reads = READS.get_or_init(Default::default);
    if let Some(m) = meta.filter(|m| m.is_file()) {
        if let Some(r) = reads.lock().get(&d.path) {
            // A read remembered as a covered file's has no sha256: one not covered now (found
            // below a `-I` directory, or by another compiler) is hashed.
            if r.stat.proves_same_as(&m.fields) && (covered || r.digest.is_some()) {
                return Read {
                    meta: (!covered).then_some(m),
                    names: r.names.clone(),
                    digest: r.digest.filter(|_| !covered),
                };
            }
        }
    }
    let text = read_limited(&d.path);
    let digest = match (&meta, &text) {
        (_, _) if covered => None,
        (Some(m), Some(text)) if m.is_file() => Some(crate::digest::sha256(text)),
        (Some(m), None) if m.is_file() => hash_file(&d.path).ok(),
        _ => None,
    };
    let names = text.map(|t| Arc::new(crate::compiler::include_names::scan(&t)));
    if let Some(m) = meta.filter(|m| m.is_file() && settled(&m.fields, started)) {
        if covered || digest.is_some() {
            let mut reads = reads.lock();
            if reads.len() >= MAX_REMEMBERED_READS {
                reads.clear();
            }
            reads.insert(
                d.path.clone(),
                ReadBefore {
                    stat: m.fields,
                    names: names.clone(),
                    digest,
                },
            );
        }
    }
    Read {
        meta: if covered { None } else { meta },
        names,
        digest,
    }
}

/// Whether `stat` has a mount identity and its modification and change times are a second or
/// more before `read` (see [`READS`]).
fn settled(stat: &FileStat, read: SystemTime) -> bool {
    let Some(limit) = read.checked_sub(Duration::from_secs(1)) else {
        return false;
    };
    stat.mount != NO_MOUNT_IDENTITY && !too_new(stat.mtime, limit) && !too_new(stat.ctime, limit)
}

/// [`read_one`] of every file in `deps`, in order, read by up to four threads (the cores
/// this process may use) at once: a compile including `hip_runtime.h` read 270 files, about
/// 5 MB, each hashed and scanned.
fn read_all(deps: &[Dependency], compiler: &CompilerIdentity) -> Vec<Read> {
    const PER_THREAD: usize = 32;
    let threads = crate::compiler::cpu_count()
        .min(4)
        .min(deps.len().div_ceil(PER_THREAD));
    // A lookup being recorded (`fs::observe`, thread by thread) sees every read itself.
    if threads <= 1 || crate::fs::observe::recording() {
        return deps.iter().map(|d| read_one(d, compiler)).collect();
    }
    let mut out: Vec<Read> = Vec::new();
    out.resize_with(deps.len(), Read::default);
    std::thread::scope(|s| {
        // Interleaved (file i to thread i % threads): headers of one directory, of similar
        // sizes, spread over the threads.
        let mut slots: Vec<Vec<(usize, &mut Read)>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, slot) in out.iter_mut().enumerate() {
            slots[i % threads].push((i, slot));
        }
        for mine in slots {
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                for (i, slot) in mine {
                    *slot = read_one(&deps[i], compiler);
                }
            });
            // No thread: the scope's end leaves these slots to be read below.
            drop(spawned);
        }
    });
    // A slot a thread could not be started for is read here.
    for (i, slot) in out.iter_mut().enumerate() {
        if slot.meta.is_none() && slot.names.is_none() && slot.digest.is_none() {
            *slot = read_one(&deps[i], compiler);
        }
    }
    out
}

fn read_limited(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = Vec::new();
    file.take(MAX_SCANNED_BYTES + 1)
        .read_to_end(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_SCANNED_BYTES).then_some(text)
}

/// A directory as a [`DirRecord`] names it: its base and its name below it.
type DirName = (Option<u32>, Vec<u8>);

/// Names (single components or paths) by the directory they are looked up in.
type NamesByDir = std::collections::BTreeMap<DirName, std::collections::BTreeSet<Vec<u8>>>;

/// The names a compile could have looked up (`record`'s names rule), gathered as its files
/// are read.
#[derive(Default)]
struct NamesLookedUp {
    /// Looked up in every search directory: every name asked for, and every name a file read
    /// was found by below a search directory.
    everywhere: std::collections::BTreeSet<Vec<u8>>,
    /// Looked up in a directory holding a file read (its base and name, as a [`DirRecord`]'s):
    /// the quoted names its files ask for (the preprocessor looks beside the including file
    /// first), and the names of the files read there.
    beside: NamesByDir,
    /// The first computed name met, or a file too big to scan.
    computed: Option<String>,
}

impl NamesLookedUp {
    /// Adds the names `text` asks for; its quoted ones also beside it, in `dir` (`None`: the
    /// source, staged where nothing else is, or a file of the compiler's installation).
    fn scan(&mut self, text: &[u8], dir: Option<(Option<u32>, Vec<u8>)>) {
        self.add(&crate::compiler::include_names::scan(text), dir);
    }

    /// [`NamesLookedUp::scan`] of what [`crate::compiler::include_names::scan`] found.
    fn add(&mut self, found: &IncludeNames, dir: Option<(Option<u32>, Vec<u8>)>) {
        if let (None, Some((directive, _))) = (&self.computed, &found.computed) {
            self.computed = Some(directive.clone());
        }
        for (name, delimiter, _) in &found.names {
            let name = name.clone();
            let delimiter = *delimiter;
            // `..` is resolved by the kernel through symbolic links, not by the text: where
            // such a name is looked up is not known here, so every directory keeps its whole
            // listing (as for a computed name). So does an absolute name.
            let path = Path::new(OsStr::from_bytes(&name));
            if self.computed.is_none()
                && (path.is_absolute()
                    || path
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir)))
            {
                self.computed = Some(format!("{} (a name with `..` or absolute)", path.display()));
            }
            if let (Some(dir), crate::compiler::include_names::Delimiter::Quoted) =
                (&dir, delimiter)
            {
                self.beside
                    .entry(dir.clone())
                    .or_default()
                    .insert(name.clone());
            }
            self.everywhere.insert(name);
        }
    }

    /// A file whose names cannot be known (unreadable, or too big to scan).
    fn unreadable(&mut self, path: &Path) {
        self.computed
            .get_or_insert_with(|| format!("{} (not scanned)", path.display()));
    }

    /// Each directory to record with the single names looked up in it: for a name `a/b/x.h`
    /// looked up in `d`, `a` in `d`, `b` in `d/a` and `x.h` in `d/a/b`, down to the first
    /// that does not exist (what is below it cannot be found). An absolute name, or one
    /// holding `..`, is looked up where it points: its own directories.
    fn by_directory(
        &self,
        search: &[(Option<u32>, PathBuf)],
        include_dirs: &[PathBuf],
        installation: &Path,
    ) -> NamesByDir {
        let mut out = NamesByDir::new();
        for (base, dir) in search {
            out.entry((*base, dir.as_os_str().as_bytes().to_vec()))
                .or_default();
        }
        // Whether each directory met is one, asked once: the names below a search directory
        // share their first components (`hip/amd_detail/...`: 1,500 `stat`s of a few dozen
        // directories for `hip_runtime.h`'s names, otherwise).
        let mut is_dir: std::collections::HashMap<PathBuf, bool> = Default::default();
        let mut look = |base: Option<u32>, dir: &Path, name: &[u8]| {
            let name = Path::new(OsStr::from_bytes(name));
            if name.is_absolute()
                || name
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                // Looked up where it points: the directory it names, by absolute path.
                let Some(at) =
                    resolve(base, dir.as_os_str().as_bytes(), include_dirs, installation)
                else {
                    return;
                };
                let mut real = PathBuf::new();
                for c in at.join(name).components() {
                    match c {
                        std::path::Component::ParentDir => {
                            real.pop();
                        }
                        std::path::Component::CurDir => {}
                        other => real.push(other),
                    }
                }
                if let (Some(parent), Some(file)) = (real.parent(), real.file_name()) {
                    out.entry((None, parent.as_os_str().as_bytes().to_vec()))
                        .or_default()
                        .insert(file.as_bytes().to_vec());
                }
                return;
            }
            let parts: Vec<&[u8]> = name
                .components()
                .filter_map(|c| match c {
                    std::path::Component::Normal(p) => Some(p.as_bytes()),
                    _ => None,
                })
                .collect();
            let mut dir = dir.to_path_buf();
            for (i, part) in parts.iter().enumerate() {
                out.entry((base, dir.as_os_str().as_bytes().to_vec()))
                    .or_default()
                    .insert(part.to_vec());
                if i + 1 == parts.len() {
                    break;
                }
                dir.push(OsStr::from_bytes(part));
                let found = resolve(base, dir.as_os_str().as_bytes(), include_dirs, installation)
                    .is_some_and(|p| {
                        *is_dir
                            .entry(p)
                            .or_insert_with_key(|p| crate::fs::observe::is_dir(p))
                    });
                if !found {
                    break;
                }
            }
        };
        for (base, dir) in search {
            for name in &self.everywhere {
                look(*base, dir, name);
            }
        }
        for ((base, dir), names) in &self.beside {
            let dir = Path::new(OsStr::from_bytes(dir));
            for name in names {
                look(*base, dir, name);
            }
        }
        out
    }
}

/// The name an absolute path read by the compiler is recorded under: with `.` and `..`
/// resolved lexically when the system resolves it to the same file (no symbolic link on the
/// way), else as printed.
fn system_name(path: &Path) -> PathBuf {
    use std::path::Component;
    if !path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return path.to_path_buf();
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    match crate::fs::observe::canonicalize(path) {
        Ok(real) if real == out => out,
        _ => path.to_path_buf(),
    }
}

/// The absolute search directories of a compile besides its `-I` directories: the values of
/// `-I DIR`, `-IDIR`, `-isystem DIR`, `-isystemDIR`, `-idirafter DIR` in `extra_flags`, then
/// the entries of `CPATH`, `CPLUS_INCLUDE_PATH` and `C_INCLUDE_PATH` in `env` (empty entries,
/// which mean the current directory, are the build directory and left out).
pub fn extra_search_dirs(
    extra_flags: &[String],
    env: &[(String, std::ffi::OsString)],
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    const OPTS: [&str; 4] = ["-I", "-isystem", "-idirafter", "-iquote"];
    let mut it = extra_flags.iter();
    while let Some(f) = it.next() {
        if OPTS.contains(&f.as_str()) {
            out.extend(it.next().map(PathBuf::from));
        } else if let Some(v) = OPTS.iter().find_map(|o| f.strip_prefix(o)) {
            out.push(PathBuf::from(v));
        }
    }
    for var in ["CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"] {
        if let Some((_, v)) = env.iter().find(|(k, _)| k == var) {
            for p in v.as_bytes().split(|b| *b == b':') {
                if !p.is_empty() {
                    out.push(PathBuf::from(OsStr::from_bytes(p)));
                }
            }
        }
    }
    out.retain(|p| p.is_absolute());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest of the one file `f`, with its stat now and the sha256 `recorded` (not its
    /// content's), and of its directory with a listing hash that is no listing's.
    fn manifest_of(f: &Path, recorded: [u8; 32]) -> Manifest {
        let dir = f.parent().unwrap();
        Manifest {
            files: vec![FileRecord {
                include_dir: None,
                name: f.as_os_str().as_bytes().to_vec(),
                stat: FileStat::read(f).unwrap(),
                sha256: recorded,
            }],
            dirs: vec![DirRecord {
                include_dir: None,
                name: dir.as_os_str().as_bytes().to_vec(),
                stat: FileStat::read(dir),
                listing: Some([9; 32]),
                looked_up: None,
            }],
        }
    }

    #[test]
    fn a_record_whose_stat_proves_nothing_is_hashed_and_listed_again() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.h");
        std::fs::write(&f, b"#define VALUE 222\n").unwrap();
        let real = hash_file(&f).unwrap();
        let listing = listing_hash(d.path()).unwrap();
        let wrong = [7; 32];
        // The same mount, the same fields: the recorded hashes are trusted (that is what a
        // stat record is for: no hashing on a hit).
        let trusted = manifest_of(&f, wrong);
        let now = trusted.current(&[], Path::new("")).unwrap();
        assert_eq!(now, trusted);
        // The same fields without a mount identity (a kernel before 6.8, a record written
        // before hipjit kept one): hashed and listed again.
        let mut bare = manifest_of(&f, wrong);
        bare.files[0].stat = bare.files[0].stat.without_mount_identity();
        bare.dirs[0].stat = bare.dirs[0].stat.map(FileStat::without_mount_identity);
        let (now, changed) = bare
            .clone()
            .into_current_checked(&[], Path::new(""))
            .unwrap();
        assert_eq!(now.files[0].sha256, real);
        assert_eq!(now.dirs[0].listing, Some(listing));
        assert!(changed, "stored again with the stat as it is now");
        assert_eq!(now.files[0].stat, FileStat::read(&f).unwrap());
    }

    #[test]
    fn a_manifest_from_another_node_is_hashed_whatever_its_stats() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.h");
        std::fs::write(&f, b"#define VALUE 222\n").unwrap();
        // Another node's manifest whose stats match the files here, mount identity included
        // (a node booted alike numbers its mounts alike), and whose hashes are of other bytes.
        let theirs = manifest_of(&f, [7; 32]);
        let read = Manifest::from_bytes(&theirs.to_bytes())
            .unwrap()
            .from_another_node();
        assert!(read.files.iter().all(|r| r.stat.mount == NO_MOUNT_IDENTITY));
        let now = read.current(&[], Path::new("")).unwrap();
        assert_eq!(now.files[0].sha256, hash_file(&f).unwrap());
        assert_eq!(now.dirs[0].listing, Some(listing_hash(d.path()).unwrap()));
        assert_ne!(
            crate::cache::key::result_key(&crate::cache::key::CacheKey([1; 32]), &now),
            crate::cache::key::result_key(&crate::cache::key::CacheKey([1; 32]), &theirs)
        );
    }

    #[test]
    fn a_timestamp_at_or_after_the_start_is_too_new() {
        let start = UNIX_EPOCH + Duration::new(1000, 500_000_000);
        assert!(too_new((1000, 500_000_000), start));
        assert!(too_new((1000, 500_000_001), start));
        assert!(!too_new((1000, 499_999_999), start));
        // Whole-second filesystems truncate: a stamp of the start's own second is too new,
        // one of the second before (written before the start) is not.
        assert!(too_new((1000, 0), start));
        assert!(!too_new((999, 0), start));
    }

    #[test]
    fn manifests_round_trip_and_garbage_is_refused() {
        let m = Manifest {
            files: vec![FileRecord {
                include_dir: Some(0),
                name: b"a\xff.h".to_vec(),
                stat: FileStat {
                    size: 1,
                    mtime: (1, 2),
                    ctime: (3, 4),
                    ino: 5,
                    dev: 6,
                    mount: 8,
                },
                sha256: [7; 32],
            }],
            dirs: vec![],
        };
        assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
        assert!(Manifest::from_bytes(b"\xc1garbage").is_err());
    }

    #[test]
    fn a_header_below_nested_search_directories_records_the_way_of_each_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cuda");
        let include = root.join("include");
        std::fs::create_dir_all(include.join("cccl/nv")).unwrap();
        std::fs::create_dir_all(include.join("nv")).unwrap();
        let header = include.join("cccl/nv/extra.h");
        std::fs::write(&header, "#define SH 1\n").unwrap();
        let compiler = CompilerIdentity {
            kind: crate::compiler::CompilerKind::Nvrtc,
            path: root.join("lib/libnvrtc.so.13"),
            version: String::new(),
            fingerprint: String::new(),
            covered: vec![],
            root: root.clone(),
            header_dirs: vec![include.clone()],
            host_compiler: None,
            system_include_dirs: Vec::new(),
        };
        let recorded = record(
            b"#include <nv/extra.h>\n",
            &[Dependency {
                include_dir: None,
                name: header.clone(),
                path: header,
            }],
            &[],
            &[include.clone(), include.join("cccl")],
            &compiler,
            SystemTime::now(),
            None,
        );
        let dirs: Vec<(Option<u32>, String, Vec<String>)> = recorded
            .manifest
            .dirs
            .iter()
            .map(|d| {
                let names = d.looked_up.as_ref().unwrap();
                (
                    d.include_dir,
                    String::from_utf8_lossy(&d.name).into_owned(),
                    names
                        .iter()
                        .map(|n| String::from_utf8_lossy(n).into_owned())
                        .collect(),
                )
            })
            .collect();
        let installation = |dirs: &[(&str, &[&str])]| -> Vec<(Option<u32>, String, Vec<String>)> {
            dirs.iter()
                .map(|(d, names)| {
                    let names = names.iter().map(|n| n.to_string()).collect();
                    (Some(INSTALLATION), d.to_string(), names)
                })
                .collect()
        };
        // `<nv/extra.h>` searches `include/nv` first: an `extra.h` added there shadows this
        // header; so would a `cccl` directory added in `include/cccl`. Nothing else there is
        // looked up.
        assert_eq!(
            dirs,
            installation(&[
                ("include", &["cccl", "nv"]),
                ("include/cccl", &["cccl", "nv"]),
                ("include/cccl/nv", &["extra.h"]),
                ("include/nv", &["extra.h"]),
            ])
        );
    }

    #[test]
    fn extra_flags_and_cpath_give_search_directories() {
        let flags = ["-I/x", "-isystem", "/y", "-Wall", "-I", "rel"].map(String::from);
        let env = [("CPATH".to_string(), std::ffi::OsString::from("/c1::/c2"))];
        assert_eq!(
            extra_search_dirs(&flags, &env),
            ["/x", "/y", "/c1", "/c2"].map(PathBuf::from)
        );
    }

    #[test]
    fn a_header_remembered_as_the_compilers_is_hashed_when_a_later_compile_finds_it_by_include_dir()
    {
        // One file read twice in a process: first as a header the compiler's identity covers
        // (no sha256 is taken of those), then found below a `-I` directory of a compile by
        // another compiler, whose manifest must hold its sha256.
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("inc");
        std::fs::create_dir_all(&inc).unwrap();
        let header = inc.join("x.h");
        std::fs::write(&header, "#define BREAK_X 1\n").unwrap();
        // Old enough to be remembered (its change time a second before the reads).
        std::thread::sleep(Duration::from_millis(1100));
        let identity = |covered: Vec<PathBuf>| CompilerIdentity {
            kind: crate::compiler::CompilerKind::Hipcc,
            path: dir.path().join("bin/hipcc"),
            version: String::new(),
            fingerprint: String::new(),
            covered,
            root: PathBuf::new(),
            header_dirs: vec![],
            host_compiler: None,
            system_include_dirs: Vec::new(),
        };
        let source = b"#include <x.h>\n";
        let first = record(
            source,
            &[Dependency {
                include_dir: None,
                name: header.clone(),
                path: header.clone(),
            }],
            &[],
            std::slice::from_ref(&inc),
            &identity(vec![inc.clone()]),
            SystemTime::now(),
            None,
        );
        assert_eq!(first.unpublishable, None);
        assert!(first.manifest.files.is_empty());
        let second = record(
            source,
            &[Dependency {
                include_dir: Some(0),
                name: PathBuf::from("x.h"),
                path: header.clone(),
            }],
            std::slice::from_ref(&inc),
            &[],
            &identity(vec![]),
            SystemTime::now(),
            None,
        );
        assert_eq!(second.unpublishable, None);
        let files: Vec<_> = second
            .manifest
            .files
            .iter()
            .map(|f| (f.include_dir, f.name.clone(), crate::digest::hex(&f.sha256)))
            .collect();
        assert_eq!(
            files,
            [(
                Some(0),
                b"x.h".to_vec(),
                // sha256 of "#define BREAK_X 1\n" (coreutils' sha256sum).
                "13e188654943e01c133e05a78f7ac286e9cf06d9bb1697c0010aaf86455650ee".to_string()
            )]
        );
    }

    #[test]
    fn a_remembered_header_rewritten_with_its_size_and_modification_time_kept_is_hashed_again() {
        // The same process records the header three times: as first written (remembered, a
        // second old), rewritten in place and renamed over, each time with its size and
        // modification time put back. Each record holds the sha256 of the bytes there then.
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("inc");
        std::fs::create_dir_all(&inc).unwrap();
        let header = inc.join("y.h");
        std::fs::write(&header, "#define BREAK_Y 1\n").unwrap();
        let mtime = std::fs::metadata(&header).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let compiler = CompilerIdentity {
            kind: crate::compiler::CompilerKind::Hipcc,
            path: dir.path().join("bin/hipcc"),
            version: String::new(),
            fingerprint: String::new(),
            covered: vec![],
            root: PathBuf::new(),
            header_dirs: vec![],
            host_compiler: None,
            system_include_dirs: Vec::new(),
        };
        let recorded_sha = || {
            let r = record(
                b"#include <y.h>\n",
                &[Dependency {
                    include_dir: Some(0),
                    name: PathBuf::from("y.h"),
                    path: header.clone(),
                }],
                std::slice::from_ref(&inc),
                &[],
                &compiler,
                SystemTime::now(),
                None,
            );
            assert_eq!(r.manifest.files.len(), 1);
            crate::digest::hex(&r.manifest.files[0].sha256)
        };
        let keep_time = |f: &std::fs::File| {
            f.set_times(std::fs::FileTimes::new().set_modified(mtime))
                .unwrap()
        };
        // sha256sum of "#define BREAK_Y 1\n", "... 2\n" and "... 3\n".
        assert_eq!(
            recorded_sha(),
            "5b74fd756111539bca794bd19f501bc33ee5e8bbd8468d80c14c341089ca536a"
        );
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&header)
            .unwrap();
        std::io::Write::write_all(&mut &f, b"#define BREAK_Y 2\n").unwrap();
        keep_time(&f);
        drop(f);
        assert_eq!(
            recorded_sha(),
            "657bc9f1406d2b1f75ffdbede7f7446c36d6c2fc76e8283827e6faba79ff46eb"
        );
        let new = inc.join("y.h.new");
        std::fs::write(&new, "#define BREAK_Y 3\n").unwrap();
        keep_time(&std::fs::File::options().write(true).open(&new).unwrap());
        std::fs::rename(&new, &header).unwrap();
        assert_eq!(
            recorded_sha(),
            "033ce198fa63e37e4f4181dd72b270000cb800388deabcf672fefd3572475115"
        );
    }
}
