//! `hipjit doctor [--json]`: a machine's HIP setup on one screen, then what disagrees with what.
//!
//! What it looks at, in hip-sys's discovery order (`hip_sys::discovery`):
//! - header sets: `HIP_INCLUDE_DIR`, then `include/` of each installation root, and the one
//!   hip-sys was built from ([`hip_sys::build_info`]); for each, the version in
//!   `hip/hip_version.h` and which probed functions its text declares;
//! - runtimes: `HIPJIT_HIP_LIBRARY`, `lib/` of each root, the dynamic loader's cache
//!   (`ldconfig -p`) and the usual library directories; for each file, its `DT_SONAME` and
//!   exported symbols (read from the file), and its version and devices from loading it in a
//!   child process (`hipjit probe-runtime`), so that one runtime's state never leaks into another's
//!   probe and a runtime that crashes on load only fails its own line;
//! - compilers: `HIPJIT_HIPCC` and `bin/hipcc` of each root; for each, `hipcc --version` and
//!   which file `#include <hip/hip_runtime.h>` resolves to, asked from the compiler itself
//!   (`-fsyntax-only -H` on a probe source);
//! - devices: from the runtime hipjit would load (`Runtime::load`), or the HIP error saying why
//!   there are none, and ROCm's ISA override (`HSA_OVERRIDE_GFX_VERSION`, [`gfx_override`])
//!   when set;
//! - the disk cache: its roots (`HIPJIT_CACHE_DIR`, else the default root), each one's entries
//!   and bytes, and the written root's size cap (`HIPJIT_CACHE_MAX_SIZE`, else 5 GiB), read
//!   without creating or writing anything.
//!
//! - ROCm held by Python packages ([`python_env`]): the environment searched (`VIRTUAL_ENV`,
//!   else `HIPJIT_PYTHON`'s), each package's copy (`_rocm_sdk_devel`, `_rocm_sdk_core`,
//!   `torch`, `triton/third_party/rocm`) with its runtimes' versions, hipRTC, comgr, headers'
//!   version and hipcc, and which copy the runtime, hipRTC, comgr, headers and hipcc in use
//!   come from;
//!
//! - HIP's NVIDIA platform ([`nvidia`]): the platform `Runtime::load` takes and
//!   why, the CUDA driver (probed in a child process, `hipjit probe-cuda`) and nvcc.
//!
//! Findings compare by declaration and by exported symbol, never by version number alone.

mod diagnose;
mod gfx_override;
mod header_set;
mod hipcc;
pub mod nvidia;
mod python_env;
pub mod rtc;
mod runtime;
mod shared_object;
mod text;

use diagnose::diagnose;
use hipcc::{compilers, include_dir_of, resolve_hip_runtime_h};
pub use runtime::probe_runtime;
use runtime::{run_probe, runtime_include_dir, runtimes, version_of_code};
use text::print_text;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hip_sys::discovery::{self, Origin};
use hipjit::process::{self, RunError};
use serde::{Deserialize, Serialize};

use crate::output::{self, CliError};
use header_set::HeaderSet;

/// The five symbols of the HIP library API (ROCm 7.2+), the set hipjit needs to load code
/// objects through `hipLibraryLoadFromFile` instead of the module API.
pub const LIBRARY_API: [&str; 5] = [
    "hipLibraryLoadFromFile",
    "hipLibraryGetKernelCount",
    "hipLibraryEnumerateKernels",
    "hipKernelGetFunction",
    "hipLibraryUnload",
];

/// How long a child probing one runtime may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `hipcc --version` or the include probe may take.
const COMPILER_TIMEOUT: Duration = Duration::from_secs(120);
/// The processor named in the include probe (known to every hipcc from 5.2 to 7.x); naming
/// one keeps hipcc from running `rocm_agent_enumerator` on a machine without a GPU.
const PROBE_ARCH: &str = "gfx90a";

/// Arguments of `hipjit doctor`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON (with "schema_version": 1) instead of the screen. Keys: header_sets, build,
    /// runtimes, runtime_in_use, compilers, devices, gfx_override [{variable, value, target
    /// (null: a value the runtime refuses)}], cache {roots [{path, written, entries,
    /// bytes}], max_bytes (null: no cap), max_bytes_from ("default" or
    /// "HIPJIT_CACHE_MAX_SIZE"), error}, findings; and for HIP's NVIDIA platform:
    /// platform {hip_platform, chosen, reason}, cuda_driver {asked, origin, path, version,
    /// version_code, library_api_exported, library_api, devices [{name, target}],
    /// device_error, load_error}, nvcc {path, origin, release, version, error, host_compiler, host_compiler_error}; and for the
    /// in-process compilers: in_process {hiprtc, nvrtc}, each {found, path, origin, major,
    /// library_version, identity_files [{path, size}], comgr, processors, targets [{target,
    /// from, compiles, error, auto, auto_reason}], error}; and for ROCm held by Python
    /// packages: python {environment (null: none searched), prefix, copies [{package, root,
    /// runtimes [[path, version]], hiprtc, comgr [path], headers, hipcc}], parts {runtime,
    /// hiprtc, comgr, headers, hipcc: {path, from (the package, or null)}}}.
    #[arg(long)]
    pub json: bool,
    /// Also check the in-process compilers for this target (an AMDGPU target ID such as
    /// `gfx942:sramecc+:xnack-`, or an SM target such as `sm_90`), as if a device had it;
    /// repeatable.
    #[arg(long = "target", value_name = "TARGET")]
    pub targets: Vec<String>,
}

/// Arguments of the hidden `probe-runtime`.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// The runtime library to load; without it, the one `Runtime::load` finds.
    #[arg(long)]
    pub library: Option<PathBuf>,
}

// ---------------------------------------------------------------------------------------------
// The report

/// One header set found.
#[derive(Serialize, Debug)]
struct HeaderSetReport {
    /// The directory holding `hip/`.
    path: PathBuf,
    /// Why it was looked at (`HIP_INCLUDE_DIR`, `/usr`, `hip-sys build`...).
    origin: String,
    /// `HIP_VERSION_MAJOR.MINOR.PATCH` of `hip/hip_version.h`.
    hip_version: Option<String>,
    /// Of the five library-API functions, how many it declares.
    library_api_declared: usize,
    /// Each probed function and whether the headers declare it.
    apis: BTreeMap<String, bool>,
    #[serde(skip)]
    major_minor: Option<(u32, u32)>,
}

/// The header set hip-sys was built from.
#[derive(Serialize, Debug)]
struct BuildReport {
    bindings: &'static str,
    include_dir: Option<&'static str>,
    hip_version: &'static str,
    apis: BTreeMap<String, bool>,
    /// What that directory holds now (`None` when it is gone or the bindings are pregenerated).
    hip_version_now: Option<String>,
}

/// What the child process reports about one runtime.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct Probe {
    /// The platform `Runtime::load` took (`amd`, `nvidia`).
    #[serde(default)]
    pub(crate) platform: Option<String>,
    /// The file loaded (`dladdr`).
    path: Option<PathBuf>,
    /// How `Runtime::load` found it.
    found: Option<String>,
    /// `hipRuntimeGetVersion` as `major.minor.patch`.
    version: Option<String>,
    /// The raw `hipRuntimeGetVersion` value.
    version_code: Option<i32>,
    /// `library API` or `module API`.
    code_object_loader: Option<String>,
    /// The device-properties entry point in use.
    device_properties_entry: Option<String>,
    /// The code object versions hipjit's table says it accepts.
    code_object_versions: Option<Vec<u32>>,
    /// Each device's target ID (or `gcnArchName` when it does not parse).
    pub(crate) devices: Vec<String>,
    /// Why there are no devices: the failing call and the named HIP error.
    device_error: Option<String>,
    /// The named HIP error alone (`hipErrorNoDevice`).
    device_error_name: Option<String>,
    /// Why the runtime could not be loaded.
    pub(crate) load_error: Option<String>,
}

/// One runtime library file found.
#[derive(Serialize, Debug)]
struct RuntimeReport {
    /// The file (symlinks resolved).
    path: PathBuf,
    /// The names it was found under (symlinks, loader cache entries).
    names: Vec<PathBuf>,
    /// Why it was looked at.
    origin: String,
    soname: Option<String>,
    /// `hipRuntimeGetVersion`, from loading it in a child process.
    version: Option<String>,
    /// The library-API symbols it exports, of the five.
    library_api_exported: usize,
    /// Each of the five and whether it is exported.
    library_api: BTreeMap<String, bool>,
    /// `hipGetDevicePropertiesR0600` (6.0 layout) or `hipGetDeviceProperties` (5.x layout):
    /// the one exported that hipjit uses.
    device_properties_entry: Option<&'static str>,
    /// Each probed function of hip-sys and whether the library exports it.
    exports: BTreeMap<String, bool>,
    /// Why it could not be read or loaded.
    error: Option<String>,
    #[serde(skip)]
    version_code: Option<i32>,
}

/// One compiler found.
#[derive(Serialize, Debug)]
struct CompilerReport {
    path: PathBuf,
    origin: String,
    /// The `HIP version:` line of `hipcc --version`.
    hip_version: Option<String>,
    /// The clang line of `hipcc --version`.
    clang: Option<String>,
    /// The file `#include <hip/hip_runtime.h>` resolves to, as the compiler reports it.
    hip_runtime_h: Option<PathBuf>,
    /// Why the compiler could not be run or asked.
    error: Option<String>,
}

/// The disk cache as hipjit would open it.
#[derive(Serialize, Debug, Default)]
struct CacheReport {
    roots: Vec<CacheRootReport>,
    /// The written root's size cap in bytes; `None`: no cap.
    max_bytes: Option<u64>,
    /// `default` or `HIPJIT_CACHE_MAX_SIZE`.
    max_bytes_from: &'static str,
    /// The line `hipjit cache stats` prints about the cap.
    #[serde(skip)]
    cap_text: String,
    /// Why the cache could not be opened or listed.
    error: Option<String>,
    /// The compilers `hipjit cache verify --rebuild` judged, as each root keeps them
    /// (`reproducibility.json`).
    reproducibility: Vec<crate::cache::rebuild::Verdict>,
}

/// One cache root.
#[derive(Serialize, Debug)]
struct CacheRootReport {
    path: PathBuf,
    /// Whether it is the written root (the first).
    written: bool,
    entries: u64,
    bytes: u64,
}

/// One line of the diagnosis.
#[derive(Serialize, Debug)]
pub(crate) struct Finding {
    /// `ok`, `note` or `warning`.
    pub(crate) level: &'static str,
    /// What was found, in plain words, naming the paths.
    pub(crate) text: String,
}

/// The whole report.
#[derive(Serialize, Debug)]
struct Report {
    header_sets: Vec<HeaderSetReport>,
    build: BuildReport,
    runtimes: Vec<RuntimeReport>,
    runtime_in_use: Probe,
    compilers: Vec<CompilerReport>,
    devices: Vec<String>,
    gfx_override: Vec<gfx_override::GfxOverride>,
    cache: CacheReport,
    platform: nvidia::PlatformReport,
    cuda_driver: nvidia::CudaReport,
    nvcc: nvidia::NvccReport,
    in_process: rtc::InProcess,
    python: python_env::PythonReport,
    findings: Vec<Finding>,
}

// ---------------------------------------------------------------------------------------------
// Gathering

/// The disk cache's roots and size cap, opened read-only (nothing is created or written).
fn cache_report() -> CacheReport {
    use hipjit::cache::disk::{self, DiskCache};
    let mut r = CacheReport::default();
    let opened = disk::roots_from_env(|k| std::env::var_os(k))
        .ok_or(disk::CacheError::NoRoot)
        .and_then(|roots| DiskCache::open_read_only(&roots))
        .and_then(DiskCache::with_max_bytes_from_env);
    let cache = match opened {
        Ok(c) => c,
        Err(e) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    let (max, from) = cache.max_bytes();
    r.max_bytes = max;
    r.max_bytes_from = from.as_str();
    r.cap_text = crate::cache::cap_text(&cache);
    for root in cache.roots() {
        r.reproducibility
            .extend(crate::cache::rebuild::read_verdicts(&root.path));
    }
    match cache.stats() {
        Ok(stats) => {
            r.roots = stats
                .into_iter()
                .enumerate()
                .map(|(i, s)| CacheRootReport {
                    path: s.root.path,
                    written: i == 0,
                    entries: s.entries,
                    bytes: s.bytes,
                })
                .collect()
        }
        Err(e) => r.error = Some(e.to_string()),
    }
    r
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn probed_apis() -> Vec<&'static str> {
    hip_sys::build_info::APIS.iter().map(|(n, _)| *n).collect()
}

fn header_sets() -> Vec<HeaderSetReport> {
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    if let Some(d) = std::env::var_os("HIP_INCLUDE_DIR").filter(|v| !v.is_empty()) {
        candidates.push(("HIP_INCLUDE_DIR".into(), PathBuf::from(d)));
    }
    for r in discovery::install_roots() {
        candidates.push((r.origin.to_string(), r.root.join("include")));
    }
    if let Some(d) = hip_sys::build_info::INCLUDE_DIR {
        candidates.push(("hip-sys build".into(), PathBuf::from(d)));
    }
    let apis = probed_apis();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (origin, dir) in candidates {
        if !header_set::is_header_set(&dir) || !seen.insert(canonical(&dir)) {
            continue;
        }
        let h: HeaderSet = header_set::read(&dir, &apis);
        let mut all: BTreeMap<String, bool> = h.apis.into_iter().collect();
        let lib = header_set::read(&dir, &LIBRARY_API);
        let library_api_declared = lib.apis.iter().filter(|(_, d)| *d).count();
        for (n, d) in lib.apis {
            all.insert(n, d);
        }
        out.push(HeaderSetReport {
            path: dir,
            origin,
            hip_version: h.version,
            library_api_declared,
            apis: all,
            major_minor: h.major_minor,
        });
    }
    out
}

fn build_report() -> BuildReport {
    use hip_sys::build_info as b;
    let hip_version_now = b::INCLUDE_DIR
        .and_then(|d| header_set::read_version(&Path::new(d).join("hip/hip_version.h")).0);
    BuildReport {
        bindings: b::BINDINGS,
        include_dir: b::INCLUDE_DIR,
        hip_version: b::HIP_VERSION,
        apis: b::APIS.iter().map(|(n, d)| ((*n).to_owned(), *d)).collect(),
        hip_version_now,
    }
}

pub(crate) fn last_line(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned)
}

/// Runs `cmd` with stdin closed and stdout and stderr captured, killing its process group
/// after `timeout` ([`hipjit::process::run`], as the compiler stage does).
pub(crate) fn run_with_timeout(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>), String> {
    match process::run(cmd, timeout) {
        Ok(f) => Ok((f.status, f.stdout, f.stderr)),
        Err(RunError::Spawn(e)) => Err(format!("cannot run {:?}: {e}", cmd.get_program())),
        Err(RunError::Timeout(_)) => Err(format!(
            "{:?} did not finish within {} s and was stopped",
            cmd.get_program(),
            timeout.as_secs()
        )),
        Err(e) => Err(format!("{:?}: {e}", cmd.get_program())),
    }
}

/// Runs `hipjit doctor`. Always exit status 0 when the report could be printed: the findings
/// are the result, whatever they say.
pub fn run(args: &Args) -> Result<(), CliError> {
    let runtimes = runtimes();
    let runtime_in_use = run_probe(None);
    let cuda_driver = nvidia::cuda_driver();
    let nvcc = nvidia::nvcc();
    let compilers = compilers();
    let mut amd_targets: Vec<(String, String)> = Vec::new();
    if runtime_in_use.platform.as_deref() != Some("nvidia") {
        for (i, d) in runtime_in_use.devices.iter().enumerate() {
            amd_targets.push((d.clone(), format!("device {i}")));
        }
    }
    let mut sm_targets: Vec<(String, String)> = cuda_driver
        .devices
        .iter()
        .enumerate()
        .filter_map(|(i, d)| Some((d.target.clone()?, format!("CUDA device {i}"))))
        .collect();
    for t in &args.targets {
        let list = if t.starts_with("sm_") {
            &mut sm_targets
        } else {
            &mut amd_targets
        };
        if !list.iter().any(|(have, _)| have == t) {
            list.push((t.clone(), "--target".to_owned()));
        }
    }
    let hipcc = compilers
        .iter()
        .find(|c| c.error.is_none())
        .map(|c| c.path.clone());
    let in_process = rtc::gather(
        runtime_in_use
            .path
            .as_deref()
            .filter(|_| runtime_in_use.platform.as_deref() != Some("nvidia")),
        hipcc.as_deref(),
        nvcc.path.as_deref(),
        &amd_targets,
        &sm_targets,
    );
    let header_sets = header_sets();
    let python = python_env::gather(
        &runtimes,
        &[
            ("runtime", runtime_in_use.path.as_deref()),
            ("hiprtc", in_process.hiprtc.path.as_deref()),
            ("comgr", in_process.hiprtc.comgr.as_deref()),
            ("headers", header_sets.first().map(|h| h.path.as_path())),
            ("hipcc", hipcc.as_deref()),
        ],
    );
    let mut report = Report {
        platform: nvidia::platform(&runtime_in_use, &cuda_driver),
        cuda_driver,
        nvcc,
        header_sets,
        build: build_report(),
        runtimes,
        devices: runtime_in_use.devices.clone(),
        gfx_override: gfx_override::gather(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        ),
        cache: cache_report(),
        runtime_in_use,
        compilers,
        in_process,
        python,
        findings: Vec::new(),
    };
    diagnose(&mut report);
    if args.json {
        let v = serde_json::to_value(&report)
            .map_err(|e| CliError::failed(format!("cannot encode the report: {e}")))?;
        output::print_json(v)
    } else {
        print_text(&report);
        Ok(())
    }
}
