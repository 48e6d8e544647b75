//! With the `link` feature, the declarations link against the installed HIP runtime
//! (`libamdhip64`) and calls reach it. Needs a HIP runtime with its development link
//! (Debian: `apt-get install libamdhip64-dev`); no GPU is needed.
#![allow(non_snake_case)] // test names carry the C names they check

use std::ffi::CStr;

#[test]
fn hipGetErrorString_of_the_linked_runtime_names_the_error() {
    // SAFETY: hipGetErrorString takes any hipError_t and returns a static C string (or null).
    let name = unsafe { hipjit_sys::hipGetErrorString(hipjit_sys::hipErrorNoDevice) };
    assert!(!name.is_null(), "hipGetErrorString returned null");
    // SAFETY: non-null, NUL-terminated, owned by the runtime for the process lifetime.
    let name = unsafe { CStr::from_ptr(name) };
    assert_eq!(name.to_str(), Ok("hipErrorNoDevice"));
}

#[test]
fn hipRuntimeGetVersion_of_the_linked_runtime_is_hip5_or_later() {
    let mut version = 0;
    // SAFETY: `version` is a valid out-pointer for the call's duration.
    let status = unsafe { hipjit_sys::hipRuntimeGetVersion(&mut version) };
    assert_eq!(status, hipjit_sys::hipSuccess);
    // HIP_VERSION encoding: major * 10_000_000 + minor * 100_000 + patch (5.2.3: 50221153).
    assert!(version / 10_000_000 >= 5, "runtime version {version}");
}
