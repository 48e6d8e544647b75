//! The HIP runtime, loaded at run time with `dlopen`: a value holding a table of typed entry
//! points ([`Runtime`]).
//!
//! ```no_run
//! use hipjit::args;
//! use hipjit::code_object::CodeObject;
//! use hipjit::launch::LaunchConfig;
//! use hipjit::library::Library;
//! use hipjit::memory::DeviceBuffer;
//! use hipjit::runtime::Runtime;
//! use hipjit::stream::{Stream, StreamFlags};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::load()?;
//! let device = runtime.device(0)?;
//! // A code object built by hipcc (raw ELF, offload bundle or compressed bundle).
//! let bytes = std::fs::read("scale.hsaco")?;
//! let code_object = CodeObject::from_bytes(&bytes, device.target_id())?;
//! let library = Library::load(&device, &code_object)?;
//! let kernel = library.kernel("scale")?;
//!
//! let stream = Stream::new(&device, StreamFlags::NON_BLOCKING)?;
//! let n = 1024u32;
//! let buf = DeviceBuffer::from_slice(&device, &vec![1.0f32; n as usize])?;
//! let cfg = LaunchConfig::for_num_elems(n, 256);
//! // SAFETY: `scale(float* x, float a, unsigned n)` takes exactly these arguments.
//! unsafe { kernel.launch(&stream, cfg, &mut args![&buf, &2.0f32, &n])? };
//! stream.synchronize()?;
//! assert!(buf.to_vec()?.iter().all(|&x| x == 2.0));
//! # Ok(())
//! # }
//! ```
//!
//! # Where the runtime is found
//! In this order (the installation roots are those of `hip_sys::discovery`):
//!
//! | # | candidate | notes |
//! |---|-----------|-------|
//! | 1 | the path given to [`Runtime::load_from`] | an error if it cannot be opened |
//! | 2 | `HIPJIT_HIP_LIBRARY` | set but not loadable is an error, not a fallthrough |
//! | 3 | a `libamdhip64.so*` already loaded in the process | `RTLD_NOLOAD`: a framework's streams belong to its copy |
//! | 4 | `lib/libamdhip64.so{,.7,.6,.5}` under `HIP_PATH`, `ROCM_PATH`, the Python packages of the active environment (`_rocm_sdk_core`, `torch`, `triton/third_party/rocm` under `VIRTUAL_ENV`, else `HIPJIT_PYTHON`'s: `hip_sys::discovery::python`), `/opt/rocm` | a versioned name alone is enough (TheRock's wheels ship no `libamdhip64.so`) |
//! | 5 | the sonames `libamdhip64.so`, `.so.7`, `.so.6`, `.so.5` | the dynamic loader's search (`/usr/lib`, `ld.so.conf`) |
//!
//! The library is opened with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE` and never closed.
//!
//! # Entry points
//! Every entry point is bound as the headers hipjit was built against would have called it:
//! where the runtime exports `hipGetProcAddress` (HIP 6.1+) and answers it, through it with the
//! headers' HIP version ([`HEADER_HIP_VERSION`]), else by `dlsym`
//! ([`Runtime::symbol_binding`] says which), into the function-pointer type hip-sys declares for
//! it (`hip_sys::pfn::*`, from the headers or hip-sys's own fallback declarations). The
//! device-properties entry point follows the same rule: headers of HIP 6.0 or later call the
//! 6.0 layout (`hipGetDevicePropertiesR0600`), older ones the 5.x layout of the unversioned
//! `hipGetDeviceProperties`; a runtime lacking that one is read through the other layout's
//! entry point it exports, never an entry point with the other layout. A missing
//! required symbol ([`REQUIRED_SYMBOLS`]) is a [`LoadError::MissingSymbol`] naming it, the
//! library path and the runtime version; optional families ([`OPTIONAL_SYMBOLS`]: the
//! stream-ordered allocator `hipMallocAsync`/`hipFreeAsync`, the library API, cooperative
//! launch, module occupancy, `hipFuncSetAttribute`) are `Option`s.
//!
//! # Current device
//! HIP's current device is per thread. Every call that depends on it binds the device first
//! (`hipGetDevice`, then `hipSetDevice` when it differs), so the types of this layer may move
//! between threads.

mod api;
mod binding;
pub(crate) mod loader;

use std::ffi::CStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hip_sys as sys;
use hip_sys::discovery::{Env, ProcessEnv};

pub(crate) use api::{Api, DevicePropertiesFn};
pub use api::{OPTIONAL_SYMBOLS, REQUIRED_SYMBOLS};
pub use binding::{SymbolBinding, HEADER_HIP_VERSION, R0600_HIP_VERSION};
pub use loader::{Found, LIBRARY_ENV, SONAMES};

use crate::safe::device::Device;
use crate::safe::error::{HipError, LibraryApiError, LoadError};

/// The five symbols of the HIP library API, in the order [`Runtime::require_library_api`]
/// checks them.
pub const LIBRARY_API_SYMBOLS: [&str; 5] = [
    "hipLibraryLoadFromFile",
    "hipLibraryGetKernelCount",
    "hipLibraryEnumerateKernels",
    "hipKernelGetFunction",
    "hipLibraryUnload",
];

/// A HIP runtime version as `hipRuntimeGetVersion` reports it:
/// `major * 10_000_000 + minor * 100_000 + patch` (HIP 5.2.3 of Debian: 50221153).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuntimeVersion(pub i32);

impl RuntimeVersion {
    /// The major version (5 for 50221153).
    pub fn major(self) -> i32 {
        self.0 / 10_000_000
    }
    /// The minor version (2 for 50221153).
    pub fn minor(self) -> i32 {
        (self.0 / 100_000) % 100
    }
    /// The patch (build) number (21153 for 50221153).
    pub fn patch(self) -> i32 {
        self.0 % 100_000
    }
}

impl RuntimeVersion {
    /// A CUDA version as `cuDriverGetVersion` reports it (`major * 1000 + minor * 10`: 13000
    /// for CUDA 13.0) in this encoding (patch 0).
    pub fn from_cuda(v: i32) -> RuntimeVersion {
        RuntimeVersion((v / 1000) * 10_000_000 + ((v % 1000) / 10) * 100_000)
    }
}

impl fmt::Display for RuntimeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major(), self.minor(), self.patch())
    }
}

/// HIP's two platforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// AMD GPUs through the HIP runtime (`libamdhip64`).
    Amd,
    /// NVIDIA GPUs through the CUDA driver (`libcuda.so.1`) behind hipjit's HIP shims
    /// ([`crate::safe::cuda`]).
    Nvidia,
}

/// The environment variable choosing the platform, as in HIP: `amd` or `nvidia`.
pub const PLATFORM_ENV: &str = "HIP_PLATFORM";

impl Platform {
    /// The platform `HIP_PLATFORM` names (`amd`, `nvidia`; HIP's older spellings `hcc`,
    /// `nvcc` too), `None` when unset or empty.
    ///
    /// Errors: [`LoadError::Platform`] for any other value.
    pub fn from_env(env: &impl Env) -> Result<Option<Platform>, LoadError> {
        let Some(v) = env.var_os(PLATFORM_ENV).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        match v.to_string_lossy().as_ref() {
            "amd" | "hcc" => Ok(Some(Platform::Amd)),
            "nvidia" | "nvcc" => Ok(Some(Platform::Nvidia)),
            other => Err(LoadError::Platform {
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Platform::Amd => "amd",
            Platform::Nvidia => "nvidia",
        })
    }
}

/// How code objects are handed to the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeObjectLoader {
    /// The HIP library API (`hipLibraryLoadData`/`hipLibraryLoadFromFile`,
    /// `hipKernelGetFunction`, `hipLibraryUnload`): all five [`LIBRARY_API_SYMBOLS`] are
    /// exported (ROCm 7.2 and later).
    LibraryApi,
    /// The module API (`hipModuleLoadData`, `hipModuleGetFunction`, `hipModuleUnload`), with the
    /// kernel list read from the code object itself: every runtime.
    ModuleApi,
}

impl CodeObjectLoader {
    fn as_u8(self) -> u8 {
        match self {
            CodeObjectLoader::LibraryApi => 0,
            CodeObjectLoader::ModuleApi => 1,
        }
    }

    fn from_u8(v: u8) -> CodeObjectLoader {
        if v == 0 {
            CodeObjectLoader::LibraryApi
        } else {
            CodeObjectLoader::ModuleApi
        }
    }
}

impl fmt::Display for CodeObjectLoader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CodeObjectLoader::LibraryApi => "library API",
            CodeObjectLoader::ModuleApi => "module API",
        })
    }
}

/// Which device-properties entry point the runtime exports (and so which struct layout is
/// handed to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevicePropertiesEntry {
    /// `hipGetDevicePropertiesR0600` with the HIP 6.0 layout (`hipDeviceProp_tR0600`).
    R0600,
    /// `hipGetDeviceProperties` with the HIP 5.x layout (`hipDeviceProp_tR0000`).
    R0000,
}

impl DevicePropertiesEntry {
    /// The symbol's C name.
    pub fn symbol(self) -> &'static str {
        match self {
            DevicePropertiesEntry::R0600 => "hipGetDevicePropertiesR0600",
            DevicePropertiesEntry::R0000 => "hipGetDeviceProperties",
        }
    }
}

/// The code-object versions a runtime accepts, by runtime version. This is hipjit's own record:
/// no machine here has a GPU, so none of it is measured by loading a code object.
///
/// | runtime | accepted | basis |
/// |---------|----------|-------|
/// | before HIP 5.0 | not known (`None`) | outside hipjit's range (5.2 to ROCm 10) |
/// | HIP 5.x | v4, v5 | code object v5 arrived with ROCm 5.0; v4 was the default of its compilers (Debian's hipcc 5.2.3 writes v4) |
/// | HIP 6.0, 6.1 | v4, v5 | v6 (LLVM AMDGPUUsage "Code Object V6 Metadata") postdates these runtimes |
/// | HIP 6.2 and later, ROCm 7 to 10 | v4, v5, v6 | runtimes that load generic-target (v6) code objects; hipcc 7 / clang 21 writes v6 by default |
///
/// When the table says no, [`crate::safe::library::Library::load`] refuses before calling the
/// runtime, naming both versions; when it says yes, the runtime stays the authority (a code
/// object it rejects anyway comes back as `hipErrorInvalidImage`).
pub fn code_object_versions_for(version: RuntimeVersion) -> Option<&'static [u32]> {
    match (version.major(), version.minor()) {
        (5, _) | (6, 0) | (6, 1) => Some(&[4, 5]),
        (6, _) | (7..=10, _) => Some(&[4, 5, 6]),
        _ => None,
    }
}

pub(crate) struct Inner {
    pub(crate) api: Api,
    _handle: Option<loader::Handle>,
    platform: Platform,
    path: PathBuf,
    found: Found,
    version: Option<RuntimeVersion>,
    /// How the entry points were bound.
    binding: SymbolBinding,
    /// How code objects are loaded ([`Runtime::code_object_loader`]):
    /// [`CodeObjectLoader::as_u8`].
    loader: std::sync::atomic::AtomicU8,
    /// The (device, peer) ordinal pairs whose peer access was enabled through hipjit
    /// ([`Device::enable_peer_access`]): peer access is a property of the process's devices,
    /// not of one `Device` value.
    pub(crate) peers: parking_lot::Mutex<std::collections::HashSet<(i32, i32)>>,
}

/// A loaded HIP runtime: the library and its resolved entry points. Cheap to clone (an `Arc`);
/// `Send + Sync`.
///
/// ```no_run
/// let runtime = hipjit::runtime::Runtime::load()?;
/// println!("{} {:?}", runtime.path().display(), runtime.version());
/// # Ok::<(), hipjit::error::LoadError>(())
/// ```
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("path", &self.inner.path)
            .field("found", &self.inner.found)
            .field("version", &self.inner.version)
            .field("loader", &self.code_object_loader())
            .finish()
    }
}

impl Runtime {
    /// Finds and loads the HIP runtime in the documented order (module documentation).
    ///
    /// The platform: `HIP_PLATFORM` (`amd`, `nvidia`) when set; an explicit
    /// `HIPJIT_HIP_LIBRARY` means AMD; else detected: an AMD runtime that reports a device,
    /// else an NVIDIA driver (`libcuda.so.1`, [`Platform::Nvidia`]) that reports one, else the
    /// AMD result (the runtime without a device, or its load error). Detection asks each
    /// runtime `hipGetDeviceCount` (on NVIDIA `cuInit` + `cuDeviceGetCount`); a CUDA driver
    /// opened while detecting stays loaded (never closed).
    ///
    /// An application loads the runtime once and hands its [`Device`]s down: a library built
    /// on hipjit takes `&Device` (its runtime is [`Device::runtime`]) and never calls this, so
    /// its tests can hand it the testing runtime's device. Code that must load a runtime itself
    /// takes an environment ([`Runtime::load_with_env`]) and is handed
    /// [`ProcessEnv`] in production and `TestRuntime::env()` (feature `testing`) in its tests.
    ///
    /// Errors: [`LoadError::InvalidEnvPath`] when `HIPJIT_HIP_LIBRARY` is set but not loadable,
    /// [`LoadError::NotFound`] listing every candidate tried, [`LoadError::MissingSymbol`] when
    /// a required entry point is missing.
    pub fn load() -> Result<Runtime, LoadError> {
        Self::load_with_env(&ProcessEnv)
    }

    /// [`Runtime::load`] reading `HIPJIT_HIP_LIBRARY`, `HIP_PATH`, `ROCM_PATH` and `PATH` from
    /// `env` instead of the process environment.
    pub fn load_with_env(env: &impl Env) -> Result<Runtime, LoadError> {
        match Platform::from_env(env)? {
            Some(platform) => Self::load_platform_with_env(platform, env),
            // An explicit runtime is loaded as asked, without detection.
            None if env.var_os(LIBRARY_ENV).is_some_and(|v| !v.is_empty()) => {
                Self::load_platform_with_env(Platform::Amd, env)
            }
            None => {
                let amd = Self::load_platform_with_env(Platform::Amd, env);
                if matches!(&amd, Ok(rt) if rt.device_count().is_ok_and(|n| n > 0)) {
                    return amd;
                }
                match Self::load_platform_with_env(Platform::Nvidia, env) {
                    Ok(nv) if nv.device_count().is_ok_and(|n| n > 0) => Ok(nv),
                    Ok(nv) if amd.is_err() => Ok(nv),
                    _ => amd,
                }
            }
        }
    }

    /// Loads the runtime of `platform`: for [`Platform::Amd`] the HIP runtime in the documented
    /// order, for [`Platform::Nvidia`] the CUDA driver (`HIPJIT_CUDA_LIBRARY`, else
    /// `libcuda.so.1`; `load`) behind hipjit's HIP shims.
    ///
    /// Errors: as [`Runtime::load`]; [`LoadError::Cuda`] when the CUDA driver cannot be loaded
    /// or lacks a required entry point.
    pub fn load_platform(platform: Platform) -> Result<Runtime, LoadError> {
        Self::load_platform_with_env(platform, &ProcessEnv)
    }

    fn load_platform_with_env(platform: Platform, env: &impl Env) -> Result<Runtime, LoadError> {
        match platform {
            Platform::Amd => {
                let (handle, found) = loader::open_runtime(None, env)?;
                Self::from_handle(handle, found, None)
            }
            Platform::Nvidia => Self::load_cuda(None),
        }
    }

    /// Loads HIP's NVIDIA platform over the CUDA driver at `path` (`None`: `HIPJIT_CUDA_LIBRARY`,
    /// else `libcuda.so.1`). The driver is loaded once per process; a later call returns a
    /// runtime over the driver already loaded.
    ///
    /// Errors: [`LoadError::Cuda`].
    pub fn load_cuda(path: Option<&Path>) -> Result<Runtime, LoadError> {
        let driver = crate::safe::cuda::driver::load(path)?;
        let api = crate::safe::cuda::api(driver);
        let mut v = 0;
        // SAFETY: valid out pointer; cuDriverGetVersion needs no initialisation.
        let version = (unsafe { (api.hipRuntimeGetVersion)(&mut v) } == sys::hipSuccess)
            .then(|| RuntimeVersion::from_cuda(v));
        let found = if path.is_some() {
            Found::Explicit
        } else {
            Found::Soname
        };
        tracing::info!(
            path = %driver.path.display(),
            version = %version_text(version),
            "loaded the CUDA driver (HIP's NVIDIA platform)"
        );
        Ok(Runtime {
            inner: Arc::new(Inner {
                api,
                _handle: None,
                platform: Platform::Nvidia,
                path: driver.path.clone(),
                found,
                version,
                binding: SymbolBinding::Dlsym,
                // The module API: ~85 us less than the library API for a fresh load on the
                // H200 (cuModuleLoadData + cuModuleGetFunction against cuLibraryLoadData +
                // cuLibraryGetKernel + cuKernelGetFunction), as cudarc and HIP's own
                // hipModuleLoadData load; the library API on request
                // ([`Runtime::set_code_object_loader`]).
                loader: CodeObjectLoader::ModuleApi.as_u8().into(),
                peers: Default::default(),
            }),
        })
    }

    /// The platform this runtime drives.
    pub fn platform(&self) -> Platform {
        self.inner.platform
    }

    /// Loads the HIP runtime from `path` (a file path, or a name the dynamic loader resolves).
    ///
    /// Errors: [`LoadError::Open`] with dlopen's message, [`LoadError::MissingSymbol`].
    pub fn load_from(path: impl AsRef<Path>) -> Result<Runtime, LoadError> {
        let path = path.as_ref();
        let (handle, found) = loader::open_runtime(Some(path), &ProcessEnv)?;
        Self::from_handle(handle, found, Some(path))
    }

    fn from_handle(
        handle: loader::Handle,
        found: Found,
        asked: Option<&Path>,
    ) -> Result<Runtime, LoadError> {
        // The path actually loaded: the handle's own file, else the file holding one of its
        // symbols, else the name it was opened by.
        let path = handle
            .file()
            .or_else(|| {
                handle
                    .sym_addr(c"hipRuntimeGetVersion")
                    .or_else(|| handle.sym_addr(c"hipInit"))
                    .and_then(loader::Handle::file_of)
            })
            .or_else(|| asked.map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("libamdhip64.so"));
        // SAFETY: the declared type of hipRuntimeGetVersion.
        let get_version =
            unsafe { handle.sym::<sys::pfn::hipRuntimeGetVersion>(c"hipRuntimeGetVersion") };
        let version = get_version.and_then(|f| {
            let mut v = 0;
            // SAFETY: `v` is a valid out pointer; hipRuntimeGetVersion needs no device.
            let rc = unsafe { f(&mut v) };
            (rc == sys::hipSuccess).then_some(RuntimeVersion(v))
        });
        let mut binder = binding::Binder::new(&handle, HEADER_HIP_VERSION);
        let api = Api::resolve(&mut binder).map_err(|symbol| LoadError::MissingSymbol {
            symbol,
            path: path.clone(),
            version: version_text(version),
        })?;
        let binding = binder.binding();
        let library_api = library_api_missing(&api).is_none();
        let loader = if library_api {
            CodeObjectLoader::LibraryApi
        } else {
            CodeObjectLoader::ModuleApi
        };
        tracing::info!(
            path = %path.display(),
            found = %found,
            version = %version_text(version),
            code_object_loader = %loader,
            symbol_binding = %binding,
            "loaded the HIP runtime"
        );
        Ok(Runtime {
            inner: Arc::new(Inner {
                api,
                _handle: Some(handle),
                platform: Platform::Amd,
                path,
                found,
                version,
                binding,
                loader: loader.as_u8().into(),
                peers: Default::default(),
            }),
        })
    }

    /// The file the runtime was loaded from (`dladdr` of one of its symbols).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How the library was found.
    pub fn found(&self) -> &Found {
        &self.inner.found
    }

    /// The runtime's version (`hipRuntimeGetVersion`), when it reports one.
    pub fn version(&self) -> Option<RuntimeVersion> {
        self.inner.version
    }

    /// The driver version (`hipDriverGetVersion`), same encoding as [`RuntimeVersion`].
    ///
    /// Errors: the runtime's error for `hipDriverGetVersion`.
    pub fn driver_version(&self) -> Result<RuntimeVersion, HipError> {
        let mut v = 0;
        // SAFETY: valid out pointer.
        self.check(
            unsafe { (self.api().hipDriverGetVersion)(&mut v) },
            "hipDriverGetVersion",
        )?;
        Ok(RuntimeVersion(v))
    }

    /// How code objects are loaded on this runtime from now on. On AMD: the library API when
    /// all five [`LIBRARY_API_SYMBOLS`] are exported, else the module API. On HIP's NVIDIA
    /// platform: the module API (`cuModuleLoadData`, `cuModuleGetFunction`: the cheaper load,
    /// measured in the README's Performance section). [`Runtime::set_code_object_loader`]
    /// changes it.
    pub fn code_object_loader(&self) -> CodeObjectLoader {
        CodeObjectLoader::from_u8(self.inner.loader.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Loads code objects and cubins through `loader` from now on (for every clone of this
    /// runtime; libraries already loaded keep theirs, [`crate::safe::library::Library::loader`]).
    /// Either way a [`crate::safe::library::Library`] is loaded on one device, and its kernels and
    /// their metadata come from the code object or cubin; only the library API enumerates
    /// kernels through the runtime ([`crate::safe::library::Library::enumerated_functions`]).
    ///
    /// Errors: [`LibraryApiError`] naming the first of the [`LIBRARY_API_SYMBOLS`] the runtime
    /// lacks, when `loader` is the library API.
    pub fn set_code_object_loader(&self, loader: CodeObjectLoader) -> Result<(), LibraryApiError> {
        if loader == CodeObjectLoader::LibraryApi {
            self.require_library_api()?;
        }
        self.inner
            .loader
            .store(loader.as_u8(), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Checks the five symbols of the HIP library API together, without loading anything.
    ///
    /// Errors: [`LibraryApiError`] naming the first missing symbol in the order of
    /// [`LIBRARY_API_SYMBOLS`], the library path and the runtime version.
    pub fn require_library_api(&self) -> Result<(), LibraryApiError> {
        match library_api_missing(self.api()) {
            None => Ok(()),
            Some(symbol) => Err(LibraryApiError {
                symbol,
                path: self.inner.path.clone(),
                version: version_text(self.inner.version),
            }),
        }
    }

    /// The code-object versions this runtime accepts, when known
    /// ([`code_object_versions_for`] holds the table).
    pub fn code_object_versions(&self) -> Option<&'static [u32]> {
        self.inner.version.and_then(code_object_versions_for)
    }

    /// How the entry points were bound: through `hipGetProcAddress` with the headers' version,
    /// or by `dlsym` (the runtime lacks `hipGetProcAddress`, or refused it: a runtime without a
    /// GPU answers `hipErrorNoDevice`). Always [`SymbolBinding::Dlsym`] on HIP's NVIDIA
    /// platform.
    pub fn symbol_binding(&self) -> SymbolBinding {
        self.inner.binding
    }

    /// The device-properties entry point in use.
    pub fn device_properties_entry(&self) -> DevicePropertiesEntry {
        match self.api().get_device_properties {
            DevicePropertiesFn::R0600(_) => DevicePropertiesEntry::R0600,
            DevicePropertiesFn::R0000(_) => DevicePropertiesEntry::R0000,
        }
    }

    /// Each optional entry point ([`OPTIONAL_SYMBOLS`]) and whether the runtime exports it.
    pub fn optional_symbols(&self) -> Vec<(&'static str, bool)> {
        self.api().optional_present()
    }

    /// Whether the stream-ordered allocator (`hipMallocAsync` and `hipFreeAsync`, HIP 5.1 and
    /// later) is available; without it `alloc_async` falls back
    /// to `hipMalloc`/`hipFree`.
    pub fn has_stream_ordered_alloc(&self) -> bool {
        self.api().hipMallocAsync.is_some() && self.api().hipFreeAsync.is_some()
    }

    /// Whether cooperative launch (`hipModuleLaunchCooperativeKernel`) is available.
    pub fn has_cooperative_launch(&self) -> bool {
        self.api().hipModuleLaunchCooperativeKernel.is_some()
    }

    /// `hipInit(0)`. Not needed before other calls (the runtime initialises itself); useful to
    /// ask whether the runtime finds its driver.
    ///
    /// Errors: the runtime's error (HIP 5.2 without a GPU: `hipErrorInvalidDevice`).
    pub fn init(&self) -> Result<(), HipError> {
        // SAFETY: hipInit takes a flags value that must be 0.
        self.check(unsafe { (self.api().hipInit)(0) }, "hipInit")
    }

    /// The number of devices (`hipGetDeviceCount`).
    ///
    /// Errors: the runtime's error (`hipErrorNoDevice` when there is none).
    pub fn device_count(&self) -> Result<u32, HipError> {
        let mut n = 0;
        // SAFETY: valid out pointer.
        self.check(
            unsafe { (self.api().hipGetDeviceCount)(&mut n) },
            "hipGetDeviceCount",
        )?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// Device `ordinal`: binds it, reads its properties.
    ///
    /// Errors: the runtime's error from `hipGetDeviceCount` (`hipErrorNoDevice`), `hipSetDevice`
    /// (`hipErrorInvalidDevice` for an ordinal out of range) or the properties call; hipjit's
    /// [`crate::error::DEVICE_PROPERTIES_SKEW`] when the properties fail its sanity check
    /// (`gcnArchName` not `gfx...`, `warpSize` not 32 or 64, `maxThreadsPerBlock` over 1024, a
    /// size of zero: the runtime wrote another layout than the one read).
    pub fn device(&self, ordinal: u32) -> Result<Device, HipError> {
        Device::open(self, ordinal)
    }

    pub(crate) fn api(&self) -> &Api {
        &self.inner.api
    }

    /// Whether `self` and `other` drive the same loaded copy of the runtime, so that handles of
    /// one (streams, events, device pointers) may be handed to the entry points of the other.
    /// Two [`Runtime`] values over one library share their entry points; an AMD runtime and the
    /// NVIDIA shims, or two copies of `libamdhip64` loaded from different files, do not.
    pub(crate) fn same_library(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || self.api().hipStreamDestroy as usize == other.api().hipStreamDestroy as usize
    }

    /// Turns a status into a `Result`, with the runtime's name and string for an error.
    #[inline]
    pub(crate) fn check(&self, rc: sys::hipError_t, call: &'static str) -> Result<(), HipError> {
        if rc == sys::hipSuccess {
            Ok(())
        } else {
            Err(self.error(rc, call))
        }
    }

    #[cold]
    pub(crate) fn error(&self, rc: sys::hipError_t, call: &'static str) -> HipError {
        let api = self.api();
        // SAFETY: hipGetErrorName/String accept any value and return static strings or NULL.
        let name = unsafe { cstr_opt((api.hipGetErrorName)(rc)) };
        // SAFETY: as above.
        let message = unsafe { cstr_opt((api.hipGetErrorString)(rc)) };
        HipError::new(rc as i32, call, name, message.unwrap_or_default())
    }

    /// Makes `ordinal` this thread's current device (`hipGetDevice`, then `hipSetDevice` when
    /// it differs).
    #[inline]
    pub(crate) fn bind(&self, ordinal: i32) -> Result<(), HipError> {
        let api = self.api();
        let mut current = -1;
        // SAFETY: valid out pointer.
        let rc = unsafe { (api.hipGetDevice)(&mut current) };
        if rc == sys::hipSuccess && current == ordinal {
            return Ok(());
        }
        // SAFETY: hipSetDevice validates the ordinal.
        self.check(unsafe { (api.hipSetDevice)(ordinal) }, "hipSetDevice")
    }
}

fn library_api_missing(api: &Api) -> Option<&'static str> {
    let present = [
        api.hipLibraryLoadFromFile.is_some(),
        api.hipLibraryGetKernelCount.is_some(),
        api.hipLibraryEnumerateKernels.is_some(),
        api.hipKernelGetFunction.is_some(),
        api.hipLibraryUnload.is_some(),
    ];
    LIBRARY_API_SYMBOLS
        .iter()
        .zip(present)
        .find(|(_, p)| !p)
        .map(|(s, _)| *s)
}

fn version_text(v: Option<RuntimeVersion>) -> String {
    match v {
        Some(v) => format!("{v} ({})", v.0),
        None => "unknown".to_owned(),
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
unsafe fn cstr_opt(p: *const std::os::raw::c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the contract above.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_decodes_debian_hip_5_2_3() {
        let v = RuntimeVersion(50221153);
        assert_eq!((v.major(), v.minor(), v.patch()), (5, 2, 21153));
        assert_eq!(v.to_string(), "5.2.21153");
    }

    #[test]
    fn code_object_v6_needs_hip_6_2() {
        assert_eq!(
            code_object_versions_for(RuntimeVersion(50221153)),
            Some(&[4, 5][..])
        );
        assert_eq!(
            code_object_versions_for(RuntimeVersion(60140000)),
            Some(&[4, 5][..])
        );
        assert_eq!(
            code_object_versions_for(RuntimeVersion(60443484)),
            Some(&[4, 5, 6][..])
        );
        assert_eq!(code_object_versions_for(RuntimeVersion(40000000)), None);
    }
}
