//! The JIT's use of the remote cache tier ([`crate::cache::remote`]): where it
//! is ([`RemoteLocation`]), a remote hit checked like a disk entry and written to the first
//! disk root, and the cluster lock around a compile.

use std::sync::Arc;
use std::time::Duration;

use super::compiled::CompiledInner;
use super::compilers::Chosen;
use super::entry::{inner_from_entry, output_artefact, publish_manifest, read_artefacts};
use super::Origin;
use super::{Jit, JitError};
use crate::cache::disk::{BadEntry, DiskCache};
use crate::cache::key::CacheKey;
use crate::cache::manifest::Manifest;
use crate::cache::remote::{RemoteCache, RemoteConfig};
use crate::compiler::CompileOptions;

/// Where the remote cache tier is ([`crate::cache::remote`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RemoteLocation {
    /// `HIPJIT_REMOTE_CACHE` (and `HIPJIT_REMOTE_CACHE_KEY`); none when unset.
    #[default]
    FromEnv,
    /// This server.
    Server(RemoteConfig),
    /// No remote tier.
    Disabled,
}

impl Jit {
    pub(crate) fn has_remote(&self) -> bool {
                self.remote.is_some()
    }

    /// Takes a remote lookup's result: its bad entries and warnings, and its hit when the
    /// artefacts read (else the entry is rejected: reported and removed from the server). A hit
    /// is written to the first disk root with its manifest, in the background.
    #[allow(clippy::too_many_arguments)]
        pub(crate) fn remote_hit(
        &self,
        direct: &CacheKey,
        o: &CompileOptions,
        chosen: &Chosen,
        fetch: crate::cache::remote::Fetch,
        bad_entries: &mut Vec<BadEntry>,
        looked_up: &mut Option<Manifest>,
        cache_warnings: &mut Vec<String>,
    ) -> Option<(Arc<CompiledInner>, Origin)> {
        let remote = self.remote.as_ref()?;
        bad_entries.extend(fetch.bad);
        cache_warnings.extend(fetch.warnings);
        if looked_up.is_none() {
            *looked_up = fetch.looked_up;
        }
        let hit = fetch.hit?;
        let name = output_artefact(o);
        let read = match hit.entry.artefact(name) {
            None => Err(format!("it has no {name} artefact")),
            Some(bytes) => read_artefacts(&hit.key, bytes, o).map_err(|e| e.to_string()),
        };
        let artefacts = match read {
            Ok(c) => c,
            Err(reason) => {
                bad_entries.push(remote.reject(hit, reason, cache_warnings));
                return None;
            }
        };
        let mut entry = hit.entry;
        if let Some(disk) = self.disk.as_ref().filter(|d| d.is_writable()) {
            // Served now; written to the first root in the background (two fsynced publishes:
            // [`crate::cache::remote::write_back`]).
            let (disk, key, direct, manifest) = (disk.clone(), hit.key, *direct, hit.manifest);
            let copy = entry.clone();
            entry.path = DiskCache::entry_path(&disk.roots()[0].path, &key);
            self.write_back.submit(move || {
                let stored: Vec<(&str, &[u8])> = copy
                    .meta
                    .artefacts
                    .iter()
                    .filter_map(|a| Some((a.name.as_str(), copy.artefact(&a.name)?)))
                    .collect();
                match disk.put(&key, copy.meta.clone(), &stored) {
                    Ok(_) => {
                        publish_manifest(&disk, &direct, copy.meta.clone(), &manifest);
                    }
                    Err(e) => {
                        tracing::warn!(%key, error = %e,
                            "a remote hit was not written to the disk cache");
                    }
                }
            });
        }
        let mut inner = inner_from_entry(
            hit.key,
            artefacts,
            &entry,
            std::mem::take(bad_entries),
            chosen.used(),
            o,
        );
        inner.cache_warnings = std::mem::take(cache_warnings);
        Some((Arc::new(inner), Origin::Remote))
    }

    /// The cluster lock of `direct` when a remote tier is configured: `Break` with the entry
    /// another machine published while this one waited, else `Continue` with the lock (none
    /// when the wait ran out or the server cannot lock).
    #[allow(clippy::too_many_arguments)]
        pub(crate) fn cluster_lock(
        &self,
        direct: &CacheKey,
        o: &CompileOptions,
        chosen: &Chosen,
        wait: Duration,
        bypass: bool,
        bad_entries: &mut Vec<BadEntry>,
        looked_up: &mut Option<Manifest>,
        cache_warnings: &mut Vec<String>,
    ) -> std::ops::ControlFlow<
        (Arc<CompiledInner>, Origin),
        Option<crate::cache::remote::lock::ClusterLockGuard>,
    > {
        use crate::cache::remote::lock::ClusterLock;
        use std::ops::ControlFlow;
        let Some(remote) = self.remote.as_ref().filter(|_| !bypass) else {
            return ControlFlow::Continue(None);
        };
        let mut lock_warnings = Vec::new();
        let started = std::time::Instant::now();
        let outcome = remote.lock(direct, wait, &mut lock_warnings, || {
            let fetch = remote.fetch(direct, &o.include_dirs, &chosen.backend.identity().root);
            fetch.hit.is_some().then_some(fetch)
        });
        cache_warnings.extend(lock_warnings);
        match outcome {
            ClusterLock::Held(g) => ControlFlow::Continue(Some(g)),
            ClusterLock::Found(fetch) => {
                match self.remote_hit(
                    direct,
                    o,
                    chosen,
                    fetch,
                    bad_entries,
                    looked_up,
                    cache_warnings,
                ) {
                    Some(hit) => ControlFlow::Break(hit),
                    None => ControlFlow::Continue(None),
                }
            }
            ClusterLock::TimedOut => {
                let w = format!(
                    "waited {:.1} s for the cluster compile lock of {direct} (another machine \
                     compiling this source, stopped or slow; no longer than the compile timeout, \
                     {} s, from when it took the lock); compiling without it (the lock was \
                     removed, and this process does not wait for that holder again)",
                    started.elapsed().as_secs_f64(),
                    wait.as_secs_f64()
                );
                tracing::warn!("{w}");
                cache_warnings.push(w);
                ControlFlow::Continue(None)
            }
            ClusterLock::Unavailable => ControlFlow::Continue(None),
        }
    }
}

/// The remote tier `location` names: `None` when none is configured.
///
/// Errors: [`JitError::RemoteConfig`] ([`RemoteCache::new`], [`RemoteCache::from_env`]).
pub(crate) fn open_remote(location: RemoteLocation) -> Result<Option<RemoteCache>, JitError> {
    Ok(match location {
        RemoteLocation::Disabled => None,
        RemoteLocation::Server(c) => Some(RemoteCache::new(c)?),
        RemoteLocation::FromEnv => RemoteCache::from_env()?,
    })
}
