//! The raw API's contract, whatever the header set of the build: C names, enum constants as
//! typed constants, `pfn` types for every probed API, the library-API types, `build_info`.
#![allow(non_snake_case)] // test names carry the C names they check

use core::ffi::c_void;
use core::mem::size_of;

use hipjit_sys::{build_info, pfn};

#[test]
fn enum_constants_are_plain_constants_of_the_enum_type() {
    let success: hipjit_sys::hipError_t = hipjit_sys::hipSuccess;
    let no_device: hipjit_sys::hipError_t = hipjit_sys::hipErrorNoDevice;
    let regs: hipjit_sys::hipFunction_attribute = hipjit_sys::HIP_FUNC_ATTRIBUTE_NUM_REGS;
    assert_eq!((success, no_device), (0, 100));
    assert_eq!(
        regs, 4,
        "HIP_FUNC_ATTRIBUTE_NUM_REGS is the fifth hipFunction_attribute"
    );
}

#[test]
fn pfn_hipModuleLoadData_has_the_c_signature() {
    unsafe extern "C" fn stand_in(
        _module: *mut hipjit_sys::hipModule_t,
        _image: *const c_void,
    ) -> hipjit_sys::hipError_t {
        hipjit_sys::hipErrorInvalidImage
    }
    let f: pfn::hipModuleLoadData = stand_in;
    let mut module: hipjit_sys::hipModule_t = core::ptr::null_mut();
    // SAFETY: `stand_in` ignores its arguments.
    let status = unsafe { f(&mut module, core::ptr::null()) };
    assert_eq!(status, hipjit_sys::hipErrorInvalidImage);
}

#[test]
fn every_probed_api_has_a_pfn_type_whatever_the_headers() {
    let sizes = [
        size_of::<Option<pfn::hipLibraryLoadData>>(),
        size_of::<Option<pfn::hipLibraryLoadFromFile>>(),
        size_of::<Option<pfn::hipLibraryUnload>>(),
        size_of::<Option<pfn::hipLibraryGetKernel>>(),
        size_of::<Option<pfn::hipLibraryGetKernelCount>>(),
        size_of::<Option<pfn::hipLibraryEnumerateKernels>>(),
        size_of::<Option<pfn::hipKernelGetFunction>>(),
        size_of::<Option<pfn::hipGetDevicePropertiesR0600>>(),
        size_of::<Option<pfn::hipModuleLaunchCooperativeKernel>>(),
        size_of::<Option<pfn::hipModuleOccupancyMaxActiveBlocksPerMultiprocessor>>(),
    ];
    assert_eq!(sizes, [size_of::<usize>(); 10]);
}

#[test]
fn library_api_types_exist_whatever_the_headers() {
    let library: hipjit_sys::hipLibrary_t = core::ptr::null_mut();
    let kernel: hipjit_sys::hipKernel_t = core::ptr::null_mut();
    let option: hipjit_sys::hipLibraryOption = hipjit_sys::hipLibraryBinaryIsPreserved;
    assert!(library.is_null() && kernel.is_null());
    assert_eq!(option, 1);
    assert_eq!(hipjit_sys::hipLibraryHostUniversalFunctionAndDataTable, 0);
}

#[test]
fn build_info_apis_are_the_cfg_flags() {
    let flags = [
        ("hipLibraryLoadData", cfg!(hip_api_library_load_data)),
        (
            "hipLibraryLoadFromFile",
            cfg!(hip_api_library_load_from_file),
        ),
        ("hipLibraryUnload", cfg!(hip_api_library_unload)),
        ("hipLibraryGetKernel", cfg!(hip_api_library_get_kernel)),
        (
            "hipLibraryGetKernelCount",
            cfg!(hip_api_library_get_kernel_count),
        ),
        (
            "hipLibraryEnumerateKernels",
            cfg!(hip_api_library_enumerate_kernels),
        ),
        ("hipKernelGetFunction", cfg!(hip_api_kernel_get_function)),
        (
            "hipGetDevicePropertiesR0600",
            cfg!(hip_api_get_device_properties_r0600),
        ),
        (
            "hipModuleLaunchCooperativeKernel",
            cfg!(hip_api_module_launch_cooperative_kernel),
        ),
        (
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            cfg!(hip_api_module_occupancy_max_active_blocks_per_multiprocessor),
        ),
    ];
    assert_eq!(build_info::APIS, &flags[..]);
}

#[test]
fn build_info_names_the_header_directory_only_for_generated_bindings() {
    match build_info::BINDINGS {
        "generated" => {
            let dir = build_info::INCLUDE_DIR.expect("generated bindings name their directory");
            let header = std::path::Path::new(dir).join("hip/hip_runtime_api.h");
            assert!(header.is_file(), "{} is not a file", header.display());
        }
        "pregenerated" => assert_eq!(build_info::INCLUDE_DIR, None),
        other => panic!("build_info::BINDINGS is {other:?}"),
    }
}

#[test]
fn build_info_hip_version_is_three_numbers() {
    let parts: Vec<&str> = build_info::HIP_VERSION.split('.').collect();
    assert_eq!(parts.len(), 3, "{}", build_info::HIP_VERSION);
    assert!(
        parts.iter().all(|p| p.parse::<u32>().is_ok()),
        "{}",
        build_info::HIP_VERSION
    );
}
