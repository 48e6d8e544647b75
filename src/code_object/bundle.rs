//! Clang offload bundles (`__CLANG_OFFLOAD_BUNDLE__`) and compressed offload bundles (`CCOB`).
//!
//! Uncompressed layout (clang's ClangOffloadBundler documentation, "Binary Bundle File
//! Layout"): the 24-byte magic, a u64 entry count, then per entry a u64 offset, u64 size, u64
//! ID length and the ID (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`), all little-endian.
//!
//! Compressed layout (clang's `CompressedOffloadBundle` in OffloadBundler.h/.cpp): `CCOB`, a u16
//! version, a u16 method (`llvm::compression::Format`: 0 zlib, 1 zstd), then
//! - v1: u32 uncompressed size, u64 hash;
//! - v2: u32 total file size, u32 uncompressed size, u64 hash;
//! - v3: u64 total file size, u64 uncompressed size, u64 hash;
//!
//! followed by the compressed bundle. The hash is the low 64 bits (first 8 digest bytes, read
//! little-endian) of the MD5 of the uncompressed bundle.

use std::io::Read;

use super::elf::Bytes;
use super::{md5, CodeObjectError};
use crate::target::TargetId;

/// The magic of an uncompressed offload bundle.
pub(crate) const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
/// The magic of a compressed offload bundle.
pub(crate) const CCOB_MAGIC: &[u8] = b"CCOB";

/// The largest uncompressed bundle hipjit accepts (bytes): `CODE_OBJECT_LIMIT`
/// (512 MiB); code objects are far smaller. Checked against the declared size before anything is
/// allocated.
pub const MAX_UNCOMPRESSED_SIZE: u64 = crate::fs::read::CODE_OBJECT_LIMIT;

/// One entry of an offload bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleEntry {
    /// The bundle entry ID, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`.
    pub id: String,
    /// Offset of the entry's contents from the start of the (uncompressed) bundle, in bytes.
    pub offset: u64,
    /// Size of the entry's contents in bytes.
    pub size: u64,
    /// The entry's target ID when it is an AMDGPU (`amdgcn`) HIP or OpenMP entry.
    pub target_id: Option<TargetId>,
}

/// Splits a bundle entry ID into (offload kind, triple architecture, target ID text).
/// `hipv4-amdgcn-amd-amdhsa--gfx90a` gives ("hipv4", "amdgcn", "gfx90a"); the pre-target-ID
/// form `hip-amdgcn-amd-amdhsa-gfx906` is read too.
fn split_id(id: &str) -> Option<(&str, &str, &str)> {
    let (kind, rest) = id.split_once('-')?;
    let parts: Vec<&str> = rest.splitn(5, '-').collect();
    match parts.as_slice() {
        [arch, _, _, _, target] => Some((kind, arch, target)),
        [arch, _, _, target] if target.starts_with("gfx") => Some((kind, arch, target)),
        [arch, ..] => Some((kind, arch, "")),
        [] => None,
    }
}

/// Reads the entry table of an uncompressed offload bundle.
pub(crate) fn entries(data: &[u8]) -> Result<Vec<BundleEntry>, CodeObjectError> {
    let b = Bytes::new(data);
    let bad = |what: String, offset: u64| CodeObjectError::BadBundle { what, offset };
    let count = b.u64(24, "offload bundle entry count")?;
    // Each entry header takes at least 24 bytes.
    let room = (data.len() as u64).saturating_sub(32) / 24;
    if count > room {
        return Err(bad(
            format!(
                "entry count {count} cannot fit in a {}-byte bundle",
                data.len()
            ),
            24,
        ));
    }
    let mut at = 32u64;
    let mut out = Vec::new();
    for index in 0..count {
        let what = |field: &str| format!("offload bundle entry {index} ({field})");
        let offset = b.u64(at, &what("offset"))?;
        let size = b.u64(at + 8, &what("size"))?;
        let id_len = b.u64(at + 16, &what("ID length"))?;
        let id_bytes = b.slice(at + 24, id_len, &what("ID"))?;
        let id = std::str::from_utf8(id_bytes)
            .map_err(|_| bad(format!("entry {index} ID is not UTF-8"), at + 24))?
            .to_owned();
        match offset.checked_add(size) {
            Some(end) if end <= data.len() as u64 => {}
            _ => {
                return Err(bad(
                    format!(
                        "entry {index} ({id}) claims {size} bytes at offset {offset}, past the end of the {}-byte bundle",
                        data.len()
                    ),
                    at,
                ))
            }
        }
        let target_id = match split_id(&id) {
            Some((kind, "amdgcn", target))
                if matches!(kind, "hip" | "hipv4" | "openmp") && !target.is_empty() =>
            {
                Some(TargetId::parse(target).map_err(|e| {
                    bad(
                        format!("entry {index} ({id}) has an invalid target ID: {e}"),
                        at + 24,
                    )
                })?)
            }
            _ => None,
        };
        out.push(BundleEntry {
            id,
            offset,
            size,
            target_id,
        });
        at = at + 24 + id_len;
    }
    Ok(out)
}

/// Picks the AMDGPU entry for `target` (among entries whose target ID runs on it, one for the
/// processor itself before one for its generic family, then the one with most features) or,
/// with no target, the only AMDGPU entry. Returns the entry and its bytes.
pub(crate) fn select<'a>(
    data: &'a [u8],
    target: Option<&TargetId>,
) -> Result<(BundleEntry, &'a [u8]), CodeObjectError> {
    let all = entries(data)?;
    let amdgpu: Vec<&BundleEntry> = all.iter().filter(|e| e.target_id.is_some()).collect();
    let ids = || amdgpu.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    let chosen = match target {
        Some(target) => {
            // A processor's own code before its generic family's, then the most features
            // written; the first in file order among equals.
            let mut best: Option<(&BundleEntry, (bool, usize))> = None;
            for e in &amdgpu {
                let Some(t) = e.target_id.as_ref().filter(|t| t.runs_on(target)) else {
                    continue;
                };
                let key = (!t.is_generic(), t.specificity());
                if best.is_none_or(|(_, k)| key > k) {
                    best = Some((e, key));
                }
            }
            best.map(|(e, _)| e)
                .ok_or_else(|| CodeObjectError::NoMatchingEntry {
                    target: Some(Box::new(target.clone())),
                    entries: ids(),
                })?
        }
        None => match amdgpu.as_slice() {
            [only] => only,
            [] => {
                return Err(CodeObjectError::NoMatchingEntry {
                    target: None,
                    entries: all.iter().map(|e| e.id.clone()).collect(),
                })
            }
            _ => return Err(CodeObjectError::AmbiguousBundle { entries: ids() }),
        },
    };
    // Bounds were checked by `entries`.
    let bytes = Bytes::new(data).slice(chosen.offset, chosen.size, "offload bundle entry")?;
    Ok(((*chosen).clone(), bytes))
}

/// The header of a compressed offload bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CompressedHeader {
    pub(crate) version: u16,
    pub(crate) method: u16,
    pub(crate) total_size: Option<u64>,
    pub(crate) uncompressed_size: u64,
    pub(crate) hash: u64,
    pub(crate) header_size: u64,
}

pub(crate) fn compressed_header(data: &[u8]) -> Result<CompressedHeader, CodeObjectError> {
    let b = Bytes::new(data);
    let version = b.u16(4, "CCOB version")?;
    let method = b.u16(6, "CCOB compression method")?;
    let (total_size, uncompressed_size, hash, header_size) = match version {
        1 => (
            None,
            u64::from(b.u32(8, "CCOB v1 uncompressed size")?),
            b.u64(12, "CCOB v1 hash")?,
            20,
        ),
        2 => (
            Some(u64::from(b.u32(8, "CCOB v2 total size")?)),
            u64::from(b.u32(12, "CCOB v2 uncompressed size")?),
            b.u64(16, "CCOB v2 hash")?,
            24,
        ),
        3 => (
            Some(b.u64(8, "CCOB v3 total size")?),
            b.u64(16, "CCOB v3 uncompressed size")?,
            b.u64(24, "CCOB v3 hash")?,
            32,
        ),
        _ => return Err(CodeObjectError::UnsupportedCompressedVersion { version }),
    };
    Ok(CompressedHeader {
        version,
        method,
        total_size,
        uncompressed_size,
        hash,
        header_size,
    })
}

/// Decompresses a `CCOB` compressed offload bundle into the uncompressed bundle it holds.
pub(crate) fn decompress(data: &[u8]) -> Result<Vec<u8>, CodeObjectError> {
    let h = compressed_header(data)?;
    let bad = |what: String, offset: u64| CodeObjectError::BadCompressedBundle { what, offset };
    let end = match h.total_size {
        Some(total) if total < h.header_size => {
            return Err(bad(
                format!(
                    "total size {total} is smaller than the {}-byte v{} header",
                    h.header_size, h.version
                ),
                8,
            ))
        }
        Some(total) if total > data.len() as u64 => {
            return Err(bad(
                format!(
                    "total size {total} is larger than the {} bytes present",
                    data.len()
                ),
                8,
            ))
        }
        Some(total) => total,
        None => data.len() as u64,
    };
    let size_at = if h.version == 1 {
        8
    } else {
        12 + 4 * u64::from(h.version == 3)
    };
    if h.uncompressed_size > MAX_UNCOMPRESSED_SIZE {
        return Err(bad(
            format!(
                "uncompressed size {} exceeds hipjit's limit of {MAX_UNCOMPRESSED_SIZE} bytes",
                h.uncompressed_size
            ),
            size_at,
        ));
    }
    let payload = Bytes::new(data).slice(h.header_size, end - h.header_size, "CCOB payload")?;
    let method = match h.method {
        0 => "zlib",
        1 => "zstd",
        method => return Err(CodeObjectError::UnknownCompressionMethod { method }),
    };
    // The output buffer is the declared size, reserved once (a reservation the allocator
    // refuses is an error, not an abort); the decoder streams into it and is stopped one
    // byte past the declared size, so a bomb never grows it.
    let mut out = Vec::new();
    if let Err(e) = out.try_reserve_exact(h.uncompressed_size as usize) {
        return Err(CodeObjectError::Decompress {
            method,
            reason: format!(
                "cannot reserve the {} uncompressed bytes the header declares: {e}",
                h.uncompressed_size
            ),
        });
    }
    let result = match h.method {
        0 => fill_bounded(
            flate2::read::ZlibDecoder::new(payload),
            &mut out,
            h.uncompressed_size,
        ),
        _ => match ruzstd::decoding::StreamingDecoder::new(payload) {
            Ok(decoder) => fill_bounded(decoder, &mut out, h.uncompressed_size),
            Err(e) => Err(e.to_string()),
        },
    };
    let more = match result {
        Ok(more) => more,
        Err(reason) => return Err(CodeObjectError::Decompress { method, reason }),
    };
    if more || out.len() as u64 != h.uncompressed_size {
        return Err(bad(
            format!(
                "header says {} uncompressed bytes but {method} data gives {}{}",
                h.uncompressed_size,
                out.len(),
                if more { " or more" } else { "" }
            ),
            size_at,
        ));
    }
    let digest = md5::digest(&out);
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    let computed = u64::from_le_bytes(low);
    if computed != h.hash {
        return Err(CodeObjectError::HashMismatch {
            stored: h.hash,
            computed,
        });
    }
    Ok(out)
}

/// Reads `r` into `out` (capacity already reserved) up to `size` bytes without growing it;
/// returns whether `r` had more to give past `size`.
fn fill_bounded(mut r: impl Read, out: &mut Vec<u8>, size: u64) -> Result<bool, String> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let room = (size - out.len() as u64).min(chunk.len() as u64) as usize;
        // With no room left, one more byte says whether the data runs past the size.
        let want = room.max(1);
        let n = match r.read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        if n == 0 {
            return Ok(false);
        }
        if room == 0 {
            return Ok(true);
        }
        out.extend_from_slice(&chunk[..n]);
    }
}
