//! Views of device memory ([`DeviceSlice`], [`DeviceSliceMut`]) and the operations every region
//! of device memory takes on a stream ([`DeviceMemory`], [`DeviceMemoryMut`]).

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use hip_sys as sys;

use super::buffer::{check_len, check_len_of, offset, DeviceBuffer};
use super::{finish, size_of_n, DeviceCopy};
use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::stream::AsStream;

pub(crate) mod sealed {
    use super::{DeviceBuffer, DeviceCopy};

    /// Only hipjit's regions of device memory implement [`super::DeviceMemory`].
    pub trait Sealed {}

    /// The buffer a region belongs to (for the stream-ordering of its free).
    pub struct Parent<'a, T: DeviceCopy>(pub(crate) &'a DeviceBuffer<T>);
}

/// `(start, len)` of `range` within `0..len`, in values.
pub(crate) fn range_of(
    range: &impl RangeBounds<usize>,
    len: usize,
) -> Result<(usize, usize), HipError> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e - s)),
        _ => Err(HipError::new(
            1,
            "slice",
            None,
            format!(
                "refused by hipjit: the range {:?}..{:?} is not within the {len} values of the \
                 device memory",
                range.start_bound(),
                range.end_bound()
            ),
        )),
    }
}

/// A region of device memory: a [`DeviceBuffer`], a [`DeviceSlice`] or a [`DeviceSliceMut`].
/// Its provided methods copy out of it on a stream. Sealed: only hipjit's types implement it.
///
/// Every region is a kernel argument ([`KernelArg`], its device pointer), and every writable
/// one ([`DeviceMemoryMut`]) one the kernel may write ([`KernelArgMut`]): a kernel wrapper
/// takes "a buffer or a view" with these two bounds alone.
///
/// ```
/// use hipjit::prelude::*;
///
/// /// `y = a * x + y` over the first `n` values of any region: a buffer, or a view of one.
/// fn saxpy(
///     kernel: &Kernel,
///     stream: &impl AsStream,
///     a: f32,
///     x: &impl DeviceMemory<f32>,
///     y: &mut impl DeviceMemoryMut<f32>,
/// ) -> hipjit::Result<()> {
///     let n = u32::try_from(x.len().min(y.len())).expect("fewer than 2^32 values");
///     let cfg = LaunchConfig::for_num_elems(n, 256);
///     // SAFETY: saxpy(float a, const float* x, float* y, unsigned n) reads n values of x and
///     // writes n of y, both regions holding at least n.
///     unsafe { kernel.launch(stream, cfg, &mut hipjit::args![&a, x, &mut *y, &n])? };
///     Ok(())
/// }
///
/// // Whole buffers, or views of them:
/// fn both(k: &Kernel, s: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>)
///     -> hipjit::Result<()> {
///     saxpy(k, s, 2.0, x, y)?;
///     saxpy(k, s, 2.0, &x.slice(..16)?, &mut y.slice_mut(16..32)?)
/// }
/// # let _ = both;
/// ```
///
/// [`KernelArg`]: crate::safe::launch::KernelArg
/// [`KernelArgMut`]: crate::safe::launch::KernelArgMut
pub trait DeviceMemory<T: DeviceCopy>: sealed::Sealed + crate::safe::launch::KernelArg {
    /// The device pointer of the first value (valid while the region's buffer lives).
    fn as_raw(&self) -> sys::hipDeviceptr_t;
    /// Number of values.
    fn len(&self) -> usize;
    /// The device the memory is on.
    fn device(&self) -> &Device;
    #[doc(hidden)]
    fn parent(&self) -> sealed::Parent<'_, T>;

    /// Whether the region holds no values.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes.
    fn size_bytes(&self) -> usize {
        size_of_n::<T>(self.len())
    }

    /// Copies the region into `dst` on `stream` (`hipMemcpyAsync`, device to host), after the
    /// work queued there (a kernel that wrote it), then waits for `stream`
    /// (`hipStreamSynchronize`): `dst` holds the data when this returns.
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when
    /// `stream` belongs to another loaded runtime (both checked by hipjit), or the runtime's
    /// error (when the synchronization fails, hipjit waits for the whole device before
    /// returning, so `dst` is never written after the borrow ends).
    fn copy_to_host_on(&self, dst: &mut [T], stream: &impl AsStream) -> Result<(), HipError> {
        check_len(dst.len(), self.len(), "hipMemcpyAsync")?;
        // SAFETY: `dst` holds len() values; the stream is waited for before the borrow ends.
        let (r, _) = unsafe { copy_out(self, dst.as_mut_ptr() as *mut c_void, stream) };
        r
    }

    /// The region's contents as a vector, copied on `stream` after the work queued there
    /// (`hipMemcpyAsync`, device to host), then `hipStreamSynchronize`. This is the read-back
    /// to use after a kernel on a `NON_BLOCKING` stream.
    ///
    /// Errors: as [`DeviceMemory::copy_to_host_on`]; when the synchronization fails the vector
    /// is leaked, not freed, since the device may still write it.
    fn to_vec_on(&self, stream: &impl AsStream) -> Result<Vec<T>, HipError> {
        let mut v = std::mem::ManuallyDrop::new(Vec::<T>::with_capacity(self.len()));
        // SAFETY: capacity for len() values; waited for before returning.
        let (r, settled) = unsafe { copy_out(self, v.as_mut_ptr() as *mut c_void, stream) };
        match r {
            Ok(()) => {
                // SAFETY: the copy wrote all len() values; any bits are a valid `T`.
                unsafe { v.set_len(self.len()) };
                Ok(std::mem::ManuallyDrop::into_inner(v))
            }
            Err(e) => {
                if settled {
                    drop(std::mem::ManuallyDrop::into_inner(v));
                }
                Err(e)
            }
        }
    }
}

/// A region of device memory that may be written: a [`DeviceBuffer`] or a [`DeviceSliceMut`];
/// a kernel argument the kernel may write ([`KernelArgMut`](crate::safe::launch::KernelArgMut),
/// `&mut region` in [`args!`](crate::args)).
pub trait DeviceMemoryMut<T: DeviceCopy>:
    DeviceMemory<T> + crate::safe::launch::KernelArgMut
{
    /// Copies `src` into the region on `stream` (`hipMemcpyAsync`, host to device), after the
    /// work queued there, then waits for `stream` (`hipStreamSynchronize`), so `src` may be
    /// reused at once.
    ///
    /// Errors: as [`DeviceMemory::copy_to_host_on`].
    fn copy_from_host_on(&mut self, src: &[T], stream: &impl AsStream) -> Result<(), HipError> {
        check_len(src.len(), self.len(), "hipMemcpyAsync")?;
        // SAFETY: `src` holds len() values and is borrowed until the stream is synchronized.
        let r = unsafe {
            queue_copy(
                self.parent().0,
                self.as_raw(),
                src.as_ptr() as *const c_void,
                self.size_bytes(),
                sys::hipMemcpyHostToDevice,
                stream,
            )
        };
        // Waited for even when a call failed: the copy may have been queued.
        let f = finish(stream);
        r.and(f)
    }

    /// Queues a copy of `src` (same length, same loaded runtime) into the region on `stream`
    /// (`hipMemcpyAsync`, device to device). Nothing on the host is involved, so nothing waits.
    ///
    /// A source on another device is read over peer access, which must have been enabled
    /// from the destination's device ([`Device::enable_peer_access`]);
    /// [`DeviceMemoryMut::copy_from_peer_async`] needs none.
    ///
    /// Errors: `hipErrorInvalidValue` on a length mismatch, `hipErrorInvalidHandle` when `src`
    /// or `stream` belongs to another loaded runtime, `hipErrorPeerAccessNotEnabled` for a
    /// source on another device without peer access (checked by hipjit), or the runtime's
    /// error.
    fn copy_from_device_async(
        &mut self,
        src: &impl DeviceMemory<T>,
        stream: &impl AsStream,
    ) -> Result<(), HipError> {
        check_len_of("source", src.len(), self.len(), "hipMemcpyAsync")?;
        self.device()
            .check_same_runtime(src.device(), "source buffer", "hipMemcpyAsync")?;
        self.device()
            .check_peer_access(src.device(), "hipMemcpyAsync")?;
        let source = src.parent().0;
        source.enter(stream.as_raw())?;
        // SAFETY: both regions hold len() values of device memory, which outlives the queued
        // copy (a buffer's free waits for the device or is ordered after this stream).
        unsafe {
            queue_copy(
                self.parent().0,
                self.as_raw(),
                src.as_raw() as *const c_void,
                self.size_bytes(),
                sys::hipMemcpyDeviceToDevice,
                stream,
            )?
        };
        source.exit(stream.as_raw())
    }

    /// Queues a copy of `src`, on another device of the same runtime, into the region on
    /// `stream`, a stream of either device (`hipMemcpyPeerAsync`; on NVIDIA `cuMemcpyPeerAsync`).
    /// Peer access is not needed (without it the runtime stages the copy through host memory);
    /// stream-ordered buffers on either side are ordered against `stream` by hipjit. Nothing on
    /// the host waits. [`crate::safe::peer`] has the rules.
    ///
    /// Errors (checked by hipjit before the call): `hipErrorInvalidValue` on a length
    /// mismatch or for a stream on neither device, `hipErrorInvalidDevice` when `src` is on
    /// the region's own device (use [`DeviceMemoryMut::copy_from_device_async`]),
    /// `hipErrorInvalidHandle` when `src` or `stream` belongs to another loaded runtime,
    /// `hipErrorNotSupported` when the runtime does not export `hipMemcpyPeerAsync`; then the
    /// runtime's error.
    fn copy_from_peer_async(
        &mut self,
        src: &impl DeviceMemory<T>,
        stream: &impl AsStream,
    ) -> Result<(), HipError> {
        crate::safe::peer::copy_peer(self, src, stream)
    }

    /// Queues setting every byte of the region to `byte` on `stream` (`hipMemsetAsync`; on
    /// NVIDIA `cuMemsetD8Async`). Only device memory is touched, so nothing waits.
    ///
    /// Errors: `hipErrorInvalidHandle` when `stream` belongs to another loaded runtime (checked
    /// by hipjit), or the runtime's error.
    fn memset_async(&mut self, byte: u8, stream: &impl AsStream) -> Result<(), HipError> {
        let parent = self.parent().0;
        let d = self.device();
        d.check_same_runtime(stream.device(), "stream", "hipMemsetAsync")?;
        d.bind()?;
        parent.enter(stream.as_raw())?;
        let rt = d.runtime();
        // SAFETY: the region holds size_bytes() bytes of device memory that outlives the
        // queued fill (see copy_from_device_async).
        rt.check(
            unsafe {
                (rt.api().hipMemsetAsync)(
                    self.as_raw() as _,
                    i32::from(byte) as _,
                    self.size_bytes(),
                    stream.as_raw(),
                )
            },
            "hipMemsetAsync",
        )?;
        parent.exit(stream.as_raw())
    }
}

/// Queues `hipMemcpyAsync` of `bytes` on `stream` for the buffer `parent` (entering and
/// leaving `stream` for its stream-ordered free).
///
/// # Safety
/// `dst` and `src` are regions of `bytes` bytes on the sides `kind` names, and any host memory
/// among them stays alive and untouched until the copy is done.
pub(crate) unsafe fn queue_copy<T: DeviceCopy>(
    parent: &DeviceBuffer<T>,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: sys::hipMemcpyKind,
    stream: &impl AsStream,
) -> Result<(), HipError> {
    let d = parent.device();
    d.check_same_runtime(stream.device(), "stream", "hipMemcpyAsync")?;
    d.bind()?;
    parent.enter(stream.as_raw())?;
    let rt = d.runtime();
    // SAFETY: per the contract above; live stream of this runtime.
    rt.check(
        unsafe { (rt.api().hipMemcpyAsync)(dst as _, src as _, bytes, kind, stream.as_raw()) },
        "hipMemcpyAsync",
    )?;
    parent.exit(stream.as_raw())
}

/// Copies `region` into host memory at `dst` on `stream` and waits for the stream, also when a
/// call failed (the copy may have been queued). The flag says whether the wait succeeded, so
/// that `dst` is no longer written.
///
/// # Safety
/// `dst` has room for `region.len()` values and is not used until this returns.
unsafe fn copy_out<T: DeviceCopy, M: DeviceMemory<T> + ?Sized>(
    region: &M,
    dst: *mut c_void,
    stream: &impl AsStream,
) -> (Result<(), HipError>, bool) {
    // SAFETY: per the contract; the stream is synchronized below before `dst` is released.
    let r = unsafe {
        queue_copy(
            region.parent().0,
            dst,
            region.as_raw() as *const c_void,
            region.size_bytes(),
            sys::hipMemcpyDeviceToHost,
            stream,
        )
    };
    let f = finish(stream);
    let settled = f.is_ok();
    (r.and(f), settled)
}

impl<T: DeviceCopy> sealed::Sealed for DeviceBuffer<T> {}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceBuffer<T> {
    fn as_raw(&self) -> sys::hipDeviceptr_t {
        DeviceBuffer::as_raw(self)
    }
    fn len(&self) -> usize {
        DeviceBuffer::len(self)
    }
    fn device(&self) -> &Device {
        DeviceBuffer::device(self)
    }
    fn parent(&self) -> sealed::Parent<'_, T> {
        sealed::Parent(self)
    }
}
impl<T: DeviceCopy> DeviceMemoryMut<T> for DeviceBuffer<T> {}

/// A shared view of `len` values of a [`DeviceBuffer`] ([`DeviceBuffer::slice`]): a read-only
/// kernel argument, a copy source. `Copy`; borrows the buffer.
pub struct DeviceSlice<'a, T: DeviceCopy> {
    parent: &'a DeviceBuffer<T>,
    ptr: sys::hipDeviceptr_t,
    len: usize,
}

/// An exclusive view of `len` values of a [`DeviceBuffer`] ([`DeviceBuffer::slice_mut`]): a
/// kernel argument the kernel may write, a copy destination. The buffer stays mutably borrowed
/// while it lives.
pub struct DeviceSliceMut<'a, T: DeviceCopy> {
    parent: &'a DeviceBuffer<T>,
    ptr: sys::hipDeviceptr_t,
    len: usize,
    _exclusive: PhantomData<&'a mut DeviceBuffer<T>>,
}

// SAFETY: as for `&DeviceBuffer<T>`: a device pointer and a shared borrow.
unsafe impl<T: DeviceCopy + Sync> Send for DeviceSlice<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceSlice<'_, T> {}
// SAFETY: as for `&mut DeviceBuffer<T>`.
unsafe impl<T: DeviceCopy + Send + Sync> Send for DeviceSliceMut<'_, T> {}
// SAFETY: `&DeviceSliceMut` only reads.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceSliceMut<'_, T> {}

impl<T: DeviceCopy> Clone for DeviceSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: DeviceCopy> Copy for DeviceSlice<'_, T> {}

impl<T: DeviceCopy> fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceSlice")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceSliceMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceSliceMut")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl<'a, T: DeviceCopy> DeviceSlice<'a, T> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn new(
        parent: &'a DeviceBuffer<T>,
        ptr: sys::hipDeviceptr_t,
        len: usize,
    ) -> DeviceSlice<'a, T> {
        DeviceSlice { parent, ptr, len }
    }

    /// The values in `range` of this view (indices relative to the view).
    ///
    /// Errors: as [`DeviceBuffer::slice`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>, HipError> {
        let (start, len) = range_of(&range, self.len)?;
        Ok(DeviceSlice::new(
            self.parent,
            offset::<T>(self.ptr, start),
            len,
        ))
    }

    /// The address of the device pointer: what a kernel-argument array points at.
    pub(crate) fn ptr_slot(&self) -> *const c_void {
        &self.ptr as *const sys::hipDeviceptr_t as *const c_void
    }
}

impl<'a, T: DeviceCopy> DeviceSliceMut<'a, T> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn new(
        parent: &'a mut DeviceBuffer<T>,
        ptr: sys::hipDeviceptr_t,
        len: usize,
    ) -> DeviceSliceMut<'a, T> {
        DeviceSliceMut {
            parent,
            ptr,
            len,
            _exclusive: PhantomData,
        }
    }

    /// The values in `range` of this view as a shared view (borrowing this one).
    ///
    /// Errors: as [`DeviceBuffer::slice`].
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>, HipError> {
        let (start, len) = range_of(&range, self.len)?;
        Ok(DeviceSlice::new(
            self.parent,
            offset::<T>(self.ptr, start),
            len,
        ))
    }

    /// The values in `range` of this view as an exclusive view (borrowing this one mutably).
    ///
    /// Errors: as [`DeviceBuffer::slice`].
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceSliceMut<'_, T>, HipError> {
        let (start, len) = range_of(&range, self.len)?;
        Ok(DeviceSliceMut {
            parent: self.parent,
            ptr: offset::<T>(self.ptr, start),
            len,
            _exclusive: PhantomData,
        })
    }

    /// This view as a shared one.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice::new(self.parent, self.ptr, self.len)
    }

    /// The address of the device pointer: what a kernel-argument array points at.
    pub(crate) fn ptr_slot(&self) -> *const c_void {
        &self.ptr as *const sys::hipDeviceptr_t as *const c_void
    }
}

impl<T: DeviceCopy> sealed::Sealed for DeviceSlice<'_, T> {}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceSlice<'_, T> {
    fn as_raw(&self) -> sys::hipDeviceptr_t {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> &Device {
        self.parent.device()
    }
    fn parent(&self) -> sealed::Parent<'_, T> {
        sealed::Parent(self.parent)
    }
}

impl<T: DeviceCopy> sealed::Sealed for DeviceSliceMut<'_, T> {}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceSliceMut<'_, T> {
    fn as_raw(&self) -> sys::hipDeviceptr_t {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> &Device {
        self.parent.device()
    }
    fn parent(&self) -> sealed::Parent<'_, T> {
        sealed::Parent(self.parent)
    }
}
impl<T: DeviceCopy> DeviceMemoryMut<T> for DeviceSliceMut<'_, T> {}

#[cfg(test)]
mod tests {
    use super::range_of;

    #[test]
    fn ranges_within_the_length_give_start_and_length() {
        assert_eq!(range_of(&(..), 8).unwrap(), (0, 8));
        assert_eq!(range_of(&(2..5), 8).unwrap(), (2, 3));
        assert_eq!(range_of(&(2..=5), 8).unwrap(), (2, 4));
        assert_eq!(range_of(&(8..), 8).unwrap(), (8, 0));
    }

    #[test]
    fn ranges_past_the_end_or_decreasing_are_errors_naming_both() {
        let e = range_of(&(2..9), 8).unwrap_err();
        assert!(e.to_string().contains("Included(2)..Excluded(9)"), "{e}");
        assert!(e.to_string().contains("8 values"), "{e}");
        let (start, end) = (5, 2);
        assert!(range_of(&(start..end), 8).is_err());
        assert!(range_of(&(..=usize::MAX), 8).is_err());
    }
}
