//! Fuzz target: `Entry::from_bytes`, the disk cache's entry reader, on arbitrary bytes (with no
//! expected key and with one), then each artefact the metadata lists; and the hit's own read of
//! an entry (its metadata read only as far as the key, command and artefacts), which must
//! serve the same command and artefacts as the full read whenever both accept an entry
//! (`hipjit::cache::check_hit_read`). Any panic is a bug: a malformed entry must come back as
//! an error (a bad entry, replaced by the next write).
//!
//! The entry's checksum (16 bytes after the metadata: the XXH3-128 of every byte before it)
//! would stop nearly every mutated input before the metadata decoder, so each input is also
//! read with its checksum recomputed, as the module documentation of `hipjit::cache::disk`
//! lays it out.
#![no_main]

use std::path::Path;

use hipjit::cache::{CacheKey, Entry};
use libfuzzer_sys::fuzz_target;

const PREFIX: usize = 20;
const CHECKSUM: usize = 16;

/// `data` with its checksum recomputed, when it is long enough and its metadata length fits.
fn with_checksum(data: &[u8]) -> Option<Vec<u8>> {
    let meta_len = u64::from_le_bytes(data.get(12..PREFIX)?.try_into().ok()?);
    let meta_end = usize::try_from((PREFIX as u64).checked_add(meta_len)?).ok()?;
    let sum_end = meta_end.checked_add(CHECKSUM)?;
    let head = data.get(..meta_end)?;
    let sum = xxhash_rust::xxh3::xxh3_128(head).to_le_bytes();
    let mut out = data.to_vec();
    out.get_mut(meta_end..sum_end)?.copy_from_slice(&sum);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let key: CacheKey = "00".repeat(32).parse().expect("a valid key");
    for input in std::iter::once(data.to_vec()).chain(with_checksum(data)) {
        for expected in [None, Some(&key)] {
            if let Ok(e) = Entry::from_bytes(input.clone(), Path::new("fuzz.hjc"), expected) {
                for a in &e.meta.artefacts {
                    let _ = e.artefact(&a.name).map(<[u8]>::len);
                }
            }
        }
        // The key the entry itself names when it names one, so that the hit's read gets past
        // the key check.
        let named = Entry::from_bytes(input.clone(), Path::new("fuzz.hjc"), None)
            .map_or(key, |e| e.key);
        hipjit::cache::check_hit_read(&input, &named);
    }
});
