//! hipjit: just-in-time compiled HIP kernels on AMD GPUs.
//!
//! Layers: [`sys`] (raw HIP API from hip-sys), the safe runtime layer ([`runtime`], [`device`],
//! [`stream`], [`memory`], [`event`], [`library`], [`kernel`], [`launch`]), the code-object
//! reader ([`code_object`], [`target_id`], [`occupancy`]) and the JIT ([`compiler`], [`cache`],
//! [`jit`]). [`prelude`] brings the types of a compile -> load -> launch program into scope;
//! every error converts into [`Error`].

pub use hip_sys as sys;

pub mod cache;
pub mod code_object;
pub mod compiler;
pub mod cuda;
pub mod device;
pub mod error;
pub use error::{Error, Result};
pub mod event;
pub mod file_read;
pub mod jit;
pub mod kernel;
pub mod launch;
pub mod library;
pub mod memory;
pub mod occupancy;
pub mod runtime;
pub mod stream;
pub mod target_id;
#[cfg(feature = "testing")]
pub mod testing;

/// The types of a compile -> load -> launch program: `use hipjit::prelude::*;`.
pub mod prelude {
    pub use crate::args;
    pub use crate::code_object::{CodeObject, KernelInfo};
    pub use crate::compiler::CompileOptions;
    pub use crate::device::Device;
    pub use crate::error::{Error, Result};
    pub use crate::event::{Event, EventFlags};
    pub use crate::jit::{Jit, JitOptions};
    pub use crate::kernel::Kernel;
    pub use crate::launch::{Dim3, LaunchConfig};
    pub use crate::library::Library;
    pub use crate::memory::{
        DeviceBuffer, DeviceMemory, DeviceMemoryMut, DeviceSlice, DeviceSliceMut, PinnedBuffer,
    };
    pub use crate::runtime::Runtime;
    pub use crate::stream::{AsStream, Stream, StreamFlags};
    pub use crate::target_id::TargetId;
}

/// The README's Rust examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
