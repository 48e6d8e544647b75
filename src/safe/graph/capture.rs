//! Stream capture ([`Capture`]: `hipStreamBeginCapture` ... `hipStreamEndCapture`) and the
//! checks that keep hipjit's own calls out of a capture (`check_not_capturing`).
//!
//! # What a capture forbids
//! While a stream is capturing, work queued on it is recorded, not run. A call that cannot be
//! recorded (a code-object load, `hipMalloc`, a synchronize, a synchronous copy) fails, and
//! the runtime invalidates the capture: on the capturing stream itself, and in
//! [`CaptureMode::Global`] on any thread whose own capture mode is not
//! [`CaptureMode::Relaxed`] while a global-mode capture is under way anywhere in the process
//! (CUDA Programming Guide, "Stream Capture"; HIP follows it). hipjit refuses such calls of its
//! own before making them, with `hipErrorStreamCaptureUnsupported` naming the call, so the
//! capture is never corrupted:
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
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hip_sys as sys;

use super::{Graph, GraphError, GraphInner};
use crate::safe::device::Device;
use crate::safe::error::{HipError, LaunchError};
use crate::safe::kernel::Kernel;
use crate::safe::launch::{KernelArgs, LaunchConfig};
use crate::safe::stream::{AsStream, BorrowedStream, Stream};

/// `hipStreamCaptureMode`: which calls of other threads a capture forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// `hipStreamCaptureModeGlobal`: while the capture lasts, unsafe calls are forbidden on
    /// every thread whose mode is not `Relaxed` (PyTorch's default).
    Global,
    /// `hipStreamCaptureModeThreadLocal`: unsafe calls are forbidden on the capturing thread.
    ThreadLocal,
    /// `hipStreamCaptureModeRelaxed`: nothing is forbidden outside the capturing stream.
    Relaxed,
}

impl CaptureMode {
    pub(crate) fn raw(self) -> sys::hipStreamCaptureMode {
        match self {
            CaptureMode::Global => sys::hipStreamCaptureModeGlobal,
            CaptureMode::ThreadLocal => sys::hipStreamCaptureModeThreadLocal,
            CaptureMode::Relaxed => sys::hipStreamCaptureModeRelaxed,
        }
    }
}

/// Global-mode captures begun through hipjit and not yet ended, in the process.
static GLOBAL_CAPTURES: AtomicUsize = AtomicUsize::new(0);

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
    let global = GLOBAL_CAPTURES.load(Ordering::Acquire) > 0;
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

/// A capture under way on a stream ([`Stream::begin_capture`]): work queued on the stream is
/// recorded into a graph until [`Capture::end_capture`]. Kernels launched through
/// [`Capture::launch`] are kept loaded by the graph, and their arguments stay borrowed for
/// `'buf`, the lifetime of the [`Graph`] and of every [`super::GraphExec`] made from it.
///
/// Dropped without `end_capture`, the capture is ended and its graph destroyed. Not `Send`: a
/// capture ends on the thread that began it (HIP and CUDA refuse another).
pub struct Capture<'s, 'buf> {
    device: Device,
    stream: sys::hipStream_t,
    mode: CaptureMode,
    kernels: Vec<Kernel>,
    ended: bool,
    _stream: PhantomData<&'s ()>,
    _buf: PhantomData<&'buf mut ()>,
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Capture<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("stream", &self.stream)
            .field("mode", &self.mode)
            .field("kernels", &self.kernels.len())
            .finish()
    }
}

impl Stream {
    /// Begins capturing this stream into a graph (`hipStreamBeginCapture`; on NVIDIA
    /// `cuStreamBeginCapture_v2`). See [`Capture`].
    ///
    /// Errors: [`GraphError::Unsupported`] when the runtime does not export the capture API,
    /// or the runtime's error (a stream already capturing, the null stream).
    pub fn begin_capture<'buf>(&self, mode: CaptureMode) -> Result<Capture<'_, 'buf>, GraphError> {
        Capture::begin(self, mode)
    }
}

impl BorrowedStream {
    /// As [`Stream::begin_capture`], on a stream owned by someone else.
    ///
    /// Errors: as [`Stream::begin_capture`].
    pub fn begin_capture<'buf>(&self, mode: CaptureMode) -> Result<Capture<'_, 'buf>, GraphError> {
        Capture::begin(self, mode)
    }
}

impl<'s, 'buf> Capture<'s, 'buf> {
    fn begin(
        stream: &'s impl AsStream,
        mode: CaptureMode,
    ) -> Result<Capture<'s, 'buf>, GraphError> {
        let device = stream.device().clone();
        let rt = device.runtime();
        let begin = super::entry(rt.api().hipStreamBeginCapture, "hipStreamBeginCapture")?;
        super::entry(rt.api().hipStreamEndCapture, "hipStreamEndCapture")?;
        device.bind()?;
        // SAFETY: live stream handle; the mode is a hipStreamCaptureMode value.
        rt.check(
            unsafe { begin(stream.as_raw(), mode.raw()) },
            "hipStreamBeginCapture",
        )?;
        match mode {
            CaptureMode::Global => {
                GLOBAL_CAPTURES.fetch_add(1, Ordering::AcqRel);
            }
            CaptureMode::ThreadLocal => THREAD_CAPTURES.with(|c| c.set(c.get() + 1)),
            CaptureMode::Relaxed => {}
        }
        Ok(Capture {
            device,
            stream: stream.as_raw(),
            mode,
            kernels: Vec::new(),
            ended: false,
            _stream: PhantomData,
            _buf: PhantomData,
            _thread: PhantomData,
        })
    }

    /// The capture mode.
    pub fn mode(&self) -> CaptureMode {
        self.mode
    }

    /// Records a launch of `kernel` into the graph ([`Kernel::launch`] on the capturing
    /// stream, with all its checks). The graph keeps `kernel` loaded and `args` borrowed for
    /// `'buf`; the runtime copies the argument values when it records the launch.
    ///
    /// Errors: as [`Kernel::launch`].
    ///
    /// # Safety
    /// As [`Kernel::launch`], for every replay of the graph: the kernel must access only the
    /// memory passed in `args`, which the borrow keeps alive as long as the graph.
    pub unsafe fn launch(
        &mut self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        mut args: KernelArgs<'buf>,
    ) -> Result<(), LaunchError> {
        let stream = CapturingStream {
            device: &self.device,
            raw: self.stream,
        };
        // SAFETY: the caller's contract, extended to every replay (see above).
        unsafe { kernel.launch(&stream, cfg, &mut args) }?;
        keep(&mut self.kernels, kernel);
        Ok(())
    }

    /// Ends the capture (`hipStreamEndCapture`; on NVIDIA `cuStreamEndCapture`) and returns the
    /// graph of the work recorded.
    ///
    /// Errors: the runtime's error, e.g. `hipErrorStreamCaptureInvalidated` when a forbidden
    /// call broke the capture.
    pub fn end_capture(mut self) -> Result<Graph<'buf>, GraphError> {
        let raw = self.end()?;
        Ok(Graph {
            inner: Arc::new(GraphInner {
                raw,
                device: self.device.clone(),
                kernels: std::mem::take(&mut self.kernels),
            }),
            _buf: PhantomData,
        })
    }

    fn end(&mut self) -> Result<sys::hipGraph_t, HipError> {
        self.ended = true;
        match self.mode {
            CaptureMode::Global => {
                GLOBAL_CAPTURES.fetch_sub(1, Ordering::AcqRel);
            }
            CaptureMode::ThreadLocal => THREAD_CAPTURES.with(|c| c.set(c.get().saturating_sub(1))),
            CaptureMode::Relaxed => {}
        }
        let rt = self.device.runtime();
        let Some(end) = rt.api().hipStreamEndCapture else {
            // Unreachable: `begin` required it.
            return Err(rt.error(801, "hipStreamEndCapture"));
        };
        self.device.bind()?;
        let mut raw: sys::hipGraph_t = std::ptr::null_mut();
        // SAFETY: live stream handle capturing since `begin`; valid out pointer.
        rt.check(unsafe { end(self.stream, &mut raw) }, "hipStreamEndCapture")?;
        Ok(raw)
    }
}

impl Drop for Capture<'_, '_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        match self.end() {
            Ok(raw) if !raw.is_null() => {
                if let Some(destroy) = self.device.runtime().api().hipGraphDestroy {
                    // SAFETY: the graph just returned by hipStreamEndCapture, destroyed once.
                    unsafe { destroy(raw) };
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "failed to end an abandoned stream capture"),
        }
    }
}

/// Adds `kernel` to `kept` unless a clone of it is there.
pub(super) fn keep(kept: &mut Vec<Kernel>, kernel: &Kernel) {
    if !kept.iter().any(|k| k.same_as(kernel)) {
        kept.push(kernel.clone());
    }
}

/// The capturing stream as an [`AsStream`] for [`Kernel::launch`].
struct CapturingStream<'a> {
    device: &'a Device,
    raw: sys::hipStream_t,
}

impl AsStream for CapturingStream<'_> {
    fn device(&self) -> &Device {
        self.device
    }
    fn as_raw(&self) -> sys::hipStream_t {
        self.raw
    }
}
