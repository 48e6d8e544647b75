//! `hipjit cache explain FILE --arch T [-D..] [-I..] [--std ..] [-O..] [--compiler ..]
//! [--json]`: the cache key of compiling FILE as `hipjit compile` would, field by field, the
//! header manifest's files checked now, which tier holds the result, and on a miss what
//! differs from the nearest entry compiled from the same source (`hipjit::jit::explain`).

use std::path::PathBuf;

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::{CompileOptions, CxxStd, OptLevel};
use hipjit::jit::explain::{DirStatus, Explanation, FileStatus, Hit};
use hipjit::jit::{Jit, JitOptions, RecordLocation};

use crate::compile::{
    compiler_json, options_for_file, parse_arch, parse_compiler, parse_opt_level, parse_std,
    read_source, Arch,
};
use crate::output::{self, CliError};

/// Arguments of `hipjit cache explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The HIP C++ source file (or `-` for standard input), as `hipjit compile` takes it.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The target: an AMDGPU target ID (repeat for several) or one SM target (`sm_90`).
    #[arg(long = "arch", required = true, value_name = "TARGET", value_parser = parse_arch)]
    pub targets: Vec<Arch>,
    /// Define a macro: `-D NAME` or `-D NAME=VALUE`.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub defines: Vec<String>,
    /// An include directory (searched in order, before the source's own directory).
    #[arg(short = 'I', value_name = "DIR")]
    pub include_dirs: Vec<PathBuf>,
    /// Optimisation level: 0, 1, 2, 3, s or z (default 3).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = parse_opt_level)]
    pub opt_level: Option<OptLevel>,
    /// C++ standard: c++14, c++17, c++20 or c++23 (default c++17).
    #[arg(long = "std", value_name = "STD", value_parser = parse_std)]
    pub std: Option<CxxStd>,
    /// An extra compiler flag, as `hipjit compile --cflag` (repeatable).
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    pub cflags: Vec<String>,
    /// Code object version: 4, 5 or 6 (default: the compiler's own).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(4..=6))]
    pub code_object_version: Option<u32>,
    /// The compiler: auto (default: `HIPJIT_COMPILER`, else auto), hipcc, hiprtc, nvcc, nvrtc.
    #[arg(long = "compiler", value_name = "COMPILER", value_parser = parse_compiler)]
    pub compiler: Option<CompilerChoice>,
}

fn file_status(s: FileStatus) -> &'static str {
    match s {
        FileStatus::Unchanged => "unchanged",
        FileStatus::Touched => "touched",
        FileStatus::Changed => "changed",
        FileStatus::Missing => "missing",
    }
}

fn dir_status(s: DirStatus) -> &'static str {
    match s {
        DirStatus::Unchanged => "unchanged",
        DirStatus::Changed => "changed",
        DirStatus::Appeared => "appeared",
        DirStatus::Missing => "missing",
    }
}

fn options(args: &Args) -> Result<CompileOptions, CliError> {
    let mut o = CompileOptions {
        std: args.std.unwrap_or_default(),
        include_dirs: args.include_dirs.clone(),
        extra_flags: args.cflags.clone(),
        code_object_version: args.code_object_version,
        ..CompileOptions::default()
    };
    if let Some(l) = args.opt_level {
        o.opt_level = l;
    }
    for t in &args.targets {
        match t {
            Arch::Amd(t) => o.targets.push(t.clone()),
            Arch::Nvidia(t) => o.sm_targets.push(*t),
        }
    }
    if !o.targets.is_empty() && !o.sm_targets.is_empty() {
        return Err(CliError::usage(
            "--arch with AMDGPU and NVIDIA targets at once: explain one platform's compile",
        ));
    }
    if o.sm_targets.len() > 1 {
        return Err(CliError::usage(
            "several sm_ targets: each is its own compile (a cubin holds one); explain one",
        ));
    }
    for d in &args.defines {
        o.defines.push(match d.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (d.clone(), None),
        });
    }
    o.validate()
        .map_err(|e| CliError::usage(format!("--arch {}: {e}", o.target_names().join(", "))))?;
    Ok(options_for_file(&o, &args.file))
}

/// Runs `hipjit cache explain`.
///
/// Errors: exit status 2 for bad options, 1 when the source cannot be read, the caches cannot
/// be opened or the compiler cannot be identified. A miss is not an error (exit status 0).
pub fn run(args: &Args, json: bool) -> Result<(), CliError> {
    let o = options(args)?;
    let source = read_source(&args.file).map_err(CliError::failed)?;
    let jit = Jit::new(JitOptions {
        compiler: args.compiler,
        record: RecordLocation::Disabled,
        ..JitOptions::default()
    })
    .map_err(|e| {
        crate::compile::environment_error(&e).unwrap_or_else(|| CliError::failed(e.to_string()))
    })?;
    let e = jit
        .explain(&source, &o)
        .map_err(|e| CliError::failed(format!("{}: {e}", args.file.display())))?;
    for w in &e.warnings {
        eprintln!("hipjit: warning: {w}");
    }
    if json {
        output::print_json(to_json(args, &e))
    } else {
        print_text(args, &e);
        Ok(())
    }
}

fn to_json(args: &Args, e: &Explanation) -> serde_json::Value {
    let fields: Vec<serde_json::Value> = e
        .fields
        .0
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name, "sha256": f.sha256, "bytes": f.bytes, "value": f.value,
            })
        })
        .collect();
    let manifest = e.manifest.as_ref().map(|m| {
        serde_json::json!({
            "entry": output::path_json(&m.entry),
            "files": m.files.iter().map(|f| serde_json::json!({
                "name": f.name, "path": f.path.as_ref().map(output::path_json),
                "status": file_status(f.status), "recorded_sha256": f.recorded_sha256,
                "sha256": f.sha256,
            })).collect::<Vec<_>>(),
            "dirs": m.dirs.iter().map(|d| serde_json::json!({
                "name": d.name, "path": d.path.as_ref().map(output::path_json),
                "status": dir_status(d.status),
            })).collect::<Vec<_>>(),
        })
    });
    let (tier, entry) = match &e.hit {
        Some(Hit::Memory) => (Some("memory"), None),
        Some(Hit::Disk(p)) => (Some("disk"), Some(output::path_json(p))),
        Some(Hit::Remote(p)) => (Some("remote"), Some(output::path_json(p))),
        None => (None, None),
    };
    let nearest = e.nearest.as_ref().map(|n| {
        serde_json::json!({
            "entry": output::path_json(&n.entry), "key": n.key.to_hex(),
            "differing": n.differing.iter().map(|d| serde_json::json!({
                "field": d.field, "now": d.now, "entry": d.entry,
            })).collect::<Vec<_>>(),
        })
    });
    serde_json::json!({
        "file": output::path_json(&args.file),
        "targets": e.options.target_names(),
        "compiler": compiler_json(&e.compiler),
        "direct_key": e.direct_key.to_hex(),
        "fields": fields,
        "manifest": manifest,
        "result_key": e.result_key.map(|k| k.to_hex()),
        "hit": e.hit.is_some(),
        "tier": tier,
        "entry": entry,
        "nearest": nearest,
        "warnings": e.warnings,
    })
}

fn print_text(args: &Args, e: &Explanation) {
    let verdict = match &e.hit {
        Some(Hit::Memory) => "hit (memory)".to_string(),
        Some(Hit::Disk(p)) => format!("hit (disk) {}", p.display()),
        Some(Hit::Remote(p)) => format!("hit (remote) {}", p.display()),
        None => "miss in every tier".to_string(),
    };
    println!("{}: {verdict}", args.file.display());
    println!(
        "compiler {} {} ({})",
        e.compiler.kind.as_str(),
        e.compiler.path.display(),
        e.compiler.version
    );
    println!("direct key {}", e.direct_key);
    for f in &e.fields.0 {
        let value = match &f.value {
            None => format!("sha256 {} ({} bytes)", f.sha256, f.bytes),
            Some(v) if v.is_empty() => "(none)".to_string(),
            Some(v) if f.name == "compiler-version" || f.name == "env" => v.join(" | "),
            Some(v) => v.join(" "),
        };
        println!("  {:<22} {value}", f.name);
    }
    match &e.manifest {
        None => println!("header manifest: none on disk for this direct key"),
        Some(m) => {
            let unchanged = m
                .files
                .iter()
                .filter(|f| f.status == FileStatus::Unchanged)
                .count();
            println!(
                "header manifest {}: {} files ({unchanged} unchanged), {} directories",
                m.entry.display(),
                m.files.len(),
                m.dirs.len()
            );
            for f in m.files.iter().filter(|f| f.status != FileStatus::Unchanged) {
                println!(
                    "  {:<9} {}{}",
                    file_status(f.status),
                    f.name,
                    f.path
                        .as_ref()
                        .map(|p| format!("  ({})", p.display()))
                        .unwrap_or_default()
                );
            }
            for d in m.dirs.iter().filter(|d| d.status != DirStatus::Unchanged) {
                println!("  {:<9} directory {}", dir_status(d.status), d.name);
            }
        }
    }
    if let Some(k) = &e.result_key {
        println!("result key {k}");
    }
    if e.hit.is_some() {
        return;
    }
    match &e.nearest {
        None => println!("no entry compiled from the same source is in the disk roots"),
        Some(n) => {
            println!(
                "nearest entry compiled from the same source: {} ({} field(s) differ)",
                n.entry.display(),
                n.differing.len()
            );
            for d in &n.differing {
                println!("  {}", d.field);
                println!("    now:   {}", d.now.join(" "));
                println!("    entry: {}", d.entry.join(" "));
            }
        }
    }
}
