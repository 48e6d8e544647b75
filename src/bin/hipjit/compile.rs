//! `hipjit compile FILE... --arch T [-D..] [-I..] [-O..] [--std c++NN] [--cflag FLAG]... [-o OUT]
//! [-j N] [--json] [-- FLAG...]`: HIP sources to code objects through hipjit's JIT and its disk
//! cache (`HIPJIT_CACHE_DIR`).
//!
//! Sources are read as bytes (any encoding the compiler accepts) and keyed by those bytes. The
//! standard is C++17 unless `--std` (or `-std=c++NN`) says otherwise. Extra compiler flags
//! (`--cflag FLAG`, repeatable, and every word after `--`) go to the compiler after hipjit's
//! own and into the cache key; flags that change the output, target or dependency output, or
//! make the compiler read files the key does not see, are a usage error naming the flag and
//! the compiler (`hipjit::compiler::flags`).
//!
//! Diagnostics: every warning and error as the compiler printed it (include chain, notes,
//! source line and caret) with the user's own paths, on stderr; a cache hit replays the
//! warnings recorded when it was compiled. With `--json`, each result carries `diagnostics[]`
//! (see `Args::json`).
//!
//! Each source is compiled on its own (as `hipjit::jit::Jit::compile` does for a string), with
//! the directory holding it added after the `-I` directories so that `#include "x.h"` next to
//! it is found. Results are printed in the order of the inputs once all are done; while they
//! run, a progress bar (a terminal) or one line per finished file (otherwise) goes to stderr.
//!
//! Outputs (`-o`), written atomically (a temporary file in the same directory, then `rename`):
//! - one target: one raw ELF code object per input; `-o` names the file for one input (as with
//!   cc: an existing directory there is refused, and a missing parent directory is an error,
//!   never created), and a directory (created when missing) for several inputs, which get
//!   `<stem>.hsaco`;
//! - several targets: one code object per input and target, `<stem>-<target>.hsaco` (`:` in the
//!   target ID written `_`) in the directory `-o` names.
//!
//! As with cc, an output that is an input file (by device and inode, however spelled) or that
//! exists as a directory, FIFO, socket or block device is refused by name (exit status 2); a
//! character device such as `/dev/null` is written into, never replaced; a symbolic link's
//! target is replaced, not the link.
//!
//! Without `-o`, nothing is written besides the cache entry.
//!
//! NVIDIA targets (`--arch sm_90`, `sm_90a`: HIP's NVIDIA platform) compile through the same
//! `hipjit::jit::Jit` and disk cache, with nvcc, one compile per SM target (a cubin holds code
//! for one); outputs are named `.cubin`, diagnostics are nvcc's (no column). AMDGPU and NVIDIA
//! targets in one invocation are a usage error: the two platforms have separate compilers.
//! `--code-object-version` is an AMDGPU notion (a usage error with `sm_` targets), and so are
//! `-O s` and `-O z` (nvcc takes -O0 to -O3).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use hipjit::compiler::cancel::CancelToken;
use hipjit::compiler::diagnostics::{self, Diagnostic, Layout};
use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::worker::{WorkerConfig, WorkerPool};
use hipjit::compiler::{
    is_valid_source_name, CompileError, CompileOptions, CompilerConfig, CompilerKind, OptionsError,
};
use hipjit::jit::{Artefact, Compiled, CompilerUsed, Jit, JitError, JitOptions, Origin};

use crate::output::{self, CliError};
use crate::request::{check_options, targets_text, JobsArg, RequestArgs};

/// Arguments of `hipjit compile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HIP C++ source files: regular files of at most 64 MiB, or `-` / /dev/stdin for
    /// standard input (FIFOs and devices are refused).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The request: targets, defines, include directories, level, standard, flags, code
    /// object version, compiler.
    #[command(flatten)]
    pub request: RequestArgs,
    /// Extra compiler flags: every word after `--`.
    #[arg(last = true, value_name = "FLAG")]
    pub trailing_flags: Vec<String>,
    /// Write the code object(s): a file for one input and one target (its directory must
    /// exist; an existing directory is refused), else a directory (created when missing).
    #[arg(short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Compile at most N at once.
    #[command(flatten)]
    pub jobs: JobsArg,
    /// Print JSON (with "schema_version": 2) instead of text. Keys: platform ("amd" or
    /// "nvidia"), compiler {kind ("hipcc", "hiprtc", "nvcc", "nvrtc"), path, version, reason
    /// (why that compiler)} of the first result, std, extra_flags, cache_roots, failed (count),
    /// results[]: file, ok, diagnostics[], then compiler {kind, path, version, reason}, cache ("miss", "disk", "memory"), hit,
    /// time_ms, key, entry, written, cache_warnings[] (what went wrong with the disk cache
    /// without failing the compile: an entry not published, a lock wait given up),
    /// code_objects[] {target_id, code_object_version, kernels}
    /// (NVIDIA: {target_id, elf_abi_version, cache, key, entry, kernels[] {name, symbol,
    /// params[] {index, offset, size}, param_size, registers: null}}); or error. A diagnostic:
    /// {severity ("fatal", "error", "warning", "note", "remark"), file, line, column (null
    /// when the compiler gives none: nvcc), message, notes[] (diagnostics), included_from[]
    /// {file, line} (outermost first), excerpt[] (source line, caret), and escaped (only
    /// when the compiler's text was not UTF-8: that text with bytes as \xNN)}. A path is a
    /// string, or {text, hex} when it is not UTF-8.
    #[arg(long)]
    pub json: bool,
    /// Run the compiler again for a source whose compile failure the cache remembers (else
    /// the same error is returned at once until the source, options, headers or compiler
    /// change; also HIPJIT_RETRY_FAILED=1).
    #[arg(long)]
    pub retry_failed: bool,
}

/// The command line with `-std=X` (clang's and nvcc's spelling) written `--std=X` for
/// `hipjit compile`, before `--`, so that clang's argument parser takes it.
pub fn normalize_args(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.get(1).is_none_or(|a| a != "compile") {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut after_dashes = false;
    for a in args {
        if a == "--" {
            after_dashes = true;
        }
        match a.to_str().and_then(|s| s.strip_prefix("-std=")) {
            Some(v) if !after_dashes => out.push(format!("--std={v}").into()),
            _ => out.push(a),
        }
    }
    out
}

/// The extra flags of `args`: `--cflag` values, then the words after `--`.
pub(crate) fn extra_flags(args: &Args) -> Vec<String> {
    args.request
        .cflags
        .iter()
        .chain(&args.trailing_flags)
        .cloned()
        .collect()
}

/// Where one input's code objects go (one path per target), if anywhere; `ext` is the file
/// extension (`hsaco`, `cubin`).
pub(crate) fn output_paths(args: &Args, ext: &str) -> Result<Vec<Vec<PathBuf>>, CliError> {
    let Some(out) = &args.output else {
        return Ok(vec![Vec::new(); args.files.len()]);
    };
    let stems: Vec<String> = args
        .files
        .iter()
        .map(|f| {
            f.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "kernel".into())
        })
        .collect();
    if !output_is_dir(args) {
        // As with cc, `-o` names the file: an existing directory is refused by
        // `check_outputs`, and so is a missing parent directory (never created).
        if out.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(CliError::usage(format!(
                "-o {}: with one input and one target, -o names a file, not a directory",
                out.display()
            )));
        }
        let parent = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        match std::fs::metadata(parent) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                return Err(CliError::usage(format!(
                    "-o {}: {} is a {}, not a directory",
                    out.display(),
                    parent.display(),
                    hipjit::file_read::kind_name(m.file_type())
                )))
            }
            Err(e) => {
                return Err(CliError::usage(format!(
                    "-o {}: the directory {} does not exist ({e})",
                    out.display(),
                    parent.display()
                )))
            }
        }
        let outs = vec![vec![out.clone()]];
        check_outputs(args, &outs)?;
        return Ok(outs);
    }
    if out.exists() && !out.is_dir() {
        return Err(CliError::usage(format!(
            "-o {}: with {} inputs and {} targets, -o names a directory, but this is a file",
            out.display(),
            args.files.len(),
            args.request.targets.len()
        )));
    }
    for (i, s) in stems.iter().enumerate() {
        if let Some(j) = stems[..i].iter().position(|t| t == s) {
            return Err(CliError::usage(format!(
                "{} and {} would both be written to {}: rename one or compile them separately",
                args.files[j].display(),
                args.files[i].display(),
                out.join(format!("{s}.{ext}")).display()
            )));
        }
    }
    let outs: Vec<Vec<PathBuf>> = stems
        .iter()
        .map(|s| {
            if args.request.targets.len() == 1 {
                vec![out.join(format!("{s}.{ext}"))]
            } else {
                args.request
                    .targets
                    .iter()
                    .map(|t| out.join(format!("{s}-{}.{ext}", t.to_string().replace(':', "_"))))
                    .collect()
            }
        })
        .collect();
    check_outputs(args, &outs)?;
    Ok(outs)
}

/// Whether `-o` names a directory (several inputs or several targets) rather than the one
/// output file. Only such a directory is created when missing.
pub(crate) fn output_is_dir(args: &Args) -> bool {
    !(args.files.len() == 1 && args.request.targets.len() == 1)
}

/// Refuses, as cc does, outputs that must not be written: one that is an input file (by device
/// and inode, whatever the spelling), and one that exists as something other than a regular
/// file or a character device (a directory, FIFO, socket or block device). A character device
/// such as `/dev/null` is written into, never replaced.
fn check_outputs(args: &Args, outs: &[Vec<PathBuf>]) -> Result<(), CliError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let inputs: Vec<(u64, u64, &PathBuf)> = args
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok().map(|m| (m.dev(), m.ino(), f)))
        .collect();
    for out in outs.iter().flatten() {
        let Ok(m) = std::fs::metadata(out) else {
            continue;
        };
        if let Some((_, _, input)) = inputs
            .iter()
            .find(|(dev, ino, _)| *dev == m.dev() && *ino == m.ino())
        {
            return Err(CliError::usage(format!(
                "-o {}: this is the input file {}; refusing to overwrite it",
                out.display(),
                input.display()
            )));
        }
        let t = m.file_type();
        if !(t.is_file() || t.is_char_device()) {
            return Err(CliError::usage(format!(
                "-o {}: exists and is a {}, not a regular file; refusing to write there",
                out.display(),
                hipjit::file_read::kind_name(t)
            )));
        }
    }
    Ok(())
}

/// Writes a code object to `path` by the rules of `hipjit::file_write` (atomically; a symbolic
/// link followed, a character device written into, nothing else that is not a regular file
/// replaced), readable by all as a compiler writes it.
///
/// `create_dir`: create the parent directory when missing (the directory `-o` names for
/// several inputs or targets); otherwise a missing parent is an error, as with cc.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8], create_dir: bool) -> Result<(), String> {
    hipjit::file_write::write_atomically(path, bytes, create_dir, 0o644).map_err(|e| e.to_string())
}

/// Removes, as cc does after a failed compile, each of `paths` that is a regular file once
/// symbolic links are followed (a link is removed itself, its target left alone), so that an
/// older output never passes for the result of a run that failed. A character device such as
/// `/dev/null`, a missing path and anything else are left alone; the outputs `check_outputs`
/// refused never get here (the command stops before compiling). A removal that fails is
/// ignored: the run fails anyway, and says why.
pub(crate) fn remove_failed_outputs(paths: &[PathBuf]) {
    for p in paths {
        if std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What became of one input.
struct Outcome {
    file: PathBuf,
    /// The results (one for AMDGPU targets, one per SM target) and the files written.
    result: Result<(Vec<Compiled>, Vec<PathBuf>), String>,
    /// The compiler's diagnostics (warnings of a success, everything of a failure), file names
    /// as the user gave them.
    diagnostics: Vec<Diagnostic>,
}

/// `diags` with the build directory's source name replaced by the user's path, everywhere
/// (notes and include chains too).
pub(crate) fn user_diagnostics(
    file: &Path,
    source_name: &str,
    diags: &[Diagnostic],
) -> Vec<Diagnostic> {
    let user = file.display().to_string();
    diags
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.rename_files(&|f: &str| (f == source_name).then(|| user.clone()));
            d
        })
        .collect()
}

/// The diagnostics a failed compile carries, if any.
fn failure_diagnostics(e: &JitError) -> &[Diagnostic] {
    e.diagnostics()
}

pub(crate) fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Memory => "hit (memory)",
        Origin::Disk => "hit (disk)",
        Origin::Remote => "hit (remote)",
        Origin::Compiler => "miss (compiled)",
        Origin::Frozen => "hit (frozen bundle)",
    }
}

/// The message for a failed compile: the file, the targets, and every diagnostic of the
/// compiler as it printed them (user paths), or the JIT's error when it has none.
pub(crate) fn error_text(
    file: &Path,
    targets: &str,
    e: &dyn std::fmt::Display,
    failed: bool,
    diags: &[Diagnostic],
    layout: Layout,
) -> String {
    let mut s = format!("{} (target {targets}): ", file.display());
    if failed && diags.iter().any(Diagnostic::is_error) {
        s.push_str("compile failed:\n");
        s.push_str(diagnostics::render_all_as(diags, layout).trim_end());
    } else {
        s.push_str(&e.to_string());
    }
    s
}

/// `base` as `hipjit compile` compiles `file` with it: the source keeps its file name (when the
/// compiler stage accepts it; else `kernel.hip`), and its directory is searched last.
pub(crate) fn options_for_file(base: &CompileOptions, file: &Path) -> CompileOptions {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut o = base.clone();
    if is_valid_source_name(&name) {
        o.source_name = Some(name);
    }
    o.include_dirs.push(dir.to_path_buf());
    o
}

fn compile_one(
    jit: &Jit,
    args: &Args,
    bases: &[CompileOptions],
    file: &Path,
    outs: &[PathBuf],
) -> Outcome {
    let fail = |m: String| Outcome {
        file: file.to_path_buf(),
        result: Err(m),
        diagnostics: Vec::new(),
    };
    let source = match read_source(file) {
        Ok(s) => s,
        Err(m) => return fail(m),
    };
    let mut results = Vec::new();
    let mut written = Vec::new();
    let mut warnings = Vec::new();
    let mut out_index = 0;
    for base in bases {
        let o = options_for_file(base, file);
        let targets = o.target_names().join(", ");
        let layout = if o.sm_targets.is_empty() {
            Layout::Clang
        } else {
            Layout::Nvcc
        };
        let c = match jit.compile(&source, &o) {
            Ok(c) => c,
            Err(e) => {
                let diagnostics =
                    user_diagnostics(file, o.source_file_name(), failure_diagnostics(&e));
                let failed = matches!(
                    &e,
                    JitError::Compile(CompileError::Failed(_))
                        | JitError::Compile(CompileError::Nvcc(_))
                        | JitError::Compile(CompileError::InProcess(_))
                );
                return Outcome {
                    file: file.to_path_buf(),
                    result: Err(error_text(file, &targets, &e, failed, &diagnostics, layout)),
                    diagnostics,
                };
            }
        };
        for a in c.artefacts() {
            let Some(path) = outs.get(out_index) else {
                break;
            };
            out_index += 1;
            if let Err(e) = write_atomically(path, a.elf(), output_is_dir(args)) {
                return fail(format!(
                    "{} (target {}): {e}",
                    file.display(),
                    a.target_name()
                ));
            }
            written.push(path.clone());
        }
        if c.artefacts().len() != o.target_names().len() {
            return fail(format!(
                "{}: the compiler returned {} code objects for {} targets",
                file.display(),
                c.artefacts().len(),
                o.target_names().len()
            ));
        }
        warnings.extend(user_diagnostics(
            file,
            o.source_file_name(),
            c.diagnostics(),
        ));
        results.push(c);
    }
    // One SM target after another report the same warnings: say them once.
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for d in warnings {
        if !diagnostics.contains(&d) {
            diagnostics.push(d);
        }
    }
    Outcome {
        file: file.to_path_buf(),
        result: Ok((results, written)),
        diagnostics,
    }
}

/// How the compilers run for `jobs` compiles at once over `inputs` inputs: at most `jobs`
/// compiler processes, and with more than one of each, hipRTC and NVRTC in worker processes
/// of this command (`hipjit rtc-worker --serve`, [`hipjit::compiler::worker`]): in one process
/// hipRTC compiles one program at a time, and a worker adds the compile timeout and crash
/// isolation. The workers are kept in one pool for the whole run (at most `jobs` of them,
/// [`WorkerPool::bounded`], each serving many files), so hipRTC starts once a worker, not once
/// a file.
pub(crate) fn compiler_config(jobs: usize, inputs: usize) -> CompilerConfig {
    CompilerConfig {
        max_concurrent: jobs,
        rtc_worker: (jobs > 1 && inputs > 1).then(|| WorkerConfig {
            program: std::env::current_exe().ok(),
            pool: WorkerPool::bounded(jobs),
            ..WorkerConfig::default()
        }),
        ..CompilerConfig::default()
    }
}

/// How many threads run `inputs` requests with `jobs` compiles at once: `jobs`, and one more
/// where every compile is held to `jobs` at once by one and the same bound ([`one_bound`]), so
/// that while the workers compile, a thread publishes the last result and keys its next
/// request, and a worker that answers gets that request at once instead of waiting for its
/// thread's publishing (measured: 2 to 4 ms a request on a 2-core machine, often until the
/// next scheduler tick; docs/performance.md, "`cache warm -j 2` against `compile -j 2`").
/// With one job nothing runs beside the compile: `jobs` threads.
pub(crate) fn threads_for(jobs: usize, inputs: usize, one_bound: bool) -> usize {
    let extra = usize::from(jobs > 1 && inputs > jobs && one_bound);
    (jobs + extra).min(inputs)
}

/// Whether one bound of `jobs` holds every compile of the JITs whose compiler choices are
/// `choices` (one item a JIT, all made with [`compiler_config`]'s config): hipRTC and NVRTC
/// alone (the workers of the one bounded pool that config shares), or one JIT of hipcc (its
/// slots). Not nvcc (no bound), not Auto (hipRTC's workers and hipcc's slots, two bounds of
/// `jobs` each, or nvcc), not several JITs of hipcc (each its own slots): with a thread more
/// than `jobs`, each of those could run `jobs` + 1 compiles at once.
pub(crate) fn one_bound(choices: &[CompilerChoice]) -> bool {
    let worker = |c: &CompilerChoice| {
        matches!(
            c,
            CompilerChoice::Kind(CompilerKind::HipRtc | CompilerKind::Nvrtc)
        )
    };
    choices.iter().all(worker) || choices == [CompilerChoice::Kind(CompilerKind::Hipcc)]
}

/// Runs `hipjit compile`.
///
/// Errors: exit status 2 for bad options (a malformed define, an `-o` that cannot hold the
/// outputs), 1 when the compiler cannot be found or any input fails (each failure is printed
/// on stderr as it is known, the others' results still on stdout).
pub fn run(args: &Args) -> Result<(), CliError> {
    let (base, nvidia) = args.request.options(extra_flags(args))?;
    let on_nvidia = !nvidia.is_empty();
    let outs = output_paths(args, if on_nvidia { "cubin" } else { "hsaco" })?;
    // One compile per SM target (a cubin holds one), one for all AMDGPU targets.
    let bases: Vec<CompileOptions> = if on_nvidia {
        nvidia
            .iter()
            .map(|sm| CompileOptions {
                sm_targets: vec![*sm],
                ..base.clone()
            })
            .collect()
    } else {
        vec![base.clone()]
    };
    let refused_flag = check_options(&bases[0], &targets_text(&args.request.targets))?;
    let jobs = args.jobs.get();
    // From here on, SIGINT/SIGTERM/SIGHUP cancel the compiles (their compilers killed, their
    // build directories removed) and the command exits 128 + the signal's number.
    let cancel = CancelToken::new();
    let interrupts = crate::interrupt::Interrupts::install(&cancel).map_err(CliError::failed)?;
    let jit = cancel
        .scope(|| {
            Jit::new(JitOptions {
                compiler: args.request.compiler,
                compiler_config: compiler_config(jobs, args.files.len()),
                retry_failed: args.retry_failed,
                ..JitOptions::default()
            })
        })
        .map_err(|e| match (interrupts.finish(), environment_error(&e)) {
            (Some(sig), _) => interrupted(sig),
            (None, Some(usage)) => usage,
            (None, None) => {
                remove_failed_outputs(&outs.concat());
                CliError::failed(e.to_string())
            }
        })?;

    if let Some(e) = refused_flag {
        // The flag's error names the flag and the compiler; the targets add nothing. The
        // compiler is the one the first input would get (Auto decides by the source; standard
        // input is not read twice).
        let first = args
            .files
            .first()
            .filter(|f| !(f.as_os_str() == "-" || f.as_os_str() == "/dev/stdin"))
            .and_then(|f| read_source(f).ok())
            .unwrap_or_default();
        return Err(refused_flag_error(&jit, &first, &bases[0], e));
    }

    let n = args.files.len();
    let bar = (n > 1 && !args.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(n as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} {elapsed} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    });
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..n).map(|_| None).collect());
    let threads = threads_for(jobs, n, one_bound(&[jit.compiler_choice()]));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                cancel.scope(|| loop {
                    if cancel.is_cancelled() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let outcome = compile_one(&jit, args, &bases, &args.files[i], &outs[i]);
                    // A compile the signal came during (an in-process compiler runs to its end)
                    // counts as not compiled: its output, written after the signal, goes.
                    if cancel.is_cancelled() {
                        remove_failed_outputs(&outs[i]);
                        break;
                    }
                    let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                    let line = match &outcome.result {
                        Ok((c, _)) => format!(
                            "{}: {} in {}",
                            outcome.file.display(),
                            origin_name(c[0].origin()),
                            output::ms(c.iter().map(Compiled::elapsed).sum())
                        ),
                        Err(_) => format!("{}: failed", outcome.file.display()),
                    };
                    if let Ok((c, _)) = &outcome.result {
                        // A cache that could not be written is said, in text and JSON runs alike.
                        for w in c.iter().flat_map(Compiled::cache_warnings) {
                            let text = format!("hipjit: warning: {}: {w}", outcome.file.display());
                            match &bar {
                                Some(b) => b.suspend(|| eprintln!("{text}")),
                                None => eprintln!("{text}"),
                            }
                        }
                    }
                    if outcome.result.is_ok() && !outcome.diagnostics.is_empty() {
                        // The warnings, as the compiler printed them, with the user's paths.
                        let text = diagnostics::render_all_as(
                            &outcome.diagnostics,
                            if on_nvidia {
                                Layout::Nvcc
                            } else {
                                Layout::Clang
                            },
                        );
                        let text = text.trim_end();
                        match &bar {
                            Some(b) => b.suspend(|| eprintln!("{text}")),
                            None => eprintln!("{text}"),
                        }
                    }
                    // A compile the signal cancelled is no error of its own.
                    if let (Err(e), false) = (&outcome.result, cancel.is_cancelled()) {
                        match &bar {
                            Some(b) => b.suspend(|| eprintln!("hipjit: error: {e}")),
                            None => eprintln!("hipjit: error: {e}"),
                        }
                    }
                    match &bar {
                        Some(b) => {
                            b.set_message(line);
                            b.inc(1);
                        }
                        None if n > 1 => eprintln!("[{k}/{n}] {line}"),
                        None => {}
                    }
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(outcome);
                    }
                })
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let results = results.into_inner().unwrap_or_default();
    // As cc does: an input that failed (or was never compiled) leaves no output behind, so
    // that an older file at that path cannot pass for this run's result.
    for (i, o) in results.iter().enumerate() {
        if o.as_ref().is_none_or(|o| o.result.is_err()) {
            remove_failed_outputs(&outs[i]);
        }
    }
    if let Some(sig) = interrupts.finish() {
        return Err(interrupted(sig));
    }
    let results: Vec<Outcome> = results.into_iter().flatten().collect();
    let failed = results.iter().filter(|o| o.result.is_err()).count();
    if args.json {
        // The compiler of the first result (all inputs of one invocation share it), else the
        // one the JIT would run.
        let used = results
            .iter()
            .find_map(|o| o.result.as_ref().ok().map(|(c, _)| c[0].compiler().clone()))
            .or_else(|| jit.compiler_for(b"", &bases[0]).ok().map(|c| c.used()));
        let list: Vec<serde_json::Value> = results
            .iter()
            .map(|o| outcome_json(o, &args.request.include_dirs))
            .collect();
        output::print_json_versioned(
            serde_json::json!({
                "platform": if on_nvidia { "nvidia" } else { "amd" },
                "compiler": used.as_ref().map(compiler_json),
                "std": base.std.to_string(),
                "extra_flags": base.extra_flags,
                "cache_roots": jit.disk_cache().map(|d| output::paths_json(d.roots().iter().map(|r| &r.path))),
                "results": list,
                "failed": failed,
            }),
            output::COMPILE_SCHEMA_VERSION,
        )?;
    } else {
        for o in &results {
            if let Ok((c, written)) = &o.result {
                print_compiled(&o.file, c, written);
            }
        }
    }
    if failed > 0 {
        // Each failure was printed on stderr as it happened.
        let msg = if n > 1 {
            format!("{failed} of {n} files failed")
        } else {
            String::new()
        };
        return Err(CliError {
            status: output::EXIT_FAILED,
            message: msg,
        });
    }
    Ok(())
}

/// The usage error (exit status 2) for a flag `options` refuses, naming the compiler `jit`
/// would run for `source` (or none, when that compiler cannot be found).
pub(crate) fn refused_flag_error(
    jit: &Jit,
    source: &[u8],
    options: &CompileOptions,
    e: OptionsError,
) -> CliError {
    let e = match jit.compiler_for(source, options) {
        Ok(c) => e.for_backend(c.backend.kind()),
        Err(_) => e,
    };
    CliError::usage(e.to_string())
}

/// The usage error (exit status 2) for a JIT that could not be made because an environment
/// variable holds a value outside those it takes (`HIPJIT_COMPILER`, `HIPJIT_REMOTE_CACHE`,
/// `HIPJIT_REMOTE_CACHE_KEY`), naming the variable and what it takes; `None` for the other
/// errors (the work failed: exit status 1).
pub(crate) fn environment_error(e: &JitError) -> Option<CliError> {
    use hipjit::cache::remote::{RemoteConfigError, REMOTE_CACHE_ENV};
    use hipjit::compiler::CompilerError;
    match e {
        JitError::Compiler(CompilerError::Choice(c)) => Some(CliError::usage(format!(
            "{}={:?}: not a compiler; it takes {}",
            hipjit::compiler::selection::COMPILER_ENV,
            c.0,
            hipjit::compiler::kind::choices_listed()
        ))),
        JitError::RemoteConfig(r @ RemoteConfigError::BadUrl { .. }) => {
            Some(CliError::usage(format!("{REMOTE_CACHE_ENV}: {r}")))
        }
        // Names HIPJIT_REMOTE_CACHE_KEY and the length it takes.
        JitError::RemoteConfig(r @ RemoteConfigError::ShortKey { .. }) => {
            Some(CliError::usage(r.to_string()))
        }
        _ => None,
    }
}

/// The error of a run that `sig` interrupted: exit status 128 + its number.
pub(crate) fn interrupted(sig: i32) -> CliError {
    CliError {
        status: 128 + sig as u8,
        message: format!(
            "interrupted by {}: the compilers were stopped and their temporary files removed; \
             no output of an unfinished file was written",
            crate::interrupt::signal_name(sig)
        ),
    }
}

fn print_compiled(file: &Path, results: &[Compiled], written: &[PathBuf]) {
    for c in results {
        println!(
            "{}: {} in {}, key {}",
            file.display(),
            origin_name(c.origin()),
            output::ms(c.elapsed()),
            c.key()
        );
    }
    for w in written {
        println!("  wrote {}", w.display());
    }
    if let Some(c) = results.first() {
        let u = c.compiler();
        println!(
            "  compiler {} {} ({}): {}",
            u.kind.as_str(),
            u.path.display(),
            u.version,
            u.reason
        );
    }
    for c in results {
        for a in c.artefacts() {
            match a {
                Artefact::CodeObject(co) => {
                    println!(
                        "  target {}: code object v{}, {} kernel(s)",
                        co.target_id(),
                        co.code_object_version(),
                        co.kernels().len()
                    );
                    for k in co.kernels() {
                        print!("{}", output::kernel_text(k, 4));
                    }
                }
                Artefact::Cubin(cubin) => {
                    println!(
                        "  target {}: cubin (ELF ABI version {}), {} kernel(s)",
                        c.targets().first().map_or("?", String::as_str),
                        cubin.abi_version(),
                        cubin.kernels().len()
                    );
                    for k in cubin.kernels() {
                        print!("{}", output::cubin_kernel_text(k, 4));
                    }
                }
            }
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

/// `{"kind", "path", "version", "reason"}` of a result's compiler.
pub(crate) fn compiler_json(u: &CompilerUsed) -> serde_json::Value {
    serde_json::json!({
        "kind": u.kind.as_str(),
        "path": output::path_json(&u.path),
        "version": u.version,
        "reason": u.reason,
    })
}

fn outcome_json(o: &Outcome, include_dirs: &[PathBuf]) -> serde_json::Value {
    let diagnostics = output::diagnostics_json(&o.diagnostics, &diagnostic_paths(o, include_dirs));
    let cache = |c: &Compiled| match c.origin() {
        Origin::Memory => "memory",
        Origin::Disk => "disk",
        Origin::Remote => "remote",
        Origin::Compiler => "miss",
        Origin::Frozen => "frozen",
    };
    match &o.result {
        Ok((results, written)) => {
            let c = &results[0];
            let code_objects: Vec<serde_json::Value> = results
                .iter()
                .flat_map(|c| c.artefacts().iter().map(move |a| (c, a)))
                .map(|(c, a)| match a {
                    Artefact::CodeObject(co) => serde_json::json!({
                        "target_id": co.target_id().to_string(),
                        "code_object_version": co.code_object_version(),
                        "kernels": co.kernels().iter().map(output::kernel_json).collect::<Vec<_>>(),
                    }),
                    Artefact::Cubin(cubin) => serde_json::json!({
                        "target_id": c.targets().first(),
                        "elf_abi_version": cubin.abi_version(),
                        "cache": cache(c),
                        "key": c.key().to_hex(),
                        "entry": c.entry_path().map(output::path_json),
                        "kernels": cubin.kernels().iter().map(output::cubin_kernel_json).collect::<Vec<_>>(),
                    }),
                })
                .collect();
            serde_json::json!({
                "file": output::path_json(&o.file),
                "ok": true,
                "diagnostics": diagnostics,
                "compiler": compiler_json(c.compiler()),
                "cache": cache(c),
                "hit": results.iter().all(Compiled::is_hit),
                "time_ms": results.iter().map(|c| c.elapsed().as_secs_f64() * 1000.0).sum::<f64>(),
                "key": c.key().to_hex(),
                "entry": c.entry_path().map(output::path_json),
                "written": output::paths_json(written),
                "cache_warnings": results.iter().flat_map(Compiled::cache_warnings).collect::<Vec<_>>(),
                "code_objects": code_objects,
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

/// The bytes of `file` (any encoding: the compiler decides what it accepts), or a message
/// naming the file and why it cannot be read (unreadable, not a regular file or standard input,
/// larger than `hipjit::file_read::SOURCE_LIMIT`).
pub fn read_source(file: &Path) -> Result<Vec<u8>, String> {
    use hipjit::file_read::{read_file, Streams, SOURCE_LIMIT};
    read_file(file, SOURCE_LIMIT, "a source", Streams::Stdin)
        .map_err(|e| format!("{}: cannot read the file: {}", file.display(), e.reason()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_more_than_the_jobs_only_where_one_bound_holds_every_compile() {
        let kind = CompilerChoice::Kind;
        let (hipcc, hiprtc, nvrtc) = (
            kind(CompilerKind::Hipcc),
            kind(CompilerKind::HipRtc),
            kind(CompilerKind::Nvrtc),
        );
        // The workers' one pool.
        assert!(one_bound(&[hiprtc]));
        assert!(one_bound(&[hiprtc, nvrtc]));
        // One hipcc's slots.
        assert!(one_bound(&[hipcc]));
        // Two bounds (two hipccs' slots, or hipcc's beside the pool), or none (nvcc).
        assert!(!one_bound(&[hipcc, hipcc]));
        assert!(!one_bound(&[hipcc, hiprtc]));
        assert!(!one_bound(&[CompilerChoice::Auto]));
        assert!(!one_bound(&[kind(CompilerKind::Nvcc)]));
        assert_eq!(threads_for(2, 6, true), 3);
        assert_eq!(threads_for(2, 6, false), 2);
        assert_eq!(threads_for(1, 6, true), 1);
        assert_eq!(threads_for(2, 2, true), 2);
        assert_eq!(threads_for(4, 3, true), 3);
    }
}
