//! The cache keys: what decides a compile's output, and how it is hashed. This is the one
//! place the design is written down (the README's "Cache key" section mirrors it).
//!
//! # Two keys, in the manner of ccache's direct mode
//! * The **direct key** ([`compute`], [`compute_record`]) covers everything known before the
//!   compiler runs: the source, the options, the compiler's identity, its environment and the
//!   caller's signature. It names the *manifest* (`manifest`) of the compiles
//!   of that source with those options: the list of every file the compiler read last time
//!   (from its own dependency output, never from a scanner), each with its stat fields and
//!   sha256, and the directories searched for them, each with the names looked up in it (the
//!   names rule of `record`).
//! * The **result key** ([`result_key`]) is the direct key plus, for each file of the
//!   manifest, its name and content sha256, and for each directory, its name and the sha256 of
//!   which of its looked-up names exist. It names the entry holding the code objects.
//!
//! A lookup reads the manifest, checks each file by stat first (size, mtime, ctime, inode,
//! device, and the mount's identity: the stat-trust rule of `stat`, the README's
//! "What a hit trusts") and hashes only a file whose stat does not prove it unchanged, looks
//! the names up again only in such a directory, and looks the result key of what it found up.
//! A compile publishes its result under the result key of the files it read and replaces the
//! manifest. Both keys are sha256 over a record; a hit therefore needs the same source,
//! options, compiler, environment, signature, and byte-identical files read, with the same
//! looked-up names present in every directory searched.
//!
//! # The direct-key record
//! All integers little-endian; each field is the `u64` length of its name, the name, the `u64`
//! length of its value, the value; a list value is its items, each `u64`-length-prefixed.
//! Fields, in order:
//! * `format`: [`CACHE_FORMAT_VERSION`] as `u32`;
//! * `source`: the source's bytes as given (any encoding);
//! * `source-name`: the file name the compiler is given the source under
//!   ([`crate::compiler::CompileOptions::source_name`], `kernel.hip` by default): `__FILE__`
//!   and line tables hold it;
//! * `flags`: hipjit's own flags, in order ([`crate::compiler::CompileOptions::own_flags`], or nvcc's fixed
//!   flags), each `-I <dir>` of [`crate::compiler::CompileOptions::include_dirs`] written `-I`
//!   and `include/<index>`: the directory's path is not in the key (its files are, through the
//!   manifest, relative to it), so a moved tree still hits, and a path is never passed through
//!   lossy text;
//! * `std`: the standard flag as given to this compiler (`-std=c++2b` for C++23 on clang
//!   before 17: [`crate::compiler::CompilerKind::std_flag`]);
//! * `extra-flags`: the caller's extra flags, in order;
//! * `targets`: each AMDGPU target ID, or the SM architecture on HIP's NVIDIA platform;
//! * `code-object-version`: `u32`, 0 = the compiler's default;
//! * `compiler-kind`: `hipcc`, `nvcc`, `hiprtc` or `nvrtc` ([`crate::compiler::CompilerKind`]);
//! * `compiler-version`: the `--version` text without the lines naming the installation
//!   directory ([`crate::compiler::CompilerIdentity::key_version`]);
//! * `compiler-fingerprint`: sha256 over the closed list of the compiler's files, each named
//!   below the installation root ([`crate::compiler::identity`]); neither the compiler's path
//!   nor its installation prefix is in the key;
//! * `host-compiler` (nvcc only; absent from the other compilers' records): nvcc's host
//!   compiler's file name and fingerprint (`host_compiler`), its content
//!   and predefined macros; not its path;
//! * `env`: each variable that reaches the compiler but `PATH` and `HOME`: its name, then
//!   `1` and the value's bytes, or `0` when unset. A path variable ([`PATH_KEYED_ENV`]:
//!   `HIP_PATH`, `ROCM_PATH`, `HIP_CLANG_PATH`, `HIP_DEVICE_LIB_PATH`...) naming a directory
//!   at or below the compiler's installation root ([`crate::compiler::CompilerIdentity::root`],
//!   which `HIP_PATH`, else `ROCM_PATH`, selects) is keyed by what it selects, not by its
//!   text: its value is the bytes `\0installation/` and its path below the root (a value read
//!   from the environment never holds a NUL byte, so the two forms cannot meet). What it
//!   selects is keyed by content: the programs (clang, lld, the device libraries, the driver's
//!   version files) by the compiler fingerprint, the headers by the header manifest, named
//!   below the root. A value outside the root is keyed by its text;
//! * `builtin-headers`: headers of hipjit's own that the compile sees (the nvcc prelude),
//!   each name and sha256;
//! * `headers` (only when [`crate::compiler::CompileOptions::headers`] is not empty, so the
//!   keys of other compiles are unchanged): each in-memory header's name and the sha256 of
//!   its contents, in order;
//! * `extra`: the caller's signature.
//!
//! `PATH` and `HOME` reach the compiler but stay out of the key: they differ between users
//! sharing a cache root, and the compilers they could select (nvcc's host compiler included)
//! are pinned by the identity.
//!
//! # The result-key record
//! `format`, `direct` (the direct key's 32 bytes), then one `file` field per manifest file
//! (`u32` base: 0 for an absolute path, `i + 1` for `-I` directory `i`, `u32::MAX` for the
//! compiler's installation root ([`crate::cache::manifest::INSTALLATION`]); the name's bytes;
//! the content sha256) and one `dir` field per listed directory (base, name bytes, then `1`
//! and the listing's sha256, or `0` when it does not exist), in manifest order.
//!
//! # What is and is not re-checked
//! * The compiler's programs, libraries and device libraries are covered by the compiler
//!   fingerprint ([`crate::compiler::identity`]); the headers of its installation (the HIP
//!   headers, clang's resource headers, the CUDA toolkit's headers) are in the manifest like
//!   every other header read, named below the installation root.
//! * In-process (memory) hits do not re-check headers: a header edited while a process runs
//!   is seen after [`crate::jit::Jit::clear_memory`] or in a new process.
//! * A compile whose files changed while it ran is not published (see
//!   `manifest`): a file read (or directory searched) with a modification or
//!   change time at or after the compile's start on the filesystem's clock, or a file whose
//!   content differs from what the lookup hashed.

use std::fmt;
use std::os::unix::ffi::OsStrExt;

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::cache::manifest::Manifest;
use crate::digest::Record;

/// Bumped whenever a key record or the entry file layout changes. 2: direct and result keys,
/// header manifests, compiler fingerprints. 3: installation headers named below the
/// installation root in manifests, path variables keyed by what they select, fingerprints
/// named below the root. 4: a checksum over each entry's header and metadata. 5: names and
/// digests in manifests and listings as MessagePack `bin` (`byte_strings`), and each
/// entry's metadata as MessagePack arrays (fields by position) rather than maps. 6: nvcc's
/// host compiler in its keys (`host-compiler`), the compiler's own include search list in
/// header manifests' directory records. 7: a header manifest's directories keyed by the names
/// looked up in them, not their whole listings (`record`). 8: the source's file name
/// (`source-name`), which `__FILE__` and line tables hold: a source compiled under one name
/// was served for another.
pub const CACHE_FORMAT_VERSION: u32 = 8;

/// A cache key: 32 bytes of sha256, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub [u8; 32]);

/// The hasher of maps keyed by [`CacheKey`] ([`KeyMap`]): a key is sha256 output already, so
/// its first eight bytes are the hash, not hashed again with SipHash. Only a lookup's speed
/// depends on it: every bucket is confirmed by comparing whole keys.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        match bytes.first_chunk::<8>() {
            Some(first) => self.0 ^= u64::from_le_bytes(*first),
            // Not a key's bytes (the length written before them): mixed in.
            None => {
                for &b in bytes {
                    self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                }
            }
        }
    }
    fn write_usize(&mut self, n: usize) {
        // The slice length written before a key's bytes: the same (32) for every key.
        self.0 ^= n as u64;
    }
}

/// A map keyed by [`CacheKey`] with [`KeyHasher`].
pub(crate) type KeyMap<V> =
    std::collections::HashMap<CacheKey, V, std::hash::BuildHasherDefault<KeyHasher>>;

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

pub use crate::digest::{hex, sha256};

fn push_item(v: &mut Vec<u8>, item: &[u8]) {
    v.extend_from_slice(&(item.len() as u64).to_le_bytes());
    v.extend_from_slice(item);
}

pub use crate::compiler::request::{
    key_env_value, key_flags, FromKeyRecord, KeyInputs, KeyRecord, TrackedHeader, KEY_EXCLUDED_ENV,
    PATH_KEYED_ENV,
};

/// Computes the direct key of an AMD compile (see the module documentation).
pub fn compute(inputs: &KeyInputs<'_>) -> CacheKey {
    inputs.record()
}

/// [`compute`] as any [`FromKeyRecord`]: the key, or its fields ([`KeyFields`]).
pub fn compute_as<K: FromKeyRecord>(inputs: &KeyInputs<'_>) -> K {
    inputs.record()
}

/// Calls `field` with each field of the direct-key record (name, encoded value), in order:
/// the one encoding both [`compute_record`] and [`record_fields`] use.
fn encode_record(record: &KeyRecord<'_>, field: &mut dyn FnMut(&str, &[u8])) {
    let list = |items: &mut dyn Iterator<Item = &[u8]>| {
        let mut inner = Vec::new();
        for item in items {
            push_item(&mut inner, item);
        }
        inner
    };
    field("format", &CACHE_FORMAT_VERSION.to_le_bytes());
    field("source", record.source);
    field("source-name", record.source_name.as_bytes());
    field(
        "flags",
        &list(&mut record.flags.iter().map(|f| f.as_bytes())),
    );
    field("std", record.std.as_bytes());
    field(
        "extra-flags",
        &list(&mut record.extra_flags.iter().map(|f| f.as_bytes())),
    );
    field(
        "targets",
        &list(&mut record.targets.iter().map(|t| t.as_bytes())),
    );
    field(
        "code-object-version",
        &record.code_object_version.to_le_bytes(),
    );
    field("compiler-kind", record.compiler.kind.as_str().as_bytes());
    field("compiler-version", record.compiler.key_version().as_bytes());
    field(
        "compiler-fingerprint",
        record.compiler.fingerprint.as_bytes(),
    );
    // nvcc's alone: the other compilers' keys are as they were before it was keyed.
    if let Some(host) = &record.compiler.host_compiler {
        let mut v = Vec::new();
        push_item(&mut v, host.name().as_bytes());
        push_item(&mut v, host.fingerprint.as_bytes());
        field("host-compiler", &v);
    }
    let mut env = Vec::new();
    for (name, value) in record.env {
        push_item(&mut env, name.as_bytes());
        match value {
            Some(v) => {
                env.push(1);
                push_item(&mut env, v.as_bytes());
            }
            None => env.push(0),
        }
    }
    field("env", &env);
    let mut builtin = Vec::new();
    for h in record.builtin_headers {
        push_item(&mut builtin, h.include.as_bytes());
        push_item(&mut builtin, h.sha256.as_bytes());
    }
    field("builtin-headers", &builtin);
    // Only with in-memory headers: the keys of compiles without them are as they were.
    if !record.headers.is_empty() {
        let mut headers = Vec::new();
        for (name, contents) in record.headers {
            push_item(&mut headers, name.as_bytes());
            push_item(&mut headers, hex(&sha256(contents.as_bytes())).as_bytes());
        }
        field("headers", &headers);
    }
    field("extra", record.extra);
}

/// Computes the direct key of a record given field by field (see the module documentation).
pub fn compute_record(record: &KeyRecord<'_>) -> CacheKey {
    let mut r = Record::new();
    encode_record(record, &mut |name, value| r.field(name, value));
    CacheKey(r.finish())
}

/// The fields of a direct-key record, each with the sha256 of its encoded value and, but for
/// the source and the caller's signature (shown by digest), its value as text: what
/// `hipjit cache explain` prints, and what each published entry stores (artefact
/// [`KEY_RECORD_ARTEFACT`]) so that a miss can name the fields that differ.
pub fn record_fields(record: &KeyRecord<'_>) -> KeyFields {
    let mut fields = Vec::new();
    encode_record(record, &mut |name, value| {
        fields.push(key_field(record, name, value))
    });
    KeyFields(fields)
}

/// The direct key of a record and its fields ([`compute_record`] and [`record_fields`]) from
/// one encoding of it.
pub fn key_and_fields(record: &KeyRecord<'_>) -> (CacheKey, KeyFields) {
    let mut r = Record::new();
    let mut fields = Vec::new();
    encode_record(record, &mut |name, value| {
        r.field(name, value);
        fields.push(key_field(record, name, value));
    });
    (CacheKey(r.finish()), KeyFields(fields))
}

/// The field `name` of `record`, encoded as `value`: its digest and its value as text.
fn key_field(record: &KeyRecord<'_>, name: &str, value: &[u8]) -> KeyField {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let shown: Option<Vec<String>> = match name {
        "format" => Some(vec![CACHE_FORMAT_VERSION.to_string()]),
        "source" | "extra" => None,
        "flags" => Some(
            record
                .flags
                .iter()
                .map(|f| match f.strip_prefix("-I\0installation/") {
                    // A toolkit directory keyed by its place below the installation root.
                    Some(rel) => format!("-I<installation root>/{rel}"),
                    None => f.clone(),
                })
                .collect(),
        ),
        "source-name" => Some(vec![record.source_name.to_string()]),
        "std" => Some(vec![record.std.to_string()]),
        "extra-flags" => Some(record.extra_flags.to_vec()),
        "targets" => Some(record.targets.to_vec()),
        "code-object-version" => Some(vec![record.code_object_version.to_string()]),
        "compiler-kind" => Some(vec![record.compiler.kind.as_str().to_string()]),
        "compiler-version" => Some(
            record
                .compiler
                .key_version()
                .lines()
                .map(str::to_string)
                .collect(),
        ),
        "compiler-fingerprint" => Some(vec![record.compiler.fingerprint.clone()]),
        "host-compiler" => record
            .compiler
            .host_compiler
            .as_ref()
            .map(|h| vec![format!("{} {}", h.name(), h.fingerprint), h.version.clone()]),
        "env" => Some(
            record
                .env
                .iter()
                .map(|(n, v)| match v {
                    Some(v) => match v.as_bytes().strip_prefix(b"\0installation/") {
                        // Keyed by what it selects (see the module documentation).
                        Some(rel) => format!("{n}=<installation root>/{}", lossy(rel)),
                        None => format!("{n}={}", lossy(v.as_bytes())),
                    },
                    None => format!("{n} unset"),
                })
                .collect(),
        ),
        "builtin-headers" => Some(
            record
                .builtin_headers
                .iter()
                .map(|h| format!("{} {}", h.include, h.sha256))
                .collect(),
        ),
        "headers" => Some(
            record
                .headers
                .iter()
                .map(|(name, contents)| format!("{name} {}", hex(&sha256(contents.as_bytes()))))
                .collect(),
        ),
        _ => Some(vec![lossy(value)]),
    };
    KeyField {
        name: name.to_string(),
        sha256: hex(&sha256(value)),
        bytes: value.len() as u64,
        value: shown,
    }
}

/// The artefact of a published result entry holding the fields of its direct-key record
/// ([`KeyFields`], MessagePack). Entries written before it existed lack it.
pub const KEY_RECORD_ARTEFACT: &str = "key-record";

/// One field of a direct-key record ([`record_fields`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyField {
    /// The field's name in the record (`source`, `flags`, `std`...).
    pub name: String,
    /// sha256 of the field's encoded value, hex: two records with equal digests in every
    /// field have the same key.
    pub sha256: String,
    /// The encoded value's length in bytes.
    pub bytes: u64,
    /// The value as text, one string per item of a list field (flags, targets, env as
    /// `NAME=value` or `NAME unset`, compiler version lines...); `None` for the source and
    /// the caller's signature, shown by digest.
    pub value: Option<Vec<String>>,
}

/// The fields of a direct-key record, in record order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyFields(pub Vec<KeyField>);

impl KeyFields {
    /// The field called `name`.
    pub fn get(&self, name: &str) -> Option<&KeyField> {
        self.0.iter().find(|f| f.name == name)
    }

    /// Encodes them (MessagePack), as stored in [`KEY_RECORD_ARTEFACT`].
    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).unwrap_or_default()
    }

    /// Decodes a [`KEY_RECORD_ARTEFACT`]; `None` when it does not decode.
    pub fn from_bytes(bytes: &[u8]) -> Option<KeyFields> {
        rmp_serde::from_slice(bytes).ok()
    }
}

impl FromKeyRecord for CacheKey {
    fn from_record(record: &KeyRecord<'_>) -> Self {
        compute_record(record)
    }
}

impl FromKeyRecord for KeyFields {
    fn from_record(record: &KeyRecord<'_>) -> Self {
        record_fields(record)
    }
}

impl FromKeyRecord for (CacheKey, KeyFields) {
    fn from_record(record: &KeyRecord<'_>) -> Self {
        key_and_fields(record)
    }
}

/// The result key of `direct` with the files and directories of `manifest` as they are now
/// (their hashes; see the module documentation).
pub fn result_key(direct: &CacheKey, manifest: &Manifest) -> CacheKey {
    let mut r = Record::new();
    r.field("format", &CACHE_FORMAT_VERSION.to_le_bytes());
    r.field("direct", &direct.0);
    for f in &manifest.files {
        let mut v = Vec::new();
        v.extend_from_slice(&f.base().to_le_bytes());
        push_item(&mut v, &f.name);
        v.extend_from_slice(&f.sha256);
        r.field("file", &v);
    }
    for d in &manifest.dirs {
        let mut v = Vec::new();
        v.extend_from_slice(&d.base().to_le_bytes());
        push_item(&mut v, &d.name);
        match &d.listing {
            Some(l) => {
                v.push(1);
                v.extend_from_slice(l);
            }
            None => v.push(0),
        }
        r.field("dir", &v);
    }
    CacheKey(r.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::CompilerIdentity;
    use std::path::PathBuf;

    #[test]
    fn the_fields_hash_to_the_key_field_by_field() {
        let compiler = CompilerIdentity {
            kind: crate::compiler::CompilerKind::Hipcc,
            path: PathBuf::from("/usr/bin/hipcc"),
            version: "HIP version: 5.2\nInstalledDir: /usr/bin\n".into(),
            fingerprint: "f".repeat(64),
            covered: Vec::new(),
            root: Default::default(),
            header_dirs: Vec::new(),
            host_compiler: None,
            system_include_dirs: Vec::new(),
        };
        let record = |std: &'static str, source_name: &'static str| {
            let flags = vec!["-DN=1".to_string()];
            let targets = vec!["gfx90a".to_string()];
            let record = KeyRecord {
                source: b"src",
                source_name,
                flags: &flags,
                std,
                extra_flags: &[],
                targets: &targets,
                code_object_version: 0,
                compiler: &compiler,
                env: &[("CPATH", None)],
                builtin_headers: &[],
                headers: &[],
                extra: b"",
            };
            let (fields, key) = (record_fields(&record), compute_record(&record));
            // One encoding gives both, the same.
            assert_eq!(key_and_fields(&record), (key, fields.clone()));
            (fields, key)
        };
        let (a, ka) = record("-std=c++17", "kernel.hip");
        let (b, kb) = record("-std=c++20", "kernel.hip");
        let (c, kc) = record("-std=c++17", "other.hip");
        assert_ne!(ka, kb);
        assert_ne!(ka, kc);
        let names: Vec<&str> = a.0.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "format",
                "source",
                "source-name",
                "flags",
                "std",
                "extra-flags",
                "targets",
                "code-object-version",
                "compiler-kind",
                "compiler-version",
                "compiler-fingerprint",
                "env",
                "builtin-headers",
                "extra"
            ]
        );
        let differ = |other: &KeyFields| -> Vec<String> {
            a.0.iter()
                .zip(&other.0)
                .filter(|(x, y)| x.sha256 != y.sha256)
                .map(|(x, _)| x.name.clone())
                .collect()
        };
        assert_eq!(differ(&b), ["std"]);
        assert_eq!(differ(&c), ["source-name"]);
        assert_eq!(
            c.get("source-name").unwrap().value,
            Some(vec!["other.hip".into()])
        );
        assert_eq!(a.get("source").unwrap().value, None);
        assert_eq!(a.get("source").unwrap().sha256, hex(&sha256(b"src")));
        assert_eq!(
            a.get("env").unwrap().value,
            Some(vec!["CPATH unset".into()])
        );
        assert_eq!(KeyFields::from_bytes(&a.to_bytes()), Some(a));
    }

    #[test]
    fn key_round_trips_through_hex() {
        let k = CacheKey([0xab; 32]);
        assert_eq!(k.to_hex().parse::<CacheKey>().unwrap(), k);
        assert!("xyz".parse::<CacheKey>().is_err());
    }
}
