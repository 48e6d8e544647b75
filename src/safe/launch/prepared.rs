//! Prepared launches: a kernel, a stream and a launch configuration checked once
//! ([`Kernel::prepare`]), then launched many times with new argument values of the same sizes
//! ([`PreparedLaunch::launch`]).
//!
//! What [`Kernel::launch`] checks on every call is checked once by [`Kernel::prepare`]: the
//! configuration against the device's limits and the kernel's attributes, the stream's device,
//! and the argument list (count and sizes) against the code object's metadata
//! (`amdhsa.kernels[].args`, LLVM AMDGPUUsage "Code Object V3 and Above Metadata"). A launch
//! then compares the argument sizes with the prepared ones, and the arguments passed as `&mut`
//! with those the metadata says the kernel writes (a few integers; no metadata, no
//! properties, no table lookup), and makes the call chosen at preparation: on AMD, the
//! device bound and the entry point copied out of the runtime's table; on HIP's NVIDIA
//! platform with a stream, `cuLaunchKernel` itself, the context bound only when the driver
//! refuses the thread's current one (`shim`).
//!
//! Dangling pointers are ruled out as for [`Kernel::launch`]: each launch takes a
//! [`KernelArgs`] borrowing its values, the [`PreparedLaunch`] borrows its stream (`'s`) and
//! holds a clone of the [`Kernel`], which keeps the code object loaded.

use std::marker::PhantomData;

use hip_sys as sys;

use super::{KernelArgs, LaunchConfig, Via, MAX_KERNEL_ARGS};
use crate::safe::device::Device;
use crate::safe::error::LaunchError;
use crate::safe::kernel::ArgShape;
use crate::safe::kernel::Kernel;
use crate::safe::stream::AsStream;

/// A launch of one kernel on one stream with one configuration, checked once; see the module
/// documentation. `Send + Sync`; borrows its stream for `'s`.
pub struct PreparedLaunch<'s> {
    kernel: Kernel,
    device: Device,
    via: Via,
    func: sys::hipFunction_t,
    stream: sys::hipStream_t,
    cfg: LaunchConfig,
    /// The argument count and sizes prepared, and the arguments the code object's metadata
    /// says the kernel writes (a launch must pass them as `&mut`, as
    /// [`Kernel::check_launch`] requires).
    shape: ArgShape,
    _stream: PhantomData<&'s ()>,
}

// SAFETY: the raw handles are the kernel's function (kept alive by `kernel`) and the stream
// (borrowed for 's), both usable from any thread; the device is bound before each launch.
unsafe impl Send for PreparedLaunch<'_> {}
// SAFETY: `&PreparedLaunch` mutates nothing.
unsafe impl Sync for PreparedLaunch<'_> {}

impl std::fmt::Debug for PreparedLaunch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedLaunch")
            .field("kernel", &self.kernel.name())
            .field("cfg", &self.cfg)
            .field("arg_sizes", &self.arg_sizes())
            .finish()
    }
}

impl Kernel {
    /// Checks a launch of this kernel on `stream` with `cfg` and arguments shaped like `args`
    /// once ([`Kernel::check_launch`] and the stream's device), and returns it prepared: each
    /// [`PreparedLaunch::launch`] then skips those checks. `args` gives the argument sizes; its
    /// values are not kept.
    ///
    /// Errors: the [`LaunchError`] of [`Kernel::check_launch`], [`LaunchError::Hip`] with
    /// `hipErrorInvalidHandle` when `stream` belongs to another loaded runtime, or
    /// [`LaunchError::WrongDevice`].
    pub fn prepare<'s>(
        &self,
        stream: &'s impl AsStream,
        cfg: LaunchConfig,
        args: &KernelArgs<'_>,
    ) -> Result<PreparedLaunch<'s>, LaunchError> {
        self.check_launch(&cfg, args)?;
        self.check_stream(stream, "hipModuleLaunchKernel")?;
        let device = self.inner.lib.device().clone();
        let via = Via::of(&device, stream.as_raw());
        let shape = ArgShape {
            len: args.len,
            sizes: args.sizes,
            written: self.inner.shape.map_or(0, |s| s.written),
        };
        Ok(PreparedLaunch {
            kernel: self.clone(),
            device,
            via,
            func: self.inner.func,
            stream: stream.as_raw(),
            cfg,
            shape,
            _stream: PhantomData,
        })
    }
}

impl PreparedLaunch<'_> {
    /// Launches the kernel (`hipModuleLaunchKernel`; on NVIDIA `cuLaunchKernel`) with `args`,
    /// whose count and sizes must be those given to [`Kernel::prepare`]. Returns once the
    /// launch is queued.
    ///
    /// Errors: [`LaunchError::TooManyArgs`], [`LaunchError::ArgCount`] or
    /// [`LaunchError::ArgSize`] when `args` is not shaped as prepared,
    /// [`LaunchError::ArgWritten`] for an argument the metadata says the kernel writes passed as
    /// a shared borrow, or the runtime's error.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    #[inline]
    pub unsafe fn launch(&self, args: &mut KernelArgs<'_>) -> Result<(), LaunchError> {
        if !args.has_shape(&self.shape) {
            return Err(self.shape_error(args));
        }
        // SAFETY: `args.ptrs[..len]` point at live borrowed values (KernelArgs' lifetime) of the
        // prepared sizes; the caller guarantees they match the kernel; the function is kept
        // loaded by `self.kernel` and the stream, of the kernel's device, borrowed for 's.
        unsafe {
            self.via.launch(
                &self.device,
                self.func,
                &self.cfg,
                self.stream,
                args.raw_ptrs(),
            )
        }
    }

    /// The kernel launched.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The launch configuration checked.
    pub fn config(&self) -> LaunchConfig {
        self.cfg
    }

    /// The argument sizes in bytes each launch must pass, in order.
    pub fn arg_sizes(&self) -> &[u32] {
        &self.shape.sizes[..self.shape.len]
    }

    #[cold]
    fn shape_error(&self, args: &KernelArgs<'_>) -> LaunchError {
        if args.overflow {
            return LaunchError::TooManyArgs {
                max: MAX_KERNEL_ARGS,
            };
        }
        let kernel = self.kernel.name().to_owned();
        if args.len == self.shape.len && args.sizes() == self.arg_sizes() {
            // The sizes match: a written argument passed as a shared borrow.
            if let Some(info) = self.kernel.info() {
                let explicit = info
                    .args
                    .iter()
                    .filter(|a| !a.value_kind.starts_with("hidden_"));
                for (index, (meta, &given)) in explicit.zip(args.sizes()).enumerate() {
                    if let Err(e) =
                        super::check_arg(&kernel, index, meta, given, args.is_writable(index))
                    {
                        return e;
                    }
                }
            }
        }
        if args.len != self.shape.len {
            return LaunchError::ArgCount {
                kernel,
                expected: self.shape.len,
                given: args.len,
            };
        }
        let explicit: Vec<Option<String>> = self
            .kernel
            .info()
            .map(|i| {
                i.args
                    .iter()
                    .filter(|a| !a.value_kind.starts_with("hidden_"))
                    .map(|a| a.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let (index, (&expected, &given)) = self
            .arg_sizes()
            .iter()
            .zip(args.sizes())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((0, (&0, &0)));
        LaunchError::ArgSize {
            kernel,
            index,
            name: explicit.get(index).cloned().flatten(),
            expected,
            given,
        }
    }
}
