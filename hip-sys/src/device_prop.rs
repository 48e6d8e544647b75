//! Both layouts of the HIP device-property struct, whatever the header set.
//!
//! HIP 6.0 changed `hipDeviceProp_t` and renamed the entry point: HIP 6+ headers say
//! `#define hipDeviceProp_t hipDeviceProp_tR0600` and
//! `#define hipGetDeviceProperties hipGetDevicePropertiesR0600`, and keep the 5.x layout as
//! `hipDeviceProp_tR0000` (`hip/hip_deprecated.h`) for the old symbol `hipGetDeviceProperties`
//! that 5.x runtimes export. bindgen sees only what the macros expand to, so a 5.x header set
//! yields only the old struct and a 6.x set the new one: the struct passed must match the entry
//! point resolved, so both are written here by hand, transcribed field for field from
//! `hipDeviceProp_tR0000` of `hip/hip_deprecated.h` (HIP 6.2 to 7.1; identical to
//! `hipDeviceProp_t` of HIP 5.2) and `hipDeviceProp_t` of `hip/hip_runtime_api.h` (HIP 6.2 to
//! 7.1, identical in all three). hip-sys's layout tests compare every field offset and the
//! size with the struct bindgen produced from the header set of the build.

use core::ffi::{c_char, c_int, c_uint};

use crate::hipError_t;

/// `hipGetDeviceProperties` of HIP 5.x runtimes (exported as that plain name), filling the
/// 5.x layout.
pub type GetDevicePropertiesR0000 =
    unsafe extern "C" fn(prop: *mut hipDeviceProp_tR0000, device: c_int) -> hipError_t;

/// `hipGetDevicePropertiesR0600` of HIP 6.0 and later runtimes, filling the 6.0 layout.
pub type GetDevicePropertiesR0600 =
    unsafe extern "C" fn(prop: *mut hipDeviceProp_tR0600, device: c_int) -> hipError_t;

/// `hipDeviceArch_t`: 17 one-bit feature flags in one 32-bit unit, bit 0 first: 0
/// hasGlobalInt32Atomics, 1 hasGlobalFloatAtomicExch, 2 hasSharedInt32Atomics, 3
/// hasSharedFloatAtomicExch, 4 hasFloatAtomicAdd, 5 hasGlobalInt64Atomics, 6
/// hasSharedInt64Atomics, 7 hasDoubles, 8 hasWarpVote, 9 hasWarpBallot, 10 hasWarpShuffle, 11
/// hasFunnelShift, 12 hasThreadFenceSystem, 13 hasSyncThreadsExt, 14 hasSurfaceFuncs, 15
/// has3dGrid, 16 hasDynamicParallelism (bit-field order of x86-64 Linux, the only ABI HIP has).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceArch {
    /// The flags, bit 0 = hasGlobalInt32Atomics.
    pub bits: c_uint,
}

impl DeviceArch {
    /// Whether bit `bit` (0 to 16, see the type's documentation) is set.
    pub fn has(&self, bit: u32) -> bool {
        bit < 32 && self.bits & (1 << bit) != 0
    }
}

/// `hipUUID`: the device's 16-byte UUID.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceUuid {
    /// The UUID's bytes.
    pub bytes: [c_char; 16],
}

/// The HIP 5.x device properties (`hipDeviceProp_t` of HIP 5.x, `hipDeviceProp_tR0000` of
/// HIP 6+), filled by [`GetDevicePropertiesR0000`]. Field comments are the header's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipDeviceProp_tR0000 {
    /// Device name.
    pub name: [c_char; 256],
    /// Size of global memory region (in bytes).
    pub totalGlobalMem: usize,
    /// Size of shared memory region (in bytes).
    pub sharedMemPerBlock: usize,
    /// Registers per block.
    pub regsPerBlock: c_int,
    /// Warp size.
    pub warpSize: c_int,
    /// Max work items per work group or workgroup max size.
    pub maxThreadsPerBlock: c_int,
    /// Max number of threads in each dimension (XYZ) of a block.
    pub maxThreadsDim: [c_int; 3],
    /// Max grid dimensions (XYZ).
    pub maxGridSize: [c_int; 3],
    /// Max clock frequency of the multiProcessors in khz.
    pub clockRate: c_int,
    /// Max global memory clock frequency in khz.
    pub memoryClockRate: c_int,
    /// Global memory bus width in bits.
    pub memoryBusWidth: c_int,
    /// Size of shared memory region (in bytes).
    pub totalConstMem: usize,
    /// Major compute capability. On HCC, this is an approximation and features may differ from CUDA
    /// CC. See the arch feature flags for portable ways to query feature caps.
    pub major: c_int,
    /// Minor compute capability. On HCC, this is an approximation and features may differ from CUDA
    /// CC. See the arch feature flags for portable ways to query feature caps.
    pub minor: c_int,
    /// Number of multi-processors. When the GPU works in Compute Unit (CU) mode, this value equals
    /// the number of CUs; when in Workgroup Processor (WGP) mode, this value equels half of CUs,
    /// because a single WGP contains two CUs.
    pub multiProcessorCount: c_int,
    /// L2 cache size.
    pub l2CacheSize: c_int,
    /// Maximum resident threads per multi-processor.
    pub maxThreadsPerMultiProcessor: c_int,
    /// Compute mode.
    pub computeMode: c_int,
    /// Frequency in khz of the timer used by the device-side "clock*" instructions. New for HIP.
    pub clockInstructionRate: c_int,
    /// Architectural feature flags. New for HIP.
    pub arch: DeviceArch,
    /// Device can possibly execute multiple kernels concurrently.
    pub concurrentKernels: c_int,
    /// PCI Domain ID
    pub pciDomainID: c_int,
    /// PCI Bus ID.
    pub pciBusID: c_int,
    /// PCI Device ID.
    pub pciDeviceID: c_int,
    /// Maximum Shared Memory Per Multiprocessor.
    pub maxSharedMemoryPerMultiProcessor: usize,
    /// 1 if device is on a multi-GPU board, 0 if not.
    pub isMultiGpuBoard: c_int,
    /// Check whether HIP can map host memory
    pub canMapHostMemory: c_int,
    /// DEPRECATED: use gcnArchName instead
    pub gcnArch: c_int,
    /// AMD GCN Arch Name.
    pub gcnArchName: [c_char; 256],
    /// APU vs dGPU
    pub integrated: c_int,
    /// HIP device supports cooperative launch
    pub cooperativeLaunch: c_int,
    /// HIP device supports cooperative launch on multiple devices
    pub cooperativeMultiDeviceLaunch: c_int,
    /// Maximum size for 1D textures bound to linear memory
    pub maxTexture1DLinear: c_int,
    /// Maximum number of elements in 1D images
    pub maxTexture1D: c_int,
    /// Maximum dimensions (width, height) of 2D images, in image elements
    pub maxTexture2D: [c_int; 2],
    /// Maximum dimensions (width, height, depth) of 3D images, in image elements
    pub maxTexture3D: [c_int; 3],
    /// Addres of HDP_MEM_COHERENCY_FLUSH_CNTL register
    pub hdpMemFlushCntl: *mut c_uint,
    /// Addres of HDP_REG_COHERENCY_FLUSH_CNTL register
    pub hdpRegFlushCntl: *mut c_uint,
    /// Maximum pitch in bytes allowed by memory copies
    pub memPitch: usize,
    /// Alignment requirement for textures
    pub textureAlignment: usize,
    /// Pitch alignment requirement for texture references bound to pitched memory
    pub texturePitchAlignment: usize,
    /// Run time limit for kernels executed on the device
    pub kernelExecTimeoutEnabled: c_int,
    /// Device has ECC support enabled
    pub ECCEnabled: c_int,
    /// 1:If device is Tesla device using TCC driver, else 0
    pub tccDriver: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched functions
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched grid dimensions
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched block dimensions
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched shared memories
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    /// 1: if it is a large PCI bar device, else 0
    pub isLargeBar: c_int,
    /// Revision of the GPU in this device
    pub asicRevision: c_int,
    /// Device supports allocating managed memory on this system
    pub managedMemory: c_int,
    /// Host can directly access managed memory on the device without migration
    pub directManagedMemAccessFromHost: c_int,
    /// Device can coherently access managed memory concurrently with the CPU
    pub concurrentManagedAccess: c_int,
    /// Device supports coherently accessing pageable memory without calling hipHostRegister on it
    pub pageableMemoryAccess: c_int,
    /// Device accesses pageable memory via the host's page tables
    pub pageableMemoryAccessUsesHostPageTables: c_int,
}

/// The HIP 6.0 device properties (`hipDeviceProp_tR0600`, what `hipDeviceProp_t` means in HIP
/// 6+ headers), filled by [`GetDevicePropertiesR0600`]. Field comments are the header's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipDeviceProp_tR0600 {
    /// Device name.
    pub name: [c_char; 256],
    /// UUID of a device
    pub uuid: DeviceUuid,
    /// 8-byte unique identifier. Only valid on windows
    pub luid: [c_char; 8],
    /// LUID node mask
    pub luidDeviceNodeMask: c_uint,
    /// Size of global memory region (in bytes).
    pub totalGlobalMem: usize,
    /// Size of shared memory per block (in bytes).
    pub sharedMemPerBlock: usize,
    /// Registers per block.
    pub regsPerBlock: c_int,
    /// Warp size.
    pub warpSize: c_int,
    /// Maximum pitch in bytes allowed by memory copies pitched memory
    pub memPitch: usize,
    /// Max work items per work group or workgroup max size.
    pub maxThreadsPerBlock: c_int,
    /// Max number of threads in each dimension (XYZ) of a block.
    pub maxThreadsDim: [c_int; 3],
    /// Max grid dimensions (XYZ).
    pub maxGridSize: [c_int; 3],
    /// Max clock frequency of the multiProcessors in khz.
    pub clockRate: c_int,
    /// Size of shared constant memory region on the device (in bytes).
    pub totalConstMem: usize,
    /// Major compute capability version. This indicates the core instruction set of the GPU
    /// architecture. For example, a value of 11 would correspond to Navi III (RDNA3). See the arch
    /// feature flags for portable ways to query feature caps.
    pub major: c_int,
    /// Minor compute capability version. This indicates a particular configuration, feature set, or
    /// variation within the group represented by the major compute capability version. For example,
    /// different models within the same major version might have varying levels of support for
    /// certain features or optimizations. See the arch feature flags for portable ways to query
    /// feature caps.
    pub minor: c_int,
    /// Alignment requirement for textures
    pub textureAlignment: usize,
    /// Pitch alignment requirement for texture references bound to
    pub texturePitchAlignment: usize,
    /// Deprecated. Use asyncEngineCount instead
    pub deviceOverlap: c_int,
    /// Number of multi-processors. When the GPU works in Compute Unit (CU) mode, this value equals
    /// the number of CUs; when in Workgroup Processor (WGP) mode, this value equels half of CUs,
    /// because a single WGP contains two CUs.
    pub multiProcessorCount: c_int,
    /// Run time limit for kernels executed on the device
    pub kernelExecTimeoutEnabled: c_int,
    /// APU vs dGPU
    pub integrated: c_int,
    /// Check whether HIP can map host memory
    pub canMapHostMemory: c_int,
    /// Compute mode.
    pub computeMode: c_int,
    /// Maximum number of elements in 1D images
    pub maxTexture1D: c_int,
    /// Maximum 1D mipmap texture size
    pub maxTexture1DMipmap: c_int,
    /// Maximum size for 1D textures bound to linear memory
    pub maxTexture1DLinear: c_int,
    /// Maximum dimensions (width, height) of 2D images, in image elements
    pub maxTexture2D: [c_int; 2],
    /// Maximum number of elements in 2D array mipmap of images
    pub maxTexture2DMipmap: [c_int; 2],
    /// Maximum 2D tex dimensions if tex are bound to pitched memory
    pub maxTexture2DLinear: [c_int; 3],
    /// Maximum 2D tex dimensions if gather has to be performed
    pub maxTexture2DGather: [c_int; 2],
    /// Maximum dimensions (width, height, depth) of 3D images, in image elements
    pub maxTexture3D: [c_int; 3],
    /// Maximum alternate 3D texture dims
    pub maxTexture3DAlt: [c_int; 3],
    /// Maximum cubemap texture dims
    pub maxTextureCubemap: c_int,
    /// Maximum number of elements in 1D array images
    pub maxTexture1DLayered: [c_int; 2],
    /// Maximum number of elements in 2D array images
    pub maxTexture2DLayered: [c_int; 3],
    /// Maximum cubemaps layered texture dims
    pub maxTextureCubemapLayered: [c_int; 2],
    /// Maximum 1D surface size
    pub maxSurface1D: c_int,
    /// Maximum 2D surface size
    pub maxSurface2D: [c_int; 2],
    /// Maximum 3D surface size
    pub maxSurface3D: [c_int; 3],
    /// Maximum 1D layered surface size
    pub maxSurface1DLayered: [c_int; 2],
    /// Maximum 2D layared surface size
    pub maxSurface2DLayered: [c_int; 3],
    /// Maximum cubemap surface size
    pub maxSurfaceCubemap: c_int,
    /// Maximum cubemap layered surface size
    pub maxSurfaceCubemapLayered: [c_int; 2],
    /// Alignment requirement for surface
    pub surfaceAlignment: usize,
    /// Device can possibly execute multiple kernels concurrently.
    pub concurrentKernels: c_int,
    /// Device has ECC support enabled
    pub ECCEnabled: c_int,
    /// PCI Bus ID.
    pub pciBusID: c_int,
    /// PCI Device ID
    pub pciDeviceID: c_int,
    /// PCI Domain ID
    pub pciDomainID: c_int,
    /// 1:If device is Tesla device using TCC driver, else 0
    pub tccDriver: c_int,
    /// Number of async engines
    pub asyncEngineCount: c_int,
    /// Does device and host share unified address space
    pub unifiedAddressing: c_int,
    /// Max global memory clock frequency in khz.
    pub memoryClockRate: c_int,
    /// Global memory bus width in bits.
    pub memoryBusWidth: c_int,
    /// L2 cache size.
    pub l2CacheSize: c_int,
    /// Device's max L2 persisting lines in bytes
    pub persistingL2CacheMaxSize: c_int,
    /// Maximum resident threads per multi-processor.
    pub maxThreadsPerMultiProcessor: c_int,
    /// Device supports stream priority
    pub streamPrioritiesSupported: c_int,
    /// Indicates globals are cached in L1
    pub globalL1CacheSupported: c_int,
    /// Locals are cahced in L1
    pub localL1CacheSupported: c_int,
    /// Amount of shared memory available per multiprocessor.
    pub sharedMemPerMultiprocessor: usize,
    /// registers available per multiprocessor
    pub regsPerMultiprocessor: c_int,
    /// Device supports allocating managed memory on this system
    pub managedMemory: c_int,
    /// 1 if device is on a multi-GPU board, 0 if not.
    pub isMultiGpuBoard: c_int,
    /// Unique identifier for a group of devices on same multiboard GPU
    pub multiGpuBoardGroupID: c_int,
    /// Link between host and device supports native atomics
    pub hostNativeAtomicSupported: c_int,
    /// Deprecated. CUDA only.
    pub singleToDoublePrecisionPerfRatio: c_int,
    /// Device supports coherently accessing pageable memory without calling hipHostRegister on it
    pub pageableMemoryAccess: c_int,
    /// Device can coherently access managed memory concurrently with the CPU
    pub concurrentManagedAccess: c_int,
    /// Is compute preemption supported on the device
    pub computePreemptionSupported: c_int,
    /// Device can access host registered memory with same address as the host
    pub canUseHostPointerForRegisteredMem: c_int,
    /// HIP device supports cooperative launch
    pub cooperativeLaunch: c_int,
    /// HIP device supports cooperative launch on multiple devices
    pub cooperativeMultiDeviceLaunch: c_int,
    /// Per device m ax shared mem per block usable by special opt in
    pub sharedMemPerBlockOptin: usize,
    /// Device accesses pageable memory via the host's page tables
    pub pageableMemoryAccessUsesHostPageTables: c_int,
    /// Host can directly access managed memory on the device without migration
    pub directManagedMemAccessFromHost: c_int,
    /// Max number of blocks on CU
    pub maxBlocksPerMultiProcessor: c_int,
    /// Max value of access policy window
    pub accessPolicyMaxWindowSize: c_int,
    /// Shared memory reserved by driver per block
    pub reservedSharedMemPerBlock: usize,
    /// Device supports hipHostRegister
    pub hostRegisterSupported: c_int,
    /// Indicates if device supports sparse hip arrays
    pub sparseHipArraySupported: c_int,
    /// Device supports using the hipHostRegisterReadOnly flag with hipHostRegistger
    pub hostRegisterReadOnlySupported: c_int,
    /// Indicates external timeline semaphore support
    pub timelineSemaphoreInteropSupported: c_int,
    /// Indicates if device supports hipMallocAsync and hipMemPool APIs
    pub memoryPoolsSupported: c_int,
    /// Indicates device support of RDMA APIs
    pub gpuDirectRDMASupported: c_int,
    /// Bitmask to be interpreted according to hipFlushGPUDirectRDMAWritesOptions
    pub gpuDirectRDMAFlushWritesOptions: c_uint,
    /// value of hipGPUDirectRDMAWritesOrdering
    pub gpuDirectRDMAWritesOrdering: c_int,
    /// Bitmask of handle types support with mempool based IPC
    pub memoryPoolSupportedHandleTypes: c_uint,
    /// Device supports deferred mapping HIP arrays and HIP mipmapped arrays
    pub deferredMappingHipArraySupported: c_int,
    /// Device supports IPC events
    pub ipcEventSupported: c_int,
    /// Device supports cluster launch
    pub clusterLaunch: c_int,
    /// Indicates device supports unified function pointers
    pub unifiedFunctionPointers: c_int,
    /// CUDA Reserved.
    pub reserved: [c_int; 63],
    /// Reserved for adding new entries for HIP/CUDA.
    pub hipReserved: [c_int; 32],
    /// AMD GCN Arch Name. HIP Only.
    pub gcnArchName: [c_char; 256],
    /// Maximum Shared Memory Per CU. HIP Only.
    pub maxSharedMemoryPerMultiProcessor: usize,
    /// Frequency in khz of the timer used by the device-side "clock*" instructions. New for HIP.
    pub clockInstructionRate: c_int,
    /// Architectural feature flags. New for HIP.
    pub arch: DeviceArch,
    /// Addres of HDP_MEM_COHERENCY_FLUSH_CNTL register
    pub hdpMemFlushCntl: *mut c_uint,
    /// Addres of HDP_REG_COHERENCY_FLUSH_CNTL register
    pub hdpRegFlushCntl: *mut c_uint,
    /// HIP device supports cooperative launch on multiple devices with unmatched functions
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched grid dimensions
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched block dimensions
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    /// HIP device supports cooperative launch on multiple devices with unmatched shared memories
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    /// 1: if it is a large PCI bar device, else 0
    pub isLargeBar: c_int,
    /// Revision of the GPU in this device
    pub asicRevision: c_int,
}

macro_rules! zeroed {
    ($($t:ty),*) => {$(
        impl $t {
            /// All fields zero (null pointers), ready to be filled by the runtime.
            pub fn zeroed() -> Self {
                // SAFETY: every field is an integer, an array of integers, a struct of
                // integers or a raw pointer, for which all-zero bytes are a valid value.
                unsafe { core::mem::zeroed() }
            }
        }

        impl Default for $t {
            fn default() -> Self {
                Self::zeroed()
            }
        }
    )*};
}

zeroed!(hipDeviceProp_tR0000, hipDeviceProp_tR0600);
