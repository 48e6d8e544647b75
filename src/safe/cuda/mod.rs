//! HIP's NVIDIA platform: the same safe API on NVIDIA GPUs, through the CUDA driver API.
//!
//! # Design
//! The safe layer calls HIP through one table of typed function pointers (`hip_sys::pfn`
//! types), which `dlsym` fills for an AMD runtime. On NVIDIA the table is filled with hipjit's
//! own `extern "C"` shims (`shim`), each mapping one HIP call onto the CUDA driver API
//! (`libcuda.so.1`, `driver`): so [`Device`](crate::safe::device::Device),
//! [`Stream`](crate::safe::stream::Stream), [`DeviceBuffer`](crate::safe::memory::DeviceBuffer),
//! [`Event`](crate::safe::event::Event), [`Library`](crate::safe::library::Library) and
//! [`Kernel`](crate::safe::kernel::Kernel) work unchanged, and a launch stays one indirect call plus
//! the driver's. HIP's own NVIDIA headers map mostly onto the CUDA *runtime* API and have no
//! library API; hipjit uses the driver only, taking from those headers the error and flag
//! semantics.
//!
//! | HIP | CUDA driver |
//! |-----|-------------|
//! | hipInit, hipGetDeviceCount, hipDriverGetVersion | cuInit, cuDeviceGetCount, cuDriverGetVersion |
//! | hipSetDevice / hipGetDevice | cuDevicePrimaryCtxRetain + cuCtxSetCurrent / cuCtxGetCurrent |
//! | hipGetDevicePropertiesR0600 | cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetAttribute (`gcnArchName` = `sm_NN`) |
//! | hipMalloc, hipFree, hipHostMalloc, hipHostFree | cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost |
//! | hipMallocAsync, hipFreeAsync | cuMemAllocAsync, cuMemFreeAsync (optional: CUDA 11.2+) |
//! | hipMemcpy, hipMemset(Async) | cuMemcpy, cuMemsetD8(Async) |
//! | hipMemcpyAsync | cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, cuMemcpyDtoDAsync_v2 (by direction), cuMemcpyAsync |
//! | hipStream*, hipStreamWaitEvent, hipEvent* | cuStream*, cuStreamWaitEvent, cuEvent* |
//! | hipModuleLoadData, hipModuleGetFunction, hipModuleGetGlobal, hipModuleUnload | cuModule* |
//! | hipLibraryLoadData/LoadFromFile, GetKernel, GetKernelCount, EnumerateKernels, Unload, hipKernelGetFunction | cuLibrary*, cuKernelGetFunction |
//! | hipDeviceCanAccessPeer, hipDeviceEnablePeerAccess, hipMemcpyPeerAsync | cuDeviceCanAccessPeer, cuCtxEnablePeerAccess (with the peer's primary context), cuMemcpyPeerAsync (between primary contexts) |
//! | hipModuleLaunchKernel, hipModuleLaunchCooperativeKernel | cuLaunchKernel, cuLaunchCooperativeKernel |
//! | hipFuncGetAttribute, hipFuncSetAttribute, hipModuleOccupancyMaxActiveBlocksPerMultiprocessor | cuFuncGetAttribute, cuFuncSetAttribute, cuOccupancyMaxActiveBlocksPerMultiprocessor |
//! | hipStreamBeginCapture, hipStreamEndCapture, hipStreamIsCapturing, hipThreadExchangeStreamCaptureMode | cuStreamBeginCapture_v2 (with its mode), cuStreamEndCapture, cuStreamIsCapturing, cuThreadExchangeStreamCaptureMode (optional) |
//! | hipGraphInstantiateWithFlags, hipGraphLaunch, hipGraphGetNodes, hipGraphNodeGetType, hipGraphExecKernelNodeSetParams, hipGraphExecDestroy, hipGraphDestroy | cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphGetNodes, cuGraphNodeGetType, cuGraphExecKernelNodeSetParams_v2 (`CUDA_KERNEL_NODE_PARAMS_v2`), cuGraphExecDestroy, cuGraphDestroy (optional) |
//!
//! The platform is chosen by `HIP_PLATFORM` (`amd`, `nvidia`) or
//! [`Runtime::load_platform`](crate::safe::runtime::Runtime::load_platform), else detected
//! ([`Runtime::load`](crate::safe::runtime::Runtime::load)): an AMD runtime with a device first, then
//! an NVIDIA driver with a device.
//!
//! Code objects on NVIDIA are cubins ([`crate::code_object::cubin`]), targets are SM
//! architectures ([`target::SmTarget`]), loaded with
//! [`Library::load_cubin`](crate::safe::library::Library::load_cubin). The JIT is the one of both
//! platforms, [`crate::jit::Jit`], compiling with nvcc (`nvcc`) for an SM
//! target.

#[doc(hidden)]
pub mod driver;
#[doc(hidden)]
pub mod shim;

/// SM architectures, now in the target module ([`crate::target::sm`]); kept here so that
/// `hipjit::cuda::target` still names them.
pub use crate::target::sm as target;
pub use driver::CudaLoadError;

use hip_sys::pfn;

use crate::safe::runtime::{Api, DevicePropertiesFn};

/// The HIP entry-point table of the NVIDIA platform: every entry is a `shim` over the driver
/// `d`; an optional HIP entry is present when the driver exports its counterpart.
pub(crate) fn api(d: &driver::Driver) -> Api {
    use shim::*;
    Api {
        hipGetErrorName: hip_get_error_name as pfn::hipGetErrorName,
        hipGetErrorString: hip_get_error_string,
        hipRuntimeGetVersion: hip_runtime_get_version,
        hipDriverGetVersion: hip_driver_get_version,
        hipInit: hip_init,
        hipGetDeviceCount: hip_get_device_count,
        hipGetDevice: hip_get_device,
        hipSetDevice: hip_set_device,
        hipDeviceSynchronize: hip_device_synchronize,
        hipStreamCreateWithFlags: hip_stream_create_with_flags,
        hipStreamDestroy: hip_stream_destroy,
        hipStreamSynchronize: hip_stream_synchronize,
        hipStreamQuery: hip_stream_query,
        hipStreamWaitEvent: hip_stream_wait_event,
        hipMalloc: hip_malloc,
        hipFree: hip_free,
        hipHostMalloc: hip_host_malloc,
        hipHostFree: hip_host_free,
        hipMemcpy: hip_memcpy,
        hipMemcpyAsync: hip_memcpy_async,
        hipMemset: hip_memset,
        hipMemsetAsync: hip_memset_async,
        hipEventCreateWithFlags: hip_event_create_with_flags,
        hipEventDestroy: hip_event_destroy,
        hipEventRecord: hip_event_record,
        hipEventSynchronize: hip_event_synchronize,
        hipEventQuery: hip_event_query,
        hipEventElapsedTime: hip_event_elapsed_time,
        hipModuleLoadData: hip_module_load_data,
        hipModuleUnload: hip_module_unload,
        hipModuleGetFunction: hip_module_get_function,
        hipModuleGetGlobal: hip_module_get_global,
        hipModuleLaunchKernel: hip_module_launch_kernel,
        hipFuncGetAttribute: hip_func_get_attribute,
        hipMallocAsync: d
            .cuMemAllocAsync
            .map(|_| hip_malloc_async as pfn::hipMallocAsync),
        hipFreeAsync: d
            .cuMemFreeAsync
            .map(|_| hip_free_async as pfn::hipFreeAsync),
        hipFuncSetAttribute: d
            .cuFuncSetAttribute
            .map(|_| hip_func_set_attribute as pfn::hipFuncSetAttribute),
        hipModuleOccupancyMaxActiveBlocksPerMultiprocessor: d
            .cuOccupancyMaxActiveBlocksPerMultiprocessor
            .map(|_| {
                hip_module_occupancy_max_active_blocks_per_multiprocessor
                    as pfn::hipModuleOccupancyMaxActiveBlocksPerMultiprocessor
            }),
        hipModuleLaunchCooperativeKernel: d
            .cuLaunchCooperativeKernel
            .map(|_| hip_module_launch_cooperative_kernel as pfn::hipModuleLaunchCooperativeKernel),
        // The two transmutes change only the declared depth of the (unused, empty) option
        // array pointers, which HIP 7.1's headers declare one level deeper; on other header
        // sets the types are identical.
        #[allow(clippy::useless_transmute)]
        hipLibraryLoadData: d.cuLibraryLoadData.map(|_| {
            let shim: shim::LibraryLoadDataShim = hip_library_load_data;
            // SAFETY: same C ABI (pointers and integers only); see `LibraryLoadDataShim`.
            unsafe {
                std::mem::transmute::<shim::LibraryLoadDataShim, pfn::hipLibraryLoadData>(shim)
            }
        }),
        #[allow(clippy::useless_transmute)]
        hipLibraryLoadFromFile: d.cuLibraryLoadFromFile.map(|_| {
            let shim: shim::LibraryLoadFromFileShim = hip_library_load_from_file;
            // SAFETY: same C ABI (pointers and integers only); see `LibraryLoadDataShim`.
            unsafe {
                std::mem::transmute::<shim::LibraryLoadFromFileShim, pfn::hipLibraryLoadFromFile>(
                    shim,
                )
            }
        }),
        hipLibraryUnload: d
            .cuLibraryUnload
            .map(|_| hip_library_unload as pfn::hipLibraryUnload),
        hipLibraryGetKernel: d
            .cuLibraryGetKernel
            .map(|_| hip_library_get_kernel as pfn::hipLibraryGetKernel),
        hipLibraryGetKernelCount: d
            .cuLibraryGetKernelCount
            .map(|_| hip_library_get_kernel_count as pfn::hipLibraryGetKernelCount),
        hipLibraryEnumerateKernels: d
            .cuLibraryEnumerateKernels
            .map(|_| hip_library_enumerate_kernels as pfn::hipLibraryEnumerateKernels),
        hipKernelGetFunction: d
            .cuKernelGetFunction
            .map(|_| hip_kernel_get_function as pfn::hipKernelGetFunction),
        hipDeviceCanAccessPeer: d
            .cuDeviceCanAccessPeer
            .map(|_| hip_device_can_access_peer as pfn::hipDeviceCanAccessPeer),
        hipDeviceEnablePeerAccess: d
            .cuCtxEnablePeerAccess
            .map(|_| hip_device_enable_peer_access as pfn::hipDeviceEnablePeerAccess),
        hipMemcpyPeerAsync: d
            .cuMemcpyPeerAsync
            .map(|_| hip_memcpy_peer_async as pfn::hipMemcpyPeerAsync),
        hipStreamBeginCapture: d
            .cuStreamBeginCapture_v2
            .map(|_| hip_stream_begin_capture as pfn::hipStreamBeginCapture),
        hipStreamEndCapture: d
            .cuStreamEndCapture
            .map(|_| hip_stream_end_capture as pfn::hipStreamEndCapture),
        hipStreamIsCapturing: d
            .cuStreamIsCapturing
            .map(|_| hip_stream_is_capturing as pfn::hipStreamIsCapturing),
        hipThreadExchangeStreamCaptureMode: d.cuThreadExchangeStreamCaptureMode.map(|_| {
            hip_thread_exchange_stream_capture_mode as pfn::hipThreadExchangeStreamCaptureMode
        }),
        hipGraphInstantiateWithFlags: d
            .cuGraphInstantiateWithFlags
            .map(|_| hip_graph_instantiate_with_flags as pfn::hipGraphInstantiateWithFlags),
        hipGraphLaunch: d
            .cuGraphLaunch
            .map(|_| hip_graph_launch as pfn::hipGraphLaunch),
        hipGraphDestroy: d
            .cuGraphDestroy
            .map(|_| hip_graph_destroy as pfn::hipGraphDestroy),
        hipGraphExecDestroy: d
            .cuGraphExecDestroy
            .map(|_| hip_graph_exec_destroy as pfn::hipGraphExecDestroy),
        hipGraphGetNodes: d
            .cuGraphGetNodes
            .map(|_| hip_graph_get_nodes as pfn::hipGraphGetNodes),
        hipGraphNodeGetType: d
            .cuGraphNodeGetType
            .map(|_| hip_graph_node_get_type as pfn::hipGraphNodeGetType),
        hipGraphExecKernelNodeSetParams: d
            .cuGraphExecKernelNodeSetParams_v2
            .map(|_| hip_graph_exec_kernel_node_set_params as pfn::hipGraphExecKernelNodeSetParams),
        get_device_properties: DevicePropertiesFn::R0600(hip_get_device_properties_r0600),
    }
}
