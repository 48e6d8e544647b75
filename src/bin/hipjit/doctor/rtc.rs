//! The in-process compilers' part of `hipjit doctor`: hipRTC and NVRTC, each opened in a child
//! process (`hipjit probe-rtc`, so that a library that crashes only fails its own section):
//! found or not (and every candidate tried when not), the file, how it was found, its identity
//! (the files that decide what it compiles, with their sizes: hashing them, hundreds of MB, is
//! the cache's work, done once and remembered, not doctor's), whether it compiles each
//! device's target (a small kernel compiled for it; hipRTC's targets checked against its comgr
//! first), and what [`CompilerChoice::Auto`](hipjit::compiler::selection::CompilerChoice::Auto)
//! takes for that target and why ([`selection::auto`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hipjit::compiler::hiprtc::{self, HipRtc};
use hipjit::compiler::nvrtc::{self, NvRtc};
use hipjit::compiler::rtc::{RtcError, RtcInput};
use hipjit::compiler::selection;
use hipjit::compiler::CompilerKind;
use hipjit::cuda::target::SmTarget;
use hipjit::target_id::TargetId;
use serde::{Deserialize, Serialize};

use crate::doctor::{last_line, run_with_timeout};
use crate::output::CliError;

/// How long one compiler's probe (open, identity, a compile per target) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// Arguments of the hidden `probe-rtc`.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// The in-process compiler to open: hiprtc or nvrtc.
    #[arg(long, value_parser = parse_in_process)]
    pub compiler: CompilerKind,
    /// hipRTC: the HIP runtime hipjit loads (hipRTC is looked for beside it).
    #[arg(long)]
    pub runtime: Option<PathBuf>,
    /// NVRTC: the nvcc hipjit found (NVRTC is looked for beside it).
    #[arg(long)]
    pub nvcc: Option<PathBuf>,
    /// A target to compile a small kernel for (repeatable).
    #[arg(long = "target")]
    pub targets: Vec<String>,
}

/// An in-process compiler's kind from its spelling (`hiprtc`, `nvrtc`).
fn parse_in_process(s: &str) -> Result<CompilerKind, String> {
    match s.parse::<CompilerKind>() {
        Ok(k @ (CompilerKind::HipRtc | CompilerKind::Nvrtc)) => Ok(k),
        Ok(k) => Err(format!("{k} is not an in-process compiler")),
        Err(e) => Err(e.to_string()),
    }
}

/// One target checked.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TargetReport {
    /// The target ID or SM target.
    pub target: String,
    /// Where it came from: `device N`, or `--target`.
    #[serde(default)]
    pub from: String,
    /// Whether a small kernel compiled for it.
    pub compiles: bool,
    /// Why not.
    pub error: Option<String>,
    /// What `Auto` takes for it: `hipcc`, `hiprtc`, `nvcc` or `nvrtc` (`None` when nothing
    /// can compile).
    #[serde(default)]
    pub auto: Option<String>,
    /// Why, or why nothing can.
    #[serde(default)]
    pub auto_reason: String,
}

/// One file of a compiler's identity.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct IdentityFile {
    /// The file, symlinks resolved.
    pub path: PathBuf,
    /// Its size in bytes (`None` when it cannot be read).
    pub size: Option<u64>,
}

fn identity_files(files: Vec<PathBuf>) -> Vec<IdentityFile> {
    files
        .into_iter()
        .map(|path| IdentityFile {
            size: std::fs::metadata(&path).ok().map(|m| m.len()),
            path,
        })
        .collect()
}

/// What doctor reports about one in-process compiler.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct RtcReport {
    /// Whether the library was found and opened.
    pub found: bool,
    /// The file loaded (`dladdr` of its create-program entry point).
    pub path: Option<PathBuf>,
    /// How it was found (`HIPJIT_HIPRTC_LIBRARY`, `beside the HIP runtime`, `dynamic loader`...).
    pub origin: Option<String>,
    /// The major version: HIP's for hipRTC (from the file name), CUDA's for NVRTC
    /// (`nvrtcVersion`).
    pub major: Option<u32>,
    /// The minor version: HIP's for hipRTC (from the file name or the file its links lead to,
    /// else `hipRuntimeGetVersion`), CUDA's for NVRTC; with `major`, what Auto's parity table
    /// is keyed by. Absent when the library does not tell.
    #[serde(default)]
    pub minor: Option<u32>,
    /// `nvrtcVersion` / `hiprtcVersion` as `major.minor` (hipRTC's says 9.0 on 5.2.3 and 6.4.3
    /// alike).
    pub library_version: Option<String>,
    /// The files that decide what it compiles (for the cache key's compiler identity), with
    /// their sizes in bytes.
    pub identity_files: Vec<IdentityFile>,
    /// hipRTC: the comgr it compiles through.
    pub comgr: Option<PathBuf>,
    /// hipRTC: the processors that comgr knows.
    pub processors: Vec<String>,
    /// The targets checked.
    pub targets: Vec<TargetReport>,
    /// Why it was not found (every candidate tried), or why the probe failed.
    pub error: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The child

/// A kernel small enough to compile anywhere, using the thread index so the device library's
/// work-item functions are linked as in a real kernel.
const PROBE_SOURCE: &[u8] =
    b"extern \"C\" __global__ void hipjit_doctor_probe(int* o) { o[threadIdx.x] = 1; }\n";

fn compile_result(r: Result<hipjit::compiler::rtc::RtcOutput, RtcError>) -> (bool, Option<String>) {
    match r {
        Ok(_) => (true, None),
        Err(e) => (false, Some(e.to_string())),
    }
}

/// Runs the hidden `probe-rtc`: opens one in-process compiler in this process, compiles a
/// small kernel for each target and prints an [`RtcReport`] as JSON. Exit status 0 whenever the
/// JSON was printed.
pub fn probe_rtc(args: &ProbeArgs) -> Result<(), CliError> {
    let mut r = RtcReport::default();
    let target = |t: &str, compiles, error| TargetReport {
        target: t.to_owned(),
        from: String::new(),
        compiles,
        error,
        auto: None,
        auto_reason: String::new(),
    };
    match args.compiler {
        CompilerKind::HipRtc => match HipRtc::open(args.runtime.as_deref()) {
            Err(e) => r.error = Some(e.to_string()),
            Ok(rtc) => {
                r.found = true;
                r.path = Some(rtc.path().to_path_buf());
                r.origin = Some(rtc.found().to_owned());
                r.major = rtc.hip_major();
                r.minor = rtc.hip_version().and_then(|(_, minor)| minor);
                r.library_version = rtc.version().map(|(a, b)| format!("{a}.{b}"));
                match rtc.comgr() {
                    Ok(c) => {
                        r.comgr = Some(c.path.clone());
                        r.processors = c.processors.clone();
                    }
                    Err(e) => r.error = Some(format!("its comgr cannot be asked: {e}")),
                }
                r.identity_files = identity_files(rtc.identity_files());
                for t in &args.targets {
                    let (compiles, error) = match TargetId::parse(t) {
                        Err(e) => (false, Some(e.to_string())),
                        Ok(id) => compile_result(rtc.compile(&RtcInput {
                            source: PROBE_SOURCE,
                            name: "hipjit_doctor_probe.hip",
                            headers: &[],
                            include_dirs: &[],
                            options: &[hiprtc::arch_option(&id)],
                        })),
                    };
                    r.targets.push(target(t, compiles, error));
                }
            }
        },
        CompilerKind::Nvrtc => match NvRtc::open(args.nvcc.as_deref()) {
            Err(e) => r.error = Some(e.to_string()),
            Ok(rtc) => {
                r.found = true;
                r.path = Some(rtc.path().to_path_buf());
                r.origin = Some(rtc.found().to_owned());
                let version = rtc.version();
                r.major = version.map(|(a, _)| a.max(0) as u32);
                r.minor = version.map(|(_, b)| b.max(0) as u32);
                r.library_version = version.map(|(a, b)| format!("{a}.{b}"));
                r.identity_files = identity_files(rtc.identity_files());
                for t in &args.targets {
                    let (compiles, error) = match t.parse::<SmTarget>() {
                        Err(e) => (false, Some(e.to_string())),
                        Ok(sm) => compile_result(rtc.compile(&RtcInput {
                            source: PROBE_SOURCE,
                            name: "hipjit_doctor_probe.cu",
                            headers: &[],
                            include_dirs: &[],
                            options: &[nvrtc::arch_option(sm)],
                        })),
                    };
                    r.targets.push(target(t, compiles, error));
                }
            }
        },
        // parse_in_process takes only the in-process kinds.
        other => r.error = Some(format!("{other} is not an in-process compiler")),
    }
    let v = serde_json::to_string(&r)
        .map_err(|e| CliError::failed(format!("cannot encode the probe: {e}")))?;
    println!("{v}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Gathering (in doctor's process)

/// The in-process compilers' reports and what `Auto` takes.
#[derive(Serialize, Debug, Default)]
pub struct InProcess {
    /// hipRTC.
    pub hiprtc: RtcReport,
    /// NVRTC.
    pub nvrtc: RtcReport,
}

/// Runs `hipjit probe-rtc` for one compiler and reads its JSON; a crash or a hang is the
/// report's `error`.
fn probe(
    which: CompilerKind,
    library_hint: Option<(&str, &Path)>,
    targets: &[String],
) -> RtcReport {
    let failed = |e: String| RtcReport {
        error: Some(e),
        ..RtcReport::default()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find the hipjit executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("probe-rtc").arg("--compiler").arg(which.as_str());
    if let Some((flag, path)) = library_hint {
        cmd.arg(flag).arg(path);
    }
    for t in targets {
        cmd.arg("--target").arg(t);
    }
    match run_with_timeout(&mut cmd, PROBE_TIMEOUT) {
        Ok((status, stdout, stderr)) => match serde_json::from_slice::<RtcReport>(&stdout) {
            Ok(r) => r,
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

/// What `Auto` takes for each target of `r`, given the process compiler found (`hipcc`,
/// `nvcc`), written into the target reports.
fn decide(r: &mut RtcReport, name: &str, process: Option<&str>) {
    let in_process = r.found.then_some(r.major).flatten().map(|major| {
        (
            name,
            selection::RtcVersion {
                major,
                minor: r.minor,
            },
        )
    });
    for t in &mut r.targets {
        let processor = t.target.split(':').next().unwrap_or(&t.target).to_owned();
        if let (Some((c, version)), false) = (in_process, t.compiles) {
            // Found, but not for this target: the process compiler, or nothing.
            let process_kind = if name == "hipRTC" { "hipcc" } else { "nvcc" };
            match process {
                Some(p) => {
                    t.auto = Some(process_kind.to_owned());
                    t.auto_reason = format!("{p}: {c} {version} cannot compile for {processor}");
                }
                None => {
                    let why = format!("{c} {version} cannot compile for {processor}");
                    t.auto_reason = format!("{why} and no {process_kind} was found");
                }
            }
            continue;
        }
        match selection::auto(in_process, process, &processor, false) {
            Ok(sel) => {
                t.auto = Some(
                    match (sel.side, name) {
                        (selection::Side::InProcess, "hipRTC") => "hiprtc",
                        (selection::Side::InProcess, _) => "nvrtc",
                        (selection::Side::Process, "hipRTC") => "hipcc",
                        (selection::Side::Process, _) => "nvcc",
                    }
                    .to_owned(),
                );
                t.auto_reason = sel.reason;
            }
            Err(why) => t.auto_reason = why,
        }
    }
}

/// Probes hipRTC (looked for beside `hip_runtime`, the runtime hipjit loads) for `amd_targets`
/// and NVRTC (beside `nvcc`) for `sm_targets`, each with where the target came from, and says
/// what `Auto` takes given the process compilers found (`hipcc`, `nvcc`).
pub fn gather(
    hip_runtime: Option<&Path>,
    hipcc: Option<&Path>,
    nvcc: Option<&Path>,
    amd_targets: &[(String, String)],
    sm_targets: &[(String, String)],
) -> InProcess {
    let names = |ts: &[(String, String)]| ts.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    let mut hiprtc = probe(
        CompilerKind::HipRtc,
        hip_runtime.map(|p| ("--runtime", p)),
        &names(amd_targets),
    );
    let mut nvrtc = probe(
        CompilerKind::Nvrtc,
        nvcc.map(|p| ("--nvcc", p)),
        &names(sm_targets),
    );
    for (r, ts) in [(&mut hiprtc, amd_targets), (&mut nvrtc, sm_targets)] {
        for (t, (_, from)) in r.targets.iter_mut().zip(ts) {
            t.from = from.clone();
        }
    }
    let hipcc = hipcc.map(|p| p.display().to_string());
    let nvcc = nvcc.map(|p| p.display().to_string());
    decide(&mut hiprtc, "hipRTC", hipcc.as_deref());
    decide(&mut nvrtc, "NVRTC", nvcc.as_deref());
    InProcess { hiprtc, nvrtc }
}

/// Findings about the in-process compilers.
pub fn diagnose(r: &InProcess, push: &mut dyn FnMut(&'static str, String)) {
    for (name, rtc) in [("hipRTC", &r.hiprtc), ("NVRTC", &r.nvrtc)] {
        if !rtc.found {
            push(
                "note",
                format!(
                    "{name} was not found, so Auto compiles with the process compiler: {}",
                    rtc.error.as_deref().unwrap_or("no reason given")
                ),
            );
            continue;
        }
        for t in rtc.targets.iter().filter(|t| !t.compiles) {
            push(
                "warning",
                format!(
                    "{name} {} cannot compile for {} ({}): {}",
                    rtc.path.as_deref().unwrap_or(Path::new("?")).display(),
                    t.target,
                    t.from,
                    t.error.as_deref().unwrap_or("no reason given")
                ),
            );
        }
    }
}

fn print_one(name: &str, r: &RtcReport) {
    if !r.found {
        println!(
            "  {name}: not found: {}",
            r.error.as_deref().unwrap_or("no reason given")
        );
        return;
    }
    let version = match (name, r.major) {
        ("hipRTC", Some(m)) => match r.minor {
            Some(n) => format!(", HIP {m}.{n}"),
            None => format!(", HIP {m}"),
        },
        (_, Some(_)) => format!(", CUDA {}", r.library_version.as_deref().unwrap_or("?")),
        _ => String::new(),
    };
    println!(
        "  {name}: {}  [{}]{version}",
        r.path.as_deref().unwrap_or(Path::new("?")).display(),
        r.origin.as_deref().unwrap_or("?")
    );
    println!("      identity  {} files:", r.identity_files.len());
    for f in &r.identity_files {
        match f.size {
            Some(n) => println!("          {} ({n} bytes)", f.path.display()),
            None => println!("          {} (unreadable)", f.path.display()),
        }
    }
    if let Some(c) = &r.comgr {
        println!(
            "      comgr     {} ({} processors: {})",
            c.display(),
            r.processors.len(),
            r.processors.join(" ")
        );
    }
    if r.targets.is_empty() {
        println!("      no device target to check (name one with --target)");
    }
    for t in &r.targets {
        let result = match &t.error {
            None => "compiles".to_owned(),
            Some(e) => format!("does not compile: {e}"),
        };
        println!("      {} ({}): {result}", t.target, t.from);
        println!(
            "          Auto takes {}: {}",
            t.auto.as_deref().unwrap_or("nothing"),
            t.auto_reason
        );
    }
    if let Some(e) = &r.error {
        println!("      error: {e}");
    }
}

/// The section of the text report.
pub fn print_text(r: &InProcess) {
    println!("\nIn-process compilers");
    print_one("hipRTC", &r.hiprtc);
    print_one("NVRTC", &r.nvrtc);
}
