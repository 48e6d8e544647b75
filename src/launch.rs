//! Launching kernels: [`LaunchConfig`], [`KernelArgs`] (built with [`args!`](crate::args)) and
//! [`Kernel::launch`].
//!
//! Arguments travel as an array of pointers to live values (`kernelParams` of
//! `hipModuleLaunchKernel`): [`KernelArgs`] borrows each value for as long as it exists, so no
//! pointer in it can dangle. The launch path allocates nothing, takes no lock and logs nothing:
//! the pointers sit in a fixed array of [`MAX_KERNEL_ARGS`] entries.

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::error::{Dim, LaunchError};
use crate::kernel::Kernel;
use crate::memory::{DeviceBuffer, DeviceCopy};
use crate::stream::AsStream;

/// The most arguments one launch can carry.
pub const MAX_KERNEL_ARGS: usize = 32;

/// Three dimensions (x, y, z) of a grid (in blocks) or a block (in threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x
    pub x: u32,
    /// y
    pub y: u32,
    /// z
    pub z: u32,
}

impl Dim3 {
    /// x * y * z, saturating at `u64::MAX` (three `u32` factors can exceed `u64`).
    pub fn product(self) -> u64 {
        (u64::from(self.x) * u64::from(self.y)).saturating_mul(u64::from(self.z))
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

/// Grid, block and dynamic LDS of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic LDS per block, bytes (`sharedMemBytes`).
    pub dynamic_lds_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of at least `n` threads in blocks of `block` threads (grid rounded up).
    pub fn for_num_elems(n: u32, block: u32) -> LaunchConfig {
        let block = block.max(1);
        LaunchConfig {
            grid: Dim3::from(n.div_ceil(block).max(1)),
            block: Dim3::from(block),
            dynamic_lds_bytes: 0,
        }
    }
}

/// A value that can be a kernel argument: it is passed as a pointer to its bytes.
///
/// # Safety
/// [`KernelArg::arg_ptr`] must point at [`KernelArg::arg_size`] readable bytes that live as long
/// as `self`, laid out as the kernel expects the argument.
pub unsafe trait KernelArg {
    /// The address of the argument's bytes.
    fn arg_ptr(&self) -> *const c_void;
    /// The argument's size in bytes.
    fn arg_size(&self) -> u32;
}

// SAFETY: a plain value is passed by its own bytes.
unsafe impl<T: DeviceCopy> KernelArg for T {
    fn arg_ptr(&self) -> *const c_void {
        self as *const T as *const c_void
    }
    fn arg_size(&self) -> u32 {
        // A value of 4 GiB or more cannot be a kernel argument: saturate so that it never
        // matches an argument size of the kernel's metadata after truncation.
        u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX)
    }
}

// SAFETY: a buffer is passed as its device pointer, which lives inside the buffer.
unsafe impl<T: DeviceCopy> KernelArg for DeviceBuffer<T> {
    fn arg_ptr(&self) -> *const c_void {
        self.ptr_slot()
    }
    fn arg_size(&self) -> u32 {
        std::mem::size_of::<hip_sys::hipDeviceptr_t>() as u32
    }
}

/// The arguments of one launch: pointers to values borrowed for `'a`, in a fixed array.
///
/// ```no_run
/// # use hipjit::{args, launch::KernelArgs};
/// # fn f(buf: &hipjit::memory::DeviceBuffer<f32>) {
/// let n = 1024u32;
/// let x = 2.0f32;
/// let a = args![buf, &n, &x];
/// let b = KernelArgs::new().arg(buf).arg(&n).arg(&x);
/// assert_eq!(a.len(), b.len());
/// # }
/// ```
pub struct KernelArgs<'a> {
    ptrs: [*mut c_void; MAX_KERNEL_ARGS],
    sizes: [u32; MAX_KERNEL_ARGS],
    len: usize,
    overflow: bool,
    _borrow: PhantomData<&'a ()>,
}

impl Default for KernelArgs<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> KernelArgs<'a> {
    /// No arguments.
    pub fn new() -> KernelArgs<'a> {
        KernelArgs {
            ptrs: [std::ptr::null_mut(); MAX_KERNEL_ARGS],
            sizes: [0; MAX_KERNEL_ARGS],
            len: 0,
            overflow: false,
            _borrow: PhantomData,
        }
    }

    /// Appends `value`, borrowed for `'a`. Past [`MAX_KERNEL_ARGS`] the launch fails with
    /// [`LaunchError::TooManyArgs`].
    #[inline]
    pub fn arg<T: KernelArg + ?Sized>(mut self, value: &'a T) -> KernelArgs<'a> {
        self.push(value);
        self
    }

    /// Appends `value` in place.
    #[inline]
    pub fn push<T: KernelArg + ?Sized>(&mut self, value: &'a T) {
        if self.len == MAX_KERNEL_ARGS {
            self.overflow = true;
            return;
        }
        self.ptrs[self.len] = value.arg_ptr() as *mut c_void;
        self.sizes[self.len] = value.arg_size();
        self.len += 1;
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Argument sizes in bytes, in order.
    pub fn sizes(&self) -> &[u32] {
        &self.sizes[..self.len]
    }
}

/// Builds a [`KernelArgs`] from references to the arguments, in order:
/// `args![&buf, &n, &x]`. The arguments stay borrowed while the [`KernelArgs`] exists:
///
/// ```compile_fail,E0597
/// let args = {
///     let n = 1u32;
///     hipjit::args![&n]
/// }; // `n` is gone, a pointer to it would dangle
/// # drop(args);
/// ```
#[macro_export]
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        $crate::launch::KernelArgs::new()$(.arg($arg))*
    };
}

fn check_dims(what: &'static str, d: Dim3, max: [u32; 3]) -> Result<(), LaunchError> {
    for (dim, value, max) in [
        (Dim::X, d.x, max[0]),
        (Dim::Y, d.y, max[1]),
        (Dim::Z, d.z, max[2]),
    ] {
        if value == 0 {
            return Err(LaunchError::ZeroDim { what, dim });
        }
        if max > 0 && value > max {
            return Err(if what == "block" {
                LaunchError::BlockDim { dim, value, max }
            } else {
                LaunchError::GridDim { dim, value, max }
            });
        }
    }
    Ok(())
}

impl Kernel {
    /// Checks `cfg` and `args` against the device's limits, the kernel's attributes and, when
    /// the code object declares the kernel, its explicit arguments (count and sizes). Runs
    /// before every launch; allocates only to build an error.
    ///
    /// Errors: the [`LaunchError`] naming what is out of range (dimension, argument index and
    /// name).
    pub fn check_launch(
        &self,
        cfg: &LaunchConfig,
        args: &KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        let props = self.inner.lib.device().properties();
        check_dims("block", cfg.block, props.max_block_dims)?;
        check_dims("grid", cfg.grid, props.max_grid_dims)?;
        let threads = cfg.block.product();
        if props.max_threads_per_block > 0 && threads > u64::from(props.max_threads_per_block) {
            return Err(LaunchError::BlockThreads {
                threads,
                which: "device",
                max: u64::from(props.max_threads_per_block),
            });
        }
        if self.inner.max_threads > 0 && threads > u64::from(self.inner.max_threads) {
            return Err(LaunchError::BlockThreads {
                threads,
                which: "kernel",
                max: u64::from(self.inner.max_threads),
            });
        }
        let lds = u64::from(self.inner.static_lds) + u64::from(cfg.dynamic_lds_bytes);
        let raised = self
            .inner
            .raised_dynamic_lds
            .load(std::sync::atomic::Ordering::Relaxed);
        if props.lds_per_block > 0 && lds > props.lds_per_block && cfg.dynamic_lds_bytes > raised {
            return Err(LaunchError::Lds {
                static_lds: u64::from(self.inner.static_lds),
                dynamic_lds: u64::from(cfg.dynamic_lds_bytes),
                max: props.lds_per_block,
            });
        }
        if args.overflow {
            return Err(LaunchError::TooManyArgs {
                max: MAX_KERNEL_ARGS,
            });
        }
        if let Some(info) = self.info() {
            let explicit = info
                .args
                .iter()
                .filter(|a| !a.value_kind.starts_with("hidden_"));
            let expected = explicit.clone().count();
            if expected != args.len {
                return Err(LaunchError::ArgCount {
                    kernel: self.inner.name.clone(),
                    expected,
                    given: args.len,
                });
            }
            for (index, (meta, &given)) in explicit.zip(args.sizes()).enumerate() {
                if meta.size != given {
                    return Err(LaunchError::ArgSize {
                        kernel: self.inner.name.clone(),
                        index,
                        name: meta.name.clone(),
                        expected: meta.size,
                        given,
                    });
                }
            }
        }
        Ok(())
    }

    /// Launches the kernel on `stream` (`hipModuleLaunchKernel`), after [`Kernel::check_launch`].
    /// Returns once the launch is queued; synchronize the stream to wait for it.
    ///
    /// Errors: a [`LaunchError`] from the checks, or the runtime's error.
    ///
    /// # Safety
    /// The arguments must be what the kernel's code expects (type and meaning, not only size),
    /// and the kernel must only access memory that stays valid until it has finished: device
    /// buffers passed to it are freed with `hipFree`, which waits for the device, but the
    /// kernel must not read or write outside them.
    pub unsafe fn launch(
        &self,
        stream: &impl AsStream,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        self.check_launch(&cfg, args)?;
        self.check_stream(stream)?;
        let d = self.inner.lib.device();
        d.bind()?;
        let rt = d.runtime();
        // SAFETY: `args.ptrs[..len]` point at live borrowed values (KernelArgs' lifetime); the
        // caller guarantees they match the kernel; `extra` is NULL.
        rt.check(
            unsafe {
                (rt.api().hipModuleLaunchKernel)(
                    self.inner.func,
                    cfg.grid.x,
                    cfg.grid.y,
                    cfg.grid.z,
                    cfg.block.x,
                    cfg.block.y,
                    cfg.block.z,
                    cfg.dynamic_lds_bytes,
                    stream.as_raw(),
                    args.ptrs.as_mut_ptr() as _,
                    std::ptr::null_mut(),
                )
            },
            "hipModuleLaunchKernel",
        )?;
        Ok(())
    }

    /// A cooperative launch (`hipModuleLaunchCooperativeKernel`): all blocks are resident at
    /// once, so grid-wide synchronization works. Besides [`Kernel::check_launch`], checks the
    /// grid against occupancy x compute units when the runtime reports occupancy.
    ///
    /// Errors: [`LaunchError::NoCooperativeLaunch`] when the runtime lacks it (HIP 5.2),
    /// [`LaunchError::CooperativeTooLarge`], or the runtime's error.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    pub unsafe fn launch_cooperative(
        &self,
        stream: &impl AsStream,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        let d = self.inner.lib.device();
        let rt = d.runtime();
        let launch = rt
            .api()
            .hipModuleLaunchCooperativeKernel
            .ok_or(LaunchError::NoCooperativeLaunch)?;
        self.check_launch(&cfg, args)?;
        self.check_stream(stream)?;
        let threads = u32::try_from(cfg.block.product()).unwrap_or(u32::MAX);
        // Without the occupancy entry point the runtime's own check
        // (hipErrorCooperativeLaunchTooLarge) is the only one; a failing query is an error.
        let occupancy = self
            .occupancy(threads, cfg.dynamic_lds_bytes as usize)
            .transpose()?;
        if let Some(per_cu) = occupancy {
            let cus = d.properties().compute_units;
            let max = u64::from(per_cu) * u64::from(cus);
            if cfg.grid.product() > max {
                return Err(LaunchError::CooperativeTooLarge {
                    blocks: cfg.grid.product(),
                    max,
                    per_cu,
                    cus,
                });
            }
        }
        d.bind()?;
        // SAFETY: as in `launch`.
        rt.check(
            unsafe {
                launch(
                    self.inner.func,
                    cfg.grid.x,
                    cfg.grid.y,
                    cfg.grid.z,
                    cfg.block.x,
                    cfg.block.y,
                    cfg.block.z,
                    cfg.dynamic_lds_bytes,
                    stream.as_raw(),
                    args.ptrs.as_mut_ptr() as _,
                )
            },
            "hipModuleLaunchCooperativeKernel",
        )?;
        Ok(())
    }

    fn check_stream(&self, stream: &impl AsStream) -> Result<(), LaunchError> {
        if stream.device().same_as(self.inner.lib.device()) {
            Ok(())
        } else {
            Err(LaunchError::WrongDevice {
                stream: stream.device().ordinal(),
                kernel: self.inner.lib.device().ordinal(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Dim3, KernelArg};

    #[test]
    fn argument_of_4_gib_or_more_reports_a_saturated_size_not_a_truncated_one() {
        // 2^32 + 4 bytes: truncated to u32 this would read as a 4-byte argument. Zeroed pages
        // are never touched, so the allocation stays virtual.
        type Huge = [u8; (1usize << 32) + 4];
        // SAFETY: all-zero bytes are a valid `[u8; N]`.
        let huge: Box<Huge> = unsafe { Box::<Huge>::new_zeroed().assume_init() };
        assert_eq!(KernelArg::arg_size(&*huge), u32::MAX);
    }

    #[test]
    fn dim3_product_saturates_instead_of_overflowing() {
        let huge = Dim3 {
            x: u32::MAX,
            y: u32::MAX,
            z: u32::MAX,
        };
        assert_eq!(huge.product(), u64::MAX);
        let d = Dim3 { x: 4, y: 8, z: 2 };
        assert_eq!(d.product(), 64);
    }
}
