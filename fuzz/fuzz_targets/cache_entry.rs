//! Fuzz target: `Entry::from_bytes`, the disk cache's entry reader, on arbitrary bytes (with no
//! expected key and with one), then each artefact the metadata lists. Any panic is a bug: a
//! malformed entry must come back as an error (a bad entry, replaced by the next write).
//!
//! The entry's checksum (bytes 20..52: the sha256 of the first 20 bytes and the metadata) would
//! stop nearly every mutated input before the metadata decoder, so each input is also read with
//! its checksum recomputed, as the module documentation of `hipjit::cache::disk` lays it out.
#![no_main]

use std::path::Path;

use hipjit::cache::{CacheKey, Entry};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

const PREFIX: usize = 20;
const HEADER: usize = PREFIX + 32;

/// `data` with its checksum recomputed, when it is long enough and its metadata length fits.
fn with_checksum(data: &[u8]) -> Option<Vec<u8>> {
    let meta_len = u64::from_le_bytes(data.get(12..PREFIX)?.try_into().ok()?);
    let meta_end = (HEADER as u64).checked_add(meta_len)?;
    let meta = data.get(HEADER..usize::try_from(meta_end).ok()?)?;
    let mut out = data.to_vec();
    let sum = Sha256::new().chain_update(&data[..PREFIX]).chain_update(meta).finalize();
    out[PREFIX..HEADER].copy_from_slice(&sum);
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
    }
});
