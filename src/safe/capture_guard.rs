//! The capture guard: what a stream capture forbids, and the check that keeps hipjit's own
//! calls (loads, allocations, synchronizes, synchronous copies) out of one. Owned by the
//! stream layer; the device, stream, memory and library code call it before such calls, and
//! the graph's [`Capture`](crate::safe::graph::Capture) tells it when a capture begins and
//! ends.
//!
//! # What a capture forbids
//! While a stream is capturing, work queued on it is recorded, not run. A call that cannot be
//! recorded (a code-object load, `hipMalloc`, a synchronize, a synchronous copy) fails, and
//! the runtime invalidates the capture: on the capturing stream itself, and in global mode
//! ([`CaptureMode::Global`](crate::safe::graph::CaptureMode::Global)) on any thread whose own
//! capture mode is not relaxed while a global-mode capture is under way anywhere in the
//! process (CUDA Programming Guide, "Stream Capture"; HIP follows it): anywhere in that
//! runtime, that is (two HIP runtime libraries loaded side by side share no capture state; on
//! HIP's NVIDIA platform every runtime is the one CUDA driver). hipjit refuses such
//! calls of its own before making them, with `hipErrorStreamCaptureUnsupported` naming the
//! call, so the capture is never corrupted:
//! - the stream a call is about to use is asked with `hipStreamIsCapturing`;
//! - while a global-mode capture begun through hipjit is under way (or a thread-local one on
//!   the calling thread), the calling thread's mode is read with
//!   `hipThreadExchangeStreamCaptureMode` (exchanged with `Relaxed` and back); any mode but
//!   `Relaxed` forbids the call.
//!
//! A capture begun outside hipjit (PyTorch's `torch.cuda.graph`) is seen on the stream hipjit
//! is handed; a global-mode capture on a stream hipjit never sees is not, and the runtime's own
//! error reports it.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use hip_sys as sys;

use crate::safe::device::Device;
use crate::safe::error::HipError;

/// Global-mode captures begun through hipjit and not yet ended, in the process: the fast path
/// of [`check_not_capturing`] (one load while none is under way).
static GLOBAL_CAPTURES: AtomicUsize = AtomicUsize::new(0);

/// The same captures per runtime library ([`runtime_key`]): a global-mode capture forbids
/// calls into its own runtime only.
static GLOBAL_BY_RUNTIME: parking_lot::Mutex<Vec<(usize, usize)>> =
    parking_lot::Mutex::new(Vec::new());

/// Which runtime library `rt` is: the address of its `hipGetDevice`, the same for every
/// `Runtime` of one library (and for every runtime on HIP's NVIDIA platform, whose entry points
/// are hipjit's over the one CUDA driver of the process), another for another library.
fn runtime_key(rt: &crate::safe::runtime::Runtime) -> usize {
    rt.api().hipGetDevice as usize
}

/// Whether a global-mode capture begun through hipjit is under way on `rt`'s library.
fn global_capture_on(rt: &crate::safe::runtime::Runtime) -> bool {
    if GLOBAL_CAPTURES.load(Ordering::Acquire) == 0 {
        return false;
    }
    let key = runtime_key(rt);
    GLOBAL_BY_RUNTIME
        .lock()
        .iter()
        .any(|&(k, n)| k == key && n > 0)
}

thread_local! {
    /// Thread-local-mode captures begun through hipjit on this thread and not yet ended.
    static THREAD_CAPTURES: Cell<usize> = const { Cell::new(0) };
}

/// Refuses `call` (a load, an allocation, a synchronize hipjit is about to make) when it would
/// break a capture: `stream` (when the call uses one) is capturing, or a capture forbids it on
/// this thread (module documentation). Costs one atomic load when no capture is under way.
///
/// Errors: `hipErrorStreamCaptureUnsupported` (900) naming `call`, or the runtime's error of
/// `hipStreamIsCapturing`.
pub(crate) fn check_not_capturing(
    device: &Device,
    stream: Option<sys::hipStream_t>,
    call: &'static str,
) -> Result<(), HipError> {
    let rt = device.runtime();
    let api = rt.api();
    if let (Some(stream), Some(is_capturing)) = (stream, api.hipStreamIsCapturing) {
        let mut status: sys::hipStreamCaptureStatus = sys::hipStreamCaptureStatusNone;
        // SAFETY: valid out pointer; the caller's stream handle is live.
        rt.check(
            unsafe { is_capturing(stream, &mut status) },
            "hipStreamIsCapturing",
        )?;
        if status != sys::hipStreamCaptureStatusNone {
            return Err(refusal(
                call,
                "the stream it would use is capturing (a capture records work, it cannot run \
                 this call)",
            ));
        }
    }
    let global = global_capture_on(rt);
    let local = THREAD_CAPTURES.with(Cell::get) > 0;
    if !global && !local {
        return Ok(());
    }
    let Some(exchange) = api.hipThreadExchangeStreamCaptureMode else {
        return Ok(());
    };
    let mut mode = sys::hipStreamCaptureModeRelaxed;
    // SAFETY: valid in/out pointer; the mode is put back right after.
    rt.check(
        unsafe { exchange(&mut mode) },
        "hipThreadExchangeStreamCaptureMode",
    )?;
    let mut back = mode;
    // SAFETY: as above, restoring the thread's mode.
    rt.check(
        unsafe { exchange(&mut back) },
        "hipThreadExchangeStreamCaptureMode",
    )?;
    if mode != sys::hipStreamCaptureModeRelaxed {
        let why = if global {
            "a global-mode stream capture is under way and this thread's capture mode is not \
             relaxed (hipThreadExchangeStreamCaptureMode)"
        } else {
            "this thread is capturing in thread-local mode"
        };
        return Err(refusal(call, why));
    }
    Ok(())
}

/// Refuses `call` when `stream` is capturing, or when a capture begun through hipjit forbids
/// it on this thread: the check hipjit makes before its own loads, allocations and
/// synchronizes, for a caller about to make such a call on behalf of a stream it was handed
/// (a framework's current stream: a code-object load while `torch.cuda.graph` captures on it
/// would invalidate the capture). One `hipStreamIsCapturing` call
/// (`cuStreamIsCapturing` on NVIDIA).
///
/// Errors: `hipErrorStreamCaptureUnsupported` (900) naming `call` ("refused by hipjit before
/// the call"), or the runtime's error of `hipStreamIsCapturing`.
pub fn refuse_while_capturing(
    stream: &impl crate::safe::stream::AsStream,
    call: &'static str,
) -> Result<(), HipError> {
    check_not_capturing(stream.device(), Some(stream.as_raw()), call)
}

#[cold]
fn refusal(call: &'static str, why: &str) -> HipError {
    HipError::new(
        900,
        call,
        None,
        format!("refused by hipjit before the call, which would invalidate the capture: {why}"),
    )
}

/// Counts a capture begun through hipjit on `rt` in `mode` (`hipStreamCaptureMode`): a
/// global-mode one for that runtime in the process, a thread-local-mode one for this thread; a
/// relaxed one forbids nothing.
pub(crate) fn begun(rt: &crate::safe::runtime::Runtime, mode: sys::hipStreamCaptureMode) {
    if mode == sys::hipStreamCaptureModeGlobal {
        let key = runtime_key(rt);
        let mut by = GLOBAL_BY_RUNTIME.lock();
        match by.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => by.push((key, 1)),
        }
        GLOBAL_CAPTURES.fetch_add(1, Ordering::AcqRel);
    } else if mode == sys::hipStreamCaptureModeThreadLocal {
        THREAD_CAPTURES.with(|c| c.set(c.get() + 1));
    }
}

/// Uncounts a capture [`begun`] on `rt` in `mode`, as it ends.
pub(crate) fn ended(rt: &crate::safe::runtime::Runtime, mode: sys::hipStreamCaptureMode) {
    if mode == sys::hipStreamCaptureModeGlobal {
        let key = runtime_key(rt);
        let mut by = GLOBAL_BY_RUNTIME.lock();
        if let Some(at) = by.iter().position(|(k, _)| *k == key) {
            by[at].1 -= 1;
            if by[at].1 == 0 {
                by.swap_remove(at);
            }
            GLOBAL_CAPTURES.fetch_sub(1, Ordering::AcqRel);
        }
    } else if mode == sys::hipStreamCaptureModeThreadLocal {
        THREAD_CAPTURES.with(|c| c.set(c.get().saturating_sub(1)));
    }
}
