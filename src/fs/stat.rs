//! The `stat` of files as hipjit's caches record and check them ([`FileStat`], [`Stat`]), the
//! one rule by which a recorded `stat` stands for a file's content
//! ([`FileStat::proves_same_as`]; the README's "What a hit trusts" says the same), and
//! [`StatByDir`], the `stat` of many files at once as a cache hit checks them.
//!
//! # The stat-trust rule
//! A header manifest (`manifest`), a compiler identity memo
//! ([`crate::compiler::identity`]), a library search memo
//! ([`crate::compiler::library_search`]) and a hit memo ([`crate::jit::hit_memo`]) each record
//! the `stat` of files whose content was hashed (or whose absence, listing or resolution was
//! seen), and later take an unchanged `stat` for unchanged content instead of reading the file
//! again. Size, modification and change times, inode and device do not prove that alone: two
//! filesystem images built reproducibly (fixed times, UUID, hash seed) and mounted in turn at
//! one path give a file the very same fields, whatever its bytes. So each record also holds
//! the identity of the mount the `stat` was taken on ([`FileStat::mount`]): the mount's unique
//! ID (`statx` with `STATX_MNT_ID_UNIQUE`, Linux 6.8 and later: a 64-bit number the kernel
//! never gives to another mount before it reboots; the older mount ID is given again, a tmpfs
//! mounted three times at one path had the same each time), mixed with this boot's ID
//! (`/proc/sys/kernel/random/boot_id`), since the unique IDs start again at every boot and run
//! alike on machines booted alike (a record on shared storage, in a bundle or on the remote
//! tier may come from another machine or an earlier boot). A record proves sameness only when
//! it has such an identity and every field, the identity included, equals the `stat` now.
//! Where the kernel gives no unique mount ID (before 6.8, `statx` missing or refused), or the
//! boot's ID cannot be read, or the filesystem's `stat` fields are made up by a user-space
//! program (FUSE: sshfs reports the modification time as the change time, so a file replaced
//! with one of the same size and modification time keeps its whole `stat`), a record has
//! none ([`NO_MOUNT_IDENTITY`]): it never proves
//! sameness, and the content is hashed (a header), or the work is done again (a compiler's
//! identity, a hit the long way). Records another machine wrote are not trusted either way:
//! manifests fetched from the remote tier have their identities removed
//! (`from_another_node`).
//!
//! # Many files at once
//! [`StatByDir`] opens each directory once (`O_PATH`, relative to the nearest directory above
//! it already open) at its fourth file, then `statx(2)`s each name in it, instead of a lookup
//! of every component of every full path (the first three files of a directory are stat'd by
//! path: opening the directory costs two system calls more, its `openat` and `close`, which
//! only many files in it repay where a system call is dear, as on a virtual machine). A header
//! manifest of 300 files in 30 directories of a toolkit 10 levels deep costs 30 opens and 300
//! one-component lookups this way, against 3,000 component lookups by path.
//!
//! The answer is the one `stat(2)` of the full path gives at that moment (symbolic links
//! followed, in the directory part by the open and in the last component by the `statx`), so
//! the caller's comparison with a recorded [`FileStat`] means what it did. A directory that
//! cannot be opened makes every file in it missing, as a `stat` by path would.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, StatxFlags};
use serde::{Deserialize, Serialize};

/// The `stat` fields a cache records of a file and compares later: size, modification and
/// change times (s and ns), inode, device, and the identity of the mount it was taken on.
/// Whether a recorded one stands for the file's content: [`FileStat::proves_same_as`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, s and ns.
    pub mtime: (i64, i64),
    /// Status change time, s and ns.
    pub ctime: (i64, i64),
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
    /// The identity of the mount the `stat` was taken on: its unique ID mixed with this boot's
    /// (see the module documentation), never that of another mount or another boot;
    /// [`NO_MOUNT_IDENTITY`] where there is none (the kernel gave no unique mount ID, or the
    /// record was written before hipjit recorded one: absent from a stored record, it reads
    /// as none).
    #[serde(default)]
    pub mount: u64,
}

/// [`FileStat::mount`] of a record with no mount identity: it never proves sameness.
pub const NO_MOUNT_IDENTITY: u64 = 0;

impl FileStat {
    /// Whether this record, taken earlier, proves that the file is the same (the same bytes,
    /// for a file hashed when it was taken) given `now`, its `stat` now: it has a mount
    /// identity ([`FileStat::mount`]) and all its fields, that identity included, equal
    /// `now`'s. The one rule by which every cache of hipjit trusts a `stat` (see the module
    /// documentation and the README's "What a hit trusts"); where it fails, the file is hashed
    /// (or the work done again).
    pub fn proves_same_as(&self, now: &FileStat) -> bool {
        self.mount != NO_MOUNT_IDENTITY && self == now
    }

    /// [`FileStat::proves_same_as`] of a record that may be absent (`None`: the file did not
    /// exist) against a `stat` now that may be too: both absent holds (absence has no content
    /// to prove), both present holds by the rule.
    pub fn proves_same_as_opt(recorded: Option<&FileStat>, now: Option<&FileStat>) -> bool {
        match (recorded, now) {
            (None, None) => true,
            (Some(r), Some(n)) => r.proves_same_as(n),
            _ => false,
        }
    }

    /// This record without its mount identity: it can no longer prove sameness (a record
    /// another machine wrote).
    pub fn without_mount_identity(self) -> FileStat {
        FileStat {
            mount: NO_MOUNT_IDENTITY,
            ..self
        }
    }

    /// `stat(2)` of `path` (symlinks followed), recorded for the hit memo when a lookup is
    /// being recorded.
    pub fn read(path: &Path) -> Option<FileStat> {
        crate::fs::observe::metadata(path).ok().map(|m| m.fields)
    }
}

/// What a `stat` tells of a file: the fields a cache compares, its mode and owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The fields a cache compares.
    pub fields: FileStat,
    /// `st_mode`: the file type and permission bits.
    pub mode: u32,
    /// `st_uid`.
    pub uid: u32,
}

impl Stat {
    fn kind(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind() == libc::S_IFREG
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind() == libc::S_IFDIR
    }

    /// Whether it is a symbolic link (only from [`lstat`]).
    pub fn is_symlink(&self) -> bool {
        self.kind() == libc::S_IFLNK
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.fields.size
    }

    /// Whether its size is 0.
    pub fn is_empty(&self) -> bool {
        self.fields.size == 0
    }

    /// Its modification time.
    pub fn modified(&self) -> SystemTime {
        let (s, ns) = self.fields.mtime;
        let ns = Duration::from_nanos(ns.clamp(0, 999_999_999) as u64);
        if s >= 0 {
            UNIX_EPOCH + Duration::from_secs(s as u64) + ns
        } else {
            UNIX_EPOCH - Duration::from_secs(s.unsigned_abs()) + ns
        }
    }

    /// Its type, as [`crate::fs::read::kind_name`] names it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind() {
            libc::S_IFREG => "regular file",
            libc::S_IFIFO => "FIFO",
            libc::S_IFSOCK => "socket",
            libc::S_IFCHR => "character device",
            libc::S_IFBLK => "block device",
            libc::S_IFDIR => "directory",
            libc::S_IFLNK => "symbolic link",
            _ => "special file",
        }
    }
}

/// `statx`'s `STATX_MNT_ID_UNIQUE` (Linux 6.8): `stx_mnt_id` is the mount's unique ID.
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;

/// Set once `statx` answered `ENOSYS` (a kernel before 4.11): `stat` is used instead.
static NO_STATX: AtomicBool = AtomicBool::new(false);

/// This boot's part of every mount identity: the first 8 bytes of the sha256 of the boot's ID
/// (`/proc/sys/kernel/random/boot_id`, read once per process); `None` when it cannot be read.
fn boot_key() -> Option<u64> {
    static KEY: OnceLock<Option<u64>> = OnceLock::new();
    *KEY.get_or_init(|| {
        use std::io::Read;
        let mut id = [0u8; 64];
        let n = std::fs::File::open("/proc/sys/kernel/random/boot_id")
            .and_then(|mut f| f.read(&mut id))
            .ok()?;
        let id = id[..n].trim_ascii();
        // A UUID as text: anything else is not a boot's ID.
        if id.len() != 36 {
            return None;
        }
        // ring's SHA-256, as `hash_file`'s (this layer names no other module of hipjit).
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        h.update(b"hipjit mount identity\0");
        h.update(id);
        let d = h.finish();
        let d = d.as_ref();
        Some(u64::from_le_bytes(d[..8].try_into().ok()?))
    })
}

/// The mount identity of a `statx` answer: its unique mount ID mixed with this boot's key
/// ([`boot_key`]), [`NO_MOUNT_IDENTITY`] without either, and for a mount whose `stat` fields
/// prove nothing ([`mount_is_trusted`]). `dirfd`, `name` and `flags` are the `statx` call's,
/// for [`mount_is_trusted`] to look at the filesystem the first time it meets the mount.
fn mount_identity(
    mask: u32,
    mnt_id: u64,
    dirfd: BorrowedFd<'_>,
    name: &CStr,
    flags: AtFlags,
) -> u64 {
    if mask & STATX_MNT_ID_UNIQUE == 0 {
        return NO_MOUNT_IDENTITY;
    }
    let Some(key) = boot_key() else {
        return NO_MOUNT_IDENTITY;
    };
    if !mount_is_trusted(mnt_id, dirfd, name, flags) {
        return NO_MOUNT_IDENTITY;
    }
    mnt_id ^ key
}

/// `statfs`'s `f_type` of FUSE filesystems (`FUSE_SUPER_MAGIC`; sshfs, virtiofs, any
/// filesystem served by a user-space program): the program makes up every `stat` field, the
/// change time included (sshfs reports the modification time as the change time: SFTP has
/// none), so a file replaced with one of the same size and modification time keeps its
/// `stat` whole.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Whether the `stat` fields of files on the mount with unique ID `mnt_id` can stand for
/// their content: not on a filesystem whose fields user space makes up ([`FUSE_SUPER_MAGIC`]).
/// Found once per mount and process, from `fstatfs` of the file `statx` looked at (opened
/// `O_PATH`), kept only when that file's unique mount ID is still `mnt_id` (a path changed
/// in between answers `false`, unkept; not asked again of a descriptor `statx` answered for
/// itself, whose mount cannot change). Anything that cannot be found answers `false`: the
/// content is hashed. The answer kept last is kept by each thread too, and given without
/// the lock: the files of one lookup lie mostly on one mount.
fn mount_is_trusted(mnt_id: u64, dirfd: BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> bool {
    static KNOWN: OnceLock<parking_lot::Mutex<HashMap<u64, bool>>> = OnceLock::new();
    thread_local! {
        static LAST: std::cell::Cell<Option<(u64, bool)>> = const { std::cell::Cell::new(None) };
    }
    if let Some((last, trusted)) = LAST.with(std::cell::Cell::get) {
        if last == mnt_id {
            return trusted;
        }
    }
    let known = KNOWN.get_or_init(Default::default);
    if let Some(&trusted) = known.lock().get(&mnt_id) {
        LAST.with(|l| l.set(Some((mnt_id, trusted))));
        return trusted;
    }
    let opened;
    let itself = name.is_empty() && flags.contains(AtFlags::EMPTY_PATH);
    let fd = if itself {
        dirfd
    } else {
        let mut oflags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        if flags.contains(AtFlags::SYMLINK_NOFOLLOW) {
            oflags |= rustix::fs::OFlags::NOFOLLOW;
        }
        match rustix::fs::openat(dirfd, name, oflags, rustix::fs::Mode::empty()) {
            Ok(fd) => {
                opened = fd;
                opened.as_fd()
            }
            Err(_) => return false,
        }
    };
    let Ok(fs) = rustix::fs::fstatfs(fd) else {
        return false;
    };
    // `statx` answered for the descriptor itself: `mnt_id` is its mount, which an open
    // descriptor keeps.
    let same_mount = itself
        || rustix::fs::statx(
            fd,
            c"",
            AtFlags::EMPTY_PATH,
            StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE),
        )
        .is_ok_and(|x| x.stx_mask & STATX_MNT_ID_UNIQUE != 0 && x.stx_mnt_id == mnt_id);
    if !same_mount {
        return false;
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets and not on others
    let trusted = fs.f_type as i64 != FUSE_SUPER_MAGIC;
    known.lock().insert(mnt_id, trusted);
    LAST.with(|l| l.set(Some((mnt_id, trusted))));
    trusted
}

/// `statx(dirfd, name, flags)` with the fields hipjit records, the mount's unique ID among
/// them; `Ok(None)` when the kernel has no `statx` (or refuses it: `EPERM` from a seccomp
/// filter), for the caller to `stat` instead.
fn statx(dirfd: BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> std::io::Result<Option<Stat>> {
    if NO_STATX.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mask = StatxFlags::TYPE
        | StatxFlags::MODE
        | StatxFlags::UID
        | StatxFlags::INO
        | StatxFlags::SIZE
        | StatxFlags::MTIME
        | StatxFlags::CTIME
        | StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE);
    match rustix::fs::statx(dirfd, name, flags, mask) {
        Ok(x) => Ok(Some(Stat {
            fields: FileStat {
                size: x.stx_size,
                mtime: (x.stx_mtime.tv_sec, i64::from(x.stx_mtime.tv_nsec)),
                ctime: (x.stx_ctime.tv_sec, i64::from(x.stx_ctime.tv_nsec)),
                ino: x.stx_ino,
                dev: libc::makedev(x.stx_dev_major, x.stx_dev_minor),
                mount: mount_identity(x.stx_mask, x.stx_mnt_id, dirfd, name, flags),
            },
            mode: u32::from(x.stx_mode),
            uid: x.stx_uid,
        })),
        Err(rustix::io::Errno::NOSYS) => {
            NO_STATX.store(true, Ordering::Relaxed);
            Ok(None)
        }
        Err(rustix::io::Errno::PERM) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A [`Stat`] from `std`'s metadata: no mount identity.
pub(crate) fn of_metadata(m: &std::fs::Metadata) -> Stat {
    use std::os::unix::fs::MetadataExt;
    Stat {
        fields: FileStat {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
            mount: NO_MOUNT_IDENTITY,
        },
        mode: m.mode(),
        uid: m.uid(),
    }
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in a path"))
}

/// `stat(2)` of `path`, symbolic links followed, with its mount identity (one `statx`).
///
/// Errors: the system call's.
pub fn stat(path: &Path) -> std::io::Result<Stat> {
    match statx(rustix::fs::CWD, &c_path(path)?, AtFlags::empty())? {
        Some(s) => Ok(s),
        None => std::fs::metadata(path).map(|m| of_metadata(&m)),
    }
}

/// `lstat(2)` of `path` (a symbolic link at its end not followed), with its mount identity.
///
/// Errors: the system call's.
pub fn lstat(path: &Path) -> std::io::Result<Stat> {
    match statx(rustix::fs::CWD, &c_path(path)?, AtFlags::SYMLINK_NOFOLLOW)? {
        Some(s) => Ok(s),
        None => std::fs::symlink_metadata(path).map(|m| of_metadata(&m)),
    }
}

/// `stat(2)` (`follow`) or `lstat(2)` of the NUL-terminated `path`, with its mount identity
/// (one `statx`, no allocation): [`stat`] and [`lstat`] for a path held as bytes.
///
/// Errors: the system call's.
pub(crate) fn stat_c(path: &CStr, follow: bool) -> std::io::Result<Stat> {
    let flags = match follow {
        true => AtFlags::empty(),
        false => AtFlags::SYMLINK_NOFOLLOW,
    };
    match statx(rustix::fs::CWD, path, flags)? {
        Some(s) => Ok(s),
        None => {
            let path = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
            match follow {
                true => std::fs::metadata(path),
                false => std::fs::symlink_metadata(path),
            }
            .map(|m| of_metadata(&m))
        }
    }
}

/// `fstat(2)` of the open `file`, with its mount identity: the mount of the file open, which
/// the descriptor holds.
///
/// Errors: the system call's.
pub fn fstat(file: &std::fs::File) -> std::io::Result<Stat> {
    match statx(file.as_fd(), c"", AtFlags::EMPTY_PATH)? {
        Some(s) => Ok(s),
        None => file.metadata().map(|m| of_metadata(&m)),
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
        crate::fs::observe::note_stat(
            path,
            st.map(|s| (s.fields, crate::fs::observe::type_code(s))),
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
            return stat(path).ok();
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
            return stat(path).ok();
        }
        match self.dir_fd(dir) {
            Ok(fd) => fstatat(fd, &CString::new(name).ok()?),
            Err(Unopened::Missing) => None,
            // Out of descriptors, or anything else but absence: the path as a whole.
            Err(Unopened::Other) => stat(path).ok(),
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

/// `statx(dir, name)`: symbolic links followed, as `stat(2)`.
fn fstatat(dir: i32, name: &CStr) -> Option<Stat> {
    // SAFETY: `dir` is a descriptor of [`StatByDir::dirs`], open for as long as this call.
    let fd = unsafe { BorrowedFd::borrow_raw(dir) };
    match statx(fd, name, AtFlags::empty()) {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            let st = rustix::fs::statat(fd, name, AtFlags::empty()).ok()?;
            Some(Stat {
                fields: FileStat {
                    size: st.st_size as u64,
                    mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
                    ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
                    ino: st.st_ino as u64,
                    dev: st.st_dev as u64,
                    mount: NO_MOUNT_IDENTITY,
                },
                mode: st.st_mode as u32,
                uid: st.st_uid as u32,
            })
        }
        Err(_) => None,
    }
}

/// sha256 of a file's contents, read in 1 MiB pieces.
///
/// Hashed by `ring`, whose SHA-256 is assembly (with the x86-64 SHA extensions where the CPU
/// has them): as fast in a crate's unoptimised debug build as in a release one. sha2 built
/// without optimisation, as a dependent's debug build builds it, takes about 30 times longer,
/// and a compiler's fingerprint reads hundreds of MB ([`crate::compiler::identity`]). The
/// digest is the same sha256 either way.
pub fn hash_file(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut f = std::fs::File::open(path)?;
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(h.finish().as_ref());
    Ok(digest)
}

/// The filesystem's clock now: the modification time of a file written in `dir` (and removed),
/// or the wall clock when that fails. Linux stamps files from a clock that advances once per
/// scheduler tick and lags the wall clock by up to one tick; a stamp read this way compares
/// with other files' stamps without that lag.
pub fn filesystem_now(dir: &Path) -> SystemTime {
    let stamp = dir.join(".hipjit-start");
    let read = std::fs::write(&stamp, b"")
        .and_then(|()| crate::fs::observe::metadata(&stamp).map(|m| m.modified()));
    let _ = std::fs::remove_file(&stamp);
    read.unwrap_or_else(|_| SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hash_file` (ring) gives sha2's sha256 at every length around the 64-byte block and
    /// its 1 MiB read pieces, and another digest for one byte changed: the keys and
    /// fingerprints it feeds stay sha256, and a changed file is another digest.
    #[test]
    fn hash_file_is_the_sha256_of_the_content_at_block_and_piece_boundaries() {
        use sha2::Digest;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        let mut data: Vec<u8> = (0..(1u32 << 20) + 130)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for len in [
            0usize,
            1,
            55,
            56,
            63,
            64,
            65,
            119,
            128,
            (1 << 20) - 1,
            1 << 20,
            (1 << 20) + 129,
        ] {
            std::fs::write(&f, &data[..len]).unwrap();
            let want: [u8; 32] = sha2::Sha256::digest(&data[..len]).into();
            assert_eq!(hash_file(&f).unwrap(), want, "{len} bytes");
        }
        let before = hash_file(&f).unwrap();
        data[1 << 19] ^= 1;
        std::fs::write(&f, &data[..(1 << 20) + 129]).unwrap();
        assert_ne!(hash_file(&f).unwrap(), before);
    }

    #[test]
    fn a_stat_proves_sameness_only_with_a_mount_identity_and_every_field_equal() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.h");
        std::fs::write(&f, b"#define VALUE 111\n").unwrap();
        let now = stat(&f).unwrap().fields;
        assert_ne!(
            now.mount, NO_MOUNT_IDENTITY,
            "this kernel ({}) gives no unique mount ID: statx's STATX_MNT_ID_UNIQUE needs Linux 6.8",
            std::fs::read_to_string("/proc/sys/kernel/random/osrelease").unwrap_or_default()
        );
        assert!(now.proves_same_as(&now));
        // The same fields without a mount identity (an older kernel, a record written before
        // hipjit kept one, another node's record): proves nothing, not even against itself.
        let bare = now.without_mount_identity();
        assert!(!bare.proves_same_as(&bare));
        assert!(!bare.proves_same_as(&now));
        // The same fields on another mount.
        let elsewhere = FileStat {
            mount: now.mount ^ 1,
            ..now
        };
        assert!(!elsewhere.proves_same_as(&now));
        assert!(!now.proves_same_as(&elsewhere));
        // Absence proves absence; presence needs the rule.
        assert!(FileStat::proves_same_as_opt(None, None));
        assert!(!FileStat::proves_same_as_opt(Some(&bare), Some(&bare)));
        assert!(!FileStat::proves_same_as_opt(None, Some(&now)));
        // Each way of taking a stat gives the same identity.
        let file = std::fs::File::open(&f).unwrap();
        assert_eq!(fstat(&file).unwrap().fields, now);
        assert_eq!(lstat(&f).unwrap().fields, now);
        assert_eq!(StatByDir::new().stat(&f).unwrap().fields, now);
        // Two mounts: another identity (the root and /proc are two on any Linux).
        assert_ne!(
            stat(Path::new("/")).unwrap().fields.mount,
            stat(Path::new("/proc")).unwrap().fields.mount
        );
    }

    #[test]
    fn a_record_without_a_mount_identity_reads_from_one_written_before_it() {
        // A stat record as hipjit wrote it before the mount identity: five fields.
        #[derive(Serialize)]
        struct Old {
            size: u64,
            mtime: (i64, i64),
            ctime: (i64, i64),
            ino: u64,
            dev: u64,
        }
        let bytes = rmp_serde::to_vec(&Old {
            size: 1,
            mtime: (2, 3),
            ctime: (4, 5),
            ino: 6,
            dev: 7,
        })
        .unwrap();
        let read: FileStat = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(read.mount, NO_MOUNT_IDENTITY);
        assert_eq!((read.size, read.ino, read.dev), (1, 6, 7));
        assert!(!read.proves_same_as(&read));
    }
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
            assert_eq!(st, stat(&p).unwrap(), "{}", p.display());
            // `std`'s fields, and a mount identity besides.
            assert_eq!(
                st.fields.without_mount_identity(),
                of_metadata(&m).fields,
                "{}",
                p.display()
            );
            assert_eq!((st.is_file(), st.is_dir()), (m.is_file(), m.is_dir()));
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
