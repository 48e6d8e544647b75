//! Telemetry of a [`Jit`]: for each tier (in-process, disk, remote) its hits, its misses and
//! the wall time of the requests it served, and the compiles ([`Jit::stats`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Jit, Origin};

/// One tier's counts since the [`Jit`] was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Requests this tier served.
    pub hits: u64,
    /// Requests that reached this tier and went on to a later one (or the compiler).
    pub misses: u64,
    /// Wall time of the requests this tier served, from the call to its return.
    pub time: Duration,
    /// Values this tier held for a request but refused (never served): for the remote tier,
    /// entries and manifests that were corrupted, unsigned under a signing key or signed with
    /// another key ([`crate::cache::remote::RemoteCache::refused`]). 0 for the in-process and
    /// disk tiers (a bad disk entry is reported in [`super::Compiled::bad_entries`]).
    pub refused: u64,
}

/// What [`Jit::stats`] reports: every [`Jit::compile`] (and each compile a [`Jit::load`]
/// makes), by where its result came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitStats {
    /// The in-process cache.
    pub memory: TierStats,
    /// The frozen bundle ([`crate::cache::FrozenBundle`]), when one is served.
    pub frozen: Option<TierStats>,
    /// The disk roots, when the cache is enabled.
    pub disk: Option<TierStats>,
    /// The remote tier, when one is configured.
    pub remote: Option<TierStats>,
    /// Compiler runs whose result was returned.
    pub compiles: u64,
    /// Wall time of the requests that ran the compiler (lookups included).
    pub compile_time: Duration,
    /// Requests that returned an error.
    pub failures: u64,
    /// Disk hits served through the hit memo (`hit_memo`), counted among the disk
    /// tier's hits too.
    pub remembered_hits: u64,
    /// Requests answered with a remembered compile failure (the compiler not run:
    /// [`super::JitOptions::retry_failed`]), counted among the failures too.
    pub failures_remembered: u64,
}

/// Lock-free counters behind [`JitStats`]: a count and nanoseconds per [`Origin`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    count: [AtomicU64; 5],
    nanos: [AtomicU64; 5],
    failures: AtomicU64,
    remembered: AtomicU64,
    failures_remembered: AtomicU64,
}

fn slot(origin: Origin) -> usize {
    match origin {
        Origin::Memory => 0,
        Origin::Disk => 1,
        Origin::Remote => 2,
        Origin::Compiler => 3,
        Origin::Frozen => 4,
    }
}

impl Counters {
    pub(crate) fn record(&self, origin: Origin, elapsed: Duration) {
        let i = slot(origin);
        self.count[i].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[i].fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn record_remembered(&self) {
        self.remembered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_remembered_failure(&self) {
        self.failures_remembered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self, frozen: bool, disk: bool, remote: Option<u64>) -> JitStats {
        let c = |i: usize| self.count[i].load(Ordering::Relaxed);
        let t = |i: usize| Duration::from_nanos(self.nanos[i].load(Ordering::Relaxed));
        let (memory, on_disk, from_remote, compiled, from_frozen) = (c(0), c(1), c(2), c(3), c(4));
        JitStats {
            memory: TierStats {
                hits: memory,
                misses: from_frozen + on_disk + from_remote + compiled,
                time: t(0),
                refused: 0,
            },
            frozen: frozen.then_some(TierStats {
                hits: from_frozen,
                misses: on_disk + from_remote + compiled,
                time: t(4),
                refused: 0,
            }),
            disk: disk.then_some(TierStats {
                hits: on_disk,
                misses: from_remote + compiled,
                time: t(1),
                refused: 0,
            }),
            remote: remote.map(|refused| TierStats {
                hits: from_remote,
                misses: compiled,
                time: t(2),
                refused,
            }),
            compiles: compiled,
            compile_time: t(3),
            failures: self.failures.load(Ordering::Relaxed),
            remembered_hits: self.remembered.load(Ordering::Relaxed),
            failures_remembered: self.failures_remembered.load(Ordering::Relaxed),
        }
    }
}

impl Jit {
    /// Hits, misses and time per tier, and compiles, since this `Jit` was made.
    pub fn stats(&self) -> JitStats {
        let remote =
            (!self.remote.is_empty()).then(|| self.remote.iter().map(|r| r.refused()).sum());
        self.counters
            .snapshot(self.frozen.is_some(), self.disk.is_some(), remote)
    }
}
