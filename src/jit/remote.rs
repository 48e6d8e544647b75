//! The JIT's use of the remote cache tier ([`crate::cache::remote`]): where it
//! is ([`RemoteLocation`]), and a remote hit checked like a disk entry and written to the
//! first disk root (the tier itself: `jit::tiers`).

use std::sync::Arc;

use super::compiled::CompiledInner;
use super::compilers::Chosen;
use super::entry::{inner_from_entry, output_artefact, publish_manifest, read_artefacts};
use super::Origin;
use super::{Jit, JitError};
use crate::cache::disk::DiskCache;
use crate::cache::key::CacheKey;
use crate::cache::remote::{RemoteCache, RemoteConfig};
use crate::cache::tier::Seen;
use crate::compiler::CompileOptions;

/// Where the remote cache tier is ([`crate::cache::remote`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RemoteLocation {
    /// `HIPJIT_REMOTE_CACHE` (and `HIPJIT_REMOTE_CACHE_KEY`, `HIPJIT_REMOTE_CACHE_TOKEN`):
    /// each URL it lists a level ([`RemoteLocation::Levels`]); none when unset.
    #[default]
    FromEnv,
    /// This server.
    Server(RemoteConfig),
    /// These servers, fastest first, each a tier of its own: looked up in order (the first
    /// hit wins, and is written back to the levels before it and to the first disk root),
    /// locked in order, and each published to after a compile.
    Levels(Vec<RemoteConfig>),
    /// No remote tier.
    Disabled,
}

impl Jit {
    /// Takes a remote lookup's result: its bad entries and warnings, and its hit when the
    /// artefacts read (else the entry is rejected: reported and removed from the server). A hit
    /// is written to the first disk root with its manifest, and to the `earlier` remote
    /// levels (those looked up before `remote`, which missed), in the background.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn remote_hit(
        &self,
        remote: &RemoteCache,
        earlier: &[RemoteCache],
        direct: &CacheKey,
        o: &CompileOptions,
        chosen: &Chosen,
        fetch: crate::cache::remote::Fetch,
        seen: &mut Seen,
    ) -> Option<(Arc<CompiledInner>, Origin)> {
        seen.bad.extend(fetch.bad);
        seen.warnings.extend(fetch.warnings);
        if seen.looked_up.is_none() {
            seen.looked_up = fetch.looked_up;
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
                seen.bad
                    .push(remote.reject(hit, reason, &mut seen.warnings));
                return None;
            }
        };
        let mut entry = hit.entry;
        if !earlier.is_empty() {
            // The faster levels get the hit too (signed and checked by each level's tier as
            // a publish of its own), off the caller's path.
            let (levels, key, direct, manifest) =
                (earlier.to_vec(), hit.key, *direct, hit.manifest.clone());
            let copy = entry.clone();
            self.write_back.submit(move || {
                let stored: Vec<(&str, &[u8])> = copy
                    .meta
                    .artefacts
                    .iter()
                    .filter_map(|a| Some((a.name.as_str(), copy.artefact(&a.name)?)))
                    .collect();
                match crate::cache::disk::encode_entry(&key, copy.meta.clone(), &stored) {
                    Ok(bytes) => {
                        for level in &levels {
                            for w in level.store(&direct, &key, &bytes, &manifest) {
                                tracing::warn!(%key, "writing a remote hit back: {w}");
                            }
                        }
                    }
                    Err(e) => tracing::warn!(%key, error = %e,
                        "a remote hit was not written back to the faster remote levels"),
                }
            });
        }
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
            std::mem::take(&mut seen.bad),
            chosen.used(),
            o,
        );
        inner.cache_warnings = std::mem::take(&mut seen.warnings);
        Some((Arc::new(inner), Origin::Remote))
    }
}

/// The remote levels `location` names, fastest first: empty when none is configured.
///
/// Errors: [`JitError::RemoteConfig`] ([`RemoteCache::new`],
/// [`RemoteCache::levels_from_env`]).
pub(crate) fn open_remote(location: RemoteLocation) -> Result<Vec<RemoteCache>, JitError> {
    Ok(match location {
        RemoteLocation::Disabled => Vec::new(),
        RemoteLocation::Server(c) => vec![RemoteCache::new(c)?],
        RemoteLocation::Levels(cs) => cs
            .into_iter()
            .map(RemoteCache::new)
            .collect::<Result<_, _>>()?,
        RemoteLocation::FromEnv => RemoteCache::levels_from_env()?,
    })
}
