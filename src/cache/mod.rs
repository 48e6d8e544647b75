//! The JIT's caches: the key ([`key`]), the disk cache ([`disk`]), the in-process cache
//! ([`memory`]) and the kernel-level cache behind `Jit::kernel` and `NvJit::kernel`.

pub mod disk;
pub(crate) mod kernels;
pub mod key;
pub mod memory;

pub use disk::{CacheError, DiskCache, Entry, EntryMeta, CACHE_DIR_ENV, SHARED_MARKER};
pub use key::{CacheKey, TrackedHeader, CACHE_FORMAT_VERSION};
