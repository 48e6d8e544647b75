//! Binding entry points the way the headers hipjit was built against would have called them:
//! through the runtime's `hipGetProcAddress` (HIP 6.1 and later) with the headers' HIP version
//! where the runtime exports it and answers, else with `dlsym`.
//!
//! `hipGetProcAddress(symbol, &pfn, hipVersion, flags, &status)` (`hip/hip_runtime_api.h`,
//! HIP 6.1+) takes `hipVersion = 100 * major + minor` and returns the entry point a program
//! built against that version gets: for `hipGetDeviceProperties` with a version of 600 or more
//! the HIP 6.0 layout (`hipGetDevicePropertiesR0600`), below it the 5.x layout, where `dlsym` of
//! the unversioned name always gives the 5.x one.
//!
//! A real runtime without a GPU answers every `hipGetProcAddress` with `hipErrorNoDevice`
//! (measured on Debian sid's HIP 6.4.3): the first refusal turns binding over to `dlsym` for the
//! rest, and is recorded ([`SymbolBinding::DlsymAfterRefusal`]).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;

use hip_sys as sys;
use hip_sys::device_prop::{GetDevicePropertiesR0000, GetDevicePropertiesR0600};

use super::api::DevicePropertiesFn;
use super::loader::Handle;

/// The HIP version hipjit's headers name, as `hipGetProcAddress` takes it:
/// `100 * HIP_VERSION_MAJOR + HIP_VERSION_MINOR` of the header set hip-sys was built from (for
/// pregenerated bindings, of the set they were made from): 502 for Debian's HIP 5.2.3 headers,
/// 701 for HIP 7.1's.
pub const HEADER_HIP_VERSION: i32 = (sys::HIP_VERSION_MAJOR * 100 + sys::HIP_VERSION_MINOR) as i32;

/// The first HIP version (as [`HEADER_HIP_VERSION`] encodes it) whose headers call
/// `hipGetDevicePropertiesR0600` (the HIP 6.0 `hipDeviceProp_t` layout) for
/// `hipGetDeviceProperties`.
pub const R0600_HIP_VERSION: i32 = 600;

/// How a runtime's entry points were bound ([`crate::safe::runtime::Runtime::symbol_binding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolBinding {
    /// Through the runtime's `hipGetProcAddress` with `hip_version` (100 * major + minor of
    /// the headers, [`HEADER_HIP_VERSION`]); a symbol it does not know (or knows only for a
    /// later version) was taken with `dlsym`.
    ProcAddress {
        /// The version handed to `hipGetProcAddress`.
        hip_version: i32,
    },
    /// With `dlsym`: the runtime does not export `hipGetProcAddress` (HIP before 6.1, drop-in
    /// runtimes), or the platform is not AMD.
    Dlsym,
    /// With `dlsym`, because `hipGetProcAddress` refused a lookup with `code` (a real runtime
    /// without a GPU refuses the first: `hipErrorNoDevice`, 100), or gave none of the
    /// symbols (`code` is its last refusal).
    DlsymAfterRefusal {
        /// The version handed to `hipGetProcAddress`.
        hip_version: i32,
        /// The `hipError_t` it returned.
        code: i32,
    },
}

impl fmt::Display for SymbolBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolBinding::ProcAddress { hip_version } => {
                write!(f, "hipGetProcAddress (hipVersion {hip_version})")
            }
            SymbolBinding::Dlsym => f.write_str("dlsym"),
            SymbolBinding::DlsymAfterRefusal { hip_version, code } => {
                let name = crate::safe::error::hip_error_name(*code).unwrap_or("hipError_t");
                write!(
                    f,
                    "dlsym (hipGetProcAddress with hipVersion {hip_version} returned {name} ({code}))"
                )
            }
        }
    }
}

/// `hipGetProcAddress` as HIP 6.1+ declares it; `symbolStatus` is a
/// `hipDriverProcAddressQueryResult` (an `int`-sized enum).
type GetProcAddress = unsafe extern "C" fn(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    symbol_status: *mut c_int,
) -> sys::hipError_t;

/// Resolves entry points of one opened runtime: `hipGetProcAddress` while it answers, `dlsym`
/// otherwise.
pub(crate) struct Binder<'a> {
    handle: &'a Handle,
    proc_address: Option<GetProcAddress>,
    version: i32,
    binding: SymbolBinding,
    /// Symbols `hipGetProcAddress` gave, and the last status it refused one with.
    answered: usize,
    last_refusal: Option<sys::hipError_t>,
}

impl<'a> Binder<'a> {
    /// A binder for `handle` that hands `version` to `hipGetProcAddress`.
    pub(crate) fn new(handle: &'a Handle, version: i32) -> Binder<'a> {
        // SAFETY: GetProcAddress is the declaration of HIP 6.1+'s hipGetProcAddress.
        let proc_address = unsafe { handle.sym::<GetProcAddress>(c"hipGetProcAddress") };
        let binding = if proc_address.is_some() {
            SymbolBinding::ProcAddress {
                hip_version: version,
            }
        } else {
            SymbolBinding::Dlsym
        };
        Binder {
            handle,
            proc_address,
            version,
            binding,
            answered: 0,
            last_refusal: None,
        }
    }

    /// How the symbols so far were bound; `hipGetProcAddress` that gave none of them counts as
    /// refused, with its last status.
    pub(crate) fn binding(&self) -> SymbolBinding {
        match (self.binding, self.answered, self.last_refusal) {
            (SymbolBinding::ProcAddress { hip_version }, 0, Some(code)) => {
                SymbolBinding::DlsymAfterRefusal {
                    hip_version,
                    code: code as i32,
                }
            }
            (b, _, _) => b,
        }
    }

    /// The address `hipGetProcAddress` gives for `name`, `None` when it is not used or does
    /// not know the symbol; a refusal of any other kind ends its use.
    fn proc_address(&mut self, name: &CStr) -> Option<*mut c_void> {
        let f = self.proc_address?;
        let mut p: *mut c_void = std::ptr::null_mut();
        let mut status: c_int = 0;
        // SAFETY: `name` is NUL-terminated; `p` and `status` are valid out pointers.
        let rc = unsafe { f(name.as_ptr(), &mut p, self.version, 0, &mut status) };
        if rc == sys::hipSuccess && !p.is_null() {
            self.answered += 1;
            return Some(p);
        }
        if rc == sys::hipSuccess {
            return None;
        }
        self.last_refusal = Some(rc);
        // hipErrorInvalidValue with a status: a symbol unknown to it (1) or newer than the
        // version asked (2); the runtime itself answers.
        const HIP_ERROR_INVALID_VALUE: sys::hipError_t = 1;
        if rc != HIP_ERROR_INVALID_VALUE {
            self.proc_address = None;
            self.binding = SymbolBinding::DlsymAfterRefusal {
                hip_version: self.version,
                code: rc as i32,
            };
        }
        None
    }

    /// The address of `name`: `hipGetProcAddress`, else `dlsym`.
    pub(crate) fn sym_addr(&mut self, name: &CStr) -> Option<*mut c_void> {
        self.proc_address(name)
            .or_else(|| self.handle.sym_addr(name))
    }

    /// `name` as a function pointer of type `F`, or `None` when the runtime has no such entry
    /// point.
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "C" fn` type matching the C declaration of `name` for the
    /// binder's version.
    pub(crate) unsafe fn sym<F: Copy>(&mut self, name: &CStr) -> Option<F> {
        const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
        let p = self.sym_addr(name)?;
        // SAFETY: `F` is a function-pointer type of pointer size (checked above), `p` is a
        // non-null code address; the caller guarantees the signature.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// The device-properties entry point the headers would have called, with the layout that
    /// goes with it: for a version of 600 or more `hipGetDeviceProperties` through
    /// `hipGetProcAddress` (the runtime's 6.0-layout entry point), else `dlsym` of
    /// `hipGetDevicePropertiesR0600`; below 600 the 5.x layout (`hipGetDeviceProperties`). When
    /// the runtime lacks that one, the other layout's entry point it has (a HIP 5.x runtime
    /// under 6.x headers; a runtime exporting only `hipGetDevicePropertiesR0600`). Never pairs
    /// an entry point with the other layout.
    pub(crate) fn device_properties(&mut self) -> Option<DevicePropertiesFn> {
        let want_r0600 = self.version >= R0600_HIP_VERSION;
        // Through hipGetProcAddress the unversioned name with the headers' version, as the
        // header's own call would be bound.
        if let Some(p) = self.proc_address(c"hipGetDeviceProperties") {
            // SAFETY: hipGetProcAddress returns, for a version >= 600, the entry point taking
            // hipDeviceProp_tR0600, below it the one taking hipDeviceProp_tR0000 (its contract
            // in hip_runtime_api.h); both signatures are `(prop*, int) -> hipError_t`.
            return Some(unsafe {
                if want_r0600 {
                    DevicePropertiesFn::R0600(std::mem::transmute_copy::<
                        *mut c_void,
                        GetDevicePropertiesR0600,
                    >(&p))
                } else {
                    DevicePropertiesFn::R0000(std::mem::transmute_copy::<
                        *mut c_void,
                        GetDevicePropertiesR0000,
                    >(&p))
                }
            });
        }
        // SAFETY: hip-sys declares GetDevicePropertiesR0600 as the signature of the symbol
        // hipGetDevicePropertiesR0600 (HIP 6.0 layout).
        let r0600 = || unsafe {
            self.handle
                .sym::<GetDevicePropertiesR0600>(c"hipGetDevicePropertiesR0600")
                .map(DevicePropertiesFn::R0600)
        };
        // SAFETY: GetDevicePropertiesR0000 is the signature of the unversioned
        // hipGetDeviceProperties, which keeps the 5.x layout in every runtime.
        let r0000 = || unsafe {
            self.handle
                .sym::<GetDevicePropertiesR0000>(c"hipGetDeviceProperties")
                .map(DevicePropertiesFn::R0000)
        };
        if want_r0600 {
            r0600().or_else(r0000)
        } else {
            r0000().or_else(r0600)
        }
    }
}
