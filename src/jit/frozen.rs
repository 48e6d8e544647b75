//! The frozen tier: requests served from a frozen bundle ([`crate::cache::frozen`]) keyed
//! without the local compiler, so that a machine with a HIP runtime and no compiler (a
//! crate's CI runner, a service's hosts) loads the kernels built ahead of time; and strict
//! serving ([`super::JitOptions::strict`]): a miss that would start a compiler is an error
//! naming the request.
//!
//! The frozen tier is the first a miss of the in-process cache walks: it needs no compiler,
//! so it is looked up before one is searched for. Where a compiler is present its identity
//! must be the one recorded (a mismatch is a miss, and the walk goes on to the disk, the
//! remote tier and the compiler), so a frozen entry never serves code another compiler
//! would not have made.

use std::sync::Arc;

use super::compiled::{CompiledInner, CompilerUsed};
use super::entry::{inner_from_entry, output_artefact, read_artefacts};
use super::Jit;
use crate::cache::frozen::{FrozenBundle, FrozenEntry, Refusal, RequestFields};
use crate::compiler::{CompileOptions, CompilerKind};

/// The code-object versions to try for `o`, most preferred first: the one asked for; else,
/// where the runtime's accepted versions are known, each of them, highest first (what
/// `Jit::effective_options` picks is the highest the compiler also supports), then the
/// compiler's default (0).
fn versions(o: &CompileOptions, runtime_versions: Option<&[u32]>) -> Vec<Option<u32>> {
    if o.code_object_version.is_some() || !o.sm_targets.is_empty() {
        return vec![o.code_object_version];
    }
    let mut out: Vec<Option<u32>> = Vec::new();
    if let Some(accepted) = runtime_versions {
        let mut a = accepted.to_vec();
        a.sort_unstable_by(|x, y| y.cmp(x));
        out.extend(a.into_iter().map(Some));
    }
    out.push(None);
    out
}

/// A request in words, for errors: its source's file name, targets, size, sha256 and first
/// line.
pub(crate) fn describe(source: &[u8], o: &CompileOptions) -> String {
    let first = String::from_utf8_lossy(source)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(72).collect::<String>())
        .unwrap_or_default();
    format!(
        "{} for {} ({} bytes, sha256 {}, first line {first:?})",
        o.source_name.as_deref().unwrap_or("kernel.hip"),
        o.target_names().join(","),
        source.len(),
        &crate::digest::hex(&crate::digest::sha256(source))[..12],
    )
}

impl Jit {
    /// The frozen tier's answer for `source` and `options`: the result, or why the bundles
    /// (if any) did not serve it (`None`: no bundle).
    pub(super) fn frozen_lookup(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Result<Arc<CompiledInner>, Option<Refusal>> {
        let bundle = self.frozen.as_deref().ok_or(None)?;
        let choice = self.compilers.choice().as_str();
        let mut refusal = None;
        for cov in versions(options, self.runtime_versions.as_deref()) {
            let mut o = options.clone();
            o.code_object_version = cov;
            let fields = RequestFields::new(source, &o, choice, &self.extra);
            match bundle.lookup(&fields, &o.include_dirs) {
                Ok(entry) => match self.frozen_hit(bundle, entry, source, &o, runtime) {
                    Ok(inner) => return Ok(inner),
                    Err(r) => return Err(Some(r)),
                },
                Err(r @ Refusal::NotFrozen { .. }) => {
                    refusal.get_or_insert(r);
                }
                Err(r) => return Err(Some(r)),
            }
        }
        Err(refusal)
    }

    /// `entry` served for `o`: where a compiler is present, checked against it; then its
    /// disk-cache entry verified and read for `o`'s targets.
    fn frozen_hit(
        &self,
        bundle: &FrozenBundle,
        entry: &FrozenEntry,
        source: &[u8],
        o: &CompileOptions,
        runtime: Option<&std::path::Path>,
    ) -> Result<Arc<CompiledInner>, Refusal> {
        let used = match self.compilers.choose(source, o, runtime) {
            Ok(chosen) => {
                entry.check_compiler(chosen.backend.identity())?;
                let mut used = chosen.used();
                used.reason = format!("{} (frozen in {})", used.reason, bundle.origin());
                used
            }
            // No compiler here: the recorded one made it.
            Err(_) => CompilerUsed {
                kind: CompilerKind::ALL
                    .iter()
                    .copied()
                    .find(|k| k.as_str() == entry.compiler.kind)
                    .unwrap_or(CompilerKind::Hipcc),
                path: bundle.origin().into(),
                version: entry.compiler.version.lines().next().unwrap_or("").into(),
                reason: format!(
                    "frozen in {} (no compiler here: {})",
                    bundle.origin(),
                    "the recorded compiler's result is served"
                ),
            },
        };
        let disk_entry = entry.open_entry(bundle.origin())?;
        let damaged = |reason: String| Refusal::Damaged {
            key: entry.entry_key.clone(),
            reason,
        };
        let name = output_artefact(o);
        let bytes = disk_entry
            .artefact(name)
            .ok_or_else(|| damaged(format!("it has no {name} artefact")))?;
        let artefacts =
            read_artefacts(&disk_entry.key, bytes, o).map_err(|e| damaged(e.to_string()))?;
        let mut inner =
            inner_from_entry(disk_entry.key, artefacts, &disk_entry, Vec::new(), used, o);
        inner.entry_path = None;
        Ok(Arc::new(inner))
    }

    /// The error of a strict `Jit` ([`super::JitOptions::strict`]) for a miss that would
    /// start a compiler.
    pub(super) fn strict_miss(
        &self,
        source: &[u8],
        options: &CompileOptions,
        refusal: Option<&Refusal>,
        why: String,
    ) -> super::JitError {
        let frozen = match (refusal, &self.frozen) {
            (Some(r), Some(b)) => format!("; frozen bundle {}: {r}", b.origin()),
            (None, Some(b)) => format!("; frozen bundle {}: not consulted", b.origin()),
            (_, None) => "; no frozen bundle".to_string(),
        };
        super::JitError::Strict {
            request: describe(source, options),
            reason: format!("{why}{frozen}"),
        }
    }
}
