//! The JIT's caches: the key ([`key`]), the disk cache ([`disk`]) and the in-process cache
//! ([`memory`]).

pub mod disk;
pub mod key;
pub mod memory;

pub use disk::{CacheError, DiskCache, Entry, EntryMeta, CACHE_DIR_ENV, SHARED_MARKER};
pub use key::{CacheKey, TrackedHeader, CACHE_FORMAT_VERSION};
