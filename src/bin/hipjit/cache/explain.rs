//! `hipjit cache explain FILE --arch T [-D..] [-I..] [--std ..] [-O..] [--compiler ..]
//! [--json]`: the cache key of compiling FILE as `hipjit compile` would, field by field, the
//! header manifest's files checked now, which tier holds the result, and on a miss what
//! differs from the nearest entry compiled from the same source (`hipjit::jit::explain`).

use std::path::PathBuf;

use hipjit::cache::disk::Root;
use hipjit::compiler::diagnostics::Layout;
use hipjit::compiler::{CompileOptions, OptionsError};
use hipjit::jit::explain::{DirStatus, Explanation, FileStatus, Hit};
use hipjit::jit::{CacheLocation, Jit, JitOptions, RecordLocation};

use crate::compile::{
    compiler_json, error_text, options_for_file, read_source, refused_flag_error,
};
use crate::output::{self, CliError};
use crate::request::{check_options, targets_text, RequestArgs};

/// Arguments of `hipjit cache explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The HIP C++ source file (or `-` for standard input), as `hipjit compile` takes it.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The request, as `hipjit compile` takes it.
    #[command(flatten)]
    pub request: RequestArgs,
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

/// The options `hipjit compile` would compile FILE with, refused as it refuses them (usage
/// errors, exit status 2); a refused flag is returned, to be named with its compiler
/// ([`crate::compile::refused_flag_error`]).
fn options(args: &Args) -> Result<(CompileOptions, Option<OptionsError>), CliError> {
    let (mut o, nvidia) = args.request.options(args.request.cflags.clone())?;
    if nvidia.len() > 1 {
        return Err(CliError::usage(
            "several sm_ targets: each is its own compile (a cubin holds one); explain one",
        ));
    }
    o.sm_targets = nvidia;
    let refused_flag = check_options(&o, &targets_text(&args.request.targets))?;
    Ok((options_for_file(&o, &args.file), refused_flag))
}

/// Runs `hipjit cache explain`.
///
/// Errors: as `hipjit compile` for the same request, with the same message: exit status 2 for
/// bad options (a refused flag named with the compiler that would run it), 1 when the source
/// cannot be read, the compiler cannot be found or identified, or the compiler would refuse
/// the request before compiling (an include directory that is not one, an `#include` of a
/// FIFO, a target it does not take...); also 1 when a cache root is unusable. A miss is not
/// an error (exit status 0), nor is a root that does not exist (it holds nothing). Nothing is
/// created or written: the disk roots are opened read-only
/// (`hipjit::jit::CacheLocation::ReadOnly`), and compiler identities are not remembered
/// (`hipjit::compiler::identity::memos_read_only`).
pub fn run(args: &Args, json: bool) -> Result<(), CliError> {
    // Finding and identifying the compiler (for a refused flag too) remembers nothing.
    hipjit::compiler::identity::memos_read_only(|| explain(args, json))
}

fn explain(args: &Args, json: bool) -> Result<(), CliError> {
    let (o, refused_flag) = options(args)?;
    let source = read_source(&args.file).map_err(CliError::failed)?;
    let jit = Jit::new(JitOptions {
        compiler: args.request.compiler,
        cache: CacheLocation::ReadOnly(None),
        record: RecordLocation::Disabled,
        ..JitOptions::default()
    })
    .map_err(|e| {
        crate::compile::environment_error(&e).unwrap_or_else(|| CliError::failed(e.to_string()))
    })?;
    if let Some(e) = refused_flag {
        return Err(refused_flag_error(&jit, &source, &o, e));
    }
    let e = jit.explain(&source, &o).map_err(|e| {
        let targets = o.target_names().join(", ");
        CliError::failed(error_text(
            &args.file,
            &targets,
            &e,
            false,
            &[],
            Layout::Clang,
        ))
    })?;
    for w in &e.warnings {
        eprintln!("hipjit: warning: {w}");
    }
    let roots = jit.disk_cache().map(|d| d.roots()).unwrap_or_default();
    if json {
        output::print_json(to_json(args, &e, roots))
    } else {
        print_text(args, &e, roots);
        Ok(())
    }
}

fn to_json(args: &Args, e: &Explanation, roots: &[Root]) -> serde_json::Value {
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
                "status": dir_status(d.status), "added": d.added, "removed": d.removed,
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
        "cache_roots": roots.iter().map(|r| serde_json::json!({
            "path": output::path_json(&r.path), "exists": r.path.exists(),
        })).collect::<Vec<_>>(),
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

fn print_text(args: &Args, e: &Explanation, roots: &[Root]) {
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
    for r in roots {
        if r.path.exists() {
            println!("cache root {}", r.path.display());
        } else {
            println!(
                "cache root {} (does not exist: nothing is cached there)",
                r.path.display()
            );
        }
    }
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
                let mut names = Vec::new();
                if let Some(a) = d.added.as_ref().filter(|a| !a.is_empty()) {
                    names.push(format!("added {}", a.join(" ")));
                }
                if let Some(r) = d.removed.as_ref().filter(|r| !r.is_empty()) {
                    names.push(format!("removed {}", r.join(" ")));
                }
                println!(
                    "  {:<9} directory {}{}{}",
                    dir_status(d.status),
                    d.name,
                    d.path
                        .as_ref()
                        .map(|p| format!("  ({})", p.display()))
                        .unwrap_or_default(),
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", names.join("; "))
                    }
                );
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
                let shown = |v: &[String]| {
                    if v.is_empty() {
                        "(none)".to_string()
                    } else {
                        v.join(" ")
                    }
                };
                println!("    now:   {}", shown(&d.now));
                println!("    entry: {}", shown(&d.entry));
            }
        }
    }
}
