//! hip-sys's hand-written device-property layouts against the structs bindgen produced from
//! the header set of this build: size and every field offset. Which header struct exists
//! depends on the set: HIP 5.x headers declare the old layout as `hipDeviceProp_t`; HIP 6+
//! headers rename it by macro to `hipDeviceProp_tR0600` (the 6.0 layout) and keep the old one
//! as `hipDeviceProp_tR0000` only in `hip/hip_deprecated.h`, which `hip_runtime_api.h` does
//! not include. Run `scripts/header-matrix.sh` to check every header set.
#![allow(non_snake_case)] // test names carry the C names they check

use core::mem::{offset_of, size_of};

use hipjit_sys::device_prop::{hipDeviceProp_tR0000, hipDeviceProp_tR0600};

#[macro_use]
mod layout_fields;

/// Asserts equal size and, field by field, equal offsets; names the first field that differs.
macro_rules! assert_same_layout {
    ($ours:ty, $theirs:ty, [$($field:ident),* $(,)?]) => {{
        let mut mismatches = Vec::<String>::new();
        $(
            let (ours, theirs) = (offset_of!($ours, $field), offset_of!($theirs, $field));
            if ours != theirs {
                mismatches.push(format!("{}: offset {} here, {} in the headers", stringify!($field), ours, theirs));
            }
        )*
        assert!(mismatches.is_empty(), "{} vs {}: {}", stringify!($ours), stringify!($theirs), mismatches.join("; "));
        assert_eq!(size_of::<$ours>(), size_of::<$theirs>(), "size of {} vs {}", stringify!($ours), stringify!($theirs));
    }};
}

fn hip_major() -> u32 {
    let version = hipjit_sys::build_info::HIP_VERSION;
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("build_info::HIP_VERSION {version:?} has no major number"))
}

#[test]
#[cfg(hip_sys_type = "hipDeviceProp_t")]
fn r0000_layout_matches_hip5_hipDeviceProp_t() {
    assert!(
        hip_major() < 6,
        "HIP {} headers declare a plain hipDeviceProp_t: only HIP 5.x headers should",
        hipjit_sys::build_info::HIP_VERSION
    );
    r0000_fields!(
        assert_same_layout,
        hipDeviceProp_tR0000,
        hipjit_sys::hipDeviceProp_t
    );
}

#[test]
#[cfg(not(hip_sys_type = "hipDeviceProp_t"))]
fn headers_without_plain_hipDeviceProp_t_are_hip6_or_later() {
    assert!(
        hip_major() >= 6,
        "HIP {} headers lack hipDeviceProp_t, but HIP 5.x headers declare it",
        hipjit_sys::build_info::HIP_VERSION
    );
}

#[test]
#[cfg(hip_sys_type = "hipDeviceProp_tR0000")]
fn r0000_layout_matches_headers_hipDeviceProp_tR0000() {
    r0000_fields!(
        assert_same_layout,
        hipDeviceProp_tR0000,
        hipjit_sys::hipDeviceProp_tR0000
    );
}

#[test]
#[cfg(hip_sys_type = "hipDeviceProp_tR0600")]
fn r0600_layout_matches_headers_hipDeviceProp_tR0600() {
    r0600_fields!(
        assert_same_layout,
        hipDeviceProp_tR0600,
        hipjit_sys::hipDeviceProp_tR0600
    );
}

#[test]
#[cfg(not(hip_sys_type = "hipDeviceProp_tR0600"))]
fn headers_without_hipDeviceProp_tR0600_are_hip5() {
    assert!(
        hip_major() < 6,
        "HIP {} headers lack hipDeviceProp_tR0600, which HIP 6.0 introduced",
        hipjit_sys::build_info::HIP_VERSION
    );
}

#[test]
fn every_build_checks_at_least_one_layout() {
    let checked = cfg!(any(
        hip_sys_type = "hipDeviceProp_t",
        hip_sys_type = "hipDeviceProp_tR0000",
        hip_sys_type = "hipDeviceProp_tR0600"
    ));
    assert!(
        checked,
        "the bindings declare no device-property struct at all"
    );
}

#[test]
fn layouts_have_the_sizes_of_x86_64_linux() {
    // Sizes from clang's layout of the HIP headers on x86-64 Linux (bindgen's own layout
    // assertions in the generated bindings say the same for the header structs).
    assert_eq!(size_of::<hipDeviceProp_tR0000>(), 792);
    assert_eq!(size_of::<hipDeviceProp_tR0600>(), 1472);
}
