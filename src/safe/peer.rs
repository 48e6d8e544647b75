//! Several devices in one process: peer access between devices ([`Device::can_access_peer`],
//! [`Device::enable_peer_access`]), copies between devices ordered on a stream
//! ([`DeviceMemoryMut::copy_from_peer_async`]), and the ordering of work across devices.
//!
//! # Peer access
//! Peer access lets kernels and copies of one device read and write another device's memory
//! directly (over NVLink, xGMI or PCIe). It is per ordered pair of devices and lasts for the
//! process: [`Device::enable_peer_access`] (`hipDeviceEnablePeerAccess`; on NVIDIA
//! `cuCtxEnablePeerAccess` with the peer's primary context) is needed before a kernel of device
//! A dereferences a pointer of device B, and before a same-runtime device-to-device copy
//! ([`DeviceMemoryMut::copy_from_device_async`], `hipMemcpyAsync`) whose source is on another
//! device; hipjit refuses the latter, naming both devices, when it has not been enabled through
//! hipjit. A kernel's arguments are not inspected: enabling peer access before launching a
//! kernel that reads a peer's buffer is the caller's part.
//!
//! # Copies between devices
//! [`DeviceMemoryMut::copy_from_peer_async`] (`hipMemcpyPeerAsync`; on NVIDIA
//! `cuMemcpyPeerAsync` between the two primary contexts) copies between two devices on a
//! stream of either device, with or without peer access (without it the runtime stages the
//! copy through host memory, which is slower). The copy is ordered like any other work on that
//! stream; buffers allocated on a stream of their own device
//! ([`DeviceBuffer::alloc_async`](crate::safe::memory::DeviceBuffer::alloc_async)) are ordered
//! across the two devices by hipjit (an event on each side), and a buffer freed with `hipFree`
//! that another device's stream used waits for that use before its free.
//!
//! # Ordering work across devices
//! An [`Event`](crate::safe::event::Event) belongs to the device it was created on and is recorded
//! on a stream of that device (the runtime refuses a stream of another device, and so does
//! hipjit, before the call). A stream of *any* device of the same runtime may wait for it
//! ([`AsStream::wait_event`], `hipStreamWaitEvent`; CUDA's
//! `cuStreamWaitEvent` documents that the event may come from another context or device): work
//! queued on the waiting stream afterwards starts once the recorded work of the other device
//! has finished, without the host waiting. That is the only ordering between devices: the null
//! stream of one device is not ordered against another device's streams, and
//! [`Device::synchronize`] waits for one device.
//!
//! ```no_run
//! use hipjit::event::{Event, EventFlags};
//! use hipjit::memory::{DeviceBuffer, DeviceMemory, DeviceMemoryMut};
//! use hipjit::runtime::Runtime;
//! use hipjit::stream::{Stream, StreamFlags};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::load()?;
//! let (gpu0, gpu1) = (runtime.device(0)?, runtime.device(1)?);
//! let (s0, s1) = (
//!     Stream::new(&gpu0, StreamFlags::NON_BLOCKING)?,
//!     Stream::new(&gpu1, StreamFlags::NON_BLOCKING)?,
//! );
//! if gpu1.can_access_peer(&gpu0)? {
//!     gpu1.enable_peer_access(&gpu0)?; // faster copies; kernels of gpu1 may read gpu0's memory
//! }
//! let a = DeviceBuffer::from_slice(&gpu0, &[1.0f32; 1024])?;
//! // ... kernels writing `a` on s0 ...
//! let done = Event::new(&gpu0, EventFlags::DISABLE_TIMING)?;
//! done.record(&s0)?;
//! s1.wait_event(&done)?; // s1's later work waits for s0's work, on the GPUs
//! let mut b = DeviceBuffer::<f32>::alloc_async(&s1, 1024)?;
//! b.copy_from_peer_async(&a, &s1)?; // gpu0 -> gpu1, ordered on s1
//! assert_eq!(b.to_vec_on(&s1)?, vec![1.0f32; 1024]);
//! # Ok(())
//! # }
//! ```

use crate::safe::device::Device;
use crate::safe::error::HipError;
use crate::safe::memory::{DeviceCopy, DeviceMemory, DeviceMemoryMut};
use crate::safe::stream::AsStream;

const HIP_ERROR_INVALID_VALUE: i32 = 1;
const HIP_ERROR_INVALID_DEVICE: i32 = 101;
const HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED: i32 = 704;
const HIP_ERROR_PEER_ACCESS_NOT_ENABLED: i32 = 705;
const HIP_ERROR_NOT_SUPPORTED: i32 = 801;

fn not_exported(device: &Device, call: &'static str) -> HipError {
    HipError::new(
        HIP_ERROR_NOT_SUPPORTED,
        call,
        None,
        format!(
            "refused by hipjit before the call: the HIP runtime {} does not export {call}",
            device.runtime().path().display()
        ),
    )
}

fn same_device(device: &Device, call: &'static str, what: &str) -> HipError {
    HipError::new(
        HIP_ERROR_INVALID_DEVICE,
        call,
        None,
        format!(
            "refused by hipjit before the call: {what} are the same device ({}); peer access \
             and peer copies are between two different devices",
            device.ordinal()
        ),
    )
}

impl Device {
    /// Whether this device can access `peer`'s memory directly once peer access is enabled
    /// ([`Device::enable_peer_access`]); `false` for the device itself (`hipDeviceCanAccessPeer`;
    /// on NVIDIA `cuDeviceCanAccessPeer`).
    ///
    /// Errors: `hipErrorInvalidHandle` when `peer` belongs to another loaded runtime,
    /// `hipErrorNotSupported` when the runtime does not export `hipDeviceCanAccessPeer` (both
    /// checked by hipjit), or the runtime's error.
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool, HipError> {
        const CALL: &str = "hipDeviceCanAccessPeer";
        self.check_same_runtime(peer, "peer device", CALL)?;
        if self.same_as(peer) {
            return Ok(false);
        }
        let rt = self.runtime();
        let f = rt
            .api()
            .hipDeviceCanAccessPeer
            .ok_or_else(|| not_exported(self, CALL))?;
        let mut can = 0;
        // SAFETY: valid out pointer; ordinals of opened devices.
        rt.check(unsafe { f(&mut can, self.ordinal(), peer.ordinal()) }, CALL)?;
        Ok(can != 0)
    }

    /// Lets kernels and copies of this device access `peer`'s memory directly
    /// (`hipDeviceEnablePeerAccess(peer, 0)` with this device bound; on NVIDIA
    /// `cuCtxEnablePeerAccess` with `peer`'s primary context). One direction only: call it on
    /// both devices for both directions. Enabling it again is not an error (the runtime's
    /// `hipErrorPeerAccessAlreadyEnabled` is taken as success), also when another library of
    /// the process enabled it first.
    ///
    /// Errors: `hipErrorInvalidDevice` when `peer` is this device, `hipErrorInvalidHandle`
    /// when it belongs to another loaded runtime, `hipErrorNotSupported` when the runtime does
    /// not export `hipDeviceEnablePeerAccess` (all checked by hipjit), or the runtime's error
    /// (`hipErrorPeerAccessUnsupported` when [`Device::can_access_peer`] is false).
    pub fn enable_peer_access(&self, peer: &Device) -> Result<(), HipError> {
        const CALL: &str = "hipDeviceEnablePeerAccess";
        self.check_same_runtime(peer, "peer device", CALL)?;
        if self.same_as(peer) {
            return Err(same_device(self, CALL, "the device and its peer"));
        }
        let rt = self.runtime();
        let f = rt
            .api()
            .hipDeviceEnablePeerAccess
            .ok_or_else(|| not_exported(self, CALL))?;
        self.bind()?;
        // SAFETY: an opened device's ordinal, flags 0 (the only value defined).
        match rt.check(unsafe { f(peer.ordinal(), 0) }, CALL) {
            Ok(()) => {}
            Err(e) if e.code() == HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            Err(e) => return Err(e),
        }
        rt.inner
            .peers
            .lock()
            .insert((self.ordinal(), peer.ordinal()));
        Ok(())
    }

    /// Whether peer access from this device to `peer` was enabled through
    /// [`Device::enable_peer_access`] (by any `Device` value of the same runtime and ordinal).
    pub fn peer_access_enabled(&self, peer: &Device) -> bool {
        self.runtime().same_library(peer.runtime())
            && self
                .runtime()
                .inner
                .peers
                .lock()
                .contains(&(self.ordinal(), peer.ordinal()))
    }

    /// Refuses a same-device call (`hipMemcpyAsync` device to device) that would reach `other`'s
    /// memory from this device without peer access.
    ///
    /// Errors: `hipErrorPeerAccessNotEnabled` naming both devices.
    pub(crate) fn check_peer_access(
        &self,
        other: &Device,
        call: &'static str,
    ) -> Result<(), HipError> {
        if self.same_as(other) || self.peer_access_enabled(other) {
            return Ok(());
        }
        Err(HipError::new(
            HIP_ERROR_PEER_ACCESS_NOT_ENABLED,
            call,
            None,
            format!(
                "refused by hipjit before the call: the source is on device {}, the copy on \
                 device {}, and peer access from device {} to device {} is not enabled: call \
                 Device::enable_peer_access, or copy with copy_from_peer_async \
                 (hipMemcpyPeerAsync), which needs none",
                other.ordinal(),
                self.ordinal(),
                self.ordinal(),
                other.ordinal()
            ),
        ))
    }
}

/// Queues `hipMemcpyPeerAsync` of `src` (on one device) into `dst` (on another) on `stream`
/// (of either device), ordering both buffers' stream-ordered frees after it.
pub(crate) fn copy_peer<T: DeviceCopy, D: DeviceMemoryMut<T> + ?Sized>(
    dst: &mut D,
    src: &impl DeviceMemory<T>,
    stream: &impl AsStream,
) -> Result<(), HipError> {
    const CALL: &str = "hipMemcpyPeerAsync";
    crate::safe::memory::check_len_of("source", src.len(), dst.len(), CALL)?;
    let (dd, sd, qd) = (dst.device(), src.device(), stream.device());
    dd.check_same_runtime(sd, "source buffer", CALL)?;
    dd.check_same_runtime(qd, "stream", CALL)?;
    if dd.same_as(sd) {
        return Err(same_device(
            dd,
            CALL,
            "the source and the destination (a copy within one device is \
             copy_from_device_async, hipMemcpyAsync)",
        ));
    }
    if !qd.same_as(dd) && !qd.same_as(sd) {
        return Err(HipError::new(
            HIP_ERROR_INVALID_VALUE,
            CALL,
            None,
            format!(
                "refused by hipjit before the call: the stream is on device {}, neither the \
                 source's device ({}) nor the destination's ({})",
                qd.ordinal(),
                sd.ordinal(),
                dd.ordinal()
            ),
        ));
    }
    let rt = qd.runtime();
    let f = rt
        .api()
        .hipMemcpyPeerAsync
        .ok_or_else(|| not_exported(qd, CALL))?;
    let (dst_parent, src_parent) = (dst.parent().0, src.parent().0);
    dst_parent.enter_on(stream)?;
    src_parent.enter_on(stream)?;
    qd.bind()?;
    // SAFETY: both regions hold len() values of device memory on the devices named, which
    // outlive the queued copy (each buffer's free is ordered after this stream, or waits for
    // it); a live stream of this runtime.
    rt.check(
        unsafe {
            f(
                dst.as_raw() as _,
                dd.ordinal(),
                src.as_raw() as _,
                sd.ordinal(),
                dst.size_bytes(),
                stream.as_raw(),
            )
        },
        CALL,
    )?;
    src_parent.exit_on(stream)?;
    dst_parent.exit_on(stream)
}
