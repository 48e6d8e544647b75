//! Freezing: compiling requests ahead of time into a frozen bundle
//! ([`crate::cache::frozen`]) that a machine without a compiler serves
//! ([`super::JitOptions::frozen`], `HIPJIT_FROZEN`). From a build script, a test or a tool,
//! by request ([`Freezer::add`]) or from what `HIPJIT_RECORD` saw ([`Freezer::add_records`],
//! `hipjit cache freeze RECORD -o FILE`).

use std::collections::HashMap;
use std::path::Path;

use super::entry::manifest_lookup;
use super::{CacheLocation, Jit, JitError, JitOptions};
use crate::cache::disk::encode_entry;
use crate::cache::frozen::{FrozenBundle, FrozenEntry, RequestFields};
use crate::compiler::selection::CompilerChoice;
use crate::compiler::CompileOptions;

/// Errors of a [`Freezer`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FreezeError {
    /// Opening a `Jit` or compiling a request failed.
    #[error(transparent)]
    Jit(#[from] JitError),
    /// The record file cannot be read.
    #[error("cannot read the record file {path}: {source}")]
    Record {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line of the record file is not a request.
    #[error("{path}:{line}: {reason}")]
    BadRecord {
        /// The file.
        path: std::path::PathBuf,
        /// The line number, from 1.
        line: usize,
        /// Why.
        reason: String,
    },
    /// A compiled request's entry could not be read back from the disk cache (its header
    /// manifest or entry missing: a file the compiler read changed while it ran).
    #[error("{request}: its result was not cached ({reason}); freeze it again")]
    NotCached {
        /// The request: its source's file name, targets, size, sha256 and first line.
        request: String,
        /// What is missing.
        reason: String,
    },
}

/// Compiles requests and collects their results, with the headers each read and the compiler
/// that made it, into a [`FrozenBundle`].
///
/// ```no_run
/// use hipjit::compiler::CompileOptions;
/// use hipjit::jit::{Freezer, JitOptions};
/// use hipjit::target_id::TargetId;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut freezer = Freezer::new(JitOptions::default())?;
/// let options = CompileOptions::for_target(TargetId::parse("gfx90a:sramecc+:xnack-")?);
/// freezer.add("extern \"C\" __global__ void k(float* x) { x[0] = 1; }", &options)?;
/// freezer.finish().write(std::path::Path::new("kernels.hjfz"))?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Freezer {
    options: JitOptions,
    jits: HashMap<(CompilerChoice, Vec<u8>), Jit>,
    default: (CompilerChoice, Vec<u8>),
    bundle: FrozenBundle,
}

impl Freezer {
    /// A freezer compiling with `options` (never strict, never served from a frozen bundle;
    /// with the disk cache `options.cache` names, or a temporary one when it is disabled or
    /// read-only: the header manifests are read back from it).
    ///
    /// Errors: [`FreezeError::Jit`] opening the `Jit`.
    pub fn new(mut options: JitOptions) -> Result<Freezer, FreezeError> {
        options.strict = false;
        options.frozen = Some(Default::default());
        let jit = Jit::new(options.clone())?;
        let jit = match jit.disk_cache() {
            Some(d) if d.is_writable() => jit,
            _ => {
                let dir =
                    std::env::temp_dir().join(format!("hipjit-freeze-{}", std::process::id()));
                options.cache = CacheLocation::Roots(vec![dir]);
                Jit::new(options.clone())?
            }
        };
        let default = (jit.compiler_choice(), options.extra_signature.clone());
        let mut jits = HashMap::new();
        jits.insert(default.clone(), jit);
        Ok(Freezer {
            options,
            jits,
            default,
            bundle: FrozenBundle::new(),
        })
    }

    /// Compiles `source` with `options` (or finds it in the cache) and freezes it.
    ///
    /// Errors: [`FreezeError::Jit`] (the compile), [`FreezeError::NotCached`].
    pub fn add(
        &mut self,
        source: impl AsRef<[u8]>,
        options: &CompileOptions,
    ) -> Result<(), FreezeError> {
        let key = self.default.clone();
        self.add_with(key, source.as_ref(), options)
    }

    /// Freezes every request of the record file at `path` (`HIPJIT_RECORD`), each with its
    /// recorded compiler choice and signature; returns how many.
    ///
    /// Errors: [`FreezeError::Record`], [`FreezeError::BadRecord`] (the first line that is
    /// not a request), and those of [`Freezer::add`].
    pub fn add_records(&mut self, path: &Path) -> Result<usize, FreezeError> {
        let records = super::record::read_records(path).map_err(|source| FreezeError::Record {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(bad) = records.bad.first() {
            return Err(FreezeError::BadRecord {
                path: path.to_path_buf(),
                line: bad.line,
                reason: bad.reason.clone(),
            });
        }
        let n = records.requests.len();
        for (_, r) in records.requests {
            self.add_with((r.compiler, r.extra_signature), &r.source, &r.options)?;
        }
        Ok(n)
    }

    fn add_with(
        &mut self,
        key: (CompilerChoice, Vec<u8>),
        source: &[u8],
        options: &CompileOptions,
    ) -> Result<(), FreezeError> {
        if !self.jits.contains_key(&key) {
            let mut o = self.options.clone();
            o.compiler = Some(key.0);
            o.extra_signature = key.1.clone();
            let jit = Jit::new(o)?;
            self.jits.insert(key.clone(), jit);
        }
        let jit = &self.jits[&key];
        let compiled = jit.compile(source, options)?;
        let not_cached = |reason: &str| FreezeError::NotCached {
            request: super::frozen::describe(source, options),
            reason: reason.into(),
        };
        let (o, chosen) = jit.checked(source, options, None)?;
        let direct: crate::cache::key::CacheKey = chosen.backend.request(source, &o, &jit.extra);
        let disk = jit
            .disk_cache()
            .ok_or_else(|| not_cached("no disk cache"))?;
        let identity = chosen.backend.identity();
        let (manifest, result_key) = manifest_lookup(disk, &direct, &o, &identity.root)
            .ok_or_else(|| not_cached("no header manifest"))?;
        if result_key != compiled.key() {
            return Err(not_cached("a header changed since it was compiled"));
        }
        let entry = disk
            .get(&result_key)
            .entry
            .ok_or_else(|| not_cached("no entry"))?;
        let artefacts: Vec<(&str, &[u8])> = entry
            .meta
            .artefacts
            .iter()
            .filter_map(|a| Some((a.name.as_str(), entry.artefact(&a.name)?)))
            .collect();
        let bytes = encode_entry(&result_key, entry.meta.clone(), &artefacts)
            .map_err(|e| not_cached(&e.to_string()))?;
        let fields = RequestFields::new(source, &o, jit.compiler_choice().as_str(), &jit.extra);
        self.bundle.insert(FrozenEntry::new(
            fields,
            &manifest,
            identity,
            &result_key,
            bytes,
        ));
        Ok(())
    }

    /// The bundle of what was added.
    pub fn finish(self) -> FrozenBundle {
        self.bundle
    }
}
