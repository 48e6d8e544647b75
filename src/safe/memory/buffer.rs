//! [`DeviceBuffer`]: an owned allocation of device memory, freed on drop, synchronously
//! (`hipMalloc`/`hipFree`) or ordered on a stream (`hipMallocAsync`/`hipFreeAsync`).

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use hip_sys as sys;
use parking_lot::Mutex;

use super::view::{range_of, DeviceMemory, DeviceSlice, DeviceSliceMut};
use super::{alloc_bytes, size_of_n, DeviceCopy};
use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::event::{Event, EventFlags};
use crate::safe::stream::{AsStream, StreamHandle};

/// How a buffer's memory goes back to the runtime.
enum Free {
    /// `hipFree`, which waits for the whole device.
    Device,
    /// `hipFreeAsync` on the allocation's stream.
    Stream(StreamHandle),
}

/// `len` values of `T` in device memory, freed on drop: allocated with `hipMalloc` and freed with
/// `hipFree` (which waits for the device's pending work first), or allocated on a stream
/// ([`DeviceBuffer::alloc_async`]) and freed on it with `hipFreeAsync` (which waits for
/// nothing). The module documentation has the table and the ordering rules.
pub struct DeviceBuffer<T: DeviceCopy> {
    device: Device,
    ptr: sys::hipDeviceptr_t,
    len: usize,
    free: Free,
    /// The event ordering a stream-ordered buffer's other streams against its own (created on
    /// first use on another stream); the lock keeps each record + wait pair together.
    fence: Mutex<Option<Event>>,
    /// Uses queued on streams of other devices (peer copies) by a buffer freed with `hipFree`,
    /// which waits for its own device only: one event per such stream (raw handle), each
    /// waited for on the host before the free.
    foreign: Mutex<Vec<(usize, Event)>>,
    _t: PhantomData<T>,
}

// SAFETY: device memory is not tied to a host thread; every call binds the device first.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&DeviceBuffer` only reads the handle (the fence is behind a lock); writes need `&mut`.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device.ordinal())
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field(
                "free_on",
                &match &self.free {
                    Free::Device => None,
                    Free::Stream(s) => Some(s.as_raw()),
                },
            )
            .finish()
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    fn new(device: &Device, ptr: *mut c_void, len: usize, free: Free) -> DeviceBuffer<T> {
        DeviceBuffer {
            device: device.clone(),
            ptr: ptr as _,
            len,
            free,
            fence: Mutex::new(None),
            foreign: Mutex::new(Vec::new()),
            _t: PhantomData,
        }
    }

    /// Allocates `len` values on `device` (`hipMalloc`); the contents are unspecified (any bit
    /// pattern, which `T: DeviceCopy` allows). Dropping it calls `hipFree`, which waits for the
    /// whole device: prefer [`DeviceBuffer::alloc_async`] for buffers made and dropped while
    /// kernels run.
    ///
    /// Errors: `hipErrorOutOfMemory` before the call when `len` values of `T` exceed
    /// `isize::MAX` bytes (checked by hipjit), or the runtime's error (`hipErrorOutOfMemory`...).
    pub fn alloc(device: &Device, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        let bytes = alloc_bytes::<T>(len, "hipMalloc")?;
        crate::safe::capture_guard::check_not_capturing(device, None, "hipMalloc")?;
        device.bind()?;
        let rt = device.runtime();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        rt.check(
            unsafe { (rt.api().hipMalloc)(&mut ptr as *mut *mut c_void as _, bytes) },
            "hipMalloc",
        )?;
        Ok(Self::new(device, ptr, len, Free::Device))
    }

    /// Allocates `len` values ordered on `stream` (`hipMallocAsync`; on NVIDIA `cuMemAllocAsync`
    /// from the device's default pool): the memory may be used by work queued on `stream`
    /// after this call, and is freed on `stream` when the buffer is dropped (`hipFreeAsync`),
    /// behind the work queued there, without waiting on the host. The buffer keeps `stream`
    /// alive ([`AsStream::handle`]). Contents are unspecified.
    ///
    /// Fallback: on a runtime without the stream-ordered allocator
    /// ([`crate::safe::runtime::Runtime::has_stream_ordered_alloc`] is false, e.g. a drop-in runtime
    /// exporting only the classic entry points) this is [`DeviceBuffer::alloc`]: `hipMalloc`,
    /// and `hipFree` (waiting for the device) on drop.
    ///
    /// Errors: `hipErrorOutOfMemory` when `len` values of `T` exceed `isize::MAX` bytes, or
    /// `hipErrorInvalidHandle` when `stream` belongs to another loaded runtime (both checked by
    /// hipjit), or the runtime's error.
    pub fn alloc_async(stream: &impl AsStream, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        let bytes = alloc_bytes::<T>(len, "hipMallocAsync")?;
        let device = stream.device();
        let rt = device.runtime();
        let (Some(malloc), Some(_)) = (rt.api().hipMallocAsync, rt.api().hipFreeAsync) else {
            return Self::alloc(device, len);
        };
        device.bind()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer, live stream of this runtime.
        rt.check(
            unsafe { malloc(&mut ptr as *mut *mut c_void as _, bytes, stream.as_raw()) },
            "hipMallocAsync",
        )?;
        Ok(Self::new(device, ptr, len, Free::Stream(stream.handle())))
    }

    /// Allocates `len` values set to zero bytes (`hipMalloc`, then [`DeviceBuffer::memset`]):
    /// complete when it returns, ready for work on any stream.
    ///
    /// Errors: as [`DeviceBuffer::alloc`].
    pub fn zeroed(device: &Device, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        let mut b = Self::alloc(device, len)?;
        b.memset(0)?;
        Ok(b)
    }

    /// [`DeviceBuffer::alloc_async`] followed by zeroing the bytes on the same stream
    /// (`hipMemsetAsync`); nothing waits.
    ///
    /// Errors: as [`DeviceBuffer::alloc_async`].
    pub fn zeroed_async(stream: &impl AsStream, len: usize) -> Result<DeviceBuffer<T>, HipError> {
        let mut b = Self::alloc_async(stream, len)?;
        super::DeviceMemoryMut::memset_async(&mut b, 0, stream)?;
        Ok(b)
    }

    /// Allocates a buffer holding a copy of `src` (`hipMalloc`, then
    /// [`DeviceBuffer::copy_from_host`]): complete when it returns, ready for work on any
    /// stream.
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

    /// Whether the buffer is freed on a stream (`hipFreeAsync`) rather than with `hipFree`.
    pub fn is_stream_ordered(&self) -> bool {
        matches!(self.free, Free::Stream(_))
    }

    /// The whole buffer as a shared view.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice::new(self, self.ptr, self.len)
    }

    /// The whole buffer as an exclusive view.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        let (ptr, len) = (self.ptr, self.len);
        DeviceSliceMut::new(self, ptr, len)
    }

    /// The values in `range` (indices in values, as for a Rust slice) as a shared view, which
    /// borrows the buffer.
    ///
    /// Errors: `hipErrorInvalidValue` (checked by hipjit) naming the range and the length when
    /// the range is decreasing or ends past [`DeviceBuffer::len`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>, HipError> {
        let (start, len) = range_of(&range, self.len)?;
        Ok(DeviceSlice::new(self, offset::<T>(self.ptr, start), len))
    }

    /// The values in `range` as an exclusive view (the buffer stays mutably borrowed while it
    /// lives), which a kernel may write.
    ///
    /// Errors: as [`DeviceBuffer::slice`].
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceSliceMut<'_, T>, HipError> {
        let (start, len) = range_of(&range, self.len)?;
        let ptr = offset::<T>(self.ptr, start);
        Ok(DeviceSliceMut::new(self, ptr, len))
    }

    /// The address of the device pointer itself: what a kernel-argument array points at.
    pub(crate) fn ptr_slot(&self) -> *const c_void {
        &self.ptr as *const sys::hipDeviceptr_t as *const c_void
    }

    pub(crate) fn check_len(&self, other: usize, call: &'static str) -> Result<(), HipError> {
        check_len(other, self.len, call)
    }

    /// Makes work queued on `stream` after this call wait for this buffer's stream (its
    /// allocation and the work queued there so far). hipjit's copies and fills do this
    /// themselves; call it before launching a kernel that uses a stream-ordered buffer on a
    /// stream other than the one it was allocated on. A no-op for a buffer freed with
    /// `hipFree` and on the buffer's own stream.
    ///
    /// Errors: the runtime's error from `hipEventCreateWithFlags`, `hipEventRecord` or
    /// `hipStreamWaitEvent`; `hipErrorInvalidHandle` for a stream of another loaded runtime.
    pub fn use_on(&self, stream: &impl AsStream) -> Result<(), HipError> {
        self.device
            .check_same_runtime(stream.device(), "stream", "hipStreamWaitEvent")?;
        self.enter(stream.as_raw())
    }

    /// Orders this buffer's free (queued on its own stream at drop) after the work queued on
    /// `stream` so far. hipjit's copies and fills do this themselves; call it after launching
    /// a kernel that uses a stream-ordered buffer on another stream. A no-op for a buffer freed
    /// with `hipFree` (which waits for the whole device) and on the buffer's own stream.
    ///
    /// Errors: as [`DeviceBuffer::use_on`].
    pub fn free_after(&self, stream: &impl AsStream) -> Result<(), HipError> {
        self.device
            .check_same_runtime(stream.device(), "stream", "hipEventRecord")?;
        self.exit(stream.as_raw())
    }

    /// Before use on `stream` (raw; the null stream for the synchronous calls): orders it after
    /// the buffer's own stream.
    pub(crate) fn enter(&self, stream: sys::hipStream_t) -> Result<(), HipError> {
        match &self.free {
            Free::Stream(home) if home.as_raw() != stream => self.cross(home.as_raw(), stream),
            _ => Ok(()),
        }
    }

    /// After use on `stream`: orders the buffer's own stream (and so its free) after it.
    pub(crate) fn exit(&self, stream: sys::hipStream_t) -> Result<(), HipError> {
        match &self.free {
            Free::Stream(home) if home.as_raw() != stream => self.cross(stream, home.as_raw()),
            _ => Ok(()),
        }
    }

    /// Before use on `stream`, which may belong to another device of the same runtime (a peer
    /// copy): orders it after the buffer's own stream, recording on the buffer's device and
    /// waiting with the stream's device bound.
    pub(crate) fn enter_on(&self, stream: &impl AsStream) -> Result<(), HipError> {
        if stream.device().same_as(&self.device) {
            return self.enter(stream.as_raw());
        }
        let Free::Stream(home) = &self.free else {
            return Ok(());
        };
        let event = Event::new(&self.device, EventFlags::DISABLE_TIMING)?;
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: a live event of this device and the buffer's own live stream.
        rt.check(
            unsafe { (rt.api().hipEventRecord)(event.as_raw(), home.as_raw()) },
            "hipEventRecord",
        )?;
        stream.wait_event(&event)
    }

    /// After use on `stream`, which may belong to another device (a peer copy): orders the
    /// buffer's free after it. A stream-ordered buffer's own stream waits for an event recorded
    /// on `stream`; a buffer freed with `hipFree` keeps that event and waits for it on the host
    /// before its free.
    pub(crate) fn exit_on(&self, stream: &impl AsStream) -> Result<(), HipError> {
        if stream.device().same_as(&self.device) {
            return self.exit(stream.as_raw());
        }
        let event = Event::new(stream.device(), EventFlags::DISABLE_TIMING)?;
        event.record(stream)?;
        match &self.free {
            Free::Stream(home) => {
                self.device.bind()?;
                let rt = self.device.runtime();
                // SAFETY: the buffer's own live stream and a live event of the same runtime;
                // flags 0. A stream may wait for an event of another device.
                rt.check(
                    unsafe { (rt.api().hipStreamWaitEvent)(home.as_raw(), event.as_raw(), 0) },
                    "hipStreamWaitEvent",
                )
            }
            Free::Device => {
                let mut foreign = self.foreign.lock();
                let key = stream.as_raw() as usize;
                match foreign.iter_mut().find(|(s, _)| *s == key) {
                    Some(slot) => slot.1 = event,
                    None => foreign.push((key, event)),
                }
                Ok(())
            }
        }
    }

    /// Records the fence on `from` and makes `to` wait for it.
    fn cross(&self, from: sys::hipStream_t, to: sys::hipStream_t) -> Result<(), HipError> {
        let mut fence = self.fence.lock();
        let event = match &mut *fence {
            Some(e) => e,
            slot => slot.insert(Event::new(&self.device, EventFlags::DISABLE_TIMING)?),
        };
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: live event and streams of this runtime (the buffer's own stream is kept
        // alive by its handle; `from`/`to` is the caller's live stream).
        rt.check(
            unsafe { (rt.api().hipEventRecord)(event.as_raw(), from) },
            "hipEventRecord",
        )?;
        // SAFETY: as above; flags 0.
        rt.check(
            unsafe { (rt.api().hipStreamWaitEvent)(to, event.as_raw(), 0) },
            "hipStreamWaitEvent",
        )
    }

    /// `hipMemcpy` of `bytes` between `dst` and `src` in direction `kind`, entering and leaving
    /// the null stream for `self`.
    fn memcpy_sync(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        kind: sys::hipMemcpyKind,
    ) -> Result<(), HipError> {
        let null = std::ptr::null_mut();
        crate::safe::capture_guard::check_not_capturing(&self.device, Some(null), "hipMemcpy")?;
        self.device.bind()?;
        self.enter(null)?;
        let rt = self.device.runtime();
        // SAFETY: the caller passes regions of size_bytes() bytes, live for the call.
        let r = rt
            .check(
                unsafe { (rt.api().hipMemcpy)(dst as _, src as _, self.size_bytes(), kind) },
                "hipMemcpy",
            )
            .and_then(|()| {
                if kind == sys::hipMemcpyDeviceToHost {
                    Ok(())
                } else {
                    settle_null_stream(&self.device)
                }
            });
        self.exit(null)?;
        r
    }

    /// Copies `src` to the device (`hipMemcpy`, host to device, on the null stream, then
    /// `hipStreamSynchronize` of the null stream): the data is on the device when this returns,
    /// so work queued next on any stream sees it. It starts after the work on the null stream
    /// and every blocking stream, not after work on a `NON_BLOCKING` stream (to upload after a
    /// kernel on such a stream, use [`super::DeviceMemoryMut::copy_from_host_on`] there).
    ///
    /// Errors: `hipErrorInvalidValue` when `src.len()` differs from [`DeviceBuffer::len`]
    /// (checked by hipjit, message says both lengths), or the runtime's error.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<(), HipError> {
        self.check_len(src.len(), "hipMemcpy")?;
        self.memcpy_sync(
            self.ptr,
            src.as_ptr() as *const c_void,
            sys::hipMemcpyHostToDevice,
        )
    }

    /// Copies the buffer into `dst` (`hipMemcpy`, device to host, on the null stream),
    /// returning when `dst` holds the data. Waits for the null stream and every blocking
    /// stream, **not** for a `NON_BLOCKING` stream: after a kernel on such a stream, use
    /// [`DeviceMemory::copy_to_host_on`] with that stream (or synchronize it first).
    ///
    /// Errors: as [`DeviceBuffer::copy_from_host`].
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<(), HipError> {
        self.check_len(dst.len(), "hipMemcpy")?;
        self.memcpy_sync(
            dst.as_mut_ptr() as *mut c_void,
            self.ptr as *const c_void,
            sys::hipMemcpyDeviceToHost,
        )
    }

    /// The buffer's contents as a vector (`hipMemcpy`, device to host, on the null stream).
    /// Waits as [`DeviceBuffer::copy_to_host`] does: **not** for a kernel still running on a
    /// `NON_BLOCKING` stream; use [`DeviceMemory::to_vec_on`] with that stream.
    ///
    /// Errors: the runtime's error.
    pub fn to_vec(&self) -> Result<Vec<T>, HipError> {
        let mut v = Vec::with_capacity(self.len);
        self.memcpy_sync(
            v.as_mut_ptr() as *mut c_void,
            self.ptr as *const c_void,
            sys::hipMemcpyDeviceToHost,
        )?;
        // SAFETY: hipMemcpy filled all `len` values (capacity `len`); any bits are a valid `T`.
        unsafe { v.set_len(self.len) };
        Ok(v)
    }

    /// Copies `src` (same length, same loaded runtime) into this buffer (`hipMemcpy`, device to
    /// device, on the null stream, then `hipStreamSynchronize` of the null stream: complete
    /// when it returns). `src` may be any view ([`DeviceMemory`]).
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when `src`
    /// belongs to another loaded runtime (both checked by hipjit), or the runtime's error.
    pub fn copy_from_device(&mut self, src: &impl DeviceMemory<T>) -> Result<(), HipError> {
        check_len_of("source", src.len(), self.len, "hipMemcpy")?;
        self.device
            .check_same_runtime(src.device(), "source buffer", "hipMemcpy")?;
        let parent = src.parent().0;
        parent.enter(std::ptr::null_mut())?;
        let r = self.memcpy_sync(
            self.ptr,
            src.as_raw() as *const c_void,
            sys::hipMemcpyDeviceToDevice,
        );
        parent.exit(std::ptr::null_mut())?;
        r
    }

    /// Sets every byte to `byte` (`hipMemset` on the null stream, then `hipStreamSynchronize`
    /// of the null stream: complete when it returns, on NVIDIA too, where `cuMemsetD8` returns
    /// before the fill is done).
    ///
    /// Errors: the runtime's error.
    pub fn memset(&mut self, byte: u8) -> Result<(), HipError> {
        let null = std::ptr::null_mut();
        crate::safe::capture_guard::check_not_capturing(&self.device, Some(null), "hipMemset")?;
        self.device.bind()?;
        self.enter(null)?;
        let rt = self.device.runtime();
        // SAFETY: `ptr` holds size_bytes() bytes.
        let r = rt
            .check(
                unsafe {
                    (rt.api().hipMemset)(self.ptr as _, i32::from(byte) as _, self.size_bytes())
                },
                "hipMemset",
            )
            .and_then(|()| settle_null_stream(&self.device));
        self.exit(null)?;
        r
    }

    /// Queues setting every byte to `byte` on `stream` (`hipMemsetAsync`): the same as
    /// [`super::DeviceMemoryMut::memset_async`], without importing the trait.
    ///
    /// Errors: as [`super::DeviceMemoryMut::memset_async`].
    pub fn memset_async(&mut self, byte: u8, stream: &impl AsStream) -> Result<(), HipError> {
        super::DeviceMemoryMut::memset_async(self, byte, stream)
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // The fence's last record + wait were queued already; destroying it does not undo them.
        drop(self.fence.get_mut().take());
        for (_, event) in self.foreign.get_mut().drain(..) {
            if let Err(e) = event.synchronize() {
                tracing::error!(error = %e, "waiting for another device's use of a device buffer failed");
            }
        }
        if self.ptr.is_null() {
            // 0 bytes: HIP hands out a null pointer and there is nothing to free.
            return;
        }
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to free a device buffer");
        }
        let r = match (&self.free, rt.api().hipFreeAsync) {
            // SAFETY: `ptr` came from hipMallocAsync and is freed once, on its own stream
            // (kept alive by the handle), behind every use ordered before it.
            (Free::Stream(s), Some(free)) => {
                rt.check(unsafe { free(self.ptr as _, s.as_raw()) }, "hipFreeAsync")
            }
            // SAFETY: `ptr` came from hipMalloc (or hipMallocAsync on a runtime that has
            // hipFreeAsync, so not this arm) and is freed once.
            _ => rt.check(unsafe { (rt.api().hipFree)(self.ptr as _) }, "hipFree"),
        };
        if let Err(e) = r {
            tracing::error!(error = %e, "failed to free a device buffer");
        }
    }
}

/// Waits for the null stream after a synchronous upload, device-to-device copy or fill
/// (`hipStreamSynchronize(0)`), so that it is complete when the call returns on both platforms:
/// AMD's `hipMemcpy`/`hipMemset` return when done, but the CUDA driver's `cuMemcpy` from
/// pageable memory returns once the data is staged, before the DMA has finished, and
/// `cuMemcpy` device to device and `cuMemsetD8` return at once; work on a `NON_BLOCKING` stream
/// queued next would not be ordered after them.
fn settle_null_stream(device: &Device) -> Result<(), HipError> {
    let rt = device.runtime();
    // SAFETY: the null stream is always valid; the device is bound.
    rt.check(
        unsafe { (rt.api().hipStreamSynchronize)(std::ptr::null_mut()) },
        "hipStreamSynchronize",
    )
}

/// `ptr` advanced by `n` values of `T`.
pub(crate) fn offset<T>(ptr: sys::hipDeviceptr_t, n: usize) -> sys::hipDeviceptr_t {
    (ptr as *mut u8).wrapping_add(size_of_n::<T>(n)) as sys::hipDeviceptr_t
}

/// Refuses a copy between `n` values of `what` (a host slice, a source) and `device` values of
/// device memory when the counts differ.
pub(crate) fn check_len_of(
    what: &str,
    n: usize,
    device: usize,
    call: &'static str,
) -> Result<(), HipError> {
    if n == device {
        Ok(())
    } else {
        Err(HipError::new(
            1,
            call,
            None,
            format!(
                "refused by hipjit before the call: {what} of {n} values for device memory of \
                 {device} values"
            ),
        ))
    }
}

/// [`check_len_of`] for a host slice.
pub(crate) fn check_len(host: usize, device: usize, call: &'static str) -> Result<(), HipError> {
    check_len_of("host slice", host, device, call)
}
