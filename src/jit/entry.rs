//! The JIT's disk-cache entries (`disk`): the header manifest under the direct
//! key, the result under the result key, and reading a result back as artefacts of the
//! platform the options name (artefact `code-object` for AMDGPU code objects, `cubin` for a
//! cubin).

use std::path::Path;
use std::sync::Arc;

use super::compiled::{Artefact, CompiledInner, CompilerUsed};
use super::JitError;
use crate::cache::disk::{BadEntry, DiskCache, Entry, EntryMeta};
use crate::cache::hit_entry::HitEntry;
use crate::cache::key::{self, CacheKey};
use crate::cache::manifest::{Manifest, MANIFEST_ARTEFACT};
use crate::code_object::cubin::Cubin;
use crate::code_object::CodeObject;
use crate::compiler::diagnostics;
use crate::compiler::CompileOptions;

/// The artefact holding the code object(s) of an AMD compile: a raw ELF for one target, an
/// offload bundle for several.
pub const CODE_OBJECT_ARTEFACT: &str = "code-object";
/// The artefact holding the cubin of an NVIDIA compile.
pub const CUBIN_ARTEFACT: &str = "cubin";
pub(crate) const LLVM_IR: &str = "llvm-ir.bc";
pub(crate) const ISA: &str = "isa.s";

/// The name of the artefact holding the compiler's output for `o`'s platform.
pub(crate) fn output_artefact(o: &CompileOptions) -> &'static str {
    if o.sm_targets.is_empty() {
        CODE_OBJECT_ARTEFACT
    } else {
        CUBIN_ARTEFACT
    }
}

/// The manifest of `direct` in `disk` as the files are now (`installation`: the compiler's
/// installation root), and the result key it gives;
/// `None` when there is none, it does not decode (reported), or one of its files is gone.
pub(crate) fn manifest_lookup(
    disk: &DiskCache,
    direct: &CacheKey,
    o: &CompileOptions,
    installation: &std::path::Path,
) -> Option<(Manifest, CacheKey)> {
    manifest_lookup_stale(disk, direct, o, installation).map(|(m, k, _)| (m, k))
}

/// [`manifest_lookup`], with the manifest entry's metadata when a stat of the manifest
/// differed from the one recorded (the file hashed again, and the result key the same when
/// its bytes are): [`refresh_manifest`] stores the stats as they are now, so that later
/// lookups do not hash it again.
pub(crate) fn manifest_lookup_stale(
    disk: &DiskCache,
    direct: &CacheKey,
    o: &CompileOptions,
    installation: &std::path::Path,
) -> Option<(Manifest, CacheKey, Option<EntryMeta>)> {
    // Read as a hit reads an entry: its metadata (nvcc's and hipcc's list 300 headers) is
    // decoded whole only when the manifest is stored again.
    let entry = disk.get_hit(direct).0?;
    let bytes = entry.artefact(MANIFEST_ARTEFACT)?;
    let stored = match Manifest::from_bytes(bytes) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(path = %entry.path.display(), error = %e, "unusable hipjit header manifest");
            return None;
        }
    };
    let (now, stale) = stored.into_current_checked(&o.include_dirs, installation)?;
    let key = key::result_key(direct, &now);
    if !stale {
        return Some((now, key, None));
    }
    // The metadata to store the refreshed manifest with; an entry that no longer reads whole
    // (replaced meanwhile) is no lookup.
    let meta = disk.peek(direct).entry?.meta;
    Some((now, key, Some(meta)))
}

/// Stores `now`, the manifest of `direct` as a lookup found it (its stats refreshed, its
/// hashes verified), after that lookup's result entry was served, unless it is the stored one
/// ([`publish_manifest`]). Stats stamped within the last two seconds of the wall clock are not
/// trusted ([`Manifest::settled`]: the filesystem's clock lags by at most a tick). A failure
/// only means the next lookup hashes again (logged at debug level).
pub(crate) fn refresh_manifest(
    disk: &DiskCache,
    direct: &CacheKey,
    meta: EntryMeta,
    now: &Manifest,
) {
    let start = std::time::SystemTime::now() - std::time::Duration::from_secs(2);
    let settled = now.clone().settled(start);
    if let Some(w) = publish_manifest(disk, direct, meta, &settled) {
        tracing::debug!(key = %direct, warning = %w, "header manifest not refreshed");
    }
}

/// Stores `manifest` as the entry of `direct` in the written root, replacing the one there.
/// A failure is a warning (returned): the result entry is published, it is only not found by
/// this route.
pub(crate) fn publish_manifest(
    disk: &DiskCache,
    direct: &CacheKey,
    meta: EntryMeta,
    manifest: &Manifest,
) -> Option<String> {
    publish_manifest_gated(disk, direct, meta, manifest, || true)
}

/// [`publish_manifest`], the manifest written and fsynced first, then published only when
/// `gate` says so (`DiskCache::put_gated`): written while its result entry is, published
/// only once that entry is. No warning when the gate is shut (the entry's own failure says
/// why).
pub(crate) fn publish_manifest_gated(
    disk: &DiskCache,
    direct: &CacheKey,
    meta: EntryMeta,
    manifest: &Manifest,
    gate: impl FnOnce() -> bool,
) -> Option<String> {
    let bytes = manifest.to_bytes();
    // A read-only cache is not written.
    let root = disk.roots().first().filter(|r| r.writable)?;
    if let Some(old) = disk.get(direct).entry {
        if old.artefact(MANIFEST_ARTEFACT) == Some(&bytes[..]) {
            return None;
        }
        if old.path.starts_with(&root.path) {
            if let Err(e) = std::fs::remove_file(&old.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    let w = format!(
                        "the header manifest {} cannot be replaced: {e}",
                        old.path.display()
                    );
                    tracing::warn!(key = %direct, "{w}");
                    return Some(w);
                }
            }
        }
    }
    let meta = EntryMeta {
        dependencies: Vec::new(),
        ..meta
    };
    match disk.put_gated(direct, meta, &[(MANIFEST_ARTEFACT, &bytes)], gate) {
        Ok(_) => None,
        Err(e) => {
            let w = format!("the header manifest was not cached: {e}");
            tracing::warn!(key = %direct, "{w}");
            Some(w)
        }
    }
}

/// What a hit reads of an entry: a full [`Entry`] (a remote hit, which writes it to the disk
/// cache too) or a [`HitEntry`] (a disk hit, its metadata read only as far as this).
pub(crate) trait ServedEntry {
    /// The entry's file.
    fn path(&self) -> &Path;
    /// The compiler command line it records.
    fn command(&self) -> &[String];
    /// The bytes of the artefact called `name`, when it has one.
    fn artefact(&self, name: &str) -> Option<&[u8]>;
}

impl ServedEntry for Entry {
    fn path(&self) -> &Path {
        &self.path
    }
    fn command(&self) -> &[String] {
        &self.meta.command
    }
    fn artefact(&self, name: &str) -> Option<&[u8]> {
        Entry::artefact(self, name)
    }
}

impl ServedEntry for HitEntry {
    fn path(&self) -> &Path {
        &self.path
    }
    fn command(&self) -> &[String] {
        &self.command
    }
    fn artefact(&self, name: &str) -> Option<&[u8]> {
        HitEntry::artefact(self, name)
    }
}

/// The result of a disk hit.
pub(crate) fn inner_from_entry(
    key: CacheKey,
    artefacts: Vec<Artefact>,
    entry: &impl ServedEntry,
    bad_entries: Vec<BadEntry>,
    compiler: CompilerUsed,
    o: &CompileOptions,
) -> CompiledInner {
    CompiledInner {
        key,
        targets: o.target_names(),
        code_objects: code_objects_of(&artefacts),
        artefacts,
        entry_path: Some(entry.path().to_path_buf()),
        command: entry.command().to_vec(),
        log: String::new(),
        diagnostics: diagnostics::from_artefact(entry.artefact(diagnostics::ARTEFACT)),
        llvm_ir: entry.artefact(LLVM_IR).map(<[u8]>::to_vec),
        isa: entry
            .artefact(ISA)
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        bad_entries,
        cache_warnings: Vec::new(),
        compiler,
    }
}

/// The code objects among `artefacts`, in order.
pub(crate) fn code_objects_of(artefacts: &[Artefact]) -> Vec<Arc<CodeObject>> {
    artefacts
        .iter()
        .filter_map(|a| match a {
            Artefact::CodeObject(c) => Some(Arc::clone(c)),
            Artefact::Cubin(_) => None,
        })
        .collect()
}

/// The artefacts of a disk hit, or `None` when the entry, though intact (its sha256 sums
/// match), holds nothing hipjit can read for `o`'s targets (written by another hipjit
/// version, or by hand). Such an entry is recorded in `bad` and, in the written root, removed,
/// so that the compile that follows publishes a good one in its place ([`DiskCache::put`]
/// never overwrites an intact entry).
pub(crate) fn usable_entry(
    disk: &DiskCache,
    key: &CacheKey,
    entry: &impl ServedEntry,
    o: &CompileOptions,
    bad: &mut Vec<BadEntry>,
) -> Option<Vec<Artefact>> {
    let name = output_artefact(o);
    let reason = match entry.artefact(name) {
        None => format!("it has no {name} artefact"),
        Some(bytes) => match read_artefacts(key, bytes, o) {
            Ok(artefacts) => return Some(artefacts),
            Err(e) => e.to_string(),
        },
    };
    let writable_root = disk
        .roots()
        .first()
        .is_some_and(|r| entry.path().starts_with(&r.path));
    tracing::warn!(path = %entry.path().display(), %reason, "unusable hipjit cache entry");
    if writable_root {
        if let Err(e) = std::fs::remove_file(entry.path()) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %entry.path().display(), error = %e,
                    "cannot remove an unusable hipjit cache entry");
            }
        }
    }
    bad.push(BadEntry {
        path: entry.path().to_path_buf(),
        reason,
        writable_root,
    });
    None
}

/// The compiler's output `bytes` read as the artefacts of `o`'s targets: one code object per
/// AMDGPU target ID (out of a raw ELF or an offload bundle), or the cubin of the SM target,
/// which must be of that SM.
///
/// Errors: [`JitError::CodeObject`] or [`JitError::Cubin`] naming the key and the target.
pub(crate) fn read_artefacts(
    key: &CacheKey,
    bytes: &[u8],
    o: &CompileOptions,
) -> Result<Vec<Artefact>, JitError> {
    if let Some(sm) = o.sm_targets.first() {
        let cubin = Cubin::from_bytes(bytes).map_err(|e| JitError::Cubin {
            key: *key,
            target: sm.to_string(),
            reason: e.to_string(),
        })?;
        if cubin.target().sm != sm.sm {
            return Err(JitError::Cubin {
                key: *key,
                target: sm.to_string(),
                reason: format!("it holds code for {}", cubin.target()),
            });
        }
        return Ok(vec![Artefact::Cubin(Arc::new(cubin))]);
    }
    o.targets
        .iter()
        .map(|t| {
            CodeObject::from_bytes(bytes, Some(t))
                .map(|c| Artefact::CodeObject(Arc::new(c)))
                .map_err(|source| JitError::CodeObject {
                    key: *key,
                    target: t.to_string(),
                    source: Box::new(source),
                })
        })
        .collect()
}
