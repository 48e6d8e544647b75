//! Compile once per cluster: the remote compile lock of a direct key, where the store has
//! one ([`super::store::Capabilities::lock`]; Redis's is described in its store, taken with
//! `SET NX PX` of a signed token, renewed while held and released by compare-and-delete).
//! Without it, nodes that miss at once each compile.

use std::time::Duration;

use super::store::{HeldLock, Locked};
use super::RemoteCache;
use crate::cache::key::CacheKey;

/// How far two nodes' clocks may differ when a lock token's issue time is judged: a token
/// issued further in the future than this, or longer ago than the compile timeout plus the
/// lock's lifetime plus this, is no lock a holder can hold ([`RemoteCache::lock`]).
pub const LOCK_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// A held cluster lock; renewed (by the store) until dropped, then released.
#[derive(Debug)]
pub struct ClusterLockGuard {
    _held: Box<dyn HeldLock>,
}

/// What [`RemoteCache::lock`] got.
#[derive(Debug)]
pub enum ClusterLock<T> {
    /// The lock: compile, publish, then drop it.
    Held(ClusterLockGuard),
    /// Another process published the entry while this one waited: what the poll returned.
    Found(T),
    /// The lock stayed taken for the whole wait: compile without it. The lock was removed
    /// (while it still held the token waited for), and this process treats that token as
    /// stale from now on.
    TimedOut,
    /// No lock can be had (the store has no lock, the server is down, or refuses `EVAL`, or
    /// keeps holding values under the lock's name that are not hipjit's): compile without it.
    Unavailable,
}

impl RemoteCache {
    /// Takes the cluster lock of `direct`, waiting at most `wait`; while it is taken by
    /// another process, `poll` is called every [`super::RemoteConfig::lock_poll`] and a
    /// `Some` it returns ends the wait (`ClusterLock::Found`). Warnings (the outage, once;
    /// the server's refusal of `EVAL`, once per tier; a lock that is not hipjit's, removed)
    /// are appended to `warnings`. A store without the lock capability gives
    /// `ClusterLock::Unavailable` at once.
    ///
    /// Redis: only a lock hipjit could still hold is waited for: a value under the lock's
    /// name that is no token of `lock_token` for that name (under the
    /// signing key, when one is set), that has no expiry, whose token claims a lifetime
    /// longer than [`super::RemoteConfig::lock_ttl`] or expires later than that claim, whose
    /// token was issued more than `wait` + `lock_ttl` + `LOCK_CLOCK_SKEW` ago or more than
    /// `LOCK_CLOCK_SKEW` in the future (by this machine's clock), or whose token this
    /// process already waited out, is removed at once (while it is still that value) and the
    /// lock taken. A lock is waited for until `wait` runs out or, sooner, until its token's
    /// issue time + `wait` + `LOCK_CLOCK_SKEW`; a wait that runs out removes it too and
    /// remembers its token as stale in this process, so that neither this process nor
    /// another pays that wait again.
    #[doc(hidden)]
    pub fn lock<T>(
        &self,
        direct: &CacheKey,
        wait: Duration,
        warnings: &mut Vec<String>,
        mut poll: impl FnMut() -> Option<T>,
    ) -> ClusterLock<T> {
        let store = self.backing();
        if !store.capabilities().lock {
            self.take_notices(warnings);
            return ClusterLock::Unavailable;
        }
        let mut found = None;
        let got = store.lock(&self.name("l", direct), wait, warnings, &mut || {
            found = poll();
            found.is_some()
        });
        self.take_notices(warnings);
        match got {
            Locked::Held(held) => ClusterLock::Held(ClusterLockGuard { _held: held }),
            Locked::Found => match found {
                Some(f) => ClusterLock::Found(f),
                None => ClusterLock::Unavailable,
            },
            Locked::TimedOut => ClusterLock::TimedOut,
            Locked::Unavailable => ClusterLock::Unavailable,
        }
    }
}
