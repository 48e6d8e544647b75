//! The process's GPU runtime, opened on first use, and its devices.
//!
//! `Runtime::load` prefers a runtime already loaded in the process (on ROCm, PyTorch ships its
//! own `libamdhip64`; on NVIDIA, the driver `libcuda.so.1` is one per process), so a framework
//! imported first shares its runtime with hipjit. When hipjit opened its runtime before the
//! framework loaded another copy, the two copies' streams and memory are not each other's: a
//! launch on a framework's stream is then refused ([`check_single_copy`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use hipjit::device::Device;
use hipjit::runtime::{Platform, Runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

struct State {
    runtime: Runtime,
    devices: Vec<Option<Device>>,
    /// The HIP runtime files mapped right after hipjit opened its runtime (AMD only).
    copies_at_load: HashSet<PathBuf>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's runtime: opened on the first call (`Runtime::load`, the GIL released), the
/// same afterwards. A failed open is not remembered: the next call tries again.
///
/// Errors: `LoadError` with hipjit's message (every candidate tried).
pub fn runtime(py: Python<'_>) -> PyResult<Runtime> {
    if let Some(s) = &*lock() {
        return Ok(s.runtime.clone());
    }
    let rt = py
        .detach(Runtime::load)
        .map_err(|e| errors::load_error(format!("cannot open the GPU runtime: {e}")))?;
    let mut state = lock();
    if let Some(s) = &*state {
        return Ok(s.runtime.clone());
    }
    *state = Some(State {
        copies_at_load: hip_copies(),
        runtime: rt.clone(),
        devices: Vec::new(),
    });
    Ok(rt)
}

/// Device `ordinal` of the process's runtime (properties read once per device).
///
/// Errors: `LoadError` when the runtime cannot be opened; `ValueError` for an ordinal the
/// runtime does not have.
pub fn device(py: Python<'_>, ordinal: u32) -> PyResult<Device> {
    let rt = runtime(py)?;
    if let Some(Some(d)) = lock()
        .as_ref()
        .and_then(|s| s.devices.get(ordinal as usize))
    {
        return Ok(d.clone());
    }
    let count = rt
        .device_count()
        .map_err(|e| errors::load_error(format!("cannot count the devices: {e}")))?;
    if ordinal >= count {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "device {ordinal} does not exist: the runtime {} has {count} device(s)",
            rt.path().display()
        )));
    }
    let d = py
        .detach(|| rt.device(ordinal))
        .map_err(|e| errors::load_error(format!("cannot open device {ordinal}: {e}")))?;
    let mut state = lock();
    if let Some(s) = state.as_mut() {
        if s.devices.len() <= ordinal as usize {
            s.devices.resize(ordinal as usize + 1, None);
        }
        s.devices[ordinal as usize] = Some(d.clone());
    }
    Ok(d)
}

/// The files of the HIP runtimes (`libamdhip64.so*`) mapped into the process, from
/// `/proc/self/maps`.
fn hip_copies() -> HashSet<PathBuf> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return HashSet::new();
    };
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            std::path::Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libamdhip64.so"))
        })
        .map(PathBuf::from)
        .collect()
}

/// The loader's count of objects loaded so far when [`check_single_copy`] last looked, and
/// what it found.
static SINGLE_COPY: Mutex<(u64, Option<Result<(), String>>)> = Mutex::new((u64::MAX, None));

/// The dynamic loader's count of objects loaded into the process so far (`dlpi_adds` of
/// `dl_iterate_phdr`): it changes when a library is loaded, so the mapped runtimes are read
/// again only then.
fn loader_adds() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr hands a valid info pointer for the call; `data` is the u64
        // below.
        unsafe { *(data as *mut u64) = (*info).dlpi_adds };
        1
    }
    let mut adds: u64 = 0;
    // SAFETY: the callback only reads `info` and writes `adds`, and stops at the first object.
    unsafe { libc::dl_iterate_phdr(Some(first), (&mut adds as *mut u64).cast()) };
    adds
}

/// Refuses a launch on a framework's stream when the process holds another copy of the HIP
/// runtime than hipjit's (hipjit opened its runtime before the framework loaded its own).
/// The mapped runtimes are read again only when a library was loaded since the last check
/// (one `dl_iterate_phdr` step otherwise); on NVIDIA the driver is one library per process
/// and nothing is checked.
///
/// Errors: `LaunchError` naming both copies.
pub fn check_single_copy(rt: &Runtime) -> PyResult<()> {
    if rt.platform() != Platform::Amd {
        return Ok(());
    }
    let adds = loader_adds();
    let mut cached = SINGLE_COPY.lock().unwrap_or_else(|p| p.into_inner());
    if cached.0 != adds || cached.1.is_none() {
        let at_load = lock()
            .as_ref()
            .map(|s| s.copies_at_load.clone())
            .unwrap_or_default();
        let mut others: Vec<PathBuf> = hip_copies().difference(&at_load).cloned().collect();
        others.sort();
        let result = if others.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "refused: hipjit opened the HIP runtime {} before another copy was loaded in the \
                 process ({}); a stream of that copy (torch's current stream) is not a stream of \
                 hipjit's runtime. Import torch before using hipjit, or set HIPJIT_HIP_LIBRARY to \
                 torch's libamdhip64",
                rt.path().display(),
                others
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        *cached = (adds, Some(result));
    }
    match &cached.1 {
        Some(Err(m)) => Err(errors::launch_error(m)),
        _ => Ok(()),
    }
}

/// `hipjit.runtime_info()`: opens the runtime (if not yet) and describes it: `platform`
/// (`"amd"` or `"nvidia"`), `path`, `found` (how it was found), `version` (`"major.minor.patch"`
/// or None) and `device_count`.
///
/// Errors: `LoadError` when no runtime can be opened.
#[pyfunction]
pub fn runtime_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let rt = runtime(py)?;
    let d = PyDict::new(py);
    d.set_item(
        "platform",
        match rt.platform() {
            Platform::Amd => "amd",
            Platform::Nvidia => "nvidia",
        },
    )?;
    d.set_item("path", rt.path().display().to_string())?;
    d.set_item("found", rt.found().to_string())?;
    d.set_item(
        "version",
        rt.version()
            .map(|v| format!("{}.{}.{}", v.major(), v.minor(), v.patch())),
    )?;
    d.set_item("device_count", rt.device_count().ok())?;
    Ok(d)
}
