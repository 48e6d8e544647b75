//! A code object loaded on a device ([`Library`]), its kernels and its device globals.
//!
//! The runtime is always handed a raw ELF: hipjit's code-object reader unbundles and
//! decompresses first, and before loading checks the code object's target ID against the
//! device's (`TargetId::runs_on`: a feature `any` in the code object matches `on` and `off`) and
//! its code-object version against those the runtime accepts
//! ([`crate::safe::runtime::code_object_versions_for`]).
//!
//! On AMD, loading goes through the HIP library API when the runtime exports all five of its
//! symbols (`hipLibraryLoadData` when exported, else `hipLibraryLoadFromFile` on a temporary
//! file; no JIT options), else through the module API (`hipModuleLoadData`), with the kernel
//! list read from the code object's metadata. On HIP's NVIDIA platform a cubin goes through the
//! module API (`cuModuleLoadData`), the cheaper load, unless the library API is chosen
//! ([`crate::safe::runtime::Runtime::set_code_object_loader`]).
//! [`crate::safe::runtime::Runtime::code_object_loader`] says which.

use std::ffi::{c_void, CString};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use hip_sys as sys;

use crate::code_object::{CodeObject, KernelInfo};
use crate::safe::device::Device;
use crate::safe::error::{HipError, LibraryError};
use crate::safe::kernel::{Kernel, Resolved};
use crate::safe::runtime::CodeObjectLoader;

#[derive(Debug, Clone, Copy)]
enum Handle {
    Module(sys::hipModule_t),
    Library(sys::hipLibrary_t),
}

/// A code object loaded on one device: a shared handle (like `Arc`), cheap to clone, unloaded
/// (`hipModuleUnload` or `hipLibraryUnload`) when the last clone, [`Kernel`] and
/// [`DeviceGlobal`] taken from it is dropped. `Send + Sync`: kernels may be looked up and
/// launched from any thread.
#[derive(Clone)]
pub struct Library {
    inner: Arc<Loaded>,
}

/// What a [`Library`] shares among its clones and kernels; unloads on drop.
struct Loaded {
    device: Device,
    handle: Handle,
    kernels: Vec<KernelInfo>,
    /// The kernels asked for so far, by name: [`Library::kernel`] asks the runtime once per
    /// name.
    resolved: parking_lot::Mutex<Vec<(Arc<str>, Resolved)>>,
    // The ELF handed to the runtime, kept alive as long as the module in case the runtime
    // refers to the image instead of copying it.
    _elf: Box<[u8]>,
}

// SAFETY: module and library handles may be used from any thread; the device is bound before
// each call.
unsafe impl Send for Loaded {}
// SAFETY: the runtime synchronizes lookups on a module internally; `&Loaded` mutates only
// the kernels asked for, behind their mutex.
unsafe impl Sync for Loaded {}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("device", &self.inner.device.ordinal())
            .field("handle", &self.inner.handle)
            .field("kernels", &self.kernel_names().collect::<Vec<_>>())
            .finish()
    }
}

impl Library {
    fn new(device: &Device, handle: Handle, kernels: Vec<KernelInfo>, elf: Box<[u8]>) -> Library {
        Library {
            inner: Arc::new(Loaded {
                device: device.clone(),
                handle,
                kernels,
                resolved: parking_lot::Mutex::new(Vec::new()),
                _elf: elf,
            }),
        }
    }

    /// Whether `self` and `other` are clones of one loaded code object.
    pub fn same_as(&self, other: &Library) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Loads `code_object` on `device`.
    ///
    /// Errors: [`LibraryError::TargetMismatch`] (naming both target IDs),
    /// [`LibraryError::CodeObjectVersion`] (naming the version and the runtime's),
    /// [`LibraryError::UnknownDeviceTarget`], or the runtime's error
    /// (`hipErrorInvalidImage`, ...) from `hipModuleLoadData`/`hipLibraryLoad*`.
    pub fn load(device: &Device, code_object: &CodeObject) -> Result<Library, LibraryError> {
        let rt = device.runtime();
        let device_target =
            device
                .target_id()
                .ok_or_else(|| LibraryError::UnknownDeviceTarget {
                    ordinal: device.ordinal(),
                    arch_name: device.arch_name().to_owned(),
                })?;
        if !code_object.target_id().runs_on(device_target) {
            return Err(LibraryError::TargetMismatch {
                code_object: code_object.target_id().clone(),
                device: device_target.clone(),
                ordinal: device.ordinal(),
            });
        }
        let version = code_object.code_object_version();
        if let Some(accepted) = rt.code_object_versions() {
            if !accepted.contains(&version) {
                return Err(LibraryError::CodeObjectVersion {
                    version,
                    runtime_version: rt.version().map(|v| v.to_string()).unwrap_or_default(),
                    accepted: accepted.to_vec(),
                });
            }
        }
        let elf: Box<[u8]> = code_object.elf().into();
        device.bind()?;
        let loader = rt.code_object_loader();
        let handle = match loader {
            CodeObjectLoader::ModuleApi => load_module(device, &elf)?,
            CodeObjectLoader::LibraryApi => Handle::Library(load_library(device, &elf)?),
        };
        tracing::debug!(
            loader = %loader,
            target = %code_object.target_id(),
            version,
            kernels = code_object.kernels().len(),
            "loaded a code object"
        );
        Ok(Library::new(
            device,
            handle,
            code_object.kernels().to_vec(),
            elf,
        ))
    }

    /// Loads a cubin on a device of HIP's NVIDIA platform, through the runtime's
    /// [`Runtime::code_object_loader`](crate::safe::runtime::Runtime::code_object_loader): the module
    /// API by default (`hipModuleLoadData` -> `cuModuleLoadData`), the library API when chosen
    /// (`hipLibraryLoadData` -> `cuLibraryLoadData`; the module API when the driver lacks it).
    /// The kernel list (and the parameter sizes the launch checks use) is the cubin's.
    ///
    /// Errors: [`LibraryError::UnknownDeviceTarget`] when the device is not an NVIDIA one,
    /// [`LibraryError::SmMismatch`] naming both SM targets, or the driver's error
    /// (`hipErrorInvalidImage`, `hipErrorNoBinaryForGpu`...).
    pub fn load_cubin(
        device: &Device,
        cubin: &crate::code_object::cubin::Cubin,
    ) -> Result<Library, LibraryError> {
        let rt = device.runtime();
        let device_sm = device
            .sm_target()
            .ok_or_else(|| LibraryError::UnknownDeviceTarget {
                ordinal: device.ordinal(),
                arch_name: device.arch_name().to_owned(),
            })?;
        if !cubin.target().runs_on(device_sm) {
            return Err(LibraryError::SmMismatch {
                cubin: cubin.target().to_string(),
                device: device_sm.to_string(),
                ordinal: device.ordinal(),
            });
        }
        let elf: Box<[u8]> = cubin.elf().into();
        device.bind()?;
        let handle = match rt.code_object_loader() {
            CodeObjectLoader::LibraryApi if rt.api().hipLibraryLoadData.is_some() => {
                Handle::Library(load_library(device, &elf)?)
            }
            _ => load_module(device, &elf)?,
        };
        tracing::debug!(
            target = %cubin.target(),
            kernels = cubin.kernels().len(),
            "loaded a cubin"
        );
        Ok(Library::new(device, handle, cubin.kernels().to_vec(), elf))
    }

    /// The number of kernels the runtime reports for this library (`hipLibraryGetKernelCount`),
    /// `None` for a module.
    ///
    /// Errors: the runtime's error.
    pub fn runtime_kernel_count(&self) -> Result<Option<u32>, LibraryError> {
        let (Handle::Library(l), Some(count)) = (
            self.inner.handle,
            self.inner.device.runtime().api().hipLibraryGetKernelCount,
        ) else {
            return Ok(None);
        };
        self.inner.device.bind()?;
        let mut n = 0;
        // SAFETY: live library, valid out pointer.
        self.inner
            .device
            .runtime()
            .check(unsafe { count(&mut n, l) }, "hipLibraryGetKernelCount")?;
        Ok(Some(n))
    }

    /// The kernels the runtime enumerates for this library, as functions
    /// (`hipLibraryGetKernelCount`, `hipLibraryEnumerateKernels`, then `hipKernelGetFunction`
    /// on each); `None` for a module or a runtime without those entry points. The handles are
    /// valid while the library is loaded.
    ///
    /// Errors: the runtime's error.
    pub fn enumerated_functions(&self) -> Result<Option<Vec<sys::hipFunction_t>>, LibraryError> {
        let rt = self.inner.device.runtime();
        let api = rt.api();
        let (Handle::Library(l), Some(count), Some(enumerate), Some(get)) = (
            self.inner.handle,
            api.hipLibraryGetKernelCount,
            api.hipLibraryEnumerateKernels,
            api.hipKernelGetFunction,
        ) else {
            return Ok(None);
        };
        self.inner.device.bind()?;
        let mut n = 0;
        // SAFETY: live library, valid out pointer.
        rt.check(unsafe { count(&mut n, l) }, "hipLibraryGetKernelCount")?;
        let mut kernels: Vec<sys::hipKernel_t> = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: room for exactly `n` handles.
        rt.check(
            unsafe { enumerate(kernels.as_mut_ptr(), n, l) },
            "hipLibraryEnumerateKernels",
        )?;
        let mut functions = Vec::with_capacity(kernels.len());
        for k in kernels {
            let mut f: sys::hipFunction_t = std::ptr::null_mut();
            // SAFETY: a kernel handle of this live library, valid out pointer.
            rt.check(unsafe { get(&mut f, k) }, "hipKernelGetFunction")?;
            functions.push(f);
        }
        Ok(Some(functions))
    }

    /// Reads a code object (raw ELF, offload bundle or compressed bundle) from `bytes`, picks
    /// the entry for the device's target ID, and loads it ([`Library::load`]).
    ///
    /// On HIP's NVIDIA platform, a cubin (an ELF with `e_machine` `EM_CUDA`) is loaded with
    /// [`Library::load_cubin`].
    ///
    /// Errors: [`LibraryError::CodeObject`] when the bytes are not a code object, else as
    /// [`Library::load`].
    pub fn load_bytes(device: &Device, bytes: &[u8]) -> Result<Library, LibraryError> {
        use crate::code_object::cubin::{Cubin, EM_CUDA};
        let is_cubin = bytes.len() >= 20
            && bytes.starts_with(b"\x7fELF")
            && u16::from_le_bytes([bytes[18], bytes[19]]) == EM_CUDA;
        if is_cubin && device.runtime().platform() == crate::safe::runtime::Platform::Nvidia {
            if let Ok(cubin) = Cubin::from_bytes(bytes) {
                return Self::load_cubin(device, &cubin);
            }
        }
        match CodeObject::from_bytes(bytes, device.target_id()) {
            Ok(co) => Self::load(device, &co),
            // No entry for the device: when the bytes hold a single code object, let `load`
            // report the mismatch with the device's ordinal and both target IDs.
            Err(e) => match CodeObject::from_bytes(bytes, None) {
                Ok(co) => Self::load(device, &co),
                Err(_) => Err(e.into()),
            },
        }
    }

    /// [`Library::load_bytes`] on the contents of the file at `path`.
    ///
    /// Errors: [`LibraryError::Io`] naming the path, else as [`Library::load_bytes`].
    pub fn load_file(device: &Device, path: impl AsRef<Path>) -> Result<Library, LibraryError> {
        let path = path.as_ref();
        let bytes = crate::fs::read::read_file(
            path,
            crate::fs::read::CODE_OBJECT_LIMIT,
            "a code object",
            crate::fs::read::Streams::None,
        )
        .map_err(|e| LibraryError::Io {
            path: path.to_path_buf(),
            source: e.into_io_error(),
        })?;
        Self::load_bytes(device, &bytes)
    }

    /// The device the library is loaded on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// How the library was loaded.
    pub fn loader(&self) -> CodeObjectLoader {
        match self.inner.handle {
            Handle::Module(_) => CodeObjectLoader::ModuleApi,
            Handle::Library(_) => CodeObjectLoader::LibraryApi,
        }
    }

    /// The kernels the code object's metadata declares.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.inner.kernels
    }

    /// The names of the kernels the code object declares.
    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.inner.kernels.iter().map(|k| k.name.as_str())
    }

    /// The kernel `name` (its `.name` in the code object's metadata; for C++ kernels without
    /// `extern "C"`, the mangled name). The function and its attributes are asked of the runtime
    /// the first time a name is asked for; later calls for it make no runtime call.
    ///
    /// Errors: [`LibraryError::KernelNotFound`] listing the kernels there are (checked against
    /// the metadata before asking the runtime), the runtime's error from
    /// `hipModuleGetFunction` / `hipLibraryGetKernel` / `hipKernelGetFunction`, or
    /// [`LibraryError::Unsupported`] when the library API gives no way to pick a kernel by name
    /// (no `hipLibraryGetKernel` and more than one kernel).
    pub fn kernel(&self, name: &str) -> Result<Kernel, LibraryError> {
        let known = self
            .inner
            .resolved
            .lock()
            .iter()
            .find(|(n, _)| **n == *name)
            .map(|(n, r)| (Arc::clone(n), r.clone()));
        if let Some((name, r)) = known {
            return Ok(Kernel::from_resolved(self.clone(), name, r));
        }
        let info = self.inner.kernels.iter().position(|k| k.name == name);
        if info.is_none() && !self.inner.kernels.is_empty() {
            return Err(LibraryError::KernelNotFound {
                name: name.to_owned(),
                available: self.kernel_names().map(str::to_owned).collect(),
            });
        }
        let cname = CString::new(name).map_err(|_| LibraryError::NulInName(name.to_owned()))?;
        let rt = self.inner.device.runtime();
        self.inner.device.bind()?;
        let mut f: sys::hipFunction_t = std::ptr::null_mut();
        match self.inner.handle {
            Handle::Module(m) => {
                // SAFETY: live module, NUL-terminated name, valid out pointer.
                rt.check(
                    unsafe { (rt.api().hipModuleGetFunction)(&mut f, m, cname.as_ptr()) },
                    "hipModuleGetFunction",
                )?;
            }
            Handle::Library(l) => {
                let k = self.library_kernel(l, &cname, info.is_some())?;
                let get = rt
                    .api()
                    .hipKernelGetFunction
                    .ok_or(LibraryError::Unsupported {
                        symbol: "hipKernelGetFunction",
                    })?;
                // SAFETY: live kernel handle, valid out pointer.
                rt.check(unsafe { get(&mut f, k) }, "hipKernelGetFunction")?;
            }
        }
        let r = Kernel::resolve(self, f, info);
        let mut resolved = self.inner.resolved.lock();
        // A thread that resolved the name meanwhile was first: its record (and the dynamic LDS
        // raise every `Kernel` of the function shares) is the one kept.
        let (name, r) = match resolved.iter().find(|(n, _)| **n == *name) {
            Some((n, first)) => (Arc::clone(n), first.clone()),
            None => {
                let n: Arc<str> = name.into();
                resolved.push((Arc::clone(&n), r.clone()));
                (n, r)
            }
        };
        drop(resolved);
        Ok(Kernel::from_resolved(self.clone(), name, r))
    }

    fn library_kernel(
        &self,
        l: sys::hipLibrary_t,
        cname: &CString,
        declared: bool,
    ) -> Result<sys::hipKernel_t, LibraryError> {
        let rt = self.inner.device.runtime();
        let mut k: sys::hipKernel_t = std::ptr::null_mut();
        if let Some(get) = rt.api().hipLibraryGetKernel {
            // SAFETY: live library, NUL-terminated name, valid out pointer.
            rt.check(
                unsafe { get(&mut k, l, cname.as_ptr()) },
                "hipLibraryGetKernel",
            )?;
            return Ok(k);
        }
        // Without hipLibraryGetKernel, a library with exactly one kernel (the one asked for) can
        // still be served through enumeration.
        let (Some(count_fn), Some(enumerate)) = (
            rt.api().hipLibraryGetKernelCount,
            rt.api().hipLibraryEnumerateKernels,
        ) else {
            return Err(LibraryError::Unsupported {
                symbol: "hipLibraryGetKernel",
            });
        };
        let mut count = 0;
        // SAFETY: live library, valid out pointer.
        rt.check(
            unsafe { count_fn(&mut count, l) },
            "hipLibraryGetKernelCount",
        )?;
        if count != 1 || !declared || self.inner.kernels.len() != 1 {
            return Err(LibraryError::Unsupported {
                symbol: "hipLibraryGetKernel",
            });
        }
        // SAFETY: room for exactly `count` = 1 handle.
        rt.check(
            unsafe { enumerate(&mut k, 1, l) },
            "hipLibraryEnumerateKernels",
        )?;
        Ok(k)
    }

    /// The device global `name` (`hipModuleGetGlobal`): its address and size. Module API only.
    ///
    /// Errors: [`LibraryError::NeedsModuleApi`] for a library loaded through the library API,
    /// or the runtime's error (`hipErrorNotFound`...).
    pub fn global(&self, name: &str) -> Result<DeviceGlobal, LibraryError> {
        let Handle::Module(m) = self.inner.handle else {
            return Err(LibraryError::NeedsModuleApi {
                what: "hipModuleGetGlobal",
            });
        };
        let cname = CString::new(name).map_err(|_| LibraryError::NulInName(name.to_owned()))?;
        let rt = self.inner.device.runtime();
        self.inner.device.bind()?;
        let mut ptr: sys::hipDeviceptr_t = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: live module, valid out pointers, NUL-terminated name.
        rt.check(
            unsafe {
                (rt.api().hipModuleGetGlobal)(
                    &mut ptr,
                    &mut size as *mut usize as _,
                    m,
                    cname.as_ptr(),
                )
            },
            "hipModuleGetGlobal",
        )?;
        Ok(DeviceGlobal {
            lib: self.clone(),
            ptr,
            size,
        })
    }
}

/// Loads `image` through the module API (`hipModuleLoadData`). The caller keeps `image` alive
/// with the returned module; the device is already bound.
fn load_module(device: &Device, image: &[u8]) -> Result<Handle, HipError> {
    crate::safe::capture_guard::check_not_capturing(device, None, "hipModuleLoadData")?;
    let rt = device.runtime();
    let mut m: sys::hipModule_t = std::ptr::null_mut();
    // SAFETY: `image` is a complete code object (ELF or cubin) that outlives the module.
    rt.check(
        unsafe { (rt.api().hipModuleLoadData)(&mut m, image.as_ptr() as *const c_void) },
        "hipModuleLoadData",
    )?;
    Ok(Handle::Module(m))
}

fn load_library(device: &Device, elf: &[u8]) -> Result<sys::hipLibrary_t, LibraryError> {
    let rt = device.runtime();
    let call = if rt.api().hipLibraryLoadData.is_some() {
        "hipLibraryLoadData"
    } else {
        "hipLibraryLoadFromFile"
    };
    crate::safe::capture_guard::check_not_capturing(device, None, call)?;
    let mut l: sys::hipLibrary_t = std::ptr::null_mut();
    if let Some(load_data) = rt.api().hipLibraryLoadData {
        // SAFETY: complete ELF image; no JIT or library options (count 0, null arrays).
        rt.check(
            unsafe {
                load_data(
                    &mut l,
                    elf.as_ptr() as *const c_void,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                )
            },
            "hipLibraryLoadData",
        )?;
        return Ok(l);
    }
    let load_file = rt
        .api()
        .hipLibraryLoadFromFile
        .ok_or(LibraryError::Unsupported {
            symbol: "hipLibraryLoadFromFile",
        })?;
    let dir = tempfile::Builder::new()
        .prefix("hipjit-co-")
        .tempdir()
        .map_err(|source| LibraryError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let path = dir.path().join("code_object.elf");
    std::fs::write(&path, elf).map_err(|source| LibraryError::Io {
        path: path.clone(),
        source,
    })?;
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| LibraryError::NulInName(path.display().to_string()))?;
    // SAFETY: NUL-terminated path of a complete ELF file; no options.
    rt.check(
        unsafe {
            load_file(
                &mut l,
                cpath.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        },
        "hipLibraryLoadFromFile",
    )?;
    Ok(l)
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let rt = self.device.runtime();
        if let Err(e) = self.device.bind() {
            tracing::error!(error = %e, "cannot bind the device to unload a code object");
        }
        let r: Result<(), HipError> = match self.handle {
            // SAFETY: loaded by hipModuleLoadData, unloaded once: the last Library, Kernel and
            // DeviceGlobal holding it are gone.
            Handle::Module(m) => {
                rt.check(unsafe { (rt.api().hipModuleUnload)(m) }, "hipModuleUnload")
            }
            Handle::Library(l) => match rt.api().hipLibraryUnload {
                // SAFETY: loaded by hipLibraryLoad*, unloaded once.
                Some(unload) => rt.check(unsafe { unload(l) }, "hipLibraryUnload"),
                None => {
                    tracing::error!("the runtime lost hipLibraryUnload; library leaked");
                    Ok(())
                }
            },
        };
        if let Err(e) = r {
            tracing::error!(error = %e, "failed to unload a code object");
        }
    }
}

/// A global variable of a loaded code object (`hipModuleGetGlobal`): device address and size
/// in bytes. Keeps its [`Library`] loaded.
pub struct DeviceGlobal {
    lib: Library,
    ptr: sys::hipDeviceptr_t,
    size: usize,
}

// SAFETY: a device address may be used from any thread; the device is bound before each call,
// and writing takes `&mut self`.
unsafe impl Send for DeviceGlobal {}
// SAFETY: `&DeviceGlobal` only reads.
unsafe impl Sync for DeviceGlobal {}

impl fmt::Debug for DeviceGlobal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceGlobal")
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .finish()
    }
}

impl DeviceGlobal {
    /// The device address.
    pub fn as_raw(&self) -> sys::hipDeviceptr_t {
        self.ptr
    }

    /// The size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.size
    }

    /// Writes `bytes` (exactly [`DeviceGlobal::size_bytes`] long) to the global (`hipMemcpy`).
    ///
    /// Errors: `hipErrorInvalidValue` on a size mismatch, or the runtime's error.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), HipError> {
        self.check(bytes.len())?;
        let d = self.lib.device();
        d.bind()?;
        let rt = d.runtime();
        // SAFETY: the global holds `size` bytes; `bytes` is that long.
        rt.check(
            unsafe {
                (rt.api().hipMemcpy)(
                    self.ptr as _,
                    bytes.as_ptr() as _,
                    self.size,
                    sys::hipMemcpyHostToDevice,
                )
            },
            "hipMemcpy",
        )
    }

    /// Reads the global's bytes (`hipMemcpy`).
    ///
    /// Errors: the runtime's error.
    pub fn read(&self) -> Result<Vec<u8>, HipError> {
        let mut out = vec![0u8; self.size];
        let d = self.lib.device();
        d.bind()?;
        let rt = d.runtime();
        // SAFETY: `out` holds `size` bytes.
        rt.check(
            unsafe {
                (rt.api().hipMemcpy)(
                    out.as_mut_ptr() as _,
                    self.ptr as _,
                    self.size,
                    sys::hipMemcpyDeviceToHost,
                )
            },
            "hipMemcpy",
        )?;
        Ok(out)
    }

    fn check(&self, len: usize) -> Result<(), HipError> {
        if len == self.size {
            Ok(())
        } else {
            Err(HipError::new(
                1,
                "hipMemcpy",
                None,
                format!(
                    "refused by hipjit before the call: {len} bytes for a device global of {} \
                     bytes",
                    self.size
                ),
            ))
        }
    }
}
