//! Fuzz target: `Manifest::from_bytes`, the reader of a cache entry's header manifest (the
//! files and directory listings the compiler read, from the cache), on arbitrary bytes. Any
//! panic is a bug: a malformed manifest must come back as `BadManifest`.
#![no_main]

use hipjit::cache::manifest::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::from_bytes(data) {
        let _ = (m.files.len(), m.dirs.len());
        let _ = format!("{m:?}");
    }
});
