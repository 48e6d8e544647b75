//! The sanity check of the device properties a runtime returned: invariants every real GPU
//! satisfies, so that properties read with another `hipDeviceProp_t` layout than the one the
//! runtime wrote (a header/runtime skew: the unversioned `hipGetDeviceProperties` of a HIP 6+
//! runtime read as the 6.0 layout gives `warpSize = 1760000`) become a named error
//! ([`HipError::is_device_properties_skew`]) instead of a wrong launch.
//!
//! | field | invariant |
//! |---|---|
//! | `gcnArchName` | starts with `gfx` (AMD platform; on NVIDIA `sm_NN`) |
//! | `warpSize` | 32 or 64 |
//! | `maxThreadsPerBlock` | 1 to 1024 |
//! | `maxThreadsDim`, `maxGridSize` | each non-zero, block dimensions at most 1024 |
//! | `multiProcessorCount`, `totalGlobalMem`, `sharedMemPerBlock`, `regsPerBlock` | non-zero |

use crate::safe::device::DeviceProperties;
use crate::safe::error::HipError;
use crate::safe::runtime::Platform;

/// The first invariant `p` breaks, as a sentence naming the field and its value; `None` when
/// all hold.
pub(crate) fn violation(p: &DeviceProperties, platform: Platform) -> Option<String> {
    let arch_ok = match platform {
        Platform::Amd => p.arch_name.starts_with("gfx"),
        Platform::Nvidia => p.arch_name.starts_with("sm_"),
    };
    let expected_arch = match platform {
        Platform::Amd => "gfx...",
        Platform::Nvidia => "sm_NN",
    };
    if !arch_ok {
        return Some(format!(
            "gcnArchName = {:?} (expected {expected_arch})",
            p.arch_name
        ));
    }
    if p.wavefront_size != 32 && p.wavefront_size != 64 {
        return Some(format!(
            "warpSize = {} (expected 32 or 64)",
            p.wavefront_size
        ));
    }
    if p.max_threads_per_block == 0 || p.max_threads_per_block > 1024 {
        return Some(format!(
            "maxThreadsPerBlock = {} (expected 1 to 1024)",
            p.max_threads_per_block
        ));
    }
    if p.max_block_dims.iter().any(|&d| d == 0 || d > 1024) {
        return Some(format!(
            "maxThreadsDim = {:?} (expected each 1 to 1024)",
            p.max_block_dims
        ));
    }
    if p.max_grid_dims.contains(&0) {
        return Some(format!(
            "maxGridSize = {:?} (expected non-zero)",
            p.max_grid_dims
        ));
    }
    let sizes = [
        ("multiProcessorCount", p.compute_units as u64),
        ("totalGlobalMem", p.total_global_mem),
        ("sharedMemPerBlock", p.lds_per_block),
        ("regsPerBlock", u64::from(p.registers_per_block)),
    ];
    sizes
        .iter()
        .find(|(_, v)| *v == 0)
        .map(|(field, _)| format!("{field} = 0 (expected non-zero)"))
}

/// `Ok` when `p` passes the check, else [`HipError::is_device_properties_skew`] naming `call`
/// (the properties entry point used), the field, and the layout read.
pub(crate) fn check(
    p: &DeviceProperties,
    platform: Platform,
    call: &'static str,
    layout: &str,
) -> Result<(), HipError> {
    match violation(p, platform) {
        None => Ok(()),
        Some(what) => Err(HipError::device_properties_skew(
            call,
            format!(
                "refused by hipjit: the device properties fail the sanity check: {what}; read \
                 with the {layout} layout, so the runtime wrote another hipDeviceProp_t layout \
                 (headers and runtime disagree)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gfx90a() -> DeviceProperties {
        DeviceProperties {
            name: "AMD Instinct MI210".into(),
            arch_name: "gfx90a:sramecc+:xnack-".into(),
            target_id: None,
            wavefront_size: 64,
            compute_units: 104,
            lds_per_block: 65536,
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 1024],
            max_grid_dims: [2147483647, 65536, 65536],
            clock_khz: 1700000,
            total_global_mem: 64 << 30,
            total_const_mem: 2 << 30,
            l2_cache_bytes: 8 << 20,
            registers_per_block: 65536,
        }
    }

    #[test]
    fn real_properties_pass() {
        assert_eq!(violation(&gfx90a(), Platform::Amd), None);
        let mut rdna = gfx90a();
        rdna.arch_name = "gfx1100".into();
        rdna.wavefront_size = 32;
        assert_eq!(violation(&rdna, Platform::Amd), None);
    }

    #[test]
    fn each_broken_invariant_is_named() {
        type Break = fn(&mut DeviceProperties);
        let cases: [(Break, &str); 8] = [
            (
                |p| p.arch_name = "".into(),
                "gcnArchName = \"\" (expected gfx...)",
            ),
            (
                |p| p.wavefront_size = 1760000,
                "warpSize = 1760000 (expected 32 or 64)",
            ),
            (
                |p| p.max_threads_per_block = 2048,
                "maxThreadsPerBlock = 2048 (expected 1 to 1024)",
            ),
            (
                |p| p.max_threads_per_block = 0,
                "maxThreadsPerBlock = 0 (expected 1 to 1024)",
            ),
            (
                |p| p.max_block_dims[2] = 0,
                "maxThreadsDim = [1024, 1024, 0] (expected each 1 to 1024)",
            ),
            (
                |p| p.max_grid_dims[0] = 0,
                "maxGridSize = [0, 65536, 65536] (expected non-zero)",
            ),
            (
                |p| p.total_global_mem = 0,
                "totalGlobalMem = 0 (expected non-zero)",
            ),
            (
                |p| p.lds_per_block = 0,
                "sharedMemPerBlock = 0 (expected non-zero)",
            ),
        ];
        for (breaks, expected) in cases {
            let mut p = gfx90a();
            breaks(&mut p);
            assert_eq!(violation(&p, Platform::Amd).as_deref(), Some(expected));
        }
    }

    #[test]
    fn nvidia_names_are_sm() {
        let mut p = gfx90a();
        p.arch_name = "sm_90".into();
        p.wavefront_size = 32;
        assert_eq!(violation(&p, Platform::Nvidia), None);
        assert!(violation(&p, Platform::Amd).is_some());
    }

    #[test]
    fn the_error_is_named_and_says_what() {
        let mut p = gfx90a();
        p.wavefront_size = 1760000;
        let e = check(&p, Platform::Amd, "hipGetDevicePropertiesR0600", "HIP 6.0").unwrap_err();
        assert!(e.is_device_properties_skew());
        assert_eq!(e.name(), "DevicePropertiesSkew");
        assert!(e.to_string().starts_with(
            "hipGetDevicePropertiesR0600 failed: DevicePropertiesSkew (1): refused by hipjit: \
             the device properties fail the sanity check: warpSize = 1760000"
        ));
    }
}
