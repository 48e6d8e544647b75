//! Host implementations of kernels for the testing runtime: what a launch hands them
//! ([`HostLaunch`]), the record of launches ([`LaunchRecord`]) and the hook the C runtime calls.

use std::collections::HashMap;
use std::ffi::{c_char, c_uint, c_void, CStr};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::safe::launch::Dim3;

/// A host implementation of a kernel: called for each launch of the kernel with its name, on
/// the launching thread, before the launch returns. `Err(message)` fails the launch with
/// `hipErrorLaunchFailure` and `message` as the runtime's error string.
pub type HostKernelFn = dyn Fn(&HostLaunch<'_>) -> Result<(), String> + Send + Sync + 'static;

/// One launch as a host implementation sees it: the geometry and the argument values.
///
/// Device memory of the testing runtime is host memory, so a device pointer argument can be
/// read and written here ([`HostLaunch::slice_mut`]).
pub struct HostLaunch<'a> {
    /// The kernel's name.
    pub kernel: &'a str,
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic LDS requested, bytes.
    pub dynamic_lds_bytes: u32,
    params: *mut *mut c_void,
}

impl HostLaunch<'_> {
    /// The value of argument `index`.
    ///
    /// # Safety
    /// The kernel takes at least `index + 1` arguments and argument `index` is a `T` (hipjit
    /// checks the count and sizes against the code object's metadata before launching).
    pub unsafe fn arg<T: Copy>(&self, index: usize) -> T {
        // SAFETY: per the caller, params[index] points at a live T.
        unsafe { (*self.params.add(index) as *const T).read_unaligned() }
    }

    /// The `len` elements at the device pointer in argument `index`, for reading.
    ///
    /// # Safety
    /// As [`HostLaunch::arg`] with a pointer argument to at least `len` elements of `T` that
    /// nothing else writes during the call.
    pub unsafe fn slice<T>(&self, index: usize, len: usize) -> &[T] {
        // SAFETY: per the caller.
        unsafe {
            let ptr: *const T = self.arg(index);
            if len == 0 {
                return &[];
            }
            std::slice::from_raw_parts(ptr, len)
        }
    }

    /// The `len` elements at the device pointer in argument `index`, for writing.
    ///
    /// # Safety
    /// As [`HostLaunch::slice`], and no other slice of the same memory is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut<T>(&self, index: usize, len: usize) -> &mut [T] {
        // SAFETY: per the caller.
        unsafe {
            let ptr: *mut T = self.arg(index);
            if len == 0 {
                return &mut [];
            }
            std::slice::from_raw_parts_mut(ptr, len)
        }
    }

    /// Threads in the whole grid (`grid.product() * block.product()`).
    pub fn threads(&self) -> u64 {
        self.grid.product().saturating_mul(self.block.product())
    }
}

/// One launch the testing runtime received, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRecord {
    /// The kernel's name.
    pub kernel: String,
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic LDS, bytes.
    pub dynamic_lds_bytes: u32,
    /// The raw stream handle it was launched on (`hipStream_t` as an address; 0: the null
    /// stream).
    pub stream: usize,
}

/// The host implementations and the launch record of one testing runtime.
#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) kernels: Mutex<HashMap<String, Arc<HostKernelFn>>>,
    pub(crate) launches: Mutex<Vec<LaunchRecord>>,
}

const HIP_ERROR_INVALID_DEVICE_FUNCTION: i32 = 98;
const HIP_ERROR_LAUNCH_FAILURE: i32 = 719;

/// The launch hook the C runtime calls (`fixture_set_launch_hook`); `user` is an
/// `Arc<Registry>` turned into a raw pointer, alive as long as the runtime library.
pub(crate) unsafe extern "C" fn launch_hook(
    user: *mut c_void,
    name: *const c_char,
    dims: *const c_uint,
    lds: c_uint,
    stream: *mut c_void,
    params: *mut *mut c_void,
    message: *mut c_char,
    message_len: usize,
) -> i32 {
    // SAFETY: `user` is the registry pointer handed over with the hook; never freed.
    let registry = unsafe { &*(user as *const Registry) };
    // SAFETY: the runtime passes the function's NUL-terminated name and six dimensions.
    let (name, dims) = unsafe {
        (
            CStr::from_ptr(name).to_string_lossy().into_owned(),
            std::slice::from_raw_parts(dims, 6),
        )
    };
    let grid = Dim3 {
        x: dims[0],
        y: dims[1],
        z: dims[2],
    };
    let block = Dim3 {
        x: dims[3],
        y: dims[4],
        z: dims[5],
    };
    registry.launches.lock().push(LaunchRecord {
        kernel: name.clone(),
        grid,
        block,
        dynamic_lds_bytes: lds,
        stream: stream as usize,
    });
    let found = registry.kernels.lock().get(&name).cloned();
    let (code, text) = match found {
        None => (
            HIP_ERROR_INVALID_DEVICE_FUNCTION,
            format!(
                "hipjit::testing: no host implementation of kernel {name} \
                 (register one with TestDevice::host_kernel or TestRuntime::add_host_kernel)"
            ),
        ),
        Some(f) => {
            let launch = HostLaunch {
                kernel: &name,
                grid,
                block,
                dynamic_lds_bytes: lds,
                params,
            };
            // A panic must not unwind into C.
            match std::panic::catch_unwind(AssertUnwindSafe(|| f(&launch))) {
                Ok(Ok(())) => return 0,
                Ok(Err(e)) => (
                    HIP_ERROR_LAUNCH_FAILURE,
                    format!("hipjit::testing: host implementation of {name} failed: {e}"),
                ),
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    (
                        HIP_ERROR_LAUNCH_FAILURE,
                        format!("hipjit::testing: host implementation of {name} panicked: {what}"),
                    )
                }
            }
        }
    };
    if message_len > 0 {
        let bytes = text.as_bytes();
        let n = bytes.len().min(message_len - 1);
        // SAFETY: the runtime's buffer holds message_len bytes; n + 1 <= message_len.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), message as *mut u8, n);
            *message.add(n) = 0;
        }
    }
    code
}
