//! Compiles off the launch path: `Jit.compile_in_background` returns a `PendingCompile`
//! (`ready()`, `wait(timeout)`, `result(timeout)`), and `Jit.switching_kernel` a
//! `SwitchingKernel`, called like a `Kernel`, that launches the fallback until the specialised
//! kernel is compiled and loaded on the fallback's device, then that one
//! (`hipjit::jit::SwitchingKernel`). The compiles run on the Rust `Jit`'s background pool;
//! waiting releases the GIL and runs Python's signal handlers every 50 ms.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hipjit::compiler::CompileOptions;
use hipjit::jit::SwitchingKernel as RsSwitching;
use hipjit::jit::{BackgroundError, Compiled as RsCompiled, Jit as RsJit, Pending};
use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::compiled::Compiled;
use crate::errors;
use crate::kernel::Kernel;

/// How long a wait sleeps between two looks at Python's signals.
const SLICE: Duration = Duration::from_millis(50);

/// The Python exception for a background compile's error.
pub fn background_error(py: Python<'_>, e: &BackgroundError) -> PyErr {
    match e {
        BackgroundError::Jit(e) => errors::jit_error_ref(py, e),
        BackgroundError::ArgumentsDiffer { .. } => errors::load_error(e),
        _ => errors::hipjit_error(e),
    }
}

/// A `timeout=` keyword: None (no limit) or seconds, at least 0.
fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    t.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            PyValueError::new_err(format!(
                "timeout: {s} is not a number of seconds (0 or more)"
            ))
        })
    })
    .transpose()
}

/// Waits for `pending`, the GIL released, until `timeout`; whether it is ready.
fn wait<T: Send + Sync>(py: Python<'_>, pending: &Pending<T>, t: Option<f64>) -> PyResult<bool> {
    let deadline = timeout(t)?.map(|t| Instant::now() + t);
    loop {
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
            None => SLICE,
        };
        if py.detach(|| pending.wait_timeout(slice).is_some()) {
            return Ok(true);
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
    }
}

/// A compile running on the JIT's background pool (`Jit.compile_in_background`).
#[pyclass(frozen, module = "hipjit")]
pub struct PendingCompile {
    pending: Pending<RsCompiled>,
    text: Option<String>,
}

impl PendingCompile {
    pub fn new(pending: Pending<RsCompiled>, text: Option<String>) -> PendingCompile {
        PendingCompile { pending, text }
    }
}

#[pymethods]
impl PendingCompile {
    /// Whether the compile has ended (with a result or an error); never waits.
    fn ready(&self) -> bool {
        self.pending.is_ready()
    }

    /// Waits until the compile has ended, at most `timeout` seconds (None: no limit); whether
    /// it has.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        wait(py, &self.pending, timeout)
    }

    /// The `Compiled` result, waiting at most `timeout` seconds (None: no limit).
    ///
    /// Raises the compile's error (`CompileError`...), `TimeoutError` when it has not ended
    /// in time.
    #[pyo3(signature = (timeout=None))]
    fn result(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Compiled> {
        if !wait(py, &self.pending, timeout)? {
            return Err(PyTimeoutError::new_err(
                "the background compile has not ended yet",
            ));
        }
        match self.pending.poll() {
            Some(Ok(c)) => Ok(Compiled::new(c.clone(), self.text.as_deref())),
            Some(Err(e)) => Err(background_error(py, e)),
            None => unreachable!("waited until ready"),
        }
    }

    fn __repr__(&self) -> String {
        let state = match self.pending.poll() {
            None => "compiling",
            Some(Ok(_)) => "ready",
            Some(Err(_)) => "failed",
        };
        format!("PendingCompile({state})")
    }
}

/// A kernel that launches `fallback` until the specialised kernel compiling in the background
/// is loaded, then that one (`Jit.switching_kernel`). Called like a `Kernel`.
#[pyclass(frozen, module = "hipjit")]
pub struct SwitchingKernel {
    inner: RsSwitching,
    fallback: Py<Kernel>,
    /// The specialised kernel's Python wrapper, made at the first launch after the switch.
    specialised: OnceLock<Py<Kernel>>,
    jit: Arc<RsJit>,
    source: Vec<u8>,
    text: Option<String>,
    options: CompileOptions,
}

impl SwitchingKernel {
    /// Starts compiling `source` (kernel `name`) for `fallback`'s device on `jit`'s pool.
    pub fn start(
        jit: Arc<RsJit>,
        fallback: Py<Kernel>,
        source: Vec<u8>,
        text: Option<String>,
        name: &str,
        options: CompileOptions,
    ) -> SwitchingKernel {
        let (k, device) = fallback.get().parts();
        let pending = jit.kernel_in_background(device, &source, name, &options);
        SwitchingKernel {
            inner: RsSwitching::new(k.clone(), pending),
            fallback,
            specialised: OnceLock::new(),
            jit,
            source,
            text,
            options,
        }
    }

    /// The Python kernel launched now.
    fn current_kernel(&self, py: Python<'_>) -> PyResult<&Py<Kernel>> {
        let current = self.inner.current();
        if current.same_as(self.inner.fallback()) {
            return Ok(&self.fallback);
        }
        if let Some(k) = self.specialised.get() {
            return Ok(k);
        }
        let device = self.fallback.get().parts().1.clone();
        // A hit of the compile and of the loaded library: the key of what was loaded.
        let loaded = py
            .detach(|| self.jit.load(&device, &self.source, &self.options))
            .map_err(|e| errors::jit_error(py, e))?;
        let k = Kernel::new(
            current.clone(),
            device,
            self.text.as_deref(),
            loaded.compiled.key().to_hex(),
        )?;
        let _ = self.specialised.set(Py::new(py, k)?);
        Ok(self.specialised.get().expect("set above"))
    }
}

#[pymethods]
impl SwitchingKernel {
    /// Launches the current kernel (see `Kernel.__call__`): the fallback until the specialised
    /// kernel is loaded (never waiting for it), then the specialised one.
    #[pyo3(signature = (grid, block, *args, shared_mem=None, stream=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_mem: Option<&Bound<'_, PyAny>>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.current_kernel(py)?
            .get()
            .launch(py, grid, block, args, shared_mem, stream)
    }

    /// Whether the background compile (and load) has ended, with the kernel or an error.
    fn ready(&self) -> bool {
        self.inner.pending().is_ready()
    }

    /// Waits until the background compile has ended, at most `timeout` seconds (None: no
    /// limit); whether launches now go to the specialised kernel.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        wait(py, self.inner.pending(), timeout)?;
        Ok(self.inner.is_switched())
    }

    /// Whether launches now go to the specialised kernel.
    #[getter]
    fn switched(&self) -> bool {
        self.inner.is_switched()
    }

    /// Why it keeps the fallback for good (the compile's error, or arguments that differ
    /// from the fallback's), as an exception object; None while compiling and once switched.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.inner
            .error()
            .map(|e| background_error(py, e).into_value(py).into_any())
    }

    /// The fallback `Kernel`.
    #[getter]
    fn fallback(&self, py: Python<'_>) -> Py<Kernel> {
        self.fallback.clone_ref(py)
    }

    /// The `Kernel` launched now.
    #[getter]
    fn current(&self, py: Python<'_>) -> PyResult<Py<Kernel>> {
        Ok(self.current_kernel(py)?.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        let state = if self.inner.is_switched() {
            "switched"
        } else if self.inner.error().is_some() {
            "failed, fallback"
        } else {
            "compiling, fallback"
        };
        format!("SwitchingKernel({}, {state})", self.inner.fallback().name())
    }
}
