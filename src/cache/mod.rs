//! The JIT's caches: the keys ([`key`]), the header manifests ([`manifest`]), the disk cache
//! ([`disk`]) and the in-process cache ([`memory`]).

pub mod disk;
pub mod key;
pub mod manifest;
pub mod memory;

pub use disk::{CacheError, DiskCache, Entry, EntryMeta, CACHE_DIR_ENV, SHARED_MARKER};
pub use key::{CacheKey, TrackedHeader, CACHE_FORMAT_VERSION};
