//! Fuzz target: `Entry::from_bytes`, the disk cache's entry reader, on arbitrary bytes (with no
//! expected key and with one), then each artefact the metadata lists. Any panic is a bug: a
//! malformed entry must come back as an error (a bad entry, replaced by the next write).
#![no_main]

use std::path::Path;

use hipjit::cache::{CacheKey, Entry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let key: CacheKey = "00".repeat(32).parse().expect("a valid key");
    for expected in [None, Some(&key)] {
        if let Ok(e) = Entry::from_bytes(data.to_vec(), Path::new("fuzz.hjc"), expected) {
            for a in &e.meta.artefacts {
                let _ = e.artefact(&a.name).map(<[u8]>::len);
            }
        }
    }
});
