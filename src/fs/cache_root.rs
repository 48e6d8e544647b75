//! The shape of a disk-cache root that others must recognise: the directory the entries are
//! laid out in (`v1`) and the cache directory tag (<https://bford.info/cachedir/>) hipjit
//! writes in a disk-cache root it creates (when [`crate::cache::DiskCache::open`] makes the written root; a directory
//! that was already there, which may hold anything else, such as `$HOME` named in
//! `HIPJIT_CACHE_DIR` or `hipjit cache import --into`, is never tagged): a `CACHEDIR.TAG` file
//! whose first line is the tag's signature, so that
//! backup and archiving tools (`tar --exclude-caches`, borg, restic) skip the root, and so that
//! hipjit itself knows a root when it meets one: the NVRTC include walk
//! (`nvrtc` keys every file under each `-I` directory) leaves out the
//! directories hipjit writes in a tagged root (`compiler::rtc::HIPJIT_OWN_DIRS`),
//! since its own entries, locks, temporary files and identities change while it compiles (a
//! root inside an include directory, such as the default `~/.cache/hipjit` under `-I ~`, made
//! every such compile unpublishable); anything else there is keyed.

use std::io::Read;
use std::path::Path;

/// The directory of a cache root that holds its entries, locks and temporary files (`v1`:
/// the entry layout's version).
pub(crate) const LAYOUT_DIR: &str = "v1";

/// The tag's file name.
pub const TAG_FILE: &str = "CACHEDIR.TAG";

/// The tag's first bytes, as the specification requires them.
const SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// What hipjit writes: the signature, then comments saying who made it.
const CONTENT: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
     # This file is a cache directory tag created by hipjit.\n\
     # For information about cache directory tags, see https://bford.info/cachedir/\n";

/// Writes the tag into `root` unless a file of that name is there already. Best effort: a
/// root the tag cannot be written to still works as a cache.
pub(crate) fn ensure(root: &Path) {
    let path = root.join(TAG_FILE);
    if std::fs::symlink_metadata(&path).is_ok() {
        return;
    }
    let Ok(mut tmp) = tempfile::Builder::new()
        .prefix(".CACHEDIR.TAG.")
        .tempfile_in(root)
    else {
        return;
    };
    use std::io::Write;
    if tmp.write_all(CONTENT.as_bytes()).is_ok() {
        use std::os::unix::fs::PermissionsExt;
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
        // Another process may have written it meanwhile: theirs is the same text.
        let _ = tmp.persist_noclobber(&path);
    }
}

/// Whether `dir` holds a cache directory tag written by hipjit: a regular file
/// [`TAG_FILE`] starting with the signature and naming hipjit in its comment. A tag written
/// by another program (cargo tags its `target` directory) is not hipjit's: a header could be
/// generated there. The file is opened without blocking and judged by its type on the open
/// descriptor (`open_regular`): a FIFO, socket or device of that name is
/// no tag, and never waited on.
pub fn is_hipjit_cache(dir: &Path) -> bool {
    let Ok((mut f, _)) =
        crate::fs::read::open_regular(&dir.join(TAG_FILE), u64::MAX, "cache directory tag")
    else {
        return false;
    };
    let mut head = Vec::with_capacity(160);
    // What was read before an error, if any, is judged as it is.
    let _ = f.by_ref().take(160).read_to_end(&mut head);
    head.starts_with(SIGNATURE)
        && head
            .windows(b"created by hipjit".len())
            .any(|w| w == b"created by hipjit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_tag_is_recognised_and_another_programs_is_not() {
        let d = tempfile::tempdir().unwrap();
        assert!(!is_hipjit_cache(d.path()));
        ensure(d.path());
        let text = std::fs::read(d.path().join(TAG_FILE)).unwrap();
        assert!(text.starts_with(SIGNATURE));
        assert!(is_hipjit_cache(d.path()));
        // cargo's tag: the signature without hipjit's comment.
        let cargo = tempfile::tempdir().unwrap();
        std::fs::write(
            cargo.path().join(TAG_FILE),
            "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by cargo.\n",
        )
        .unwrap();
        assert!(!is_hipjit_cache(cargo.path()));
        // Not overwritten, and nothing left beside it.
        ensure(cargo.path());
        assert!(!is_hipjit_cache(cargo.path()));
        assert_eq!(std::fs::read_dir(cargo.path()).unwrap().count(), 1);
    }

    /// A root hipjit makes is tagged; a directory that was there is not (the tag kept all of
    /// `HIPJIT_CACHE_DIR=$HOME` out of backups), nor is it when it is opened again.
    #[test]
    fn only_a_root_hipjit_created_is_tagged() {
        use crate::cache::disk::DiskCache;
        let d = tempfile::tempdir().unwrap();
        let made = d.path().join("a/b/root");
        DiskCache::open(std::slice::from_ref(&made)).unwrap();
        assert!(is_hipjit_cache(&made));
        assert!(!d.path().join("a").join(TAG_FILE).exists());
        let home = d.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join(".profile"), "# mine\n").unwrap();
        for _ in 0..2 {
            DiskCache::open(std::slice::from_ref(&home)).unwrap();
            assert!(
                !home.join(TAG_FILE).exists(),
                "a directory of the user's was tagged"
            );
        }
    }

    #[test]
    fn a_fifo_named_like_the_tag_is_no_tag_and_is_not_waited_on() {
        let d = tempfile::tempdir().unwrap();
        let c = std::ffi::CString::new(
            d.path()
                .join(TAG_FILE)
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        // On a thread, under a deadline: a blocking open of a FIFO with no writer never returns.
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = d.path().to_path_buf();
        std::thread::spawn(move || tx.send(is_hipjit_cache(&dir)));
        let answer = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("is_hipjit_cache waited on a FIFO named CACHEDIR.TAG");
        assert!(!answer);
    }
}
