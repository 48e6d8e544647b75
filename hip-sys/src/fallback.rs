//! hip-sys's own declarations of the library-API types, compiled only when the header set of
//! the build lacks them (before ROCm 7.x), so every header set names the same types. The C
//! definitions followed are those of HIP 7.1's `hip/hip_runtime_api.h` (`hipLibrary_t`,
//! `hipKernel_t`) and `hip/linker_types.h` (`hipLibraryOption`).

#[cfg(not(hip_sys_type = "hipLibrary_t"))]
mod library {
    /// The opaque library object `hipLibrary_t` points to.
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct ihipLibrary_t {
        _unused: [u8; 0],
    }

    /// A loaded code object (library) of the HIP library API: `typedef struct ihipLibrary_t*
    /// hipLibrary_t;`.
    pub type hipLibrary_t = *mut ihipLibrary_t;
}
#[cfg(not(hip_sys_type = "hipLibrary_t"))]
pub use library::*;

#[cfg(not(hip_sys_type = "hipKernel_t"))]
mod kernel {
    /// The opaque kernel object `hipKernel_t` points to.
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct ihipKernel_t {
        _unused: [u8; 0],
    }

    /// A kernel of a library: `typedef struct ihipKernel_t* hipKernel_t;`.
    pub type hipKernel_t = *mut ihipKernel_t;
}
#[cfg(not(hip_sys_type = "hipKernel_t"))]
pub use kernel::*;

#[cfg(not(hip_sys_type = "hipLibraryOption"))]
mod library_option {
    /// Options of `hipLibraryLoadData`/`hipLibraryLoadFromFile`: `typedef enum
    /// hipLibraryOption_e {...} hipLibraryOption;` (a C enum: `c_uint`).
    pub type hipLibraryOption = core::ffi::c_uint;
    /// `hipLibraryHostUniversalFunctionAndDataTable` (0).
    pub const hipLibraryHostUniversalFunctionAndDataTable: hipLibraryOption = 0;
    /// `hipLibraryBinaryIsPreserved` (1).
    pub const hipLibraryBinaryIsPreserved: hipLibraryOption = 1;
}
#[cfg(not(hip_sys_type = "hipLibraryOption"))]
pub use library_option::*;

/// Function-pointer types of the probed APIs, compiled when the headers do not declare the
/// function. Signatures are the documented current ones (HIP runtime API reference); note that
/// HIP 7.1's own header declares `hipLibraryLoadData`/`hipLibraryLoadFromFile` with
/// `hipJitOption**` and `hipLibraryOption**` (a header slip; its tracing table and later
/// releases use single pointers): when the headers declare a function, `pfn` takes their
/// signature, so pass null option arrays with a zero count, as the runtime requires anyway.
pub mod pfn {
    #[allow(unused_imports)]
    use crate::*;
    #[allow(unused_imports)]
    use core::ffi::{c_char, c_int, c_uint, c_void};

    /// `hipLibraryLoadData(hipLibrary_t* library, const void* code, hipJitOption* jitOptions,
    /// void** jitOptionsValues, unsigned int numJitOptions, hipLibraryOption* libraryOptions,
    /// void** libraryOptionValues, unsigned int numLibraryOptions)` (hip-sys's declaration).
    #[cfg(not(hip_api_library_load_data))]
    pub type hipLibraryLoadData = unsafe extern "C" fn(
        library: *mut hipLibrary_t,
        code: *const c_void,
        jitOptions: *mut hipJitOption,
        jitOptionsValues: *mut *mut c_void,
        numJitOptions: c_uint,
        libraryOptions: *mut hipLibraryOption,
        libraryOptionValues: *mut *mut c_void,
        numLibraryOptions: c_uint,
    ) -> hipError_t;

    /// `hipLibraryLoadFromFile(hipLibrary_t* library, const char* fileName, hipJitOption*
    /// jitOptions, void** jitOptionsValues, unsigned int numJitOptions, hipLibraryOption*
    /// libraryOptions, void** libraryOptionValues, unsigned int numLibraryOptions)` (hip-sys's
    /// declaration).
    #[cfg(not(hip_api_library_load_from_file))]
    pub type hipLibraryLoadFromFile = unsafe extern "C" fn(
        library: *mut hipLibrary_t,
        fileName: *const c_char,
        jitOptions: *mut hipJitOption,
        jitOptionsValues: *mut *mut c_void,
        numJitOptions: c_uint,
        libraryOptions: *mut hipLibraryOption,
        libraryOptionValues: *mut *mut c_void,
        numLibraryOptions: c_uint,
    ) -> hipError_t;

    /// `hipLibraryUnload(hipLibrary_t library)` (hip-sys's declaration).
    #[cfg(not(hip_api_library_unload))]
    pub type hipLibraryUnload = unsafe extern "C" fn(library: hipLibrary_t) -> hipError_t;

    /// `hipLibraryGetKernel(hipKernel_t* pKernel, hipLibrary_t library, const char* name)`
    /// (hip-sys's declaration).
    #[cfg(not(hip_api_library_get_kernel))]
    pub type hipLibraryGetKernel = unsafe extern "C" fn(
        pKernel: *mut hipKernel_t,
        library: hipLibrary_t,
        name: *const c_char,
    ) -> hipError_t;

    /// `hipLibraryGetKernelCount(unsigned int* count, hipLibrary_t library)` (hip-sys's
    /// declaration).
    #[cfg(not(hip_api_library_get_kernel_count))]
    pub type hipLibraryGetKernelCount =
        unsafe extern "C" fn(count: *mut c_uint, library: hipLibrary_t) -> hipError_t;

    /// `hipLibraryEnumerateKernels(hipKernel_t* kernels, unsigned int numKernels, hipLibrary_t
    /// library)` (hip-sys's declaration).
    #[cfg(not(hip_api_library_enumerate_kernels))]
    pub type hipLibraryEnumerateKernels = unsafe extern "C" fn(
        kernels: *mut hipKernel_t,
        numKernels: c_uint,
        library: hipLibrary_t,
    ) -> hipError_t;

    /// `hipKernelGetFunction(hipFunction_t* pFunc, hipKernel_t kernel)` (hip-sys's
    /// declaration).
    #[cfg(not(hip_api_kernel_get_function))]
    pub type hipKernelGetFunction =
        unsafe extern "C" fn(pFunc: *mut hipFunction_t, kernel: hipKernel_t) -> hipError_t;

    /// `hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* prop, int deviceId)` (hip-sys's
    /// declaration, with hip-sys's own struct layout).
    #[cfg(not(hip_api_get_device_properties_r0600))]
    pub type hipGetDevicePropertiesR0600 = crate::device_prop::GetDevicePropertiesR0600;

    /// `hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned int gridDimX, unsigned int
    /// gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
    /// unsigned int blockDimZ, unsigned int sharedMemBytes, hipStream_t stream, void**
    /// kernelParams)` (hip-sys's declaration).
    #[cfg(not(hip_api_module_launch_cooperative_kernel))]
    pub type hipModuleLaunchCooperativeKernel = unsafe extern "C" fn(
        f: hipFunction_t,
        gridDimX: c_uint,
        gridDimY: c_uint,
        gridDimZ: c_uint,
        blockDimX: c_uint,
        blockDimY: c_uint,
        blockDimZ: c_uint,
        sharedMemBytes: c_uint,
        stream: hipStream_t,
        kernelParams: *mut *mut c_void,
    ) -> hipError_t;

    /// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, hipFunction_t f, int
    /// blockSize, size_t dynSharedMemPerBlk)` (hip-sys's declaration).
    #[cfg(not(hip_api_module_occupancy_max_active_blocks_per_multiprocessor))]
    pub type hipModuleOccupancyMaxActiveBlocksPerMultiprocessor =
        unsafe extern "C" fn(
            numBlocks: *mut c_int,
            f: hipFunction_t,
            blockSize: c_int,
            dynSharedMemPerBlk: usize,
        ) -> hipError_t;
}
