//! `Jit`: the compiler with its caches, `get_jit()` (one per process, from the environment) and
//! the module-level `compile`.
//!
//! Compiling and loading release the GIL: other Python threads run while hipcc or hipRTC
//! works, and threads asking for the same source wait for one compile (the JIT's single
//! flight). Ctrl-C interrupts a compile (`crate::interrupt`): the compiler is killed and
//! `KeyboardInterrupt` raised.

use std::path::PathBuf;
use std::sync::Arc;

use std::sync::Mutex;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::jit::{CacheLocation, Jit as RsJit, JitOptions};
use hipjit::stream::BorrowedStream;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString};

use crate::background::{PendingCompile, SwitchingKernel};
use crate::compiled::Compiled;
use crate::errors;
use crate::kernel::Kernel;
use crate::options::{self, type_name, Keywords};
use crate::runtime;
use crate::stream;

/// The JIT compiler with its in-process and disk caches. Thread-safe; share one per process
/// (`get_jit()`).
#[pyclass(frozen, module = "hipjit")]
pub struct Jit {
    inner: Arc<RsJit>,
    /// The options it was made with, for the JITs of another compiler choice.
    options: JitOptions,
    /// JITs for a `compiler=` other than this one's, made on first use (same cache roots).
    others: Mutex<Vec<(CompilerChoice, Arc<RsJit>)>>,
}

/// The source as bytes, and as text when it is UTF-8 (to read kernel signatures).
fn source_of(source: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, Option<String>)> {
    if let Ok(s) = source.cast::<PyString>() {
        let s = s.to_cow()?.into_owned();
        return Ok((s.clone().into_bytes(), Some(s)));
    }
    if let Ok(b) = source.cast::<PyBytes>() {
        let bytes = b.as_bytes().to_vec();
        let text = String::from_utf8(bytes.clone()).ok();
        return Ok((bytes, text));
    }
    Err(PyTypeError::new_err(format!(
        "source: expected str or bytes, got {}",
        type_name(source)
    )))
}

fn cache_location(cache_dir: Option<&Bound<'_, PyAny>>) -> PyResult<CacheLocation> {
    let Some(c) = cache_dir.filter(|c| !c.is_none()) else {
        return Ok(CacheLocation::FromEnv);
    };
    if let Ok(b) = c.cast::<pyo3::types::PyBool>() {
        return if b.is_true() {
            Ok(CacheLocation::FromEnv)
        } else {
            Ok(CacheLocation::Disabled)
        };
    }
    // An empty path would be the current directory without saying so.
    let empty = |i: Option<usize>| {
        PyValueError::new_err(format!(
            "cache_dir{}: an empty path names no directory: give a directory (\".\" for the \
             current one), or False to disable the disk cache",
            i.map(|i| format!("[{i}]")).unwrap_or_default()
        ))
    };
    if let Ok(p) = c.extract::<PathBuf>() {
        if p.as_os_str().is_empty() {
            return Err(empty(None));
        }
        return Ok(CacheLocation::Roots(vec![p]));
    }
    if let Ok(ps) = c.extract::<Vec<PathBuf>>() {
        if ps.is_empty() {
            return Err(PyValueError::new_err(
                "cache_dir: the list of cache roots is empty (False disables the disk cache)",
            ));
        }
        if let Some(i) = ps.iter().position(|p| p.as_os_str().is_empty()) {
            return Err(empty(Some(i)));
        }
        return Ok(CacheLocation::Roots(ps));
    }
    Err(PyTypeError::new_err(format!(
        "cache_dir: expected None, False, a directory or a list of directories; got {}",
        type_name(c)
    )))
}

/// The device ordinal a `device=` argument names: None (torch's current device when torch has
/// initialised its GPU state, else 0), an int, `"cuda:N"`/`"cuda"`/`"hip:N"`, a
/// `torch.device`, or an object with an `id` (a CuPy device).
pub fn device_ordinal(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    let Some(d) = device.filter(|d| !d.is_none()) else {
        if stream::torch_gpu_ready(py) {
            if let Some(torch) = stream::torch(py) {
                return torch
                    .getattr("cuda")?
                    .call_method0("current_device")?
                    .extract();
            }
        }
        return Ok(0);
    };
    if let Ok(n) = d.extract::<i64>() {
        return u32::try_from(n)
            .map_err(|_| PyValueError::new_err(format!("device: {n} is not a device ordinal")));
    }
    let text = if let Ok(s) = d.extract::<String>() {
        Some(s)
    } else if d.hasattr("type")? && d.hasattr("index")? {
        let t: String = d.getattr("type")?.extract()?;
        let i: Option<u32> = d.getattr("index")?.extract()?;
        Some(match i {
            Some(i) => format!("{t}:{i}"),
            None => t,
        })
    } else if let Ok(id) = d.getattr("id") {
        return id.extract();
    } else {
        None
    };
    let Some(text) = text else {
        return Err(PyTypeError::new_err(format!(
            "device: expected None, an int, \"cuda:N\", a torch.device or a CuPy device; got {}",
            type_name(d)
        )));
    };
    match text.split_once(':') {
        None if matches!(text.as_str(), "cuda" | "hip" | "gpu") => device_ordinal(py, None),
        Some(("cuda" | "hip" | "gpu", n)) => n
            .parse()
            .map_err(|_| PyValueError::new_err(format!("device: {text:?} has no device index"))),
        _ => Err(PyValueError::new_err(format!(
            "device: {text:?} is not a GPU device (expected \"cuda:N\")"
        ))),
    }
}

/// A `compiler=` keyword: None (the JIT's choice: `HIPJIT_COMPILER`, else `"auto"`), or
/// `"auto"`, `"hipcc"`, `"hiprtc"`, `"nvcc"`, `"nvrtc"`.
fn compiler_choice(compiler: Option<&str>) -> PyResult<Option<CompilerChoice>> {
    compiler
        .map(|c| {
            c.parse::<CompilerChoice>()
                .map_err(|e| PyValueError::new_err(format!("compiler: {e}")))
        })
        .transpose()
}

/// The `std` and `compiler` keywords as text.
///
/// Errors: `TypeError` naming the keyword when one is not a str (or None).
fn text_keywords(
    std: Option<&Bound<'_, PyAny>>,
    compiler: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Option<String>, Option<String>)> {
    Ok((
        options::opt_str("std", std, "a C++ standard (\"c++17\", \"c++20\"...)")?,
        options::opt_str("compiler", compiler, &quoted_choices())?,
    ))
}

impl Jit {
    fn create(
        py: Python<'_>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        compiler: Option<&str>,
        max_cache_bytes: Option<u64>,
        extra_signature: Option<Vec<u8>>,
    ) -> PyResult<Jit> {
        let options = JitOptions {
            compiler: compiler_choice(compiler)?,
            cache: cache_location(cache_dir)?,
            max_cache_bytes,
            extra_signature: extra_signature.unwrap_or_default(),
            ..JitOptions::default()
        };
        let o = options.clone();
        let inner = py
            .detach(|| RsJit::new(o))
            .map_err(|e| errors::jit_error(py, e))?;
        Ok(Jit {
            inner: Arc::new(inner),
            options,
            others: Mutex::new(Vec::new()),
        })
    }

    /// The JIT that compiles with `compiler` (None: this one).
    fn with_compiler(&self, py: Python<'_>, compiler: Option<&str>) -> PyResult<Arc<RsJit>> {
        let Some(choice) = compiler_choice(compiler)? else {
            return Ok(Arc::clone(&self.inner));
        };
        if choice == self.inner.compiler_choice() {
            return Ok(Arc::clone(&self.inner));
        }
        let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, j)) = others.iter().find(|(c, _)| *c == choice) {
            return Ok(Arc::clone(j));
        }
        let options = JitOptions {
            compiler: Some(choice),
            ..self.options.clone()
        };
        let j = Arc::new(
            py.detach(|| RsJit::new(options))
                .map_err(|e| errors::jit_error(py, e))?,
        );
        others.push((choice, Arc::clone(&j)));
        Ok(j)
    }

    /// Compiles with the keywords; the GIL is released while the compiler runs.
    pub fn compile_with(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        k: &Keywords<'_, '_>,
        compiler: Option<&str>,
    ) -> PyResult<Compiled> {
        let (bytes, text) = source_of(source)?;
        let options = options::compile_options(k)?;
        if options.targets.is_empty() && options.sm_targets.is_empty() {
            return Err(PyValueError::new_err(
                "arch: no target given (e.g. \"gfx90a\" or \"sm_90\"); Jit.kernel takes the \
                 device's",
            ));
        }
        let jit = self.with_compiler(py, compiler)?;
        // A memory hit is served here (a microsecond); anything else runs on a worker thread
        // that Ctrl-C interrupts (the compiler killed, KeyboardInterrupt raised).
        let compiled = match jit.memory_hit(&bytes, &options) {
            Some(hit) => hit,
            None => crate::interrupt::run(py, move || jit.compile(&bytes, &options))?,
        }
        .map_err(|e| errors::jit_error(py, e))?;
        Ok(Compiled::new(compiled, text.as_deref()))
    }
}

#[pymethods]
impl Jit {
    /// `Jit(*, cache_dir=None, compiler=None, max_cache_bytes=None, extra_signature=None)`.
    ///
    /// `cache_dir`: None (`HIPJIT_CACHE_DIR`, else `~/.cache/hipjit`), False (no disk cache), a
    /// directory, or a list of them (the first written, the others read only).
    /// `compiler`: `"auto"`, `"hipcc"`, `"hiprtc"`, `"nvcc"` or `"nvrtc"`; None reads
    /// `HIPJIT_COMPILER`, else `"auto"` (hipjit picks, and `Compiled.compiler_reason` says why). `max_cache_bytes`: the size cap of the written root in bytes (`None`: `HIPJIT_CACHE_MAX_SIZE`, else 5 GiB; `2**64-1`: no cap).
    /// `extra_signature`: bytes hashed into every key (a generator's version, say).
    ///
    /// Raises `CompileError` when no compiler is found, `HipjitError` when the cache cannot be
    /// opened.
    #[new]
    #[pyo3(signature = (*, cache_dir=None, compiler=None, max_cache_bytes=None, extra_signature=None))]
    fn new(
        py: Python<'_>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        compiler: Option<&Bound<'_, PyAny>>,
        max_cache_bytes: Option<&Bound<'_, PyAny>>,
        extra_signature: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Jit> {
        let (_, compiler) = text_keywords(None, compiler)?;
        let max_cache_bytes = max_cache_bytes
            .filter(|m| !m.is_none())
            .map(|m| options::unsigned("max_cache_bytes", m, u64::MAX, "bytes"))
            .transpose()?;
        let extra_signature = options::bytes_arg("extra_signature", extra_signature)?;
        Jit::create(
            py,
            cache_dir,
            compiler.as_deref(),
            max_cache_bytes,
            extra_signature,
        )
    }

    /// `jit.compile(source, arch, *, defines=None, include_dirs=None, opt=3, std=None,
    /// flags=None, fast_math=False, compiler=None)`: compiles `source` (str or bytes) for `arch` (a target ID or
    /// a list of them), or returns the cached result. See `hipjit.compile`.
    #[pyo3(signature = (source, arch, *, defines=None, include_dirs=None, opt=None, std=None, flags=None, fast_math=None, compiler=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        arch: &Bound<'_, PyAny>,
        defines: Option<&Bound<'_, PyAny>>,
        include_dirs: Option<&Bound<'_, PyAny>>,
        opt: Option<&Bound<'_, PyAny>>,
        std: Option<&Bound<'_, PyAny>>,
        flags: Option<&Bound<'_, PyAny>>,
        fast_math: Option<&Bound<'_, PyAny>>,
        compiler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Compiled> {
        let (std, compiler) = text_keywords(std, compiler)?;
        let k = Keywords {
            arch: Some(arch),
            defines,
            include_dirs,
            opt,
            std: std.as_deref(),
            flags: options::flags(flags)?,
            fast_math: options::boolean("fast_math", fast_math)?,
        };
        self.compile_with(py, source, &k, compiler.as_deref())
    }

    /// `jit.kernel(source, name, *, device=None, defines=None, include_dirs=None, opt=3,
    /// std=None, flags=None, fast_math=False, compiler=None)`: the kernel `name` of `source`,
    /// compiled (by `compiler`, as for `compile`) for the
    /// device's target (or taken from a cache) and loaded on `device` (None: torch's current
    /// device when torch is in use, else device 0). Loaded libraries are cached per device and
    /// key: asking again returns the same loaded code.
    ///
    /// Raises `CompileError`, `LoadError` (no runtime, a load refused while the current stream
    /// is capturing, no kernel of that name), `TypeError`/`ValueError` for bad keywords.
    #[pyo3(signature = (source, name, *, device=None, defines=None, include_dirs=None, opt=None, std=None, flags=None, fast_math=None, compiler=None))]
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        name: &str,
        device: Option<&Bound<'_, PyAny>>,
        defines: Option<&Bound<'_, PyAny>>,
        include_dirs: Option<&Bound<'_, PyAny>>,
        opt: Option<&Bound<'_, PyAny>>,
        std: Option<&Bound<'_, PyAny>>,
        flags: Option<&Bound<'_, PyAny>>,
        fast_math: Option<&Bound<'_, PyAny>>,
        compiler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Kernel> {
        let (bytes, text) = source_of(source)?;
        let (std, compiler) = text_keywords(std, compiler)?;
        let compiler = compiler.as_deref();
        let k = Keywords {
            arch: None,
            defines,
            include_dirs,
            opt,
            std: std.as_deref(),
            flags: options::flags(flags)?,
            fast_math: options::boolean("fast_math", fast_math)?,
        };
        let options = options::compile_options(&k)?;
        let ordinal = device_ordinal(py, device)?;
        let dev = runtime::device(py, ordinal)?;
        // A load while the framework's current stream captures would invalidate the capture:
        // the stream is asked before the load (only a load, never a cache hit, is refused).
        let capture_stream = if stream::torch_gpu_ready(py) {
            Some(stream::torch_current_stream(py, dev.ordinal())?)
        } else {
            None
        };
        let jit = self.with_compiler(py, compiler)?;
        let load = || {
            jit.load_with(&dev, &bytes, &options, |co, d| {
                if let Some(raw) = capture_stream {
                    // SAFETY: torch's current stream of this device, alive while the
                    // caller holds it current; only asked whether it is capturing.
                    let s = unsafe { BorrowedStream::from_raw(d, raw as _) };
                    hipjit::graph::refuse_while_capturing(&s, "hipModuleLoadData")?;
                }
                co.load(d)
            })
        };
        // The options as `load_with` compiles them: the device's target when none is given.
        let mut for_device = options.clone();
        if for_device.targets.is_empty() && for_device.sm_targets.is_empty() {
            if let Some(t) = dev.target_id() {
                for_device.targets = vec![t.clone()];
            } else if let Some(sm) = dev.sm_target() {
                for_device.sm_targets = vec![sm];
            }
        }
        // A compile that is a memory hit loads here; any other runs on a worker thread that
        // Ctrl-C interrupts, as `compile` does (hipjit binds the device on each runtime call,
        // so the load may run there).
        let loaded = if jit.is_in_memory(&bytes, &for_device) {
            py.detach(load)
        } else {
            crate::interrupt::run(py, load)?
        }
        .map_err(|e| errors::jit_error(py, e))?;
        let kernel = loaded
            .library
            .kernel(name)
            .map_err(|e| errors::load_error(e.to_string()))?;
        Kernel::new(kernel, dev, text.as_deref(), loaded.compiled.key().to_hex())
    }

    /// `jit.compile_in_background(source, arch, *, defines=None, include_dirs=None, opt=3,
    /// std=None, flags=None, fast_math=False, compiler=None)`: `compile` on the JIT's
    /// background pool (2 threads), returning at once a `PendingCompile` (`ready()`,
    /// `wait(timeout=None)`, `result(timeout=None)`). A request already compiling is not
    /// queued twice; a memory hit is ready at once.
    ///
    /// Raises `TypeError`/`ValueError` for bad keywords; the compile's own errors are raised
    /// by `result()`.
    #[pyo3(signature = (source, arch, *, defines=None, include_dirs=None, opt=None, std=None, flags=None, fast_math=None, compiler=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile_in_background(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        arch: &Bound<'_, PyAny>,
        defines: Option<&Bound<'_, PyAny>>,
        include_dirs: Option<&Bound<'_, PyAny>>,
        opt: Option<&Bound<'_, PyAny>>,
        std: Option<&Bound<'_, PyAny>>,
        flags: Option<&Bound<'_, PyAny>>,
        fast_math: Option<&Bound<'_, PyAny>>,
        compiler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PendingCompile> {
        let (bytes, text) = source_of(source)?;
        let (std, compiler) = text_keywords(std, compiler)?;
        let k = Keywords {
            arch: Some(arch),
            defines,
            include_dirs,
            opt,
            std: std.as_deref(),
            flags: options::flags(flags)?,
            fast_math: options::boolean("fast_math", fast_math)?,
        };
        let options = options::compile_options(&k)?;
        let jit = self.with_compiler(py, compiler.as_deref())?;
        Ok(PendingCompile::new(
            jit.compile_in_background(&bytes, &options),
            text,
        ))
    }

    /// `jit.switching_kernel(fallback, source, name=None, *, defines=None, ...,
    /// compiler=None)`: starts compiling the kernel `name` (None: the fallback's name) of
    /// `source` for the fallback's device on the background pool, and returns a
    /// `SwitchingKernel`: called like a `Kernel`, it launches `fallback` until the specialised
    /// kernel is compiled and loaded, then that one, for good. The switch is refused (the
    /// fallback kept, `error` set) when the two kernels' arguments differ in count or size.
    #[pyo3(signature = (fallback, source, name=None, *, defines=None, include_dirs=None, opt=None, std=None, flags=None, fast_math=None, compiler=None))]
    #[allow(clippy::too_many_arguments)]
    fn switching_kernel(
        &self,
        py: Python<'_>,
        fallback: Py<Kernel>,
        source: &Bound<'_, PyAny>,
        name: Option<&str>,
        defines: Option<&Bound<'_, PyAny>>,
        include_dirs: Option<&Bound<'_, PyAny>>,
        opt: Option<&Bound<'_, PyAny>>,
        std: Option<&Bound<'_, PyAny>>,
        flags: Option<&Bound<'_, PyAny>>,
        fast_math: Option<&Bound<'_, PyAny>>,
        compiler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<SwitchingKernel> {
        let (bytes, text) = source_of(source)?;
        let (std, compiler) = text_keywords(std, compiler)?;
        let k = Keywords {
            arch: None,
            defines,
            include_dirs,
            opt,
            std: std.as_deref(),
            flags: options::flags(flags)?,
            fast_math: options::boolean("fast_math", fast_math)?,
        };
        let options = options::compile_options(&k)?;
        let jit = self.with_compiler(py, compiler.as_deref())?;
        let name = match name {
            Some(n) => n.to_owned(),
            None => fallback.get().parts().0.name().to_owned(),
        };
        Ok(SwitchingKernel::start(
            jit, fallback, bytes, text, &name, options,
        ))
    }

    /// Forgets every in-process result (the disk cache stays).
    fn clear_memory(&self) {
        self.inner.clear_memory();
    }

    /// The roots of the disk cache (the first is written), or an empty list.
    #[getter]
    fn cache_dirs(&self) -> Vec<PathBuf> {
        self.inner
            .disk_cache()
            .map(|d| d.roots().iter().map(|r| r.path.clone()).collect())
            .unwrap_or_default()
    }

    /// The compiler choice (`"auto"`, `"hipcc"`, `"hiprtc"`, `"nvcc"`, `"nvrtc"`).
    #[getter]
    fn compiler(&self) -> &'static str {
        self.inner.compiler_choice().as_str()
    }

    fn __repr__(&self) -> String {
        let dirs: Vec<String> = self
            .cache_dirs()
            .iter()
            .map(|d| format!("'{}'", d.display()))
            .collect();
        format!(
            "Jit(compiler='{}', cache_dirs=[{}])",
            self.inner.compiler_choice(),
            dirs.join(", ")
        )
    }
}

static PROCESS_JIT: PyOnceLock<Py<Jit>> = PyOnceLock::new();

/// `hipjit.get_jit()`: the process-wide `Jit`, made on the first call from the environment
/// (`HIPJIT_CACHE_DIR`, `HIPJIT_HIPCC`...).
///
/// Raises `CompileError` when no compiler is found.
#[pyfunction]
pub fn get_jit(py: Python<'_>) -> PyResult<Py<Jit>> {
    PROCESS_JIT
        .get_or_try_init(py, || {
            Jit::create(py, None, None, None, None).and_then(|j| Py::new(py, j))
        })
        .map(|j| j.clone_ref(py))
}

/// `hipjit.compile(source, arch, *, defines=None, include_dirs=None, opt=3, std=None,
/// flags=None, fast_math=False)`: compiles `source` (str or bytes) for `arch` (a target ID such
/// as `"gfx90a"` or `"gfx942:sramecc+:xnack-"`, or a list of them) with the process-wide `Jit`,
/// or returns the cached result. `defines`: a dict (`{"N": 256, "DEBUG": None}`) or a list of
/// `"NAME=VALUE"`; `include_dirs`: a list of directories; `opt`: 0-3, `"s"` or `"z"`; `std`:
/// `"c++17"` (default), `"c++20"`...; `flags`: further compiler flags (checked: flags that
/// change the output or read files the cache key does not see are refused); `compiler`:
/// None (the JIT's: `HIPJIT_COMPILER`, else `"auto"`), `"auto"`, `"hipcc"`, `"hiprtc"`,
/// `"nvcc"` or `"nvrtc"`.
///
/// Raises `CompileError` (with `diagnostics`), `TypeError`/`ValueError` for bad arguments.
#[pyfunction]
#[pyo3(signature = (source, arch, *, defines=None, include_dirs=None, opt=None, std=None, flags=None, fast_math=None, compiler=None))]
#[allow(clippy::too_many_arguments)]
pub fn compile(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    arch: &Bound<'_, PyAny>,
    defines: Option<&Bound<'_, PyAny>>,
    include_dirs: Option<&Bound<'_, PyAny>>,
    opt: Option<&Bound<'_, PyAny>>,
    std: Option<&Bound<'_, PyAny>>,
    flags: Option<&Bound<'_, PyAny>>,
    fast_math: Option<&Bound<'_, PyAny>>,
    compiler: Option<&Bound<'_, PyAny>>,
) -> PyResult<Compiled> {
    let jit = get_jit(py)?;
    let (std, compiler) = text_keywords(std, compiler)?;
    let k = Keywords {
        arch: Some(arch),
        defines,
        include_dirs,
        opt,
        std: std.as_deref(),
        flags: options::flags(flags)?,
        fast_math: options::boolean("fast_math", fast_math)?,
    };
    jit.get().compile_with(py, source, &k, compiler.as_deref())
}

/// The compiler choices as the type errors name them: `"auto", "hipcc", ... or "nvrtc"`,
/// from the one list the library parses (`hipjit::compiler::kind::choice_names`).
fn quoted_choices() -> String {
    let mut quoted: Vec<String> = hipjit::compiler::kind::choice_names()
        .into_iter()
        .map(|c| format!("\"{c}\""))
        .collect();
    let last = quoted.pop().unwrap_or_default();
    format!("{} or {last}", quoted.join(", "))
}
