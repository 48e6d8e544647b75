//! `hipjit doctor [--json]`: a machine's HIP setup on one screen, then what disagrees with what.
//!
//! What it looks at, in hip-sys's discovery order ([`hip_sys::discovery`]):
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
//!   there are none;
//! - the disk cache: its roots (`HIPJIT_CACHE_DIR`, else the default root), each one's entries
//!   and bytes, and the written root's size cap (`HIPJIT_CACHE_MAX_SIZE`, else 5 GiB), read
//!   without creating or writing anything.
//!
//! - HIP's NVIDIA platform ([`crate::doctor_nvidia`]): the platform `Runtime::load` takes and
//!   why, the CUDA driver (probed in a child process, `hipjit probe-cuda`) and nvcc.
//!
//! Findings compare by declaration and by exported symbol, never by version number alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hip_sys::discovery::{self, Origin};
use hipjit::process::{self, RunError};
use serde::{Deserialize, Serialize};

use crate::doctor_nvidia;
use crate::doctor_rtc;
use crate::header_set::{self, HeaderSet};
use crate::output::{self, CliError};
use crate::shared_object;

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
    /// runtimes, runtime_in_use, compilers, devices, cache {roots [{path, written, entries,
    /// bytes}], max_bytes (null: no cap), max_bytes_from ("default" or
    /// "HIPJIT_CACHE_MAX_SIZE"), error}, findings; and for HIP's NVIDIA platform:
    /// platform {hip_platform, chosen, reason}, cuda_driver {asked, origin, path, version,
    /// version_code, library_api_exported, library_api, devices [{name, target}],
    /// device_error, load_error}, nvcc {path, origin, release, version, error, host_compiler, host_compiler_error}; and for the
    /// in-process compilers: in_process {hiprtc, nvrtc}, each {found, path, origin, major,
    /// library_version, identity_files [{path, size}], comgr, processors, targets [{target,
    /// from, compiles, error, auto, auto_reason}], error}.
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
    cache: CacheReport,
    platform: doctor_nvidia::PlatformReport,
    cuda_driver: doctor_nvidia::CudaReport,
    nvcc: doctor_nvidia::NvccReport,
    in_process: doctor_rtc::InProcess,
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

/// Library directories of the dynamic loader's cache entries for `libamdhip64`
/// (`ldconfig -p`), with the names listed there.
fn loader_cache_runtimes() -> Vec<PathBuf> {
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let Some(ldconfig) = ldconfig else {
        return Vec::new();
    };
    let Ok(out) = Command::new(ldconfig)
        .arg("-p")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("libamdhip64.so"))
        .filter_map(|l| l.split("=>").nth(1).map(|p| PathBuf::from(p.trim())))
        .collect()
}

fn runtime_candidates() -> Vec<(String, PathBuf)> {
    let mut c: Vec<(String, PathBuf)> = Vec::new();
    if let Some(p) = std::env::var_os("HIPJIT_HIP_LIBRARY").filter(|v| !v.is_empty()) {
        c.push(("HIPJIT_HIP_LIBRARY".into(), PathBuf::from(p)));
    }
    let mut dirs: Vec<(String, PathBuf)> = Vec::new();
    for r in discovery::install_roots() {
        dirs.push((format!("lib/ under {}", r.origin), r.root.join("lib")));
        for d in ["lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64"] {
            dirs.push((format!("{d}/ under {}", r.origin), r.root.join(d)));
        }
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        for d in std::env::split_paths(&ld).filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(("LD_LIBRARY_PATH".into(), d));
        }
    }
    for (origin, dir) in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("libamdhip64.so"))
            })
            .map(|e| e.path())
            .collect();
        names.sort();
        c.extend(names.into_iter().map(|p| (origin.clone(), p)));
    }
    c.extend(
        loader_cache_runtimes()
            .into_iter()
            .map(|p| ("dynamic loader cache".to_owned(), p)),
    );
    c
}

fn runtimes() -> Vec<RuntimeReport> {
    let mut by_file: BTreeMap<PathBuf, RuntimeReport> = BTreeMap::new();
    let mut order: Vec<PathBuf> = Vec::new();
    let apis = probed_apis();
    for (origin, name) in runtime_candidates() {
        if !name.is_file() {
            continue;
        }
        let real = canonical(&name);
        if let Some(r) = by_file.get_mut(&real) {
            if !r.names.contains(&name) {
                r.names.push(name);
            }
            continue;
        }
        let mut r = RuntimeReport {
            path: real.clone(),
            names: vec![name],
            origin,
            soname: None,
            version: None,
            library_api_exported: 0,
            library_api: BTreeMap::new(),
            device_properties_entry: None,
            exports: BTreeMap::new(),
            error: None,
            version_code: None,
        };
        match shared_object::read(&real) {
            Ok(so) => {
                r.soname = so.soname.clone();
                for s in LIBRARY_API {
                    r.library_api.insert(s.to_owned(), so.exports.contains(s));
                }
                r.library_api_exported = r.library_api.values().filter(|e| **e).count();
                r.device_properties_entry = if so.exports.contains("hipGetDevicePropertiesR0600") {
                    Some("hipGetDevicePropertiesR0600")
                } else if so.exports.contains("hipGetDeviceProperties") {
                    Some("hipGetDeviceProperties")
                } else {
                    None
                };
                for a in &apis {
                    r.exports.insert((*a).to_owned(), so.exports.contains(*a));
                }
            }
            Err(e) => r.error = Some(e),
        }
        order.push(real.clone());
        by_file.insert(real, r);
    }
    let mut out: Vec<RuntimeReport> = order
        .into_iter()
        .filter_map(|p| by_file.remove(&p))
        .collect();
    for r in &mut out {
        if r.error.is_some() {
            continue;
        }
        let p = run_probe(Some(&r.path));
        r.version = p.version;
        r.version_code = p.version_code;
        if let Some(e) = p.load_error {
            r.error = Some(e);
        }
    }
    out
}

/// Runs `hipjit probe-runtime [--library PATH]` and reads its JSON.
fn run_probe(library: Option<&Path>) -> Probe {
    let failed = |e: String| Probe {
        load_error: Some(e),
        path: library.map(Path::to_path_buf),
        ..Probe::default()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find the hipjit executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("probe-runtime");
    if let Some(l) = library {
        cmd.arg("--library").arg(l);
    }
    match run_with_timeout(&mut cmd, PROBE_TIMEOUT) {
        Ok((status, stdout, stderr)) => match serde_json::from_slice::<Probe>(&stdout) {
            Ok(p) => p,
            Err(_) => failed(format!(
                "the probe process ended with {status} without a report{}",
                last_line(&stderr)
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            )),
        },
        Err(e) => failed(e),
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

fn compilers() -> Vec<CompilerReport> {
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    if let Some(p) = std::env::var_os("HIPJIT_HIPCC").filter(|v| !v.is_empty()) {
        candidates.push(("HIPJIT_HIPCC".into(), PathBuf::from(p)));
    }
    for r in discovery::install_roots() {
        let origin = r.origin.to_string();
        match &r.origin {
            Origin::OnPath(tool) if tool.ends_with("hipcc") => {
                candidates.push(("PATH".into(), tool.clone()));
            }
            _ => candidates.push((origin, r.root.join("bin/hipcc"))),
        }
    }
    if let Some(p) = discovery::find_on_path(&discovery::ProcessEnv, "hipcc") {
        candidates.push(("PATH".into(), p));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (origin, path) in candidates {
        if !discovery::is_executable_file(&path) || !seen.insert(canonical(&path)) {
            continue;
        }
        let mut c = CompilerReport {
            path: path.clone(),
            origin,
            hip_version: None,
            clang: None,
            hip_runtime_h: None,
            error: None,
        };
        // hipcc runs its commands through sh with these variables pasted in: refuse what the
        // shell would misparse (or run) instead of running it.
        let pasted: Vec<(String, std::ffi::OsString)> = hipjit::compiler::shell_env::SHELL_PASTED
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
            .collect();
        // The hipcc checked is the one run: resolved once (a relative path would otherwise be
        // taken from the probe's temporary directory), as `hipjit compile` resolves it.
        let path = canonical(&path);
        let checked = hipjit::compiler::shell_env::check(&pasted)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                hipjit::compiler::shell_env::check_hipcc(&path).map_err(|e| e.to_string())
            });
        if let Err(e) = checked {
            c.error = Some(e);
            out.push(c);
            continue;
        }
        match run_with_timeout(Command::new(&path).arg("--version"), COMPILER_TIMEOUT) {
            Ok((status, stdout, stderr)) if status.success() => {
                let text = String::from_utf8_lossy(&stdout).into_owned();
                c.hip_version = text
                    .lines()
                    .find_map(|l| l.strip_prefix("HIP version:"))
                    .map(|v| v.trim().to_owned());
                c.clang = text
                    .lines()
                    .find(|l| l.contains("clang version"))
                    .map(|l| l.trim().to_owned());
                if let Err(e) =
                    hipjit::compiler::shell_env::check_hipcc_derived(&path, &text, &pasted)
                {
                    c.error = Some(e.to_string());
                }
                let _ = stderr;
            }
            Ok((status, _, stderr)) => {
                c.error = Some(format!(
                    "`{} --version` ended with {status}{}",
                    path.display(),
                    last_line(&stderr)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                ))
            }
            Err(e) => c.error = Some(e),
        }
        if c.error.is_none() {
            match resolve_hip_runtime_h(&path, &[]) {
                Ok(p) => c.hip_runtime_h = Some(p),
                Err(e) => c.error = Some(e),
            }
        }
        out.push(c);
    }
    out
}

/// Asks `hipcc` which file `#include <hip/hip_runtime.h>` resolves to: compiles a probe source
/// with `-fsyntax-only -H --cuda-host-only` (plus `extra` flags) and reads the first-level
/// include lines (`. /path/hip/hip_runtime.h`) it prints on stderr.
fn resolve_hip_runtime_h(hipcc: &Path, extra: &[String]) -> Result<PathBuf, String> {
    let dir =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let src = dir.path().join("hipjit_doctor_probe.hip");
    std::fs::write(&src, "#include <hip/hip_runtime.h>\n")
        .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let mut cmd = Command::new(hipcc);
    cmd.current_dir(dir.path())
        .args(["-x", "hip", "-fsyntax-only", "-H", "--cuda-host-only"])
        .arg(format!("--offload-arch={PROBE_ARCH}"))
        .args(extra)
        .arg(&src);
    let (status, _out, err) = run_with_timeout(&mut cmd, COMPILER_TIMEOUT)?;
    let text = String::from_utf8_lossy(&err);
    let found = text
        .lines()
        .filter_map(|l| l.strip_prefix(". "))
        .rfind(|p| p.ends_with("hip/hip_runtime.h"))
        .map(|p| PathBuf::from(p.trim()));
    found.ok_or_else(|| {
        format!(
            "asking {} which <hip/hip_runtime.h> it includes failed ({status}){}",
            hipcc.display(),
            last_line(&err)
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        )
    })
}

/// The include directory of a resolved `.../hip/hip_runtime.h`.
fn include_dir_of(hip_runtime_h: &Path) -> Option<PathBuf> {
    Some(canonical(hip_runtime_h.parent()?.parent()?))
}

/// The header set installed with a runtime library: `<root>/include` for a library in
/// `<root>/lib`, `<root>/lib64` or `<root>/lib/<multiarch>`.
fn runtime_include_dir(lib: &Path) -> Option<PathBuf> {
    let mut dir = lib.parent()?;
    if dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("-linux-gnu"))
    {
        dir = dir.parent()?;
    }
    let name = dir.file_name()?.to_str()?;
    if name != "lib" && name != "lib64" {
        return None;
    }
    let inc = dir.parent()?.join("include");
    header_set::is_header_set(&inc).then(|| canonical(&inc))
}

// ---------------------------------------------------------------------------------------------
// The diagnosis

fn version_of_code(code: i32) -> (u32, u32) {
    let code = code.max(0) as u32;
    (code / 10_000_000, (code / 100_000) % 100)
}

fn diagnose(r: &mut Report) {
    let mut f: Vec<Finding> = Vec::new();
    let mut push = |level: &'static str, text: String| f.push(Finding { level, text });
    let b = &r.build;
    let build_dir = b.include_dir.unwrap_or("(pregenerated bindings)");

    // The build's header set as it is now.
    if let (Some(dir), Some(now)) = (b.include_dir, &b.hip_version_now) {
        if now != b.hip_version {
            push("warning", format!(
                "hip-sys was built from the HIP {} headers in {dir}, which now hold HIP {now}: this hipjit binary was built on another machine or before the headers changed (rebuild to use the new declarations)",
                b.hip_version
            ));
        }
    }
    if b.bindings == "pregenerated" {
        push("note", format!(
            "hip-sys uses its pregenerated bindings (HIP {}): no header set was found when it was built",
            b.hip_version
        ));
    }

    // Explicit settings that point at nothing.
    let env = |k: &str| std::env::var_os(k);
    if let Some(p) = env("HIPJIT_HIPCC").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !discovery::is_executable_file(&p) {
            push("warning", format!(
                "HIPJIT_HIPCC={} is not an executable file: hipjit's compiler discovery fails with it set",
                p.display()
            ));
        }
    }
    if let Some(p) = env("HIP_INCLUDE_DIR").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !header_set::is_header_set(&p) {
            push(
                "warning",
                format!(
                    "HIP_INCLUDE_DIR={} holds no hip/hip_runtime_api.h: it names no header set",
                    p.display()
                ),
            );
        }
    }
    for var in ["HIP_PATH", "ROCM_PATH"] {
        match env(var) {
            Some(v) if v.is_empty() => push("note", format!(
                "{var} is set but empty: hipjit's discovery ignores it, but a hipcc wrapper may read it as the current directory (Debian's hipcc 5.2.3 then looks for ./bin/clang-15): unset it"
            )),
            Some(v) if !Path::new(&v).is_dir() => push("warning", format!(
                "{var}={} is not a directory",
                Path::new(&v).display()
            )),
            _ => {}
        }
    }
    for c in &r.compilers {
        if let Some(e) = &c.error {
            push(
                "warning",
                format!("the compiler {} cannot be used: {e}", c.path.display()),
            );
        }
    }

    if r.header_sets.is_empty() {
        push("warning", "no HIP header set found (looked for hip/hip_runtime_api.h under HIP_INCLUDE_DIR, HIP_PATH, ROCM_PATH, the hipcc on PATH, /opt/rocm*, /usr)".into());
    }
    if r.runtimes.is_empty() && r.runtime_in_use.path.is_none() {
        push("warning", "no HIP runtime (libamdhip64.so*) found: set HIPJIT_HIP_LIBRARY, HIP_PATH or ROCM_PATH, or install one (Debian: apt-get install libamdhip64-5)".into());
    }
    if r.compilers.is_empty() {
        push("warning", "no hipcc found (HIPJIT_HIPCC, HIP_PATH, ROCM_PATH, PATH, /opt/rocm*): compiling is unavailable (Debian 12+/Ubuntu 24.04+: apt-get install hipcc)".into());
    }

    // The runtime hipjit loads against the build's declarations.
    let in_use = r
        .runtime_in_use
        .path
        .as_ref()
        .map(|p| canonical(p))
        .and_then(|p| r.runtimes.iter().find(|x| x.path == p));
    if let Some(e) = &r.runtime_in_use.load_error {
        push("warning", format!("hipjit cannot load a HIP runtime: {e}"));
    }
    if let Some(rt) = in_use {
        let rv = rt
            .version
            .clone()
            .unwrap_or_else(|| "of unknown version".into());
        let rpath = rt.path.display();
        let undeclared: Vec<&str> = b
            .apis
            .iter()
            .filter(|(n, declared)| !**declared && rt.exports.get(*n).copied().unwrap_or(false))
            .map(|(n, _)| n.as_str())
            .collect();
        let unexported: Vec<&str> = b
            .apis
            .iter()
            .filter(|(n, declared)| **declared && !rt.exports.get(*n).copied().unwrap_or(true))
            .map(|(n, _)| n.as_str())
            .collect();
        if !undeclared.is_empty() {
            push("note", format!(
                "headers older than the runtime: the runtime {rpath} (HIP {rv}) exports {} that the headers hip-sys was built from ({build_dir}, HIP {}) do not declare; hipjit calls them through its own declarations",
                undeclared.join(", "), b.hip_version
            ));
        }
        if !unexported.is_empty() {
            push("note", format!(
                "runtime older than the headers: the headers hip-sys was built from ({build_dir}, HIP {}) declare {} but the runtime {rpath} (HIP {rv}) does not export them; hipjit leaves them unused",
                b.hip_version, unexported.join(", ")
            ));
        }
        if undeclared.is_empty() && unexported.is_empty() {
            push("ok", format!(
                "the headers hip-sys was built from ({build_dir}, HIP {}) and the runtime {rpath} (HIP {rv}) agree on every probed function",
                b.hip_version
            ));
        }
        if rt.library_api_exported < LIBRARY_API.len() {
            let missing: Vec<&str> = LIBRARY_API
                .iter()
                .copied()
                .filter(|n| !rt.library_api.get(*n).copied().unwrap_or(false))
                .collect();
            push("note", format!(
                "the runtime {rpath} exports {}/5 library-API symbols (missing {}): hipjit loads code objects through the module API (hipModuleLoadData, hipModuleGetFunction), reading the kernel list from the code object",
                rt.library_api_exported, missing.join(", ")
            ));
        } else {
            push("ok", format!(
                "the runtime {rpath} exports all five library-API symbols: hipjit loads code objects through hipLibraryLoadData"
            ));
        }
        // Newer header sets on the machine than the runtime.
        if let Some(code) = rt.version_code {
            let rmm = version_of_code(code);
            for h in &r.header_sets {
                if let (Some(hmm), Some(hv)) = (h.major_minor, &h.hip_version) {
                    if hmm > rmm && h.library_api_declared > rt.library_api_exported {
                        push("note", format!(
                            "runtime older than the headers: the header set {} (HIP {hv}) declares {}/5 library-API functions, the runtime {rpath} (HIP {rv}) exports {}/5: C++ code built against those headers and calling them fails to link or to load with this runtime; hipjit takes the module-API path",
                            h.path.display(), h.library_api_declared, rt.library_api_exported
                        ));
                    }
                }
            }
        }
    }

    // Which header set hipcc resolves against the runtime's.
    if let Some(rt_path) = in_use.map(|x| x.path.clone()) {
        if let Some(rt_inc) = runtime_include_dir(&rt_path) {
            for c in &r.compilers {
                let Some(h) = &c.hip_runtime_h else {
                    continue;
                };
                let Some(inc) = include_dir_of(h) else {
                    continue;
                };
                if inc == rt_inc {
                    push("ok", format!(
                        "{} resolves <hip/hip_runtime.h> to {}, the header set installed with the runtime {}",
                        c.path.display(), h.display(), rt_path.display()
                    ));
                } else {
                    let fix = fix_for(&c.path, &rt_inc);
                    push("warning", format!(
                        "{} resolves <hip/hip_runtime.h> to {} (asked with -H), not to the header set of the runtime {} ({}): {fix}",
                        c.path.display(), h.display(), rt_path.display(), rt_inc.display()
                    ));
                }
            }
        }
    }

    // A runtime found twice in different versions.
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in &r.runtimes {
        if let Some(v) = &rt.version {
            versions
                .entry(v.clone())
                .or_default()
                .push(rt.path.display().to_string());
        }
    }
    if versions.len() > 1 {
        let list: Vec<String> = versions
            .iter()
            .map(|(v, ps)| format!("HIP {v} at {}", ps.join(", ")))
            .collect();
        let used = r
            .runtime_in_use
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none".into());
        push("warning", format!(
            "HIP runtimes of different versions on this machine: {}; hipjit loads {used} (set HIPJIT_HIP_LIBRARY to choose); a process that loads two of them gets two runtimes that share no streams or memory",
            list.join("; ")
        ));
    }

    // Devices.
    let p = &r.runtime_in_use;
    if let Some(rt_path) = &p.path {
        if p.devices.is_empty() {
            let why = p
                .device_error
                .clone()
                .unwrap_or_else(|| "hipGetDeviceCount reported 0 devices".into());
            let kfd = if p.platform.as_deref() == Some("nvidia") || Path::new("/dev/kfd").exists() {
                String::new()
            } else {
                "; /dev/kfd does not exist (no AMD GPU kernel driver)".into()
            };
            push("note", format!(
                "no device: {why} (runtime {}){kfd}; compiling, the cache and inspecting work without one",
                rt_path.display()
            ));
        } else {
            push(
                "ok",
                format!(
                    "{} device(s) through {}: {}",
                    p.devices.len(),
                    rt_path.display(),
                    p.devices.join(", ")
                ),
            );
        }
    }
    if let Some(e) = &r.cache.error {
        f.push(Finding {
            level: "warning",
            text: format!("the disk cache cannot be opened: {e}"),
        });
    }
    if let (Some(max), Some(root)) = (r.cache.max_bytes, r.cache.roots.first()) {
        if root.bytes > max {
            f.push(Finding {
                level: "note",
                text: format!(
                    "the written cache root {} holds {}, past its size cap of {}: the next write removes its least recently used entries (`hipjit cache prune --max-size SIZE` does it now)",
                    root.path.display(),
                    output::human_bytes(root.bytes),
                    output::human_bytes(max)
                ),
            });
        }
    }
    doctor_nvidia::diagnose(&r.platform, &r.cuda_driver, &r.nvcc, &mut f);
    doctor_rtc::diagnose(&r.in_process, &mut |level, text| {
        f.push(Finding { level, text })
    });
    r.findings = f;
}

/// The fix for a compiler that resolves `<hip/...>` elsewhere: measured by asking the compiler
/// again with `-I DIR`, then `-isystem DIR`.
fn fix_for(hipcc: &Path, want: &Path) -> String {
    let d = want.display().to_string();
    for flag in ["-I", "-isystem"] {
        let extra = [flag.to_owned(), d.clone()];
        if let Ok(h) = resolve_hip_runtime_h(hipcc, &extra) {
            if include_dir_of(&h).as_deref() == Some(want) {
                return format!(
                    "compile with `{flag} {d}` (measured: with it, this compiler includes {})",
                    h.display()
                );
            }
        }
    }
    let root = want.parent().map(|p| p.display().to_string()).unwrap_or(d);
    format!("neither -I nor -isystem makes this compiler take that set: use the hipcc of that installation or set HIP_PATH={root}")
}

// ---------------------------------------------------------------------------------------------
// Printing

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn apis_text(apis: &BTreeMap<String, bool>) -> String {
    let short = |n: &str| match n {
        "hipGetDevicePropertiesR0600" => "R0600 properties",
        "hipModuleLaunchCooperativeKernel" => "cooperative launch",
        "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor" => "module occupancy",
        _ => "",
    };
    let mut parts = Vec::new();
    for (n, d) in apis {
        let s = short(n);
        if !s.is_empty() {
            parts.push(format!("{s} {}", yes_no(*d)));
        }
    }
    parts.join(", ")
}

fn missing_list(apis: &BTreeMap<String, bool>) -> String {
    let m: Vec<&str> = LIBRARY_API
        .iter()
        .copied()
        .filter(|n| !apis.get(*n).copied().unwrap_or(false))
        .collect();
    if m.is_empty() || m.len() == LIBRARY_API.len() {
        String::new()
    } else {
        format!(" (missing {})", m.join(", "))
    }
}

fn print_text(r: &Report) {
    println!("hipjit doctor: the HIP setup of this machine (AMD and NVIDIA platforms)\n");
    println!("Header sets");
    for h in &r.header_sets {
        println!(
            "  {}  HIP {}  [{}]",
            h.path.display(),
            h.hip_version.as_deref().unwrap_or("(no hip_version.h)"),
            h.origin
        );
        println!(
            "      declares library API {}/5{}; {}",
            h.library_api_declared,
            missing_list(&h.apis),
            apis_text(&h.apis)
        );
    }
    if r.header_sets.is_empty() {
        println!("  none found");
    }
    let b = &r.build;
    println!(
        "  hip-sys built from: {} ({} bindings, HIP {}); {}",
        b.include_dir.unwrap_or("no header set"),
        b.bindings,
        b.hip_version,
        apis_text(&b.apis)
    );
    println!("\nRuntimes");
    for rt in &r.runtimes {
        let used = r
            .runtime_in_use
            .path
            .as_ref()
            .is_some_and(|p| canonical(p) == rt.path);
        println!(
            "  {}{}",
            rt.path.display(),
            if used {
                "  <- hipjit loads this one"
            } else {
                ""
            }
        );
        println!(
            "      soname {}, HIP {}, library API {}/5 exported{}, device properties: {}  [{}]",
            rt.soname.as_deref().unwrap_or("(none)"),
            rt.version.as_deref().unwrap_or("?"),
            rt.library_api_exported,
            missing_list(&rt.library_api),
            match rt.device_properties_entry {
                Some("hipGetDevicePropertiesR0600") => "hipGetDevicePropertiesR0600 (6.0 layout)",
                Some(_) => "hipGetDeviceProperties (5.x layout)",
                None => "none exported",
            },
            rt.origin
        );
        if used {
            let p = &r.runtime_in_use;
            println!(
                "      code objects load through the {}; this runtime accepts code object {}",
                p.code_object_loader.as_deref().unwrap_or("?"),
                p.code_object_versions
                    .as_ref()
                    .map(|v| v
                        .iter()
                        .map(|n| format!("v{n}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_else(|| "versions unknown".into())
            );
        }
        if let Some(e) = &rt.error {
            println!("      error: {e}");
        }
    }
    if r.runtimes.is_empty() {
        println!("  none found");
    }
    println!("\nCompilers");
    for c in &r.compilers {
        println!(
            "  {}  HIP {}, {}  [{}]",
            c.path.display(),
            c.hip_version.as_deref().unwrap_or("?"),
            c.clang.as_deref().unwrap_or("clang ?"),
            c.origin
        );
        if let Some(h) = &c.hip_runtime_h {
            println!("      <hip/hip_runtime.h> -> {}", h.display());
        }
        if let Some(e) = &c.error {
            println!("      error: {e}");
        }
    }
    if r.compilers.is_empty() {
        println!("  none found");
    }
    println!("\nDevices");
    if r.devices.is_empty() {
        let why = r
            .runtime_in_use
            .device_error
            .as_deref()
            .or(r.runtime_in_use.load_error.as_deref())
            .unwrap_or("none reported");
        println!("  none: {why}");
    } else {
        for (i, d) in r.devices.iter().enumerate() {
            println!("  {i}: {d}");
        }
    }
    println!("\nCache");
    for root in &r.cache.roots {
        println!(
            "  {}  {} entries, {} ({} bytes){}",
            root.path.display(),
            root.entries,
            output::human_bytes(root.bytes),
            root.bytes,
            if root.written {
                ", written"
            } else {
                ", read-only"
            }
        );
    }
    if !r.cache.cap_text.is_empty() {
        println!("  {}", r.cache.cap_text);
    }
    if let Some(e) = &r.cache.error {
        println!("  error: {e}");
    }
    doctor_nvidia::print_text(&r.platform, &r.cuda_driver, &r.nvcc);
    doctor_rtc::print_text(&r.in_process);
    println!("\nDiagnosis");
    for f in &r.findings {
        println!("  {:<7} {}", f.level, f.text);
    }
}

/// Runs `hipjit doctor`. Always exit status 0 when the report could be printed: the findings
/// are the result, whatever they say.
pub fn run(args: &Args) -> Result<(), CliError> {
    let runtimes = runtimes();
    let runtime_in_use = run_probe(None);
    let cuda_driver = doctor_nvidia::cuda_driver();
    let nvcc = doctor_nvidia::nvcc();
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
    let in_process = doctor_rtc::gather(
        runtime_in_use
            .path
            .as_deref()
            .filter(|_| runtime_in_use.platform.as_deref() != Some("nvidia")),
        hipcc.as_deref(),
        nvcc.path.as_deref(),
        &amd_targets,
        &sm_targets,
    );
    let mut report = Report {
        platform: doctor_nvidia::platform(&runtime_in_use, &cuda_driver),
        cuda_driver,
        nvcc,
        header_sets: header_sets(),
        build: build_report(),
        runtimes,
        devices: runtime_in_use.devices.clone(),
        cache: cache_report(),
        runtime_in_use,
        compilers,
        in_process,
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

/// Runs the hidden `probe-runtime`: loads one runtime in this process and prints a [`Probe`]
/// as JSON. Exit status 0 whenever the JSON was printed, loaded or not.
pub fn probe_runtime(args: &ProbeArgs) -> Result<(), CliError> {
    use hipjit::runtime::Runtime;
    let loaded = match &args.library {
        Some(p) => Runtime::load_from(p),
        None => Runtime::load(),
    };
    let mut p = Probe {
        path: args.library.clone(),
        ..Probe::default()
    };
    match loaded {
        Err(e) => p.load_error = Some(e.to_string()),
        Ok(rt) => {
            p.platform = Some(rt.platform().to_string());
            p.path = Some(canonical(rt.path()));
            p.found = Some(rt.found().to_string());
            p.version = rt.version().map(|v| v.to_string());
            p.version_code = rt.version().map(|v| v.0);
            p.code_object_loader = Some(rt.code_object_loader().to_string());
            p.device_properties_entry = Some(rt.device_properties_entry().symbol().to_owned());
            p.code_object_versions = rt.code_object_versions().map(<[u32]>::to_vec);
            match rt.device_count() {
                Ok(0) => p.device_error = Some("hipGetDeviceCount reported 0 devices".into()),
                Ok(n) => {
                    for i in 0..n {
                        match rt.device(i) {
                            Ok(d) => p.devices.push(
                                d.target_id()
                                    .map(|t| t.to_string())
                                    .unwrap_or_else(|| d.arch_name().to_owned()),
                            ),
                            Err(e) => {
                                p.device_error_name = Some(e.name().to_owned());
                                p.device_error =
                                    Some(format!("device {i}: {}", hip_error_text(&e)));
                            }
                        }
                    }
                }
                Err(e) => {
                    p.device_error_name = Some(e.name().to_owned());
                    p.device_error = Some(hip_error_text(&e));
                }
            }
        }
    }
    let v = serde_json::to_string(&p)
        .map_err(|e| CliError::failed(format!("cannot encode the probe: {e}")))?;
    println!("{v}");
    Ok(())
}

/// `hipGetDeviceCount returned hipErrorNoDevice (100)`, plus the runtime's string when it says
/// more than the name.
fn hip_error_text(e: &hipjit::error::HipError) -> String {
    let mut s = format!("{} returned {} ({})", e.call(), e.name(), e.code());
    if !e.message().is_empty() && e.message() != e.name() {
        s.push_str(&format!(": {}", e.message()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_runtime_belongs_to_the_usr_include_header_set() {
        // Debian's libamdhip64-5 and libamdhip64-dev: /usr/lib/<multiarch>/ and /usr/include.
        let lib = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
        assert!(
            lib.exists(),
            "needs Debian's HIP runtime: apt-get install libamdhip64-5 libamdhip64-dev"
        );
        assert_eq!(
            runtime_include_dir(lib),
            Some(PathBuf::from("/usr/include"))
        );
    }

    #[test]
    fn a_library_outside_lib_has_no_header_set() {
        assert_eq!(
            runtime_include_dir(Path::new("/tmp/libamdhip64.so.7")),
            None
        );
    }

    #[test]
    fn runtime_version_code_splits_into_major_and_minor() {
        // hipRuntimeGetVersion of Debian's HIP 5.2.3 (ENVIRONMENT.md).
        assert_eq!(version_of_code(50221153), (5, 2));
        assert_eq!(version_of_code(60443484), (6, 4));
    }
}
