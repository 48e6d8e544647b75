//! Which files a compile in this process opened below a directory tree, observed with inotify
//! (`inotify(7)`): for an in-process compiler that reports no dependency list (NVRTC), so that
//! the header manifest of its result lists the headers it read and no others.
//!
//! [`OpenedFiles::watch`] puts an `IN_OPEN` watch on every directory of the tree, then opens
//! the tree's root directory itself as a canary; [`OpenedFiles::finish`] reads the events and
//! returns every regular file opened meanwhile, by any process (another process's reads only
//! add files, which costs a `stat` per hit and never serves stale code). The answer is refused,
//! so that the caller falls back to a slower but complete list, when the canary's event did not
//! come (a filesystem or sandbox whose opens inotify does not see), when the queue overflowed
//! (`IN_Q_OVERFLOW`), or when a watched directory went away (`IN_IGNORED`, `IN_UNMOUNT`).
//!
//! A header that is a symbolic link is opened through its target, and inotify reports the open
//! on the target's directory: each file link met in the walk has its target's directory
//! watched too (outside the tree as well), and an open of a target is reported as the target
//! and as every link to it, so that the link (retargeted, or its target edited) is keyed.
//! A directory reached by several paths (`include/b1 -> mytk`) has one watch, whatever the
//! path: the walk goes through each path, and an open there is reported under every path it
//! reached the directory by (`b1/a.h` and `mytk/a.h`), so that either spelling, retargeted or
//! replaced, is keyed. A link back to a directory on its own way is followed once, not walked.
//!
//! Limits: at most [`MAX_WATCHED_DIRS`] directories and [`MAX_WALKED_PATHS`] paths to them;
//! the per-user limits of the kernel
//! (`fs.inotify.max_user_instances`, `max_user_watches`, `max_queued_events`) make
//! [`OpenedFiles::watch`] or [`OpenedFiles::finish`] fail the same way.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The most directories one watch covers (PyPI's CUDA 13 `include` has 155).
pub const MAX_WATCHED_DIRS: usize = 4096;

/// The most paths the walk reaches directories by, counting each directory once per path: a
/// directory reached through symbolic links (`include/b1 -> mytk`) counts once per path.
pub const MAX_WALKED_PATHS: usize = 4 * MAX_WATCHED_DIRS;

/// A watch on a directory tree, between the start and the end of a compile.
#[derive(Debug)]
pub struct OpenedFiles {
    fd: OwnedFd,
    root: PathBuf,
    root_wd: i32,
    /// Each watched directory (inotify gives one watch per directory, whatever its path) by
    /// every path the walk reached it by, in the order met.
    dirs: HashMap<i32, Vec<PathBuf>>,
    /// The directories of file links' targets watched without being reached by the walk (out
    /// of the tree): the target's directory, symlinks resolved.
    targets: HashMap<i32, PathBuf>,
    /// The file links met, by their target (symlinks resolved): the links' paths.
    links: HashMap<PathBuf, Vec<PathBuf>>,
    /// The first FIFO, socket or device met in the walk (through a link too), and what it is.
    special: Option<(PathBuf, &'static str)>,
}

impl OpenedFiles {
    /// Watches every directory under `root` (links followed) for opens, then opens `root` as
    /// the canary. A directory reached by several paths (a link to a directory) is walked
    /// through each, so that an open there is reported under every path a compiler may have
    /// spelled: a path that would enter a directory already on the way to it (a link back to
    /// an ancestor) is kept, but not walked further. A hipjit cache root below `root` is
    /// watched as any other directory: a header NVRTC reads there is listed.
    ///
    /// Errors: a text naming the directory or call that failed (`inotify_init1`,
    /// `inotify_add_watch`, reading a directory), or the tree holding more than
    /// [`MAX_WATCHED_DIRS`] directories or reached by more than [`MAX_WALKED_PATHS`] paths.
    pub fn watch(root: &Path) -> Result<OpenedFiles, String> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(|e| format!("inotify_init1: {e}"))?;
        let mut dirs: HashMap<i32, Vec<PathBuf>> = HashMap::new();
        let mut targets: HashMap<i32, PathBuf> = HashMap::new();
        let mut links: HashMap<PathBuf, Vec<PathBuf>> = HashMap::new();
        // (directory, the watches of the directories on the way to it, or `None` for a link
        // target's directory: watched, not walked).
        let mut stack: Vec<(PathBuf, Option<Vec<i32>>)> = vec![(root.to_path_buf(), Some(vec![]))];
        let mut root_wd = None;
        let mut paths = 0;
        let mut special = None;
        while let Some((dir, way)) = stack.pop() {
            let wd = inotify::add_watch(
                &fd,
                &dir,
                WatchFlags::OPEN | WatchFlags::ONLYDIR | WatchFlags::EXCL_UNLINK,
            )
            .map_err(|e| format!("inotify_add_watch {}: {e}", dir.display()))?;
            root_wd.get_or_insert(wd);
            // The same directory through another path: the kernel returns its watch again.
            if !dirs.contains_key(&wd)
                && !targets.contains_key(&wd)
                && dirs.len() + targets.len() == MAX_WATCHED_DIRS
            {
                return Err(format!(
                    "{} holds more than {MAX_WATCHED_DIRS} directories",
                    root.display()
                ));
            }
            let Some(mut way) = way else {
                if !dirs.contains_key(&wd) {
                    targets.entry(wd).or_insert(dir);
                }
                continue;
            };
            // Reached by the walk: named by the walk's paths from now on.
            targets.remove(&wd);
            paths += 1;
            if paths > MAX_WALKED_PATHS {
                return Err(format!(
                    "{} is reached by more than {MAX_WALKED_PATHS} directory paths (symbolic \
                     links to directories)",
                    root.display()
                ));
            }
            let known = dirs.entry(wd).or_default();
            if !known.contains(&dir) {
                known.push(dir.clone());
            }
            // A link back to a directory on the way: this path is kept, not walked.
            if way.contains(&wd) {
                continue;
            }
            way.push(wd);
            let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
                let path = entry.path();
                let link = entry.file_type().is_ok_and(|t| t.is_symlink());
                match std::fs::metadata(&path) {
                    // Every directory, a hipjit cache root too (one holding `CACHEDIR.TAG`):
                    // only what is opened is listed, and a header read there must be keyed.
                    Ok(m) if m.is_dir() => {
                        stack.push((path, Some(way.clone())));
                    }
                    Ok(m) if m.is_file() && link => {
                        let Ok(target) = std::fs::canonicalize(&path) else {
                            continue;
                        };
                        if let Some(parent) = target.parent() {
                            stack.push((parent.to_path_buf(), None));
                        }
                        links.entry(target).or_default().push(path);
                    }
                    Ok(m) if !m.is_dir() && !m.is_file() => {
                        special.get_or_insert((path, crate::fs::read::kind_name(m.file_type())));
                    }
                    _ => {}
                }
            }
        }
        let watch = OpenedFiles {
            fd,
            root: root.to_path_buf(),
            root_wd: root_wd.expect("the root is watched first"),
            dirs,
            targets,
            links,
            special,
        };
        // The canary: an open of the root this process makes after every watch is in place.
        std::fs::File::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(watch)
    }

    /// The first FIFO, socket or device the walk met below the root (or as a link's target),
    /// with what it is (`FIFO`, `socket`, `character device`, `block device`): a compile that
    /// opened it would block or never finish reading it.
    pub fn special_file(&self) -> Option<(&Path, &'static str)> {
        self.special.as_ref().map(|(p, k)| (p.as_path(), *k))
    }

    /// The directories watched, each by the first path met, in no order.
    pub fn directories(&self) -> impl Iterator<Item = &Path> {
        self.dirs
            .values()
            .filter_map(|paths| paths.first())
            .chain(self.targets.values())
            .map(PathBuf::as_path)
    }

    /// Every regular file opened below the root since [`OpenedFiles::watch`] (each once,
    /// sorted), named by every path of its directory as walked (or, for a link target's
    /// directory out of the tree, its resolved path) and its name there, and by every file
    /// link to it.
    ///
    /// Errors: a text saying why the answer cannot be trusted (no canary event, the event
    /// queue overflowed, a watched directory removed or unmounted, `read` failed).
    pub fn finish(self) -> Result<Vec<PathBuf>, String> {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 << 10];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut canary = false;
        let mut out = Vec::new();
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(format!("reading inotify events: {e}")),
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                return Err("the inotify event queue overflowed".into());
            }
            if flags.intersects(ReadFlags::IGNORED | ReadFlags::UNMOUNT) {
                let dir = (self.dirs.get(&event.wd()).and_then(|p| p.first()))
                    .or_else(|| self.targets.get(&event.wd()))
                    .map_or_else(
                        || "a watched directory".to_owned(),
                        |d| d.display().to_string(),
                    );
                return Err(format!("{dir} was removed or unmounted during the compile"));
            }
            if !flags.contains(ReadFlags::OPEN) {
                continue;
            }
            let name = event.file_name().map(|n| n.to_bytes()).unwrap_or_default();
            if flags.contains(ReadFlags::ISDIR) {
                canary |= event.wd() == self.root_wd && name.is_empty();
                continue;
            }
            let name = OsStr::from_bytes(name);
            match (self.dirs.get(&event.wd()), self.targets.get(&event.wd())) {
                (Some(paths), _) => out.extend(paths.iter().map(|dir| dir.join(name))),
                (None, Some(dir)) => out.push(dir.join(name)),
                (None, None) => {}
            }
        }
        if !canary {
            return Err(format!(
                "inotify reported no event for an open of {} (a filesystem or sandbox whose \
                 opens it does not see)",
                self.root.display()
            ));
        }
        // The links to each file opened (read through them, or through another name).
        if !self.links.is_empty() {
            let linked: Vec<PathBuf> = out
                .iter()
                .filter_map(|p| self.links.get(&std::fs::canonicalize(p).ok()?))
                .flatten()
                .cloned()
                .collect();
            out.extend(linked);
        }
        out.sort();
        out.dedup();
        // A name opened and since replaced by a directory, or removed: not a header read.
        out.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_opened_below_the_tree_are_listed_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        for f in ["a.h", "b.h", "sub/c.h", "sub/deeper/d.h"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::fs::write(dir.path().join("outside.h"), "x").unwrap();
        std::fs::read(root.join("a.h")).unwrap();
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 3);
        for f in ["b.h", "sub/deeper/d.h", "sub/deeper/d.h"] {
            std::fs::read(root.join(f)).unwrap();
        }
        std::fs::read(dir.path().join("outside.h")).unwrap();
        std::fs::read_dir(root.join("sub")).unwrap().for_each(drop);
        assert_eq!(
            watch.finish().unwrap(),
            [root.join("b.h"), root.join("sub/deeper/d.h")]
        );
    }

    #[test]
    fn a_header_that_is_a_link_is_listed_with_its_target_inside_or_outside_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("crt")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(root.join("crt/a.h"), "a").unwrap();
        std::fs::write(dir.path().join("elsewhere/b.h"), "b").unwrap();
        std::os::unix::fs::symlink("crt/a.h", root.join("in.h")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere/b.h"), root.join("out.h")).unwrap();
        let watch = OpenedFiles::watch(&root).unwrap();
        for f in ["in.h", "out.h"] {
            std::fs::read(root.join(f)).unwrap();
        }
        let elsewhere = dir.path().join("elsewhere").canonicalize().unwrap();
        assert_eq!(
            watch.finish().unwrap(),
            [
                elsewhere.join("b.h"),
                root.join("crt/a.h"),
                root.join("in.h"),
                root.join("out.h")
            ]
        );
    }

    #[test]
    fn a_directory_met_first_as_a_links_target_is_still_walked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("crt/deeper")).unwrap();
        std::fs::write(root.join("crt/a.h"), "a").unwrap();
        std::fs::write(root.join("crt/deeper/d.h"), "d").unwrap();
        // Read before `crt` in the walk's order (a stack: the last entry pushed comes first).
        std::os::unix::fs::symlink("crt/a.h", root.join("z_link.h")).unwrap();
        std::os::unix::fs::symlink("crt/a.h", root.join("0_link.h")).unwrap();
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 3);
        std::fs::read(root.join("crt/deeper/d.h")).unwrap();
        assert_eq!(watch.finish().unwrap(), [root.join("crt/deeper/d.h")]);
    }

    #[test]
    fn an_open_in_a_directory_reached_through_links_is_listed_under_every_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("mytk/sub")).unwrap();
        std::fs::write(root.join("mytk/a.h"), "a").unwrap();
        std::fs::write(root.join("mytk/sub/s.h"), "s").unwrap();
        // Names before and after `mytk` in any readdir order, and a link back to the root.
        for alias in ["0_b1", "z_b2"] {
            std::os::unix::fs::symlink("mytk", root.join(alias)).unwrap();
        }
        std::os::unix::fs::symlink(".", root.join("mytk/up")).unwrap();
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 3);
        std::fs::read(root.join("0_b1/a.h")).unwrap();
        std::fs::read(root.join("mytk/sub/s.h")).unwrap();
        let mut expected: Vec<PathBuf> = ["0_b1", "mytk", "z_b2"]
            .iter()
            .flat_map(|d| [root.join(d).join("a.h"), root.join(d).join("sub/s.h")])
            .collect();
        // `up` leads back to `mytk`: kept one level, not walked further.
        for d in ["0_b1", "mytk", "z_b2"] {
            expected.push(root.join(d).join("up/a.h"));
        }
        expected.sort();
        assert_eq!(watch.finish().unwrap(), expected);
    }

    #[test]
    fn a_header_read_in_a_directory_tagged_as_a_hipjit_cache_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("mytk")).unwrap();
        std::fs::write(root.join("mytk/v.h"), "#define VAL 1\n").unwrap();
        crate::fs::cache_root::ensure(&root.join("mytk"));
        assert!(crate::fs::cache_root::is_hipjit_cache(&root.join("mytk")));
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 2);
        std::fs::read(root.join("mytk/v.h")).unwrap();
        assert_eq!(watch.finish().unwrap(), [root.join("mytk/v.h")]);
    }

    #[test]
    fn a_watched_directory_removed_during_the_compile_refuses_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("gone")).unwrap();
        let watch = OpenedFiles::watch(dir.path()).unwrap();
        std::fs::remove_dir(dir.path().join("gone")).unwrap();
        let err = watch.finish().unwrap_err();
        assert!(err.contains("gone") && err.contains("removed"), "{err}");
    }

    #[test]
    fn a_tree_that_is_not_a_directory_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = OpenedFiles::watch(&file).unwrap_err();
        assert!(
            err.contains("inotify_add_watch") && err.contains("file"),
            "{err}"
        );
    }
}
