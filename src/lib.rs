//! hipjit: just-in-time compiled HIP kernels on AMD GPUs.
//!
//! Layers: [`sys`] (raw HIP API from hip-sys), the safe runtime layer ([`runtime`], [`device`],
//! [`stream`], [`memory`], [`event`], [`library`], [`kernel`], [`launch`]), the code-object
//! reader ([`code_object`], [`target_id`]) and the JIT ([`compiler`], [`cache`], [`jit`]).

pub use hip_sys as sys;

pub mod cache;
pub mod code_object;
pub mod compiler;
pub mod cuda;
pub mod device;
pub mod error;
pub use error::Error;
pub mod event;
pub mod file_read;
pub mod jit;
pub mod kernel;
pub mod launch;
pub mod library;
pub mod memory;
pub mod runtime;
pub mod stream;
pub mod target_id;

/// The README's Rust examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
