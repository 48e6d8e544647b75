//! Ctrl-C during a compile: the compile runs on a worker thread under a
//! [`CancelToken`](hipjit::compiler::cancel::CancelToken) while the calling thread, the GIL
//! released, waits for it in 50 ms slices and runs Python's signal handlers between them
//! (`Python::check_signals`). When a handler raises (`KeyboardInterrupt` for SIGINT), the token
//! is cancelled: the compiler's process group is killed within one tick
//! (`hipjit::process`), its build directory removed, nothing published to a cache;
//! the worker is joined (the GIL still released) and the handler's exception raised, about
//! 100 ms after the signal.
//!
//! hipRTC and NVRTC compiling in this process are one library call that cannot be
//! interrupted: the exception is raised once that call returns.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use hipjit::compiler::cancel::CancelToken;
use pyo3::prelude::*;

/// How long the calling thread waits between two looks at Python's signals.
const SLICE: Duration = Duration::from_millis(50);

/// Runs `work` (a compile, or a compile and load) on a worker thread, the GIL released,
/// returning its result; a Python signal handler that raises meanwhile cancels it and its
/// exception is returned instead (see the module documentation).
pub fn run<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    let token = CancelToken::new();
    std::thread::scope(|s| {
        let (done, finished) = mpsc::channel::<()>();
        let worker_token = token.clone();
        let worker = s.spawn(move || {
            let r = worker_token.scope(work);
            let _ = done.send(());
            r
        });
        let mut finished = finished;
        loop {
            // The receiver goes to the GIL-free closure and comes back (it is not Sync).
            let (waited, back) = py.detach(move || (finished.recv_timeout(SLICE), finished));
            finished = back;
            match waited {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Err(e) = py.check_signals() {
                token.cancel();
                // The worker ends within a tick once its compiler is killed; its build
                // directory is removed as it unwinds.
                let _ = py.detach(|| worker.join());
                return Err(e);
            }
        }
        match py.detach(|| worker.join()) {
            Ok(r) => Ok(r),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
