//! The JIT's caches: the keys (`key`), the header manifests (`manifest`), the disk cache
//! (`disk`) and its bundles ([`bundle`]), frozen bundles served without a compiler
//! ([`FrozenBundle`]), the in-process cache (`memory`), the remote
//! tier shared by a cluster ([`remote`]) and the kernel-level cache behind `Jit::kernel`;
//! the disk and remote tiers as the list a miss walks (`tier`).

pub mod bundle;
#[doc(hidden)]
pub mod disk;
#[doc(hidden)]
pub mod failure;
#[doc(hidden)]
pub mod frozen;
pub(crate) mod hit_entry;
#[doc(hidden)]
pub mod key;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod memory;
pub mod remote;
#[doc(hidden)]
pub mod tier;
/// The cache directory tag, kept in the file-system layer (the compiler's include walk reads
/// it too); here its old path.
#[doc(hidden)]
pub use crate::fs::cache_root as tag;

pub use disk::{
    ArtefactMeta, BadEntry, CacheError, CapSource, DiskCache, Entry, EntryMeta, EntrySummary,
    LockOutcome, Lookup, PruneReport, RootStats, VerifiedEntry, CACHE_DIR_ENV, SHARED_MARKER,
};
pub use frozen::{
    FrozenBundle, FrozenCompiler, FrozenDir, FrozenEntry, FrozenError, FrozenFile, Refusal,
    RequestFields,
};
#[doc(hidden)]
pub use hit_entry::check_against_full_read as check_hit_read;
pub use key::{CacheKey, KeyField, KeyFields, TrackedHeader, CACHE_FORMAT_VERSION};
