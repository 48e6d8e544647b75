//! A kernel of a loaded [`Library`]: an owned, shareable handle with its attributes, occupancy
//! and dynamic-LDS limit. Launching is in [`crate::safe::launch`].

use std::fmt;
use std::sync::Arc;

use hip_sys as sys;

use crate::code_object::KernelInfo;
use crate::safe::error::{HipError, LibraryError};
use crate::safe::library::Library;

/// A kernel (`hipFunction_t`) of a [`Library`]: an owned handle, cheap to clone (an `Arc`), that
/// keeps its library loaded, so it can be stored beside or instead of the library and launched
/// from many threads. `Send + Sync`; clones share one handle and its raised dynamic-LDS limit
/// ([`Kernel::set_max_dynamic_lds`]).
///
/// The same type serves both platforms: on HIP's NVIDIA platform the handle is a `CUfunction`
/// (through [`crate::safe::cuda`]).
///
/// ```
/// fn assert_owned<T: Clone + Send + Sync + 'static>() {}
/// assert_owned::<hipjit::kernel::Kernel>();
/// ```
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<Function>,
}

/// What the clones of a [`Kernel`] share.
pub(crate) struct Function {
    pub(crate) lib: Library,
    pub(crate) func: sys::hipFunction_t,
    /// Shared with the library's record of the name (no copy per `Kernel`).
    pub(crate) name: Arc<str>,
    /// Index of the kernel's entry in the library's metadata.
    pub(crate) info: Option<usize>,
    /// Threads per block the kernel allows (attribute, else metadata, else the device's).
    pub(crate) max_threads: u32,
    /// Static LDS in bytes (attribute, else metadata, else 0).
    pub(crate) static_lds: u32,
    /// Dynamic LDS in bytes allowed by [`Kernel::set_max_dynamic_lds`] (0: not raised); launches
    /// up to it are not held to the device's default LDS per block. The driver keeps the
    /// attribute per function, so every `Kernel` its library made for this name shares it.
    pub(crate) raised_dynamic_lds: Arc<RaisedLds>,
    /// The explicit arguments of the code object's metadata, as a launch compares them: `None`
    /// without metadata or with more than [`crate::safe::launch::MAX_KERNEL_ARGS`] of them.
    pub(crate) shape: Option<ArgShape>,
    /// The launch limits folded for the launch checks' fast path.
    pub(crate) limits: LaunchLimits,
}

/// The dynamic LDS a function's attribute allows
/// (`hipFuncAttributeMaxDynamicSharedMemorySize`, as [`Kernel::set_max_dynamic_lds`] last set
/// it; 0: not raised), shared by every [`Kernel`] of one function: the driver keeps the
/// attribute per function, whichever `Kernel` set it. The lock makes the driver's call and the
/// record of its value one step.
pub(crate) type RaisedLds = parking_lot::Mutex<u32>;

/// A kernel's function handle and what its launch checks need, as [`Kernel::resolve`] read
/// them: what a [`Library`] keeps per kernel name.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub(crate) func: sys::hipFunction_t,
    pub(crate) info: Option<usize>,
    pub(crate) max_threads: u32,
    pub(crate) static_lds: u32,
    pub(crate) shape: Option<ArgShape>,
    pub(crate) limits: LaunchLimits,
    pub(crate) raised_dynamic_lds: Arc<RaisedLds>,
}

// SAFETY: a hipFunction_t may be used from any thread (see `Function`).
unsafe impl Send for Resolved {}

// SAFETY: a hipFunction_t may be used from any thread; the device is bound before each call.
unsafe impl Send for Function {}
// SAFETY: `&Function` mutates nothing but an atomic.
unsafe impl Sync for Function {}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.inner.name)
            .field("max_threads", &self.inner.max_threads)
            .field("static_lds", &self.inner.static_lds)
            .finish()
    }
}

/// Attributes readable with [`Kernel::attribute`] (`hipFunction_attribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelAttribute {
    /// `HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    MaxThreadsPerBlock,
    /// `HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: static LDS, bytes.
    StaticLdsBytes,
    /// `HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`: private (scratch) memory per thread, bytes.
    PrivateBytes,
    /// `HIP_FUNC_ATTRIBUTE_NUM_REGS`: registers per thread.
    NumRegisters,
    /// `HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: dynamic LDS allowed, bytes.
    MaxDynamicLdsBytes,
}

impl KernelAttribute {
    fn raw(self) -> sys::hipFunction_attribute {
        match self {
            KernelAttribute::MaxThreadsPerBlock => sys::HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            KernelAttribute::StaticLdsBytes => sys::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            KernelAttribute::PrivateBytes => sys::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            KernelAttribute::NumRegisters => sys::HIP_FUNC_ATTRIBUTE_NUM_REGS,
            KernelAttribute::MaxDynamicLdsBytes => {
                sys::HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            }
        }
    }
}

impl Kernel {
    /// What the launch checks need of the function `func` of `lib` (its entry `info` in the
    /// library's metadata): two attributes read from the runtime (`hipFuncGetAttribute`), the
    /// argument shape from the metadata. A library keeps it per kernel name, so that asking for
    /// a kernel again makes no runtime call.
    pub(crate) fn resolve(
        lib: &Library,
        func: sys::hipFunction_t,
        info: Option<usize>,
    ) -> Resolved {
        let meta = info.and_then(|i| lib.kernels().get(i));
        let attribute = |attr| read_attribute(lib, func, attr);
        let max_threads = match attribute(KernelAttribute::MaxThreadsPerBlock) {
            Ok(v) if v > 0 => v as u32,
            _ => match meta.filter(|i| i.max_flat_workgroup_size > 0) {
                Some(i) => i.max_flat_workgroup_size,
                None => lib.device().properties().max_threads_per_block,
            },
        };
        let static_lds = match attribute(KernelAttribute::StaticLdsBytes) {
            Ok(v) if v >= 0 => v as u32,
            _ => meta.map_or(0, |i| i.group_segment_fixed_size),
        };
        Resolved {
            func,
            info,
            max_threads,
            static_lds,
            shape: meta.and_then(ArgShape::of),
            limits: LaunchLimits::new(lib.device().properties(), max_threads, static_lds),
            raised_dynamic_lds: Arc::new(parking_lot::Mutex::new(0)),
        }
    }

    /// The kernel `name` of `lib` from what [`Kernel::resolve`] read.
    pub(crate) fn from_resolved(lib: Library, name: Arc<str>, r: Resolved) -> Kernel {
        Kernel {
            inner: Arc::new(Function {
                lib,
                func: r.func,
                name,
                info: r.info,
                max_threads: r.max_threads,
                static_lds: r.static_lds,
                raised_dynamic_lds: r.raised_dynamic_lds,
                shape: r.shape,
                limits: r.limits,
            }),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The library it belongs to, kept loaded by this kernel.
    pub fn library(&self) -> &Library {
        &self.inner.lib
    }

    /// The device the kernel is loaded on (its library's), e.g. for the events timing it:
    /// `Event::new(kernel.device(), EventFlags::DEFAULT)`.
    pub fn device(&self) -> &crate::safe::device::Device {
        self.inner.lib.device()
    }

    /// Whether `self` and `other` are clones of one handle.
    pub fn same_as(&self, other: &Kernel) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The kernel's entry in the code object's metadata, when the code object declares it.
    pub fn info(&self) -> Option<&KernelInfo> {
        self.inner
            .info
            .and_then(|i| self.inner.lib.kernels().get(i))
    }

    /// The raw handle (valid while this kernel or a clone of it lives).
    pub fn as_raw(&self) -> sys::hipFunction_t {
        self.inner.func
    }

    /// Reads an attribute (`hipFuncGetAttribute`).
    ///
    /// Errors: the runtime's error.
    pub fn attribute(&self, attr: KernelAttribute) -> Result<i32, HipError> {
        read_attribute(&self.inner.lib, self.inner.func, attr)
    }

    /// Threads per block the kernel allows, as used by launch checks
    /// (`HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`, else the metadata's
    /// `.max_flat_workgroup_size`, else the device's limit).
    pub fn max_threads_per_block(&self) -> u32 {
        self.inner.max_threads
    }

    /// Static LDS in bytes, as used by launch checks (`HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`,
    /// else the metadata's `.group_segment_fixed_size`).
    pub fn static_lds_bytes(&self) -> u32 {
        self.inner.static_lds
    }

    /// Registers per thread (`HIP_FUNC_ATTRIBUTE_NUM_REGS`).
    ///
    /// Errors: the runtime's error.
    pub fn num_registers(&self) -> Result<i32, HipError> {
        self.attribute(KernelAttribute::NumRegisters)
    }

    /// Allows `bytes` of dynamic LDS, above the runtime's default (`hipFuncSetAttribute` with
    /// `hipFuncAttributeMaxDynamicSharedMemorySize`, handed the kernel's `hipFunction_t`).
    /// On HIP's NVIDIA platform, once the driver accepts it, launches through this `Kernel`
    /// with up to `bytes` of dynamic shared memory are no longer refused against the device's
    /// default per block (the driver then judges them against its opt-in maximum). The
    /// driver keeps the attribute per function, so the raise holds for every `Kernel` of this
    /// library and name (those asked for before and after), and the last value set through
    /// any of them is the one they are all checked against. On AMD the device's LDS per block
    /// is already the whole LDS, and the launch check keeps it.
    ///
    /// Errors: [`LibraryError::Unsupported`] when the runtime does not export
    /// `hipFuncSetAttribute`, or the runtime's error.
    pub fn set_max_dynamic_lds(&self, bytes: u32) -> Result<(), LibraryError> {
        let d = self.inner.lib.device();
        let rt = d.runtime();
        let set = rt
            .api()
            .hipFuncSetAttribute
            .ok_or(LibraryError::Unsupported {
                symbol: "hipFuncSetAttribute",
            })?;
        d.bind()?;
        let value = i32::try_from(bytes).unwrap_or(i32::MAX);
        let mut raised = self.inner.raised_dynamic_lds.lock();
        // SAFETY: live function handle passed as the function identifier.
        rt.check(
            unsafe {
                set(
                    self.inner.func as *const std::ffi::c_void,
                    sys::hipFuncAttributeMaxDynamicSharedMemorySize,
                    value,
                )
            },
            "hipFuncSetAttribute",
        )?;
        // Only NVIDIA GPUs have an opt-in above the default shared memory per block
        // (`sharedMemPerBlockOptin`); on AMD the device's LDS per block is already all of it,
        // so the launch check keeps that limit there.
        if rt.platform() == crate::safe::runtime::Platform::Nvidia {
            *raised = bytes;
        }
        Ok(())
    }

    /// How many blocks of `block_size` threads with `dynamic_lds_bytes` of dynamic LDS can be
    /// resident on one compute unit (`hipModuleOccupancyMaxActiveBlocksPerMultiprocessor`).
    ///
    /// Errors: [`LibraryError::Unsupported`] when the runtime does not export it, or the
    /// runtime's error.
    pub fn max_active_blocks_per_cu(
        &self,
        block_size: u32,
        dynamic_lds_bytes: usize,
    ) -> Result<u32, LibraryError> {
        self.occupancy(block_size, dynamic_lds_bytes)
            .ok_or(LibraryError::Unsupported {
                symbol: "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            })?
            .map_err(LibraryError::from)
    }

    /// The occupancy of this kernel from its metadata alone (no device query), on either
    /// vendor: [`crate::code_object::occupancy::occupancy`] of [`Kernel::info`] on the device's
    /// target ID (AMD) or SM target (HIP's NVIDIA platform). Its `blocks_per_cu` is the figure
    /// [`Kernel::max_active_blocks_per_cu`] asks the runtime for.
    ///
    /// Errors: [`OccupancyError::CodeObject`] when the code object does not describe the
    /// kernel, [`OccupancyError::UnknownProcessor`] when the device has neither target (or one
    /// outside hipjit's tables), else as `occupancy`.
    ///
    /// [`OccupancyError::CodeObject`]: crate::code_object::occupancy::OccupancyError::CodeObject
    /// [`OccupancyError::UnknownProcessor`]: crate::code_object::occupancy::OccupancyError::UnknownProcessor
    pub fn metadata_occupancy(
        &self,
        block_size: u32,
        dynamic_lds_bytes: u32,
    ) -> Result<
        crate::code_object::occupancy::Occupancy,
        crate::code_object::occupancy::OccupancyError,
    > {
        use crate::code_object::occupancy::{occupancy, OccupancyError};
        let info = self.info().ok_or_else(|| {
            OccupancyError::CodeObject(format!(
                "the code object's metadata does not describe kernel {}",
                self.name()
            ))
        })?;
        let device = self.device();
        match (device.target_id(), device.sm_target()) {
            (Some(target), _) => occupancy(info, target, block_size, dynamic_lds_bytes),
            (None, Some(sm)) => occupancy(info, &sm, block_size, dynamic_lds_bytes),
            (None, None) => Err(OccupancyError::UnknownProcessor {
                processor: device.arch_name().to_owned(),
            }),
        }
    }

    /// [`Kernel::max_active_blocks_per_cu`], `None` when the runtime does not export the entry
    /// point.
    pub(crate) fn occupancy(
        &self,
        block_size: u32,
        dynamic_lds_bytes: usize,
    ) -> Option<Result<u32, HipError>> {
        let d = self.inner.lib.device();
        let rt = d.runtime();
        let occ = rt
            .api()
            .hipModuleOccupancyMaxActiveBlocksPerMultiprocessor?;
        Some((|| {
            d.bind()?;
            let mut n = 0;
            // SAFETY: valid out pointer, live function handle.
            rt.check(
                unsafe {
                    occ(
                        &mut n,
                        self.inner.func,
                        i32::try_from(block_size).unwrap_or(i32::MAX),
                        dynamic_lds_bytes,
                    )
                },
                "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            )?;
            Ok(u32::try_from(n).unwrap_or(0))
        })())
    }
}

/// `hipFuncGetAttribute` on `func` of `lib`, with the device bound.
fn read_attribute(
    lib: &Library,
    func: sys::hipFunction_t,
    attr: KernelAttribute,
) -> Result<i32, HipError> {
    let d = lib.device();
    d.bind()?;
    let rt = d.runtime();
    let mut v = 0;
    // SAFETY: valid out pointer, live function handle.
    rt.check(
        unsafe { (rt.api().hipFuncGetAttribute)(&mut v, attr.raw(), func) },
        "hipFuncGetAttribute",
    )?;
    Ok(v)
}

/// A kernel's launch limits folded into the few comparisons a launch within them needs: the
/// launch checks' fast path ([`Kernel::check_launch`]). A configuration outside them, or one
/// they cannot judge (a zero dimension, dynamic LDS past the device's default), goes through the
/// full checks, which name what is out of range; the fast path accepts only what the full checks
/// accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchLimits {
    /// The device's largest block dimensions (`u32::MAX` where the device reports none).
    block: [u32; 3],
    /// The device's largest grid dimensions (`u32::MAX` where the device reports none).
    grid: [u32; 3],
    /// Threads per block: the smaller of the device's and the kernel's (`u64::MAX` where
    /// neither is known).
    threads: u64,
    /// The LDS bytes per block a launch may use, static and dynamic together, without a raised
    /// dynamic limit (`u64::MAX` where the device reports none).
    lds: u64,
    /// The kernel's static LDS in bytes.
    static_lds: u64,
}

impl LaunchLimits {
    pub(crate) fn new(
        props: &crate::safe::device::DeviceProperties,
        max_threads: u32,
        static_lds: u32,
    ) -> LaunchLimits {
        let dims = |d: [u32; 3]| d.map(|m| if m == 0 { u32::MAX } else { m });
        let known = |m: u32| if m == 0 { u64::MAX } else { u64::from(m) };
        LaunchLimits {
            block: dims(props.max_block_dims),
            grid: dims(props.max_grid_dims),
            threads: known(props.max_threads_per_block).min(known(max_threads)),
            lds: if props.lds_per_block == 0 {
                u64::MAX
            } else {
                props.lds_per_block
            },
            static_lds: u64::from(static_lds),
        }
    }

    /// Whether `cfg` is within the limits: every dimension between 1 and its maximum (`x - 1`
    /// wraps for 0, failing the comparison), the threads and the LDS within theirs.
    #[inline]
    pub(crate) fn within(&self, cfg: &crate::safe::launch::LaunchConfig) -> bool {
        let within = |d: crate::safe::launch::Dim3, max: [u32; 3]| {
            d.x.wrapping_sub(1) < max[0]
                && d.y.wrapping_sub(1) < max[1]
                && d.z.wrapping_sub(1) < max[2]
        };
        within(cfg.block, self.block)
            && within(cfg.grid, self.grid)
            && cfg.block.product() <= self.threads
            && self.static_lds + u64::from(cfg.dynamic_lds_bytes) <= self.lds
    }
}

/// A kernel's explicit arguments as its code object's metadata declares them (hidden
/// arguments left out): their count, sizes in bytes and which of them the kernel writes (a bit
/// each). Read once per kernel, so that a launch whose arguments match
/// ([`KernelArgs`](crate::safe::launch::KernelArgs)`::has_shape`) compares a few integers, and
/// only a mismatch walks the metadata to name what is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgShape {
    pub(crate) len: usize,
    pub(crate) sizes: [u32; crate::safe::launch::MAX_KERNEL_ARGS],
    pub(crate) written: u32,
}

impl ArgShape {
    /// The shape of `info`'s explicit arguments; `None` past
    /// [`MAX_KERNEL_ARGS`](crate::safe::launch::MAX_KERNEL_ARGS) of them.
    pub(crate) fn of(info: &crate::code_object::KernelInfo) -> Option<ArgShape> {
        let mut shape = ArgShape {
            len: 0,
            sizes: [0; crate::safe::launch::MAX_KERNEL_ARGS],
            written: 0,
        };
        for a in info
            .args
            .iter()
            .filter(|a| !a.value_kind.starts_with("hidden_"))
        {
            if shape.len == crate::safe::launch::MAX_KERNEL_ARGS {
                return None;
            }
            shape.sizes[shape.len] = a.size;
            if a.is_written() {
                shape.written |= 1 << shape.len;
            }
            shape.len += 1;
        }
        Some(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::LaunchLimits;
    use crate::safe::device::DeviceProperties;
    use crate::safe::launch::{Dim3, LaunchConfig};

    fn props(block: [u32; 3], grid: [u32; 3], threads: u32, lds: u64) -> DeviceProperties {
        DeviceProperties {
            name: String::new(),
            arch_name: String::new(),
            target_id: None,
            wavefront_size: 64,
            compute_units: 1,
            lds_per_block: lds,
            max_threads_per_block: threads,
            max_block_dims: block,
            max_grid_dims: grid,
            clock_khz: 0,
            total_global_mem: 0,
            total_const_mem: 0,
            l2_cache_bytes: 0,
            registers_per_block: 0,
        }
    }

    /// The launch rules as `check_launch_in_full` states them (a zero dimension, a dimension
    /// past a reported maximum, more threads than the device or the kernel allows, more LDS
    /// than a block has), written out here independently of `LaunchLimits`.
    fn allowed(
        p: &DeviceProperties,
        kernel_threads: u32,
        static_lds: u32,
        c: &LaunchConfig,
    ) -> bool {
        let dims_ok = |d: Dim3, max: [u32; 3]| {
            [d.x, d.y, d.z]
                .iter()
                .zip(max)
                .all(|(&v, m)| v != 0 && (m == 0 || v <= m))
        };
        let threads = c.block.product();
        dims_ok(c.block, p.max_block_dims)
            && dims_ok(c.grid, p.max_grid_dims)
            && (p.max_threads_per_block == 0 || threads <= u64::from(p.max_threads_per_block))
            && (kernel_threads == 0 || threads <= u64::from(kernel_threads))
            && (p.lds_per_block == 0
                || u64::from(static_lds) + u64::from(c.dynamic_lds_bytes) <= p.lds_per_block)
    }

    #[test]
    fn the_fast_path_accepts_exactly_what_the_rules_allow() {
        let values = [0, 1, 2, 63, 64, 65, 1023, 1024, 1025, u32::MAX];
        let devices = [
            props([1024, 1024, 64], [u32::MAX >> 1, 65535, 65535], 1024, 65536),
            props([0, 0, 0], [0, 0, 0], 0, 0),
            props([64, 2, 1], [2, 2, 2], 128, 1024),
        ];
        let mut checked = 0;
        for p in &devices {
            for (kernel_threads, static_lds) in [(0, 0), (256, 1000), (1024, 65536)] {
                let limits = LaunchLimits::new(p, kernel_threads, static_lds);
                for &bx in &values {
                    for &by in &[1, 2, 0] {
                        for &gx in &values {
                            for &lds in &[0, 24, 1024, 65536, u32::MAX] {
                                let c = LaunchConfig {
                                    grid: Dim3 { x: gx, y: 1, z: 2 },
                                    block: Dim3 { x: bx, y: by, z: 1 },
                                    dynamic_lds_bytes: lds,
                                };
                                assert_eq!(
                                    limits.within(&c),
                                    allowed(p, kernel_threads, static_lds, &c),
                                    "{c:?} on {p:?} (kernel threads {kernel_threads}, static LDS {static_lds})"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 3 * 3 * 10 * 3 * 10 * 5);
    }
}
