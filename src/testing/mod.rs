//! A testing runtime for crates built on hipjit (feature `testing`): a small HIP runtime, built
//! with hipjit and loaded like a real one, that pretends to be a device you choose (target ID,
//! compute units, limits) and runs *host implementations* of your kernels, registered by name.
//!
//! It is a stand-in that proves the host side of a kernel library without a GPU: source
//! generation, compile options, the cache, reading metadata, block-size choice, loading, argument
//! packing and hipjit's launch checks, stream and event calls, copies in and out. It does not run
//! device code: the code object is loaded (and its kernels found) but never executed; what a
//! launch computes is what the host implementation computes. Device memory is host memory,
//! launches run to completion on the launching thread before they return, streams and events
//! only record what was asked, and a kernel's resources (threads per block, static LDS) come
//! from the code object's metadata (`hipFuncGetAttribute` answers `hipErrorNotSupported`).
//!
//! ```
//! use hipjit::prelude::*;
//! use hipjit::testing::TestDevice;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let test = TestDevice::new("gfx90a:sramecc+:xnack-")?
//!     .host_kernel("add_one", |launch| {
//!         // SAFETY: add_one(float* x, unsigned n).
//!         let n: u32 = unsafe { launch.arg(1) };
//!         let x = unsafe { launch.slice_mut::<f32>(0, n as usize) };
//!         x.iter_mut().for_each(|v| *v += 1.0);
//!         Ok(())
//!     })
//!     .start()?;
//! let device = test.device();
//! assert_eq!(device.arch_name(), "gfx90a:sramecc+:xnack-");
//! let buf = DeviceBuffer::from_slice(device, &[1.0f32, 2.0])?;
//! assert_eq!(buf.to_vec()?, [1.0, 2.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Each [`TestDevice::start`] loads its own copy of the runtime, so tests running in parallel
//! in one process can pretend to be different devices. Hand the code under test the testing
//! runtime's [`Device`] ([`TestRuntime::device`]) or [`Runtime`] ([`TestRuntime::runtime`]):
//! a library takes `&Device` and never loads a runtime itself. Code that must load one takes an
//! environment ([`Runtime::load_with_env`]; the application passes
//! [`ProcessEnv`](hip_sys::discovery::ProcessEnv)), and its test passes [`TestRuntime::env`],
//! which names this runtime without touching the process environment (`std::env::set_var`
//! is `unsafe` in edition 2024 and races with the tests running beside it):
//!
//! ```
//! use hipjit::prelude::*;
//! use hipjit::sys::discovery::Env;
//!
//! /// What an application's start-up does: `Runtime::load()` is this with the process
//! /// environment.
//! fn first_device(env: &impl Env) -> hipjit::Result<Device> {
//!     Ok(Runtime::load_with_env(env)?.device(0)?)
//! }
//!
//! # fn main() -> hipjit::Result<()> {
//! let test = hipjit::testing::TestDevice::new("gfx942:sramecc+:xnack-")?.start()?;
//! let device = first_device(&test.env())?;
//! assert_eq!(device.arch_name(), "gfx942:sramecc+:xnack-");
//! assert_eq!(device.runtime().path(), test.runtime().path());
//! // The production call: first_device(&hipjit::sys::discovery::ProcessEnv)
//! # Ok(())
//! # }
//! ```

mod host_kernel;

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hip_sys::device_prop::hipDeviceProp_tR0600;

use host_kernel::{launch_hook, Registry};
pub use host_kernel::{HostKernelFn, HostLaunch, LaunchRecord};

use crate::safe::device::{Device, DeviceProperties};
use crate::safe::error::{HipError, LoadError};
use crate::safe::runtime::Runtime;
use crate::target::amdgpu::{TargetId, TargetIdError};

/// The testing runtime's shared library, built by hipjit's build script from
/// `tests/fixtures/fake_hip.c` with `HIPJIT_TESTING` defined.
static RUNTIME_LIBRARY: &[u8] = include_bytes!(env!("HIPJIT_TESTING_RUNTIME"));

/// Why the testing runtime could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// The target ID does not parse.
    #[error("testing device: {0}")]
    TargetId(#[from] TargetIdError),
    /// Writing the runtime library to a temporary directory failed.
    #[error("testing runtime: cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The dynamic loader refused the runtime library, or it lacks a testing symbol.
    #[error("testing runtime {path}: {message}")]
    Open {
        /// The library.
        path: PathBuf,
        /// dlopen's or dlsym's message.
        message: String,
    },
    /// hipjit could not load it as a HIP runtime.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A HIP call to it failed.
    #[error(transparent)]
    Hip(#[from] HipError),
}

/// A device for the testing runtime to pretend to be, and the host implementations of its
/// kernels. Build it, then [`TestDevice::start`].
pub struct TestDevice {
    properties: DeviceProperties,
    kernels: HashMap<String, Arc<HostKernelFn>>,
}

impl std::fmt::Debug for TestDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDevice")
            .field("properties", &self.properties)
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TestDevice {
    /// A device with target ID `target_id` (`gfx90a:sramecc+:xnack-`, `gfx942`, `gfx1100`...)
    /// and the limits of a typical part of that processor: 64 KiB LDS per block (160 KiB on
    /// gfx950), 1024 threads per block, wavefront 64 on gfx9 and 32 on gfx10+, 64 GiB of
    /// memory, and 110 compute units (gfx90a), 304 (gfx942), 256 (gfx950), 48 (gfx1100) or 64.
    ///
    /// Errors: [`TestingError::TargetId`] when `target_id` does not parse.
    pub fn new(target_id: &str) -> Result<TestDevice, TestingError> {
        let target = TargetId::parse(target_id)?;
        let processor = target.processor().to_owned();
        let gfx10_plus = processor.len() > 5 && !processor.starts_with("gfx9");
        let compute_units = match processor.as_str() {
            "gfx90a" => 110,
            "gfx942" => 304,
            "gfx950" => 256,
            "gfx1100" => 48,
            _ => 64,
        };
        let lds = if processor == "gfx950" { 160 } else { 64 } * 1024;
        Ok(TestDevice {
            properties: DeviceProperties {
                name: format!("hipjit testing device ({processor})"),
                arch_name: target_id.to_owned(),
                target_id: Some(target),
                wavefront_size: if gfx10_plus { 32 } else { 64 },
                compute_units,
                lds_per_block: lds,
                max_threads_per_block: 1024,
                max_block_dims: [1024, 1024, 1024],
                max_grid_dims: [i32::MAX as u32, 65536, 65536],
                clock_khz: 1_700_000,
                total_global_mem: 64 << 30,
                total_const_mem: 2 << 30,
                l2_cache_bytes: 8 << 20,
                registers_per_block: 65536,
            },
            kernels: HashMap::new(),
        })
    }

    /// Changes the device's properties (compute units, limits, name...). `arch_name` and
    /// `target_id` are those given to [`TestDevice::new`]; changing `arch_name` changes what
    /// the runtime reports.
    pub fn properties(mut self, change: impl FnOnce(&mut DeviceProperties)) -> TestDevice {
        change(&mut self.properties);
        self.properties.target_id = TargetId::parse(&self.properties.arch_name).ok();
        self
    }

    /// Registers `f` as the host implementation of the kernel named `name` (its `.name` in the
    /// code object: the mangled name for a kernel without `extern "C"`).
    pub fn host_kernel(
        mut self,
        name: &str,
        f: impl Fn(&HostLaunch<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> TestDevice {
        self.kernels.insert(name.to_owned(), Arc::new(f));
        self
    }

    /// Writes a fresh copy of the testing runtime to a temporary directory, loads it, makes it
    /// report this device, and opens device 0.
    ///
    /// Errors: [`TestingError::Io`], [`TestingError::Open`], [`TestingError::Load`],
    /// [`TestingError::Hip`].
    pub fn start(self) -> Result<TestRuntime, TestingError> {
        let dir = tempfile::Builder::new()
            .prefix("hipjit-testing-")
            .tempdir()
            .map_err(|source| TestingError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let path = dir.path().join("libamdhip64.so");
        std::fs::write(&path, RUNTIME_LIBRARY).map_err(|source| TestingError::Io {
            path: path.clone(),
            source,
        })?;
        let registry = Arc::new(Registry::default());
        *registry.kernels.lock() = self.kernels;
        let lib = Dl::open(&path)?;
        let props = raw_properties(&self.properties);
        // SAFETY: fixture_set_properties(const void *, size_t) copies the bytes.
        unsafe {
            let set: unsafe extern "C" fn(*const c_void, usize) =
                std::mem::transmute(lib.sym(c"fixture_set_properties")?);
            set(
                &props as *const hipDeviceProp_tR0600 as *const c_void,
                std::mem::size_of::<hipDeviceProp_tR0600>(),
            );
        }
        // SAFETY: fixture_set_launch_hook(hook, user); the registry pointer stays valid for the
        // life of the process (one strong count is never given back: the library is never
        // unloaded and may call the hook at any time).
        unsafe {
            type Hook = unsafe extern "C" fn(
                *mut c_void,
                *const c_char,
                *const u32,
                u32,
                *mut c_void,
                *mut *mut c_void,
                *mut c_char,
                usize,
            ) -> i32;
            let set: unsafe extern "C" fn(Hook, *mut c_void) =
                std::mem::transmute(lib.sym(c"fixture_set_launch_hook")?);
            set(launch_hook, Arc::into_raw(registry.clone()) as *mut c_void);
        }
        let runtime = Runtime::load_from(&path)?;
        let device = runtime.device(0)?;
        Ok(TestRuntime {
            runtime,
            device,
            registry,
            path,
            _dir: dir,
        })
    }
}

/// A started testing runtime: its [`Runtime`], its one [`Device`], and the record of launches.
pub struct TestRuntime {
    runtime: Runtime,
    device: Device,
    registry: Arc<Registry>,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRuntime")
            .field("path", &self.path)
            .field("device", &self.device.arch_name())
            .finish()
    }
}

impl TestRuntime {
    /// The loaded runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Device 0, the pretended device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The runtime library's path (for `HIPJIT_HIP_LIBRARY`), valid while `self` lives.
    pub fn library_path(&self) -> &Path {
        &self.path
    }

    /// An environment naming this runtime (`HIPJIT_HIP_LIBRARY` = [`TestRuntime::library_path`],
    /// every other variable unset) for [`Runtime::load_with_env`]: code that loads the runtime
    /// itself finds this one, without `std::env::set_var`. Valid while `self` lives.
    pub fn env(&self) -> TestEnv {
        TestEnv {
            library: self.path.clone(),
        }
    }

    /// Registers (or replaces) the host implementation of kernel `name`.
    pub fn add_host_kernel(
        &self,
        name: &str,
        f: impl Fn(&HostLaunch<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.registry
            .kernels
            .lock()
            .insert(name.to_owned(), Arc::new(f));
    }

    /// Every launch so far, in order (those of kernels without a host implementation too).
    pub fn launches(&self) -> Vec<LaunchRecord> {
        self.registry.launches.lock().clone()
    }
}

/// The environment [`TestRuntime::env`] gives [`Runtime::load_with_env`]: `HIPJIT_HIP_LIBRARY`
/// names the testing runtime's library; every other variable (`HIP_PLATFORM`, `HIP_PATH`,
/// `ROCM_PATH`, `PATH`) reads as unset, so the process environment cannot steer the load
/// elsewhere.
#[derive(Debug, Clone)]
pub struct TestEnv {
    library: PathBuf,
}

impl hip_sys::discovery::Env for TestEnv {
    fn var_os(&self, name: &str) -> Option<std::ffi::OsString> {
        (name == crate::safe::runtime::LIBRARY_ENV).then(|| self.library.clone().into_os_string())
    }
}

/// The testing runtime library opened with `dlopen` (never closed, like every HIP runtime
/// hipjit opens).
struct Dl {
    handle: *mut c_void,
    path: PathBuf,
}

impl Dl {
    fn open(path: &Path) -> Result<Dl, TestingError> {
        let c =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| TestingError::Open {
                path: path.to_path_buf(),
                message: "the path contains a NUL byte".into(),
            })?;
        // SAFETY: a NUL-terminated path; the library's constructors are the C runtime's own.
        let handle = unsafe {
            libc::dlopen(
                c.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE,
            )
        };
        if handle.is_null() {
            return Err(TestingError::Open {
                path: path.to_path_buf(),
                message: dlerror(),
            });
        }
        Ok(Dl {
            handle,
            path: path.to_path_buf(),
        })
    }

    fn sym(&self, name: &std::ffi::CStr) -> Result<*mut c_void, TestingError> {
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        if p.is_null() {
            return Err(TestingError::Open {
                path: self.path.clone(),
                message: format!("missing symbol {}", name.to_string_lossy()),
            });
        }
        Ok(p)
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns a thread-local message or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown dlopen error".into();
    }
    // SAFETY: a NUL-terminated message.
    unsafe { std::ffi::CStr::from_ptr(e) }
        .to_string_lossy()
        .into_owned()
}

/// `props` in the HIP 6.0 layout the testing runtime serves.
fn raw_properties(props: &DeviceProperties) -> hipDeviceProp_tR0600 {
    // SAFETY: hipDeviceProp_tR0600 is plain data (integers, arrays, raw pointers): all-zero is
    // a valid value, as hipGetDeviceProperties callers memset it.
    let mut p: hipDeviceProp_tR0600 = unsafe { std::mem::zeroed() };
    let copy = |dst: &mut [c_char; 256], s: &str| {
        for (d, b) in dst.iter_mut().zip(s.bytes().take(255)) {
            *d = b as c_char;
        }
    };
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    copy(&mut p.name, &props.name);
    copy(&mut p.gcnArchName, &props.arch_name);
    p.totalGlobalMem = props.total_global_mem as usize;
    p.sharedMemPerBlock = props.lds_per_block as usize;
    p.regsPerBlock = int(props.registers_per_block);
    p.warpSize = int(props.wavefront_size);
    p.maxThreadsPerBlock = int(props.max_threads_per_block);
    p.maxThreadsDim = props.max_block_dims.map(int);
    p.maxGridSize = props.max_grid_dims.map(int);
    p.clockRate = int(props.clock_khz);
    p.totalConstMem = props.total_const_mem as usize;
    p.multiProcessorCount = int(props.compute_units);
    p.l2CacheSize = i32::try_from(props.l2_cache_bytes).unwrap_or(i32::MAX);
    p
}
