//! Streams: owned ([`Stream`], destroyed on drop) and borrowed ([`BorrowedStream`], a
//! `hipStream_t` owned by someone else, such as a framework's current stream).
//!
//! # What a launch and a copy order against
//! Work queued on one stream runs in the order it was queued: a kernel launch
//! ([`crate::safe::kernel::Kernel::launch`]), an asynchronous copy or fill (the `*_async` methods of
//! `memory`, `async_scope`), a stream-ordered allocation or free
//! (`alloc_async` and its drop), an event record
//! (`record`) and a wait ([`AsStream::wait_event`]) each start after
//! everything queued before them on the same stream has finished. Nothing orders two streams
//! against each other except:
//! - [`AsStream::wait_event`]: work queued on the waiting stream after the call starts once the
//!   work recorded in the event (queued on its stream before `record`)
//!   has finished;
//! - the null stream ([`BorrowedStream::null`]): work on it waits for the work queued before it
//!   on every *blocking* stream of the device (created without [`StreamFlags::NON_BLOCKING`]),
//!   and work queued later on a blocking stream waits for it. A `NON_BLOCKING` stream is never
//!   ordered against the null stream.
//!
//! The synchronous calls of `memory` (`from_slice`, `copy_from_host`, `to_vec`,
//! `memset`...) are `hipMemcpy`/`hipMemset` on the null stream: they return to the host when
//! their own work is done, after the null stream's ordering above, so they do *not* wait for
//! a kernel still running on a `NON_BLOCKING` stream. Use the stream-ordered forms on that
//! stream instead (`DeviceBuffer::to_vec_on`, `DeviceBuffer::copy_from_host_on`) or
//! synchronize the stream first.
//!
//! The host waits only when asked: [`AsStream::synchronize`], [`crate::safe::event::Event::synchronize`],
//! the `*_on` conveniences of `memory`, and the end of an
//! `async_scope` or an `InFlight`.

use std::fmt;
use std::sync::Arc;

use hip_sys as sys;

use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::event::Event;

bitflags::bitflags! {
    /// Flags of `hipStreamCreateWithFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// `hipStreamNonBlocking`: the stream does not synchronize with the null stream.
        const NON_BLOCKING = 0x1;
    }
}

impl StreamFlags {
    /// `hipStreamDefault` (0): a blocking stream, ordered against the null stream.
    pub const DEFAULT: StreamFlags = StreamFlags::empty();
}

/// A stream work can be queued on: [`Stream`] or [`BorrowedStream`].
pub trait AsStream {
    /// The device the stream belongs to.
    fn device(&self) -> &Device;
    /// The raw handle (valid while `self` lives).
    fn as_raw(&self) -> sys::hipStream_t;

    /// Blocks until all work queued on the stream has finished (`hipStreamSynchronize`).
    ///
    /// Errors: the runtime's error, e.g. a fault of a kernel queued on the stream;
    /// `hipErrorStreamCaptureUnsupported`, before the call, when the stream is capturing or a
    /// capture forbids it on this thread (`capture`).
    fn synchronize(&self) -> Result<(), HipError> {
        crate::safe::capture_guard::check_not_capturing(
            self.device(),
            Some(self.as_raw()),
            "hipStreamSynchronize",
        )?;
        let rt = self.device().runtime();
        self.device().bind()?;
        // SAFETY: the stream handle is valid while `self` lives.
        rt.check(
            unsafe { (rt.api().hipStreamSynchronize)(self.as_raw()) },
            "hipStreamSynchronize",
        )
    }

    /// Makes work queued on this stream after the call wait until the work recorded in `event`
    /// has finished, without blocking the host (`hipStreamWaitEvent` with flags 0; on NVIDIA
    /// `cuStreamWaitEvent`). The wait is for the event's most recent
    /// [`Event::record`](crate::safe::event::Event::record) before this call; an event never recorded
    /// is complete, so the wait is a no-op. The event may belong to another device of the same
    /// runtime: the wait is then between devices, still on the GPUs ([`crate::safe::peer`]).
    ///
    /// Errors: `hipErrorInvalidHandle` when `event` belongs to another loaded runtime (checked
    /// by hipjit), or the runtime's error.
    fn wait_event(&self, event: &Event) -> Result<(), HipError> {
        let d = self.device();
        d.check_same_runtime(event.device(), "event", "hipStreamWaitEvent")?;
        d.bind()?;
        let rt = d.runtime();
        // SAFETY: both handles are live while `self` and `event` are; flags 0.
        rt.check(
            unsafe { (rt.api().hipStreamWaitEvent)(self.as_raw(), event.as_raw(), 0) },
            "hipStreamWaitEvent",
        )
    }

    /// A handle that keeps the stream valid for work ordered on it later: a buffer allocated
    /// with [`DeviceBuffer::alloc_async`](crate::safe::memory::DeviceBuffer::alloc_async) holds one
    /// and queues its free on the stream when dropped. [`Stream`]'s handle keeps the stream
    /// alive (the stream is destroyed when the last one is gone); the default, used by
    /// [`BorrowedStream`], only copies the raw handle, whose owner must keep it valid as long
    /// as such buffers exist.
    fn handle(&self) -> StreamHandle {
        StreamHandle {
            raw: self.as_raw(),
            _owner: None,
        }
    }

    /// Whether all queued work has finished (`hipStreamQuery`: `hipSuccess` -> `true`,
    /// `hipErrorNotReady` -> `false`).
    ///
    /// Errors: any other code of `hipStreamQuery`.
    fn query(&self) -> Result<bool, HipError> {
        let rt = self.device().runtime();
        self.device().bind()?;
        // SAFETY: the stream handle is valid while `self` lives.
        match rt.check(
            unsafe { (rt.api().hipStreamQuery)(self.as_raw()) },
            "hipStreamQuery",
        ) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_ready() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A stream kept valid by its holder ([`AsStream::handle`]): the raw handle, and for an owned
/// [`Stream`] a share of it, so the stream is destroyed only when the last share is gone.
#[derive(Clone)]
pub struct StreamHandle {
    raw: sys::hipStream_t,
    _owner: Option<Arc<OwnedStream>>,
}

// SAFETY: as for `Stream`: a handle the runtime allows on any thread.
unsafe impl Send for StreamHandle {}
// SAFETY: as above; nothing is mutated through `&StreamHandle`.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    /// The raw handle (valid while `self` lives, under [`AsStream::handle`]'s rule).
    pub fn as_raw(&self) -> sys::hipStream_t {
        self.raw
    }
}

impl fmt::Debug for StreamHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamHandle")
            .field("raw", &self.raw)
            .finish()
    }
}

/// The stream itself, shared by a [`Stream`] and the [`StreamHandle`]s taken from it; destroyed
/// when the last is dropped.
struct OwnedStream {
    device: Device,
    raw: sys::hipStream_t,
}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to destroy a stream");
        }
        // SAFETY: `raw` was created by hipStreamCreateWithFlags and is destroyed once, when no
        // Stream or StreamHandle refers to it any more.
        if let Err(e) = rt.check(
            unsafe { (rt.api().hipStreamDestroy)(self.raw) },
            "hipStreamDestroy",
        ) {
            tracing::error!(error = %e, "failed to destroy a stream");
        }
    }
}

/// An owned HIP stream, destroyed (`hipStreamDestroy`) when it and every [`StreamHandle`] taken
/// from it are dropped: a buffer whose free is queued on the stream keeps it alive. `Send +
/// Sync`: HIP streams may be used from any thread, and every call binds the stream's device
/// first.
pub struct Stream {
    inner: Arc<OwnedStream>,
}

// SAFETY: a hipStream_t is a handle the runtime allows on any thread; the device is bound before
// each call that needs it.
unsafe impl Send for OwnedStream {}
// SAFETY: the runtime serialises operations on a stream internally; `&OwnedStream` exposes no
// mutation of Rust-side state.
unsafe impl Sync for OwnedStream {}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.inner.device.ordinal())
            .field("raw", &self.inner.raw)
            .finish()
    }
}

impl Stream {
    /// Creates a stream on `device` (`hipStreamCreateWithFlags`).
    ///
    /// Errors: the runtime's error (HIP 5.2 without a GPU: `hipErrorInvalidDevice`).
    pub fn new(device: &Device, flags: StreamFlags) -> Result<Stream, HipError> {
        device.bind()?;
        let rt = device.runtime();
        let mut raw: sys::hipStream_t = std::ptr::null_mut();
        // SAFETY: valid out pointer; flags are hipStreamDefault/NonBlocking bits.
        rt.check(
            unsafe { (rt.api().hipStreamCreateWithFlags)(&mut raw, flags.bits() as _) },
            "hipStreamCreateWithFlags",
        )?;
        Ok(Stream {
            inner: Arc::new(OwnedStream {
                device: device.clone(),
                raw,
            }),
        })
    }
}

impl Stream {
    /// [`AsStream::synchronize`], without importing the trait.
    ///
    /// Errors: the runtime's error.
    pub fn synchronize(&self) -> Result<(), HipError> {
        AsStream::synchronize(self)
    }

    /// [`AsStream::query`], without importing the trait.
    ///
    /// Errors: the runtime's error.
    pub fn query(&self) -> Result<bool, HipError> {
        AsStream::query(self)
    }

    /// [`AsStream::wait_event`], without importing the trait.
    ///
    /// Errors: as [`AsStream::wait_event`].
    pub fn wait_event(&self, event: &Event) -> Result<(), HipError> {
        AsStream::wait_event(self, event)
    }

    /// The raw handle (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipStream_t {
        self.inner.raw
    }
}

impl AsStream for Stream {
    fn device(&self) -> &Device {
        &self.inner.device
    }
    fn as_raw(&self) -> sys::hipStream_t {
        self.inner.raw
    }
    fn handle(&self) -> StreamHandle {
        StreamHandle {
            raw: self.inner.raw,
            _owner: Some(Arc::clone(&self.inner)),
        }
    }
}

/// A `hipStream_t` owned by someone else (a framework's current stream, the null stream),
/// used but never destroyed.
pub struct BorrowedStream {
    device: Device,
    raw: sys::hipStream_t,
}

// SAFETY: as for `Stream`; the handle is only used, never destroyed.
unsafe impl Send for BorrowedStream {}
// SAFETY: as for `Stream`.
unsafe impl Sync for BorrowedStream {}

impl fmt::Debug for BorrowedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BorrowedStream")
            .field("device", &self.device.ordinal())
            .field("raw", &self.raw)
            .finish()
    }
}

impl BorrowedStream {
    /// Wraps `raw`, a stream of `device` in the same runtime instance as `device`'s runtime.
    ///
    /// # Safety
    /// `raw` must be a stream created on `device` by the same loaded copy of the HIP runtime
    /// (or the null stream, `0`), and must stay valid (not destroyed) for as long as the
    /// returned value, anything queued through it and every buffer allocated on it with
    /// [`DeviceBuffer::alloc_async`](crate::safe::memory::DeviceBuffer::alloc_async) (whose drop
    /// queues its free on the stream) exist. It is never destroyed by hipjit.
    pub unsafe fn from_raw(device: &Device, raw: sys::hipStream_t) -> BorrowedStream {
        BorrowedStream {
            device: device.clone(),
            raw,
        }
    }

    /// The null (default) stream of `device`.
    pub fn null(device: &Device) -> BorrowedStream {
        BorrowedStream {
            device: device.clone(),
            raw: std::ptr::null_mut(),
        }
    }
}

impl AsStream for BorrowedStream {
    fn device(&self) -> &Device {
        &self.device
    }
    fn as_raw(&self) -> sys::hipStream_t {
        self.raw
    }
}
