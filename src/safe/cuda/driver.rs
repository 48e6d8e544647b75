//! The CUDA driver (`libcuda.so.1`), opened with `dlopen` and its `cu*` entry points resolved
//! once into a process-wide table.
//!
//! The driver is a process-wide resource (one per process; contexts, modules and streams are
//! the driver's, not a loader's), so its table is a `static` filled once: the first successful
//! [`load`] wins and later calls return it. Opened with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE`
//! and never closed. A copy already loaded in the process (PyTorch's) is preferred
//! (`RTLD_NOLOAD`), so that its streams and ours are the same driver's.
//!
//! Types are the driver's C ABI (CUDA `cuda.h`): `CUresult` is a C enum (`c_int`), `CUdevice`
//! an `int`, `CUdeviceptr` an `unsigned long long`, handles are pointers.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use parking_lot::Mutex;

/// `CUresult`.
pub type CUresult = c_int;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;
/// Opaque driver handle (`CUcontext`, `CUstream`, `CUevent`, `CUmodule`, `CUfunction`,
/// `CUlibrary`, `CUkernel`).
pub type Handle = *mut c_void;

/// The file name of the driver library (`libcuda.so.1`, the name every driver installs).
pub const SONAME: &str = "libcuda.so.1";
/// The environment variable naming the driver library explicitly (a path).
pub const LIBRARY_ENV: &str = "HIPJIT_CUDA_LIBRARY";

/// An error loading the CUDA driver.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CudaLoadError {
    /// dlopen failed.
    #[error("cannot open the CUDA driver {path}: {message}")]
    Open {
        /// The path or name tried.
        path: String,
        /// dlerror's message.
        message: String,
    },
    /// A required entry point is missing.
    #[error("the CUDA driver {path} does not export {symbol} (hipjit needs a CUDA 12.4 or later driver)")]
    MissingSymbol {
        /// The symbol.
        symbol: &'static str,
        /// The library.
        path: PathBuf,
    },
}

macro_rules! driver_table {
    (
        required { $($req:ident : fn($($rt:ty),*);)* }
        optional { $($opt:ident : fn($($ot:ty),*);)* }
    ) => {
        /// The resolved `cu*` entry points (required ones as plain function pointers; the
        /// stream-ordered allocator, the library API, cooperative launch, stream capture
        /// and graphs as `Option`s; the versioned entry points, never the legacy plain names).
        #[allow(non_snake_case)]
        pub struct Driver {
            $(#[doc = concat!("`", stringify!($req), "`")] pub $req: unsafe extern "C" fn($($rt),*) -> CUresult,)*
            $(#[doc = concat!("`", stringify!($opt), "`")] pub $opt: Option<unsafe extern "C" fn($($ot),*) -> CUresult>,)*
            /// `cuEventElapsedTime_v2` when exported (CUDA 12.8+), else `cuEventElapsedTime`.
            pub cuEventElapsedTime: unsafe extern "C" fn(*mut f32, Handle, Handle) -> CUresult,
            /// `cuGetErrorName`.
            pub cuGetErrorName: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
            /// `cuGetErrorString`.
            pub cuGetErrorString: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
            /// The file the driver was loaded from.
            pub path: PathBuf,
        }

        /// The entry points hipjit requires of the driver, in table order.
        pub const REQUIRED_SYMBOLS: &[&str] = &[$(stringify!($req),)* "cuEventElapsedTime", "cuGetErrorName", "cuGetErrorString"];
        /// The entry points that are optional.
        pub const OPTIONAL_SYMBOLS: &[&str] = &[$(stringify!($opt)),*];

        impl Driver {
            fn resolve(h: *mut c_void, path: PathBuf) -> Result<Driver, CudaLoadError> {
                let missing = |symbol| CudaLoadError::MissingSymbol { symbol, path: path.clone() };
                Ok(Driver {
                    $(
                        // SAFETY: the type is cuda.h's declaration of the symbol of that name.
                        $req: unsafe { sym(h, concat!(stringify!($req), "\0")) }
                            .ok_or_else(|| missing(stringify!($req)))?,
                    )*
                    $(
                        // SAFETY: as above.
                        $opt: unsafe { sym(h, concat!(stringify!($opt), "\0")) },
                    )*
                    // SAFETY: both symbols have this signature (the _v2 fixes a timing bug).
                    cuEventElapsedTime: unsafe { sym(h, "cuEventElapsedTime_v2\0") }
                        .or_else(|| unsafe { sym(h, "cuEventElapsedTime\0") })
                        .ok_or_else(|| missing("cuEventElapsedTime"))?,
                    // SAFETY: cuda.h's declarations.
                    cuGetErrorName: unsafe { sym(h, "cuGetErrorName\0") }
                        .ok_or_else(|| missing("cuGetErrorName"))?,
                    // SAFETY: as above.
                    cuGetErrorString: unsafe { sym(h, "cuGetErrorString\0") }
                        .ok_or_else(|| missing("cuGetErrorString"))?,
                    path,
                })
            }

            /// Each optional entry point and whether the driver exports it.
            pub fn optional_present(&self) -> Vec<(&'static str, bool)> {
                vec![$((stringify!($opt), self.$opt.is_some())),*]
            }
        }
    };
}

driver_table! {
    required {
        cuInit: fn(c_uint);
        cuDriverGetVersion: fn(*mut c_int);
        cuDeviceGetCount: fn(*mut c_int);
        cuDeviceGet: fn(*mut CUdevice, c_int);
        cuDeviceGetName: fn(*mut c_char, c_int, CUdevice);
        cuDeviceGetAttribute: fn(*mut c_int, c_int, CUdevice);
        cuDeviceTotalMem_v2: fn(*mut usize, CUdevice);
        cuDevicePrimaryCtxRetain: fn(*mut Handle, CUdevice);
        cuCtxGetCurrent: fn(*mut Handle);
        cuCtxSetCurrent: fn(Handle);
        cuCtxSynchronize: fn();
        cuMemAlloc_v2: fn(*mut CUdeviceptr, usize);
        cuMemFree_v2: fn(CUdeviceptr);
        cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint);
        cuMemFreeHost: fn(*mut c_void);
        cuMemcpy: fn(CUdeviceptr, CUdeviceptr, usize);
        cuMemcpyAsync: fn(CUdeviceptr, CUdeviceptr, usize, Handle);
        cuMemcpyHtoDAsync_v2: fn(CUdeviceptr, *const c_void, usize, Handle);
        cuMemcpyDtoHAsync_v2: fn(*mut c_void, CUdeviceptr, usize, Handle);
        cuMemcpyDtoDAsync_v2: fn(CUdeviceptr, CUdeviceptr, usize, Handle);
        cuMemsetD8_v2: fn(CUdeviceptr, u8, usize);
        cuMemsetD8Async: fn(CUdeviceptr, u8, usize, Handle);
        cuMemGetInfo_v2: fn(*mut usize, *mut usize);
        cuStreamCreate: fn(*mut Handle, c_uint);
        cuStreamDestroy_v2: fn(Handle);
        cuStreamSynchronize: fn(Handle);
        cuStreamQuery: fn(Handle);
        cuStreamWaitEvent: fn(Handle, Handle, c_uint);
        cuEventCreate: fn(*mut Handle, c_uint);
        cuEventDestroy_v2: fn(Handle);
        cuEventRecord: fn(Handle, Handle);
        cuEventSynchronize: fn(Handle);
        cuEventQuery: fn(Handle);
        cuModuleLoadData: fn(*mut Handle, *const c_void);
        cuModuleUnload: fn(Handle);
        cuModuleGetFunction: fn(*mut Handle, Handle, *const c_char);
        cuModuleGetGlobal_v2: fn(*mut CUdeviceptr, *mut usize, Handle, *const c_char);
        cuLaunchKernel: fn(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void, *mut *mut c_void);
        cuFuncGetAttribute: fn(*mut c_int, c_int, Handle);
    }
    optional {
        cuMemAllocAsync: fn(*mut CUdeviceptr, usize, Handle);
        cuMemFreeAsync: fn(CUdeviceptr, Handle);
        cuFuncSetAttribute: fn(Handle, c_int, c_int);
        cuOccupancyMaxActiveBlocksPerMultiprocessor: fn(*mut c_int, Handle, c_int, usize);
        cuLaunchCooperativeKernel: fn(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void);
        cuLibraryLoadData: fn(*mut Handle, *const c_void, *mut c_int, *mut *mut c_void, c_uint, *mut c_int, *mut *mut c_void, c_uint);
        cuLibraryLoadFromFile: fn(*mut Handle, *const c_char, *mut c_int, *mut *mut c_void, c_uint, *mut c_int, *mut *mut c_void, c_uint);
        cuLibraryUnload: fn(Handle);
        cuLibraryGetKernel: fn(*mut Handle, Handle, *const c_char);
        cuLibraryGetKernelCount: fn(*mut c_uint, Handle);
        cuLibraryEnumerateKernels: fn(*mut Handle, c_uint, Handle);
        cuKernelGetFunction: fn(*mut Handle, Handle);
        cuDeviceCanAccessPeer: fn(*mut c_int, CUdevice, CUdevice);
        cuCtxEnablePeerAccess: fn(Handle, c_uint);
        cuMemcpyPeerAsync: fn(CUdeviceptr, Handle, CUdeviceptr, Handle, usize, Handle);
        cuStreamBeginCapture_v2: fn(Handle, c_int);
        cuStreamEndCapture: fn(Handle, *mut Handle);
        cuStreamIsCapturing: fn(Handle, *mut c_int);
        cuThreadExchangeStreamCaptureMode: fn(*mut c_int);
        cuGraphInstantiateWithFlags: fn(*mut Handle, Handle, u64);
        cuGraphLaunch: fn(Handle, Handle);
        cuGraphDestroy: fn(Handle);
        cuGraphExecDestroy: fn(Handle);
        cuGraphGetNodes: fn(Handle, *mut Handle, *mut usize);
        cuGraphNodeGetType: fn(Handle, *mut c_int);
        cuGraphExecKernelNodeSetParams_v2: fn(Handle, Handle, *const KernelNodeParams);
    }
}

/// `CUDA_KERNEL_NODE_PARAMS_v2` (cuda.h, CUDA 12.0 and later), the parameters of
/// `cuGraphExecKernelNodeSetParams_v2`: the function, grid and block dimensions, dynamic shared
/// memory in bytes, the `kernelParams` array, `extra`, and `kern`/`ctx` (NULL: use `func` and
/// the current context).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case)]
pub struct KernelNodeParams {
    /// `CUfunction`.
    pub func: Handle,
    /// Grid x, blocks.
    pub gridDimX: c_uint,
    /// Grid y, blocks.
    pub gridDimY: c_uint,
    /// Grid z, blocks.
    pub gridDimZ: c_uint,
    /// Block x, threads.
    pub blockDimX: c_uint,
    /// Block y, threads.
    pub blockDimY: c_uint,
    /// Block z, threads.
    pub blockDimZ: c_uint,
    /// Dynamic shared memory per block, bytes.
    pub sharedMemBytes: c_uint,
    /// Pointers to each argument.
    pub kernelParams: *mut *mut c_void,
    /// `extra` (NULL).
    pub extra: *mut *mut c_void,
    /// `CUkernel`, used only when `func` is NULL.
    pub kern: Handle,
    /// `CUcontext` (NULL: the current one).
    pub ctx: Handle,
}

const _: () = assert!(std::mem::size_of::<KernelNodeParams>() == 72);

/// # Safety
/// `F` must be the function-pointer type of the C declaration of `name` (NUL-terminated).
unsafe fn sym<F: Copy>(h: *mut c_void, name: &str) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    let cname = CStr::from_bytes_with_nul(name.as_bytes()).ok()?;
    // SAFETY: live handle (never closed), NUL-terminated name.
    let p = unsafe { libc::dlsym(h, cname.as_ptr()) };
    if p.is_null() {
        None
    } else {
        // SAFETY: pointer-sized function-pointer type; the caller guarantees the signature.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

static DRIVER: OnceLock<Driver> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// The driver, when [`load`] has succeeded in this process.
#[inline]
pub fn get() -> Option<&'static Driver> {
    DRIVER.get()
}

/// Loads the driver once per process: `path` when given, else `HIPJIT_CUDA_LIBRARY`, else a
/// `libcuda.so.1` already loaded in the process, else `libcuda.so.1` through the dynamic
/// loader. When a driver is already loaded, returns it (whatever `path` says).
///
/// Errors: [`CudaLoadError::Open`] with dlopen's message, [`CudaLoadError::MissingSymbol`].
pub fn load(path: Option<&Path>) -> Result<&'static Driver, CudaLoadError> {
    if let Some(d) = DRIVER.get() {
        return Ok(d);
    }
    let _guard = LOADING.lock();
    if let Some(d) = DRIVER.get() {
        return Ok(d);
    }
    let env = std::env::var_os(LIBRARY_ENV).filter(|v| !v.is_empty());
    let name: &OsStr = match (path, &env) {
        (Some(p), _) => p.as_os_str(),
        (None, Some(e)) => e.as_os_str(),
        (None, None) => OsStr::new(SONAME),
    };
    let cname = CString::new(name.as_bytes()).map_err(|_| CudaLoadError::Open {
        path: name.to_string_lossy().into_owned(),
        message: "the path contains a NUL byte".into(),
    })?;
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: NUL-terminated name; RTLD_NOLOAD only looks for a loaded copy.
    let mut h = unsafe { libc::dlopen(cname.as_ptr(), flags | libc::RTLD_NOLOAD) };
    if h.is_null() {
        // SAFETY: as above; the library's initialisers run (the CUDA driver's are safe to run).
        h = unsafe { libc::dlopen(cname.as_ptr(), flags) };
    }
    if h.is_null() {
        return Err(CudaLoadError::Open {
            path: name.to_string_lossy().into_owned(),
            message: dlerror(),
        });
    }
    // SAFETY: cuInit has this signature in every driver.
    let file = unsafe { sym::<*mut c_void>(h, "cuInit\0") }
        .and_then(file_of)
        .unwrap_or_else(|| PathBuf::from(name));
    let driver = Driver::resolve(h, file)?;
    Ok(DRIVER.get_or_init(|| driver))
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a thread-local string valid until the next dl* call.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn file_of(addr: *mut c_void) -> Option<PathBuf> {
    // SAFETY: all-zero Dl_info is valid; dladdr fills it for a mapped address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is a symbol address of a loaded library.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let bytes = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    Some(PathBuf::from(OsStr::from_bytes(bytes)))
}
