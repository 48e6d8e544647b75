//! The process's GPU runtime, opened on first use, and its devices.
//!
//! The runtime is found as `Runtime::load` finds it, with this interpreter's `sys.prefix` as
//! the active Python environment when `VIRTUAL_ENV` is unset (its packages' ROCm: TheRock's
//! `_rocm_sdk_core`, `torch/lib`).
//!
//! `Runtime::load` prefers a runtime already loaded in the process (on ROCm, PyTorch ships its
//! own `libamdhip64`; on NVIDIA, the driver `libcuda.so.1` is one per process), so a framework
//! imported first shares its runtime with hipjit. When hipjit opened its runtime before the
//! framework loaded another copy, the two copies' streams and memory are not each other's: a
//! launch on a torch stream is then refused ([`check_single_copy`]). Other copies hipjit
//! itself loads (HIP 5.x keeps hipRTC inside `libamdhip64.so.5`) are not torch's and do not
//! count.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hipjit::device::Device;
use hipjit::runtime::{Platform, Runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

struct State {
    runtime: Runtime,
    devices: Vec<Option<Device>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// This interpreter's environment (`sys.prefix`), whose packages' ROCm (TheRock's
/// `_rocm_sdk_core`, `torch/lib`: `hipjit::sys::discovery::python`) the runtime search takes
/// as the active environment's when `VIRTUAL_ENV` is unset (a virtual environment's `python`
/// run without `activate`, a system or conda interpreter). `None` when it cannot be read.
fn interpreter_prefix(py: Python<'_>) -> Option<std::ffi::OsString> {
    let prefix: PathBuf = py
        .import("sys")
        .and_then(|sys| sys.getattr("prefix"))
        .and_then(|p| p.extract())
        .ok()?;
    Some(prefix.into_os_string())
}

/// The process's runtime: opened on the first call (`Runtime::load`, the GIL released), the
/// same afterwards. A failed open is not remembered: the next call tries again.
///
/// Errors: `LoadError` with hipjit's message (every candidate tried).
pub fn runtime(py: Python<'_>) -> PyResult<Runtime> {
    if let Some(s) = &*lock() {
        return Ok(s.runtime.clone());
    }
    let prefix = interpreter_prefix(py);
    let env = move |name: &str| match std::env::var_os(name) {
        None if name == hipjit::sys::discovery::python::VIRTUAL_ENV => prefix.clone(),
        value => value,
    };
    let rt = py
        .detach(|| Runtime::load_with_env(&env))
        .map_err(|e| errors::load_error(format!("cannot open the GPU runtime: {e}")))?;
    let mut state = lock();
    if let Some(s) = &*state {
        return Ok(s.runtime.clone());
    }
    *state = Some(State {
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

/// The library file that defines the address `p` (`dladdr`).
fn file_of(p: *const libc::c_void) -> Option<PathBuf> {
    // SAFETY: Dl_info is plain data (pointers and integers); all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is a valid out pointer.
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}

/// The HIP runtime file torch's HIP library (`libtorch_hip.so`, mapped into the process)
/// resolves its calls to: `hipModuleLaunchKernel` looked up through that library's handle,
/// which searches the library and then its dependencies, as its own calls do. None when torch's
/// HIP library is not loaded.
fn torch_hip_runtime() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libtorch_hip.so"))
        })?;
    let c = std::ffi::CString::new(lib).ok()?;
    // SAFETY: RTLD_NOLOAD only returns the handle of the library already mapped; it is never
    // closed (the reference taken is the process's for its lifetime, like torch's own).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    // SAFETY: a valid handle and a NUL-terminated name.
    let sym = unsafe { libc::dlsym(h, c"hipModuleLaunchKernel".as_ptr()) };
    if sym.is_null() {
        return None;
    }
    file_of(sym)
}

/// Whether two paths name the same file (device and inode), symbolic links followed.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// The loader's count of objects loaded so far when [`check_single_copy`] last looked, and
/// what it found.
static SINGLE_COPY: Mutex<(u64, Option<Result<(), String>>)> = Mutex::new((u64::MAX, None));

/// The dynamic loader's count of objects loaded into the process so far (`dlpi_adds` of
/// `dl_iterate_phdr`): it changes when a library is loaded, so the check is made again only
/// then.
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

/// Refuses a launch on a torch stream when torch's HIP library calls another copy of the HIP
/// runtime than hipjit's (hipjit opened its runtime before torch loaded its own): the streams
/// of one copy are not streams of the other. The check is made again only when a library was
/// loaded since the last one (one `dl_iterate_phdr` step otherwise). On NVIDIA the driver is
/// one library per process and nothing is checked.
///
/// Errors: `LaunchError` naming both copies.
pub fn check_single_copy(rt: &Runtime) -> PyResult<()> {
    if rt.platform() != Platform::Amd {
        return Ok(());
    }
    let adds = loader_adds();
    let mut cached = SINGLE_COPY.lock().unwrap_or_else(|p| p.into_inner());
    if cached.0 != adds || cached.1.is_none() {
        let result = match torch_hip_runtime() {
            Some(torch) if !same_file(&torch, rt.path()) => Err(format!(
                "refused: hipjit opened the HIP runtime {} and torch calls another copy, {}; a \
                 stream of torch's copy is not a stream of hipjit's. Import torch before using \
                 hipjit (hipjit then takes torch's copy), or set HIPJIT_HIP_LIBRARY to {}",
                rt.path().display(),
                torch.display(),
                torch.display()
            )),
            _ => Ok(()),
        };
        *cached = (adds, Some(result));
    }
    match &cached.1 {
        Some(Err(m)) => Err(errors::launch_refused(m)),
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
