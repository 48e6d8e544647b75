//! Bundles: cache entries in one compressed file, to bake a warm read-only root into an image
//! or carry a cache between machines (`hipjit cache export` / `import`).
//!
//! # Layout
//! A Zstandard frame (RFC 8878) whose content is [`BUNDLE_MAGIC`], the [`BUNDLE_VERSION`]
//! (`u32` LE), the index length (`u64` LE), the index (MessagePack: one [`IndexItem`] per
//! entry: key, size, sha256), then the entries back to back, each byte for byte a disk-cache
//! entry file ([`crate::cache::disk`]): results and header manifests alike.
//!
//! # Import
//! The bundle is opened as every file hipjit reads ([`crate::file_read::open_regular`]: a FIFO,
//! device or directory is refused at once, never waited on) and decompressed as a stream,
//! entry by entry, never more than its header says: an index of at most [`INDEX_LIMIT`]
//! bytes, then each entry's bytes up to the size the index claims for it (at most
//! [`ENTRY_LIMIT`]), then one byte to see that nothing follows. So a small file that
//! decompresses to gigabytes (a Zstandard bomb) costs what its index claims and is refused as
//! soon as its content runs past that, naming where and the bound; memory holds one entry at
//! a time.
//!
//! Every entry is checked before anything is written: its size and sha256 against the index,
//! then as a disk entry ([`Entry::from_bytes`]: magic, format, the key it holds equal to the
//! index's, each artefact's size and sha256). Checked entries wait in an unnamed temporary file
//! of the written root (`v1/tmp`). A bundle with any bad entry is refused whole, naming each bad
//! one (up to the first whose bytes cannot be read); a good bundle's entries are published into
//! the root like any other write (atomically; one already there is kept).

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::disk::{encode_entry, DiskCache, Entry, ENTRY_LIMIT};
use super::key::{hex, sha256, CacheKey};
use crate::file_read::{self, FileReadError};
use crate::file_write::{self, WriteError};

/// The first bytes of a bundle's content (inside the Zstandard frame).
pub const BUNDLE_MAGIC: &[u8; 8] = b"HIPJITBN";
/// The bundle layout version.
pub const BUNDLE_VERSION: u32 = 1;
/// The largest index read, in bytes (decompressed): 64 MiB, some 400,000 entries.
pub const INDEX_LIMIT: u64 = 64 << 20;
/// The bytes before the index: [`BUNDLE_MAGIC`], [`BUNDLE_VERSION`], the index length.
const HEADER_LEN: u64 = 8 + 4 + 8;

/// One entry of a bundle's index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// [`crate::file_write`]: a FIFO, block device, socket or directory there is refused).
    #[error(transparent)]
    Write(#[from] WriteError),
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
/// bundle at `out`, by the rules of [`crate::file_write::write_atomically`] (as `hipjit compile
/// -o`): written to a temporary file beside it and renamed into place (never a half-written
/// bundle), a symbolic link followed, a character device written into, a FIFO, block device,
/// socket or directory refused; a new file has mode 0600. Bad entries are skipped
/// (`hipjit cache verify` names them).
///
/// Errors: [`BundleError::Cache`] listing the roots, [`BundleError::Write`] writing.
pub fn export(
    cache: &DiskCache,
    keys: Option<&[CacheKey]>,
    out: &Path,
) -> Result<BundleReport, BundleError> {
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
    file_write::write_atomically(out, &compressed, false, 0o600)?;
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
/// [`BundleError::Io`] using the staging file, [`BundleError::NotABundle`] for a file that is not one (no
/// Zstandard frame or bundle magic, another version, an index that does not decode or is
/// larger than [`INDEX_LIMIT`]), [`BundleError::BadEntries`] naming every bad entry (one whose
/// size or sha256 differs from the index, that is no valid entry, that claims more than
/// [`ENTRY_LIMIT`] bytes or runs past the end; content past what the index claims) with
/// nothing written, [`BundleError::Cache`] staging or writing the root.
pub fn import(cache: &DiskCache, path: &Path) -> Result<BundleReport, BundleError> {
    let not = |reason: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let decode = |e: std::io::Error| not(format!("the Zstandard frame does not decode ({e})"));
    let (file, file_bytes) = file_read::open_regular(path, u64::MAX, "a cache bundle")?;
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

    // Each entry is read up to the size the index claims, checked, and kept in the staging
    // file; what the index claims in all bounds what is decompressed.
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
    for item in &index {
        if item.size > ENTRY_LIMIT {
            bad.push((
                item.key.clone(),
                format!(
                    "the index claims {} bytes, more than the limit of {ENTRY_LIMIT} bytes for \
                     a cache entry; the bundle was not read past it",
                    item.size
                ),
            ));
            break;
        }
        let bytes = read_up_to(&mut content, item.size).map_err(decode)?;
        if (bytes.len() as u64) < item.size {
            bad.push((
                item.key.clone(),
                format!(
                    "{} bytes run past the end of the bundle ({} there)",
                    item.size,
                    bytes.len()
                ),
            ));
            break;
        }
        claimed += item.size;
        let checked = item
            .key
            .parse::<CacheKey>()
            .map_err(|e| e.to_string())
            .and_then(|key| {
                let digest = hex(&sha256(&bytes));
                if digest != item.sha256 {
                    return Err(format!(
                        "sha256 {digest}, the index records {}",
                        item.sha256
                    ));
                }
                Ok(key)
            });
        let checked = match checked {
            Ok(key) => {
                if bad.is_empty() {
                    // Staged before it is parsed (parsing takes the bytes); what is staged is
                    // parsed again before it is published. After a bad entry nothing will be.
                    staging.write_all(&bytes).map_err(staging_io)?;
                }
                Entry::from_bytes(bytes, Path::new(&item.key), Some(&key)).map(|_| key)
            }
            Err(e) => Err(e),
        };
        match checked {
            Ok(key) => good.push((key, item.size)),
            Err(reason) => bad.push((item.key.clone(), reason)),
        }
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
