//! The table of HIP entry points, each bound (`hipGetProcAddress` with the headers' version
//! where the runtime answers it, else `dlsym`: [`super::binding`]) into the typed function
//! pointer declared by hip-sys (`hip_sys::pfn::<C name>`).

use std::ffi::CStr;

use hip_sys as sys;
use hip_sys::device_prop::{GetDevicePropertiesR0000, GetDevicePropertiesR0600};

use super::binding::Binder;

/// The device-properties entry point the runtime exports, which fixes the struct layout handed
/// to it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DevicePropertiesFn {
    /// `hipGetDevicePropertiesR0600` with `hipDeviceProp_tR0600` (HIP 6.0 and later).
    R0600(GetDevicePropertiesR0600),
    /// `hipGetDeviceProperties` with `hipDeviceProp_tR0000` (HIP 5.x).
    R0000(GetDevicePropertiesR0000),
}

macro_rules! api_table {
    (
        required { $($req:ident),* $(,)? }
        optional { $($opt:ident),* $(,)? }
    ) => {
        /// Resolved HIP entry points. Required ones are plain function pointers, optional
        /// families are `Option`s.
        // Some entry points are resolved only so that a runtime lacking them is refused at load
        // time (hipRuntimeGetVersion is also called before the table exists).
        #[allow(non_snake_case, dead_code)]
        pub(crate) struct Api {
            $(pub(crate) $req: sys::pfn::$req,)*
            $(pub(crate) $opt: Option<sys::pfn::$opt>,)*
            pub(crate) get_device_properties: DevicePropertiesFn,
        }

        /// The entry points every supported runtime (HIP 5.2 and later) exports, in table order.
        pub const REQUIRED_SYMBOLS: &[&str] = &[$(stringify!($req),)* "hipGetDeviceProperties"];

        /// The entry points that are optional (newer runtimes only), in table order.
        pub const OPTIONAL_SYMBOLS: &[&str] = &[$(stringify!($opt)),*];

        impl Api {
            /// Resolves every entry point; `Err` names the first required symbol missing.
            pub(crate) fn resolve(lib: &mut Binder<'_>) -> Result<Api, &'static str> {
                Ok(Api {
                    $(
                        // SAFETY: the type is hip-sys's declaration of the symbol of that name.
                        $req: unsafe {
                            lib.sym::<sys::pfn::$req>(cstr(concat!(stringify!($req), "\0")))
                        }
                        .ok_or(stringify!($req))?,
                    )*
                    $(
                        // SAFETY: as above.
                        $opt: unsafe {
                            lib.sym::<sys::pfn::$opt>(cstr(concat!(stringify!($opt), "\0")))
                        },
                    )*
                    get_device_properties: lib
                        .device_properties()
                        .ok_or("hipGetDeviceProperties")?,
                })
            }

            /// Which optional entry points were found, by C name.
            pub(crate) fn optional_present(&self) -> Vec<(&'static str, bool)> {
                vec![$((stringify!($opt), self.$opt.is_some())),*]
            }
        }
    };
}

api_table! {
    required {
        hipGetErrorName,
        hipGetErrorString,
        hipRuntimeGetVersion,
        hipDriverGetVersion,
        hipInit,
        hipGetDeviceCount,
        hipGetDevice,
        hipSetDevice,
        hipDeviceSynchronize,
        hipStreamCreateWithFlags,
        hipStreamDestroy,
        hipStreamSynchronize,
        hipStreamQuery,
        hipStreamWaitEvent,
        hipMalloc,
        hipFree,
        hipHostMalloc,
        hipHostFree,
        hipMemcpy,
        hipMemcpyAsync,
        hipMemset,
        hipMemsetAsync,
        hipEventCreateWithFlags,
        hipEventDestroy,
        hipEventRecord,
        hipEventSynchronize,
        hipEventQuery,
        hipEventElapsedTime,
        hipModuleLoadData,
        hipModuleUnload,
        hipModuleGetFunction,
        hipModuleGetGlobal,
        hipModuleLaunchKernel,
        hipFuncGetAttribute,
    }
    optional {
        hipMallocAsync,
        hipFreeAsync,
        hipFuncSetAttribute,
        hipModuleOccupancyMaxActiveBlocksPerMultiprocessor,
        hipModuleLaunchCooperativeKernel,
        hipLibraryLoadData,
        hipLibraryLoadFromFile,
        hipLibraryUnload,
        hipLibraryGetKernel,
        hipLibraryGetKernelCount,
        hipLibraryEnumerateKernels,
        hipKernelGetFunction,
        hipDeviceCanAccessPeer,
        hipDeviceEnablePeerAccess,
        hipMemcpyPeerAsync,
        hipStreamBeginCapture,
        hipStreamEndCapture,
        hipStreamIsCapturing,
        hipThreadExchangeStreamCaptureMode,
        hipGraphInstantiateWithFlags,
        hipGraphLaunch,
        hipGraphDestroy,
        hipGraphExecDestroy,
        hipGraphGetNodes,
        hipGraphNodeGetType,
        hipGraphExecKernelNodeSetParams,
    }
}

fn cstr(s: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(s.as_bytes()) {
        Ok(c) => c,
        // Unreachable: every name above is an identifier followed by one NUL.
        Err(_) => c"",
    }
}
