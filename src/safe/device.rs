//! A HIP device and its properties.

use std::ffi::c_char;
use std::fmt;
use std::sync::Arc;

use hip_sys::device_prop::{hipDeviceProp_tR0000, hipDeviceProp_tR0600};

use crate::safe::error::HipError;
use crate::safe::runtime::{DevicePropertiesFn, Runtime};
use crate::target::TargetId;

/// What hipjit reads of a device's properties, from `hipGetDevicePropertiesR0600` (HIP 6.0
/// layout) or `hipGetDeviceProperties` (HIP 5.x layout), whichever the runtime exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The marketing name (`name`).
    pub name: String,
    /// The architecture name with its features as the runtime reports it (`gcnArchName`, e.g.
    /// `gfx90a:sramecc+:xnack-`).
    pub arch_name: String,
    /// `arch_name` parsed as a target ID (features kept), `None` when it does not parse.
    pub target_id: Option<TargetId>,
    /// Threads per wavefront (`warpSize`): 64 or 32.
    pub wavefront_size: u32,
    /// Compute units (`multiProcessorCount`).
    pub compute_units: u32,
    /// LDS available to one block, bytes (`sharedMemPerBlock`).
    pub lds_per_block: u64,
    /// Maximum threads in one block (`maxThreadsPerBlock`).
    pub max_threads_per_block: u32,
    /// Maximum block dimensions x, y, z (`maxThreadsDim`).
    pub max_block_dims: [u32; 3],
    /// Maximum grid dimensions x, y, z in blocks (`maxGridSize`).
    pub max_grid_dims: [u32; 3],
    /// Peak clock, kHz (`clockRate`).
    pub clock_khz: u32,
    /// Global memory, bytes (`totalGlobalMem`).
    pub total_global_mem: u64,
    /// Constant memory, bytes (`totalConstMem`).
    pub total_const_mem: u64,
    /// L2 cache, bytes (`l2CacheSize`).
    pub l2_cache_bytes: u64,
    /// 32-bit registers available to one block (`regsPerBlock`).
    pub registers_per_block: u32,
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn u(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

macro_rules! from_prop {
    ($p:expr) => {{
        let p = $p;
        let arch_name = text(&p.gcnArchName);
        DeviceProperties {
            name: text(&p.name),
            target_id: TargetId::parse(&arch_name).ok(),
            arch_name,
            wavefront_size: u(p.warpSize as i32),
            compute_units: u(p.multiProcessorCount as i32),
            lds_per_block: p.sharedMemPerBlock as u64,
            max_threads_per_block: u(p.maxThreadsPerBlock as i32),
            max_block_dims: p.maxThreadsDim.map(|d| u(d as i32)),
            max_grid_dims: p.maxGridSize.map(|d| u(d as i32)),
            clock_khz: u(p.clockRate as i32),
            total_global_mem: p.totalGlobalMem as u64,
            total_const_mem: p.totalConstMem as u64,
            l2_cache_bytes: u64::from(u(p.l2CacheSize as i32)),
            registers_per_block: u(p.regsPerBlock as i32),
        }
    }};
}

impl DeviceProperties {
    /// Reads the properties of `ordinal` through the entry point bound for the headers, handing
    /// it the struct layout that entry point expects, then checks them
    /// ([`crate::safe::device_sanity`]).
    fn query(rt: &Runtime, ordinal: i32) -> Result<DeviceProperties, HipError> {
        let (props, call, layout) = Self::read(rt, ordinal)?;
        crate::safe::device_sanity::check(&props, rt.platform(), call, layout)?;
        Ok(props)
    }

    fn read(
        rt: &Runtime,
        ordinal: i32,
    ) -> Result<(DeviceProperties, &'static str, &'static str), HipError> {
        match rt.api().get_device_properties {
            DevicePropertiesFn::R0600(f) => {
                // SAFETY: the struct is plain data (integers, arrays, chars) for which all-zero
                // is a valid value.
                let mut p: hipDeviceProp_tR0600 = unsafe { std::mem::zeroed() };
                // SAFETY: `f` is hipGetDevicePropertiesR0600, which fills this 6.0 layout.
                rt.check(unsafe { f(&mut p, ordinal) }, "hipGetDevicePropertiesR0600")?;
                Ok((from_prop!(&p), "hipGetDevicePropertiesR0600", "HIP 6.0"))
            }
            DevicePropertiesFn::R0000(f) => {
                // SAFETY: as above.
                let mut p: hipDeviceProp_tR0000 = unsafe { std::mem::zeroed() };
                // SAFETY: `f` is the 5.x hipGetDeviceProperties, which fills this layout.
                rt.check(unsafe { f(&mut p, ordinal) }, "hipGetDeviceProperties")?;
                Ok((from_prop!(&p), "hipGetDeviceProperties", "HIP 5.x"))
            }
        }
    }
}

struct DeviceInner {
    runtime: Runtime,
    ordinal: i32,
    props: DeviceProperties,
}

/// One HIP device of a [`Runtime`]. Cheap to clone; `Send + Sync` (every call binds the device
/// on the calling thread first).
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.inner.ordinal)
            .field("arch_name", &self.inner.props.arch_name)
            .finish()
    }
}

impl Device {
    pub(crate) fn open(rt: &Runtime, ordinal: u32) -> Result<Device, HipError> {
        let count = rt.device_count()?;
        let ordinal_i = i32::try_from(ordinal).unwrap_or(i32::MAX);
        if ordinal >= count {
            // Let the runtime name the error for an ordinal out of range.
            rt.bind(ordinal_i)?;
        }
        rt.bind(ordinal_i)?;
        let props = DeviceProperties::query(rt, ordinal_i)?;
        Ok(Device {
            inner: Arc::new(DeviceInner {
                runtime: rt.clone(),
                ordinal: ordinal_i,
                props,
            }),
        })
    }

    /// The runtime this device belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> i32 {
        self.inner.ordinal
    }

    /// The properties read when the device was opened.
    pub fn properties(&self) -> &DeviceProperties {
        &self.inner.props
    }

    /// The device's target ID (`gcnArchName` with its features, e.g. `gfx942:sramecc+:xnack-`),
    /// `None` when the runtime's name does not parse as one ([`Device::arch_name`] has it).
    pub fn target_id(&self) -> Option<&TargetId> {
        self.inner.props.target_id.as_ref()
    }

    /// On HIP's NVIDIA platform, the device's SM architecture (`sm_90` for an H100/H200, from
    /// its compute capability); `None` on AMD.
    pub fn sm_target(&self) -> Option<crate::target::SmTarget> {
        crate::target::SmTarget::parse(&self.inner.props.arch_name).ok()
    }

    /// `gcnArchName` as the runtime reports it.
    pub fn arch_name(&self) -> &str {
        &self.inner.props.arch_name
    }

    /// Makes this device current on the calling thread.
    ///
    /// Errors: the runtime's error from `hipSetDevice`.
    #[inline]
    pub fn bind(&self) -> Result<(), HipError> {
        self.inner.runtime.bind(self.inner.ordinal)
    }

    /// Waits for all work on the device (`hipDeviceSynchronize`).
    ///
    /// Errors: the runtime's error, e.g. a kernel's fault; `hipErrorStreamCaptureUnsupported`,
    /// before the call, when a capture forbids it on this thread (`capture`).
    pub fn synchronize(&self) -> Result<(), HipError> {
        crate::safe::capture_guard::check_not_capturing(self, None, "hipDeviceSynchronize")?;
        self.bind()?;
        let rt = self.runtime();
        // SAFETY: no arguments; the device is bound.
        rt.check(
            unsafe { (rt.api().hipDeviceSynchronize)() },
            "hipDeviceSynchronize",
        )
    }

    /// Refuses, before any call, a handle of `other` (a stream, a buffer) handed to an entry
    /// point of `self`'s runtime when the two belong to different loaded runtimes: the runtime
    /// would read the foreign handle as one of its own.
    ///
    /// Errors: `hipErrorInvalidHandle` naming `what`, `call` and both runtimes' paths.
    #[inline]
    pub(crate) fn check_same_runtime(
        &self,
        other: &Device,
        what: &str,
        call: &'static str,
    ) -> Result<(), HipError> {
        if self.inner.runtime.same_library(&other.inner.runtime) {
            return Ok(());
        }
        Err(HipError::new(
            400,
            call,
            None,
            format!(
                "refused by hipjit before the call: the {what} belongs to the runtime {}, not to \
                 {}, the runtime making the call",
                other.inner.runtime.path().display(),
                self.inner.runtime.path().display()
            ),
        ))
    }

    pub(crate) fn same_as(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (Arc::ptr_eq(&self.inner.runtime.inner, &other.inner.runtime.inner)
                && self.inner.ordinal == other.inner.ordinal)
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
};
