//! The cache key: sha256 over a length-prefixed, versioned record of everything that decides a
//! compile's output.
//!
//! Record layout (all integers little-endian): for each field in order, `u64` length of the
//! field name, the name, `u64` length of the value, the value. Fields: `format` (the
//! [`CACHE_FORMAT_VERSION`] as `u32`), `source` (the source's bytes as given: any encoding),
//! one `header` field per tracked header (its include path relative to where it was found, then
//! its sha256), `flags` (each of hipjit's own flags as its own length-prefixed item:
//! [`CompileOptions::own_flags`], or nvcc's fixed flags), `std` (the standard flag as given to
//! this compiler, e.g. `-std=c++2b` for C++23 on clang before 17:
//! [`crate::compiler::BackendKind::std_flag`]), `extra-flags` (the caller's extra flags, each
//! its own length-prefixed item, in order), `targets` (each AMDGPU target ID, or the SM architecture on HIP's NVIDIA platform),
//! `code-object-version` (`u32`,
//! 0 = compiler default), `compiler-path`, `compiler-version`, `env` (each allowlisted
//! variable but `PATH` and `HOME`: name and value, or name and an unset marker), `extra` (the
//! caller's signature).
//!
//! `PATH` and `HOME` reach the compiler but stay out of the key: they differ between users
//! sharing a cache root, and the compiler they could select is pinned by its identity (resolved
//! path and `--version` output).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::compiler::{BackendKind, CompileOptions, CompilerIdentity};

/// Bumped whenever the key record or the entry file layout changes.
pub const CACHE_FORMAT_VERSION: u32 = 1;

/// Allowlisted variables left out of the key (see the module documentation).
pub const KEY_EXCLUDED_ENV: &[&str] = &["PATH", "HOME"];

/// A cache key: 32 bytes of sha256, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// The key as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({})", self.to_hex())
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a cache key (64 hex digits)")]
pub struct BadKey(pub String);

impl FromStr for CacheKey {
    type Err = BadKey;
    fn from_str(s: &str) -> Result<Self, BadKey> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(BadKey(s.into()));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16).ok_or_else(|| BadKey(s.into()));
            out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(CacheKey(out))
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A header found through the include directories and hashed into the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackedHeader {
    /// The name as written after `#include` (`"a.h"`, `mylib/b.h`).
    pub include: String,
    /// The file it resolved to.
    pub path: PathBuf,
    /// sha256 of its contents, hex.
    pub sha256: String,
}

/// Everything that goes into a key.
#[derive(Clone, Debug)]
pub struct KeyInputs<'a> {
    /// The source's bytes.
    pub source: &'a [u8],
    /// Tracked headers, from [`track_includes`].
    pub headers: &'a [TrackedHeader],
    /// The compile options (their own flags, standard, extra flags, targets and code object
    /// version are used; checks are not).
    pub options: &'a CompileOptions,
    /// The compiler's identity.
    pub compiler: &'a CompilerIdentity,
    /// The compiler's environment allowlist: every name, with its value when set.
    pub env: &'a [(String, OsString)],
    /// A caller-supplied signature (library version, generator settings...).
    pub extra: &'a [u8],
}

struct Record(Sha256);

impl Record {
    fn bytes(&mut self, b: &[u8]) {
        self.0.update((b.len() as u64).to_le_bytes());
        self.0.update(b);
    }
    fn field(&mut self, name: &str, value: &[u8]) {
        self.bytes(name.as_bytes());
        self.bytes(value);
    }
    fn list<'a>(&mut self, name: &str, items: impl IntoIterator<Item = &'a [u8]>) {
        let mut inner = Vec::new();
        for item in items {
            inner.extend_from_slice(&(item.len() as u64).to_le_bytes());
            inner.extend_from_slice(item);
        }
        self.field(name, &inner);
    }
}

/// The fields of a key record in their final form, for a compiler other than hipcc (nvcc on
/// HIP's NVIDIA platform); [`compute`] fills one from [`KeyInputs`]. The record is the one the
/// module documentation describes, field for field.
#[derive(Clone, Debug)]
pub struct KeyRecord<'a> {
    /// The source's bytes.
    pub source: &'a [u8],
    /// Headers hashed into the key (include name and sha256 are used).
    pub headers: &'a [TrackedHeader],
    /// hipjit's own flags, in order.
    pub flags: &'a [String],
    /// The standard flag as this compiler is given it (`-std=c++17`, `-std=c++2b`).
    pub std: &'a str,
    /// The caller's extra flags, in order.
    pub extra_flags: &'a [String],
    /// The targets: AMDGPU target IDs (`gfx90a`), or an SM architecture (`sm_90`).
    pub targets: &'a [String],
    /// The code object version, 0 for the compiler's default (or none applies).
    pub code_object_version: u32,
    /// The compiler's identity (resolved path and `--version` output).
    pub compiler: &'a CompilerIdentity,
    /// The environment variables hashed into the key, in order: name, and value when set.
    pub env: &'a [(&'a str, Option<&'a OsStr>)],
    /// A caller-supplied signature.
    pub extra: &'a [u8],
}

/// Computes the key (see the module documentation for the record).
pub fn compute(inputs: &KeyInputs<'_>) -> CacheKey {
    let flags = inputs.options.own_flags();
    let std = BackendKind::Hipcc.std_flag(inputs.options.std, inputs.compiler);
    let targets: Vec<String> = inputs
        .options
        .targets
        .iter()
        .map(|t| t.to_string())
        .collect();
    let env: Vec<(&str, Option<&OsStr>)> = crate::compiler::ENV_ALLOWLIST
        .iter()
        .filter(|n| !KEY_EXCLUDED_ENV.contains(n))
        .map(|name| {
            let value = inputs
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_os_str());
            (*name, value)
        })
        .collect();
    compute_record(&KeyRecord {
        source: inputs.source,
        headers: inputs.headers,
        flags: &flags,
        std: &std,
        extra_flags: &inputs.options.extra_flags,
        targets: &targets,
        code_object_version: inputs.options.code_object_version.unwrap_or(0),
        compiler: inputs.compiler,
        env: &env,
        extra: inputs.extra,
    })
}

/// Computes the key of a record given field by field (see the module documentation).
pub fn compute_record(record: &KeyRecord<'_>) -> CacheKey {
    let mut r = Record(Sha256::new());
    r.field("format", &CACHE_FORMAT_VERSION.to_le_bytes());
    r.field("source", record.source);
    for h in record.headers {
        let mut v = Vec::new();
        v.extend_from_slice(&(h.include.len() as u64).to_le_bytes());
        v.extend_from_slice(h.include.as_bytes());
        v.extend_from_slice(h.sha256.as_bytes());
        r.field("header", &v);
    }
    r.list("flags", record.flags.iter().map(|f| f.as_bytes()));
    r.field("std", record.std.as_bytes());
    r.list(
        "extra-flags",
        record.extra_flags.iter().map(|f| f.as_bytes()),
    );
    r.list("targets", record.targets.iter().map(|t| t.as_bytes()));
    r.field(
        "code-object-version",
        &record.code_object_version.to_le_bytes(),
    );
    r.field("compiler-path", record.compiler.path.as_os_str().as_bytes());
    r.field("compiler-version", record.compiler.version.as_bytes());
    let mut env = Vec::new();
    for (name, value) in record.env {
        env.extend_from_slice(&(name.len() as u64).to_le_bytes());
        env.extend_from_slice(name.as_bytes());
        match value {
            Some(v) => {
                env.push(1);
                env.extend_from_slice(&(v.len() as u64).to_le_bytes());
                env.extend_from_slice(v.as_bytes());
            }
            None => env.push(0),
        }
    }
    r.field("env", &env);
    r.field("extra", record.extra);
    CacheKey(r.0.finalize().into())
}

/// Finds the headers `source` includes that live in `include_dirs` or `tracked_dirs`, and
/// the headers they include, recursively; each file is read and hashed once, so a header
/// reached twice, and cycles between guarded headers, are fine.
///
/// `#include "x"` is looked up next to the including header first (not for the source, which
/// has no directory), then like `#include <x>` in `include_dirs` then `tracked_dirs`. Headers
/// found nowhere there (the compiler's own, the system's) are not tracked: the compiler's
/// identity covers them. Includes through macros (`#include FOO`) are not followed; every
/// `#include` line is followed whatever conditional it sits in. Unreadable headers are skipped
/// (the compiler will report them). The source and headers are bytes in any encoding; their
/// `#include` lines are read from a lossy UTF-8 decoding (an include name is ASCII in practice).
pub fn track_includes(
    source: impl AsRef<[u8]>,
    include_dirs: &[PathBuf],
    tracked_dirs: &[PathBuf],
) -> Vec<TrackedHeader> {
    let mut out = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut hashed: HashMap<PathBuf, String> = HashMap::new();
    let mut work: Vec<(Option<PathBuf>, String)> = Vec::new();
    let roots: Vec<&PathBuf> = include_dirs.iter().chain(tracked_dirs).collect();
    for inc in scan_includes(&String::from_utf8_lossy(source.as_ref())) {
        work.push((None, inc.1));
    }
    work.reverse();
    while let Some((from_dir, name)) = work.pop() {
        let found = from_dir
            .iter()
            .map(|d| d.join(&name))
            .chain(roots.iter().map(|d| d.join(&name)))
            .find(|p| p.is_file());
        let Some(path) = found else { continue };
        let canon = std::fs::canonicalize(&path).unwrap_or(path.clone());
        if !seen.insert(canon.clone()) {
            continue;
        }
        let Ok(text) = std::fs::read(&canon) else {
            continue;
        };
        let digest = hashed
            .entry(canon.clone())
            .or_insert_with(|| hex(&sha256(&text)))
            .clone();
        out.push(TrackedHeader {
            include: name,
            path,
            sha256: digest,
        });
        let text = String::from_utf8_lossy(&text);
        let dir = canon.parent().map(Path::to_path_buf);
        let mut nested: Vec<(Option<PathBuf>, String)> = scan_includes(&text)
            .into_iter()
            .map(|(quoted, n)| (if quoted { dir.clone() } else { None }, n))
            .collect();
        nested.reverse();
        work.extend(nested);
    }
    out
}

/// The `#include "x"` (true) and `#include <x>` (false) names in `text`, in order.
pub fn scan_includes(text: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('#') else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let (close, quoted) = match rest.chars().next() {
            Some('"') => ('"', true),
            Some('<') => ('>', false),
            _ => continue,
        };
        if let Some(end) = rest[1..].find(close) {
            out.push((quoted, rest[1..1 + end].to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_round_trips_through_hex() {
        let k = CacheKey([0xab; 32]);
        assert_eq!(k.to_hex().parse::<CacheKey>().unwrap(), k);
        assert!("xyz".parse::<CacheKey>().is_err());
    }

    #[test]
    fn includes_are_scanned_with_both_forms() {
        let found =
            scan_includes("#include <hip/hip_runtime.h>\n  #  include \"a.h\"\n#define X\n");
        assert_eq!(
            found,
            [
                (false, "hip/hip_runtime.h".to_string()),
                (true, "a.h".to_string())
            ]
        );
    }

    #[test]
    fn guarded_cycle_and_diamond_track_each_header_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("a.h"),
            "#pragma once\n#include \"b.h\"\n#include \"c.h\"\n",
        )
        .unwrap();
        std::fs::write(
            d.join("b.h"),
            "#pragma once\n#include \"a.h\"\n#include \"c.h\"\n",
        )
        .unwrap();
        std::fs::write(d.join("c.h"), "#pragma once\nint c;\n").unwrap();
        let tracked = track_includes(
            b"#include <a.h>\n#include <hip/hip_runtime.h>\n",
            &[d.to_path_buf()],
            &[],
        );
        let names: Vec<&str> = tracked.iter().map(|h| h.include.as_str()).collect();
        assert_eq!(names, ["a.h", "b.h", "c.h"]);
    }
}
