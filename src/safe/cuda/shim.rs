//! hipjit's own `extern "C"` implementations of the HIP entry points the safe layer calls, each
//! mapped onto the CUDA driver API. They fill the same table ([`crate::safe::runtime`]'s `Api`) that
//! `dlsym` fills for an AMD runtime, so every safe type works unchanged and a launch stays one
//! indirect call.
//!
//! Semantics follow HIP's own NVIDIA platform (`hip/nvidia_detail/nvidia_hip_runtime_api.h`):
//! - Errors: a `CUresult` HIP maps becomes the `hipError_t` of the same value (HIP's names were
//!   taken from CUDA's: `CUDA_ERROR_NO_DEVICE` 100 is `hipErrorNoDevice` 100,
//!   `CUDA_ERROR_INVALID_PTX` 218 is `hipErrorInvalidKernelFile`); any other becomes
//!   `hipErrorUnknown` (999), as in HIP, and `hipGetErrorString` still gives the driver's string
//!   of the original code (kept per thread).
//! - Flags: stream (`hipStreamNonBlocking` = `CU_STREAM_NON_BLOCKING` = 1), event (default,
//!   blocking sync, disable timing, interprocess: 0, 1, 2, 4 on both) and host allocation
//!   (`hipHostMallocPortable`/`Mapped`/`WriteCombined` = `CU_MEMHOSTALLOC_*` 1, 2, 4) have the
//!   same values; other host-allocation bits are refused with `hipErrorInvalidValue`.
//! - Synchronous copies use `cuMemcpy` (unified addressing; the direction is checked but not
//!   needed); asynchronous ones the driver's call for the direction (`cuMemcpyHtoDAsync_v2`,
//!   `cuMemcpyDtoHAsync_v2`, `cuMemcpyDtoDAsync_v2`). The stream-ordered allocator
//!   (`hipMallocAsync`/`hipFreeAsync`) is `cuMemAllocAsync`/`cuMemFreeAsync` on the device's
//!   default memory pool, present when the driver exports both.
//! - Current device: the CUDA context is per thread. `hipSetDevice` retains the device's
//!   primary context (once per process) and makes it current; `hipGetDevice` reports the
//!   device whose primary context is current, binding device 0's (as the CUDA runtime does)
//!   when none is, and answers `hipErrorInvalidContext` when another context is current (so
//!   the safe layer's bind switches to the primary context). Every other call that needs a
//!   context binds one first when the thread has none. The launch calls do not: a launch on a
//!   stream goes to the driver first and binds only when the driver refuses the thread's
//!   current context (`launch_on_stream`), which keeps the launch path to one driver call.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use hip_sys as sys;
use hip_sys::device_prop::hipDeviceProp_tR0600;
use parking_lot::Mutex;

use super::driver::{self, CUdeviceptr, CUresult, Handle};

const CUDA_SUCCESS: CUresult = 0;
const HIP_SUCCESS: sys::hipError_t = 0;
const HIP_ERROR_INVALID_VALUE: sys::hipError_t = 1;
const HIP_ERROR_NOT_INITIALIZED: sys::hipError_t = 3;
const HIP_ERROR_NO_DEVICE: sys::hipError_t = 100;
const HIP_ERROR_INVALID_DEVICE: sys::hipError_t = 101;
const HIP_ERROR_INVALID_CONTEXT: sys::hipError_t = 201;
const HIP_ERROR_NOT_SUPPORTED: sys::hipError_t = 801;
const HIP_ERROR_UNKNOWN: sys::hipError_t = 999;

/// The `CUresult` values HIP's NVIDIA platform maps to a `hipError_t` (of the same value), from
/// `hipCUResultTohipError`; every other becomes `hipErrorUnknown`.
pub const MAPPED_CU_RESULTS: &[CUresult] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 100, 101, 200, 201, 202, 205, 206, 207, 208, 209, 210, 211, 212, 213,
    214, 215, 216, 217, 218, 219, 300, 301, 302, 303, 304, 400, 401, 500, 600, 700, 701, 702, 704,
    705, 708, 709, 710, 712, 713, 719, 720, 801, 900, 901, 902, 903, 904, 905, 906, 907, 908, 910,
];

/// The most devices hipjit binds primary contexts for.
pub const MAX_DEVICES: usize = 64;

thread_local! {
    /// The last failing `CUresult` on this thread and the `hipError_t` it became.
    static LAST: Cell<(sys::hipError_t, CUresult)> = const { Cell::new((0, 0)) };
}

/// Each device's primary context (0 until retained), read without a lock on every bind.
static PRIMARY: [AtomicUsize; MAX_DEVICES] = [const { AtomicUsize::new(0) }; MAX_DEVICES];
static RETAIN: Mutex<()> = Mutex::new(());
static INIT: OnceLock<CUresult> = OnceLock::new();

/// `hipCUResultTohipError`: the `hipError_t` for a `CUresult`.
pub fn hip_error_of(rc: CUresult) -> sys::hipError_t {
    if rc == CUDA_SUCCESS {
        HIP_SUCCESS
    } else if MAPPED_CU_RESULTS.contains(&rc) {
        rc as sys::hipError_t
    } else {
        HIP_ERROR_UNKNOWN
    }
}

#[inline]
pub(crate) fn map(rc: CUresult) -> sys::hipError_t {
    if rc == CUDA_SUCCESS {
        return HIP_SUCCESS;
    }
    let e = hip_error_of(rc);
    LAST.with(|l| l.set((e, rc)));
    e
}

/// The loaded driver, or a return of `hipErrorNotInitialized` from the enclosing function (the
/// table is installed only after the driver loaded, so this does not happen in practice).
macro_rules! drv {
    () => {
        match driver::get() {
            Some(d) => d,
            None => return HIP_ERROR_NOT_INITIALIZED,
        }
    };
}

fn init() -> CUresult {
    const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
    let Some(d) = driver::get() else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: cuInit(0) may be called any number of times.
    *INIT.get_or_init(|| unsafe { (d.cuInit)(0) })
}

fn device_count() -> Result<c_int, sys::hipError_t> {
    let rc = init();
    if rc != CUDA_SUCCESS {
        return Err(map(rc));
    }
    let d = driver::get().ok_or(HIP_ERROR_NOT_INITIALIZED)?;
    let mut n = 0;
    // SAFETY: valid out pointer.
    let rc = unsafe { (d.cuDeviceGetCount)(&mut n) };
    if rc != CUDA_SUCCESS {
        return Err(map(rc));
    }
    Ok(n)
}

fn primary_context(ordinal: c_int) -> Result<Handle, sys::hipError_t> {
    let count = device_count()?;
    if count == 0 {
        return Err(HIP_ERROR_NO_DEVICE);
    }
    if ordinal < 0 || ordinal >= count || ordinal as usize >= MAX_DEVICES {
        return Err(HIP_ERROR_INVALID_DEVICE);
    }
    let slot = &PRIMARY[ordinal as usize];
    let c = slot.load(Ordering::Acquire);
    if c != 0 {
        return Ok(c as Handle);
    }
    let d = driver::get().ok_or(HIP_ERROR_NOT_INITIALIZED)?;
    let _g = RETAIN.lock();
    let c = slot.load(Ordering::Acquire);
    if c != 0 {
        return Ok(c as Handle);
    }
    let mut dev = 0;
    // SAFETY: valid out pointer, ordinal in range.
    let rc = unsafe { (d.cuDeviceGet)(&mut dev, ordinal) };
    if rc != CUDA_SUCCESS {
        return Err(map(rc));
    }
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: valid out pointer; the primary context is retained once per process, never
    // released (it lives as long as the process, like the driver).
    let rc = unsafe { (d.cuDevicePrimaryCtxRetain)(&mut ctx, dev) };
    if rc != CUDA_SUCCESS {
        return Err(map(rc));
    }
    slot.store(ctx as usize, Ordering::Release);
    Ok(ctx)
}

fn current_context() -> Handle {
    let Some(d) = driver::get() else {
        return std::ptr::null_mut();
    };
    let mut c: Handle = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    let rc = unsafe { (d.cuCtxGetCurrent)(&mut c) };
    if rc == CUDA_SUCCESS {
        c
    } else {
        std::ptr::null_mut()
    }
}

fn set_device(ordinal: c_int) -> sys::hipError_t {
    match primary_context(ordinal) {
        // SAFETY: a retained primary context.
        Ok(ctx) => map(unsafe { (drv!().cuCtxSetCurrent)(ctx) }),
        Err(e) => e,
    }
}

/// Binds device 0's primary context when the thread has no current context.
#[inline]
fn ensure_context() -> Result<(), sys::hipError_t> {
    if current_context().is_null() {
        let e = set_device(0);
        if e != HIP_SUCCESS {
            return Err(e);
        }
    }
    Ok(())
}

macro_rules! with_context {
    ($body:expr) => {
        match ensure_context() {
            Ok(()) => $body,
            Err(e) => e,
        }
    };
}

fn dptr(p: *const c_void) -> CUdeviceptr {
    p as usize as CUdeviceptr
}

static ERROR_NAMES: OnceLock<Vec<(i32, CString)>> = OnceLock::new();

pub(crate) unsafe extern "C" fn hip_get_error_name(e: sys::hipError_t) -> *const c_char {
    let names = ERROR_NAMES.get_or_init(|| {
        crate::safe::error::HIP_ERROR_NAMES
            .iter()
            .filter_map(|(c, n)| CString::new(*n).ok().map(|s| (*c, s)))
            .collect()
    });
    if e == HIP_SUCCESS {
        return c"hipSuccess".as_ptr();
    }
    names
        .iter()
        .find(|(c, _)| *c as sys::hipError_t == e)
        .map_or(std::ptr::null(), |(_, s)| s.as_ptr())
}

pub(crate) unsafe extern "C" fn hip_get_error_string(e: sys::hipError_t) -> *const c_char {
    let (last_hip, last_cu) = LAST.with(Cell::get);
    let cu = if last_hip == e && last_cu != 0 {
        last_cu
    } else {
        e as CUresult
    };
    let mut s: *const c_char = std::ptr::null();
    let Some(d) = driver::get() else {
        return c"the CUDA driver is not loaded".as_ptr();
    };
    // SAFETY: valid out pointer; the driver returns a static string or an error.
    if unsafe { (d.cuGetErrorString)(cu, &mut s) } == CUDA_SUCCESS && !s.is_null() {
        s
    } else {
        c"unknown error (no CUDA driver string for this code)".as_ptr()
    }
}

pub(crate) unsafe extern "C" fn hip_runtime_get_version(v: *mut c_int) -> sys::hipError_t {
    // SAFETY: the caller's out pointer.
    map(unsafe { (drv!().cuDriverGetVersion)(v) })
}

pub(crate) unsafe extern "C" fn hip_driver_get_version(v: *mut c_int) -> sys::hipError_t {
    // SAFETY: as above.
    unsafe { hip_runtime_get_version(v) }
}

pub(crate) unsafe extern "C" fn hip_init(flags: c_uint) -> sys::hipError_t {
    if flags != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    map(init())
}

pub(crate) unsafe extern "C" fn hip_get_device_count(out: *mut c_int) -> sys::hipError_t {
    if out.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    match device_count() {
        Ok(0) => HIP_ERROR_NO_DEVICE,
        Ok(n) => {
            // SAFETY: non-null out pointer from the caller.
            unsafe { *out = n };
            HIP_SUCCESS
        }
        Err(e) => e,
    }
}

pub(crate) unsafe extern "C" fn hip_get_device(out: *mut c_int) -> sys::hipError_t {
    if out.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let c = current_context();
    if c.is_null() {
        let e = set_device(0);
        if e == HIP_SUCCESS {
            // SAFETY: non-null out pointer.
            unsafe { *out = 0 };
        }
        return e;
    }
    match PRIMARY
        .iter()
        .position(|p| p.load(Ordering::Relaxed) == c as usize)
    {
        Some(d) => {
            // SAFETY: non-null out pointer.
            unsafe { *out = d as c_int };
            HIP_SUCCESS
        }
        None => HIP_ERROR_INVALID_CONTEXT,
    }
}

pub(crate) unsafe extern "C" fn hip_set_device(ordinal: c_int) -> sys::hipError_t {
    set_device(ordinal)
}

pub(crate) unsafe extern "C" fn hip_device_synchronize() -> sys::hipError_t {
    // SAFETY: a context is current.
    with_context!(map(unsafe { (drv!().cuCtxSynchronize)() }))
}

pub(crate) unsafe extern "C" fn hip_get_device_properties_r0600(
    p: *mut hipDeviceProp_tR0600,
    ordinal: c_int,
) -> sys::hipError_t {
    if p.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let d = drv!();
    let count = match device_count() {
        Ok(n) => n,
        Err(e) => return e,
    };
    if ordinal < 0 || ordinal >= count {
        return HIP_ERROR_INVALID_DEVICE;
    }
    let mut dev = 0;
    // SAFETY: valid out pointer, ordinal in range.
    let rc = unsafe { (d.cuDeviceGet)(&mut dev, ordinal) };
    if rc != CUDA_SUCCESS {
        return map(rc);
    }
    let attr = |a: c_int| {
        let mut v = 0;
        // SAFETY: valid out pointer; an unknown attribute is an error, read as 0.
        let rc = unsafe { (d.cuDeviceGetAttribute)(&mut v, a, dev) };
        if rc == CUDA_SUCCESS {
            v
        } else {
            0
        }
    };
    // SAFETY: the caller's struct; plain data.
    let p = unsafe { &mut *p };
    // SAFETY: the name buffer holds 256 chars; the driver writes a NUL-terminated name.
    let rc = unsafe { (d.cuDeviceGetName)(p.name.as_mut_ptr(), 255, dev) };
    if rc != CUDA_SUCCESS {
        return map(rc);
    }
    let mut total = 0usize;
    // SAFETY: valid out pointer.
    let rc = unsafe { (d.cuDeviceTotalMem_v2)(&mut total, dev) };
    if rc != CUDA_SUCCESS {
        return map(rc);
    }
    // CUdevice_attribute values from cuda.h.
    let (major, minor) = (attr(75), attr(76));
    let arch = format!("sm_{major}{minor}");
    for (dst, src) in p.gcnArchName.iter_mut().zip(arch.bytes().chain([0])) {
        *dst = src as c_char;
    }
    p.totalGlobalMem = total;
    p.maxThreadsPerBlock = attr(1);
    p.maxThreadsDim = [attr(2), attr(3), attr(4)];
    p.maxGridSize = [attr(5), attr(6), attr(7)];
    p.sharedMemPerBlock = attr(8) as usize;
    p.totalConstMem = attr(9) as usize;
    p.warpSize = attr(10);
    p.regsPerBlock = attr(12);
    p.clockRate = attr(13);
    p.multiProcessorCount = attr(16);
    p.l2CacheSize = attr(38);
    p.sharedMemPerBlockOptin = attr(97) as usize;
    p.major = major;
    p.minor = minor;
    HIP_SUCCESS
}

pub(crate) unsafe extern "C" fn hip_stream_create_with_flags(
    s: *mut sys::hipStream_t,
    flags: c_uint,
) -> sys::hipError_t {
    if flags > 1 {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out pointer; hipStream_t and CUstream are both pointers.
    with_context!(map(unsafe {
        (drv!().cuStreamCreate)(s as *mut Handle, flags)
    }))
}

pub(crate) unsafe extern "C" fn hip_stream_destroy(s: sys::hipStream_t) -> sys::hipError_t {
    // SAFETY: a stream the caller created.
    with_context!(map(unsafe { (drv!().cuStreamDestroy_v2)(s as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_stream_synchronize(s: sys::hipStream_t) -> sys::hipError_t {
    // SAFETY: a live stream (or NULL, the legacy default stream).
    with_context!(map(unsafe { (drv!().cuStreamSynchronize)(s as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_stream_query(s: sys::hipStream_t) -> sys::hipError_t {
    // SAFETY: as above.
    with_context!(map(unsafe { (drv!().cuStreamQuery)(s as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_stream_wait_event(
    s: sys::hipStream_t,
    e: sys::hipEvent_t,
    flags: c_uint,
) -> sys::hipError_t {
    // hipStreamWaitEvent's flags must be 0, as cuStreamWaitEvent's (CU_EVENT_WAIT_DEFAULT).
    if flags != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: live stream and event.
    with_context!(map(unsafe {
        (drv!().cuStreamWaitEvent)(s as Handle, e as Handle, 0)
    }))
}

/// `hipMallocAsync` -> `cuMemAllocAsync` (the device's default memory pool), 0 bytes giving a
/// null pointer as [`hip_malloc`] does.
pub(crate) unsafe extern "C" fn hip_malloc_async(
    p: *mut *mut c_void,
    size: usize,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    let Some(alloc) = drv!().cuMemAllocAsync else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    if p.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    if size == 0 {
        // SAFETY: non-null out pointer.
        unsafe { *p = std::ptr::null_mut() };
        return HIP_SUCCESS;
    }
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out pointer, live stream.
    let e = with_context!(map(unsafe { alloc(&mut d, size, s as Handle) }));
    if e == HIP_SUCCESS {
        // SAFETY: non-null out pointer.
        unsafe { *p = d as usize as *mut c_void };
    }
    e
}

/// `hipFreeAsync` -> `cuMemFreeAsync`; a null pointer is a no-op.
pub(crate) unsafe extern "C" fn hip_free_async(
    p: *mut c_void,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    let Some(free) = drv!().cuMemFreeAsync else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    if p.is_null() {
        return HIP_SUCCESS;
    }
    // SAFETY: an allocation of hip_malloc_async, on a live stream.
    with_context!(map(unsafe { free(dptr(p), s as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_malloc(p: *mut *mut c_void, size: usize) -> sys::hipError_t {
    if p.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    if size == 0 {
        // HIP's hipMalloc: "If size is 0, no memory is allocated, *ptr returns nullptr, and
        // hipSuccess is returned"; cuMemAlloc refuses 0 bytes (CUDA_ERROR_INVALID_VALUE).
        // SAFETY: non-null out pointer.
        unsafe { *p = std::ptr::null_mut() };
        return HIP_SUCCESS;
    }
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out pointer.
    let e = with_context!(map(unsafe { (drv!().cuMemAlloc_v2)(&mut d, size) }));
    if e == HIP_SUCCESS {
        // SAFETY: non-null out pointer.
        unsafe { *p = d as usize as *mut c_void };
    }
    e
}

pub(crate) unsafe extern "C" fn hip_free(p: *mut c_void) -> sys::hipError_t {
    if p.is_null() {
        return HIP_SUCCESS;
    }
    // SAFETY: an allocation of hip_malloc.
    with_context!(map(unsafe { (drv!().cuMemFree_v2)(dptr(p)) }))
}

pub(crate) unsafe extern "C" fn hip_host_malloc(
    p: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> sys::hipError_t {
    if flags
        & !(sys::hipHostMallocPortable | sys::hipHostMallocMapped | sys::hipHostMallocWriteCombined)
        != 0
    {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out pointer; flag bits equal CU_MEMHOSTALLOC_*.
    with_context!(map(unsafe { (drv!().cuMemHostAlloc)(p, size, flags) }))
}

pub(crate) unsafe extern "C" fn hip_host_free(p: *mut c_void) -> sys::hipError_t {
    if p.is_null() {
        return HIP_SUCCESS;
    }
    // SAFETY: an allocation of hip_host_malloc.
    with_context!(map(unsafe { (drv!().cuMemFreeHost)(p) }))
}

fn check_kind(kind: sys::hipMemcpyKind) -> bool {
    kind <= sys::hipMemcpyDefault
}

pub(crate) unsafe extern "C" fn hip_memcpy(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: sys::hipMemcpyKind,
) -> sys::hipError_t {
    if !check_kind(kind) {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's regions of `size` bytes (unified addressing).
    with_context!(map(unsafe {
        (drv!().cuMemcpy)(dptr(dst), dptr(src), size)
    }))
}

/// `hipMemcpyAsync` -> the driver's copy for the direction (`cuMemcpyHtoDAsync_v2`,
/// `cuMemcpyDtoHAsync_v2`, `cuMemcpyDtoDAsync_v2`), `cuMemcpyAsync` (unified addressing) for
/// `hipMemcpyHostToHost` and `hipMemcpyDefault`.
pub(crate) unsafe extern "C" fn hip_memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: sys::hipMemcpyKind,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    let d = drv!();
    let s = s as Handle;
    // SAFETY (each arm): the caller's regions of `size` bytes on a live stream, on the side
    // the direction names.
    with_context!(map(match kind {
        sys::hipMemcpyHostToDevice => unsafe { (d.cuMemcpyHtoDAsync_v2)(dptr(dst), src, size, s) },
        sys::hipMemcpyDeviceToHost => unsafe { (d.cuMemcpyDtoHAsync_v2)(dst, dptr(src), size, s) },
        sys::hipMemcpyDeviceToDevice => unsafe {
            (d.cuMemcpyDtoDAsync_v2)(dptr(dst), dptr(src), size, s)
        },
        sys::hipMemcpyHostToHost | sys::hipMemcpyDefault => unsafe {
            (d.cuMemcpyAsync)(dptr(dst), dptr(src), size, s)
        },
        _ => return HIP_ERROR_INVALID_VALUE,
    }))
}

pub(crate) unsafe extern "C" fn hip_memset(
    dst: *mut c_void,
    value: c_int,
    size: usize,
) -> sys::hipError_t {
    // SAFETY: the caller's device region.
    with_context!(map(unsafe {
        (drv!().cuMemsetD8_v2)(dptr(dst), value as u8, size)
    }))
}

pub(crate) unsafe extern "C" fn hip_memset_async(
    dst: *mut c_void,
    value: c_int,
    size: usize,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    // SAFETY: as above.
    with_context!(map(unsafe {
        (drv!().cuMemsetD8Async)(dptr(dst), value as u8, size, s as Handle)
    }))
}

pub(crate) unsafe extern "C" fn hip_event_create_with_flags(
    e: *mut sys::hipEvent_t,
    flags: c_uint,
) -> sys::hipError_t {
    if flags & !0x7 != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out pointer; flag bits equal CU_EVENT_*.
    with_context!(map(unsafe {
        (drv!().cuEventCreate)(e as *mut Handle, flags)
    }))
}

pub(crate) unsafe extern "C" fn hip_event_destroy(e: sys::hipEvent_t) -> sys::hipError_t {
    // SAFETY: an event the caller created.
    with_context!(map(unsafe { (drv!().cuEventDestroy_v2)(e as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_event_record(
    e: sys::hipEvent_t,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    // SAFETY: live event and stream.
    with_context!(map(unsafe {
        (drv!().cuEventRecord)(e as Handle, s as Handle)
    }))
}

pub(crate) unsafe extern "C" fn hip_event_synchronize(e: sys::hipEvent_t) -> sys::hipError_t {
    // SAFETY: live event.
    with_context!(map(unsafe { (drv!().cuEventSynchronize)(e as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_event_query(e: sys::hipEvent_t) -> sys::hipError_t {
    // SAFETY: live event.
    with_context!(map(unsafe { (drv!().cuEventQuery)(e as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_event_elapsed_time(
    ms: *mut f32,
    start: sys::hipEvent_t,
    stop: sys::hipEvent_t,
) -> sys::hipError_t {
    // SAFETY: the caller's out pointer, live events.
    with_context!(map(unsafe {
        (drv!().cuEventElapsedTime)(ms, start as Handle, stop as Handle)
    }))
}

pub(crate) unsafe extern "C" fn hip_module_load_data(
    m: *mut sys::hipModule_t,
    image: *const c_void,
) -> sys::hipError_t {
    // SAFETY: the caller's out pointer and complete image.
    with_context!(map(unsafe {
        (drv!().cuModuleLoadData)(m as *mut Handle, image)
    }))
}

pub(crate) unsafe extern "C" fn hip_module_unload(m: sys::hipModule_t) -> sys::hipError_t {
    // SAFETY: a loaded module.
    with_context!(map(unsafe { (drv!().cuModuleUnload)(m as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_module_get_function(
    f: *mut sys::hipFunction_t,
    m: sys::hipModule_t,
    name: *const c_char,
) -> sys::hipError_t {
    // SAFETY: the caller's out pointer, live module, NUL-terminated name.
    with_context!(map(unsafe {
        (drv!().cuModuleGetFunction)(f as *mut Handle, m as Handle, name)
    }))
}

pub(crate) unsafe extern "C" fn hip_module_get_global(
    p: *mut sys::hipDeviceptr_t,
    bytes: *mut usize,
    m: sys::hipModule_t,
    name: *const c_char,
) -> sys::hipError_t {
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out pointers, live module, NUL-terminated name.
    let e = with_context!(map(unsafe {
        (drv!().cuModuleGetGlobal_v2)(&mut d, bytes, m as Handle, name)
    }));
    if e == HIP_SUCCESS && !p.is_null() {
        // SAFETY: non-null out pointer.
        unsafe { *p = d as usize as sys::hipDeviceptr_t };
    }
    e
}

/// `hipModuleLaunchKernel` -> `cuLaunchKernel`, with nothing else on the path.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn hip_module_launch_kernel(
    f: sys::hipFunction_t,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    s: sys::hipStream_t,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> sys::hipError_t {
    // SAFETY: the caller's launch; the safe layer bound the context just before.
    map(unsafe {
        (drv!().cuLaunchKernel)(
            f as Handle,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            shared,
            s as Handle,
            params,
            extra,
        )
    })
}

/// A launch on a stream of `ordinal`, made before any bind: `cuLaunchKernel` straight away,
/// and only when the driver answers that the thread's current context does not fit
/// (`CUDA_ERROR_INVALID_CONTEXT` 201: none is current; `CUDA_ERROR_INVALID_HANDLE` 400: the
/// function or stream belongs to another context) the device's primary context made current
/// ([`set_device`]) and the launch made once more. A failed launch queued nothing, so trying
/// again is safe; on a thread whose current context is already the device's (every thread
/// after its first launch there) a launch is this one driver call, without the
/// `cuCtxGetCurrent` a bind would cost. The stream must be non-null: the null stream means the
/// current context's own, which only a bind can pin.
///
/// # Safety
/// As `cuLaunchKernel`: a live function and stream of device `ordinal`, `params` pointing at
/// the kernel's arguments.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) unsafe fn launch_on_stream(
    ordinal: c_int,
    f: sys::hipFunction_t,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    s: sys::hipStream_t,
    params: *mut *mut c_void,
) -> sys::hipError_t {
    let d = drv!();
    let launch = || {
        // SAFETY: the caller's launch (see above); `extra` is NULL.
        unsafe {
            (d.cuLaunchKernel)(
                f as Handle,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                s as Handle,
                params,
                std::ptr::null_mut(),
            )
        }
    };
    bound_on_refusal(ordinal, launch)
}

/// Whether the driver refused a call for the thread's current context
/// (`CUDA_ERROR_INVALID_CONTEXT` 201: none is current; `CUDA_ERROR_INVALID_HANDLE` 400: a
/// handle of another context): a call that changes nothing when refused may be made again once
/// the device's primary context is current.
#[inline]
pub(crate) fn refuses_the_context(rc: CUresult) -> bool {
    const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
    const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
    rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_HANDLE
}

/// `call` made at once, and only when the driver answers that the thread's current context
/// does not fit (`CUDA_ERROR_INVALID_CONTEXT` 201: none is current;
/// `CUDA_ERROR_INVALID_HANDLE` 400: a handle of another context) made once more after the
/// primary context of device `ordinal` is made current ([`set_device`]). For calls that change
/// nothing when refused: [`launch_on_stream`], [`exec_kernel_node_set_params_on`].
#[inline]
fn bound_on_refusal(ordinal: c_int, call: impl Fn() -> CUresult) -> sys::hipError_t {
    let rc = call();
    if !refuses_the_context(rc) {
        return map(rc);
    }
    let e = set_device(ordinal);
    if e != HIP_SUCCESS {
        return e;
    }
    map(call())
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn hip_module_launch_cooperative_kernel(
    f: sys::hipFunction_t,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    s: sys::hipStream_t,
    params: *mut *mut c_void,
) -> sys::hipError_t {
    let Some(launch) = drv!().cuLaunchCooperativeKernel else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: as above.
    map(unsafe {
        launch(
            f as Handle,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            shared,
            s as Handle,
            params,
        )
    })
}

fn cu_function_attribute(a: sys::hipFunction_attribute) -> Option<c_int> {
    // HIP_FUNC_ATTRIBUTE_* and CU_FUNC_ATTRIBUTE_* list the same attributes in the same order.
    (a < sys::HIP_FUNC_ATTRIBUTE_MAX).then_some(a as c_int)
}

pub(crate) unsafe extern "C" fn hip_func_get_attribute(
    v: *mut c_int,
    a: sys::hipFunction_attribute,
    f: sys::hipFunction_t,
) -> sys::hipError_t {
    let Some(a) = cu_function_attribute(a) else {
        return HIP_ERROR_INVALID_VALUE;
    };
    // SAFETY: the caller's out pointer, live function.
    with_context!(map(unsafe {
        (drv!().cuFuncGetAttribute)(v, a, f as Handle)
    }))
}

pub(crate) unsafe extern "C" fn hip_func_set_attribute(
    f: *const c_void,
    a: sys::hipFuncAttribute,
    value: c_int,
) -> sys::hipError_t {
    let Some(set) = drv!().cuFuncSetAttribute else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // hipFuncAttributeMaxDynamicSharedMemorySize (8) and ...PreferredSharedMemoryCarveout (9)
    // are CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES and ..._PREFERRED_SHARED_MEMORY_CARVEOUT.
    if a != sys::hipFuncAttributeMaxDynamicSharedMemorySize && a != 9 {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: `f` is a CUfunction handed out by hip_module_get_function / hip_kernel_get_function.
    with_context!(map(unsafe { set(f as Handle, a as c_int, value) }))
}

pub(crate) unsafe extern "C" fn hip_module_occupancy_max_active_blocks_per_multiprocessor(
    n: *mut c_int,
    f: sys::hipFunction_t,
    block: c_int,
    shared: usize,
) -> sys::hipError_t {
    let Some(occ) = drv!().cuOccupancyMaxActiveBlocksPerMultiprocessor else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer, live function.
    with_context!(map(unsafe { occ(n, f as Handle, block, shared) }))
}

/// The shims' own signature of `hipLibraryLoadData`. HIP 7.1's headers declare the option
/// arrays one pointer deeper (`hipJitOption**`, `hipLibraryOption**`) than the documented API
/// and hip-sys's fallback declaration, so `pfn::hipLibraryLoadData` differs between header
/// sets. Every parameter is a pointer or an integer in both forms (one C ABI), and the shims
/// accept only empty option arrays, never reading them: `cuda::api` converts the
/// shim to whichever `pfn` type the headers give.
pub(crate) type LibraryLoadDataShim = unsafe extern "C" fn(
    *mut sys::hipLibrary_t,
    *const c_void,
    *mut sys::hipJitOption,
    *mut *mut c_void,
    c_uint,
    *mut sys::hipLibraryOption,
    *mut *mut c_void,
    c_uint,
) -> sys::hipError_t;

/// The shims' own signature of `hipLibraryLoadFromFile` (see [`LibraryLoadDataShim`]).
pub(crate) type LibraryLoadFromFileShim = unsafe extern "C" fn(
    *mut sys::hipLibrary_t,
    *const c_char,
    *mut sys::hipJitOption,
    *mut *mut c_void,
    c_uint,
    *mut sys::hipLibraryOption,
    *mut *mut c_void,
    c_uint,
) -> sys::hipError_t;

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn hip_library_load_data(
    l: *mut sys::hipLibrary_t,
    code: *const c_void,
    _jit: *mut sys::hipJitOption,
    _jit_values: *mut *mut c_void,
    num_jit: c_uint,
    _lib: *mut sys::hipLibraryOption,
    _lib_values: *mut *mut c_void,
    num_lib: c_uint,
) -> sys::hipError_t {
    if num_jit != 0 || num_lib != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    let Some(load) = drv!().cuLibraryLoadData else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer and complete image; no options.
    with_context!(map(unsafe {
        load(
            l as *mut Handle,
            code,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn hip_library_load_from_file(
    l: *mut sys::hipLibrary_t,
    path: *const c_char,
    _jit: *mut sys::hipJitOption,
    _jit_values: *mut *mut c_void,
    num_jit: c_uint,
    _lib: *mut sys::hipLibraryOption,
    _lib_values: *mut *mut c_void,
    num_lib: c_uint,
) -> sys::hipError_t {
    if num_jit != 0 || num_lib != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    let Some(load) = drv!().cuLibraryLoadFromFile else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer and NUL-terminated path; no options.
    with_context!(map(unsafe {
        load(
            l as *mut Handle,
            path,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }))
}

pub(crate) unsafe extern "C" fn hip_library_unload(l: sys::hipLibrary_t) -> sys::hipError_t {
    let Some(unload) = drv!().cuLibraryUnload else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: a loaded library.
    with_context!(map(unsafe { unload(l as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_library_get_kernel(
    k: *mut sys::hipKernel_t,
    l: sys::hipLibrary_t,
    name: *const c_char,
) -> sys::hipError_t {
    let Some(get) = drv!().cuLibraryGetKernel else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer, live library, NUL-terminated name.
    with_context!(map(unsafe { get(k as *mut Handle, l as Handle, name) }))
}

pub(crate) unsafe extern "C" fn hip_library_get_kernel_count(
    n: *mut c_uint,
    l: sys::hipLibrary_t,
) -> sys::hipError_t {
    let Some(count) = drv!().cuLibraryGetKernelCount else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer, live library.
    with_context!(map(unsafe { count(n, l as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_library_enumerate_kernels(
    k: *mut sys::hipKernel_t,
    n: c_uint,
    l: sys::hipLibrary_t,
) -> sys::hipError_t {
    let Some(enumerate) = drv!().cuLibraryEnumerateKernels else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: room for `n` handles at `k`, live library.
    with_context!(map(unsafe { enumerate(k as *mut Handle, n, l as Handle) }))
}

pub(crate) unsafe extern "C" fn hip_kernel_get_function(
    f: *mut sys::hipFunction_t,
    k: sys::hipKernel_t,
) -> sys::hipError_t {
    let Some(get) = drv!().cuKernelGetFunction else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    // SAFETY: the caller's out pointer, live kernel; the function is the current context's.
    with_context!(map(unsafe { get(f as *mut Handle, k as Handle) }))
}

// Peer access and peer copies (several devices in one process).

/// `hipDeviceCanAccessPeer` -> `cuDeviceCanAccessPeer` of the two ordinals' devices.
pub(crate) unsafe extern "C" fn hip_device_can_access_peer(
    can: *mut c_int,
    device: c_int,
    peer: c_int,
) -> sys::hipError_t {
    let Some(can_access) = drv!().cuDeviceCanAccessPeer else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    if can.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let count = match device_count() {
        Ok(n) => n,
        Err(e) => return e,
    };
    if device < 0 || device >= count || peer < 0 || peer >= count {
        return HIP_ERROR_INVALID_DEVICE;
    }
    let (mut dev, mut peer_dev) = (0, 0);
    // SAFETY: valid out pointers, ordinals in range.
    let rc = unsafe { (drv!().cuDeviceGet)(&mut dev, device) };
    if rc != CUDA_SUCCESS {
        return map(rc);
    }
    // SAFETY: as above.
    let rc = unsafe { (drv!().cuDeviceGet)(&mut peer_dev, peer) };
    if rc != CUDA_SUCCESS {
        return map(rc);
    }
    // SAFETY: the caller's out pointer, checked non-null.
    map(unsafe { can_access(can, dev, peer_dev) })
}

/// `hipDeviceEnablePeerAccess(peer, flags)` -> `cuCtxEnablePeerAccess(primary context of
/// peer, flags)` from the current context: kernels and copies of the current device may then
/// access `peer`'s memory. Already enabled: `hipErrorPeerAccessAlreadyEnabled` (704), as both
/// runtimes answer.
pub(crate) unsafe extern "C" fn hip_device_enable_peer_access(
    peer: c_int,
    flags: c_uint,
) -> sys::hipError_t {
    let Some(enable) = drv!().cuCtxEnablePeerAccess else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    let peer_ctx = match primary_context(peer) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: a retained primary context; the current one is bound first.
    with_context!(map(unsafe { enable(peer_ctx, flags) }))
}

/// `hipMemcpyPeerAsync` -> `cuMemcpyPeerAsync` between the two devices' primary contexts,
/// ordered on `stream`.
pub(crate) unsafe extern "C" fn hip_memcpy_peer_async(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
    stream: sys::hipStream_t,
) -> sys::hipError_t {
    let Some(copy) = drv!().cuMemcpyPeerAsync else {
        return HIP_ERROR_NOT_SUPPORTED;
    };
    let (dst_ctx, src_ctx) = match (primary_context(dst_device), primary_context(src_device)) {
        (Ok(d), Ok(s)) => (d, s),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    // SAFETY: the caller's device regions of `bytes` bytes on the devices named, a live stream.
    with_context!(map(unsafe {
        copy(
            dptr(dst),
            dst_ctx,
            dptr(src),
            src_ctx,
            bytes,
            stream as Handle,
        )
    }))
}

/// The optional driver entry point `$name`, or a return of `hipErrorNotSupported`.
macro_rules! opt {
    ($name:ident) => {
        match drv!().$name {
            Some(f) => f,
            None => return HIP_ERROR_NOT_SUPPORTED,
        }
    };
}

/// `hipStreamBeginCapture` -> `cuStreamBeginCapture_v2` (the capture modes have the same
/// values: global 0, thread-local 1, relaxed 2).
pub(crate) unsafe extern "C" fn hip_stream_begin_capture(
    s: sys::hipStream_t,
    mode: sys::hipStreamCaptureMode,
) -> sys::hipError_t {
    let begin = opt!(cuStreamBeginCapture_v2);
    // SAFETY: the caller's stream; the mode is passed through.
    with_context!(map(unsafe { begin(s as Handle, mode as c_int) }))
}

/// `hipStreamEndCapture` -> `cuStreamEndCapture`.
pub(crate) unsafe extern "C" fn hip_stream_end_capture(
    s: sys::hipStream_t,
    graph: *mut sys::hipGraph_t,
) -> sys::hipError_t {
    let end = opt!(cuStreamEndCapture);
    // SAFETY: the caller's stream and out pointer (a hipGraph_t is a CUgraph).
    with_context!(map(unsafe { end(s as Handle, graph as *mut Handle) }))
}

/// `hipStreamIsCapturing` -> `cuStreamIsCapturing` (statuses have the same values: none 0,
/// active 1, invalidated 2).
pub(crate) unsafe extern "C" fn hip_stream_is_capturing(
    s: sys::hipStream_t,
    status: *mut sys::hipStreamCaptureStatus,
) -> sys::hipError_t {
    let is_capturing = opt!(cuStreamIsCapturing);
    if status.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let mut st: c_int = 0;
    // SAFETY: the caller's stream; valid out pointer.
    let e = with_context!(map(unsafe { is_capturing(s as Handle, &mut st) }));
    if e == HIP_SUCCESS {
        // SAFETY: non-null out pointer.
        unsafe { *status = st as sys::hipStreamCaptureStatus };
    }
    e
}

/// `hipThreadExchangeStreamCaptureMode` -> `cuThreadExchangeStreamCaptureMode`.
pub(crate) unsafe extern "C" fn hip_thread_exchange_stream_capture_mode(
    mode: *mut sys::hipStreamCaptureMode,
) -> sys::hipError_t {
    let exchange = opt!(cuThreadExchangeStreamCaptureMode);
    if mode.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: non-null in/out pointer.
    let mut m = unsafe { *mode } as c_int;
    // SAFETY: valid in/out pointer.
    let e = map(unsafe { exchange(&mut m) });
    if e == HIP_SUCCESS {
        // SAFETY: non-null out pointer.
        unsafe { *mode = m as sys::hipStreamCaptureMode };
    }
    e
}

/// `hipGraphInstantiateWithFlags` -> `cuGraphInstantiateWithFlags`.
pub(crate) unsafe extern "C" fn hip_graph_instantiate_with_flags(
    exec: *mut sys::hipGraphExec_t,
    graph: sys::hipGraph_t,
    flags: std::ffi::c_ulonglong,
) -> sys::hipError_t {
    let instantiate = opt!(cuGraphInstantiateWithFlags);
    // SAFETY: the caller's out pointer and graph.
    with_context!(map(unsafe {
        instantiate(exec as *mut Handle, graph as Handle, flags)
    }))
}

/// `hipGraphLaunch` -> `cuGraphLaunch`; like a kernel launch, the safe layer bound the context.
pub(crate) unsafe extern "C" fn hip_graph_launch(
    exec: sys::hipGraphExec_t,
    s: sys::hipStream_t,
) -> sys::hipError_t {
    let launch = opt!(cuGraphLaunch);
    // SAFETY: the caller's executable graph and stream.
    map(unsafe { launch(exec as Handle, s as Handle) })
}

/// `hipGraphDestroy` -> `cuGraphDestroy`.
pub(crate) unsafe extern "C" fn hip_graph_destroy(graph: sys::hipGraph_t) -> sys::hipError_t {
    let destroy = opt!(cuGraphDestroy);
    // SAFETY: the caller's graph.
    with_context!(map(unsafe { destroy(graph as Handle) }))
}

/// `hipGraphExecDestroy` -> `cuGraphExecDestroy`.
pub(crate) unsafe extern "C" fn hip_graph_exec_destroy(
    exec: sys::hipGraphExec_t,
) -> sys::hipError_t {
    let destroy = opt!(cuGraphExecDestroy);
    // SAFETY: the caller's executable graph.
    with_context!(map(unsafe { destroy(exec as Handle) }))
}

/// `hipGraphGetNodes` -> `cuGraphGetNodes`.
pub(crate) unsafe extern "C" fn hip_graph_get_nodes(
    graph: sys::hipGraph_t,
    nodes: *mut sys::hipGraphNode_t,
    count: *mut usize,
) -> sys::hipError_t {
    let get = opt!(cuGraphGetNodes);
    // SAFETY: the caller's graph, array (or NULL) and count.
    with_context!(map(unsafe {
        get(graph as Handle, nodes as *mut Handle, count)
    }))
}

/// `hipGraphNodeGetType` -> `cuGraphNodeGetType` (a kernel node is 0 on both).
pub(crate) unsafe extern "C" fn hip_graph_node_get_type(
    node: sys::hipGraphNode_t,
    ty: *mut sys::hipGraphNodeType,
) -> sys::hipError_t {
    let get = opt!(cuGraphNodeGetType);
    if ty.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let mut t: c_int = 0;
    // SAFETY: the caller's node; valid out pointer.
    let e = with_context!(map(unsafe { get(node as Handle, &mut t) }));
    if e == HIP_SUCCESS {
        // SAFETY: non-null out pointer.
        unsafe { *ty = t as sys::hipGraphNodeType };
    }
    e
}

/// `hipGraphExecKernelNodeSetParams` -> `cuGraphExecKernelNodeSetParams_v2`, the
/// `hipKernelNodeParams` rewritten as a `CUDA_KERNEL_NODE_PARAMS_v2` (`func` is the
/// `CUfunction`; `kern` and `ctx` NULL).
pub(crate) unsafe extern "C" fn hip_graph_exec_kernel_node_set_params(
    exec: sys::hipGraphExec_t,
    node: sys::hipGraphNode_t,
    params: *const sys::hipKernelNodeParams,
) -> sys::hipError_t {
    let set = opt!(cuGraphExecKernelNodeSetParams_v2);
    if params.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    // SAFETY: non-null, the caller's parameters.
    let cu = kernel_node_params(unsafe { &*params });
    // SAFETY: the caller's executable graph and node; `cu` lives for the call.
    with_context!(map(unsafe { set(exec as Handle, node as Handle, &cu) }))
}

/// HIP's kernel-node parameters as the driver's (`CUDA_KERNEL_NODE_PARAMS_v2`, no kernel or
/// context handle: the function's own).
#[inline]
pub(crate) fn kernel_node_params(p: &sys::hipKernelNodeParams) -> driver::KernelNodeParams {
    driver::KernelNodeParams {
        func: p.func as Handle,
        gridDimX: p.gridDim.x,
        gridDimY: p.gridDim.y,
        gridDimZ: p.gridDim.z,
        blockDimX: p.blockDim.x,
        blockDimY: p.blockDim.y,
        blockDimZ: p.blockDim.z,
        sharedMemBytes: p.sharedMemBytes,
        kernelParams: p.kernelParams,
        extra: p.extra,
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A kernel-node update of an executable graph of device `ordinal`, made before any bind, as
/// [`launch_on_stream`] launches: `cuGraphExecKernelNodeSetParams_v2` straight away, and only
/// when the driver answers that the thread's current context does not fit (201, 400) the
/// device's primary context made current and the update made once more (a refused update
/// changed nothing). Saves the two `cuCtxGetCurrent` of a bind and of
/// [`hip_graph_exec_kernel_node_set_params`] on every node of a pass.
///
/// # Safety
/// As `cuGraphExecKernelNodeSetParams_v2`: a live executable graph and a kernel node of it,
/// `params` pointing at live values for the call.
pub(crate) unsafe fn exec_kernel_node_set_params_on(
    ordinal: c_int,
    exec: sys::hipGraphExec_t,
    node: sys::hipGraphNode_t,
    params: &sys::hipKernelNodeParams,
) -> sys::hipError_t {
    let set = opt!(cuGraphExecKernelNodeSetParams_v2);
    let cu = kernel_node_params(params);
    // SAFETY: the caller's executable graph and node; `cu` lives for the call.
    bound_on_refusal(ordinal, || unsafe {
        set(exec as Handle, node as Handle, &cu)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_cu_results_keep_their_value() {
        // CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NOT_READY.
        for (cu, hip) in [
            (100, "hipErrorNoDevice"),
            (200, "hipErrorInvalidImage"),
            (218, "hipErrorInvalidKernelFile"),
            (600, "hipErrorNotReady"),
        ] {
            assert_eq!(hip_error_of(cu), cu as sys::hipError_t);
            assert_eq!(crate::safe::error::hip_error_name(cu), Some(hip));
        }
    }

    #[test]
    fn every_mapped_cu_result_has_a_hip_name() {
        for &cu in MAPPED_CU_RESULTS {
            assert!(crate::safe::error::hip_error_name(cu).is_some(), "{cu}");
        }
    }

    #[test]
    fn unmapped_cu_results_become_hip_error_unknown() {
        // CUDA_ERROR_NVLINK_UNCORRECTABLE (220), CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222),
        // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803).
        for cu in [220, 222, 803] {
            assert_eq!(hip_error_of(cu), HIP_ERROR_UNKNOWN);
        }
        assert_eq!(hip_error_of(0), HIP_SUCCESS);
    }
}
