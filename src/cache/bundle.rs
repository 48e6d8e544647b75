//! Bundles: cache entries in one compressed file, to bake a warm read-only root into an image
//! or carry a cache between machines (`hipjit cache export` / `import`).
//!
//! # Layout
//! A Zstandard frame (RFC 8878) whose content is [`BUNDLE_MAGIC`], the [`BUNDLE_VERSION`]
//! (`u32` LE), the index length (`u64` LE), the index (MessagePack: one [`IndexItem`] per
//! entry: key, size, sha256), then the entries back to back, each byte for byte a disk-cache
//! entry file (`disk`): results and header manifests alike.
//!
//! # Import
//! The bundle is opened as every file hipjit reads (`open_regular`: a FIFO,
//! device or directory is refused at once, never waited on) and decompressed as a stream,
//! entry by entry, never more than its header says: an index of at most [`INDEX_LIMIT`]
//! bytes, then each entry's bytes up to the size the index claims for it (at most
//! `ENTRY_LIMIT`), then one byte to see that nothing follows, and the file must end with the
//! Zstandard frame (no trailing data, no second frame). So a small file that decompresses to
//! gigabytes (a Zstandard bomb) costs what its index claims and is refused as soon as its
//! content runs past that, naming where and the bound.
//!
//! Every entry is checked as it streams, in chunks of 1 MiB, into an unnamed temporary file
//! of the written root (`v1/tmp`), before anything is published: its first bytes as a disk
//! entry's header (`disk`: magic, format, metadata length and checksum; an
//! entry whose first bytes are not an entry's is refused before more of it is read), the key
//! it holds equal to the index's, its artefacts' sizes adding up to the index's size, each
//! artefact's sha256, and the entry's size and sha256 against the index. Memory holds an
//! entry's header and metadata (at most [`ENTRY_HEAD_LIMIT`] bytes) and one chunk, never a
//! whole entry, while the bundle is checked. A bundle with a bad entry is refused whole,
//! naming the first bad one (nothing after it is read); a good bundle's entries are read back
//! one at a time (memory then holds the one being published), checked again, and published
//! into the root like any other write (atomically; one already there is kept).

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::disk::{encode_entry, DiskCache, Entry, ENTRY_LIMIT};
use super::key::{hex, sha256, CacheKey};
use crate::fs;
use crate::fs::read::FileReadError;
use crate::fs::write::WriteError;

/// The first bytes of a bundle's content (inside the Zstandard frame).
#[doc(hidden)]
pub const BUNDLE_MAGIC: &[u8; 8] = b"HIPJITBN";
/// The bundle layout version.
pub const BUNDLE_VERSION: u32 = 1;
/// The largest index read, in bytes (decompressed): 64 MiB, some 400,000 entries.
#[doc(hidden)]
pub const INDEX_LIMIT: u64 = 64 << 20;
/// The largest header and metadata of one entry read into memory while an entry is checked
/// (its artefacts are streamed): 64 MiB.
#[doc(hidden)]
pub const ENTRY_HEAD_LIMIT: u64 = 64 << 20;
/// The bytes before the index: [`BUNDLE_MAGIC`], [`BUNDLE_VERSION`], the index length.
const HEADER_LEN: u64 = 8 + 4 + 8;

/// One entry of a bundle's index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[doc(hidden)]
pub struct IndexItem {
    /// The entry's key, hex.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// sha256 of its bytes, hex.
    pub sha256: String,
}

/// Errors of [`export`] and [`import`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The cache could not be listed or written.
    #[error(transparent)]
    Cache(#[from] super::disk::CacheError),
    /// The bundle to import is not a regular file (a FIFO, device, directory) or cannot be
    /// opened.
    #[error(transparent)]
    Read(#[from] FileReadError),
    /// The bundle could not be written where [`export`] was asked to (by the rules of
    /// `write`: a FIFO, block device, socket or directory there is refused).
    #[error(transparent)]
    Write(#[from] WriteError),
    /// [`export`] was asked to write the bundle inside a root it exports (over one of its
    /// entries, or among them); nothing was written.
    #[error("{} is inside the cache root {} being exported; refusing to write the bundle there", path.display(), root.display())]
    OutputInRoot {
        /// The output path as given.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// The file is not a bundle hipjit can read.
    #[error("{} is not a hipjit cache bundle: {reason}", path.display())]
    NotABundle {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Entries of the bundle are bad: nothing was imported.
    #[error("{} holds {} bad entr{}; nothing imported: {}", path.display(), bad.len(), if bad.len() == 1 { "y" } else { "ies" }, bad.iter().map(|(k, r)| format!("{k}: {r}")).collect::<Vec<_>>().join("; "))]
    BadEntries {
        /// The file.
        path: PathBuf,
        /// Each bad entry: its key as the index names it, and what is wrong.
        bad: Vec<(String, String)>,
    },
}

/// What [`export`] wrote or [`import`] read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleReport {
    /// Entries in the bundle.
    pub entries: usize,
    /// Entries published into the root ([`import`]); 0 for [`export`].
    pub published: usize,
    /// Bytes of entries (uncompressed).
    pub bytes: u64,
    /// Bytes of the bundle file.
    pub file_bytes: u64,
}

/// Writes every valid entry of `cache`'s roots (or only those whose key is in `keys`) into a
/// bundle at `out`, by the rules of `write_atomically` (as `hipjit compile
/// -o`): written to a temporary file beside it and renamed into place (never a half-written
/// bundle), a symbolic link followed, a character device written into, a FIFO, block device,
/// socket or directory refused; a new file has mode 0600. Bad entries are skipped
/// (`hipjit cache verify` names them).
///
/// An output inside one of `cache`'s roots (after links are followed) is refused, as `hipjit
/// compile -o` refuses an output that is one of its inputs: it would replace an entry, or put
/// a file among them.
///
/// Errors: [`BundleError::OutputInRoot`], [`BundleError::Cache`] listing the roots,
/// [`BundleError::Write`] writing.
pub fn export(
    cache: &DiskCache,
    keys: Option<&[CacheKey]>,
    out: &Path,
) -> Result<BundleReport, BundleError> {
    if let Some(root) = root_holding(cache, out) {
        return Err(BundleError::OutputInRoot {
            path: out.to_path_buf(),
            root,
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut index = Vec::new();
    let mut body = Vec::new();
    for summary in cache.list()? {
        let Some(key) = summary.key else { continue };
        if keys.is_some_and(|k| !k.contains(&key)) || !seen.insert(key) {
            continue;
        }
        let Some(entry) = cache.get(&key).entry else {
            continue;
        };
        let artefacts: Vec<(&str, &[u8])> = entry
            .meta
            .artefacts
            .iter()
            .filter_map(|a| Some((a.name.as_str(), entry.artefact(&a.name)?)))
            .collect();
        let bytes = encode_entry(&key, entry.meta.clone(), &artefacts)?;
        index.push(IndexItem {
            key: key.to_hex(),
            size: bytes.len() as u64,
            sha256: hex(&sha256(&bytes)),
        });
        body.extend_from_slice(&bytes);
    }
    let index_bytes = rmp_serde::to_vec_named(&index).map_err(|e| BundleError::NotABundle {
        path: out.to_path_buf(),
        reason: format!("cannot encode the index: {e}"),
    })?;
    let mut content = Vec::with_capacity(20 + index_bytes.len() + body.len());
    content.extend_from_slice(BUNDLE_MAGIC);
    content.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
    content.extend_from_slice(&(index_bytes.len() as u64).to_le_bytes());
    content.extend_from_slice(&index_bytes);
    content.extend_from_slice(&body);
    let compressed = ruzstd::encoding::compress_to_vec(
        &content[..],
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    fs::write::write_atomically(out, &compressed, false, 0o600)?;
    Ok(BundleReport {
        entries: index.len(),
        published: 0,
        bytes: body.len() as u64,
        file_bytes: compressed.len() as u64,
    })
}

/// Reads the bundle at `path` as a stream, checks every entry (see the module documentation)
/// and, when all are good, publishes them into the written root of `cache`.
///
/// Errors: [`BundleError::Read`] for a path that is not a regular file or cannot be opened,
/// [`BundleError::Io`] using the staging file or reading past the frame,
/// [`BundleError::NotABundle`] for a file that is not one (no Zstandard frame or bundle magic,
/// another version, an index that does not decode or is larger than [`INDEX_LIMIT`]),
/// [`BundleError::BadEntries`] naming the first bad entry (one whose size or sha256 differs
/// from the index, that is no valid entry, that claims more than `ENTRY_LIMIT` bytes or
/// runs past the end; content past what the index claims or data after the frame, named
/// `(after the last entry)`) with nothing written, [`BundleError::Cache`] staging or writing the root.
pub fn import(cache: &DiskCache, path: &Path) -> Result<BundleReport, BundleError> {
    let not = |reason: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let decode = |e: std::io::Error| not(format!("the Zstandard frame does not decode ({e})"));
    let (file, file_bytes) = fs::read::open_regular(path, u64::MAX, "a cache bundle")?;
    let mut content = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
        .map_err(|e| not(format!("not a Zstandard frame ({e})")))?;
    let head = read_up_to(&mut content, HEADER_LEN).map_err(decode)?;
    if head.len() < HEADER_LEN as usize || &head[..8] != BUNDLE_MAGIC {
        return Err(not("no bundle magic".into()));
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != BUNDLE_VERSION {
        return Err(not(format!(
            "bundle version {version}, expected {BUNDLE_VERSION}"
        )));
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&head[12..20]);
    let index_len = u64::from_le_bytes(len8);
    if index_len > INDEX_LIMIT {
        return Err(not(format!(
            "its header claims an index of {index_len} bytes, more than the limit of \
             {INDEX_LIMIT} bytes; not read"
        )));
    }
    let index_bytes = read_up_to(&mut content, index_len).map_err(decode)?;
    if (index_bytes.len() as u64) < index_len {
        return Err(not("the index runs past the end".into()));
    }
    let index: Vec<IndexItem> = rmp_serde::from_slice(&index_bytes)
        .map_err(|e| not(format!("the index does not decode: {e}")))?;
    drop(index_bytes);

    // Each entry is streamed up to the size the index claims, checked as it goes, into the
    // staging file; what the index claims in all bounds what is decompressed, and the first
    // bad entry ends the reading (the bundle is refused whole).
    let mut staging = cache.staging_file()?;
    let staging_dir = cache
        .roots()
        .first()
        .map(|r| r.path.join(super::disk::LAYOUT_DIR).join("tmp"))
        .unwrap_or_default();
    let staging_io = |source| BundleError::Io {
        path: staging_dir.clone(),
        source,
    };
    let mut claimed = HEADER_LEN + index_len;
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    for item in &index {
        match stage_entry(&mut content, item, &mut staging, &mut chunk) {
            Ok(key) => good.push((key, item.size)),
            Err(Staged::Bad(reason)) => {
                bad.push((item.key.clone(), reason));
                break;
            }
            Err(Staged::Decode(e)) => return Err(decode(e)),
            Err(Staged::Staging(e)) => return Err(staging_io(e)),
        }
        claimed += item.size;
    }
    if bad.is_empty() && !read_up_to(&mut content, 1).map_err(decode)?.is_empty() {
        bad.push((
            "(after the last entry)".into(),
            format!(
                "the content goes on past the {claimed} bytes that the header, the index and \
                 its {} entries claim; not read further",
                index.len()
            ),
        ));
    }
    if bad.is_empty() {
        // The frame ends where its content does; anything after it in the file (garbage, a
        // second frame) is not part of the bundle that was checked.
        let mut rest = [0u8; 1];
        let after = content
            .get_mut()
            .read(&mut rest)
            .map_err(|source| BundleError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if after > 0 {
            bad.push((
                "(after the last entry)".into(),
                "the file goes on after the Zstandard frame that holds the bundle (trailing \
                 data or a second frame); not read further"
                    .into(),
            ));
        }
    }
    if !bad.is_empty() {
        return Err(BundleError::BadEntries {
            path: path.to_path_buf(),
            bad,
        });
    }
    drop(content);
    let mut report = BundleReport {
        entries: good.len(),
        file_bytes,
        ..Default::default()
    };
    staging.rewind().map_err(staging_io)?;
    for (key, size) in good {
        let mut bytes = Vec::new();
        (&mut staging)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(staging_io)?;
        let hex_key = key.to_hex();
        let entry = Entry::from_bytes(bytes, Path::new(&hex_key), Some(&key)).map_err(|r| {
            BundleError::BadEntries {
                path: path.to_path_buf(),
                bad: vec![(hex_key.clone(), format!("changed while staged: {r}"))],
            }
        })?;
        let artefacts: Vec<(&str, &[u8])> = entry
            .meta
            .artefacts
            .iter()
            .filter_map(|a| Some((a.name.as_str(), entry.artefact(&a.name)?)))
            .collect();
        let (_, published) = cache.put(&entry.key, entry.meta.clone(), &artefacts)?;
        report.published += usize::from(published);
        report.bytes += artefacts.iter().map(|a| a.1.len() as u64).sum::<u64>();
    }
    Ok(report)
}

/// Up to `n` bytes of `r`, fewer only at its end; memory grows with what arrives, not with `n`.
fn read_up_to(r: &mut impl Read, n: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(n).read_to_end(&mut out)?;
    Ok(out)
}

/// The bytes read (and written to the staging file) at a time.
const CHUNK: usize = 1 << 20;

/// Why [`stage_entry`] stopped.
enum Staged {
    /// The entry is bad: what is wrong.
    Bad(String),
    /// The bundle's Zstandard frame does not decode.
    Decode(std::io::Error),
    /// The staging file could not be written.
    Staging(std::io::Error),
}

/// Streams the entry `item` describes from `content` into `staging`, `chunk` at a time,
/// checking it on the way as [`Entry::from_bytes`] does (magic, format, metadata length and
/// checksum, the key it holds equal to the index's, its artefacts' sizes adding up to the
/// index's size, each artefact's sha256), and its sha256 against the index's: memory holds
/// its header and metadata (at most [`ENTRY_HEAD_LIMIT`] bytes) and one chunk, never the
/// entry. An entry whose first bytes are not an entry's is refused before more is read.
fn stage_entry(
    content: &mut impl Read,
    item: &IndexItem,
    staging: &mut std::fs::File,
    chunk: &mut [u8],
) -> Result<CacheKey, Staged> {
    use super::disk::{check_key, format_of, frame, EntryMeta, CHECKSUM_LEN, PREFIX_LEN};
    use crate::digest::Sha256;
    if item.size > ENTRY_LIMIT {
        return Err(Staged::Bad(format!(
            "the index claims {} bytes, more than the limit of {ENTRY_LIMIT} bytes for a cache \
             entry; the bundle was not read past it",
            item.size
        )));
    }
    let key = item
        .key
        .parse::<CacheKey>()
        .map_err(|e| Staged::Bad(e.to_string()))?;
    let past_end = |at: u64| {
        Staged::Bad(format!(
            "{} bytes run past the end of the bundle ({at} there)",
            item.size
        ))
    };
    let mut head = read_up_to(content, item.size.min(PREFIX_LEN as u64)).map_err(Staged::Decode)?;
    if head.len() < PREFIX_LEN {
        if (head.len() as u64) < item.size {
            return Err(past_end(head.len() as u64));
        }
        return Err(Staged::Bad(format!(
            "not a hipjit cache entry ({} bytes, too short for one)",
            item.size
        )));
    }
    if format_of(&head).is_none() {
        return Err(Staged::Bad(format!(
            "not a hipjit cache entry (its first bytes are not the {:?} magic); the bundle \
             was not read past it",
            String::from_utf8_lossy(super::disk::ENTRY_MAGIC)
        )));
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&head[12..20]);
    let meta_len = u64::from_le_bytes(len8);
    let head_len = meta_len.saturating_add((PREFIX_LEN + CHECKSUM_LEN) as u64);
    if head_len > item.size || head_len > ENTRY_HEAD_LIMIT {
        return Err(Staged::Bad(format!(
            "its header claims {meta_len} bytes of metadata, past its {} bytes or the limit \
             of {ENTRY_HEAD_LIMIT} bytes for an entry's header and metadata",
            item.size
        )));
    }
    let rest = read_up_to(content, head_len - PREFIX_LEN as u64).map_err(Staged::Decode)?;
    head.extend_from_slice(&rest);
    drop(rest);
    if (head.len() as u64) < head_len {
        return Err(past_end(head.len() as u64));
    }
    let (meta_end, _) = frame(&head).map_err(Staged::Bad)?;
    let meta: EntryMeta = rmp_serde::from_slice(&head[PREFIX_LEN..meta_end])
        .map_err(|e| Staged::Bad(format!("metadata does not decode: {e}")))?;
    check_key(&meta.key, &key).map_err(Staged::Bad)?;
    let body = meta
        .artefacts
        .iter()
        .try_fold(0u64, |sum, a| sum.checked_add(a.size));
    if body.and_then(|b| b.checked_add(head_len)) != Some(item.size) {
        return Err(Staged::Bad(format!(
            "its header, metadata and artefacts make {} bytes, the index claims {}",
            body.and_then(|b| b.checked_add(head_len))
                .map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
            item.size
        )));
    }
    let mut whole = Sha256::new();
    whole.update(&head);
    staging.write_all(&head).map_err(Staged::Staging)?;
    let mut at = head_len;
    drop(head);
    for a in &meta.artefacts {
        let mut digest = Sha256::new();
        let mut left = a.size;
        while left > 0 {
            let want = left.min(chunk.len() as u64) as usize;
            let n = read_full(content, &mut chunk[..want]).map_err(Staged::Decode)?;
            digest.update(&chunk[..n]);
            whole.update(&chunk[..n]);
            staging.write_all(&chunk[..n]).map_err(Staged::Staging)?;
            at += n as u64;
            if n < want {
                return Err(past_end(at));
            }
            left -= n as u64;
        }
        let digest = hex(&digest.finish());
        if digest != a.sha256 {
            return Err(Staged::Bad(format!(
                "artefact {} has sha256 {digest}, recorded {}",
                a.name, a.sha256
            )));
        }
    }
    let digest = hex(&whole.finish());
    if digest != item.sha256 {
        return Err(Staged::Bad(format!(
            "sha256 {digest}, the index records {}",
            item.sha256
        )));
    }
    Ok(key)
}

/// Fills `buf` from `r`, fewer bytes only at its end; the count read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The root of `cache` that the file `out` would be written in, its links followed and its
/// directory resolved (`..`, links above it); `None` when it is in none, or its directory
/// cannot be resolved (then the write reports it).
fn root_holding(cache: &DiskCache, out: &Path) -> Option<PathBuf> {
    let target = fs::write::resolve_links(out).ok()?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let full = std::fs::canonicalize(dir).ok()?.join(target.file_name()?);
    cache
        .roots()
        .iter()
        .find(|r| std::fs::canonicalize(&r.path).is_ok_and(|root| full.starts_with(root)))
        .map(|r| r.path.clone())
}
