//! The tiers a miss of the in-process cache walks, as a list: the disk roots, then the remote
//! tier. Each tier is looked up in order; on a miss of every one, each takes its lock in
//! order (the disk's per-key file lock, then the cluster lock), where a lookup under the
//! lock may find what another process published meanwhile; then the compiler runs and each
//! tier publishes the result (the entry and its header manifest). A faster tier is filled
//! from a slower one's hit by the slower tier (a remote hit is written back to the first
//! disk root, [`crate::cache::remote::write_back`]).
//!
//! The JIT implements [`Tier`] for the disk cache and the remote tier (`jit::tiers`): a hit
//! is only a hit once its code objects read for the request's options, and what it becomes
//! is the JIT's result, so the request and the hit are the JIT's types. Two caches stay
//! outside the list, because they are not looked up by key: the in-process cache
//! (`memory`, a pre-key over source and options, checked before anything is
//! hashed) and the hit memo (`jit::hit_memo`, a disk hit remembered with what its lookup
//! observed, checked before the compiler is even found). Both sit in front of the walk.

use std::any::Any;
use std::path::PathBuf;
use std::time::Duration;

use crate::cache::disk::{BadEntry, EntryMeta};
use crate::cache::key::CacheKey;
use crate::cache::manifest::Manifest;

/// What the walk has observed so far, carried from tier to tier and into the result.
#[derive(Debug, Default)]
pub struct Seen {
    /// Bad entries met (never served).
    pub bad: Vec<BadEntry>,
    /// The header manifest a lookup found could match, as the files are now (the compiler's
    /// dependency record is checked against it).
    pub looked_up: Option<Manifest>,
    /// Warnings for the caller's result.
    pub warnings: Vec<String>,
}

/// What [`Tier::lock`] got.
pub enum LockStep<H> {
    /// The lock, held until the value is dropped (after the publish).
    Held(Box<dyn Any + Send>),
    /// What another process published while this one waited: the walk ends with it.
    Found(H),
    /// No lock (the tier has none, or it could not be had; said in [`Seen::warnings`]).
    Unlocked,
}

/// A compile's result to publish ([`Tier::publish`]).
#[derive(Debug)]
pub struct Publish<'a> {
    /// The direct key (the manifest's name).
    pub direct: &'a CacheKey,
    /// The result key (the entry's name).
    pub key: &'a CacheKey,
    /// The entry's metadata.
    pub meta: &'a EntryMeta,
    /// The entry's artefacts by name.
    pub stored: &'a [(&'a str, &'a [u8])],
    /// The header manifest naming the entry.
    pub manifest: &'a Manifest,
}

/// One tier of the cache, for requests `R` whose hits are `Self::Hit`.
pub trait Tier<R: ?Sized> {
    /// What a hit gives.
    type Hit;
    /// Whether this tier takes a publish ([`Tier::publish`]); a read-only tier does not.
    fn publishes(&self) -> bool;
    /// Looks `request` up; a miss may leave bad entries, a manifest and warnings in `seen`.
    fn lookup(&self, request: &R, seen: &mut Seen) -> Option<Self::Hit>;
    /// Takes this tier's compile lock of `request`, waiting at most `wait` for another
    /// holder.
    fn lock(&self, request: &R, wait: Duration, seen: &mut Seen) -> LockStep<Self::Hit>;
    /// Publishes a result; warnings go to `seen`. Returns where the entry was written, for a
    /// tier that writes a file.
    fn publish(&self, request: &R, result: &Publish<'_>, seen: &mut Seen) -> Option<PathBuf>;
}

/// The locks a walk holds ([`LockStep::Held`]), released in the reverse of the order they
/// were taken when dropped (the slowest tier's first).
#[derive(Default)]
pub struct Locks(Vec<Box<dyn Any + Send>>);

impl Locks {
    /// Holds `lock` until this is dropped.
    pub fn push(&mut self, lock: Box<dyn Any + Send>) {
        self.0.push(lock);
    }
}

impl Drop for Locks {
    fn drop(&mut self) {
        while let Some(l) = self.0.pop() {
            drop(l);
        }
    }
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Locks({} held)", self.0.len())
    }
}
