//! [`PinnedBuffer`]: page-locked host memory, and [`InFlight`]: a pinned buffer owned by a copy
//! queued on a stream until that stream has been synchronized.

use std::ffi::c_void;

use hip_sys as sys;

use super::buffer::check_len;
use super::view::queue_copy;
use super::{alloc_bytes, size_of_n, DeviceCopy, DeviceMemory, DeviceMemoryMut};
use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::stream::AsStream;

/// `len` values of `T` in page-locked host memory (`hipHostMalloc`), freed on drop
/// (`hipHostFree`, which waits for the device first: keep pinned buffers for reuse rather than
/// dropping them while kernels run). Dereferences to a slice; copies from and
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
    /// Errors: `hipErrorOutOfMemory` before the call when `len` values of `T` exceed
    /// `isize::MAX` bytes (checked by hipjit), or the runtime's error.
    pub fn zeroed(device: &Device, len: usize) -> Result<PinnedBuffer<T>, HipError> {
        let bytes = alloc_bytes::<T>(len, "hipHostMalloc")?;
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
    /// `dst` may be any writable region ([`DeviceMemoryMut`]: a buffer, a [`super::DeviceSliceMut`]).
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when
    /// `stream` belongs to another loaded runtime (both checked by hipjit), or the runtime's
    /// error (the stream is then synchronized and the buffer freed).
    pub fn copy_to_device_async<'s, S: AsStream>(
        self,
        dst: &mut impl DeviceMemoryMut<T>,
        stream: &'s S,
    ) -> Result<InFlight<'s, T, S>, HipError> {
        check_len(self.len, dst.len(), "hipMemcpyAsync")?;
        // SAFETY: sizes match; `self` moves into the InFlight, which frees it only after
        // synchronizing the stream (or leaks it when forgotten).
        let r = unsafe {
            queue_copy(
                dst.parent().0,
                dst.as_raw(),
                self.ptr as *const c_void,
                dst.size_bytes(),
                sys::hipMemcpyHostToDevice,
                stream,
            )
        };
        self.in_flight(r, stream)
    }

    /// The buffer in an [`InFlight`] on `stream`; when queuing failed (after the copy may have
    /// been queued), waited for by dropping that [`InFlight`] before the error is returned.
    fn in_flight<S: AsStream>(
        self,
        r: Result<(), HipError>,
        stream: &S,
    ) -> Result<InFlight<'_, T, S>, HipError> {
        let f = InFlight {
            buffer: std::mem::ManuallyDrop::new(self),
            stream,
        };
        match r {
            Ok(()) => Ok(f),
            Err(e) => {
                drop(f);
                Err(e)
            }
        }
    }

    /// Queues a copy of `src` into this buffer on `stream` (`hipMemcpyAsync`, device to host);
    /// [`InFlight::wait`] gives the buffer back holding the data.
    ///
    /// Errors: as [`PinnedBuffer::copy_to_device_async`].
    pub fn copy_from_device_async<'s, S: AsStream>(
        self,
        src: &impl DeviceMemory<T>,
        stream: &'s S,
    ) -> Result<InFlight<'s, T, S>, HipError> {
        check_len(self.len, src.len(), "hipMemcpyAsync")?;
        // SAFETY: as in copy_to_device_async, the other direction.
        let r = unsafe {
            queue_copy(
                src.parent().0,
                self.ptr as *mut c_void,
                src.as_raw() as *const c_void,
                src.size_bytes(),
                sys::hipMemcpyDeviceToHost,
                stream,
            )
        };
        self.in_flight(r, stream)
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
