//! Where an in-process compiler's library is, remembered per user, so that a cache hit never
//! loads it.
//!
//! Finding hipRTC or NVRTC means loading candidates until one exports the entry points
//! ([`crate::compiler::hiprtc::HipRtc::open`], [`crate::compiler::nvrtc::NvRtc::open`]), and
//! its version text needs a call into it (`hiprtcVersion`, `nvrtcVersion`). Loading costs
//! 10-60 ms (NVRTC is 141 MB; hipRTC 5.x is inside `libamdhip64`), more than a whole disk hit.
//! So the end of a search is remembered beside the compiler identities
//! ([`crate::compiler::identity::identity_dir`]), in a file named after the kind and the
//! search's inputs (the variables and paths it reads, `LD_LIBRARY_PATH` among them), holding
//! the library found, its version text, the major and minor versions Auto's selection uses, and the
//! `stat` of every place the search looks (each candidate directory, a file named by a
//! variable, `/etc/ld.so.cache`, each `LD_LIBRARY_PATH` directory; a missing one recorded as
//! missing) and of the library and its directory. A fresh process whose search inputs and
//! places are unchanged, and whose library's remembered identity is unchanged
//! ([`crate::compiler::identity`]: the library itself and the files it loads, by `stat`),
//! takes the library's path, version and identity from there without loading it; the library is loaded at its first compile
//! ([`crate::compiler::backend::RtcLibrary`]). Anything changed (a library rewritten or
//! renamed over, a file added to a directory searched) searches, loads and remembers again.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::identity::{self, CompilerIdentity, CompilerKind, FileStat};

/// 5: byte strings as MessagePack `bin` ([`crate::fs::byte_strings`]). 6: the minor version
/// beside the major (Auto's parity table is keyed by both); a memo of 5 is not read (searched
/// and loaded again, then remembered in this format).
pub(crate) const FORMAT: u32 = 6;

/// The inputs of one library search and the `stat` of each place it looks, read when the
/// search is described (before any library is loaded).
#[derive(Clone, Debug)]
pub struct LibrarySearch {
    kind: CompilerKind,
    inputs: Vec<u8>,
    watched: Vec<(Vec<u8>, Option<FileStat>)>,
}

impl LibrarySearch {
    /// The search of `kind`'s library from `inputs` (name and value of each variable or path
    /// the search reads; `None` when unset) looking in `places` (directories and files, in any
    /// order). `LD_LIBRARY_PATH`, its directories and `/etc/ld.so.cache` are added: the
    /// dynamic loader's part of every search.
    pub fn new(
        kind: CompilerKind,
        inputs: &[(&str, Option<&OsStr>)],
        places: Vec<PathBuf>,
    ) -> LibrarySearch {
        let ld_path = std::env::var_os("LD_LIBRARY_PATH");
        let mut h = Vec::new();
        let mut item = |b: &[u8]| {
            h.extend_from_slice(&(b.len() as u64).to_le_bytes());
            h.extend_from_slice(b);
        };
        item(kind.as_str().as_bytes());
        for (name, value) in inputs
            .iter()
            .copied()
            .chain(std::iter::once(("LD_LIBRARY_PATH", ld_path.as_deref())))
        {
            item(name.as_bytes());
            match value {
                Some(v) => item(v.as_bytes()),
                None => item(b"\0unset"),
            }
        }
        let mut places = places;
        places.push(PathBuf::from("/etc/ld.so.cache"));
        if let Some(p) = &ld_path {
            places.extend(std::env::split_paths(p).filter(|d| d.is_absolute()));
        }
        places.sort();
        places.dedup();
        let watched = places
            .into_iter()
            .map(|p| {
                let stat = FileStat::read(&p);
                (p.into_os_string().into_encoded_bytes(), stat)
            })
            .collect();
        LibrarySearch {
            kind,
            inputs: h,
            watched,
        }
    }

    /// The file where this search's end is remembered, under `dir`.
    fn memo_file(&self, dir: &Path) -> PathBuf {
        let digest = crate::digest::hex(&crate::digest::sha256(&self.inputs));
        dir.join(format!(
            "{}-search-{}.loc",
            self.kind.as_str(),
            &digest[..32]
        ))
    }
}

#[derive(Serialize, Deserialize)]
struct Memo {
    format: u32,
    #[serde(with = "serde_bytes")]
    inputs: Vec<u8>,
    #[serde(with = "crate::fs::byte_strings::pairs")]
    watched: Vec<(Vec<u8>, Option<FileStat>)>,
    #[serde(with = "serde_bytes")]
    library: Vec<u8>,
    /// The library with symbolic links resolved when remembered (the identity memo's name):
    /// the same file as `library` while `library_stat` is unchanged.
    #[serde(with = "serde_bytes")]
    resolved: Vec<u8>,
    /// The library's `stat`, then its directory's (a file added beside it, where the dynamic
    /// loader may look first, changes the directory).
    library_stat: (FileStat, Option<FileStat>),
    version: String,
    major: u32,
    minor: Option<u32>,
    /// The bytes of the library's identity memo ([`identity::identify_library`]'s file, as it
    /// was when this was remembered), so that a recall reads one file, not two; checked as that
    /// file is, by the `stat` of every file it recorded. `None`: read that file.
    #[serde(with = "serde_bytes")]
    identity_memo: Option<Vec<u8>>,
}

/// The `stat` of `library` and of its directory.
fn library_stats(library: &Path) -> Option<(FileStat, Option<FileStat>)> {
    Some((
        FileStat::read(library)?,
        library.parent().and_then(FileStat::read),
    ))
}

/// Whether the `stat` of a library and its directory as remembered proves them unchanged,
/// given `now` ([`FileStat::proves_same_as`]).
fn library_unchanged(
    remembered: &(FileStat, Option<FileStat>),
    now: &(FileStat, Option<FileStat>),
) -> bool {
    remembered.0.proves_same_as(&now.0)
        && FileStat::proves_same_as_opt(remembered.1.as_ref(), now.1.as_ref())
}

/// Whether the places a search looked, as remembered, are unchanged now: the same places, each
/// absent as it was or present with a `stat` that proves it unchanged
/// ([`FileStat::proves_same_as`]).
fn places_unchanged(
    remembered: &[(Vec<u8>, Option<FileStat>)],
    now: &[(Vec<u8>, Option<FileStat>)],
) -> bool {
    remembered.len() == now.len()
        && remembered
            .iter()
            .zip(now)
            .all(|((p, r), (q, n))| p == q && FileStat::proves_same_as_opt(r.as_ref(), n.as_ref()))
}

/// Where a library search ended: the library, its version text and its major and minor
/// versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The library file the search loaded (as `dladdr` named it).
    pub library: PathBuf,
    /// Its version text, as the compiler identity holds it.
    pub version: String,
    /// Its major version as Auto's selection takes it (HIP's for hipRTC, CUDA's for NVRTC; 0
    /// when the library did not tell).
    pub major: u32,
    /// Its minor version, likewise (HIP's for hipRTC, CUDA's for NVRTC); `None` when the
    /// library did not tell.
    pub minor: Option<u32>,
}

/// A library search's end with the library's identity, taken from the per-user memos:
/// nothing was loaded.
#[derive(Clone, Debug)]
pub struct Recalled {
    /// Where the search ended.
    pub location: Location,
    /// The library's identity ([`identity::identify_library`]).
    pub identity: CompilerIdentity,
    /// The library file's `stat` as the recall checked it, for
    /// [`crate::compiler::backend::RtcLibrary::unloaded_as`].
    pub library_stat: FileStat,
}

fn memo_dir(dir: Option<&Path>) -> Option<PathBuf> {
    dir.map(Path::to_path_buf).or_else(identity::identity_dir)
}

/// The end of `search` as remembered in `dir` (else `identity_dir`), when the
/// places searched and the library file are unchanged by `stat`; `None` otherwise (search and
/// load it). Loads nothing.
pub fn recall_location(search: &LibrarySearch, dir: Option<&Path>) -> Option<Location> {
    let memo = read(search, dir)?;
    let library = PathBuf::from(OsStr::from_bytes(&memo.library));
    if !library_unchanged(&memo.library_stat, &library_stats(&library)?) {
        return None;
    }
    Some(Location {
        library,
        version: memo.version,
        major: memo.major,
        minor: memo.minor,
    })
}

/// The memo of `search` in `dir`, when it is of this format and the search's inputs and the
/// places it looks are as remembered.
fn read(search: &LibrarySearch, dir: Option<&Path>) -> Option<Memo> {
    let dir = memo_dir(dir)?;
    let bytes = identity::read_private(&search.memo_file(&dir))?;
    let memo: Memo = rmp_serde::from_slice(&bytes).ok()?;
    (memo.format == FORMAT
        && memo.inputs == search.inputs
        && places_unchanged(&memo.watched, &search.watched))
    .then_some(memo)
}

/// [`recall_location`] with the library's identity remembered in the same directory, when it
/// is unchanged ([`identity::identify_library`]'s memo, checked by `stat`), holds the same
/// version text and covers no directory. Loads nothing.
///
/// With the identity memo kept in the search's memo ([`remember`] after the identity was made)
/// one file is read, and when the library was found by its resolved path its own `stat` and
/// its directory's are not read twice: the identity memo checks both (the library is one of
/// its programs, its directory a program's directory) against their state when the identity
/// was made.
pub fn recall(search: &LibrarySearch, dir: Option<&Path>) -> Option<Recalled> {
    let memo = read(search, dir)?;
    let library = PathBuf::from(OsStr::from_bytes(&memo.library));
    let resolved = PathBuf::from(OsStr::from_bytes(&memo.resolved));
    let identity = match &memo.identity_memo {
        Some(bytes) => {
            if library != resolved
                && !library_unchanged(&memo.library_stat, &library_stats(&library)?)
            {
                return None;
            }
            identity::memo_identity(bytes, &resolved)?
        }
        None => {
            if !library_unchanged(&memo.library_stat, &library_stats(&library)?) {
                return None;
            }
            let dir = memo_dir(dir)?;
            let id_file = dir.join(identity::library_memo_name(
                search.kind,
                &resolved,
                &library,
            ));
            identity::read_memo(&id_file, &resolved)?
        }
    };
    if identity.kind != search.kind
        || identity.version != memo.version
        || !identity.covered.is_empty()
    {
        return None;
    }
    Some(Recalled {
        location: Location {
            library,
            version: memo.version,
            major: memo.major,
            minor: memo.minor,
        },
        identity,
        library_stat: memo.library_stat.0,
    })
}

/// Remembers in `dir` (else `identity_dir`) that `search` ended at `location`,
/// with the `stat` of its library read now. A directory that cannot be written, or a library
/// that cannot be stat'd, only means nothing is remembered.
pub fn remember(search: &LibrarySearch, location: &Location, dir: Option<&Path>) {
    // A search done the long way (a library loaded): not recorded by `stat` alone.
    crate::fs::observe::unrecordable();
    let Some(dir) = memo_dir(dir) else { return };
    let Some(library_stat) = library_stats(&location.library) else {
        return;
    };
    let Ok(resolved) = crate::fs::observe::canonicalize(&location.library) else {
        return;
    };
    // The identity made for this library, when there is one yet.
    let identity_memo = identity::read_private(&dir.join(identity::library_memo_name(
        search.kind,
        &resolved,
        &location.library,
    )));
    let memo = Memo {
        format: FORMAT,
        inputs: search.inputs.clone(),
        watched: search.watched.clone(),
        library: location.library.as_os_str().as_bytes().to_vec(),
        resolved: resolved.as_os_str().as_bytes().to_vec(),
        library_stat,
        version: location.version.clone(),
        major: location.major,
        minor: location.minor,
        identity_memo,
    };
    identity::write_private(&search.memo_file(&dir), &memo);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search for hipRTC looking in `dir/searched`, and a library file under `dir/lib`.
    fn setup(dir: &Path) -> (LibrarySearch, Location, PathBuf) {
        let lib_dir = dir.join("lib");
        std::fs::create_dir_all(&lib_dir).unwrap();
        let library = lib_dir.join("libhiprtc.so.6");
        std::fs::write(&library, b"first").unwrap();
        let search = LibrarySearch::new(
            CompilerKind::HipRtc,
            &[("HIPJIT_HIPRTC_LIBRARY", None)],
            vec![dir.join("searched")],
        );
        let location = Location {
            library: library.clone(),
            version: "hipRTC libhiprtc.so.6 (HIP 6, hiprtcVersion 9.0)\n".into(),
            major: 6,
            minor: Some(4),
        };
        (search, location, library)
    }

    #[test]
    fn an_unchanged_search_is_recalled_with_its_version_and_major() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, _) = setup(d.path());
        assert_eq!(recall_location(&search, Some(&ids)), None);
        remember(&search, &location, Some(&ids));
        assert_eq!(recall_location(&search, Some(&ids)), Some(location));
    }

    /// A memo of format 5 (a major version and no minor) is not read: the search is done again,
    /// never taken as a version with no minor, nor as another's.
    #[test]
    fn a_memo_of_the_previous_format_is_not_recalled() {
        #[derive(Serialize)]
        struct MemoV5 {
            format: u32,
            #[serde(with = "serde_bytes")]
            inputs: Vec<u8>,
            #[serde(with = "crate::fs::byte_strings::pairs")]
            watched: Vec<(Vec<u8>, Option<FileStat>)>,
            #[serde(with = "serde_bytes")]
            library: Vec<u8>,
            #[serde(with = "serde_bytes")]
            resolved: Vec<u8>,
            library_stat: (FileStat, Option<FileStat>),
            version: String,
            major: u32,
            #[serde(with = "serde_bytes")]
            identity_memo: Option<Vec<u8>>,
        }
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, library) = setup(d.path());
        remember(&search, &location, Some(&ids));
        assert_eq!(recall_location(&search, Some(&ids)), Some(location.clone()));
        let old = MemoV5 {
            format: 5,
            inputs: search.inputs.clone(),
            watched: search.watched.clone(),
            library: library.as_os_str().as_bytes().to_vec(),
            resolved: std::fs::canonicalize(&library)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec(),
            library_stat: library_stats(&library).unwrap(),
            version: location.version.clone(),
            major: 6,
            identity_memo: None,
        };
        identity::write_private(&search.memo_file(&ids), &old);
        assert_eq!(recall_location(&search, Some(&ids)), None);
        assert!(recall(&search, Some(&ids)).is_none());
        // Even under this format's number, the shape of 5 is not misread.
        identity::write_private(
            &search.memo_file(&ids),
            &MemoV5 {
                format: FORMAT,
                ..old
            },
        );
        assert_eq!(recall_location(&search, Some(&ids)), None);
    }

    #[test]
    fn a_library_rewritten_in_place_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, library) = setup(d.path());
        remember(&search, &location, Some(&ids));
        std::fs::write(&library, b"second, longer").unwrap();
        assert_eq!(recall_location(&search, Some(&ids)), None);
    }

    #[test]
    fn a_library_renamed_over_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, library) = setup(d.path());
        remember(&search, &location, Some(&ids));
        let new = d.path().join("new");
        std::fs::write(&new, b"first").unwrap();
        std::fs::rename(&new, &library).unwrap();
        assert_eq!(recall_location(&search, Some(&ids)), None);
    }

    #[test]
    fn a_file_added_beside_the_library_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, library) = setup(d.path());
        remember(&search, &location, Some(&ids));
        std::fs::write(library.with_file_name("libhiprtc.so.7"), b"newer").unwrap();
        assert_eq!(recall_location(&search, Some(&ids)), None);
    }

    /// After the identity is made, the search's memo holds it: a recall reads that one file
    /// (the identity's own file removed, it still recalls), and the identity's checks still
    /// apply to it (the library rewritten in place is not recalled).
    #[test]
    fn the_identity_kept_in_the_search_memo_is_recalled_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, library) = setup(d.path());
        let id = identity::identify_library(
            CompilerKind::HipRtc,
            &library,
            location.version.clone(),
            Vec::new,
            Vec::new(),
            Some(&ids),
        )
        .unwrap();
        remember(&search, &location, Some(&ids));
        let id_file = ids.join(identity::library_memo_name(
            CompilerKind::HipRtc,
            &std::fs::canonicalize(&library).unwrap(),
            &library,
        ));
        std::fs::remove_file(&id_file).unwrap();
        let r = recall(&search, Some(&ids)).expect("recalled from the search's memo alone");
        assert_eq!((r.location, r.identity), (location, id));
        // Same size, new bytes, in place: the library's stat changes.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&library, b"fresh").unwrap();
        assert!(recall(&search, Some(&ids)).is_none());
    }

    /// The memo keeps where the library's links led when remembered (no `realpath` on a
    /// recall): a link moved to another file of the same size and times is another library.
    #[test]
    fn a_link_to_the_library_moved_to_another_file_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, mut location, library) = setup(d.path());
        let link = library.with_file_name("libhiprtc.so");
        std::os::unix::fs::symlink("libhiprtc.so.6", &link).unwrap();
        location.library = link.clone();
        remember(&search, &location, Some(&ids));
        assert_eq!(recall_location(&search, Some(&ids)).unwrap(), location);
        let memo = read(&search, Some(&ids)).unwrap();
        assert_eq!(
            Path::new(OsStr::from_bytes(&memo.resolved)),
            std::fs::canonicalize(&library).unwrap()
        );
        // Another file with the same bytes and times, the link pointed at it.
        let other = library.with_file_name("libhiprtc.so.6.1");
        std::fs::copy(&library, &other).unwrap();
        let times = std::fs::metadata(&library).unwrap().modified().unwrap();
        std::fs::File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_modified(times)
            .unwrap();
        let tmp = library.with_file_name("tmp-link");
        std::os::unix::fs::symlink("libhiprtc.so.6.1", &tmp).unwrap();
        std::fs::rename(&tmp, &link).unwrap();
        assert_eq!(recall_location(&search, Some(&ids)), None);
    }

    #[test]
    fn a_place_searched_that_appears_is_not_recalled() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, _) = setup(d.path());
        remember(&search, &location, Some(&ids));
        std::fs::create_dir(d.path().join("searched")).unwrap();
        let again = LibrarySearch::new(
            CompilerKind::HipRtc,
            &[("HIPJIT_HIPRTC_LIBRARY", None)],
            vec![d.path().join("searched")],
        );
        assert_eq!(recall_location(&again, Some(&ids)), None);
    }

    #[test]
    fn another_search_input_is_another_memo() {
        let d = tempfile::tempdir().unwrap();
        let ids = d.path().join("ids");
        let (search, location, _) = setup(d.path());
        remember(&search, &location, Some(&ids));
        let other = LibrarySearch::new(
            CompilerKind::HipRtc,
            &[(
                "HIPJIT_HIPRTC_LIBRARY",
                Some(OsStr::new("/elsewhere/libhiprtc.so")),
            )],
            vec![d.path().join("searched")],
        );
        assert_eq!(recall_location(&other, Some(&ids)), None);
    }
}
