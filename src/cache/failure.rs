//! Remembered compile failures: a compile the compiler rejected (it ran, exited with a failure
//! status, and printed its diagnostics) is stored like a result, under a key of its own, so
//! that the same request fails at once, with the same error, until anything its key covers
//! changes.
//!
//! A failure is keyed as a result is: the direct key (source, options, compiler identity and
//! environment, signature) names the header manifest of the files the rejected compile read
//! (its dependency list), whose hashes as they are now give the result key; the failure is
//! the entry of [`failure_key`] of that result key. It is an ordinary entry (the disk
//! cache's format, signed remotely as any entry) holding one artefact, [`ARTEFACT`], so a
//! cache written before failures were remembered reads as before, and a hipjit that does
//! not know them never looks one up (it compiles, and fails).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cache::key::CacheKey;
use crate::compiler::{CompileFailure, Diagnostic};
use crate::digest::Record;

/// The artefact of a failure entry: the rejected run (MessagePack).
pub const ARTEFACT: &str = "failure.msgpack";

/// The version of [`ARTEFACT`]'s record; another version does not decode (a miss).
const VERSION: u32 = 1;

/// The key of the failure entry of the result key `result`: never a result key itself
/// (another record is hashed), so a failure and a result never share an entry.
pub fn failure_key(result: &CacheKey) -> CacheKey {
    let mut r = Record::new();
    r.field("hipjit compile failure", &VERSION.to_le_bytes());
    r.field("result", &result.0);
    CacheKey(r.finish())
}

/// A rejected run as stored.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    command: Vec<String>,
    #[serde(with = "serde_bytes")]
    build_dir: Vec<u8>,
    exit_code: Option<i32>,
    stderr: String,
    diagnostics: Vec<Diagnostic>,
}

/// The [`ARTEFACT`] bytes of `failure`.
pub fn encode(failure: &CompileFailure) -> Option<Vec<u8>> {
    rmp_serde::to_vec_named(&Stored {
        version: VERSION,
        command: failure.command.clone(),
        build_dir: failure.build_dir.as_os_str().as_bytes().to_vec(),
        exit_code: failure.exit_code,
        stderr: failure.stderr.clone(),
        diagnostics: failure.diagnostics.clone(),
    })
    .ok()
}

/// The failure an [`ARTEFACT`] holds; `None` when it does not decode or is of another
/// version.
pub fn decode(bytes: &[u8]) -> Option<CompileFailure> {
    let s: Stored = rmp_serde::from_slice(bytes).ok()?;
    (s.version == VERSION).then(|| CompileFailure {
        command: s.command,
        build_dir: PathBuf::from(OsString::from_vec(s.build_dir)),
        exit_code: s.exit_code,
        stderr: s.stderr,
        diagnostics: s.diagnostics,
    })
}

/// Whether `failure` may be remembered: the compiler exited with a failure status (not a
/// signal) and said why in at least one error diagnostic.
pub fn rememberable(failure: &CompileFailure) -> bool {
    failure.exit_code.is_some_and(|c| c != 0) && failure.diagnostics.iter().any(|d| d.is_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_back_whole_and_its_key_is_no_result_key() {
        let f = CompileFailure {
            command: vec!["hipcc".into(), "-O3".into(), "a.hip".into()],
            build_dir: PathBuf::from("/tmp/hipjit-build-1/b"),
            exit_code: Some(1),
            stderr: "a.hip:1:1: error: boom\n".into(),
            diagnostics: crate::compiler::diagnostics::parse(
                "a.hip:1:1: error: boom\n",
                &|f: &str| f.to_string(),
            ),
        };
        assert!(rememberable(&f));
        let back = decode(&encode(&f).unwrap()).unwrap();
        assert_eq!(back.to_string(), f.to_string());
        assert_eq!(back.diagnostics, f.diagnostics);
        let k = CacheKey([7; 32]);
        assert_ne!(failure_key(&k), k);
        let killed = CompileFailure {
            exit_code: None,
            ..f.clone()
        };
        assert!(!rememberable(&killed));
        let silent = CompileFailure {
            diagnostics: Vec::new(),
            ..f
        };
        assert!(!rememberable(&silent));
    }
}
