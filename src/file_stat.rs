//! `stat(2)` of many files at once, as a cache hit checks them: each directory opened once
//! (`O_PATH`, relative to the nearest directory above it already open) at its fourth file,
//! then `fstatat(2)` of each name in it, instead of a lookup of every component of every full
//! path (the first three files of a directory are stat'd by path: opening the directory costs
//! two system calls more, its `openat` and `close`, which only many files in it repay where a
//! system call is dear, as on a virtual machine). A header
//! manifest of 300 files in 30 directories of a toolkit 10 levels deep costs 30 opens and 300
//! one-component lookups this way, against 3,000 component lookups by path.
//!
//! The answer is the one `stat(2)` of the full path gives at that moment (symbolic links
//! followed, in the directory part by the open and in the last component by `fstatat`), so
//! the caller's comparison with a recorded [`FileStat`] means what it did. A directory that
//! cannot be opened makes every file in it missing, as a `stat` by path would.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::compiler::identity::FileStat;

/// What [`StatByDir::stat`] tells of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The fields a cache compares.
    pub fields: FileStat,
    /// Whether it is a regular file.
    pub is_file: bool,
    /// Whether it is a directory.
    pub is_dir: bool,
}

impl Stat {
    fn of_metadata(m: &std::fs::Metadata) -> Stat {
        Stat {
            fields: FileStat::of(m),
            is_file: m.is_file(),
            is_dir: m.is_dir(),
        }
    }
}

/// Directories opened so far, by their path (raw bytes); `None`: it could not be opened.
#[derive(Default)]
pub struct StatByDir {
    dirs: HashMap<Vec<u8>, Option<OwnedFd>>,
    /// Directories one file was asked of so far (by path), not opened.
    by_path: HashMap<Vec<u8>, u8>,
}

impl StatByDir {
    /// An empty set of open directories.
    pub fn new() -> StatByDir {
        StatByDir::default()
    }

    /// The [`Stat`] of `path` (symbolic links followed), `None` when it does not exist or
    /// cannot be reached. A relative `path` is taken from the working directory; a path without
    /// a name to split off (`/`, `..`, ending in `/`) is stat'ed whole.
    pub fn stat(&mut self, path: &Path) -> Option<Stat> {
        let st = self.stat_unrecorded(path);
        crate::file_observe::note_stat(
            path,
            st.map(|s| {
                (
                    s.fields,
                    crate::file_observe::type_code(s.is_file, s.is_dir),
                )
            }),
        );
        st
    }

    fn stat_unrecorded(&mut self, path: &Path) -> Option<Stat> {
        let bytes = path.as_os_str().as_bytes();
        let split = bytes.iter().rposition(|&b| b == b'/');
        let (dir, name): (&[u8], &[u8]) = match split {
            Some(0) => (b"/", &bytes[1..]),
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (b".", bytes),
        };
        if name.is_empty() || name == b"." || name == b".." || name.contains(&0) {
            return std::fs::metadata(path).ok().map(|m| Stat::of_metadata(&m));
        }
        // A directory is opened at its fourth file: a `stat` by path is one system call, and
        // opening the directory adds two (`openat`, `close`) to the `fstatat`s, which shorter
        // lookups repay only over many files.
        let few_in_dir = !self.dirs.contains_key(dir) && {
            let n = self.by_path.entry(dir.to_vec()).or_insert(0);
            *n += 1;
            *n <= BY_PATH
        };
        if few_in_dir || (self.dirs.len() >= MAX_OPEN && !self.dirs.contains_key(dir)) {
            return std::fs::metadata(path).ok().map(|m| Stat::of_metadata(&m));
        }
        match self.dir_fd(dir) {
            Ok(fd) => fstatat(fd, &CString::new(name).ok()?),
            Err(Unopened::Missing) => None,
            // Out of descriptors, or anything else but absence: the path as a whole.
            Err(Unopened::Other) => std::fs::metadata(path).ok().map(|m| Stat::of_metadata(&m)),
        }
    }

    /// The descriptor of directory `dir` (raw path bytes), opened now unless it was before:
    /// relative to the nearest directory above it that is open (one lookup per component
    /// below it), else by its whole path. `Err` when it cannot be opened.
    fn dir_fd(&mut self, dir: &[u8]) -> Result<i32, Unopened> {
        if let Some(fd) = self.dirs.get(dir) {
            return fd.as_ref().map(AsRawFd::as_raw_fd).ok_or(Unopened::Missing);
        }
        self.forget_all_but_ancestors_of(dir);
        // The nearest open ancestor: `dir[..cut]`, the rest below it `dir[cut + 1..]`.
        let mut base = None;
        let mut end = dir.len();
        while let Some(cut) = dir[..end].iter().rposition(|&b| b == b'/') {
            let ancestor: &[u8] = if cut == 0 { b"/" } else { &dir[..cut] };
            if let Some(fd) = self.dirs.get(ancestor) {
                base = Some((fd.as_ref().map(AsRawFd::as_raw_fd), cut));
                break;
            }
            end = cut;
            if cut == 0 {
                break;
            }
        }
        let opened = match base {
            // An ancestor that does not exist: nothing below it does.
            Some((None, _)) => Err(Unopened::Missing),
            Some((Some(fd), cut)) if cut + 1 < dir.len() => open_at(fd, &dir[cut + 1..]),
            _ => open_at(libc::AT_FDCWD, dir),
        };
        match opened {
            Ok(fd) => {
                let raw = fd.as_raw_fd();
                self.dirs.insert(dir.to_vec(), Some(fd));
                Ok(raw)
            }
            Err(Unopened::Missing) => {
                self.dirs.insert(dir.to_vec(), None);
                Err(Unopened::Missing)
            }
            Err(Unopened::Other) => Err(Unopened::Other),
        }
    }
}

impl StatByDir {
    /// Closes (and forgets) every directory that is not above `dir`, once half of
    /// [`MAX_OPEN`] are kept: the files asked for come a directory at a time (manifests and
    /// memos are in path order), so what stays open is the chain of directories down to the
    /// current one.
    ///
    /// Kept short on purpose: a process that has more than 64 descriptors open for the first
    /// time makes the kernel grow its descriptor table, which in a process with threads (the
    /// CUDA driver starts several) waits for an RCU grace period: 5 to 8 ms measured on the
    /// H200, more than the whole hit. Holding every directory of a toolkit's include tree
    /// open crossed that line.
    fn forget_all_but_ancestors_of(&mut self, dir: &[u8]) {
        if self.dirs.len() < MAX_OPEN / 2 {
            return;
        }
        self.dirs.retain(|d, _| {
            dir.starts_with(d) && (d.as_slice() == b"/" || dir.get(d.len()) == Some(&b'/'))
        });
    }

    /// How many directories are open now.
    #[cfg(test)]
    fn open_directories(&self) -> usize {
        self.dirs.values().filter(|fd| fd.is_some()).count()
    }
}

/// The most directories kept open by one [`StatByDir`]; past it, files are stat'ed by path.
/// With the process's own descriptors (the CUDA driver holds about 30) it stays under the 64
/// of a descriptor table that has never grown: [`StatByDir::close_all_but_ancestors_of`].
const MAX_OPEN: usize = 16;

/// How many files of a directory are stat'd by path before it is opened.
const BY_PATH: u8 = 3;

/// Why a directory has no descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unopened {
    /// It does not exist, or is no directory (or a directory above it): nothing in it exists.
    Missing,
    /// Something else (no descriptor left, no permission to search): stat by path instead.
    Other,
}

/// `openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC)`: symbolic links followed.
fn open_at(dir: i32, name: &[u8]) -> Result<OwnedFd, Unopened> {
    let c = CString::new(name).map_err(|_| Unopened::Other)?;
    // SAFETY: a live directory descriptor (or AT_FDCWD) and a NUL-terminated name; the flags
    // open nothing for reading or writing.
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error();
        return Err(match errno {
            Some(libc::ENOENT | libc::ENOTDIR) => Unopened::Missing,
            _ => Unopened::Other,
        });
    }
    // SAFETY: a descriptor just returned by openat and owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(dir, name, 0)`: symbolic links followed, as `stat(2)`.
fn fstatat(dir: i32, name: &CStr) -> Option<Stat> {
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live directory descriptor, a NUL-terminated name, a valid out pointer.
    let rc = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, 0) };
    let kind = st.st_mode & libc::S_IFMT;
    (rc == 0).then_some(Stat {
        fields: FileStat {
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            ino: st.st_ino,
            dev: st.st_dev,
        },
        is_file: kind == libc::S_IFREG,
        is_dir: kind == libc::S_IFDIR,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_same_fields_as_a_stat_by_path() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("a.h"), b"int a;").unwrap();
        std::fs::write(d.path().join("b.h"), b"int bb;").unwrap();
        std::os::unix::fs::symlink(sub.join("a.h"), d.path().join("link.h")).unwrap();
        std::os::unix::fs::symlink(&sub, d.path().join("linkdir")).unwrap();
        let mut s = StatByDir::new();
        for p in [
            sub.join("a.h"),
            d.path().join("b.h"),
            d.path().join("link.h"),
            d.path().join("linkdir/a.h"),
            sub.clone(),
            d.path().to_path_buf(),
            PathBuf::from("/"),
            PathBuf::from("/etc/passwd"),
        ] {
            let m = std::fs::metadata(&p).unwrap();
            let st = s.stat(&p).unwrap();
            assert_eq!(st.fields, FileStat::of(&m), "{}", p.display());
            assert_eq!((st.is_file, st.is_dir), (m.is_file(), m.is_dir()));
        }
    }

    #[test]
    fn directories_are_closed_as_the_walk_moves_on() {
        let d = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..100 {
            let sub = d.path().join(format!("a{i:03}/b"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("x.h"), b"").unwrap();
            std::fs::write(d.path().join(format!("a{i:03}/y.h")), b"").unwrap();
            files.push(sub.join("x.h"));
            files.push(d.path().join(format!("a{i:03}/y.h")));
        }
        files.sort();
        let mut s = StatByDir::new();
        let mut most = 0;
        for f in &files {
            let st = s.stat(f).unwrap();
            assert_eq!(st.fields, FileStat::read(f).unwrap(), "{}", f.display());
            most = most.max(s.open_directories());
        }
        // 200 files in 200 directories, never more than 16 directories open at once (with the
        // CUDA driver's 30 descriptors, under the 64 that make the kernel grow the table).
        assert!(most <= 16, "{most} directories open at once");
        // And out of order, still right.
        for f in files.iter().rev().step_by(7) {
            assert_eq!(s.stat(f).unwrap().fields, FileStat::read(f).unwrap());
        }
        assert!(s.open_directories() <= 16);
    }

    #[test]
    fn a_directory_is_opened_at_its_fourth_file_only() {
        let d = tempfile::tempdir().unwrap();
        for n in ["a.h", "b.h", "c.h", "d.h", "e.h"] {
            std::fs::write(d.path().join(n), n).unwrap();
        }
        let mut s = StatByDir::new();
        for n in ["a.h", "b.h", "c.h"] {
            let p = d.path().join(n);
            assert_eq!(s.stat(&p).unwrap().fields, FileStat::read(&p).unwrap());
            assert_eq!(s.open_directories(), 0, "up to three files: stat'd by path");
        }
        for n in ["d.h", "e.h", "a.h"] {
            let p = d.path().join(n);
            assert_eq!(s.stat(&p).unwrap().fields, FileStat::read(&p).unwrap());
            assert_eq!(s.open_directories(), 1);
        }
    }

    #[test]
    fn missing_files_and_directories_are_none() {
        let d = tempfile::tempdir().unwrap();
        let mut s = StatByDir::new();
        assert_eq!(s.stat(&d.path().join("absent.h")), None);
        assert_eq!(s.stat(&d.path().join("absent/x.h")), None);
        // A file as the directory part is no directory.
        std::fs::write(d.path().join("f"), b"").unwrap();
        assert_eq!(s.stat(&d.path().join("f/x.h")), None);
    }

    #[test]
    fn a_file_changed_after_its_directory_was_opened_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.h");
        std::fs::write(&f, b"1").unwrap();
        let mut s = StatByDir::new();
        let before = s.stat(&f).unwrap().fields;
        std::fs::write(&f, b"22").unwrap();
        let after = s.stat(&f).unwrap().fields;
        assert_ne!(before, after);
        assert_eq!(Some(after), FileStat::read(&f));
    }
}
