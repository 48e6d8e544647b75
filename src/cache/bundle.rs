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
//! Every entry is checked before anything is written: its size and sha256 against the index,
//! then as a disk entry ([`Entry::from_bytes`]: magic, format, the key it holds equal to the
//! index's, each artefact's size and sha256). A bundle with any bad entry is refused whole,
//! naming each bad one; a good bundle's entries are published into the root like any other
//! write (atomically; one already there is kept).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::disk::{encode_entry, DiskCache, Entry};
use super::key::{hex, sha256, CacheKey};
use crate::file_write::{self, WriteError};

/// The first bytes of a bundle's content (inside the Zstandard frame).
pub const BUNDLE_MAGIC: &[u8; 8] = b"HIPJITBN";
/// The bundle layout version.
pub const BUNDLE_VERSION: u32 = 1;
/// The largest bundle content read, in bytes (decompressed): 16 GiB.
pub const BUNDLE_LIMIT: u64 = 16 << 30;

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

/// Reads the bundle at `path`, checks every entry (see the module documentation) and, when all
/// are good, publishes them into the written root of `cache`.
///
/// Errors: [`BundleError::Io`] reading, [`BundleError::NotABundle`] for a file that is not one
/// (or is truncated), [`BundleError::BadEntries`] naming every bad entry (nothing is written),
/// [`BundleError::Cache`] writing the root.
pub fn import(cache: &DiskCache, path: &Path) -> Result<BundleReport, BundleError> {
    let not = |reason: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
        .map_err(|e| not(format!("not a Zstandard frame ({e})")))?;
    let mut content = Vec::new();
    decoder
        .take(BUNDLE_LIMIT + 1)
        .read_to_end(&mut content)
        .map_err(|e| not(format!("the Zstandard frame does not decode ({e})")))?;
    if content.len() as u64 > BUNDLE_LIMIT {
        return Err(not(format!("more than {BUNDLE_LIMIT} bytes decompressed")));
    }
    if content.len() < 20 || &content[..8] != BUNDLE_MAGIC {
        return Err(not("no bundle magic".into()));
    }
    let version = u32::from_le_bytes([content[8], content[9], content[10], content[11]]);
    if version != BUNDLE_VERSION {
        return Err(not(format!(
            "bundle version {version}, expected {BUNDLE_VERSION}"
        )));
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&content[12..20]);
    let index_end = 20u64
        .checked_add(u64::from_le_bytes(len8))
        .filter(|&e| e <= content.len() as u64)
        .ok_or_else(|| not("the index runs past the end".into()))? as usize;
    let index: Vec<IndexItem> = rmp_serde::from_slice(&content[20..index_end])
        .map_err(|e| not(format!("the index does not decode: {e}")))?;
    let mut at = index_end as u64;
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for item in &index {
        let end = at
            .checked_add(item.size)
            .filter(|&e| e <= content.len() as u64);
        let Some(end) = end else {
            bad.push((
                item.key.clone(),
                format!("{} bytes run past the end of the bundle", item.size),
            ));
            break;
        };
        let bytes = &content[at as usize..end as usize];
        at = end;
        let checked = item
            .key
            .parse::<CacheKey>()
            .map_err(|e| e.to_string())
            .and_then(|key| {
                let digest = hex(&sha256(bytes));
                if digest != item.sha256 {
                    return Err(format!(
                        "sha256 {digest}, the index records {}",
                        item.sha256
                    ));
                }
                Entry::from_bytes(bytes.to_vec(), Path::new(&item.key), Some(&key))
            });
        match checked {
            Ok(entry) => good.push(entry),
            Err(reason) => bad.push((item.key.clone(), reason)),
        }
    }
    if bad.is_empty() && at != content.len() as u64 {
        bad.push((
            "(after the last entry)".into(),
            format!("{} trailing bytes", content.len() as u64 - at),
        ));
    }
    if !bad.is_empty() {
        return Err(BundleError::BadEntries {
            path: path.to_path_buf(),
            bad,
        });
    }
    let mut report = BundleReport {
        entries: good.len(),
        file_bytes,
        ..Default::default()
    };
    for entry in &good {
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
