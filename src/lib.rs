//! hipjit: just-in-time compiled HIP kernels on AMD GPUs (and on NVIDIA GPUs through HIP's
//! NVIDIA platform).
//!
//! # Quickstart
//!
//! Compile a kernel (through the memory and disk caches), load it, launch it on a stream, read
//! the result back:
//!
#![cfg_attr(feature = "testing", doc = "```")]
#![cfg_attr(not(feature = "testing"), doc = "```no_run")]
//! use hipjit::prelude::*;
//!
//! # fn main() -> hipjit::Result<()> {
//! # // Run as a doctest on the testing runtime (feature `testing`): a pretended gfx90a whose
//! # // `saxpy` is a host implementation; `Runtime::load` finds it through HIPJIT_HIP_LIBRARY.
//! # #[cfg(feature = "testing")]
//! # let _test = hipjit::testing::TestDevice::new("gfx90a:sramecc+:xnack-")?
//! #     .host_kernel("saxpy", |l| {
//! #         let (a, n): (f32, u32) = unsafe { (l.arg(0), l.arg(3)) };
//! #         let x = unsafe { l.slice::<f32>(1, n as usize) }.to_vec();
//! #         let y = unsafe { l.slice_mut::<f32>(2, n as usize) };
//! #         y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
//! #         Ok(())
//! #     })
//! #     .start()?;
//! # #[cfg(feature = "testing")]
//! # std::env::set_var("HIPJIT_HIP_LIBRARY", _test.library_path());
//! const SAXPY: &str = r#"
//! #include <hip/hip_runtime.h>
//! extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
//!     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) y[i] = a * x[i] + y[i];
//! }
//! "#;
//!
//! let runtime = Runtime::load()?; // dlopen, every entry point resolved
//! let device = runtime.device(0)?;
//! let jit = Jit::new(JitOptions::default())?; // opens the disk cache
//! let target = device.target_id().expect("the device reports a target ID");
//! let options = CompileOptions::for_target(target.clone());
//! let compiled = jit.compile(SAXPY, &options)?; // memory cache -> disk cache -> hipcc
//! let library = compiled.artefacts()[0].load(&device)?; // a code object here
//! let saxpy: Kernel = library.kernel("saxpy")?; // owned: store it, clone it, share it
//!
//! let n = 1 << 16;
//! let x = DeviceBuffer::from_slice(&device, &vec![1.0f32; n])?;
//! let mut y = DeviceBuffer::from_slice(&device, &vec![2.0f32; n])?;
//! let stream = Stream::new(&device, StreamFlags::NON_BLOCKING)?;
//! let cfg = LaunchConfig::for_num_elems(n as u32, 256);
//! // SAFETY: saxpy(float, const float*, float*, unsigned) takes exactly these arguments; hipjit
//! // also checks their count and sizes against the code object's metadata before the launch.
//! // `y` is written by the kernel, so it is passed `&mut` ([`launch`]'s rule); `x` is only read.
//! unsafe { saxpy.launch(&stream, cfg, &mut args![&3.0f32, &x, &mut y, &(n as u32)])? };
//! stream.synchronize()?;
//! assert!(y.to_vec()?.iter().all(|&v| v == 5.0));
//! # Ok(())
//! # }
//! ```
//!
//! With feature `testing` this example runs as a doctest without a GPU, on
//! the `testing` module's runtime (a pretended gfx90a whose `saxpy` is a host implementation);
//! without it, it is compiled only. To test your own crate the same way, see `hipjit::testing`
//! (feature `testing`).
//!
//! # Layers
//!
//! `sys` (raw HIP API from the `hipjit-sys` crate), the safe runtime layer ([`runtime`],
//! [`device`], [`stream`], `memory`, [`event`], [`library`], [`kernel`], [`launch`]), the
//! code-object reader ([`code_object`], [`target_id`], [`occupancy`]) and the JIT
//! ([`compiler`], [`cache`], [`jit`]); `docs/architecture.md` draws them and says what each
//! may name. [`prelude`] brings the types of a compile -> load ->
//! launch program into scope. Every error converts into [`Error`]: a downstream error type
//! needs one variant for all of hipjit, and [`from_errors!`] lets `?` convert each error in one
//! step (see [`Error`]).
// On docs.rs (`--cfg docsrs`, a nightly rustdoc): each item behind a feature is marked with
// it ("Available on crate feature `testing` only").
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use hip_sys as sys;

// The layers, bottom to top (`docs/architecture.md` draws them and says what each may name):
// the file-system layer and digests, the targets and the code-object reader, the safe layer,
// the compiler, the cache, the JIT; the crate-wide error above them all.
mod digest;
mod fs;
#[doc(hidden)]
pub mod phases;
#[doc(hidden)]
pub mod process;
mod safe;
mod target;

pub mod cache;
pub mod code_object;
pub mod compiler;
pub mod error;
pub mod jit;
#[cfg(feature = "testing")]
pub mod testing;

#[doc(hidden)]
pub use code_object::occupancy;
pub use error::{Error, Result};
#[doc(hidden)]
pub use fs::{read as file_read, stat as file_stat, write as file_write};
pub use safe::{
    cuda, device, event, graph, kernel, launch, library, memory, peer, runtime, stream,
};
pub use target::amdgpu as target_id;

/// The types of a compile -> load -> launch program: `use hipjit::prelude::*;`.
pub mod prelude {
    #[doc(no_inline)]
    pub use crate::args;
    #[doc(no_inline)]
    pub use crate::code_object::{CodeObject, KernelInfo};
    #[doc(no_inline)]
    pub use crate::compiler::CompileOptions;
    #[doc(no_inline)]
    pub use crate::error::{Error, Result};
    #[doc(no_inline)]
    pub use crate::jit::{Jit, JitOptions};
    #[doc(no_inline)]
    pub use crate::safe::device::Device;
    #[doc(no_inline)]
    pub use crate::safe::event::{Event, EventFlags};
    #[doc(no_inline)]
    pub use crate::safe::kernel::Kernel;
    #[doc(no_inline)]
    pub use crate::safe::launch::{Dim3, LaunchConfig};
    #[doc(no_inline)]
    pub use crate::safe::library::Library;
    #[doc(no_inline)]
    pub use crate::safe::memory::{
        DeviceBuffer, DeviceMemory, DeviceMemoryMut, DeviceSlice, DeviceSliceMut, PinnedBuffer,
    };
    #[doc(no_inline)]
    pub use crate::safe::runtime::Runtime;
    #[doc(no_inline)]
    pub use crate::safe::stream::{AsStream, Stream, StreamFlags};
    #[doc(no_inline)]
    pub use crate::target::TargetId;
}

/// The README's and the guide's Rust examples, compiled as doctests.
#[cfg(doctest)]
pub mod guide_doctests {
    #[doc = include_str!("../README.md")]
    pub struct Readme;
    #[doc = include_str!("../docs/library.md")]
    pub struct Library;
    #[doc = include_str!("../docs/compilers.md")]
    pub struct Compilers;
    #[doc = include_str!("../docs/cache.md")]
    pub struct Cache;
    #[doc = include_str!("../docs/many-machines.md")]
    pub struct ManyMachines;
    #[doc = include_str!("../docs/python.md")]
    pub struct Python;
    #[doc = include_str!("../docs/command.md")]
    pub struct Command;
    #[doc = include_str!("../docs/environment.md")]
    pub struct Environment;
    #[doc = include_str!("../docs/compatibility.md")]
    pub struct Compatibility;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/testing.md")]
    pub struct Testing;
    #[doc = include_str!("../docs/architecture.md")]
    pub struct Architecture;
}
