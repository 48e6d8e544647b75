//! Writing the files hipjit writes where the user names them (`hipjit compile -o`, cache
//! bundles of `hipjit cache export -o`): whole or not at all, and never over something that is
//! not a regular file.
//!
//! The rules, as a compiler's `-o` follows them: a regular file is replaced atomically (a
//! temporary file beside it, flushed and synced, then renamed over it: a reader never sees a
//! partly written file); a symbolic link is followed (its target is replaced, never the link;
//! a dangling link's target is created, as cc creates it; a loop of links is refused with
//! `ELOOP`); a character device (`/dev/null`) is written into, never replaced; anything else that is not
//! a regular file (a block device, FIFO, socket or directory) is refused by name. No rename
//! ever replaces a device, FIFO, socket or directory.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why [`write_atomically`] wrote nothing (or, for a character device, not all of it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The path names something that is neither a regular file nor a character device.
    #[error("{} is a {kind}, not a regular file; refusing to replace it", path.display())]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// `FIFO`, `socket`, `block device`, `directory` ([`crate::fs::read::kind_name`]).
        kind: &'static str,
    },
    /// The directory the file goes in does not exist (and was not to be created).
    #[error("the directory {} does not exist", path.display())]
    NoDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// A step failed: `cannot <what> <path>: <OS error>`.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// The step: `open`, `write`, `resolve`, `resolve the symbolic link` (a loop of
        /// links: `ELOOP`), `create the directory`, `create a temporary
        /// file in`, `rename the temporary file to`.
        what: &'static str,
        /// The file or directory of that step.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path` by the rules of the module documentation. A new or replaced
/// regular file gets permissions `mode` (e.g. `0o644` for a code object, as a compiler writes
/// it), whatever the umask.
///
/// `create_dir`: create the parent directory when missing (the directory `-o` names for
/// several inputs or targets); otherwise a missing parent is an error, as with cc.
///
/// Errors: [`WriteError::NotRegular`], [`WriteError::NoDirectory`], [`WriteError::Io`].
pub fn write_atomically(
    path: &Path,
    bytes: &[u8],
    create_dir: bool,
    mode: u32,
) -> Result<(), WriteError> {
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError::Io { what, path, source }
    };
    let resolved;
    let path = match std::fs::metadata(path) {
        // A loop of links: named, never replaced by a file.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io("resolve the symbolic link", path)(e))
        }
        // A dangling link: its target is written (created), the link kept, as cc does.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.is_symlink() => {
            resolved = resolve_links(path).map_err(io("resolve the symbolic link", path))?;
            resolved.as_path()
        }
        Ok(m) if m.file_type().is_char_device() => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io("open", path))?;
            return f.write_all(bytes).map_err(io("write", path));
        }
        Ok(m) if !m.is_file() => {
            return Err(WriteError::NotRegular {
                path: path.to_path_buf(),
                kind: crate::fs::read::kind_name(m.file_type()),
            })
        }
        Ok(_) if path.is_symlink() => {
            resolved = std::fs::canonicalize(path).map_err(io("resolve", path))?;
            resolved.as_path()
        }
        _ => path,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if create_dir {
        std::fs::create_dir_all(&dir).map_err(io("create the directory", &dir))?;
    } else if !dir.is_dir() {
        return Err(WriteError::NoDirectory { path: dir });
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".hipjit-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(io("create a temporary file in", &dir))?;
    let tmp_path = tmp.path().to_path_buf();
    tmp.write_all(bytes)
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io("write", &tmp_path))?;
    tmp.persist(path)
        .map_err(|e| io("rename the temporary file to", path)(e.error))?;
    Ok(())
}

/// The path `path` names once the symbolic links at its end are followed, one by one (a
/// relative target from the link's directory), whether or not the last target exists: for a
/// link to a link to `f`, `f`; for a dangling link, the path it points at; for anything else,
/// `path` itself. Links in the directories above are left to the OS.
///
/// Errors: `ELOOP` after 40 links (a loop), as the kernel's limit; an error reading a link.
pub fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_followed_a_fifo_refused_and_a_file_replaced() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, b"old").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, b"new", false, 0o600).unwrap();
        assert!(link.is_symlink(), "the link was replaced");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.clone().into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let e = write_atomically(&fifo, b"x", false, 0o644).unwrap_err();
        assert!(
            matches!(e, WriteError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());

        write_atomically(Path::new("/dev/null"), b"discarded", false, 0o644).unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let e = write_atomically(&d.path().join("no/such/x"), b"x", false, 0o644).unwrap_err();
        assert!(matches!(e, WriteError::NoDirectory { .. }), "{e}");
    }

    #[test]
    fn a_dangling_links_target_is_created_and_a_loop_refused() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink("sub/target", &link).unwrap();
        let e = write_atomically(&link, b"x", false, 0o600).unwrap_err();
        assert!(matches!(e, WriteError::NoDirectory { .. }), "{e}");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        write_atomically(&link, b"new", false, 0o644).unwrap();
        assert!(link.is_symlink(), "the link was replaced");
        assert_eq!(std::fs::read(d.path().join("sub/target")).unwrap(), b"new");

        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", &b).unwrap();
        let e = write_atomically(&a, b"x", false, 0o644).unwrap_err();
        assert!(
            matches!(&e, WriteError::Io { source, .. } if source.raw_os_error() == Some(libc::ELOOP)),
            "{e}"
        );
        assert!(a.is_symlink() && b.is_symlink(), "a link was replaced");
    }
}
