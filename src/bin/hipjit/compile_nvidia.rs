//! `hipjit compile FILE... --arch sm_NN`: HIP sources to cubins on HIP's NVIDIA platform, through
//! `hipjit::cuda::jit::NvJit` (nvcc found by `Nvcc` discovery: `HIPJIT_NVCC`, `CUDA_PATH`/
//! `CUDA_HOME`, `PATH`, `/usr/local/cuda/bin/nvcc`) and the same disk cache as the AMD path
//! (`HIPJIT_CACHE_DIR`).
//!
//! `-D` and `-I` become nvcc's `-D`/`-I` (include directories made absolute: nvcc runs in a
//! temporary directory), the directory holding each source is added after the `-I`
//! directories; `--std` becomes nvcc's `-std=` (a standard nvcc's host compiler lacks is an
//! error, not a silent fallback); `--cflag` and the words after `--` are checked with nvcc's
//! rules (`hipjit::compiler::flags`) and passed after them. nvcc runs with `-O3` (hipjit's
//! NVIDIA JIT fixes it), so `-O` other than 3 is a usage error, as is `--code-object-version`
//! (an AMDGPU notion). Diagnostics are nvcc's, its temporary source named as the user's file,
//! with no column (nvcc prints none). At most `-j` inputs compile
//! at once; results print in the order of the inputs. A cubin records no register counts (the CUDA driver reports them per kernel),
//! so none are printed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use hipjit::cache::disk::DiskCache;
use hipjit::cache::key::CacheKey;
use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::diagnostics::{self, Diagnostic, Layout};
use hipjit::compiler::nvcc::NvccError;
use hipjit::compiler::{BackendKind, OptLevel};
use hipjit::cuda::jit::{NvJit, NvJitError, NvOrigin};
use hipjit::cuda::target::SmTarget;

use crate::compile::{error_text, write_atomically, Args};
use crate::output::{self, CliError};

/// One target's result for one input.
struct Built {
    /// The target asked for (the cubin's own target drops an `a`/`f` suffix).
    sm: SmTarget,
    cubin: Cubin,
    origin: NvOrigin,
    key: String,
    entry: Option<PathBuf>,
    elapsed: std::time::Duration,
}

/// What became of one input.
struct Outcome {
    file: PathBuf,
    result: Result<(Vec<Built>, Vec<PathBuf>), String>,
    /// nvcc's diagnostics (warnings of a success, everything of a failure), user paths.
    diagnostics: Vec<Diagnostic>,
}

fn origin_name(o: NvOrigin) -> &'static str {
    match o {
        NvOrigin::Memory => "hit (memory)",
        NvOrigin::Disk => "hit (disk)",
        NvOrigin::Compiled => "miss (compiled)",
    }
}

fn cache_name(o: NvOrigin) -> &'static str {
    match o {
        NvOrigin::Memory => "memory",
        NvOrigin::Disk => "disk",
        NvOrigin::Compiled => "miss",
    }
}

/// The include directories of `args` and the one holding `file`, as given and made absolute.
type IncludeDirs = Vec<(PathBuf, PathBuf)>;

/// nvcc's flags for `args` and the directory holding `file`: the defines, the include
/// directories made absolute, then the extra flags; and the include directories.
fn flags(args: &Args, file: &Path) -> Result<(Vec<String>, IncludeDirs), String> {
    let mut f: Vec<String> = args.defines.iter().map(|d| format!("-D{d}")).collect();
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut dirs = Vec::new();
    for i in args.include_dirs.iter().map(PathBuf::as_path).chain([dir]) {
        let abs = std::fs::canonicalize(i)
            .map_err(|e| format!("include directory {}: {e}", i.display()))?;
        f.push("-I".into());
        f.push(abs.display().to_string());
        dirs.push((i.to_path_buf(), abs));
    }
    f.extend(crate::compile::extra_flags(args));
    Ok((f, dirs))
}

/// `diags` with nvcc's names made the user's: its staged source as `file`, a header under an
/// absolute include directory under the directory as the user gave it.
fn nvcc_user_diagnostics(file: &Path, dirs: &IncludeDirs, diags: &[Diagnostic]) -> Vec<Diagnostic> {
    let user = file.display().to_string();
    diags
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.rename_files(&|f: &str| {
                if f == NVCC_SOURCE {
                    return Some(user.clone());
                }
                dirs.iter().find_map(|(given, abs)| {
                    let rest = Path::new(f).strip_prefix(abs).ok()?;
                    Some(given.join(rest).display().to_string())
                })
            });
            d
        })
        .collect()
}

fn compile_one(
    jit: &NvJit,
    args: &Args,
    sms: &[SmTarget],
    file: &Path,
    outs: &[PathBuf],
) -> Outcome {
    let fail = |m: String| Outcome {
        file: file.to_path_buf(),
        result: Err(m),
        diagnostics: Vec::new(),
    };
    let source = match super::compile::read_source(file) {
        Ok(s) => s,
        Err(m) => return fail(m),
    };
    let (flags, dirs) = match flags(args, file) {
        Ok(f) => f,
        Err(m) => return fail(format!("{}: {m}", file.display())),
    };
    let mut built = Vec::new();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for &sm in sms {
        let t = Instant::now();
        match jit.compile_detailed(&source, sm, &flags) {
            Ok(c) => {
                let entry = entry_path(jit, &jit.nvcc().key(&source, sm, &flags));
                for d in nvcc_user_diagnostics(file, &dirs, &c.diagnostics) {
                    if !diagnostics.contains(&d) {
                        diagnostics.push(d);
                    }
                }
                built.push(Built {
                    sm,
                    cubin: c.cubin,
                    origin: c.origin,
                    key: c.key,
                    entry,
                    elapsed: t.elapsed(),
                });
            }
            Err(e) => {
                let diagnostics = match &e {
                    NvJitError::Nvcc(NvccError::Failed { diagnostics, .. }) => {
                        nvcc_user_diagnostics(file, &dirs, diagnostics)
                    }
                    _ => Vec::new(),
                };
                let failed = matches!(&e, NvJitError::Nvcc(NvccError::Failed { .. }));
                let text = error_text(
                    file,
                    &sm.to_string(),
                    &e,
                    failed,
                    &diagnostics,
                    Layout::Nvcc,
                );
                return Outcome {
                    file: file.to_path_buf(),
                    result: Err(text),
                    diagnostics,
                };
            }
        }
    }
    let mut written = Vec::new();
    for (b, path) in built.iter().zip(outs) {
        if let Err(e) = write_atomically(path, b.cubin.elf(), crate::compile::output_is_dir(args)) {
            return fail(format!("{} (target {}): {e}", file.display(), b.sm));
        }
        written.push(path.clone());
    }
    Outcome {
        file: file.to_path_buf(),
        result: Ok((built, written)),
        diagnostics,
    }
}

/// The name nvcc's diagnostics give the source (hipjit's NVIDIA JIT stages it so).
const NVCC_SOURCE: &str = "kernel.cu";

/// The cache entry of `key`: the first root holding it (a hit may come from a read-only root),
/// else where the written root would hold it; `None` without a disk cache.
fn entry_path(jit: &NvJit, key: &CacheKey) -> Option<PathBuf> {
    let roots: Vec<PathBuf> = jit
        .disk_cache()
        .ok()
        .flatten()
        .map(|d| d.roots().iter().map(|r| r.path.clone()).collect())
        .unwrap_or_default();
    roots
        .iter()
        .map(|r| DiskCache::entry_path(r, key))
        .find(|p| p.is_file())
        .or_else(|| jit.disk_dir().map(|r| DiskCache::entry_path(r, key)))
}

/// Runs `hipjit compile` for NVIDIA targets `sms`, writing input `i`'s cubins to `outs[i]`
/// (one path per target, or none).
///
/// Errors: exit status 2 for options that do not apply to nvcc (`-O` other than 3,
/// `--code-object-version`), 1 when nvcc cannot be found (the message names `HIPJIT_NVCC`),
/// the cache cannot be opened, or any input fails.
pub fn run(args: &Args, sms: &[SmTarget], outs: &[Vec<PathBuf>]) -> Result<(), CliError> {
    if args.opt_level.is_some_and(|l| l != OptLevel::O3) {
        return Err(CliError::usage(
            "-O: hipjit's NVIDIA JIT always runs nvcc with -O3; drop -O for sm_ targets",
        ));
    }
    if args.code_object_version.is_some() {
        return Err(CliError::usage(
            "--code-object-version applies to AMDGPU code objects, not to cubins (sm_ targets)",
        ));
    }
    let extra = crate::compile::extra_flags(args);
    BackendKind::Nvcc
        .check_extra_flags(&extra)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let jit = NvJit::from_env()
        .map_err(|e| CliError::failed(e.to_string()))?
        .with_std(args.std.unwrap_or_default());
    let n = args.files.len();
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    );
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let o = compile_one(&jit, args, sms, &args.files[i], &outs[i]);
                let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                if o.result.is_ok() && !o.diagnostics.is_empty() {
                    let text = diagnostics::render_all_as(&o.diagnostics, Layout::Nvcc);
                    eprintln!("{}", text.trim_end());
                }
                match &o.result {
                    Err(e) => eprintln!("hipjit: error: {e}"),
                    Ok(_) if n > 1 => eprintln!("[{k}/{n}] {}: done", o.file.display()),
                    Ok(_) => {}
                }
                if let Ok(mut r) = slots.lock() {
                    r[i] = Some(o);
                }
            });
        }
    });
    let results: Vec<Outcome> = slots
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    let failed = results.iter().filter(|o| o.result.is_err()).count();
    if args.json {
        let roots: Option<Vec<PathBuf>> = jit
            .disk_cache()
            .ok()
            .flatten()
            .map(|d| d.roots().iter().map(|r| r.path.clone()).collect());
        output::print_json(serde_json::json!({
            "platform": "nvidia",
            "compiler": {
                "path": output::path_json(jit.nvcc().path()),
                "version": jit.nvcc().release().unwrap_or(jit.nvcc().version_text().trim()),
            },
            "std": jit.nvcc().std().to_string(),
            "extra_flags": extra,
            "cache_roots": roots.map(output::paths_json),
            "results": results.iter().map(|o| outcome_json(o, &args.include_dirs)).collect::<Vec<_>>(),
            "failed": failed,
        }))?;
    } else {
        for o in &results {
            if let Ok((built, written)) = &o.result {
                print_built(&o.file, built, written);
            }
        }
    }
    if failed > 0 {
        return Err(CliError {
            status: output::EXIT_FAILED,
            message: if n > 1 {
                format!("{failed} of {n} files failed")
            } else {
                String::new()
            },
        });
    }
    Ok(())
}

fn print_built(file: &Path, built: &[Built], written: &[PathBuf]) {
    for b in built {
        println!(
            "{}: {} in {}, key {}",
            file.display(),
            origin_name(b.origin),
            output::ms(b.elapsed),
            b.key
        );
    }
    for w in written {
        println!("  wrote {}", w.display());
    }
    for b in built {
        println!(
            "  target {}: cubin (ELF ABI version {}), {} kernel(s)",
            b.sm,
            b.cubin.abi_version(),
            b.cubin.kernels().len()
        );
        for k in b.cubin.kernels() {
            print!("{}", output::cubin_kernel_text(k, 4));
        }
    }
}

/// The paths a diagnostic of `o` may name: the input, its directory and the include
/// directories.
fn diagnostic_paths<'a>(o: &'a Outcome, include_dirs: &'a [PathBuf]) -> Vec<&'a Path> {
    let mut paths = vec![o.file.as_path()];
    paths.extend(o.file.parent().filter(|d| !d.as_os_str().is_empty()));
    paths.extend(include_dirs.iter().map(PathBuf::as_path));
    paths
}

fn outcome_json(o: &Outcome, include_dirs: &[PathBuf]) -> serde_json::Value {
    let diagnostics = output::diagnostics_json(&o.diagnostics, &diagnostic_paths(o, include_dirs));
    match &o.result {
        Ok((built, written)) => {
            let first = &built[0];
            serde_json::json!({
                "file": output::path_json(&o.file),
                "ok": true,
                "diagnostics": diagnostics,
                "cache": cache_name(first.origin),
                "hit": built.iter().all(|b| b.origin != NvOrigin::Compiled),
                "time_ms": built.iter().map(|b| b.elapsed.as_secs_f64() * 1000.0).sum::<f64>(),
                "key": first.key,
                "entry": first.entry.as_ref().map(output::path_json),
                "written": output::paths_json(written),
                "code_objects": built.iter().map(|b| serde_json::json!({
                    "target_id": b.sm.to_string(),
                    "elf_abi_version": b.cubin.abi_version(),
                    "cache": cache_name(b.origin),
                    "key": b.key,
                    "entry": b.entry.as_ref().map(output::path_json),
                    "kernels": b.cubin.kernels().iter().map(output::cubin_kernel_json).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        }
        Err(e) => serde_json::json!({
            "file": output::path_json(&o.file),
            "ok": false,
            "error": e,
            "diagnostics": diagnostics,
        }),
    }
}
