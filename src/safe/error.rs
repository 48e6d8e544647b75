//! Errors of the safe layer: HIP calls that failed ([`HipError`]), loading the HIP runtime
//! ([`LoadError`]), loading a code object ([`LibraryError`]) and launching a kernel
//! ([`LaunchError`]).
//!
//! Every `hipError_t` is reported by its C name (`hipErrorNoDevice`), with the HIP function that
//! returned it and the runtime's own string (`hipGetErrorString`).

use std::fmt;
use std::path::PathBuf;

use crate::target::TargetId;

/// Every `hipError_t` value by its C name, as declared by the HIP 6.4 headers
/// (`hip/hip_runtime_api.h`, `enum hipError_t`). Where the enum gives one value two names (an
/// old CUDA-style alias), the first name declared is kept.
pub const HIP_ERROR_NAMES: &[(i32, &str)] = &[
    (0, "hipSuccess"),
    (1, "hipErrorInvalidValue"),
    (2, "hipErrorOutOfMemory"),
    (3, "hipErrorNotInitialized"),
    (4, "hipErrorDeinitialized"),
    (5, "hipErrorProfilerDisabled"),
    (6, "hipErrorProfilerNotInitialized"),
    (7, "hipErrorProfilerAlreadyStarted"),
    (8, "hipErrorProfilerAlreadyStopped"),
    (9, "hipErrorInvalidConfiguration"),
    (12, "hipErrorInvalidPitchValue"),
    (13, "hipErrorInvalidSymbol"),
    (17, "hipErrorInvalidDevicePointer"),
    (21, "hipErrorInvalidMemcpyDirection"),
    (35, "hipErrorInsufficientDriver"),
    (52, "hipErrorMissingConfiguration"),
    (53, "hipErrorPriorLaunchFailure"),
    (98, "hipErrorInvalidDeviceFunction"),
    (100, "hipErrorNoDevice"),
    (101, "hipErrorInvalidDevice"),
    (200, "hipErrorInvalidImage"),
    (201, "hipErrorInvalidContext"),
    (202, "hipErrorContextAlreadyCurrent"),
    (205, "hipErrorMapFailed"),
    (206, "hipErrorUnmapFailed"),
    (207, "hipErrorArrayIsMapped"),
    (208, "hipErrorAlreadyMapped"),
    (209, "hipErrorNoBinaryForGpu"),
    (210, "hipErrorAlreadyAcquired"),
    (211, "hipErrorNotMapped"),
    (212, "hipErrorNotMappedAsArray"),
    (213, "hipErrorNotMappedAsPointer"),
    (214, "hipErrorECCNotCorrectable"),
    (215, "hipErrorUnsupportedLimit"),
    (216, "hipErrorContextAlreadyInUse"),
    (217, "hipErrorPeerAccessUnsupported"),
    (218, "hipErrorInvalidKernelFile"),
    (219, "hipErrorInvalidGraphicsContext"),
    (300, "hipErrorInvalidSource"),
    (301, "hipErrorFileNotFound"),
    (302, "hipErrorSharedObjectSymbolNotFound"),
    (303, "hipErrorSharedObjectInitFailed"),
    (304, "hipErrorOperatingSystem"),
    (400, "hipErrorInvalidHandle"),
    (401, "hipErrorIllegalState"),
    (500, "hipErrorNotFound"),
    (600, "hipErrorNotReady"),
    (700, "hipErrorIllegalAddress"),
    (701, "hipErrorLaunchOutOfResources"),
    (702, "hipErrorLaunchTimeOut"),
    (704, "hipErrorPeerAccessAlreadyEnabled"),
    (705, "hipErrorPeerAccessNotEnabled"),
    (708, "hipErrorSetOnActiveProcess"),
    (709, "hipErrorContextIsDestroyed"),
    (710, "hipErrorAssert"),
    (712, "hipErrorHostMemoryAlreadyRegistered"),
    (713, "hipErrorHostMemoryNotRegistered"),
    (719, "hipErrorLaunchFailure"),
    (720, "hipErrorCooperativeLaunchTooLarge"),
    (801, "hipErrorNotSupported"),
    (900, "hipErrorStreamCaptureUnsupported"),
    (901, "hipErrorStreamCaptureInvalidated"),
    (902, "hipErrorStreamCaptureMerge"),
    (903, "hipErrorStreamCaptureUnmatched"),
    (904, "hipErrorStreamCaptureUnjoined"),
    (905, "hipErrorStreamCaptureIsolation"),
    (906, "hipErrorStreamCaptureImplicit"),
    (907, "hipErrorCapturedEvent"),
    (908, "hipErrorStreamCaptureWrongThread"),
    (910, "hipErrorGraphExecUpdateFailure"),
    (911, "hipErrorInvalidChannelDescriptor"),
    (912, "hipErrorInvalidTexture"),
    (999, "hipErrorUnknown"),
    (1052, "hipErrorRuntimeMemory"),
    (1053, "hipErrorRuntimeOther"),
];

/// The C name of a `hipError_t` value (`100` -> `"hipErrorNoDevice"`), or `None` for a value
/// no HIP header this table was made from declares.
pub fn hip_error_name(code: i32) -> Option<&'static str> {
    HIP_ERROR_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, name)| *name)
}

/// The name of the error hipjit gives for device properties that fail its sanity check
/// ([`HipError::is_device_properties_skew`]): the runtime wrote another `hipDeviceProp_t` layout
/// than the one read (header/runtime skew), which would otherwise become a wrong launch.
pub const DEVICE_PROPERTIES_SKEW: &str = "DevicePropertiesSkew";

/// A HIP runtime call that returned something other than `hipSuccess`.
///
/// Displays as `hipGetDeviceCount failed: hipErrorNoDevice (100): no ROCm-capable device is
/// detected`: the call, the code's C name, the numeric code and the runtime's own string
/// (`hipGetErrorString`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HipError {
    code: i32,
    name: String,
    call: &'static str,
    message: String,
}

impl HipError {
    /// An error for `code` returned by `call`, with the runtime's string `message`. The name comes
    /// from [`HIP_ERROR_NAMES`], else from `runtime_name` (the runtime's `hipGetErrorName`), else
    /// `hipError_t(<code>)`.
    pub fn new(
        code: i32,
        call: &'static str,
        runtime_name: Option<String>,
        message: String,
    ) -> HipError {
        let name = hip_error_name(code)
            .map(str::to_owned)
            .or(runtime_name)
            .unwrap_or_else(|| format!("hipError_t({code})"));
        HipError {
            code,
            name,
            call,
            message,
        }
    }

    /// The error hipjit gives when the device properties a runtime returned fail the sanity
    /// check of [`crate::device::DeviceProperties`] (a header/runtime layout skew): named
    /// [`DEVICE_PROPERTIES_SKEW`], code `hipErrorInvalidValue` (1), the properties call as
    /// the call and what was wrong as the message.
    pub(crate) fn device_properties_skew(call: &'static str, message: String) -> HipError {
        HipError {
            code: 1,
            name: DEVICE_PROPERTIES_SKEW.to_owned(),
            call,
            message,
        }
    }

    /// Whether this is hipjit's [`DEVICE_PROPERTIES_SKEW`] error: the runtime's device
    /// properties broke an invariant (`gcnArchName` not `gfx...`, `warpSize` not 32 or 64,
    /// `maxThreadsPerBlock` over 1024, a size of zero), so they were read with a layout other
    /// than the one the runtime wrote.
    pub fn is_device_properties_skew(&self) -> bool {
        self.name == DEVICE_PROPERTIES_SKEW
    }

    /// The numeric `hipError_t` value.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The C name of the code (`hipErrorNoDevice`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The HIP function that returned the error (`hipModuleLoadData`).
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// The runtime's own string for the code (`hipGetErrorString`); empty when the runtime gave
    /// none.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the code is `hipErrorInvalidImage` (200): the runtime rejected a code object.
    pub fn is_invalid_image(&self) -> bool {
        self.code == 200
    }

    /// Whether the code is `hipErrorNoDevice` (100).
    pub fn is_no_device(&self) -> bool {
        self.code == 100
    }

    /// Whether the code is `hipErrorNotReady` (600): work is still pending (stream or event
    /// query).
    pub fn is_not_ready(&self) -> bool {
        self.code == 600
    }
}

impl fmt::Display for HipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({})", self.call, self.name, self.code)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for HipError {}

/// Loading the HIP runtime library failed ([`crate::safe::runtime::Runtime::load`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// `HIPJIT_HIP_LIBRARY` is set (non-empty) but does not name a loadable library.
    #[error("HIPJIT_HIP_LIBRARY={path} cannot be loaded: {reason}")]
    InvalidEnvPath {
        /// The variable's value.
        path: PathBuf,
        /// What dlopen said.
        reason: String,
    },
    /// An explicitly given library path could not be opened.
    #[error("cannot load the HIP runtime {path}: {reason}")]
    Open {
        /// The path handed to dlopen.
        path: PathBuf,
        /// What dlopen said (`dlerror`).
        reason: String,
    },
    /// No candidate of the discovery order could be opened.
    #[error("no HIP runtime found; tried: {}", format_tried(.tried))]
    NotFound {
        /// Each candidate tried, with what dlopen said.
        tried: Vec<(String, String)>,
    },
    /// A function every supported runtime exports is missing.
    #[error(
        "the HIP runtime {path} (version {version}) does not export the required symbol {symbol}"
    )]
    MissingSymbol {
        /// The symbol's C name.
        symbol: &'static str,
        /// The library actually loaded.
        path: PathBuf,
        /// `hipRuntimeGetVersion` as `major.minor.patch (raw)`, or `unknown`.
        version: String,
    },
    /// The CUDA driver of HIP's NVIDIA platform could not be loaded.
    #[error(transparent)]
    Cuda(#[from] crate::safe::cuda::driver::CudaLoadError),
    /// `HIP_PLATFORM` names no platform hipjit knows.
    #[error("HIP_PLATFORM={value} names no platform: use amd or nvidia")]
    Platform {
        /// The variable's value.
        value: String,
    },
}

fn format_tried(tried: &[(String, String)]) -> String {
    tried
        .iter()
        .map(|(what, why)| format!("{what} ({why})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The runtime lacks the HIP library API ([`crate::safe::runtime::Runtime::require_library_api`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the HIP runtime {path} (version {version}) does not export {symbol}: the HIP library API \
     (hipLibraryLoadFromFile, hipLibraryGetKernelCount, hipLibraryEnumerateKernels, \
     hipKernelGetFunction, hipLibraryUnload; ROCm 7.2 and later) is incomplete"
)]
pub struct LibraryApiError {
    /// The first of the five symbols that is missing.
    pub symbol: &'static str,
    /// The library loaded.
    pub path: PathBuf,
    /// The runtime version, as in [`LoadError::MissingSymbol`].
    pub version: String,
}

/// Loading a code object or looking up a kernel failed ([`crate::safe::library::Library`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LibraryError {
    /// A HIP call failed (for a rejected code object: `hipErrorInvalidImage`).
    #[error(transparent)]
    Hip(#[from] HipError),
    /// A cubin built for an SM architecture the device cannot run.
    #[error("the cubin is for {cubin}, device {ordinal} is {device}")]
    SmMismatch {
        /// The cubin's SM target.
        cubin: String,
        /// The device's SM target.
        device: String,
        /// The device ordinal.
        ordinal: i32,
    },
    /// The code object was built for a target that does not run on the device.
    #[error("the code object is built for {code_object}, which does not run on device {ordinal} ({device})")]
    TargetMismatch {
        /// The code object's target ID.
        code_object: TargetId,
        /// The device's target ID.
        device: TargetId,
        /// The device ordinal.
        ordinal: i32,
    },
    /// The device's `gcnArchName` does not parse as a target ID, so compatibility cannot be
    /// checked.
    #[error("device {ordinal} reports the architecture {arch_name:?}, which is not a target ID hipjit knows")]
    UnknownDeviceTarget {
        /// The device ordinal.
        ordinal: i32,
        /// `gcnArchName` as the runtime reported it.
        arch_name: String,
    },
    /// The runtime does not accept the code object's version.
    #[error(
        "code object v{version} is not accepted by the HIP runtime {runtime_version} \
         (it accepts v{})",
        format_versions(.accepted)
    )]
    CodeObjectVersion {
        /// The code object's version (4, 5, 6).
        version: u32,
        /// The runtime's version (`major.minor.patch`).
        runtime_version: String,
        /// The versions the runtime accepts.
        accepted: Vec<u32>,
    },
    /// The code object could not be read.
    #[error(transparent)]
    CodeObject(#[from] crate::code_object::CodeObjectError),
    /// A code-object file could not be read.
    #[error("cannot read the code object {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No kernel of that name is in the library.
    #[error("no kernel named {name} in the code object (kernels: {})", .available.join(", "))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The kernels the code object declares.
        available: Vec<String>,
    },
    /// A name holds a NUL byte and cannot be handed to the runtime.
    #[error("the name {0:?} contains a NUL byte")]
    NulInName(String),
    /// The operation needs the module API (a loaded `hipModule_t`), but the library was loaded
    /// through the library API.
    #[error(
        "{what} needs the module API, but this library was loaded through the HIP library API"
    )]
    NeedsModuleApi {
        /// The operation.
        what: &'static str,
    },
    /// The runtime does not export an optional function the operation needs.
    #[error("the HIP runtime does not export {symbol}")]
    Unsupported {
        /// The missing symbol.
        symbol: &'static str,
    },
}

fn format_versions(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", v")
}

/// Which dimension of a launch configuration is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// x
    X,
    /// y
    Y,
    /// z
    Z,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dim::X => "x",
            Dim::Y => "y",
            Dim::Z => "z",
        })
    }
}

/// A launch was refused before reaching the runtime, or the runtime refused it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The runtime's launch call failed.
    #[error(transparent)]
    Hip(#[from] HipError),
    /// The stream belongs to another device than the kernel's library.
    #[error("the stream is on device {stream}, the kernel's library on device {kernel}")]
    WrongDevice {
        /// The stream's device ordinal.
        stream: i32,
        /// The library's device ordinal.
        kernel: i32,
    },
    /// A grid or block dimension is zero.
    #[error("launch configuration: {what}.{dim} is 0")]
    ZeroDim {
        /// `grid` or `block`.
        what: &'static str,
        /// The dimension.
        dim: Dim,
    },
    /// A block dimension exceeds the device's maximum.
    #[error("launch configuration: block.{dim} = {value} exceeds the device's maximum {max}")]
    BlockDim {
        /// The dimension.
        dim: Dim,
        /// The value asked for.
        value: u32,
        /// The device's limit (`maxThreadsDim`).
        max: u32,
    },
    /// A grid dimension exceeds the device's maximum.
    #[error("launch configuration: grid.{dim} = {value} exceeds the device's maximum {max}")]
    GridDim {
        /// The dimension.
        dim: Dim,
        /// The value asked for.
        value: u32,
        /// The device's limit (`maxGridSize`).
        max: u32,
    },
    /// The block has more threads than the device or the kernel allows.
    #[error("launch configuration: {threads} threads per block exceed the {which} maximum {max}")]
    BlockThreads {
        /// x*y*z of the block.
        threads: u64,
        /// `device` or `kernel`.
        which: &'static str,
        /// The limit.
        max: u64,
    },
    /// Static plus dynamic LDS exceeds the device's LDS per block.
    #[error(
        "launch configuration: {static_lds} bytes static + {dynamic_lds} bytes dynamic LDS exceed \
         the device's {max} bytes of LDS per block"
    )]
    Lds {
        /// The kernel's static LDS (bytes).
        static_lds: u64,
        /// The dynamic LDS asked for (bytes).
        dynamic_lds: u64,
        /// The device's LDS per block (bytes).
        max: u64,
    },
    /// More arguments than a launch can carry.
    #[error("too many kernel arguments: at most {max}")]
    TooManyArgs {
        /// The limit ([`crate::safe::launch::MAX_KERNEL_ARGS`]).
        max: usize,
    },
    /// The argument count differs from the kernel's metadata.
    #[error("kernel {kernel} takes {expected} arguments, {given} given")]
    ArgCount {
        /// The kernel's name.
        kernel: String,
        /// Explicit arguments in the code object's metadata.
        expected: usize,
        /// Arguments passed.
        given: usize,
    },
    /// An argument's size differs from the kernel's metadata.
    #[error(
        "kernel {kernel} argument {index}{}: {expected} bytes expected, {given} given",
        name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    ArgSize {
        /// The kernel's name.
        kernel: String,
        /// The argument's position, from 0.
        index: usize,
        /// The argument's name, when the code object's metadata records it (`.name`; hipcc
        /// leaves it out unless asked for).
        name: Option<String>,
        /// Its size in the metadata (bytes).
        expected: u32,
        /// The size of the value passed (bytes).
        given: u32,
    },
    /// The code object's metadata says the kernel writes an argument (`.access` or
    /// `.actual_access` `write_only`/`read_write`) that was passed as a shared borrow: pass it
    /// as `&mut` ([`crate::safe::launch`]).
    #[error(
        "kernel {kernel} argument {index}{}: the code object says the kernel writes it ({access}), \
         but it was passed as a shared borrow; pass it as &mut",
        name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    ArgWritten {
        /// The kernel's name.
        kernel: String,
        /// The argument's position, from 0.
        index: usize,
        /// The argument's name, when the metadata records it.
        name: Option<String>,
        /// The metadata's access (`write_only` or `read_write`).
        access: String,
    },
    /// A cooperative launch was asked for, but the runtime does not export
    /// `hipModuleLaunchCooperativeKernel`.
    #[error(
        "the HIP runtime does not export hipModuleLaunchCooperativeKernel (cooperative launch)"
    )]
    NoCooperativeLaunch,
    /// A cooperative launch has more blocks than can be resident at once.
    #[error(
        "cooperative launch of {blocks} blocks exceeds the {max} blocks that can be resident at \
         once ({per_cu} per compute unit x {cus} compute units)"
    )]
    CooperativeTooLarge {
        /// Blocks in the grid.
        blocks: u64,
        /// The limit.
        max: u64,
        /// Occupancy per compute unit.
        per_cu: u32,
        /// Compute units.
        cus: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_error_names_call_code_and_message() {
        let e = HipError::new(100, "hipGetDeviceCount", None, "no device".into());
        assert_eq!(
            e.to_string(),
            "hipGetDeviceCount failed: hipErrorNoDevice (100): no device"
        );
    }

    #[test]
    fn unknown_code_falls_back_to_runtime_name() {
        let e = HipError::new(
            4242,
            "hipInit",
            Some("hipErrorFuture".into()),
            String::new(),
        );
        assert_eq!(e.name(), "hipErrorFuture");
        let e = HipError::new(4242, "hipInit", None, String::new());
        assert_eq!(e.name(), "hipError_t(4242)");
    }

    #[test]
    fn arg_size_error_names_index_and_name_when_known() {
        let e = |name: Option<&str>| LaunchError::ArgSize {
            kernel: "scale".into(),
            index: 2,
            name: name.map(str::to_owned),
            expected: 4,
            given: 8,
        };
        assert_eq!(
            e(Some("n")).to_string(),
            "kernel scale argument 2 (n): 4 bytes expected, 8 given"
        );
        assert_eq!(
            e(None).to_string(),
            "kernel scale argument 2: 4 bytes expected, 8 given"
        );
    }

    #[test]
    fn not_found_lists_every_candidate_with_the_reason() {
        let e = LoadError::NotFound {
            tried: vec![
                (
                    "/opt/rocm/lib (/opt/rocm)".into(),
                    "no libamdhip64.so*".into(),
                ),
                (
                    "libamdhip64.so.7".into(),
                    "libamdhip64.so.7: cannot open shared object file".into(),
                ),
            ],
        };
        assert_eq!(
            e.to_string(),
            "no HIP runtime found; tried: /opt/rocm/lib (/opt/rocm) (no libamdhip64.so*); \
             libamdhip64.so.7 (libamdhip64.so.7: cannot open shared object file)"
        );
    }

    #[test]
    fn table_has_one_name_per_code() {
        for (i, (code, name)) in HIP_ERROR_NAMES.iter().enumerate() {
            assert!(
                HIP_ERROR_NAMES[i + 1..].iter().all(|(c, _)| c != code),
                "{name} ({code}) twice"
            );
        }
    }

    #[test]
    fn invalid_image_is_recognised() {
        assert!(HipError::new(200, "hipModuleLoadData", None, String::new()).is_invalid_image());
        assert!(!HipError::new(101, "hipModuleLoadData", None, String::new()).is_invalid_image());
    }

    /// The enumerators `name = value` of `enum hipError_t` in a header, `None` when the header
    /// does not define the enum itself (an overlay that includes another header).
    fn header_enum(header: &std::path::Path) -> Option<Vec<(String, i32)>> {
        let text = std::fs::read_to_string(header)
            .unwrap_or_else(|e| panic!("{}: {e}; install libamdhip64-dev", header.display()));
        let start = text
            .find("typedef enum __HIP_NODISCARD hipError_t")
            .or_else(|| text.find("typedef enum hipError_t"))?;
        let end = start + text[start..].find("} hipError_t;").expect("end of enum");
        let mut pairs = Vec::new();
        for line in text[start..end].lines() {
            let Some((name, rest)) = line.trim().split_once('=') else {
                continue;
            };
            let value: String = rest
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let Ok(value) = value.parse::<i32>() {
                pairs.push((name.trim().to_owned(), value));
            }
        }
        Some(pairs)
    }

    /// Every enumerator of `hipError_t` in every HIP header set on this machine (Debian's 5.2,
    /// and the 6.2, 6.4, 7.1 sets when unpacked) is in the table under its own name, or under
    /// an earlier name the header gives the same value (aliases such as
    /// `hipErrorMemoryAllocation` = `hipErrorOutOfMemory`).
    #[test]
    fn table_matches_every_installed_header_enum() {
        let mut headers = vec![std::path::PathBuf::from(
            "/usr/include/hip/hip_runtime_api.h",
        )];
        if let Ok(sets) = std::fs::read_dir("/var/cache/hipjit-ci/headers") {
            for set in sets.flatten() {
                let h = set.path().join("include/hip/hip_runtime_api.h");
                if h.exists() {
                    headers.push(h);
                }
            }
        }
        for (i, header) in headers.iter().enumerate() {
            let Some(pairs) = header_enum(header) else {
                assert!(i > 0, "{}: no enum hipError_t", header.display());
                continue;
            };
            assert!(
                pairs.len() > 50,
                "{}: only {} enumerators",
                header.display(),
                pairs.len()
            );
            for (name, value) in &pairs {
                let known = hip_error_name(*value)
                    .unwrap_or_else(|| panic!("{}: {name} = {value} missing", header.display()));
                assert!(
                    known == name || pairs.iter().any(|(n, v)| n == known && v == value),
                    "{}: {name} = {value}, the table says {known}",
                    header.display()
                );
            }
        }
    }
}
