//! The file-system layer under everything else: how hipjit reads, writes and `stat`s files
//! and how its own files encode byte strings. It names nothing of hipjit above it
//! (`docs/architecture.md`).
//!
//! * [`stat`]: the `stat` record a cache trusts for a file's content, the one rule by which it
//!   does ([`stat::FileStat::proves_same_as`]), content hashing and the file system's clock;
//! * [`read`]: bounded, never-blocking reads;
//! * [`write`]: whole-or-nothing writes of user-named outputs;
//! * `observe`: what a cache lookup saw of the file system, for the hit memo;
//! * `user`: the process's effective user ID, read once;
//! * `byte_strings`: byte strings in hipjit's MessagePack files;
//! * [`cache_root`]: what marks a disk-cache root (its `CACHEDIR.TAG`) and the directory
//!   hipjit lays its entries out in, which the cache writes and the compiler's include walk
//!   leaves out.

pub(crate) mod byte_strings;
pub mod cache_root;
pub(crate) mod observe;
pub mod read;
pub mod stat;
pub(crate) mod user;
pub mod write;
