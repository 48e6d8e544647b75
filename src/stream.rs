//! Streams: owned ([`Stream`], destroyed on drop) and borrowed ([`BorrowedStream`], a
//! `hipStream_t` owned by someone else, such as a framework's current stream).

use std::fmt;

use hip_sys as sys;

use crate::device::Device;
use crate::error::HipError;

bitflags::bitflags! {
    /// Flags of `hipStreamCreateWithFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// `hipStreamNonBlocking`: the stream does not synchronize with the null stream.
        const NON_BLOCKING = 0x1;
    }
}

/// A stream work can be queued on: [`Stream`] or [`BorrowedStream`].
pub trait AsStream {
    /// The device the stream belongs to.
    fn device(&self) -> &Device;
    /// The raw handle (valid while `self` lives).
    fn as_raw(&self) -> sys::hipStream_t;

    /// Blocks until all work queued on the stream has finished (`hipStreamSynchronize`).
    ///
    /// Errors: the runtime's error, e.g. a fault of a kernel queued on the stream.
    fn synchronize(&self) -> Result<(), HipError> {
        let rt = self.device().runtime();
        self.device().bind()?;
        // SAFETY: the stream handle is valid while `self` lives.
        rt.check(
            unsafe { (rt.api().hipStreamSynchronize)(self.as_raw()) },
            "hipStreamSynchronize",
        )
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

/// An owned HIP stream, destroyed on drop (`hipStreamDestroy`). `Send + Sync`: HIP streams may
/// be used from any thread, and every call binds the stream's device first.
pub struct Stream {
    device: Device,
    raw: sys::hipStream_t,
}

// SAFETY: a hipStream_t is a handle the runtime allows on any thread; the device is bound before
// each call that needs it.
unsafe impl Send for Stream {}
// SAFETY: the runtime serialises operations on a stream internally; `&Stream` exposes no
// mutation of Rust-side state.
unsafe impl Sync for Stream {}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.device.ordinal())
            .field("raw", &self.raw)
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
            device: device.clone(),
            raw,
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

    /// The raw handle (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipStream_t {
        self.raw
    }
}

impl AsStream for Stream {
    fn device(&self) -> &Device {
        &self.device
    }
    fn as_raw(&self) -> sys::hipStream_t {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to destroy a stream");
        }
        // SAFETY: `raw` was created by hipStreamCreateWithFlags and is destroyed once.
        if let Err(e) = rt.check(
            unsafe { (rt.api().hipStreamDestroy)(self.raw) },
            "hipStreamDestroy",
        ) {
            tracing::error!(error = %e, "failed to destroy a stream");
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
    /// returned value and anything queued through it exist. It is never destroyed by hipjit.
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
