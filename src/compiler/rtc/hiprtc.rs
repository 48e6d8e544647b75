//! hipRTC, HIP's in-process runtime compiler: HIP C++ source to an AMDGPU code object without
//! starting a process.
//!
//! The library is opened with `dlopen` and every entry point resolved with `dlsym`, like the HIP
//! runtime ([`crate::safe::runtime`]); a library without one of them is refused by name
//! ([`RtcError::MissingSymbol`]). Where it is looked for, in order:
//! 1. a path given to [`HipRtc::open_path`], or the `HIPJIT_HIPRTC_LIBRARY` variable;
//! 2. beside the HIP runtime hipjit loaded (the `runtime_library` argument of [`HipRtc::open`]):
//!    `libhiprtc.so.7`, `libhiprtc.so.6`, `libhiprtc.so` in its directory, then the runtime
//!    itself, which is where HIP 5.x keeps hipRTC (`libamdhip64.so.5` exports
//!    `hiprtcCreateProgram`);
//! 3. `lib/` of each Python package of the active environment that holds ROCm
//!    (`hip_sys::discovery::python`: `_rocm_sdk_core`, `torch`, `triton/third_party/rocm` under
//!    `VIRTUAL_ENV`, else under the environment of `HIPJIT_PYTHON`): `libhiprtc.so.7`,
//!    `libhiprtc.so.6`, `libhiprtc.so`, then the runtimes that hold hipRTC themselves,
//!    `libamdhip64.so.5` and `libamdhip64.so` (pytorch-triton-rocm 2.x ships HIP 5.4 under that
//!    name);
//! 4. the dynamic loader: `libhiprtc.so.7`, `libhiprtc.so.6`, `libhiprtc.so`,
//!    `libamdhip64.so.5`.
//!
//! Concurrency: hipRTC 5.2.3 is not safe to call from two threads at once (measured: SIGSEGV,
//! heap corruption, LLVM's "Option registered more than once" abort), and 6.4.3 serialises
//! inside the library anyway, so every program hipjit compiles with hipRTC is created, compiled,
//! read and destroyed under one process-wide lock. Another hipRTC user in the same process (a
//! framework's own JIT) does not take that lock and cannot be coordinated with.
//!
//! Options are clang's as hipRTC forwards them: `--gpu-architecture=<target ID>` selects the
//! target ([`arch_option`]); the output is a raw ELF code object.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::comgr::Comgr;
use super::{RtcError, RtcInput, RtcOutput, Symbols};
use crate::compiler::depfile;
use crate::compiler::diagnostics;
// The parent module by its path: Rust 1.87 (the MSRV) refuses `use super::{self as rtc}`.
use crate::compiler::rtc;

use crate::fs;
use crate::target::amdgpu::{FeatureSetting, TargetId};

/// The variable naming the hipRTC library explicitly.
pub const HIPRTC_LIBRARY_ENV: &str = "HIPJIT_HIPRTC_LIBRARY";

/// hipRTC's own library names, newest first; HIP 5.x has none (hipRTC is inside the runtime).
pub const HIPRTC_SONAMES: &[&str] = &["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so"];

/// The HIP 5.x runtime, which exports hipRTC itself.
const RUNTIME_WITH_HIPRTC: &str = "libamdhip64.so.5";

/// How candidates from a Python package are described.
const FROM_PYTHON: &str = "Python package";

/// The `lib/` directories of the Python packages that hold ROCm in the active environment
/// (`hip_sys::discovery::python::packages`), with each package's description, in order.
fn python_lib_dirs() -> Vec<(PathBuf, String)> {
    let env = hip_sys::discovery::ProcessEnv;
    hip_sys::discovery::python::packages(&env)
        .into_iter()
        .map(|p| {
            (
                p.root.join("lib"),
                format!("{FROM_PYTHON} {} of {}", p.name, p.source),
            )
        })
        .filter(|(lib, _)| crate::fs::observe::is_dir(lib))
        .collect()
}

/// The files tried in a Python package's `lib/`, in order.
fn python_candidates(lib: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    HIPRTC_SONAMES
        .iter()
        .chain([RUNTIME_WITH_HIPRTC, "libamdhip64.so"].iter())
        .map(move |name| lib.join(name))
}

const COMPILER: &str = "hipRTC";

static SYMBOLS: Symbols = Symbols {
    create: c"hiprtcCreateProgram",
    compile: c"hiprtcCompileProgram",
    log_size: c"hiprtcGetProgramLogSize",
    log: c"hiprtcGetProgramLog",
    output_size: c"hiprtcGetCodeSize",
    output: c"hiprtcGetCode",
    destroy: c"hiprtcDestroyProgram",
    error_string: c"hiprtcGetErrorString",
    version: c"hiprtcVersion",
};

/// Held around every hipRTC program's life (see the module documentation).
static HIPRTC_LOCK: Mutex<()> = Mutex::new(());

/// A loaded hipRTC library. Opening the same file twice gives the same library (the dynamic
/// loader shares it); it is never unloaded.
pub struct HipRtc {
    lib: rtc::Loaded,
    /// The comgr this hipRTC compiles through, read once ([`HipRtc::comgr`]).
    comgr: OnceLock<Result<Arc<Comgr>, String>>,
}

impl std::fmt::Debug for HipRtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipRtc")
            .field("path", &self.lib.path)
            .field("found", &self.lib.found)
            .finish_non_exhaustive()
    }
}

/// `--gpu-architecture=<target ID>`, hipRTC's option selecting the target (features included,
/// e.g. `gfx90a:xnack-`).
pub fn arch_option(target: &TargetId) -> String {
    format!("--gpu-architecture={target}")
}

/// HIP's major version of the hipRTC in `library`, from its file name: `libhiprtc.so.N...`
/// gives N, `libamdhip64.so.5...` (which holds hipRTC in HIP 5.x) gives 5; `None` for a file
/// named otherwise.
pub fn hip_major_of(library: &Path) -> Option<u32> {
    let name = library.file_name()?.to_str()?;
    let rest = name
        .strip_prefix("libhiprtc.so.")
        .or_else(|| name.strip_prefix("libamdhip64.so."))?;
    rest.split('.').next()?.parse().ok()
}

/// HIP's major and minor version of the hipRTC in `library`, from its file name, else (no
/// minor version in it) from the name of the file its symbolic links lead to:
/// `libhiprtc.so.6.4.43484` gives (6, 4), `libamdhip64.so.5` linked to
/// `libamdhip64.so.5.2.21153` gives (5, 2), `libhiprtc.so.6` that is no link (6, `None`);
/// `None` for a file named otherwise.
pub fn hip_version_of(library: &Path) -> Option<(u32, Option<u32>)> {
    fn of_name(library: &Path) -> Option<(u32, Option<u32>)> {
        let name = library.file_name()?.to_str()?;
        let rest = name
            .strip_prefix("libhiprtc.so.")
            .or_else(|| name.strip_prefix("libamdhip64.so."))?;
        let mut parts = rest.split('.');
        let major = parts.next()?.parse().ok()?;
        Some((major, parts.next().and_then(|m| m.parse().ok())))
    }
    let named = of_name(library)?;
    if named.1.is_some() {
        return Some(named);
    }
    let resolved = crate::fs::observe::canonicalize(library)
        .ok()
        .and_then(|r| of_name(&r))
        .filter(|r| r.0 == named.0 && r.1.is_some());
    Some(resolved.unwrap_or(named))
}

/// HIP's major version of `library`, a loaded HIP runtime (named `libamdhip64.so...`) that
/// holds hipRTC: its `hipRuntimeGetVersion` (`major * 10_000_000 + ...`), which needs no
/// device. `None` for another file, or when the call fails.
fn runtime_major(library: &Path) -> Option<u32> {
    runtime_version(library).map(|(major, _)| major)
}

/// HIP's major and minor version of `library`, a loaded HIP runtime (named
/// `libamdhip64.so...`) that holds hipRTC: its `hipRuntimeGetVersion`
/// (`major * 10_000_000 + minor * 100_000 + patch`, hip_version.h's `HIP_VERSION`), which
/// needs no device. `None` for another file, or when the call fails.
fn runtime_version(library: &Path) -> Option<(u32, u32)> {
    let name = library.file_name()?.to_str()?;
    if !name.starts_with("libamdhip64.so") {
        return None;
    }
    // Already loaded as this hipRTC: RTLD_NOLOAD only finds it.
    let handle = crate::safe::runtime::loader::open(library.as_os_str(), true).ok()?;
    type GetVersion = unsafe extern "C" fn(*mut std::ffi::c_int) -> std::ffi::c_int;
    // SAFETY: `hipError_t hipRuntimeGetVersion(int *runtimeVersion)` (hip_runtime_api.h).
    let get = unsafe { handle.sym::<GetVersion>(c"hipRuntimeGetVersion") }?;
    let mut v: std::ffi::c_int = 0;
    // SAFETY: `v` is valid for one write.
    let rc = unsafe { get(&mut v) };
    (rc == 0 && v > 0).then_some(((v / 10_000_000) as u32, ((v / 100_000) % 100) as u32))
}

impl HipRtc {
    /// Opens hipRTC from `HIPJIT_HIPRTC_LIBRARY`, else beside `runtime_library` (the file the
    /// HIP runtime was loaded from, [`crate::safe::runtime::Runtime::path`]), else through the dynamic
    /// loader; see the module documentation for the order.
    ///
    /// Errors: [`RtcError::Open`] or [`RtcError::MissingSymbol`] for a library named by the
    /// variable; [`RtcError::NotFound`] listing every candidate and why it failed.
    pub fn open(runtime_library: Option<&Path>) -> Result<HipRtc, RtcError> {
        if let Some(path) = std::env::var_os(HIPRTC_LIBRARY_ENV).filter(|v| !v.is_empty()) {
            return Self::open_named(Path::new(&path), HIPRTC_LIBRARY_ENV);
        }
        let mut tried = Vec::new();
        if let Some(runtime) = runtime_library {
            let dir = runtime.parent().unwrap_or(Path::new("."));
            let beside = HIPRTC_SONAMES
                .iter()
                .map(|name| dir.join(name))
                .chain(std::iter::once(runtime.to_path_buf()));
            for candidate in beside {
                if !crate::fs::observe::exists(&candidate) {
                    continue;
                }
                match Self::try_open(candidate.as_os_str(), "beside the HIP runtime") {
                    Ok(mut rtc) => {
                        rtc.lib.tried = tried;
                        return Ok(rtc);
                    }
                    Err(why) => {
                        tried.push((rtc::describe(&candidate, "beside the HIP runtime"), why))
                    }
                }
            }
        }
        for (lib, from) in python_lib_dirs() {
            for candidate in python_candidates(&lib) {
                if !crate::fs::observe::exists(&candidate) {
                    continue;
                }
                match Self::try_open(candidate.as_os_str(), &from) {
                    Ok(mut rtc) => {
                        rtc.lib.tried = tried;
                        return Ok(rtc);
                    }
                    Err(why) => tried.push((rtc::describe(&candidate, &from), why)),
                }
            }
        }
        for name in HIPRTC_SONAMES
            .iter()
            .chain(std::iter::once(&RUNTIME_WITH_HIPRTC))
        {
            match Self::try_open(OsStr::new(name), "dynamic loader") {
                Ok(mut rtc) => {
                    rtc.lib.tried = tried;
                    return Ok(rtc);
                }
                Err(why) => tried.push((format!("{name} (dynamic loader)"), why)),
            }
        }
        Err(RtcError::NotFound {
            compiler: COMPILER,
            tried,
        })
    }

    /// What [`HipRtc::open`] with `runtime_library` reads and where it looks, for remembering
    /// its end ([`crate::compiler::library_search`]): `HIPJIT_HIPRTC_LIBRARY` and the file it names, the
    /// runtime's path and its directory, the Python environment's variables and the places
    /// its packages are found in (the dynamic loader's part is added there). Loads nothing
    /// and starts no interpreter.
    pub fn search(
        runtime_library: Option<&Path>,
    ) -> crate::compiler::library_search::LibrarySearch {
        let var = std::env::var_os(HIPRTC_LIBRARY_ENV).filter(|v| !v.is_empty());
        let mut places = Vec::new();
        if let Some(v) = &var {
            places.push(PathBuf::from(v));
        }
        if let Some(runtime) = runtime_library {
            places.push(runtime.to_path_buf());
            places.push(runtime.parent().unwrap_or(Path::new(".")).to_path_buf());
        }
        let env = hip_sys::discovery::ProcessEnv;
        let python = hip_sys::discovery::python::PYTHON_ENV;
        let virtual_env = std::env::var_os(hip_sys::discovery::python::VIRTUAL_ENV);
        let interpreter = std::env::var_os(python);
        // A bare interpreter name is looked up on PATH.
        let path = interpreter
            .as_ref()
            .filter(|v| !v.is_empty())
            .and_then(|_| std::env::var_os("PATH"));
        places.extend(hip_sys::discovery::python::watched_places(&env));
        for (lib, _) in python_lib_dirs() {
            places.extend(python_candidates(&lib));
            places.push(lib);
        }
        crate::compiler::library_search::LibrarySearch::new(
            crate::compiler::kind::CompilerKind::HipRtc,
            &[
                (HIPRTC_LIBRARY_ENV, var.as_deref()),
                ("runtime", runtime_library.map(Path::as_os_str)),
                (
                    hip_sys::discovery::python::VIRTUAL_ENV,
                    virtual_env.as_deref(),
                ),
                (python, interpreter.as_deref()),
                ("PATH for the interpreter", path.as_deref()),
            ],
            places,
        )
    }

    /// Opens hipRTC from `path` exactly.
    ///
    /// Errors: [`RtcError::Open`] when dlopen fails, [`RtcError::MissingSymbol`] naming the first
    /// hipRTC entry point the file does not export.
    pub fn open_path(path: &Path) -> Result<HipRtc, RtcError> {
        Self::open_named(path, "explicit path")
    }

    fn open_named(path: &Path, from: &str) -> Result<HipRtc, RtcError> {
        rtc::Loaded::open_named(COMPILER, &SYMBOLS, path, from).map(HipRtc::new)
    }

    /// One candidate of the search: the reason it failed, as text, on failure.
    fn try_open(name: &OsStr, from: &str) -> Result<HipRtc, String> {
        rtc::Loaded::try_open(&SYMBOLS, name, from).map(HipRtc::new)
    }

    fn new(lib: rtc::Loaded) -> HipRtc {
        HipRtc {
            lib,
            comgr: OnceLock::new(),
        }
    }

    /// The comgr this hipRTC compiles through and the processors it knows ([`Comgr`]), read
    /// once per [`HipRtc`]; this loads comgr into the process.
    ///
    /// Errors: a text saying why comgr could not be found or asked.
    pub fn comgr(&self) -> Result<&Comgr, &str> {
        // Remembered per process by the library's path: the library loaded in this process
        // under a path stays what it is (the dynamic loader hands the same one out again), and
        // finding its comgr reads the whole library file (3.5 ms for HIP 5.2.3's runtime,
        // measured), which each `Jit`'s first compile would otherwise pay. A failure is not
        // remembered.
        static FOUND: OnceLock<Mutex<HashMap<PathBuf, Arc<Comgr>>>> = OnceLock::new();
        self.comgr
            .get_or_init(|| {
                let found = FOUND.get_or_init(Default::default);
                if let Some(c) = found.lock().get(&self.lib.path) {
                    return Ok(Arc::clone(c));
                }
                let c = Arc::new(Comgr::for_hiprtc(&self.lib.path)?);
                found.lock().insert(self.lib.path.clone(), Arc::clone(&c));
                Ok(c)
            })
            .as_ref()
            .map(|c| &**c)
            .map_err(String::as_str)
    }

    /// Checks, without compiling, that this hipRTC compiles for `target` (a target ID, as
    /// `--gpu-architecture` takes it): it parses as a target ID, its processor is one comgr
    /// knows, and a feature written (`:xnack+`) is one hipjit knows the processor to have.
    /// [`HipRtc::compile`] checks every target option this way, since hipRTC aborts the
    /// process otherwise (see [`crate::compiler::comgr`]).
    ///
    /// Errors: [`RtcError::UnsupportedTarget`] naming the library, how it was found, the
    /// reason and the candidates tried before it.
    pub fn check_target(&self, target: &str) -> Result<(), RtcError> {
        let unsupported = |reason: String| RtcError::UnsupportedTarget {
            library: self.lib.path.clone(),
            found: self.lib.found.clone(),
            target: target.to_owned(),
            reason,
            tried: self.lib.tried.clone(),
        };
        let id = TargetId::parse(target).map_err(|e| unsupported(e.to_string()))?;
        let comgr = self.comgr().map_err(|why| {
            unsupported(format!(
                "the processors it compiles for cannot be read ({why}), and hipRTC aborts the \
                 process on one it does not know"
            ))
        })?;
        if !comgr.knows(id.processor()) {
            return Err(unsupported(format!(
                "its comgr {} does not know {} (it knows {})",
                comgr.path.display(),
                id.processor(),
                comgr.processors.join(" ")
            )));
        }
        let written = |f: FeatureSetting| matches!(f, FeatureSetting::On | FeatureSetting::Off);
        let features_written = written(id.xnack()) || written(id.sramecc());
        if features_written && id.e_flags_mach().is_none() {
            return Err(unsupported(format!(
                "hipjit does not know which target features {} has, and hipRTC aborts the \
                 process on one it lacks; name the processor alone",
                id.processor()
            )));
        }
        Ok(())
    }

    /// The file the library was loaded from (`dladdr` of `hiprtcCreateProgram`).
    pub fn path(&self) -> &Path {
        &self.lib.path
    }

    /// How the library was found: `HIPJIT_HIPRTC_LIBRARY`, `explicit path`, `beside the HIP
    /// runtime` or `dynamic loader`.
    pub fn found(&self) -> &str {
        &self.lib.found
    }

    /// The files that decide what this hipRTC compiles, for the compiler identity of the cache
    /// key: the library itself (for HIP 5.x the runtime that holds it), the code-object
    /// compiler it loads (`libamd_comgr`) with LLVM (`libLLVM`, `libclang-cpp`, `liblld` where
    /// split), hipRTC's builtin headers (`libhiprtc-builtins`, beside the library) and, for
    /// HIP 5.x, the device libraries its compiles link ([`hip5_device_library_dir`]). comgr
    /// is loaded by hipRTC at its first compile, so this runs one small compile first when none
    /// has run in the process (its result is ignored: a target the library cannot compile still
    /// loads comgr). Each file once, symlinks resolved, sorted.
    pub fn identity_files(&self) -> Vec<PathBuf> {
        static PROBED: std::sync::Once = std::sync::Once::new();
        PROBED.call_once(|| {
            // A processor this comgr knows (the check in `compile` refuses any other).
            let Some(processor) = self.comgr().ok().and_then(|c| {
                ["gfx90a", "gfx942", "gfx1100"]
                    .into_iter()
                    .find(|p| c.knows(p))
                    .or(c.processors.first().map(String::as_str))
            }) else {
                return;
            };
            let options = [format!("--gpu-architecture={processor}")];
            let _ = self.compile(&RtcInput {
                source: b"extern \"C\" __global__ void hipjit_identity_probe() {}\n",
                name: "hipjit_identity_probe.hip",
                headers: &[],
                include_dirs: &[],
                options: &options,
            });
        });
        let mut files = vec![self.lib.path.clone()];
        // HIP 5.x: the device libraries its compiles link ([`hip5_parity_options`]).
        if self.hip_major() == Some(5) {
            if let Some(dir) = hip5_device_library_dir(&self.lib.path) {
                if let Ok(entries) = crate::fs::observe::read_dir(&dir) {
                    let mut bc: Vec<PathBuf> = entries
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "bc"))
                        .collect();
                    bc.sort();
                    files.extend(bc);
                }
            }
        }
        rtc::identity_files(
            files,
            &[
                "libamd_comgr",
                "libLLVM",
                "libclang-cpp",
                "liblld",
                "libhiprtc-builtins",
            ],
            self.lib.path.parent(),
            &["libhiprtc-builtins.so."],
        )
    }

    /// HIP's major version of this hipRTC, from the library's file name (`hiprtcVersion` does
    /// not tell): `libhiprtc.so.N...` gives N, the hipRTC inside `libamdhip64.so.5...` gives 5;
    /// a runtime holding hipRTC under an unversioned name (`libamdhip64.so`, as
    /// pytorch-triton-rocm and PyTorch ship it) gives its `hipRuntimeGetVersion`'s major.
    /// `None` for a file named otherwise.
    pub fn hip_major(&self) -> Option<u32> {
        hip_major_of(&self.lib.path).or_else(|| runtime_major(&self.lib.path))
    }

    /// HIP's major and minor version of this hipRTC, which Auto's parity table is keyed by
    /// ([`crate::compiler::selection::PARITY`]): from the library's file name or the file its
    /// links lead to ([`hip_version_of`]: `libhiprtc.so.6.4.43484` gives 6.4), else, for a
    /// runtime holding hipRTC (`libamdhip64.so...`), its `hipRuntimeGetVersion` (the
    /// pytorch-triton-rocm 2.1.0 wheel's unversioned `libamdhip64.so` gives 5.4). The minor
    /// version is `None` where neither tells; the whole is `None` where [`HipRtc::hip_major`]
    /// is.
    pub fn hip_version(&self) -> Option<(u32, Option<u32>)> {
        let path = &self.lib.path;
        let named = hip_version_of(path);
        if let Some((_, Some(_))) = named {
            return named;
        }
        let asked = runtime_version(path)
            .filter(|(major, _)| named.is_none_or(|(m, _)| m == *major))
            .map(|(major, minor)| (major, Some(minor)));
        asked.or(named)
    }

    /// `hiprtcVersion`'s answer. It does not identify a build: 5.2.3 and 6.4.3 both say 9.0.
    pub fn version(&self) -> Option<(i32, i32)> {
        self.lib.api.version()
    }

    /// Compiles one program to a code object, under the process-wide hipRTC lock, and reports
    /// the files it read.
    ///
    /// The include directories go to hipRTC as `-I<dir>` (symlinks resolved) after the options.
    /// The files read come from clang's own dependency list, asked of the compile with
    /// `-Xclang -dependency-file -Xclang <private dir>/deps.d -Xclang -MT -Xclang out
    /// -Xclang -sys-header-deps` (system headers included). Measured: hipRTC 6.4.3 ignores
    /// `-MD -MF` ("argument unused") and honours this form; hipRTC 5.2.3 honours both and lists
    /// the same files. comgr's staged copies of the source and of the in-memory headers are
    /// left out ([`depfile::map_in_process_paths`]).
    ///
    /// Errors: [`RtcError::IncludeDir`] for an include directory that is not one;
    /// [`RtcError::NulByte`] before any call when a string holds a NUL byte;
    /// [`RtcError::Compile`] with the program log when the compile fails;
    /// [`RtcError::EmptyOutput`] when it succeeds with no code; [`RtcError::NoDependencies`]
    /// when it succeeds without a readable dependency list; [`RtcError::Call`] when another
    /// hipRTC call fails.
    /// File names in the log are the user's: comgr's staging paths are mapped back (see
    /// [`unstage_log`]).
    pub fn compile(&self, input: &RtcInput<'_>) -> Result<RtcOutput, RtcError> {
        let phase = crate::phases::start("compile: target check (comgr)");
        for target in target_options(input.options) {
            self.check_target(target)?;
        }
        phase.end();
        let phase = crate::phases::start("compile: run directory, include directories");
        let canonical = rtc::canonical_include_dirs(input.include_dirs)?;
        let no_deps = |reason: String| RtcError::NoDependencies {
            compiler: COMPILER,
            reason,
        };
        // Named after this process, so that a later one removes it when this process crashes
        // in hipRTC ([`crate::compiler::RunDir`]).
        let scratch = crate::compiler::RunDir::new(
            crate::compiler::HIPRTC_PREFIX,
            &crate::compiler::build_base(),
        )
        .map_err(|e| RtcError::Scratch {
            compiler: COMPILER,
            reason: format!("cannot make a directory for the dependency list: {e}"),
        })?;
        let deps_file = scratch.path().join(DEPS_NAME);
        let mut extra = rtc::include_options(&canonical);
        for word in [
            // A note gets its include chain, as hipcc's compile is asked to print it: it
            // changes what is printed, not what is compiled.
            OsStr::new("-fdiagnostics-show-note-include-stack"),
            OsStr::new("-Xclang"),
            OsStr::new("-dependency-file"),
            OsStr::new("-Xclang"),
            deps_file.as_os_str(),
            OsStr::new("-Xclang"),
            OsStr::new("-MT"),
            OsStr::new("-Xclang"),
            OsStr::new("out"),
            OsStr::new("-Xclang"),
            OsStr::new("-sys-header-deps"),
        ] {
            extra.push(word.to_owned());
        }
        let started = crate::fs::stat::filesystem_now(scratch.path());
        phase.end();
        let out = {
            let _serialised = HIPRTC_LOCK.lock();
            let _phase = crate::phases::start("compile: the library's calls");
            rtc::compile(COMPILER, &self.lib.api, &SYMBOLS, input, &extra)
        };
        let phase = crate::phases::start("compile: log, dependency list");
        let rename = |printed: &str| rtc::user_file_name(printed, input.include_dirs, &canonical);
        let out = out.map_err(|e| match e {
            RtcError::Compile {
                compiler,
                name,
                options,
                log,
                ..
            } => {
                let log = unstage_log(&log, &name);
                RtcError::Compile {
                    diagnostics: diagnostics::parse(&log, &rename),
                    log,
                    compiler,
                    name,
                    options,
                }
            }
            other => other,
        })?;
        let log = unstage_log(&out.log, input.name);
        let diagnostics = diagnostics::parse(&log, &rename);
        if out.code.is_empty() {
            let arch = input
                .options
                .iter()
                .find_map(|o| o.strip_prefix("--gpu-architecture="))
                .unwrap_or("the default target");
            return Err(RtcError::EmptyOutput {
                compiler: COMPILER,
                what: "code object",
                arch: arch.to_owned(),
            });
        }
        let text = fs::read::read_file(
            &deps_file,
            fs::read::TEXT_OUTPUT_LIMIT,
            "hipRTC's dependency list",
            fs::read::Streams::None,
        )
        .map_err(|e| {
            no_deps(format!(
                "its dependency list cannot be read ({})",
                e.reason()
            ))
        })?;
        let printed = depfile::parse(&text)
            .ok_or_else(|| no_deps("its dependency list holds no rule".to_owned()))?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let dependencies =
            depfile::map_in_process_paths(&printed, input.include_dirs, &canonical, &cwd);
        // Removed off the compile's path (`compiler::later`).
        crate::compiler::later::remove_later(scratch);
        phase.end();
        Ok(RtcOutput {
            code: out.code,
            log,
            diagnostics,
            dependencies,
            started,
        })
    }
}

/// The directory of the device libraries (`ocml.bc`, `oclc_*.bc`) of the HIP 5.x
/// installation that holds the hipRTC library `library`: `<its directory>/amdgcn/bitcode`
/// (Debian: `/usr/lib/x86_64-linux-gnu/amdgcn/bitcode`) or `<its directory>/../amdgcn/bitcode`
/// (ROCm 5.x: `/opt/rocm/amdgcn/bitcode`), the first that holds `ocml.bc`; `None` when neither
/// does.
pub fn hip5_device_library_dir(library: &Path) -> Option<PathBuf> {
    let dir = library.parent()?;
    [
        dir.join("amdgcn/bitcode"),
        dir.parent()?.join("amdgcn/bitcode"),
    ]
    .into_iter()
    .find(|d| crate::fs::observe::exists(&d.join("ocml.bc")))
}

/// The device libraries hipcc 5.x (clang 15's HIP toolchain) links into a compile for `target`
/// with the hipRTC `options` (the flags that choose them: `-ffast-math`,
/// `-funsafe-math-optimizations`, `-ffinite-math-only`, `-fgpu-flush-denormals-to-zero`,
/// `-fhip-fp32-correctly-rounded-divide-sqrt`, `-mwavefrontsize64`, their `-fno-`/`-mno-`
/// forms, last one winning, and `-mcode-object-version=N`), in hipcc's order, under `dir`:
/// `hip`, `ocml`, `ockl`, `oclc_daz_opt_*`, `oclc_unsafe_math_*`, `oclc_finite_only_*`,
/// `oclc_correctly_rounded_sqrt_*`, `oclc_wavefrontsize64_*`, `oclc_isa_version_<N>`,
/// `oclc_abi_version_<400|500>`. The real parity test checks this list against `hipcc -###`.
pub fn hip5_device_libraries(dir: &Path, target: &TargetId, options: &[String]) -> Vec<PathBuf> {
    let processor = target.processor();
    // gfx9 and older (three digits) are wave64 only; gfx10+ (four) default to wave32.
    let gfx9 = processor.trim_start_matches("gfx").len() < 4;
    let (mut daz, mut unsafe_math, mut finite, mut fast) = (false, false, false, false);
    let (mut sqrt, mut wave64, mut cov) = (true, gfx9, 4u32);
    for o in options {
        match o.as_str() {
            "-fgpu-flush-denormals-to-zero" | "-fcuda-flush-denormals-to-zero" => daz = true,
            "-fno-gpu-flush-denormals-to-zero" | "-fno-cuda-flush-denormals-to-zero" => daz = false,
            "-funsafe-math-optimizations" => unsafe_math = true,
            "-fno-unsafe-math-optimizations" => unsafe_math = false,
            "-ffinite-math-only" => finite = true,
            "-fno-finite-math-only" => finite = false,
            "-ffast-math" => fast = true,
            "-fno-fast-math" => fast = false,
            "-fhip-fp32-correctly-rounded-divide-sqrt" => sqrt = true,
            "-fno-hip-fp32-correctly-rounded-divide-sqrt" => sqrt = false,
            "-mwavefrontsize64" => wave64 = true,
            "-mno-wavefrontsize64" => wave64 = gfx9,
            _ => {
                if let Some(v) = o.strip_prefix("-mcode-object-version=") {
                    cov = v.parse().unwrap_or(cov);
                }
            }
        }
    }
    let on = |b: bool| if b { "on" } else { "off" };
    let isa = processor.trim_start_matches("gfx");
    let abi = if cov >= 5 { 500 } else { 400 };
    [
        "hip".to_owned(),
        "ocml".to_owned(),
        "ockl".to_owned(),
        format!("oclc_daz_opt_{}", on(daz)),
        format!("oclc_unsafe_math_{}", on(unsafe_math || fast)),
        format!("oclc_finite_only_{}", on(finite || fast)),
        format!("oclc_correctly_rounded_sqrt_{}", on(sqrt)),
        format!("oclc_wavefrontsize64_{}", on(wave64)),
        format!("oclc_isa_version_{isa}"),
        format!("oclc_abi_version_{abi}"),
    ]
    .into_iter()
    .map(|name| dir.join(format!("{name}.bc")))
    .collect()
}

/// The in-memory header [`hip5_parity_options`] includes (see there).
pub const HIP5_INLINE_ALL_HEADER: &str = "hipjit_hip5_inline_all.h";

/// Appended to the source compiled with [`hip5_parity_options`]: closes the header's
/// `#pragma clang attribute push` (clang wants the pop in the same translation unit).
pub const HIP5_SOURCE_END: &str = "\n#pragma clang attribute pop\n#pragma clang diagnostic pop\n";

/// The headers a compile with [`hip5_parity_options`] hands hipRTC in memory.
pub fn hip5_parity_headers() -> Vec<(String, Vec<u8>)> {
    vec![(
        HIP5_INLINE_ALL_HEADER.to_owned(),
        // The attribute unused (a source with no function of its own) is no warning of the
        // caller's.
        b"#pragma clang diagnostic push\n\
          #pragma clang diagnostic ignored \"-Wpragma-clang-attribute\"\n\
          #pragma clang attribute push (__attribute__((always_inline)), apply_to = function)\n"
            .to_vec(),
    )]
}

/// The options that make hipRTC 5.x compile as hipcc 5.x does (measured on HIP 5.2.3, gfx90a
/// and gfx1030 with `-mcumode`: every kernel of the parity corpus identical, at `-O3`, `-O2`
/// and with `-ffast-math`), appended after the caller's. hipRTC 5.x compiles in three comgr
/// steps where hipcc runs one `clang -cc1`: source to bitcode at the requested level with
/// `-mllvm -amdgpu-prelink`, a link with comgr's device libraries chosen without hipRTC's
/// options (`oclc_wavefrontsize64_off` and `oclc_correctly_rounded_sqrt_off` even for gfx90a),
/// then code generation with a fixed `-O3 -mcumode` that runs the whole optimisation pipeline
/// a second time. `-Xclang -disable-llvm-passes` leaves the first step unoptimised, so that
/// the pipeline runs once, after linking, as in hipcc; `-Xclang -mlink-builtin-bitcode` links
/// hipcc's own device `libraries` ([`hip5_device_libraries`]) in the first step, as hipcc
/// does, so comgr's link has nothing left to add. hipcc also inlines every device function
/// not marked `noinline` (`-mllvm -amdgpu-early-inline-all=true -amdgpu-function-calls=false`);
/// hipRTC passes `-mllvm` options to the first step only, where no pass now runs, so the
/// in-memory header [`HIP5_INLINE_ALL_HEADER`] ([`hip5_parity_headers`], included first) marks
/// the source's functions `always_inline` instead, and [`HIP5_SOURCE_END`] appended to the
/// source closes it. Not reachable this way: `-O0`, `-O1`, `-Os`, `-Oz` (the code generation
/// step is fixed at `-O3`) and WGP mode on gfx10+ (it is fixed at `-mcumode`).
pub fn hip5_parity_options(libraries: &[PathBuf]) -> Vec<String> {
    let mut o = vec![
        "-Xclang".to_owned(),
        "-disable-llvm-passes".to_owned(),
        "-include".to_owned(),
        HIP5_INLINE_ALL_HEADER.to_owned(),
    ];
    for l in libraries {
        o.push("-Xclang".to_owned());
        o.push("-mlink-builtin-bitcode".to_owned());
        o.push("-Xclang".to_owned());
        o.push(l.to_string_lossy().into_owned());
    }
    o
}

/// The values of the options that name a target: `--gpu-architecture`, `--offload-arch` (with
/// one or two dashes, `=VALUE` or the next argument) and `--amdgpu-target`.
fn target_options(options: &[String]) -> Vec<&str> {
    const NAMES: [&str; 3] = ["gpu-architecture", "offload-arch", "amdgpu-target"];
    let mut out = Vec::new();
    let mut it = options.iter();
    while let Some(o) = it.next() {
        let bare = o.trim_start_matches('-');
        if o.len() - bare.len() == 0 {
            continue;
        }
        for name in NAMES {
            if bare == name {
                out.extend(it.next().map(String::as_str));
            } else if let Some(v) = bare.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                out.push(v);
            }
        }
    }
    out
}

/// The dependency list's name in the compile's private directory.
const DEPS_NAME: &str = "deps.d";

/// A hipRTC log with comgr's staging paths mapped back to the names the caller gave: comgr
/// writes the source and the in-memory headers under `<TMPDIR>/comgr-<id>/input/` and its
/// diagnostics name those files; HIP 5.x also renames the source `CompileSource`. So
/// `/tmp/comgr-696f67/input/CompileSource:3:11: error: ...` becomes `kern.hip:3:11: error: ...`
/// and `/tmp/comgr-a1c2d5/input/shape.h` becomes `shape.h`.
pub fn unstage_log(log: &str, source_name: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut rest = log;
    while let Some(at) = rest.find("comgr-") {
        // The staging path starts after the last delimiter before `comgr-`.
        let start = rest[..at]
            .rfind(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '(' | '['))
            .map_or(0, |i| i + 1);
        let after = &rest[at + "comgr-".len()..];
        let id_len = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        let staged = id_len > 0 && after[id_len..].starts_with("/input/");
        if !staged || !rest[start..at].starts_with('/') {
            out.push_str(&rest[..at + "comgr-".len()]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        rest = &after[id_len + "/input/".len()..];
        if let Some(tail) = rest.strip_prefix("CompileSource") {
            out.push_str(source_name);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::unstage_log;

    #[test]
    fn comgr_staging_paths_become_the_callers_names() {
        let hip5 = "/tmp/comgr-696f67/input/CompileSource:3:11: error: expected expression\n\
                    In file included from /tmp/comgr-696f67/input/CompileSource:1:\n\
                    /tmp/comgr-696f67/input/shape.h:2:1: note: here";
        assert_eq!(
            unstage_log(hip5, "kern.hip"),
            "kern.hip:3:11: error: expected expression\n\
             In file included from kern.hip:1:\n\
             shape.h:2:1: note: here"
        );
        let hip6 = "/var/tmp/x/comgr-a1c2d5/input/kern.hip:3:11: error: expected expression";
        assert_eq!(
            unstage_log(hip6, "kern.hip"),
            "kern.hip:3:11: error: expected expression"
        );
    }

    #[test]
    fn text_that_only_looks_like_comgr_is_kept() {
        for text in [
            "comgr-abc/input/x.h: not a path",
            "/tmp/comgr-/input/x.h",
            "/tmp/comgr-12/output/x.o",
            "see comgr-",
        ] {
            assert_eq!(unstage_log(text, "k.hip"), text);
        }
    }
}
