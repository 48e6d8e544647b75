//! Raw bindings to the HIP runtime API (`hip/hip_runtime_api.h`, AMD platform).
//!
//! - The crate root is bindgen's output for the HIP header set found at build time (see
//!   [`discovery`] and the README for the order), or the committed pregenerated bindings when
//!   there is none. C names are kept: `hipError_t`, `hipStream_t`; enum constants are plain
//!   constants of the enum's type (`hipSuccess: hipError_t`). Functions are declared
//!   `extern "C"` but linked only with the `link` feature; without it, resolve them at run
//!   time through the [`pfn`] types.
//! - [`pfn`]: one `unsafe extern "C" fn` type per C function the headers declare, plus
//!   hip-sys's own declarations of the version-dependent APIs the headers lack.
//! - [`device_prop`]: both device-property layouts (HIP 5.x and 6.0), always.
//! - [`build_info`]: what the build used; the cfg flags `hip_api_*` say which probed APIs the
//!   headers declare (the dependent's build script reads them as `DEP_HIPJIT_HIP_SYS_CFGS`).
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
// On docs.rs (`--cfg docsrs`, a nightly rustdoc): each item behind a feature is marked with it.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod discovery;

pub mod device_prop;

mod fallback;
#[allow(unused_imports)] // empty when the headers declare every library-API type
pub use fallback::*;

/// bindgen's output (generated or pregenerated), re-exported at the crate root.
#[allow(clippy::all, rustdoc::all, missing_docs)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
pub use bindings::*;

/// Function-pointer types, named after the C function: `pfn::hipModuleLoadData` is
/// `unsafe extern "C" fn(*mut hipModule_t, *const c_void) -> hipError_t`. One per
/// non-variadic C-linkage function of the headers, plus hip-sys's declarations (documented as
/// such) of the probed APIs the headers lack.
pub mod pfn {
    #[allow(unused_imports)] // empty when the headers declare every probed API
    pub use crate::fallback::pfn::*;
    pub use generated::*;

    #[allow(clippy::all, missing_docs)]
    mod generated {
        #[allow(unused_imports)]
        use crate::*;
        include!(concat!(env!("OUT_DIR"), "/pfn.rs"));
    }
}

/// What the build used: generated or pregenerated bindings, the header directory, its HIP
/// version, and the probe.
pub mod build_info {
    include!(concat!(env!("OUT_DIR"), "/build_info.rs"));
}
