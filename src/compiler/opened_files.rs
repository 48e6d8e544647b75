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
//! Cost on a compile's path: walking a tree (PyPI's CUDA 13 `include`: 155 directories, 2,462
//! files, about 10 ms here) is done once per process and tree and remembered with the `stat`
//! of every directory it watched (`Walk`); a later watch of the same tree puts the same
//! watches in place, then checks each directory's `stat` against the remembered one by the
//! stat-trust rule ([`crate::fs::stat::FileStat::proves_same_as`]) and each file link's
//! target resolved again (a link out of the watched directories may have been retargeted),
//! and walks again on any difference (a directory's modification time changes with every name added, removed or
//! renamed in it; a walk with a directory modified within a second of it is not remembered).
//! Closing an inotify instance waits for the kernel to retire its watches (an RCU grace period:
//! about 20 ms for 155 watches, measured), so an instance is closed on a thread of its own
//! after the events were read (`close_later`).
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::fs::stat::FileStat;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// The most directories one watch covers (PyPI's CUDA 13 `include` has 155).
pub const MAX_WATCHED_DIRS: usize = 4096;

/// The most paths the walk reaches directories by, counting each directory once per path: a
/// directory reached through symbolic links (`include/b1 -> mytk`) counts once per path.
pub const MAX_WALKED_PATHS: usize = 4 * MAX_WATCHED_DIRS;

/// The walk of one tree as [`OpenedFiles::watch`] made it, remembered per process to be
/// replayed ([`OpenedFiles::watch`]): every `inotify_add_watch` in order, with the `stat` each
/// directory had before it was read, and what the walk found.
#[derive(Debug)]
struct Walk {
    /// Each directory watched, in order: its path, whether the walk went through it (else the
    /// directory of a file link's target, watched only), and its `stat` before it was read.
    steps: Vec<(PathBuf, bool, FileStat)>,
    links: HashMap<PathBuf, Vec<PathBuf>>,
    special: Option<(PathBuf, &'static str)>,
}

/// The remembered walks, by tree root.
static WALKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Walk>>>> = OnceLock::new();

/// How long before a walk a directory must have been modified (its modification and change
/// times) for the walk to be remembered: a change within the timestamps' granularity of the
/// `stat` would not change them.
const SETTLED: Duration = Duration::from_secs(1);

/// The inotify instances handed to [`close_later`] and not closed yet.
static CLOSING: AtomicUsize = AtomicUsize::new(0);

/// At most this many instances wait to be closed; past it, one is closed at once (each holds
/// one of the user's `fs.inotify.max_user_instances`, 128 by default).
const MAX_CLOSING: usize = 16;

/// Closes an inotify instance on a thread of its own (see the module documentation), or now
/// when that thread cannot be started or [`MAX_CLOSING`] already wait.
fn close_later(fd: OwnedFd) {
    static CLOSER: OnceLock<Option<std::sync::mpsc::Sender<OwnedFd>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
        std::thread::Builder::new()
            .name("hipjit-inotify-close".into())
            .spawn(move || {
                for fd in rx {
                    drop(fd);
                    CLOSING.fetch_sub(1, Ordering::Relaxed);
                }
            })
            .ok()
            .map(|_| tx)
    });
    match closer {
        Some(tx) if CLOSING.fetch_add(1, Ordering::Relaxed) < MAX_CLOSING => {
            if let Err(e) = tx.send(fd) {
                CLOSING.fetch_sub(1, Ordering::Relaxed);
                drop(e.0);
            }
        }
        Some(_) => {
            CLOSING.fetch_sub(1, Ordering::Relaxed);
            drop(fd);
        }
        None => drop(fd),
    }
}

/// A watch on a directory tree, between the start and the end of a compile.
#[derive(Debug)]
pub struct OpenedFiles {
    /// The inotify instance; `None` once handed to [`close_later`].
    fd: Option<OwnedFd>,
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
        let init = || {
            inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
                .map_err(|e| format!("inotify_init1: {e}"))
        };
        let remembered = WALKS
            .get_or_init(Default::default)
            .lock()
            .get(root)
            .cloned();
        if let Some(walk) = remembered {
            let fd = init()?;
            match Self::replay(fd, root, &walk)? {
                Ok(watch) => return Ok(watch),
                Err(fd) => close_later(fd),
            }
        }
        let fd = init()?;
        let started = SystemTime::now();
        let mut steps: Option<Vec<(PathBuf, bool, FileStat)>> = Some(Vec::new());
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
            // Taken before the directory is read: a change after it changes its times.
            let stat = FileStat::read(&dir).filter(|s| settled(s, started));
            match (&mut steps, stat) {
                (Some(steps), Some(stat)) => steps.push((dir.clone(), way.is_some(), stat)),
                _ => steps = None,
            }
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
                            steps = None;
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
                    Ok(_) => {}
                    // A dangling link (or an entry gone meanwhile): what its target becomes
                    // later is in no directory the walk took the `stat` of, so this walk is
                    // not remembered.
                    Err(_) => steps = None,
                }
            }
        }
        if let Some(steps) = steps {
            WALKS.get_or_init(Default::default).lock().insert(
                root.to_path_buf(),
                Arc::new(Walk {
                    steps,
                    links: links.clone(),
                    special: special.clone(),
                }),
            );
        }
        let watch = OpenedFiles {
            fd: Some(fd),
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

    /// The watches of a remembered `walk` of `root` put in place again on `fd`, in the same
    /// order; then each directory's `stat` is checked against the one the walk took (after the
    /// watches are in place: a change from then on is either seen by the check or made while
    /// watched, as after a walk). `Ok(Err(fd))` when one differs or cannot be read: walk again.
    ///
    /// Errors: a text naming the directory whose `inotify_add_watch` failed.
    fn replay(
        fd: OwnedFd,
        root: &Path,
        walk: &Walk,
    ) -> Result<Result<OpenedFiles, OwnedFd>, String> {
        let mut dirs: HashMap<i32, Vec<PathBuf>> = HashMap::new();
        let mut targets: HashMap<i32, PathBuf> = HashMap::new();
        let mut root_wd = None;
        for (dir, walked, _) in &walk.steps {
            let wd = match inotify::add_watch(
                &fd,
                dir,
                WatchFlags::OPEN | WatchFlags::ONLYDIR | WatchFlags::EXCL_UNLINK,
            ) {
                Ok(wd) => wd,
                // Gone or changed: the walk says why, or succeeds.
                Err(_) => return Ok(Err(fd)),
            };
            root_wd.get_or_insert(wd);
            if *walked {
                targets.remove(&wd);
                let known = dirs.entry(wd).or_default();
                if !known.contains(dir) {
                    known.push(dir.clone());
                }
            } else if !dirs.contains_key(&wd) {
                targets.entry(wd).or_insert_with(|| dir.clone());
            }
        }
        // Each file link still resolves to its remembered target: a link on the way to it out
        // of every directory watched (`ext/cur -> v1` retargeted) changes none of their `stat`s.
        let unchanged =
            walk.steps.iter().all(|(dir, _, stat)| {
                FileStat::read(dir).is_some_and(|now| stat.proves_same_as(&now))
            }) && walk.links.iter().all(|(target, paths)| {
                paths
                    .iter()
                    .all(|p| std::fs::canonicalize(p).is_ok_and(|now| now == *target))
            });
        let Some(root_wd) = root_wd.filter(|_| unchanged) else {
            return Ok(Err(fd));
        };
        let watch = OpenedFiles {
            fd: Some(fd),
            root: root.to_path_buf(),
            root_wd,
            dirs,
            targets,
            links: walk.links.clone(),
            special: walk.special.clone(),
        };
        std::fs::File::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(Ok(watch))
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
    pub fn finish(mut self) -> Result<Vec<PathBuf>, String> {
        let fd = self.fd.take().expect("an instance until finished");
        let out = self.events(&fd);
        close_later(fd);
        out
    }

    /// The files opened, as [`OpenedFiles::finish`] says, from the events on `fd`.
    fn events(&self, fd: &OwnedFd) -> Result<Vec<PathBuf>, String> {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 << 10];
        let mut reader = inotify::Reader::new(fd, &mut buf);
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

impl Drop for OpenedFiles {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            close_later(fd);
        }
    }
}

/// Whether `stat`'s modification and change times are at least [`SETTLED`] before `walk`,
/// and it has a mount identity (else it could never prove a directory unchanged).
fn settled(stat: &FileStat, walk: SystemTime) -> bool {
    let Some(limit) = walk
        .checked_sub(SETTLED)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
    else {
        return false;
    };
    let before = |(s, ns): (i64, i64)| {
        s >= 0 && Duration::new(s as u64, ns.clamp(0, 999_999_999) as u32) < limit
    };
    stat.mount != crate::fs::stat::NO_MOUNT_IDENTITY && before(stat.mtime) && before(stat.ctime)
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
    fn a_remembered_walk_is_replayed_until_a_directory_of_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.h"), "a").unwrap();
        std::fs::write(root.join("sub/b.h"), "b").unwrap();
        // Settled: the directories' times a second and more before the walk.
        std::thread::sleep(SETTLED + Duration::from_millis(100));
        let remembered = || {
            WALKS
                .get_or_init(Default::default)
                .lock()
                .get(&root)
                .cloned()
        };
        let watch = OpenedFiles::watch(&root).unwrap();
        if FileStat::read(&root).is_none_or(|s| s.mount == crate::fs::stat::NO_MOUNT_IDENTITY) {
            // A kernel without unique mount IDs: no `stat` proves a directory unchanged.
            assert!(remembered().is_none());
            return;
        }
        let walk = remembered().expect("the walk is remembered");
        assert_eq!(walk.steps.len(), 2);
        std::fs::read(root.join("sub/b.h")).unwrap();
        assert_eq!(watch.finish().unwrap(), [root.join("sub/b.h")]);
        // Replayed: the same walk, and the opens seen.
        let watch = OpenedFiles::watch(&root).unwrap();
        assert!(Arc::ptr_eq(&walk, &remembered().unwrap()));
        assert_eq!(watch.directories().count(), 2);
        std::fs::read(root.join("a.h")).unwrap();
        std::fs::read(root.join("sub/b.h")).unwrap();
        assert_eq!(
            watch.finish().unwrap(),
            [root.join("a.h"), root.join("sub/b.h")]
        );
        // A directory added below: `sub`'s times change, so the tree is walked again and the
        // new directory watched (and this walk, too recent, is not remembered).
        std::fs::create_dir(root.join("sub/new")).unwrap();
        std::fs::write(root.join("sub/new/c.h"), "c").unwrap();
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 3);
        assert!(remembered().is_some_and(|w| Arc::ptr_eq(&w, &walk)));
        std::fs::read(root.join("sub/new/c.h")).unwrap();
        assert_eq!(watch.finish().unwrap(), [root.join("sub/new/c.h")]);
        // Still not replayed: the remembered walk keeps failing its check.
        let watch = OpenedFiles::watch(&root).unwrap();
        assert_eq!(watch.directories().count(), 3);
        drop(watch);
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

    #[test]
    fn a_remembered_walk_is_not_replayed_once_a_header_links_target_resolves_elsewhere() {
        // `include/a.h -> ext/cur/a.h`, `ext/cur -> v1`: the walk watches `ext/v1`. `cur`
        // retargeted to `v2` (as a toolkit's versioned directories are switched) changes no
        // directory the walk watched, but `a.h` is now `ext/v2/a.h`, and a read of it must be
        // listed (its header keyed) as a fresh walk lists it.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("include");
        let ext = dir.path().join("ext");
        std::fs::create_dir_all(&root).unwrap();
        for v in ["v1", "v2"] {
            std::fs::create_dir_all(ext.join(v)).unwrap();
            std::fs::write(ext.join(v).join("a.h"), v).unwrap();
        }
        std::os::unix::fs::symlink("v1", ext.join("cur")).unwrap();
        std::os::unix::fs::symlink(ext.join("cur/a.h"), root.join("a.h")).unwrap();
        // Every directory settled, so that the walk is remembered.
        std::thread::sleep(Duration::from_millis(1100));
        let first = OpenedFiles::watch(&root).unwrap();
        assert_eq!(std::fs::read(root.join("a.h")).unwrap(), b"v1");
        assert!(first.finish().unwrap().contains(&root.join("a.h")));
        std::os::unix::fs::symlink("v2", ext.join("cur.new")).unwrap();
        std::fs::rename(ext.join("cur.new"), ext.join("cur")).unwrap();
        let second = OpenedFiles::watch(&root).unwrap();
        assert_eq!(std::fs::read(root.join("a.h")).unwrap(), b"v2");
        let opened = second.finish().unwrap();
        assert!(opened.contains(&root.join("a.h")), "{opened:?}");
    }
}
