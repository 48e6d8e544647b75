//! Launching kernels: [`LaunchConfig`], [`KernelArgs`] (built with [`args!`](crate::args)),
//! [`Kernel::launch`], and launches checked once then repeated (`prepared`:
//! [`Kernel::prepare`], [`PreparedLaunch`]).
//!
//! Arguments travel as an array of pointers to live values (`kernelParams` of
//! `hipModuleLaunchKernel`): [`KernelArgs`] borrows each value for as long as it exists, so no
//! pointer in it can dangle. The launch path allocates nothing, takes no lock and logs nothing:
//! the pointers sit in a fixed array of [`MAX_KERNEL_ARGS`] entries.
//!
//! # Read-only and written arguments
//! How an argument is borrowed says whether the kernel may write it:
//! - `&buf` (a [`DeviceBuffer`], a [`DeviceSlice`], a [`DeviceSliceMut`]) is a read-only
//!   argument: the kernel must not write through it;
//! - `&mut buf` (a [`DeviceBuffer`] or a [`DeviceSliceMut`], traits [`KernelArgMut`]) is an
//!   argument the kernel may write. The buffer stays exclusively borrowed while the
//!   [`KernelArgs`] lives, so no other view of it can be handed to the same launch or read on
//!   the host meanwhile;
//! - scalars (`&n`, any [`DeviceCopy`] value) are passed by value and never written back;
//!   `&mut n` is refused at compile time.
//!
//! ```compile_fail,E0502
//! # fn f(buf: &mut hipjit::memory::DeviceBuffer<f32>) {
//! let args = hipjit::args![&mut *buf, &4u32];
//! let _ = buf.to_vec(); // `buf` is still borrowed for writing by `args`
//! drop(args);
//! # }
//! ```
//!
//! The borrow ends when the [`KernelArgs`] is dropped, not when the kernel has finished: the
//! host read that follows must be ordered after the kernel by its stream (the rule in
//! [`crate::safe::stream`]; `to_vec_on` on the launch's stream does
//! this).
//!
//! The code object's metadata (LLVM AMDGPUUsage, code object v3+ "Kernel Argument Metadata
//! Map": `.access`, `.actual_access`, each `read_only`, `write_only` or `read_write`) is checked
//! where it speaks: an argument it says the kernel writes, passed as a shared borrow, is
//! refused before the launch ([`LaunchError::ArgWritten`]). What compilers record (measured):
//! hipcc 7.0.2 (clang 21) gives `.actual_access` of `__restrict__` pointers (`read_only`,
//! `write_only`); Debian's hipcc 5.2.3 gives only `.access: read_only` of a
//! `const T* __restrict__`; neither says anything of a pointer without `__restrict__`, and NVIDIA
//! cubins carry no access at all. Where the metadata is silent the borrow is the caller's
//! statement, part of [`Kernel::launch`]'s safety contract. Passing `&mut` to a read-only
//! parameter is always allowed.

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::safe::error::{Dim, LaunchError};
use crate::safe::kernel::{ArgShape, Kernel};
use crate::safe::memory::{DeviceBuffer, DeviceCopy, DeviceSlice, DeviceSliceMut};
use crate::safe::stream::AsStream;

#[doc(hidden)]
pub mod prepared;
pub use prepared::PreparedLaunch;

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
    /// A launch of `grid` blocks of `block` threads without dynamic LDS; each is a `u32`
    /// (x), a `(u32, u32)` or a `(u32, u32, u32)`. Add dynamic LDS with
    /// [`LaunchConfig::with_dynamic_lds`].
    ///
    /// ```
    /// use hipjit::launch::{Dim3, LaunchConfig};
    /// let cfg = LaunchConfig::new((64, 2), 256).with_dynamic_lds(1024);
    /// assert_eq!(cfg.grid, Dim3 { x: 64, y: 2, z: 1 });
    /// assert_eq!(cfg.block, Dim3 { x: 256, y: 1, z: 1 });
    /// assert_eq!(cfg.dynamic_lds_bytes, 1024);
    /// ```
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            dynamic_lds_bytes: 0,
        }
    }

    /// The same launch with `bytes` of dynamic LDS per block (`sharedMemBytes`).
    pub fn with_dynamic_lds(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            dynamic_lds_bytes: bytes,
            ..self
        }
    }

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

// SAFETY: a view is passed as its device pointer, which lives inside the view.
unsafe impl<T: DeviceCopy> KernelArg for DeviceSlice<'_, T> {
    fn arg_ptr(&self) -> *const c_void {
        self.ptr_slot()
    }
    fn arg_size(&self) -> u32 {
        std::mem::size_of::<hip_sys::hipDeviceptr_t>() as u32
    }
}

// SAFETY: as for DeviceSlice.
unsafe impl<T: DeviceCopy> KernelArg for DeviceSliceMut<'_, T> {
    fn arg_ptr(&self) -> *const c_void {
        self.ptr_slot()
    }
    fn arg_size(&self) -> u32 {
        std::mem::size_of::<hip_sys::hipDeviceptr_t>() as u32
    }
}

/// Device memory a kernel may write: passed to [`KernelArgs::arg`] as `&mut`.
///
/// # Safety
/// As [`KernelArg`]; the value must own or exclusively borrow the memory it points at.
pub unsafe trait KernelArgMut: KernelArg {}

// SAFETY: the buffer owns its memory.
unsafe impl<T: DeviceCopy> KernelArgMut for DeviceBuffer<T> {}
// SAFETY: the view borrows its buffer exclusively.
unsafe impl<T: DeviceCopy> KernelArgMut for DeviceSliceMut<'_, T> {}

/// What [`KernelArgs::arg`] takes: `&T` for a read-only argument ([`KernelArg`]), `&mut T`
/// for one the kernel may write ([`KernelArgMut`]).
pub trait IntoKernelArg<'a> {
    /// The argument's pointer, size in bytes and whether the kernel may write it.
    fn into_kernel_arg(self) -> (*const c_void, u32, bool);
}

impl<'a, T: KernelArg + ?Sized> IntoKernelArg<'a> for &'a T {
    #[inline]
    fn into_kernel_arg(self) -> (*const c_void, u32, bool) {
        (self.arg_ptr(), self.arg_size(), false)
    }
}

impl<'a, T: KernelArgMut + ?Sized> IntoKernelArg<'a> for &'a mut T {
    #[inline]
    fn into_kernel_arg(self) -> (*const c_void, u32, bool) {
        (self.arg_ptr(), self.arg_size(), true)
    }
}

/// The arguments of one launch: pointers to values borrowed for `'a`, in a fixed array, and
/// which of them the kernel may write (a bit each).
///
/// ```no_run
/// # use hipjit::{args, launch::KernelArgs};
/// # fn f(x: &hipjit::memory::DeviceBuffer<f32>, y: &mut hipjit::memory::DeviceBuffer<f32>) {
/// let n = 1024u32;
/// let a = 2.0f32;
/// let one = args![&mut *y, x, &a, &n];
/// assert!(one.is_writable(0) && !one.is_writable(1));
/// drop(one);
/// let two = KernelArgs::new().arg(&mut *y).arg(x).arg(&a).arg(&n);
/// assert_eq!(two.len(), 4);
/// # }
/// ```
pub struct KernelArgs<'a> {
    ptrs: [*mut c_void; MAX_KERNEL_ARGS],
    sizes: [u32; MAX_KERNEL_ARGS],
    writable: u32,
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
            writable: 0,
            len: 0,
            overflow: false,
            _borrow: PhantomData,
        }
    }

    /// Appends `value`, borrowed for `'a`: `&x` read-only, `&mut buf` written by the kernel
    /// (module documentation). Past [`MAX_KERNEL_ARGS`] the launch fails with
    /// [`LaunchError::TooManyArgs`].
    #[inline]
    pub fn arg(mut self, value: impl IntoKernelArg<'a>) -> KernelArgs<'a> {
        self.push(value);
        self
    }

    /// Appends `value` in place.
    #[inline]
    pub fn push(&mut self, value: impl IntoKernelArg<'a>) {
        if self.len == MAX_KERNEL_ARGS {
            self.overflow = true;
            return;
        }
        let (ptr, size, writable) = value.into_kernel_arg();
        self.ptrs[self.len] = ptr as *mut c_void;
        self.sizes[self.len] = size;
        self.writable |= u32::from(writable) << self.len;
        self.len += 1;
    }

    /// Whether argument `index` was passed as `&mut` (the kernel may write it); `false` past
    /// the end.
    pub fn is_writable(&self, index: usize) -> bool {
        index < self.len && self.writable & (1 << index) != 0
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

    /// The `kernelParams` array: pointers to the borrowed values.
    /// Whether these arguments have `shape` (the kernel's, [`ArgShape`]): the same count and
    /// sizes, and every argument the kernel writes passed as `&mut`.
    #[inline]
    pub(crate) fn has_shape(&self, shape: &ArgShape) -> bool {
        if self.overflow || self.len != shape.len || self.writable & shape.written != shape.written
        {
            return false;
        }
        // Element by element over the few arguments there are: no call into memcmp.
        let mut i = 0;
        while i < shape.len && i < MAX_KERNEL_ARGS {
            if self.sizes[i] != shape.sizes[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    pub(crate) fn raw_ptrs(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}

/// Builds a [`KernelArgs`] from references to the arguments, in order:
/// `args![&mut y, &x, &n]` (`&mut` for a buffer the kernel writes, `&` for one it only reads
/// and for scalars). The arguments stay borrowed while the [`KernelArgs`] exists:
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

/// Checks argument `index` against its metadata: the size, and a shared borrow of an argument
/// the metadata says the kernel writes.
fn check_arg(
    kernel: &str,
    index: usize,
    meta: &crate::code_object::KernelArg,
    given: u32,
    writable: bool,
) -> Result<(), LaunchError> {
    if meta.size != given {
        return Err(LaunchError::ArgSize {
            kernel: kernel.to_owned(),
            index,
            name: meta.name.clone(),
            expected: meta.size,
            given,
        });
    }
    if !writable && meta.is_written() {
        let access = [&meta.actual_access, &meta.access]
            .into_iter()
            .flatten()
            .find(|a| *a == "write_only" || *a == "read_write")
            .cloned()
            .unwrap_or_default();
        return Err(LaunchError::ArgWritten {
            kernel: kernel.to_owned(),
            index,
            name: meta.name.clone(),
            access,
        });
    }
    Ok(())
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

/// How a launch reaches the runtime, decided once per launch (or once per [`PreparedLaunch`]).
#[derive(Clone, Copy)]
pub(crate) enum Via {
    /// Bind the device (`hipGetDevice`, `hipSetDevice` when it differs), then the table's
    /// `hipModuleLaunchKernel`: the AMD runtime, and the null stream on NVIDIA.
    Bind(hip_sys::pfn::hipModuleLaunchKernel),
    /// HIP's NVIDIA platform with a stream: `cuLaunchKernel` first, the bind only when the
    /// driver refuses the thread's current context
    /// ([`crate::safe::cuda::shim::launch_on_stream`]).
    CudaStream,
}

impl Via {
    /// The way for a launch on `stream` (raw; null for the null stream) of a kernel of `device`.
    #[inline]
    pub(crate) fn of(device: &crate::safe::device::Device, stream: hip_sys::hipStream_t) -> Via {
        let rt = device.runtime();
        if rt.platform() == crate::safe::runtime::Platform::Nvidia && !stream.is_null() {
            Via::CudaStream
        } else {
            Via::Bind(rt.api().hipModuleLaunchKernel)
        }
    }

    /// Queues the launch; the runtime's error names `hipModuleLaunchKernel`.
    ///
    /// # Safety
    /// `func` is a live kernel of `device`, `stream` a live stream of `device` (or null),
    /// `params` points at the kernel's arguments, live for the call.
    #[inline(always)]
    pub(crate) unsafe fn launch(
        self,
        device: &crate::safe::device::Device,
        func: hip_sys::hipFunction_t,
        cfg: &LaunchConfig,
        stream: hip_sys::hipStream_t,
        params: *mut *mut c_void,
    ) -> Result<(), LaunchError> {
        let rc = match self {
            Via::Bind(launch) => {
                device.bind()?;
                // SAFETY: the caller's contract; the device is bound; `extra` is NULL.
                unsafe {
                    launch(
                        func,
                        cfg.grid.x,
                        cfg.grid.y,
                        cfg.grid.z,
                        cfg.block.x,
                        cfg.block.y,
                        cfg.block.z,
                        cfg.dynamic_lds_bytes,
                        stream,
                        params,
                        std::ptr::null_mut(),
                    )
                }
            }
            // SAFETY: the caller's contract; the stream is non-null (Via::of).
            Via::CudaStream => unsafe {
                crate::safe::cuda::shim::launch_on_stream(
                    device.ordinal(),
                    func,
                    [cfg.grid.x, cfg.grid.y, cfg.grid.z],
                    [cfg.block.x, cfg.block.y, cfg.block.z],
                    cfg.dynamic_lds_bytes,
                    stream,
                    params,
                )
            },
        };
        if rc != hip_sys::hipSuccess {
            return Err(device.runtime().error(rc, "hipModuleLaunchKernel").into());
        }
        Ok(())
    }
}

impl Kernel {
    /// Checks `cfg` and `args` against the device's limits, the kernel's attributes and, when
    /// the code object declares the kernel, its explicit arguments (count and sizes). Runs
    /// before every launch; allocates only to build an error.
    ///
    /// Errors: the [`LaunchError`] naming what is out of range (dimension, argument index and
    /// name).
    #[inline]
    pub fn check_launch(
        &self,
        cfg: &LaunchConfig,
        args: &KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        if self.fits(cfg, args) {
            return Ok(());
        }
        self.check_launch_in_full(cfg, args)
    }

    /// [`Kernel::check_launch`]'s fast path: limits folded once per kernel, the arguments'
    /// shape as the metadata declares it. It accepts only what the full checks accept; `false`
    /// says nothing (the full checks decide, and name what is wrong).
    #[inline]
    pub(crate) fn fits(&self, cfg: &LaunchConfig, args: &KernelArgs<'_>) -> bool {
        self.inner.limits.within(cfg)
            && self
                .inner
                .shape
                .as_ref()
                .is_some_and(|shape| args.has_shape(shape))
    }

    /// [`Kernel::check_launch`] without its fast path: every limit compared, each error named.
    #[inline(never)]
    pub(crate) fn check_launch_in_full(
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
        let raised = *self.inner.raised_dynamic_lds.lock();
        if props.lds_per_block > 0 && lds > props.lds_per_block && cfg.dynamic_lds_bytes > raised {
            return Err(LaunchError::Lds {
                static_lds: u64::from(self.inner.static_lds),
                dynamic_lds: u64::from(cfg.dynamic_lds_bytes),
                max: props.lds_per_block,
            });
        }
        if self
            .inner
            .shape
            .as_ref()
            .is_some_and(|shape| args.has_shape(shape))
        {
            return Ok(());
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
                    kernel: self.inner.name.to_string(),
                    expected,
                    given: args.len,
                });
            }
            for (index, (meta, &given)) in explicit.zip(args.sizes()).enumerate() {
                check_arg(
                    &self.inner.name,
                    index,
                    meta,
                    given,
                    args.is_writable(index),
                )?;
            }
        }
        Ok(())
    }

    /// Launches the kernel on `stream` (`hipModuleLaunchKernel`), after [`Kernel::check_launch`].
    /// Returns once the launch is queued; synchronize the stream to wait for it. On HIP's
    /// NVIDIA platform a launch on a stream is `cuLaunchKernel` itself, the device's primary
    /// context made current (and the launch made again) only when the driver refuses the
    /// thread's current context (`shim`); the null stream, and every AMD launch,
    /// binds the device first.
    ///
    /// Errors: a [`LaunchError`] from the checks (among them `hipErrorInvalidHandle` when
    /// `stream` belongs to another loaded runtime), or the runtime's error.
    ///
    /// # Safety
    /// The arguments must be what the kernel's code expects (type and meaning, not only size);
    /// the kernel must write only the arguments passed as `&mut` (module documentation), and
    /// only access memory that stays valid until it has finished: inside the buffers and views
    /// passed to it (a buffer freed with `hipFree` waits for the device; one allocated on
    /// another stream with [`DeviceBuffer::alloc_async`] needs
    /// [`DeviceBuffer::use_on`] before and [`DeviceBuffer::free_after`] after this call, with
    /// this launch's stream).
    pub unsafe fn launch(
        &self,
        stream: &impl AsStream,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<(), LaunchError> {
        self.check_launch(&cfg, args)?;
        self.check_stream(stream, "hipModuleLaunchKernel")?;
        let d = self.inner.lib.device();
        let via = Via::of(d, stream.as_raw());
        // SAFETY: `args.ptrs[..len]` point at live borrowed values (KernelArgs' lifetime); the
        // caller guarantees they match the kernel; the function is this kernel's, the stream
        // is of its device (checked above).
        unsafe { via.launch(d, self.inner.func, &cfg, stream.as_raw(), args.raw_ptrs()) }
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
        self.check_stream(stream, "hipModuleLaunchCooperativeKernel")?;
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

    /// Refuses a stream of another loaded runtime (`hipErrorInvalidHandle` naming `call` and
    /// both runtimes, as the memory and event entry points do), then a stream of another device
    /// of this runtime ([`LaunchError::WrongDevice`]). The runtime is checked first: ordinals of
    /// two runtimes are not comparable.
    pub(crate) fn check_stream(
        &self,
        stream: &impl AsStream,
        call: &'static str,
    ) -> Result<(), LaunchError> {
        self.inner
            .lib
            .device()
            .check_same_runtime(stream.device(), "stream", call)?;
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

    fn meta(access: Option<&str>, actual: Option<&str>) -> crate::code_object::KernelArg {
        crate::code_object::KernelArg {
            name: Some("out".into()),
            type_name: None,
            offset: 0,
            size: 8,
            value_kind: "global_buffer".into(),
            address_space: Some("global".into()),
            access: access.map(str::to_owned),
            actual_access: actual.map(str::to_owned),
        }
    }

    #[test]
    fn argument_the_metadata_says_is_written_must_be_passed_mutably() {
        for (access, actual) in [
            (Some("write_only"), None),
            (None, Some("read_write")),
            (Some("read_only"), Some("write_only")),
        ] {
            let m = meta(access, actual);
            let err = super::check_arg("k", 1, &m, 8, false).unwrap_err();
            assert!(
                err.to_string().starts_with(
                    "kernel k argument 1 (out): the code object says the kernel writes it"
                ),
                "{err}"
            );
            assert!(super::check_arg("k", 1, &m, 8, true).is_ok());
        }
    }

    #[test]
    fn read_only_or_silent_metadata_accepts_either_borrow() {
        for m in [meta(Some("read_only"), None), meta(None, None)] {
            assert!(super::check_arg("k", 0, &m, 8, false).is_ok());
            assert!(super::check_arg("k", 0, &m, 8, true).is_ok());
        }
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
