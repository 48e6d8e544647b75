//! The stream of a launch.
//!
//! `stream=None` is PyTorch's current stream of the kernel's device when torch has been imported
//! and has initialised its GPU state (read with `torch._C._cuda_getCurrentRawStream(index)`,
//! 0.18 us a call on an H200, falling back to `torch.cuda.current_stream(index).cuda_stream`),
//! else the default (null) stream. A stream is also given as an int handle (`hipStream_t` /
//! `CUstream`), a `torch.cuda.Stream` (`.cuda_stream`) or a CuPy stream (`.ptr`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt};

use crate::options::type_name;

/// Where a launch's stream came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The null stream (no torch, or torch without GPU state).
    Default,
    /// PyTorch's current stream or a `torch.cuda.Stream`: the framework's runtime.
    Torch,
    /// An int handle or a CuPy stream.
    Given,
}

/// `torch._C._cuda_getCurrentRawStream`, or the public fallback, once torch is imported.
static CURRENT_RAW_STREAM: PyOnceLock<(Py<PyAny>, bool)> = PyOnceLock::new();
/// `torch.cuda.is_initialized`, once torch is imported.
static TORCH_INITIALIZED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static TORCH_READY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// torch's module, when someone imported it (never imported here).
pub fn torch(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    crate::args::imported_module(py, "torch")
}

/// Whether torch is imported and has initialised its GPU state (remembered once true).
pub fn torch_gpu_ready(py: Python<'_>) -> bool {
    if TORCH_READY.load(std::sync::atomic::Ordering::Relaxed) {
        return true;
    }
    let Some(torch) = torch(py) else {
        return false;
    };
    let f = TORCH_INITIALIZED.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(torch.getattr("cuda")?.getattr("is_initialized")?.unbind())
    });
    let ready = f
        .ok()
        .and_then(|f| f.call0(py).ok())
        .and_then(|r| r.extract::<bool>(py).ok())
        .unwrap_or(false);
    if ready {
        TORCH_READY.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    ready
}

/// torch's current stream of device `ordinal` as a raw handle.
pub fn torch_current_stream(py: Python<'_>, ordinal: i32) -> PyResult<usize> {
    let (f, raw) = CURRENT_RAW_STREAM.get_or_try_init(py, || -> PyResult<(Py<PyAny>, bool)> {
        let torch = torch(py).ok_or_else(|| PyTypeError::new_err("torch is not imported"))?;
        if let Ok(f) = torch
            .getattr("_C")
            .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
        {
            return Ok((f.unbind(), true));
        }
        Ok((
            torch.getattr("cuda")?.getattr("current_stream")?.unbind(),
            false,
        ))
    })?;
    let r = f.call1(py, (ordinal,))?;
    if *raw {
        r.extract(py)
    } else {
        r.getattr(py, "cuda_stream")?.extract(py)
    }
}

/// The raw stream of a launch on device `ordinal` and where it came from.
///
/// Errors: `TypeError` for a value that is no stream, `ValueError` for an int that cannot be
/// a handle (negative, in the first page but 0-2, misaligned, beyond user space).
pub fn resolve(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    ordinal: i32,
) -> PyResult<(usize, Origin)> {
    let Some(s) = stream.filter(|s| !s.is_none()) else {
        if torch_gpu_ready(py) {
            return Ok((torch_current_stream(py, ordinal)?, Origin::Torch));
        }
        return Ok((0, Origin::Default));
    };
    if s.is_instance_of::<PyInt>() && !s.is_instance_of::<PyBool>() {
        let h = s
            .extract::<usize>()
            .ok()
            .filter(|&h| plausible_handle(h))
            .ok_or_else(|| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "stream: {} is not a stream handle: expected 0 (the default stream), 1 or 2 \
                     (the legacy and per-thread default streams), or the address of a stream \
                     (a hipStream_t / CUstream, as torch.cuda.Stream.cuda_stream gives it); a \
                     raw handle is passed to the runtime as it is, and that it is a live stream \
                     of the kernel's device is the caller's responsibility",
                    s.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
        return Ok((h, Origin::Given));
    }
    let handle = |kind: StreamKind| -> PyResult<(usize, Origin)> {
        Ok(match kind {
            StreamKind::Torch => (
                s.getattr(pyo3::intern!(py, "cuda_stream"))?.extract()?,
                Origin::Torch,
            ),
            StreamKind::Cupy => (
                s.getattr(pyo3::intern!(py, "ptr"))?.extract()?,
                Origin::Given,
            ),
        })
    };
    // The kind its type had before; objects of one class may differ, so a miss asks again.
    if let Some(kind) = known_kind(py, s) {
        if let Ok(h) = handle(kind) {
            return Ok(h);
        }
    }
    match probe_kind(py, s) {
        Some(kind) => handle(kind),
        None => Err(PyTypeError::new_err(format!(
            "stream: expected None, an int handle, a torch.cuda.Stream or a CuPy stream; got {}",
            type_name(s)
        ))),
    }
}

/// Whether `h` can be a stream handle: 0 (the default stream), 1 or 2 (`hipStreamLegacy` /
/// `CU_STREAM_LEGACY`, `hipStreamPerThread` / `CU_STREAM_PER_THREAD`), or the address of a
/// runtime object: past the first page, 8-byte aligned (the runtimes allocate their stream
/// objects with malloc or new) and below 2**57 (the top of user space with 5-level paging).
/// Nothing here proves a handle live: that is the caller's to keep.
fn plausible_handle(h: usize) -> bool {
    h <= 2 || (h >= 4096 && h.is_multiple_of(8) && (h as u64) < (1 << 57))
}

/// Which attribute holds a stream object's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    /// `.cuda_stream` (`torch.cuda.Stream`, and torch's ROCm build).
    Torch,
    /// `.ptr` (CuPy streams).
    Cupy,
}

/// The stream kinds of the stream types met so far: a failed attribute lookup raises (and
/// clears) an AttributeError, which costs more than a launch, so each type is probed once.
static STREAM_TYPES: std::sync::Mutex<Vec<(Py<pyo3::types::PyType>, StreamKind)>> =
    std::sync::Mutex::new(Vec::new());

fn known_kind(py: Python<'_>, s: &Bound<'_, PyAny>) -> Option<StreamKind> {
    let t = s.get_type();
    let known = STREAM_TYPES.lock().unwrap_or_else(|p| p.into_inner());
    known
        .iter()
        .find(|(k, _)| k.bind(py).is(&t))
        .map(|(_, kind)| *kind)
}

fn probe_kind(py: Python<'_>, s: &Bound<'_, PyAny>) -> Option<StreamKind> {
    let kind = if s.hasattr(pyo3::intern!(py, "cuda_stream")).unwrap_or(false) {
        StreamKind::Torch
    } else if s.hasattr(pyo3::intern!(py, "ptr")).unwrap_or(false) {
        StreamKind::Cupy
    } else {
        return None;
    };
    let t = s.get_type();
    let mut known = STREAM_TYPES.lock().unwrap_or_else(|p| p.into_inner());
    // A bounded memo: a program passing streams of many classes probes again past 64.
    if known.len() < 64 && !known.iter().any(|(k, _)| k.bind(py).is(&t)) {
        known.push((t.unbind(), kind));
    }
    Some(kind)
}
