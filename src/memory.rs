//! Device memory ([`DeviceBuffer`]), pinned host memory ([`PinnedBuffer`]) and copies between
//! them.
//!
//! Asynchronous copies never outlive the host memory they use:
//! - inside [`async_scope`], host slices stay borrowed until the stream has been synchronized
//!   (the same shape as `std::thread::scope`; the synchronization also runs when the closure
//!   panics);
//! - [`PinnedBuffer::copy_to_device_async`] and [`PinnedBuffer::copy_from_device_async`] move the
//!   pinned buffer into an [`InFlight`] that gives it back after synchronizing, and leaks it if
//!   forgotten.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use hip_sys as sys;

use crate::device::Device;
use crate::error::HipError;
use crate::stream::AsStream;

/// Types whose values may be copied to and from the device byte for byte: no pointers to host
/// memory, no padding whose reading matters, every bit pattern the device may write is a valid
/// value.
///
/// # Safety
/// The type must be `Copy`, contain no references or host pointers that the device could
/// invalidate, and be valid for any bit pattern.
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number; every bit pattern is valid.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64);

// SAFETY: an array of valid-for-any-bits values is valid for any bits.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

fn size_of_n<T>(n: usize) -> usize {
    n.saturating_mul(std::mem::size_of::<T>())
}

/// `len` values of `T` in device memory (`hipMalloc`), freed on drop (`hipFree`, which waits for
/// the device's pending work first).
pub struct DeviceBuffer<T: DeviceCopy> {
    device: Device,
    ptr: sys::hipDeviceptr_t,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: device memory is not tied to a host thread; every call binds the device first.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&DeviceBuffer` only reads the handle; writes need `&mut`.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device.ordinal())
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates `len` values on `device` (`hipMalloc`); the contents are unspecified (any bit
    /// pattern, which `T: DeviceCopy` allows).
    ///
    /// Errors: the runtime's error (`hipErrorOutOfMemory`...).
    pub fn alloc(device: &Device, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        device.bind()?;
        let rt = device.runtime();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        rt.check(
            unsafe { (rt.api().hipMalloc)(&mut ptr as *mut *mut c_void as _, size_of_n::<T>(len)) },
            "hipMalloc",
        )?;
        Ok(DeviceBuffer {
            device: device.clone(),
            ptr: ptr as _,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates `len` values set to zero bytes (`hipMalloc`, `hipMemset`).
    ///
    /// Errors: the runtime's error.
    pub fn zeroed(device: &Device, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        let mut b = Self::alloc(device, len)?;
        b.memset(0)?;
        Ok(b)
    }

    /// Allocates a buffer holding a copy of `src` (`hipMalloc`, `hipMemcpy` host to device).
    ///
    /// Errors: the runtime's error.
    pub fn from_slice(device: &Device, src: &[T]) -> Result<DeviceBuffer<T>, HipError> {
        let mut b = Self::alloc(device, src.len())?;
        b.copy_from_host(src)?;
        Ok(b)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        size_of_n::<T>(self.len)
    }

    /// The device this buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw device pointer (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipDeviceptr_t {
        self.ptr
    }

    /// The address of the device pointer itself: what a kernel-argument array points at.
    pub(crate) fn ptr_slot(&self) -> *const c_void {
        &self.ptr as *const sys::hipDeviceptr_t as *const c_void
    }

    fn check_len(&self, other: usize, call: &'static str) -> Result<(), HipError> {
        if other == self.len {
            Ok(())
        } else {
            Err(HipError::new(
                1,
                call,
                None,
                format!(
                    "refused by hipjit before the call: host slice of {other} values for a \
                     device buffer of {} values",
                    self.len
                ),
            ))
        }
    }

    /// Copies `src` to the device, waiting for the copy (`hipMemcpy`, host to device).
    ///
    /// Errors: `hipErrorInvalidValue` when `src.len()` differs from [`DeviceBuffer::len`]
    /// (checked by hipjit, message says both lengths), or the runtime's error.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<(), HipError> {
        self.check_len(src.len(), "hipMemcpy")?;
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: `ptr` holds `len` values; `src` is a live slice of the same byte size; the
        // call returns when the copy is done.
        rt.check(
            unsafe {
                (rt.api().hipMemcpy)(
                    self.ptr as _,
                    src.as_ptr() as _,
                    self.size_bytes(),
                    sys::hipMemcpyHostToDevice,
                )
            },
            "hipMemcpy",
        )
    }

    /// Copies the buffer into `dst`, waiting for the copy (`hipMemcpy`, device to host).
    ///
    /// Errors: as [`DeviceBuffer::copy_from_host`].
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<(), HipError> {
        self.check_len(dst.len(), "hipMemcpy")?;
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: as in copy_from_host, the other direction; any bits are a valid `T`.
        rt.check(
            unsafe {
                (rt.api().hipMemcpy)(
                    dst.as_mut_ptr() as _,
                    self.ptr as _,
                    self.size_bytes(),
                    sys::hipMemcpyDeviceToHost,
                )
            },
            "hipMemcpy",
        )
    }

    /// The buffer's contents as a vector (`hipMemcpy`, device to host).
    ///
    /// Errors: the runtime's error.
    pub fn to_vec(&self) -> Result<Vec<T>, HipError> {
        let mut v = Vec::with_capacity(self.len);
        let rt = self.device.runtime();
        self.device.bind()?;
        // SAFETY: `v` has capacity for `len` values; hipMemcpy fills all of them before
        // `set_len`, and any bits are a valid `T`.
        unsafe {
            rt.check(
                (rt.api().hipMemcpy)(
                    v.as_mut_ptr() as *mut c_void as _,
                    self.ptr as _,
                    self.size_bytes(),
                    sys::hipMemcpyDeviceToHost,
                ),
                "hipMemcpy",
            )?;
            v.set_len(self.len);
        }
        Ok(v)
    }

    /// Copies `src` (same length, same device) into this buffer (`hipMemcpy`, device to device).
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when `src`
    /// belongs to another loaded runtime (both checked by hipjit), or the runtime's error.
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<T>) -> Result<(), HipError> {
        self.check_len(src.len, "hipMemcpy")?;
        self.device
            .check_same_runtime(&src.device, "source buffer", "hipMemcpy")?;
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: both buffers hold `len` values.
        rt.check(
            unsafe {
                (rt.api().hipMemcpy)(
                    self.ptr as _,
                    src.ptr as _,
                    self.size_bytes(),
                    sys::hipMemcpyDeviceToDevice,
                )
            },
            "hipMemcpy",
        )
    }

    /// Sets every byte to `byte` (`hipMemset`).
    ///
    /// Errors: the runtime's error.
    pub fn memset(&mut self, byte: u8) -> Result<(), HipError> {
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: `ptr` holds size_bytes() bytes.
        rt.check(
            unsafe { (rt.api().hipMemset)(self.ptr as _, i32::from(byte) as _, self.size_bytes()) },
            "hipMemset",
        )
    }

    /// Queues setting every byte to `byte` on `stream` (`hipMemsetAsync`). Only device memory
    /// is touched, so nothing on the host must outlive it.
    ///
    /// Errors: `hipErrorInvalidHandle` when `stream` belongs to another loaded runtime (checked
    /// by hipjit), or the runtime's error.
    pub fn memset_async(&mut self, byte: u8, stream: &impl AsStream) -> Result<(), HipError> {
        self.device
            .check_same_runtime(stream.device(), "stream", "hipMemsetAsync")?;
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: `ptr` holds size_bytes() bytes; freeing it (hipFree) waits for queued work.
        rt.check(
            unsafe {
                (rt.api().hipMemsetAsync)(
                    self.ptr as _,
                    i32::from(byte) as _,
                    self.size_bytes(),
                    stream.as_raw(),
                )
            },
            "hipMemsetAsync",
        )
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to free a device buffer");
        }
        // SAFETY: `ptr` came from hipMalloc and is freed once.
        if let Err(e) = rt.check(unsafe { (rt.api().hipFree)(self.ptr as _) }, "hipFree") {
            tracing::error!(error = %e, "failed to free a device buffer");
        }
    }
}

/// `len` values of `T` in page-locked host memory (`hipHostMalloc`), freed on drop
/// (`hipHostFree`, which waits for the device first). Dereferences to a slice; copies from and
/// to it run asynchronously on the device's DMA engines.
pub struct PinnedBuffer<T: DeviceCopy> {
    device: Device,
    ptr: *mut T,
    len: usize,
}

// SAFETY: page-locked memory is ordinary host memory owned by this value.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access only reads.
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<T> {}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// Allocates `len` values, zero-filled (`hipHostMalloc` with `hipHostMallocDefault`). A
    /// buffer of 0 bytes allocates nothing (as `hipHostMalloc` of 0 bytes in HIP) and calls no
    /// runtime entry point.
    ///
    /// Errors: the runtime's error.
    pub fn zeroed(device: &Device, len: usize) -> Result<PinnedBuffer<T>, HipError> {
        let bytes = size_of_n::<T>(len);
        if bytes == 0 {
            // Drop frees nothing for 0 bytes, so nothing may be allocated for them either (a
            // runtime that answers 0 bytes with a non-null pointer would otherwise leak it).
            return Ok(PinnedBuffer {
                device: device.clone(),
                ptr: std::ptr::NonNull::<T>::dangling().as_ptr(),
                len,
            });
        }
        device.bind()?;
        let rt = device.runtime();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer; flags 0 = hipHostMallocDefault.
        rt.check(
            unsafe { (rt.api().hipHostMalloc)(&mut ptr as *mut *mut c_void as _, bytes, 0) },
            "hipHostMalloc",
        )?;
        if ptr.is_null() {
            return Err(HipError::new(
                2,
                "hipHostMalloc",
                None,
                "returned NULL".into(),
            ));
        }
        // SAFETY: `ptr` points at `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(PinnedBuffer {
            device: device.clone(),
            ptr: ptr as *mut T,
            len,
        })
    }

    /// Allocates a pinned copy of `src`.
    ///
    /// Errors: the runtime's error.
    pub fn from_slice(device: &Device, src: &[T]) -> Result<PinnedBuffer<T>, HipError> {
        let mut b = Self::zeroed(device, src.len())?;
        b.copy_from_slice(src);
        Ok(b)
    }
}

impl<T: DeviceCopy> std::ops::Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised values (zero-filled at allocation, valid for
        // any bits) owned by `self`, or is dangling with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> std::ops::DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, with exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if size_of_n::<T>(self.len) == 0 {
            return;
        }
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to free pinned host memory");
        }
        // SAFETY: `ptr` came from hipHostMalloc and is freed once.
        if let Err(e) = rt.check(
            unsafe { (rt.api().hipHostFree)(self.ptr as *mut c_void as _) },
            "hipHostFree",
        ) {
            tracing::error!(error = %e, "failed to free pinned host memory");
        }
    }
}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// Queues a copy of this buffer into `dst` on `stream` (`hipMemcpyAsync`, host to device)
    /// and hands the buffer to the returned [`InFlight`], which gives it back once the stream
    /// has been synchronized. Forgetting the [`InFlight`] leaks the pinned memory instead of
    /// freeing it under the copy.
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when
    /// `stream` belongs to another loaded runtime (both checked by hipjit), or the runtime's
    /// error (the buffer is then freed, which waits for the device).
    pub fn copy_to_device_async<'s, S: AsStream>(
        self,
        dst: &mut DeviceBuffer<T>,
        stream: &'s S,
    ) -> Result<InFlight<'s, T, S>, HipError> {
        dst.check_len(self.len, "hipMemcpyAsync")?;
        dst.device
            .check_same_runtime(stream.device(), "stream", "hipMemcpyAsync")?;
        dst.device.bind()?;
        let rt = dst.device.runtime();
        // SAFETY: sizes match; `self` moves into the InFlight, which frees it only after
        // synchronizing the stream (or leaks it when forgotten).
        rt.check(
            unsafe {
                (rt.api().hipMemcpyAsync)(
                    dst.ptr as _,
                    self.ptr as *const c_void as _,
                    dst.size_bytes(),
                    sys::hipMemcpyHostToDevice,
                    stream.as_raw(),
                )
            },
            "hipMemcpyAsync",
        )?;
        Ok(InFlight {
            buffer: std::mem::ManuallyDrop::new(self),
            stream,
        })
    }

    /// Queues a copy of `src` into this buffer on `stream` (`hipMemcpyAsync`, device to host);
    /// [`InFlight::wait`] gives the buffer back holding the data.
    ///
    /// Errors: as [`PinnedBuffer::copy_to_device_async`].
    pub fn copy_from_device_async<'s, S: AsStream>(
        self,
        src: &DeviceBuffer<T>,
        stream: &'s S,
    ) -> Result<InFlight<'s, T, S>, HipError> {
        src.check_len(self.len, "hipMemcpyAsync")?;
        src.device
            .check_same_runtime(stream.device(), "stream", "hipMemcpyAsync")?;
        src.device.bind()?;
        let rt = src.device.runtime();
        // SAFETY: as in copy_to_device_async, the other direction.
        rt.check(
            unsafe {
                (rt.api().hipMemcpyAsync)(
                    self.ptr as *mut c_void as _,
                    src.ptr as _,
                    src.size_bytes(),
                    sys::hipMemcpyDeviceToHost,
                    stream.as_raw(),
                )
            },
            "hipMemcpyAsync",
        )?;
        Ok(InFlight {
            buffer: std::mem::ManuallyDrop::new(self),
            stream,
        })
    }
}

/// A [`PinnedBuffer`] with a copy queued on a stream. [`InFlight::wait`] synchronizes the
/// stream and gives the buffer back; dropping it synchronizes and frees the buffer; forgetting
/// it (`std::mem::forget`) leaks the buffer, so the device never copies from or into freed
/// memory.
#[must_use = "the copy is complete only after wait() or drop"]
pub struct InFlight<'s, T: DeviceCopy, S: AsStream> {
    buffer: std::mem::ManuallyDrop<PinnedBuffer<T>>,
    stream: &'s S,
}

impl<T: DeviceCopy, S: AsStream> InFlight<'_, T, S> {
    /// Waits for the copy (`hipStreamSynchronize`) and returns the buffer.
    ///
    /// Errors: the runtime's error from `hipStreamSynchronize`; the buffer is then leaked, not
    /// freed, since the device may still use it.
    pub fn wait(self) -> Result<PinnedBuffer<T>, HipError> {
        let mut this = std::mem::ManuallyDrop::new(self);
        this.stream.synchronize()?;
        // SAFETY: `this` is never dropped, so the buffer is taken exactly once.
        Ok(unsafe { std::mem::ManuallyDrop::take(&mut this.buffer) })
    }
}

impl<T: DeviceCopy, S: AsStream> Drop for InFlight<'_, T, S> {
    fn drop(&mut self) {
        match self.stream.synchronize() {
            // SAFETY: dropped once, here; the copy has finished.
            Ok(()) => unsafe { std::mem::ManuallyDrop::drop(&mut self.buffer) },
            Err(e) => {
                tracing::error!(error = %e, "stream synchronize of an in-flight copy failed; pinned buffer leaked");
            }
        }
    }
}

/// The handle given to the closure of [`async_scope`]: queues asynchronous copies whose host
/// memory is borrowed until the scope's stream has been synchronized.
pub struct AsyncScope<'scope, 'env: 'scope, S: AsStream> {
    stream: &'scope S,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope, 'env, S: AsStream> AsyncScope<'scope, 'env, S> {
    /// Queues a copy of `src` into `dst` on the scope's stream (`hipMemcpyAsync`, host to
    /// device). `src` stays borrowed until the stream has been synchronized at the end of the
    /// scope.
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when the
    /// scope's stream belongs to another loaded runtime than `dst` (both checked by hipjit), or
    /// the runtime's error.
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        src: &'scope [T],
        dst: &'scope mut DeviceBuffer<T>,
    ) -> Result<(), HipError> {
        dst.check_len(src.len(), "hipMemcpyAsync")?;
        dst.device
            .check_same_runtime(self.stream.device(), "stream", "hipMemcpyAsync")?;
        dst.device.bind()?;
        let rt = dst.device.runtime();
        // SAFETY: sizes match; `src` and `dst` stay borrowed until the stream is synchronized
        // by `async_scope`.
        rt.check(
            unsafe {
                (rt.api().hipMemcpyAsync)(
                    dst.ptr as _,
                    src.as_ptr() as _,
                    dst.size_bytes(),
                    sys::hipMemcpyHostToDevice,
                    self.stream.as_raw(),
                )
            },
            "hipMemcpyAsync",
        )
    }

    /// Queues a copy of `src` into `dst` (`hipMemcpyAsync`, device to host); `dst` holds the
    /// data once the scope has returned.
    ///
    /// Errors: as [`AsyncScope::copy_to_device`].
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        src: &'scope DeviceBuffer<T>,
        dst: &'scope mut [T],
    ) -> Result<(), HipError> {
        src.check_len(dst.len(), "hipMemcpyAsync")?;
        src.device
            .check_same_runtime(self.stream.device(), "stream", "hipMemcpyAsync")?;
        src.device.bind()?;
        let rt = src.device.runtime();
        // SAFETY: as in copy_to_device, the other direction.
        rt.check(
            unsafe {
                (rt.api().hipMemcpyAsync)(
                    dst.as_mut_ptr() as _,
                    src.ptr as _,
                    src.size_bytes(),
                    sys::hipMemcpyDeviceToHost,
                    self.stream.as_raw(),
                )
            },
            "hipMemcpyAsync",
        )
    }

    /// The scope's stream.
    pub fn stream(&self) -> &S {
        self.stream
    }
}

struct SyncOnDrop<'a, S: AsStream> {
    stream: &'a S,
    done: bool,
}

impl<S: AsStream> Drop for SyncOnDrop<'_, S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.stream.synchronize() {
            tracing::error!(error = %e, "stream synchronize at the end of an async scope failed");
            if let Err(e) = self.stream.device().synchronize() {
                tracing::error!(error = %e, "device synchronize after a failed stream synchronize failed");
            }
        }
    }
}

/// Runs `f`, which may queue asynchronous host/device copies on `stream` through the
/// [`AsyncScope`] it is given, then synchronizes `stream` (also when `f` panics). Host slices
/// handed to the scope are borrowed for the whole call, so they outlive every copy.
///
/// ```no_run
/// # use hipjit::{memory::{async_scope, DeviceBuffer, PinnedBuffer}, stream::{Stream, StreamFlags}};
/// # fn f(device: &hipjit::device::Device) -> Result<(), hipjit::error::HipError> {
/// let stream = Stream::new(device, StreamFlags::NON_BLOCKING)?;
/// let host = PinnedBuffer::from_slice(device, &[1.0f32; 256])?;
/// let mut buf = DeviceBuffer::<f32>::alloc(device, 256)?;
/// async_scope(&stream, |s| s.copy_to_device(&host, &mut buf))??;
/// # Ok(()) }
/// ```
///
/// A slice that would be dropped before the synchronization cannot be handed to the scope:
///
/// ```compile_fail,E0597
/// # use hipjit::{memory::{async_scope, DeviceBuffer}, stream::Stream};
/// # fn f(stream: &Stream, buf: &mut DeviceBuffer<u32>) {
/// let _ = async_scope(stream, |s| {
///     let local = vec![1u32; 4];
///     s.copy_to_device(&local, buf) // `local` does not live until the stream is synchronized
/// });
/// # }
/// ```
///
/// Errors: the runtime's error from `hipStreamSynchronize`; `f`'s own result is returned inside.
pub fn async_scope<'env, S, R, F>(stream: &'env S, f: F) -> Result<R, HipError>
where
    S: AsStream,
    F: for<'scope> FnOnce(&'scope AsyncScope<'scope, 'env, S>) -> R,
{
    let scope = AsyncScope {
        stream,
        _scope: PhantomData,
        _env: PhantomData,
    };
    let mut guard = SyncOnDrop {
        stream,
        done: false,
    };
    let r = f(&scope);
    guard.done = true;
    match stream.synchronize() {
        Ok(()) => Ok(r),
        Err(e) => {
            // The borrows end when this returns: make sure the device is done with them.
            if let Err(e2) = stream.device().synchronize() {
                tracing::error!(error = %e2, "device synchronize after a failed stream synchronize failed");
            }
            Err(e)
        }
    }
}
