//! Events: markers recorded on a stream, for ordering another stream after it
//! ([`AsStream::wait_event`]), waiting on the host and
//! timing. [`Event::record`] takes any stream: an owned [`Stream`](crate::safe::stream::Stream), a
//! [`BorrowedStream`](crate::safe::stream::BorrowedStream) (a framework's stream, the null stream).
//! The ordering rule is in [`crate::safe::stream`].

use std::fmt;

use hip_sys as sys;

use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::stream::AsStream;

bitflags::bitflags! {
    /// Flags of `hipEventCreateWithFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// `hipEventBlockingSync`: waiting blocks the thread instead of spinning.
        const BLOCKING_SYNC = 0x1;
        /// `hipEventDisableTiming`: no timestamp (cheaper; [`Event::elapsed_ms`] fails).
        const DISABLE_TIMING = 0x2;
    }
}

impl EventFlags {
    /// `hipEventDefault` (0): a timing event whose waits spin.
    ///
    /// ```
    /// assert_eq!(hipjit::event::EventFlags::DEFAULT.bits(), 0);
    /// ```
    pub const DEFAULT: EventFlags = EventFlags::empty();
}

/// A HIP event (`hipEventCreateWithFlags`), destroyed on drop (`hipEventDestroy`).
/// `Send + Sync`.
pub struct Event {
    device: Device,
    raw: sys::hipEvent_t,
}

// SAFETY: a hipEvent_t may be used from any thread; the device is bound before each call.
unsafe impl Send for Event {}
// SAFETY: the runtime synchronizes event operations internally.
unsafe impl Sync for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device.ordinal())
            .field("raw", &self.raw)
            .finish()
    }
}

impl Event {
    /// Creates an event on `device`.
    ///
    /// Errors: the runtime's error.
    pub fn new(device: &Device, flags: EventFlags) -> Result<Event, HipError> {
        device.bind()?;
        let rt = device.runtime();
        let mut raw: sys::hipEvent_t = std::ptr::null_mut();
        // SAFETY: valid out pointer, documented flag bits.
        rt.check(
            unsafe { (rt.api().hipEventCreateWithFlags)(&mut raw, flags.bits() as _) },
            "hipEventCreateWithFlags",
        )?;
        Ok(Event {
            device: device.clone(),
            raw,
        })
    }

    /// Records the event on `stream` (`hipEventRecord`): the event completes when the work
    /// queued on `stream` before this call has finished. Any stream of the same loaded runtime
    /// may be given, owned or borrowed; recording again moves the marker (a later
    /// [`AsStream::wait_event`] waits for the newest).
    ///
    /// The stream must be on the event's device (as HIP and CUDA require); a stream of
    /// another device may then wait for the event ([`crate::safe::peer`] has the cross-device rules).
    ///
    /// Errors: `hipErrorInvalidHandle` when `stream` belongs to another loaded runtime or to
    /// another device (checked by hipjit), or the runtime's error.
    pub fn record(&self, stream: &impl AsStream) -> Result<(), HipError> {
        self.device
            .check_same_runtime(stream.device(), "stream", "hipEventRecord")?;
        if !self.device.same_as(stream.device()) {
            return Err(HipError::new(
                400,
                "hipEventRecord",
                None,
                format!(
                    "refused by hipjit before the call: the event belongs to device {} and the \
                     stream to device {}; an event is recorded on a stream of its own device \
                     (a stream of any device may wait for it)",
                    self.device.ordinal(),
                    stream.device().ordinal()
                ),
            ));
        }
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: both handles are live.
        rt.check(
            unsafe { (rt.api().hipEventRecord)(self.raw, stream.as_raw()) },
            "hipEventRecord",
        )
    }

    /// Waits until the work before the recorded point has finished (`hipEventSynchronize`).
    ///
    /// Errors: the runtime's error.
    pub fn synchronize(&self) -> Result<(), HipError> {
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: live handle.
        rt.check(
            unsafe { (rt.api().hipEventSynchronize)(self.raw) },
            "hipEventSynchronize",
        )
    }

    /// Whether the recorded work has finished (`hipEventQuery`; `hipErrorNotReady` -> false).
    ///
    /// Errors: any other code.
    pub fn query(&self) -> Result<bool, HipError> {
        self.device.bind()?;
        let rt = self.device.runtime();
        // SAFETY: live handle.
        match rt.check(
            unsafe { (rt.api().hipEventQuery)(self.raw) },
            "hipEventQuery",
        ) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_ready() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Milliseconds between `self` (start) and `end`, both recorded and completed
    /// (`hipEventElapsedTime`).
    ///
    /// Errors: the runtime's error (`hipErrorNotReady` when not completed,
    /// `hipErrorInvalidHandle` for events created with [`EventFlags::DISABLE_TIMING`]);
    /// `hipErrorInvalidHandle` when `end` belongs to another loaded runtime (checked by hipjit).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, HipError> {
        self.device
            .check_same_runtime(&end.device, "end event", "hipEventElapsedTime")?;
        self.device.bind()?;
        let rt = self.device.runtime();
        let mut ms = 0.0f32;
        // SAFETY: valid out pointer, live handles.
        rt.check(
            unsafe { (rt.api().hipEventElapsedTime)(&mut ms, self.raw, end.raw) },
            "hipEventElapsedTime",
        )?;
        Ok(ms)
    }

    /// The device the event was created on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw handle (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipEvent_t {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to destroy an event");
        }
        // SAFETY: created by hipEventCreateWithFlags, destroyed once.
        if let Err(e) = rt.check(
            unsafe { (rt.api().hipEventDestroy)(self.raw) },
            "hipEventDestroy",
        ) {
            tracing::error!(error = %e, "failed to destroy an event");
        }
    }
}
