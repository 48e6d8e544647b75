//! The NVIDIA half of `hipjit doctor`: which platform `Runtime::load` takes and why, the CUDA
//! driver (probed in a child process, `hipjit probe-cuda`, so that a broken driver only fails
//! its own section), and nvcc.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hipjit::compiler::nvcc::{Nvcc, NVCC_ENV};
use hipjit::cuda::driver::{self, Driver, LIBRARY_ENV, SONAME};
use hipjit::runtime::PLATFORM_ENV;
use serde::{Deserialize, Serialize};

use crate::doctor::{last_line, run_with_timeout, Finding, Probe};
use crate::output::CliError;

/// The five driver symbols hipjit maps the HIP library API onto (CUDA 12.4 and later export
/// all five); without them code objects load through `cuModuleLoadData`.
pub const CUDA_LIBRARY_API: [&str; 5] = [
    "cuLibraryLoadData",
    "cuLibraryGetKernelCount",
    "cuLibraryEnumerateKernels",
    "cuKernelGetFunction",
    "cuLibraryUnload",
];

/// How long the driver probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `nvcc --version` may take.
const NVCC_TIMEOUT: Duration = Duration::from_secs(60);

/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` / `_MINOR` (cuda.h).
const CC_MAJOR: c_int = 75;
const CC_MINOR: c_int = 76;

/// Arguments of the hidden `probe-cuda`.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// The driver library to load; without it, `HIPJIT_CUDA_LIBRARY`, else `libcuda.so.1`.
    #[arg(long)]
    pub library: Option<PathBuf>,
}

/// One device the driver reports.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct CudaDevice {
    /// `cuDeviceGetName`.
    pub name: String,
    /// The SM target of its compute capability (`sm_90`).
    pub target: Option<String>,
}

/// What the child reports about the CUDA driver, and what doctor adds.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct CudaReport {
    /// What was asked to load (`HIPJIT_CUDA_LIBRARY`'s value or `libcuda.so.1`).
    pub asked: String,
    /// `HIPJIT_CUDA_LIBRARY` or `dynamic loader`.
    pub origin: String,
    /// The file loaded (`dladdr`), when it loaded.
    pub path: Option<PathBuf>,
    /// `cuDriverGetVersion` as `major.minor` (the newest CUDA the driver supports).
    pub version: Option<String>,
    /// The raw `cuDriverGetVersion` value (`12040` for 12.4).
    pub version_code: Option<i32>,
    /// Of [`CUDA_LIBRARY_API`], how many it exports.
    pub library_api_exported: usize,
    /// Each of the five and whether it is exported.
    pub library_api: BTreeMap<String, bool>,
    /// The devices (`cuDeviceGetCount`), with their SM targets.
    pub devices: Vec<CudaDevice>,
    /// Why there are no devices: the failing call and the named `CUresult`.
    pub device_error: Option<String>,
    /// Why the driver could not be loaded (or the probe process failed).
    pub load_error: Option<String>,
}

/// The nvcc found.
#[derive(Serialize, Debug, Default)]
pub struct NvccReport {
    /// The executable, when found.
    pub path: Option<PathBuf>,
    /// Where it was found: `HIPJIT_NVCC`, `CUDA_PATH`, `CUDA_HOME`, `PATH`, `/usr/local/cuda`.
    pub origin: Option<String>,
    /// `release 13.0` of `nvcc --version`, as `13.0`.
    pub release: Option<String>,
    /// The last line of `nvcc --version` (`Build cuda_13.0.r13.0/compiler...`, or the release
    /// line).
    pub version: Option<String>,
    /// Why none was found or it could not be run.
    pub error: Option<String>,
    /// nvcc's host compiler, as hipjit finds it (`NVCC_CCBIN`, else `gcc` in the toolkit
    /// then on `PATH`: `hipjit::compiler::host_compiler::find`), when found.
    pub host_compiler: Option<PathBuf>,
    /// Why no host compiler was found, when nvcc was.
    pub host_compiler_error: Option<String>,
}

/// The platform `Runtime::load` takes.
#[derive(Serialize, Debug, Default)]
pub struct PlatformReport {
    /// `HIP_PLATFORM` as set (`None` when unset or empty).
    pub hip_platform: Option<String>,
    /// `amd` or `nvidia`; `None` when `Runtime::load` fails.
    pub chosen: Option<String>,
    /// Why, in plain words.
    pub reason: String,
}

// ---------------------------------------------------------------------------------------------
// The child

fn cu_error(d: &Driver, call: &str, rc: c_int) -> String {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: valid out pointer; cuGetErrorName needs no initialisation.
    let named = unsafe { (d.cuGetErrorName)(rc, &mut p) } == 0 && !p.is_null();
    let name = if named {
        // SAFETY: the driver returns a static NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        "an unnamed CUresult".to_owned()
    };
    format!("{call} returned {name} ({rc})")
}

fn has_symbol(d: &Driver, name: &str) -> bool {
    d.optional_present()
        .into_iter()
        .any(|(n, present)| n == name && present)
}

/// Runs the hidden `probe-cuda`: loads the CUDA driver in this process and prints a
/// [`CudaReport`] as JSON. Exit status 0 whenever the JSON was printed.
pub fn probe_cuda(args: &ProbeArgs) -> Result<(), CliError> {
    let mut r = asked();
    match driver::load(args.library.as_deref()) {
        Err(e) => r.load_error = Some(e.to_string()),
        Ok(d) => {
            r.path = Some(d.path.clone());
            let mut v = 0;
            // SAFETY: valid out pointer; cuDriverGetVersion needs no initialisation.
            if unsafe { (d.cuDriverGetVersion)(&mut v) } == 0 {
                r.version_code = Some(v);
                r.version = Some(format!("{}.{}", v / 1000, (v % 1000) / 10));
            }
            for s in CUDA_LIBRARY_API {
                r.library_api.insert(s.to_owned(), has_symbol(d, s));
            }
            r.library_api_exported = r.library_api.values().filter(|e| **e).count();
            r.device_error = devices(d, &mut r.devices).err();
        }
    }
    let v = serde_json::to_string(&r)
        .map_err(|e| CliError::failed(format!("cannot encode the probe: {e}")))?;
    println!("{v}");
    Ok(())
}

fn devices(d: &Driver, out: &mut Vec<CudaDevice>) -> Result<(), String> {
    // SAFETY: cuInit takes flags 0.
    let rc = unsafe { (d.cuInit)(0) };
    if rc != 0 {
        return Err(cu_error(d, "cuInit", rc));
    }
    let mut n = 0;
    // SAFETY: valid out pointer, after cuInit.
    let rc = unsafe { (d.cuDeviceGetCount)(&mut n) };
    if rc != 0 {
        return Err(cu_error(d, "cuDeviceGetCount", rc));
    }
    if n == 0 {
        return Err("cuDeviceGetCount reported 0 devices".into());
    }
    for i in 0..n {
        let mut dev = 0;
        // SAFETY: valid out pointer, ordinal below the count.
        let rc = unsafe { (d.cuDeviceGet)(&mut dev, i) };
        if rc != 0 {
            return Err(format!("device {i}: {}", cu_error(d, "cuDeviceGet", rc)));
        }
        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer holds 256 bytes; the driver writes a NUL-terminated name.
        let named = unsafe { (d.cuDeviceGetName)(name.as_mut_ptr(), 256, dev) } == 0;
        name[255] = 0;
        let name = if named {
            // SAFETY: NUL-terminated (the last byte is forced to NUL).
            unsafe { CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            "?".to_owned()
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out pointers and device.
        let target = unsafe {
            (d.cuDeviceGetAttribute)(&mut major, CC_MAJOR, dev) == 0
                && (d.cuDeviceGetAttribute)(&mut minor, CC_MINOR, dev) == 0
        }
        .then(|| {
            hipjit::cuda::target::SmTarget::from_compute_capability(
                major.max(0) as u32,
                minor.max(0) as u32,
            )
            .to_string()
        });
        out.push(CudaDevice { name, target });
    }
    Ok(())
}

fn asked() -> CudaReport {
    match std::env::var_os(LIBRARY_ENV).filter(|v| !v.is_empty()) {
        Some(p) => CudaReport {
            asked: p.to_string_lossy().into_owned(),
            origin: LIBRARY_ENV.into(),
            ..CudaReport::default()
        },
        None => CudaReport {
            asked: SONAME.into(),
            origin: "dynamic loader".into(),
            ..CudaReport::default()
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Gathering (in doctor's process)

/// Runs `hipjit probe-cuda` and reads its JSON; a crash or a hang is this report's
/// `load_error`.
pub fn cuda_driver() -> CudaReport {
    let failed = |e: String| CudaReport {
        load_error: Some(e),
        ..asked()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find the hipjit executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("probe-cuda");
    match run_with_timeout(&mut cmd, PROBE_TIMEOUT) {
        Ok((status, stdout, stderr)) => match serde_json::from_slice::<CudaReport>(&stdout) {
            Ok(r) => r,
            Err(_) => failed(format!(
                "the CUDA driver probe process ended with {status} without a report{}",
                last_line(&stderr)
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            )),
        },
        Err(e) => failed(e),
    }
}

/// Where nvcc discovery ([`Nvcc::find`]) found `path`.
fn nvcc_origin(path: &Path) -> String {
    if std::env::var_os(NVCC_ENV).is_some_and(|v| !v.is_empty()) {
        return NVCC_ENV.into();
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            if Path::new(&root).join("bin/nvcc") == path {
                return var.into();
            }
        }
    }
    if path == Path::new("/usr/local/cuda/bin/nvcc") {
        return "/usr/local/cuda".into();
    }
    "PATH".into()
}

/// nvcc in hipjit's discovery order, and its `--version` (run with a time limit).
pub fn nvcc() -> NvccReport {
    let path = match Nvcc::find(None) {
        Ok(p) => p,
        Err(e) => {
            return NvccReport {
                error: Some(e.to_string()),
                ..NvccReport::default()
            }
        }
    };
    let mut r = NvccReport {
        origin: Some(nvcc_origin(&path)),
        path: Some(path.clone()),
        ..NvccReport::default()
    };
    // What `hipjit compile` would refuse is reported, not run.
    if let Err(e) = hipjit::compiler::shell_env::check_program(
        "nvcc",
        &path,
        hipjit::compiler::shell_env::NVCC_PATH_REFUSED,
    ) {
        r.error = Some(e.to_string());
        return r;
    }
    match run_with_timeout(Command::new(&path).arg("--version"), NVCC_TIMEOUT) {
        Ok((status, stdout, _)) if status.success() => {
            let text = String::from_utf8_lossy(&stdout);
            r.release = text.lines().find_map(|l| {
                let rest = &l[l.find("release ")? + "release ".len()..];
                Some(rest[..rest.find(',')?].to_owned())
            });
            r.version = last_line(&stdout);
        }
        Ok((status, _, stderr)) => {
            r.error = Some(format!(
                "`{} --version` ended with {status}{}",
                path.display(),
                last_line(&stderr)
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            ))
        }
        Err(e) => r.error = Some(e),
    }
    match hipjit::compiler::host_compiler::find(&path) {
        Ok(h) => r.host_compiler = Some(h),
        Err(e) => r.host_compiler_error = Some(e.to_string()),
    }
    r
}

/// The platform `Runtime::load` took in the probe of the runtime in use, and why.
pub fn platform(in_use: &Probe, cuda: &CudaReport) -> PlatformReport {
    let hip_platform = std::env::var_os(PLATFORM_ENV)
        .filter(|v| !v.is_empty())
        .map(|v| v.to_string_lossy().into_owned());
    let chosen = in_use.platform.clone();
    let reason = match (&hip_platform, &chosen) {
        (Some(v), Some(_)) => format!("{PLATFORM_ENV}={v}"),
        (Some(v), None) => format!(
            "{PLATFORM_ENV}={v}, and Runtime::load fails: {}",
            in_use.load_error.as_deref().unwrap_or("no reason given")
        ),
        (None, _) if std::env::var_os("HIPJIT_HIP_LIBRARY").is_some_and(|v| !v.is_empty()) => {
            "HIPJIT_HIP_LIBRARY is set: the AMD runtime it names, without detection".into()
        }
        (None, None) => format!(
            "detecting ({PLATFORM_ENV} unset), Runtime::load fails: {}",
            in_use.load_error.as_deref().unwrap_or("no reason given")
        ),
        (None, chosen) => {
            let nv = match (&cuda.load_error, &cuda.device_error) {
                (Some(_), _) => "no CUDA driver loads".to_owned(),
                (None, Some(e)) => format!("the CUDA driver reports no device ({e})"),
                (None, None) => format!("the CUDA driver reports {} device(s)", cuda.devices.len()),
            };
            let amd = if chosen.as_deref() == Some("nvidia") {
                "no AMD runtime reports a device".to_owned()
            } else if in_use.devices.is_empty() {
                "the AMD runtime reports no device".to_owned()
            } else {
                "the AMD runtime reports a device".to_owned()
            };
            format!(
                "detected ({PLATFORM_ENV} unset): {amd}; {nv}; an AMD runtime with a device comes first, then an NVIDIA driver with one, else the AMD result"
            )
        }
    };
    PlatformReport {
        hip_platform,
        chosen,
        reason,
    }
}

// ---------------------------------------------------------------------------------------------
// The diagnosis

/// The NVIDIA findings, appended to doctor's.
pub fn diagnose(
    p: &PlatformReport,
    cuda: &CudaReport,
    nvcc: &NvccReport,
    findings: &mut Vec<Finding>,
) {
    let mut push = |level: &'static str, text: String| findings.push(Finding { level, text });
    let wants_nvidia = matches!(p.hip_platform.as_deref(), Some("nvidia" | "nvcc"));
    if let Some(v) = &p.hip_platform {
        if !matches!(v.as_str(), "amd" | "hcc" | "nvidia" | "nvcc") {
            push("warning", format!(
                "{PLATFORM_ENV}={v} is neither amd nor nvidia: Runtime::load fails while it is set, and hipcc, which reads it too, may refuse to run (set amd or nvidia, or unset it for detection)"
            ));
        }
    }
    if wants_nvidia {
        push("note", format!(
            "hipcc reads {PLATFORM_ENV} too, and hipjit passes it on to hipcc: while it says nvidia, hipcc compiles through nvcc instead of for AMD GPUs (for sm_ targets hipjit's JIT runs nvcc itself)"
        ));
    }
    if let Some(c) = &p.chosen {
        push(
            "ok",
            format!("Runtime::load takes the {c} platform: {}", p.reason),
        );
    }
    match (&cuda.load_error, &cuda.path) {
        (Some(e), _) if wants_nvidia => push("warning", format!(
            "{PLATFORM_ENV}=nvidia but no CUDA driver loads: {e}; install the NVIDIA driver (libcuda.so.1) or set {LIBRARY_ENV}"
        )),
        (Some(e), _) if cuda.origin == LIBRARY_ENV => push("warning", format!(
            "{LIBRARY_ENV}={} does not load as a CUDA driver: {e}", cuda.asked
        )),
        (Some(e), _) => push("note", format!(
            "no CUDA driver: {e}; HIP's NVIDIA platform is unavailable (AMD is unaffected)"
        )),
        (None, path) => {
            let path = path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| cuda.asked.clone());
            let v = cuda.version.as_deref().unwrap_or("?");
            if cuda.library_api_exported < CUDA_LIBRARY_API.len() {
                let missing: Vec<&str> = CUDA_LIBRARY_API
                    .iter()
                    .copied()
                    .filter(|n| !cuda.library_api.get(*n).copied().unwrap_or(false))
                    .collect();
                push("note", format!(
                    "the CUDA driver {path} (CUDA {v}) exports {}/5 library-API symbols (missing {}): it is older than CUDA 12.4; hipjit loads cubins through the module API (cuModuleLoadData, cuModuleGetFunction)",
                    cuda.library_api_exported, missing.join(", ")
                ));
            } else {
                push("ok", format!(
                    "the CUDA driver {path} (CUDA {v}) exports all five library-API symbols: hipjit loads cubins through cuLibraryLoadData"
                ));
            }
            if let Some(e) = &cuda.device_error {
                push("note", format!("the CUDA driver {path} sees no device: {e}"));
            }
        }
    }
    if let Some(v) = std::env::var_os(NVCC_ENV).filter(|v| !v.is_empty()) {
        if nvcc.error.is_some() {
            push(
                "warning",
                format!(
                    "{NVCC_ENV}={} cannot be used: {}",
                    Path::new(&v).display(),
                    nvcc.error.as_deref().unwrap_or_default()
                ),
            );
            return;
        }
    }
    match (&nvcc.path, &nvcc.error) {
        (Some(path), Some(e)) => push(
            "warning",
            format!("nvcc {} cannot be used: {e}", path.display()),
        ),
        (None, Some(e)) => push(
            if wants_nvidia { "warning" } else { "note" },
            format!("compiling for NVIDIA GPUs is unavailable: {e}"),
        ),
        _ => {}
    }
    if let (Some(path), Some(e)) = (&nvcc.path, &nvcc.host_compiler_error) {
        push(
            "warning",
            format!("nvcc {} cannot compile: {e}", path.display()),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Printing

/// The Platform, CUDA driver and nvcc sections of the screen.
pub fn print_text(p: &PlatformReport, cuda: &CudaReport, nvcc: &NvccReport) {
    println!("\nPlatform");
    println!("  {} ({})", p.chosen.as_deref().unwrap_or("none"), p.reason);
    println!("\nCUDA driver (HIP's NVIDIA platform)");
    match &cuda.load_error {
        Some(e) => println!("  {}: not loaded: {e}  [{}]", cuda.asked, cuda.origin),
        None => {
            println!(
                "  {}  CUDA {}  [{}]",
                cuda.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| cuda.asked.clone()),
                cuda.version.as_deref().unwrap_or("?"),
                cuda.origin
            );
            let missing: Vec<&str> = CUDA_LIBRARY_API
                .iter()
                .copied()
                .filter(|n| !cuda.library_api.get(*n).copied().unwrap_or(false))
                .collect();
            println!(
                "      library API {}/5 exported{}",
                cuda.library_api_exported,
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(" (missing {})", missing.join(", "))
                }
            );
            for (i, d) in cuda.devices.iter().enumerate() {
                println!(
                    "      device {i}: {} ({})",
                    d.target.as_deref().unwrap_or("SM target unknown"),
                    d.name
                );
            }
            if let Some(e) = &cuda.device_error {
                println!("      no device: {e}");
            }
        }
    }
    println!("\nnvcc");
    match (&nvcc.path, &nvcc.error) {
        (Some(path), None) => println!(
            "  {}  release {}  [{}]\n      {}\n      host compiler: {}",
            path.display(),
            nvcc.release.as_deref().unwrap_or("?"),
            nvcc.origin.as_deref().unwrap_or("?"),
            nvcc.version.as_deref().unwrap_or(""),
            match (&nvcc.host_compiler, &nvcc.host_compiler_error) {
                (Some(h), _) => h.display().to_string(),
                (None, e) => format!("none: {}", e.as_deref().unwrap_or("not found")),
            }
        ),
        (Some(path), Some(e)) => println!("  {}  error: {e}", path.display()),
        (None, e) => println!("  none: {}", e.as_deref().unwrap_or("not found")),
    }
}
