//! The safe layer over the HIP runtime API: the runtime loaded at run time ([`runtime`]),
//! devices, streams, memory, events, code objects loaded as libraries, kernels, launches,
//! graphs and peer access, all RAII; on NVIDIA the same types over the CUDA driver ([`cuda`]).
//! Its errors are its own ([`error`]).
//!
//! It names below it only `hip-sys`, the code-object reader, the targets and the file-system
//! layer; never the compiler, the cache or the JIT (`docs/architecture.md`). Its modules are
//! re-exported at the crate root (`hipjit::device`, `hipjit::stream`, ...), their public paths.

pub(crate) mod capture_guard;
pub mod cuda;
pub mod device;
mod device_sanity;
pub mod error;
pub mod event;
pub mod graph;
pub mod kernel;
pub mod launch;
pub mod library;
pub mod memory;
pub mod peer;
pub mod runtime;
pub mod stream;
