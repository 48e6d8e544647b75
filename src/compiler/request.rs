//! The request record: everything known before a compiler runs that decides its output (the
//! source, the flags, the standard, the targets, the compiler's identity and environment,
//! hipjit's own headers, the caller's signature). Each backend fills one ([`KeyRecord`]) and
//! hands it to a [`FromKeyRecord`]; the cache hashes it into the direct key and names its
//! fields for `hipjit cache explain` (`cache::key`, whose module documentation gives the
//! record's encoding field by field). The compiler never names the cache
//! (`docs/architecture.md`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::compiler::{CompileOptions, CompilerIdentity, CompilerKind};

/// The path variables keyed by what they select when they name a directory at or below the
/// compiler's installation root (see `cache::key`); the others, and these
/// outside the root, by their text.
pub const PATH_KEYED_ENV: &[&str] = super::shell_env::PATH_VARIABLES;

/// Allowlisted variables left out of the key (`cache::key`).
pub const KEY_EXCLUDED_ENV: &[&str] = &["PATH", "HOME"];

/// A file hashed into a key, as recorded in an entry's metadata: the nvcc prelude's headers,
/// or a file of the manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackedHeader {
    /// Its name relative to where it was found (`sub/a.h`), or its absolute path (text, lossy
    /// when not UTF-8: the key itself uses the bytes).
    pub include: String,
    /// Where it was read.
    pub path: PathBuf,
    /// sha256 of its contents, hex.
    pub sha256: String,
}

/// Everything that goes into the direct key of an AMD compile.
#[derive(Clone, Debug)]
pub struct KeyInputs<'a> {
    /// The source bytes.
    pub source: &'a [u8],
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

/// The fields of a direct-key record in their final form; [`crate::cache::key::compute`] fills one from
/// [`KeyInputs`], nvcc's key ([`crate::compiler::nvcc::Nvcc::key`]) fills its own. The record
/// is the one the module documentation describes, field for field.
#[derive(Clone, Debug)]
pub struct KeyRecord<'a> {
    /// The source bytes.
    pub source: &'a [u8],
    /// The file name the compiler is given the source under
    /// ([`CompileOptions::source_file_name`]; nvcc's low-level compile: `kernel.cu`): the code
    /// holds it wherever the source says `__FILE__` (`assert` does), and line tables name it.
    pub source_name: &'a str,
    /// hipjit's own flags, in order, include directories by index ([`key_flags`]).
    pub flags: &'a [String],
    /// The standard flag as this compiler is given it (`-std=c++17`, `-std=c++2b`).
    pub std: &'a str,
    /// The caller's extra flags, in order.
    pub extra_flags: &'a [String],
    /// The targets: AMDGPU target IDs (`gfx90a`), or an SM architecture (`sm_90`).
    pub targets: &'a [String],
    /// The code object version, 0 for the compiler's default (or none applies).
    pub code_object_version: u32,
    /// The compiler's identity (kind, version text, fingerprint are used).
    pub compiler: &'a CompilerIdentity,
    /// The environment variables hashed into the key, in order: name, and value when set.
    pub env: &'a [(&'a str, Option<&'a OsStr>)],
    /// hipjit's own headers the compile sees (name and sha256 are used).
    pub builtin_headers: &'a [TrackedHeader],
    /// The caller's in-memory headers ([`CompileOptions::headers`]): name and contents
    /// (keyed by name and sha256).
    pub headers: &'a [(String, String)],
    /// A caller-supplied signature.
    pub extra: &'a [u8],
}

/// hipjit's own flags of `options` ([`CompileOptions::own_flags`]) as hashed into the key:
/// each `-I <dir>` of [`CompileOptions::include_dirs`] becomes `-I include/<index>` (the name
/// it is staged under), every other flag is kept.
pub fn key_flags(options: &CompileOptions) -> Vec<String> {
    let mut out = Vec::new();
    let mut flags = options.own_flags().into_iter();
    let mut index = 0;
    let staged = options.include_dirs.len();
    while let Some(f) = flags.next() {
        if f == "-I" && index < staged {
            let _ = flags.next();
            out.push("-I".into());
            out.push(format!("include/{index}"));
            index += 1;
        } else {
            out.push(f);
        }
    }
    out
}

impl KeyInputs<'_> {
    /// The record of an AMD compile by hipcc filled from these inputs, handed to `K` (the
    /// direct key or its fields).
    pub fn record<K: FromKeyRecord>(&self) -> K {
        let flags = key_flags(self.options);
        let std = CompilerKind::Hipcc.std_flag(self.options.std, self.compiler);
        let targets: Vec<String> = self.options.targets.iter().map(|t| t.to_string()).collect();
        let values: Vec<(&str, Option<OsString>)> = super::ENV_ALLOWLIST
            .iter()
            .filter(|n| !KEY_EXCLUDED_ENV.contains(n))
            .map(|name| {
                let value = self
                    .env
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| key_env_value(name, v, &self.compiler.root));
                (*name, value)
            })
            .collect();
        let env: Vec<(&str, Option<&OsStr>)> =
            values.iter().map(|(n, v)| (*n, v.as_deref())).collect();
        keyed_options(self.options);
        K::from_record(&KeyRecord {
            source: self.source,
            source_name: self.options.source_file_name(),
            flags: &flags,
            std: &std,
            extra_flags: &self.options.extra_flags,
            targets: &targets,
            code_object_version: self.options.code_object_version.unwrap_or(0),
            compiler: self.compiler,
            env: &env,
            builtin_headers: &[],
            headers: &self.options.headers,
            extra: self.extra,
        })
    }
}

/// Every field of `options`, named with where the direct key holds it (the four compilers'
/// records alike: [`KeyInputs::record`], the in-process compilers' and nvcc's). A field added
/// to [`CompileOptions`] does not compile here until it is decided how the key covers it: a
/// field left out would let the cache serve code compiled with another value of it (the
/// source's file name once was).
#[inline(always)]
pub(crate) fn keyed_options(options: &CompileOptions) {
    let CompileOptions {
        targets: _,              // `targets`
        sm_targets: _,           // `targets`
        std: _,                  // `std`
        opt_level: _,            // `flags` (own_flags)
        fast_math: _,            // `flags`
        defines: _,              // `flags`
        headers: _,              // `headers`, by name and content
        include_dirs: _,         // `flags`, by index; their files by the header manifest
        tracked_include_dirs: _, // not on the include path: their files, where read, by the manifest
        line_info: _,            // `flags`
        verbose: _,              // `flags` (-v; no effect on the code)
        extra_flags: _,          // `extra-flags`
        code_object_version: _,  // `code-object-version`
        source_name: _,          // `source-name`
        dump_llvm_ir: _,         // `flags`
        dump_isa: _,             // `flags`
        checks: _,               // not keyed: checks of the result's metadata, run on every load
    } = options;
}

/// The value of variable `name` as hashed into the key: for a path variable of
/// [`PATH_KEYED_ENV`] naming `root` or a directory below it, `\0installation/` and its path
/// below `root` (what it selects is keyed by content); else `value` itself.
pub fn key_env_value(name: &str, value: &OsStr, root: &std::path::Path) -> OsString {
    let path = std::path::Path::new(value);
    if PATH_KEYED_ENV.contains(&name) && !root.as_os_str().is_empty() && path.is_absolute() {
        if let Ok(rel) = path.strip_prefix(root) {
            let mut v = b"\0installation/".to_vec();
            v.extend_from_slice(rel.as_os_str().as_bytes());
            return OsString::from_vec(v);
        }
    }
    value.to_os_string()
}

/// What a request record is handed to: the cache's direct key
/// ([`crate::cache::key::CacheKey`]) or the fields it hashes ([`crate::cache::key::KeyFields`]),
/// from one record, so that the two never disagree.
pub trait FromKeyRecord {
    /// Made from a record.
    fn from_record(record: &KeyRecord<'_>) -> Self;
}
