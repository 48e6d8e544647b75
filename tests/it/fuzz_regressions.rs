//! Inputs the fuzzers (fuzz/) found crashing a reader, kept as regression cases: every file of
//! tests/data/code-objects/fuzz-regressions goes through each reader of untrusted bytes (code
//! objects, cubins, cache entries), which must return, not panic; the cases whose fix is known
//! are checked for the error they now give.

use std::path::Path;

use hipjit::cache::Entry;
use hipjit::code_object::cubin::{Cubin, CubinError};
use hipjit::code_object::CodeObject;

fn regressions() -> Vec<(String, Vec<u8>)> {
    let dir = crate::common::code_object("fuzz-regressions");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no regression inputs in {}", dir.display());
    out
}

#[test]
fn every_reader_returns_on_every_regression_input() {
    for (name, bytes) in regressions() {
        let _ = CodeObject::from_bytes(&bytes, None);
        let _ = Cubin::from_bytes(&bytes);
        let _ = Entry::from_bytes(bytes.clone(), Path::new(&name), None);
    }
}

/// libFuzzer's cubin target: a kernel's EIATTR_MAX_THREADS dimensions whose product overflows
/// 32 bits panicked (multiply with overflow) instead of being refused.
#[test]
fn cubin_max_threads_overflowing_32_bits_is_a_bad_attribute() {
    let (_, bytes) = regressions()
        .into_iter()
        .find(|(n, _)| n == "cubin-max-threads-overflow.cubin")
        .expect("the regression input");
    match Cubin::from_bytes(&bytes) {
        Err(CubinError::BadAttribute { what, .. }) => {
            assert!(what.contains("does not fit 32 bits"), "{what}")
        }
        other => panic!("expected a bad attribute, got {other:?}"),
    }
}
