//! Stream capture ([`Capture`]: `hipStreamBeginCapture` ... `hipStreamEndCapture`).
//!
//! What a capture forbids, and the guard that keeps hipjit's own calls out of it, is the
//! stream's (the crate's `safe/capture_guard.rs`).

use std::marker::PhantomData;
use std::sync::Arc;

use hip_sys as sys;

use super::{Graph, GraphError, GraphInner};
use crate::safe::capture_guard;
pub use crate::safe::capture_guard::refuse_while_capturing;
use crate::safe::device::Device;
use crate::safe::error::{HipError, LaunchError};
use crate::safe::kernel::Kernel;
use crate::safe::launch::{KernelArgs, LaunchConfig, Via};
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
    /// The kernels launched into the capture, each checked once against the capturing stream
    /// (runtime and device) when first launched; the graph keeps them loaded.
    kernels: Vec<Kernel>,
    /// How the capture's launches reach the runtime, decided once at its beginning.
    via: Via,
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
        capture_guard::begun(rt, mode.raw());
        let via = Via::of(&device, stream.as_raw());
        Ok(Capture {
            device,
            stream: stream.as_raw(),
            mode,
            kernels: Vec::new(),
            via,
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
    #[inline]
    pub unsafe fn launch(
        &mut self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        mut args: KernelArgs<'buf>,
    ) -> Result<(), LaunchError> {
        // What stays true for the whole capture is checked once: the stream's runtime and
        // device against a kernel when it is first launched into it, the way to the runtime
        // at the beginning. The launch limits and arguments are checked on every launch.
        if !self.kernels.iter().any(|k| k.same_as(kernel)) {
            let stream = CapturingStream {
                device: &self.device,
                raw: self.stream,
            };
            kernel.check_stream(&stream, "hipModuleLaunchKernel")?;
            self.kernels.push(kernel.clone());
        }
        kernel.check_launch(&cfg, &args)?;
        // SAFETY: the caller's contract, extended to every replay (see above); the kernel's
        // device is the capturing stream's (checked when first kept).
        unsafe {
            self.via.launch(
                &self.device,
                kernel.as_raw(),
                &cfg,
                self.stream,
                args.raw_ptrs(),
            )
        }
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
        capture_guard::ended(self.device.runtime(), self.mode.raw());
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
#[inline]
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
