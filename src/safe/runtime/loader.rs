//! Finding and opening the HIP runtime library with `dlopen`, and resolving symbols with
//! `dlsym`.
//!
//! The library is opened with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE` and never closed: a GPU
//! runtime keeps threads and driver state that do not survive being unmapped.

use std::ffi::{c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use hip_sys::discovery::{self, Origin};

use crate::safe::error::LoadError;

/// The runtime's file names, newest first after the unversioned development link
/// (`libamdhip64.so`); packaged ROCm 10 runtimes ship only `.so.7`.
pub const SONAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// The environment variable naming the runtime library explicitly.
pub const LIBRARY_ENV: &str = "HIPJIT_HIP_LIBRARY";

/// How the loaded library was found, in the order they are tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A path handed to [`crate::safe::runtime::Runtime::load_from`].
    Explicit,
    /// The `HIPJIT_HIP_LIBRARY` environment variable.
    Env,
    /// A HIP runtime already loaded in the process (found with `RTLD_NOLOAD`).
    AlreadyLoaded,
    /// `lib/` under an installation root of `hip_sys::discovery`.
    Root(Origin),
    /// A soname resolved by the dynamic loader (`ld.so.conf`, `LD_LIBRARY_PATH`, `/usr/lib`).
    Soname,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Explicit => f.write_str("explicit path"),
            Found::Env => f.write_str(LIBRARY_ENV),
            Found::AlreadyLoaded => f.write_str("already loaded in the process"),
            Found::Root(origin) => write!(f, "lib/ under {origin}"),
            Found::Soname => f.write_str("dynamic loader search"),
        }
    }
}

/// An open library handle. Never closed.
#[derive(Debug)]
pub(crate) struct Handle(pub(crate) *mut c_void);

// SAFETY: a dlopen handle is an opaque token; dlsym and dladdr are thread-safe in glibc, and the
// handle is never closed (RTLD_NODELETE, no dlclose), so it stays valid on every thread.
unsafe impl Send for Handle {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Handle {}

impl Handle {
    /// The address of `name` in this library (or its dependencies), or `None`.
    pub(crate) fn sym_addr(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: the handle is a live dlopen handle (never closed); `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }

    /// `name` as a function pointer of type `F`, or `None` when it is not exported.
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "C" fn` type matching the C declaration of `name`.
    pub(crate) unsafe fn sym<F: Copy>(&self, name: &CStr) -> Option<F> {
        const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
        let p = self.sym_addr(name)?;
        // SAFETY: `F` is a function-pointer type of pointer size (checked above), `p` is a
        // non-null code address; the caller guarantees the signature.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// The file this handle's library was loaded from: the link-map name the dynamic loader
    /// records for it (`dlinfo(RTLD_DI_LINKMAP)`), which is the path found for a soname and the
    /// path given for a file. `None` when the loader records no name.
    pub(crate) fn file(&self) -> Option<PathBuf> {
        /// The leading fields of glibc's `struct link_map` (`<link.h>`), the only ones read.
        #[repr(C)]
        struct LinkMap {
            l_addr: usize,
            l_name: *const std::ffi::c_char,
        }
        let mut map: *const LinkMap = std::ptr::null();
        // SAFETY: the handle is a live dlopen handle; RTLD_DI_LINKMAP writes one pointer to
        // the library's `struct link_map` into `map`.
        let rc = unsafe {
            libc::dlinfo(
                self.0,
                libc::RTLD_DI_LINKMAP,
                (&mut map as *mut *const LinkMap).cast(),
            )
        };
        if rc != 0 || map.is_null() {
            return None;
        }
        // SAFETY: `map` points to the loader's link map of a library that is never unloaded;
        // `l_name` is its NUL-terminated name (possibly empty), owned by the loader.
        let name = unsafe {
            let name = (*map).l_name;
            if name.is_null() {
                return None;
            }
            CStr::from_ptr(name)
        };
        (!name.to_bytes().is_empty()).then(|| PathBuf::from(OsStr::from_bytes(name.to_bytes())))
    }

    /// The file the library containing `addr` was loaded from (`dladdr`).
    pub(crate) fn file_of(addr: *mut c_void) -> Option<PathBuf> {
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: dladdr only writes `info`; `addr` is any address.
        let ok = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
        if ok == 0 {
            return None;
        }
        // SAFETY: dladdr returned non-zero, so it filled `info`.
        let info = unsafe { info.assume_init() };
        if info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: dli_fname is a NUL-terminated string owned by the dynamic loader.
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
    }
}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated thread-local string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// dlopen with the flags of this module; `noload` asks only for an already loaded library.
pub(crate) fn open(name: &OsStr, noload: bool) -> Result<Handle, String> {
    let c = CString::new(name.as_bytes()).map_err(|_| "the path contains a NUL byte".to_owned())?;
    let mut flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    if noload {
        flags |= libc::RTLD_NOLOAD;
    }
    // SAFETY: `c` is NUL-terminated; loading runs the library's initialisers, which is the
    // purpose of this call.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dlerror_string())
    } else {
        Ok(Handle(h))
    }
}

/// Paths of HIP runtimes mapped into this process, from `/proc/self/maps`.
fn mapped_runtimes() -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let p = Path::new(path);
        let is_hip = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("libamdhip64.so"));
        if is_hip && !found.iter().any(|f| f == p) {
            found.push(p.to_path_buf());
        }
    }
    found
}

/// Opens the HIP runtime: `explicit`, else `HIPJIT_HIP_LIBRARY`, else one already loaded,
/// else `lib/<soname>` under `HIP_PATH`, `ROCM_PATH`, the Python packages of the active
/// environment (`hip_sys::discovery::python`), `/opt/rocm`, else the sonames.
pub(crate) fn open_runtime(
    explicit: Option<&Path>,
    env: &impl discovery::Env,
) -> Result<(Handle, Found), LoadError> {
    if let Some(path) = explicit {
        return open(path.as_os_str(), false)
            .map(|h| (h, Found::Explicit))
            .map_err(|reason| LoadError::Open {
                path: path.to_path_buf(),
                reason,
            });
    }
    if let Some(v) = env.var_os(LIBRARY_ENV).filter(|v| !v.is_empty()) {
        return open(&v, false).map(|h| (h, Found::Env)).map_err(|reason| {
            LoadError::InvalidEnvPath {
                path: PathBuf::from(v),
                reason,
            }
        });
    }
    let mut tried: Vec<(String, String)> = Vec::new();
    // A runtime already in the process: a framework's streams belong to its copy.
    for path in mapped_runtimes() {
        if let Ok(h) = open(path.as_os_str(), true) {
            return Ok((h, Found::AlreadyLoaded));
        }
    }
    for name in SONAMES {
        if let Ok(h) = open(OsStr::new(name), true) {
            return Ok((h, Found::AlreadyLoaded));
        }
    }
    for root in discovery::install_roots_in(env, Path::new("/opt")) {
        if !matches!(
            root.origin,
            Origin::HipPath | Origin::RocmPath | Origin::PythonPackage { .. } | Origin::OptRocm
        ) {
            continue;
        }
        let lib = root.root.join("lib");
        for name in SONAMES {
            let candidate = lib.join(name);
            if !candidate.exists() {
                continue;
            }
            match open(candidate.as_os_str(), false) {
                Ok(h) => return Ok((h, Found::Root(root.origin.clone()))),
                Err(e) => tried.push((format!("{} ({})", candidate.display(), root.origin), e)),
            }
        }
        if !tried
            .iter()
            .any(|(w, _)| w.contains(&lib.display().to_string()))
        {
            tried.push((
                format!("{} ({})", lib.display(), root.origin),
                "no libamdhip64.so*".to_owned(),
            ));
        }
    }
    for name in SONAMES {
        match open(OsStr::new(name), false) {
            Ok(h) => return Ok((h, Found::Soname)),
            Err(e) => tried.push(((*name).to_owned(), e)),
        }
    }
    Err(LoadError::NotFound { tried })
}
