//! The JIT's tiers ([`crate::cache::tier`]): the disk cache and the remote tier, each looked
//! up, locked and published to as [`Tier`]. A hit is one whose code objects read for the
//! request's options; it becomes the JIT's result here.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::compiled::CompiledInner;
use super::compilers::Chosen;
use super::entry::{
    inner_from_entry, manifest_lookup_stale, publish_manifest_gated, refresh_manifest, usable_entry,
};
use super::{hit_memo, Jit, Origin};
use crate::cache::disk::{CacheError, DiskCache, LockOutcome};
use crate::cache::key::CacheKey;
use crate::cache::remote::lock::ClusterLock;
use crate::cache::remote::RemoteCache;
use crate::cache::tier::{LockStep, Publish, Seen, Tier};
use crate::compiler::CompileOptions;
use crate::fs::observe::Recording;

/// A hit: the result and where it came from.
pub(crate) type Hit = (Arc<CompiledInner>, Origin);

/// The hit memo's directory and name for a request, with its context and the options it
/// was made with (`hit_memo`).
pub(crate) type Memo<'a> = (&'a PathBuf, [u8; 32], [u8; 32], &'a CompileOptions);

/// One request as the tiers see it.
pub(crate) struct Request<'a> {
    pub direct: CacheKey,
    pub o: &'a CompileOptions,
    pub chosen: &'a Chosen,
    pub runtime: Option<&'a Path>,
    /// Where a disk hit at the first look is remembered.
    pub memo: Option<&'a Memo<'a>>,
    /// What the first look observed, for the memo; taken by the first disk lookup.
    pub recording: RefCell<Option<Recording>>,
}

/// The disk cache as a tier: `lookups` when it is read (not while the disk is bypassed).
pub(crate) struct DiskTier<'a> {
    pub disk: &'a DiskCache,
    pub lookups: bool,
}

impl Tier<Request<'_>> for DiskTier<'_> {
    type Hit = Hit;

    fn publishes(&self) -> bool {
        // A read-only cache (CacheLocation::ReadOnly) is only read.
        self.disk.is_writable()
    }

    /// The manifest of the direct key as the files are now, then its entry; a hit at the
    /// first look refreshes a stale manifest, or else is remembered in the hit memo.
    fn lookup(&self, r: &Request<'_>, seen: &mut Seen) -> Option<Hit> {
        let recording = r.recording.borrow_mut().take();
        if !self.lookups {
            return None;
        }
        let disk = self.disk;
        let (now, key, stale) =
            manifest_lookup_stale(disk, &r.direct, r.o, &r.chosen.backend.identity().root)?;
        let (entry, bad) = disk.get_hit(&key);
        seen.bad = bad;
        if let Some(entry) = entry {
            if let Some(artefacts) = usable_entry(disk, &key, &entry, r.o, &mut seen.bad) {
                let observed = recording.map(Recording::finish);
                if let Some(meta) = stale {
                    refresh_manifest(disk, &r.direct, meta, &now);
                } else if let (Some((dir, name, context, requested)), Some(observed), true) =
                    (r.memo, observed, seen.bad.is_empty())
                {
                    hit_memo::remember(
                        dir,
                        name,
                        context,
                        r.runtime,
                        observed,
                        &key,
                        &r.chosen.used(),
                        r.o,
                        requested,
                    );
                }
                return Some((
                    Arc::new(inner_from_entry(
                        key,
                        artefacts,
                        &entry,
                        std::mem::take(&mut seen.bad),
                        r.chosen.used(),
                        r.o,
                    )),
                    Origin::Disk,
                ));
            }
        }
        seen.looked_up = Some(now);
        None
    }

    /// The direct key's file lock; held, the disk is looked up again (another process may
    /// have published while this one waited).
    fn lock(&self, r: &Request<'_>, wait: Duration, seen: &mut Seen) -> LockStep<Hit> {
        let lock = match self.disk.lock(&r.direct, wait) {
            LockOutcome::Held(l) => l,
            LockOutcome::TimedOut { path } => {
                let w = format!(
                    "waited {} s for the compile lock {} (another process compiling this source, \
                     stopped or slow); compiling without it",
                    wait.as_secs_f64(),
                    path.display()
                );
                tracing::warn!(key = %r.direct, "{w}");
                seen.warnings.push(w);
                return LockStep::Unlocked;
            }
            LockOutcome::Unavailable(reason) => {
                tracing::debug!(key = %r.direct, %reason, "no compile lock");
                return LockStep::Unlocked;
            }
        };
        if self.lookups {
            let disk = self.disk;
            if let Some((now, key, stale)) =
                manifest_lookup_stale(disk, &r.direct, r.o, &r.chosen.backend.identity().root)
            {
                if let (Some(entry), _) = disk.get_hit(&key) {
                    if let Some(artefacts) = usable_entry(disk, &key, &entry, r.o, &mut seen.bad) {
                        if let Some(meta) = stale {
                            refresh_manifest(disk, &r.direct, meta, &now);
                        }
                        return LockStep::Found((
                            Arc::new(inner_from_entry(
                                key,
                                artefacts,
                                &entry,
                                std::mem::take(&mut seen.bad),
                                r.chosen.used(),
                                r.o,
                            )),
                            Origin::Disk,
                        ));
                    }
                }
                seen.looked_up = Some(now);
            }
        }
        LockStep::Held(Box::new(lock))
    }

    fn publish(&self, _: &Request<'_>, p: &Publish<'_>, seen: &mut Seen) -> Option<PathBuf> {
        let (path, warnings) = publish_to_disk(self.disk, p);
        seen.warnings.extend(warnings);
        path
    }
}

/// Publishes a compile's result to the written root of `disk`: its entry and its header
/// manifest, written and fsynced at once (two threads: the two fsyncs overlap), the manifest
/// published only once the entry is, so that no manifest names an entry that is not there.
/// Returns the entry's path when it was published (or a valid one was there), and the
/// warnings for the caller (a write that failed).
///
/// The thread (as the header manifest's readers and `compiler::later`'s remover) makes a
/// process that had none multi-threaded, after which glibc's allocator and locks take their
/// atomic paths: a later disk hit of a fresh `Jit` in `benches/jit.rs`'s single-threaded
/// process measured about 35 us (6%) longer than before, and the same as before once both
/// processes had a thread from the start (an idle thread preloaded into each); a fresh
/// process's hit (`benches/hit.rs`) is unchanged.
pub(crate) fn publish_to_disk(disk: &DiskCache, p: &Publish<'_>) -> (Option<PathBuf>, Vec<String>) {
    let mut warnings = Vec::new();
    let (put, manifest_warning) = std::thread::scope(|s| {
        let mut entry = std::thread::Builder::new()
            .spawn_scoped(s, || disk.put(p.key, p.meta.clone(), p.stored))
            .ok();
        let mut put = None;
        let mut published = |put: &mut Option<Result<(PathBuf, bool), CacheError>>| {
            let r = match entry.take() {
                Some(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread: the entry is written here, before the manifest's gate opens.
                _ => disk.put(p.key, p.meta.clone(), p.stored),
            };
            let ok = r.is_ok();
            *put = Some(r);
            ok
        };
        let warning = {
            let _phase = crate::phases::start("publishing: manifest (with the entry)");
            publish_manifest_gated(disk, p.direct, p.meta.clone(), p.manifest, || {
                published(&mut put)
            })
        };
        if put.is_none() {
            published(&mut put);
        }
        (put.expect("the entry was written"), warning)
    });
    let path = match put {
        Ok((path, _)) => {
            warnings.extend(manifest_warning);
            Some(path)
        }
        Err(e) => {
            tracing::warn!(key = %p.key, error = %e, "hipjit cache write failed");
            warnings.push(format!("the result was not cached: {e}"));
            None
        }
    };
    (path, warnings)
}

/// A remote level as a tier of the JIT: its hits written back to the first disk root and
/// to the `earlier` remote levels ([`Jit::remote_hit`]); `lookups` when it is read (not
/// while the disk is bypassed).
pub(crate) struct RemoteTier<'a> {
    pub jit: &'a Jit,
    pub remote: &'a RemoteCache,
    pub earlier: &'a [RemoteCache],
    pub lookups: bool,
}

impl Tier<Request<'_>> for RemoteTier<'_> {
    type Hit = Hit;

    fn publishes(&self) -> bool {
        true
    }

    fn lookup(&self, r: &Request<'_>, seen: &mut Seen) -> Option<Hit> {
        if !self.lookups {
            return None;
        }
        let fetch = self.remote.fetch(
            &r.direct,
            &r.o.include_dirs,
            &r.chosen.backend.identity().root,
        );
        self.jit.remote_hit(
            self.remote,
            self.earlier,
            &r.direct,
            r.o,
            r.chosen,
            fetch,
            seen,
        )
    }

    /// The cluster lock, waited for as the disk's; the entry another machine published
    /// meanwhile ends the wait.
    fn lock(&self, r: &Request<'_>, wait: Duration, seen: &mut Seen) -> LockStep<Hit> {
        if !self.lookups {
            return LockStep::Unlocked;
        }
        let remote = self.remote;
        let mut lock_warnings = Vec::new();
        let started = std::time::Instant::now();
        let outcome = remote.lock(&r.direct, wait, &mut lock_warnings, || {
            let fetch = remote.fetch(
                &r.direct,
                &r.o.include_dirs,
                &r.chosen.backend.identity().root,
            );
            fetch.hit.is_some().then_some(fetch)
        });
        seen.warnings.extend(lock_warnings);
        match outcome {
            ClusterLock::Held(g) => LockStep::Held(Box::new(g)),
            ClusterLock::Found(fetch) => {
                match self.jit.remote_hit(
                    remote,
                    self.earlier,
                    &r.direct,
                    r.o,
                    r.chosen,
                    fetch,
                    seen,
                ) {
                    Some(hit) => LockStep::Found(hit),
                    None => LockStep::Unlocked,
                }
            }
            ClusterLock::TimedOut => {
                let w = format!(
                    "waited {:.1} s for the cluster compile lock of {} (another machine \
                     compiling this source, stopped or slow; no longer than the compile timeout, \
                     {} s, from when it took the lock); compiling without it (the lock was \
                     removed, and this process does not wait for that holder again)",
                    started.elapsed().as_secs_f64(),
                    r.direct,
                    wait.as_secs_f64()
                );
                tracing::warn!("{w}");
                seen.warnings.push(w);
                LockStep::Unlocked
            }
            ClusterLock::Unavailable => LockStep::Unlocked,
        }
    }

    fn publish(&self, _: &Request<'_>, p: &Publish<'_>, seen: &mut Seen) -> Option<PathBuf> {
        match crate::cache::disk::encode_entry(p.key, p.meta.clone(), p.stored) {
            Ok(bytes) => seen
                .warnings
                .extend(self.remote.store(p.direct, p.key, &bytes, p.manifest)),
            Err(e) => seen
                .warnings
                .push(format!("the result was not stored remotely: {e}")),
        }
        None
    }
}
