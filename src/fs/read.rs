//! Reading the files hipjit reads (cache entries, sources, code objects given to `inspect`, the
//! compiler's outputs): never blocking, never unbounded.
//!
//! Every file is opened with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC`, so opening a FIFO with no
//! writer returns at once instead of waiting forever, then checked with `fstat` on the open
//! descriptor (no race with a rename): a regular file is read when its size is within the
//! caller's limit, checked before anything is allocated; anything else (FIFO, socket, device,
//! directory) is refused by name, except an *allowed stream* ([`Streams::Stdin`]: `/dev/stdin`,
//! `/dev/fd/0`, `/proc/self/fd/0` or `-`), which is read blocking up to the limit. The limit
//! is enforced while reading too, so a file that grows after `fstat` cannot exceed it.
//!
//! The limits ([`SOURCE_LIMIT`], [`CODE_OBJECT_LIMIT`], [`TEXT_OUTPUT_LIMIT`]) are far above
//! anything a compiler makes or reads, and far below what would exhaust a machine's memory.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest source file hipjit reads: 64 MiB.
pub const SOURCE_LIMIT: u64 = 64 << 20;
/// The largest code object, offload bundle, uncompressed bundle or cache entry hipjit reads or
/// makes: 512 MiB.
pub const CODE_OBJECT_LIMIT: u64 = 512 << 20;
/// The largest text a compiler writes that hipjit reads (dependency list, assembly dump) and
/// the most of a compiler's standard output or error kept: 16 MiB each.
pub const TEXT_OUTPUT_LIMIT: u64 = 16 << 20;

/// Which non-regular files a read accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streams {
    /// Regular files only.
    None,
    /// Regular files, and standard input named `/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0` or
    /// `-` (read from descriptor 0, whatever it is: pipe, terminal, FIFO, file).
    Stdin,
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileReadError {
    /// Opening, inspecting or reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error (`NotFound` for a missing file).
        source: std::io::Error,
    },
    /// The path names something other than a regular file.
    #[error("{}: not a regular file (a {kind}); hipjit reads only regular files here", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// `FIFO`, `socket`, `character device`, `block device`, `directory`.
        kind: &'static str,
    },
    /// The file is larger than the limit.
    #[error("{}: larger than hipjit's limit of {limit} bytes for {what} ({})", path.display(),
        size.map_or_else(|| "more was still coming".to_owned(), |s| format!("{s} bytes")))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size when known from `fstat` (a stream has none).
        size: Option<u64>,
        /// The limit in bytes.
        limit: u64,
        /// What the file was read as (`a source`, `a code object`...).
        what: &'static str,
    },
}

impl FileReadError {
    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// What was wrong, without the path: the OS error, `not a regular file (a FIFO)`, or the
    /// size and the limit.
    pub fn reason(&self) -> String {
        match self {
            FileReadError::Io { source, .. } => source.to_string(),
            FileReadError::NotRegular { kind, .. } => format!("not a regular file (a {kind})"),
            FileReadError::TooLarge {
                size, limit, what, ..
            } => format!(
                "larger than hipjit's limit of {limit} bytes for {what} ({})",
                size.map_or_else(
                    || "more was still coming".to_owned(),
                    |s| format!("{s} bytes")
                )
            ),
        }
    }

    /// The error as an [`std::io::Error`]: the OS error itself for [`FileReadError::Io`], else
    /// an `InvalidInput` error with the reason (without the path).
    pub fn into_io_error(self) -> std::io::Error {
        match self {
            FileReadError::Io { source, .. } => source,
            FileReadError::NotRegular { kind, .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("not a regular file (a {kind})"),
            ),
            FileReadError::TooLarge { limit, what, .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("larger than hipjit's limit of {limit} bytes for {what}"),
            ),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileReadError::Io { path, .. }
            | FileReadError::NotRegular { path, .. }
            | FileReadError::TooLarge { path, .. } => path,
        }
    }
}

/// Whether `path` names standard input (`-`, `/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`).
pub fn is_stdin(path: &Path) -> bool {
    matches!(
        path.as_os_str().as_bytes(),
        b"-" | b"/dev/stdin" | b"/dev/fd/0" | b"/proc/self/fd/0"
    )
}

/// The kind of a non-regular file, for messages.
pub fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_file() {
        "regular file"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Opens `path` for reading without blocking (see the module documentation) and returns the
/// open regular file with its size.
///
/// Errors: [`FileReadError::Io`], [`FileReadError::NotRegular`], [`FileReadError::TooLarge`]
/// (size above `limit`, checked on the open descriptor).
pub fn open_regular(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<(File, u64), FileReadError> {
    open_checked(path, limit, what, 0).map(|(f, m)| (f, m.len()))
}

/// [`open_regular`] without following a symbolic link at `path` itself (`O_NOFOLLOW`): a link
/// is refused as [`FileReadError::NotRegular`] with kind `symbolic link`.
///
/// Errors: as [`open_regular`].
pub fn open_regular_nofollow(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<(File, u64), FileReadError> {
    open_regular_nofollow_stat(path, limit, what).map(|(f, m)| (f, m.len()))
}

/// [`open_regular_nofollow`] returning the open file's whole `fstat` (owner, mode, times)
/// instead of its size, so that a caller checking those needs no second `fstat`.
///
/// Errors: as [`open_regular`].
pub fn open_regular_nofollow_stat(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<(File, crate::fs::stat::Stat), FileReadError> {
    open_checked(path, limit, what, libc::O_NOFOLLOW).map_err(|e| match e {
        FileReadError::Io { path, source } if source.raw_os_error() == Some(libc::ELOOP) => {
            FileReadError::NotRegular {
                path,
                kind: "symbolic link",
            }
        }
        e => e,
    })
}

/// Reads `size` bytes of `file` (at `path`, for messages) from its current position, in one
/// `read` where the file allows it and with no further `read` to find the end: for a file whose
/// size `fstat` gave and that is never written in place (a cache entry, renamed into place
/// whole), what is read is judged by its own checksums, not by where the file ends. Bytes
/// appended after the `fstat` are not read.
///
/// Errors: [`FileReadError::Io`]: the OS error, memory for `size` bytes that could not be
/// reserved, or `UnexpectedEof` when the file ended before `size` bytes (it shrank).
pub fn read_known_size(file: &File, path: &Path, size: u64) -> Result<Vec<u8>, FileReadError> {
    let io = |source| FileReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut data = Vec::new();
    data.try_reserve_exact(size as usize).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("cannot reserve {size} bytes: {e}"),
        ))
    })?;
    // One `read` asking for all of it (`read_to_end` would ask in growing pieces, then once
    // more for the end).
    data.resize(size as usize, 0);
    let mut f = file;
    f.read_exact(&mut data).map_err(|e| {
        io(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("it ended before the {size} bytes its stat gave: it shrank while read"),
            )
        } else {
            e
        })
    })?;
    Ok(data)
}

fn open_checked(
    path: &Path,
    limit: u64,
    what: &'static str,
    flags: i32,
) -> Result<(File, crate::fs::stat::Stat), FileReadError> {
    let io = |source| FileReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let follow = flags & libc::O_NOFOLLOW == 0;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | flags)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            crate::fs::observe::note_error(path, follow, &e);
            return Err(io(e));
        }
    };
    // One `statx` of the descriptor, its mount identity included (the mount of the file open).
    let meta = crate::fs::stat::fstat(&file);
    // What was read is this descriptor's file: its `fstat` is what the lookup saw.
    crate::fs::observe::note(path, follow, &meta);
    let meta = meta.map_err(io)?;
    if !meta.is_file() {
        return Err(FileReadError::NotRegular {
            path: path.to_path_buf(),
            kind: meta.kind_name(),
        });
    }
    if meta.len() > limit {
        return Err(FileReadError::TooLarge {
            path: path.to_path_buf(),
            size: Some(meta.len()),
            limit,
            what,
        });
    }
    Ok((file, meta))
}

/// Reads all of `path`, a regular file (or standard input when `streams` allows it) of at most
/// `limit` bytes; `what` names the file's role in a [`FileReadError::TooLarge`] message.
///
/// Errors: [`FileReadError::Io`] (missing, unreadable, or memory for `limit` bytes could not be
/// reserved), [`FileReadError::NotRegular`], [`FileReadError::TooLarge`].
pub fn read_file(
    path: &Path,
    limit: u64,
    what: &'static str,
    streams: Streams,
) -> Result<Vec<u8>, FileReadError> {
    if streams == Streams::Stdin && is_stdin(path) {
        return read_stdin(path, limit, what);
    }
    let (file, size) = open_regular(path, limit, what)?;
    read_bounded(file, path, Some(size), limit, what)
}

/// Reads standard input (descriptor 0) blocking, up to `limit` bytes.
fn read_stdin(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileReadError> {
    let stdin = std::io::stdin().lock();
    read_bounded(stdin, path, None, limit, what)
}

/// Reads `r` to its end, refusing more than `limit` bytes; reserves `size_hint` bytes up front
/// (fallibly: a failed reservation is an error, not an abort).
fn read_bounded(
    r: impl Read,
    path: &Path,
    size_hint: Option<u64>,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, FileReadError> {
    let io = |source| FileReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut data = Vec::new();
    if let Some(n) = size_hint {
        data.try_reserve_exact(n as usize).map_err(|e| {
            io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot reserve {n} bytes: {e}"),
            ))
        })?;
    }
    r.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() as u64 > limit {
        return Err(FileReadError::TooLarge {
            path: path.to_path_buf(),
            size: None,
            limit,
            what,
        });
    }
    Ok(data)
}

/// Reads `path` as text with the same rules as [`read_file`]; invalid UTF-8 becomes U+FFFD.
///
/// Errors: as [`read_file`].
pub fn read_text_lossy(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, FileReadError> {
    let bytes = read_file(path, limit, what, Streams::None)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// `path` for messages: its text, lossy when it is not UTF-8.
pub fn display(path: &Path) -> std::borrow::Cow<'_, str> {
    OsStr::to_string_lossy(path.as_os_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_file(&fifo, 100, "a test file", Streams::None).unwrap_err();
        assert!(
            matches!(e, FileReadError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big");
        std::fs::write(&f, [0u8; 101]).unwrap();
        let e = read_file(&f, 100, "a test file", Streams::None).unwrap_err();
        assert!(
            matches!(
                e,
                FileReadError::TooLarge {
                    size: Some(101),
                    limit: 100,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            read_file(&f, 101, "a test file", Streams::None)
                .unwrap()
                .len(),
            101
        );
    }

    #[test]
    fn a_known_size_is_read_and_no_more_and_a_file_that_shrank_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("entry");
        std::fs::write(&f, b"0123456789").unwrap();
        let (file, m) = open_regular_nofollow_stat(&f, 100, "a test file").unwrap();
        assert_eq!(m.len(), 10);
        // Appended after the stat: not read.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .and_then(|mut a| std::io::Write::write_all(&mut a, b"more"))
            .unwrap();
        assert_eq!(read_known_size(&file, &f, m.len()).unwrap(), b"0123456789");
        // Shrunk after the stat: an error naming it.
        let (file, m) = open_regular_nofollow_stat(&f, 100, "a test file").unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .and_then(|t| t.set_len(4))
            .unwrap();
        let e = read_known_size(&file, &f, m.len()).unwrap_err();
        assert!(e.to_string().contains("shrank"), "{e}");
    }

    #[test]
    fn a_link_is_refused_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_regular_nofollow_stat(&link, 100, "a test file").unwrap_err();
        assert!(
            matches!(
                e,
                FileReadError::NotRegular {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_device_is_refused() {
        let e = read_file(Path::new("/dev/zero"), 100, "a test file", Streams::Stdin).unwrap_err();
        assert!(
            matches!(
                e,
                FileReadError::NotRegular {
                    kind: "character device",
                    ..
                }
            ),
            "{e}"
        );
    }
}
