//! Remembered compile failures ([`crate::cache::failure`]): a request whose every tier missed
//! is looked up as a failure (the disk roots, then the remote tier) before the compiler runs,
//! and a compile the compiler rejected is published to the tiers as a result is, under the
//! files it read. [`JitOptions::retry_failed`](super::JitOptions::retry_failed) (or
//! `HIPJIT_RETRY_FAILED=1`) skips the lookup, so that the compiler runs again.

use std::time::{SystemTime, UNIX_EPOCH};

use super::entry::publish_manifest;
use super::tiers::Request;
use super::Jit;
use crate::cache::disk::EntryMeta;
use crate::cache::failure::{self, failure_key};
use crate::cache::key;
use crate::cache::manifest;
use crate::cache::tier::{Publish, Seen, Tier};
use crate::compiler::{CompileFailure, Rejection};

/// The variable that makes every `Jit` retry remembered failures (`1`; empty or `0`: not).
pub const RETRY_FAILED_ENV: &str = "HIPJIT_RETRY_FAILED";

/// Whether `HIPJIT_RETRY_FAILED` asks for retries: any value but empty and `0`.
pub(crate) fn retry_from_env() -> bool {
    std::env::var_os(RETRY_FAILED_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

impl Jit {
    /// The failure remembered for `r`, whose tiers all missed: on disk under the manifest
    /// the lookups found as the files are now (`seen.looked_up`), else in the remote tier
    /// levels in order (their manifests, each checked; a remote failure is copied to the first
    /// disk root).
    pub(super) fn remembered_failure(
        &self,
        r: &Request<'_>,
        seen: &Seen,
    ) -> Option<CompileFailure> {
        if let (Some(disk), Some(now)) = (&self.disk, &seen.looked_up) {
            let fkey = failure_key(&key::result_key(&r.direct, now));
            if let Some(entry) = disk.get(&fkey).entry {
                if let Some(f) = entry.artefact(failure::ARTEFACT).and_then(failure::decode) {
                    return Some(f);
                }
            }
        }
        // Each remote level in order, the first that remembers it.
        let hit = self.remote.iter().find_map(|remote| {
            let fetch = remote.fetch_mapped(
                &r.direct,
                &r.o.include_dirs,
                &r.chosen.backend.identity().root,
                failure_key,
            );
            for w in &fetch.warnings {
                tracing::debug!(warning = %w, "remote lookup of a remembered failure");
            }
            fetch.hit
        })?;
        let f = hit
            .entry
            .artefact(failure::ARTEFACT)
            .and_then(failure::decode)?;
        if let Some(disk) = self.disk.as_ref().filter(|d| d.is_writable()) {
            let stored: Vec<(&str, &[u8])> = hit
                .entry
                .meta
                .artefacts
                .iter()
                .filter_map(|a| Some((a.name.as_str(), hit.entry.artefact(&a.name)?)))
                .collect();
            match disk.put(&hit.key, hit.entry.meta.clone(), &stored) {
                Ok(_) => {
                    publish_manifest(disk, &r.direct, hit.entry.meta.clone(), &hit.manifest);
                }
                Err(e) => tracing::debug!(key = %hit.key, error = %e,
                    "a remembered remote failure was not written to the disk cache"),
            }
        }
        Some(f)
    }

    /// Publishes `failure`, which the compiler gave for `source` and `r` having read what
    /// `rejection` lists, to every tier of `list` that publishes: its entry under the
    /// failure key of the result key those files give, and their manifest under the direct
    /// key. Not when a file it read changed while it ran, or it is no clean rejection
    /// ([`failure::rememberable`]); a tier that cannot store it only logs (the caller gets
    /// the compiler's error either way).
    pub(super) fn remember_failure<'r>(
        &self,
        source: &[u8],
        r: &Request<'r>,
        list: &[&dyn Tier<Request<'r>, Hit = super::tiers::Hit>],
        failure: &CompileFailure,
        rejection: Rejection,
        seen: &mut Seen,
    ) {
        if !failure::rememberable(failure) || !list.iter().any(|t| t.publishes()) {
            return;
        }
        let Some(bytes) = failure::encode(failure) else {
            return;
        };
        let backend = &r.chosen.backend;
        let mut search = manifest::extra_search_dirs(&r.o.extra_flags, &backend.environment());
        search.extend(backend.own_search_dirs());
        let recorded = manifest::record(
            source,
            &rejection.dependencies,
            &r.o.include_dirs,
            &search,
            backend.identity(),
            rejection.started,
            seen.looked_up.as_ref(),
        );
        if let Some(why) = &recorded.unpublishable {
            tracing::debug!(reason = %why, "compile failure not remembered: a file it read changed");
            return;
        }
        let fkey = failure_key(&key::result_key(&r.direct, &recorded.manifest));
        let meta = EntryMeta {
            format_version: 0,
            key: String::new(),
            command: failure.command.clone(),
            compiler: backend.identity().clone(),
            options: r.o.clone(),
            tracked_headers: recorded.headers.clone(),
            dependencies: rejection
                .dependencies
                .iter()
                .map(|d| d.path.clone())
                .collect(),
            created_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            artefacts: Vec::new(),
        };
        let key_record = backend
            .request::<crate::cache::key::KeyFields>(source, r.o, &self.extra)
            .to_bytes();
        let stored: Vec<(&str, &[u8])> = vec![
            (failure::ARTEFACT, &bytes),
            (key::KEY_RECORD_ARTEFACT, &key_record),
        ];
        let publish = Publish {
            direct: &r.direct,
            key: &fkey,
            meta: &meta,
            stored: &stored,
            manifest: &recorded.manifest,
        };
        let mut warnings = Seen::default();
        for tier in list.iter().filter(|t| t.publishes()) {
            tier.publish(r, &publish, &mut warnings);
        }
        for w in warnings.warnings {
            tracing::debug!(key = %fkey, warning = %w, "compile failure not remembered");
        }
    }
}
